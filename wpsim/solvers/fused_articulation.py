"""The fused articulation step: one launch per step (``kernels.articulation_step``) instead of
the staged pipeline's seven, several steps per launch for unrecorded runs, a backward of
three launches per recorded step, and the articulations split over CPU threads."""

from __future__ import annotations

import copy
import os

import numpy as np
import warp as wp

from wpsim.core.model import row_views
from wpsim.core.tape import active_tape
from wpsim.kernels import articulation_step
from wpsim.kernels.generic import for_precision
from wpsim.solvers.articulation import cholesky_adjoint_launch, penalty_shape_fields
from wpsim.solvers.base import KernelLaunch
from wpsim.solvers.cpu_workers import WORKERS
from wpsim.solvers.kinematics import ArticulationScratch
from wpsim.solvers.prepared_launch import PREPARED_LAUNCHES, PreparedLaunch
from wpsim.solvers.soft_contact import articulation_worlds

CUDA_MAX_DOFS = 16
"""On CUDA the fused step is chosen automatically only for articulations of at most this many
dofs (one thread walks a whole tree; the staged kernels spread larger trees over threads).
Measured on an H200 (benchmarks/records/h200_2026-12-04): the 7-dof arm fused runs 3.1x the
staged world-steps/s at 64 worlds; the 18-dof quadruped fused runs 0.83x staged at 4,096
worlds and 1.07x at 16,384, so about where the two meet."""
SYSTEM_BLOCK_BYTES = 4 << 20
SYSTEM_BLOCK_STEPS = 64
"""Recorded steps' joint-space systems are allocated for up to this many steps (and bytes) at
once (``FusedArticulationStep._step_system``)."""
MIN_ARTICULATIONS_PER_THREAD = 8
"""Unrecorded CPU launches are split over threads only when every thread gets at least this
many articulations (handing a launch to a thread costs about as much as stepping a few)."""


def fused_step_unsuitable(model, broad_phase, soft_contact: bool = False) -> str | None:
    """Why the fused step cannot step ``model`` (a sentence), or None when it can: it steps
    articulations alone, with penalty contact whose pairs each touch one articulation
    (``soft_contact``: the soft-constraint contact's own terms,
    ``fused_soft_contact.fused_soft_contact_unsuitable``, decide on the pairs and the joint
    couplings)."""
    if model.body_count == 0:
        return "the model has no rigid bodies"
    if model.particle_count:
        return "particles couple to the bodies between the step's stages"
    if broad_phase is not None:
        return "a per-step broad phase lists the contact pairs"
    if model.connection_count:
        return "body connections join articulations' systems"
    if model.coupling_count and not soft_contact:
        return "joint couplings join the dofs' systems (the fused soft-contact step takes them)"
    if model.tendon_count:
        return "spatial tendons are stepped by the staged launches"
    if not soft_contact and contact_pairs_by_articulation(model) is None:
        return "a contact pair joins two articulations"
    return None


def contact_pairs_by_articulation(model) -> tuple | None:
    """(pairs (P, 2), start (A+1,)): the candidate contact pairs with a body, grouped by the
    articulation they touch (stable: each articulation keeps the model's pair order), or
    None when a pair touches two articulations."""
    pairs = model.contact_pair.numpy().reshape(-1, 2)
    shape_body = model.shape_body.numpy()
    body_articulation = model.joint_articulation.numpy()[model.body_joint.numpy()]
    sides = np.where(shape_body[pairs] >= 0, body_articulation[shape_body[pairs]], -1)
    if np.any((sides[:, 0] >= 0) & (sides[:, 1] >= 0) & (sides[:, 0] != sides[:, 1])):
        return None
    owner = sides.max(axis=1)
    kept = owner >= 0
    order = np.argsort(owner[kept], kind="stable")
    grouped = pairs[kept][order]
    counts = np.bincount(owner[kept], minlength=model.articulation_count)
    return grouped, np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def arrays_in_one_buffer(likes: list, device) -> tuple:
    """(buffer, views): one zeroed byte buffer and, for each of ``likes``, an array of its dtype
    and shape that is a view into it, so that one ``zero_()`` of the buffer zeroes them all."""
    alignment = 16
    offsets, size = [], 0
    for a in likes:
        offsets.append(size)
        size += -(-a.capacity // alignment) * alignment
    buffer = wp.zeros(max(size, alignment), dtype=wp.uint8, device=device)
    views = [wp.zeros_like(a) if a.size == 0 else
             wp.array(ptr=buffer.ptr + offset, dtype=a.dtype, shape=a.shape, device=device)
             for a, offset in zip(likes, offsets)]
    return buffer, views


def gradients_in_one_buffer(arrays: list, device) -> wp.array:
    """Give each of ``arrays`` (none holding a gradient yet) a zero gradient that is a view into
    one byte buffer (``arrays_in_one_buffer``), which is returned."""
    buffer, views = arrays_in_one_buffer(arrays, device)
    for a, view in zip(arrays, views):
        a.grad = view
    return buffer


def thread_chunks(unit_world: np.ndarray, threads: int) -> list:
    """(first unit, count) of each thread's share of the units a launch steps (articulations,
    or contact islands), ``unit_world`` the world of each: contiguous, split where the world
    changes when there are at least as many worlds as threads (a world's fault flag is then
    written by one thread)."""
    count = len(unit_world)
    if threads <= 1 or count < 2 * MIN_ARTICULATIONS_PER_THREAD:
        return [(0, count)]
    threads = min(threads, count // MIN_ARTICULATIONS_PER_THREAD)
    cuts = np.flatnonzero(np.diff(unit_world)) + 1 if len(np.unique(unit_world)) >= threads else np.arange(1, count)
    wanted = np.arange(1, threads) * count / threads
    bounds = [0, *sorted({int(cuts[np.abs(cuts - w).argmin()]) for w in wanted} - {0, count}), count]
    return [(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


class FusedArticulationStep:
    """Steps every articulation of a model with one ``articulation_steps`` launch.

    Its results are bitwise those of the staged ``ArticulationStepper`` on the CPU (the same
    functions in the same order per articulation). While a ``wp.Tape`` records, each step puts
    one backward function on the tape (``_record``): the joint update's adjoint, the Cholesky
    solve's and the generated adjoint of ``articulation_system`` per thread chunk; its
    gradients equal the staged path's to round-off. ``advance`` runs several steps per launch
    in place. On the CPU, unrecorded launches split the articulations over ``threads`` threads
    (ctypes releases the GIL while a kernel runs); every articulation's arithmetic is the same
    whatever the split.
    """

    def __init__(self, model, stepper, threads: int | None = None):
        self.model = model
        self.stepper = stepper
        """The staged ``ArticulationStepper`` whose scratch and launches this step shares."""
        pairs, start = self._penalty_pairs()
        device = model.device
        self._pairs = wp.array(pairs if len(pairs) else np.zeros((1, 2)), dtype=int, device=device)
        self._pair_start = wp.array(start, dtype=int, device=device)
        self._pair_count = wp.array([len(pairs)], dtype=int, device=device)
        self.threads = (os.cpu_count() or 1) if threads is None else threads
        """CPU threads of a launch (forward, advance or backward)."""
        worlds = self._unit_worlds()
        self._chunks = thread_chunks(worlds, self.threads) if device.is_cpu else [(0, len(worlds))]
        """(first unit, count) of each thread's launch: articulations (contact islands for the
        soft-contact step)."""
        self._fields = [
            model.articulation_start, model.articulation_dof_start, model.articulation_H_start, model.dfs_joint,
            model.dof_joint, model.joint_type, model.joint_parent, model.joint_child, model.joint_articulation,
            model.joint_X_p, model.joint_X_c, model.joint_axis, model.joint_q_start, model.joint_qd_start,
            model.joint_dfs_pos, model.joint_dfs_end, model.joint_armature, model.joint_damping, model.joint_friction,
            model.joint_stiffness, model.joint_spring_ref, model.joint_target_ke, model.joint_target_kd,
            model.joint_limit_lower, model.joint_limit_upper, model.joint_limit_ke, model.joint_limit_kd,
            model.joint_f_lower, model.joint_f_upper, model.joint_target_lower, model.joint_target_upper,
            model.joint_drive_force_limit, model.joint_drive_implicit, model.joint_damping_implicit, model.body_joint, model.body_world, model.body_mass, model.body_com,
            model.body_inertia, model.body_origin, model.gravity, model.fluid, model.body_fluid_frame,
            *penalty_shape_fields(model),
            self._pair_start, self._pairs, self._pair_count,
        ]
        """The model arrays of the launch, read once: change Model fields in place (``assign``),
        as wpsim's optimisers do, not by replacing the arrays."""
        self._first_index = len(self._fields) + 6
        """Index of ``first_articulation`` in the launches' inputs (after the fields, state and
        controls)."""
        self._shared = None
        """The ``ArticulationScratch`` every recorded step shares, made at the first; its gradients
        are views into one buffer (``_shared_grad_buffer``), zeroed at once before each step's
        backward."""
        self._shared_grad_buffer = None
        self._system_rows = []
        """Unused per-step systems of the current block (``_step_system``), last first."""
        self._system_block_steps = 0
        """Steps of the last block of per-step systems allocated."""
        self._launches = None
        """The prepared launches that recorded steps retarget (``_recorded_launches``)."""
        self._prepared = {}
        """Unrecorded ``PreparedLaunch``es by chunk, by (the identity of their state and control
        arrays, the values of their settings)."""

    def _penalty_pairs(self) -> tuple:
        """(pairs (P, 2), start (A + 1,)): the penalty contact's pairs by articulation."""
        return contact_pairs_by_articulation(self.model)

    def _unit_worlds(self) -> np.ndarray:
        """World of each unit a thread of the launch steps: here articulations."""
        return articulation_worlds(self.model)

    def step(self, solver, state_in, state_out, control, dt: float):
        """One step of ``dt`` s from ``state_in`` into ``state_out`` (``state_in.body_q``,
        ``body_qd`` and ``body_f`` filled as the staged step fills them)."""
        tape = active_tape()
        if tape is None or not state_in.joint_q.requires_grad:
            self._run_prepared(solver, state_in, state_out, control, dt, 1, 0)
            return
        self._record(tape, solver, state_in, state_out, control, dt)

    def advance(self, solver, state, control, dt: float, steps: int):
        """``steps`` unrecorded steps of ``dt`` s in place on ``state``, in one launch (per
        thread); afterwards ``state.body_q``/``body_qd`` match its joint coordinates."""
        self._run_prepared(solver, state, state, control, dt, steps, 1)

    def replay(self, solver, state, control, joint_f_steps, dt: float, joint_q_steps, joint_qd_steps,
               joint_target_steps=None):
        """One unrecorded launch (per thread) of ``len(joint_f_steps)`` steps of ``dt`` s in place
        on ``state``, row s of ``joint_f_steps`` (steps, dofs) the joint forces of step s and of
        ``joint_target_steps`` (steps, dofs), if given, the drives' position targets (the other
        inputs from ``control``); the joint coordinates and rates before the first step and
        after each go to the rows of ``joint_q_steps`` (steps + 1, coordinates) and
        ``joint_qd_steps`` (steps + 1, dofs). ``state``'s body arrays are left as the last step
        began (no final kinematics)."""
        model = self.model
        real = model.dtype
        scratch = self.stepper._scratch
        steps = joint_f_steps.shape[0]
        inputs = [
            *self._fields, state.joint_q, state.joint_qd, joint_f_steps,
            control.joint_target_q.reshape((1, -1)) if joint_target_steps is None else joint_target_steps,
            control.body_f_ext, control.joint_target_qd, 0, steps, int(joint_target_steps is not None),
            solver._friction_smoothing, real(model.contact_damping_depth),
            solver.contact_gradient_width, real(dt), solver.step_count, solver.max_coordinate, solver.max_speed,
        ]
        outputs = [state.body_q, state.body_qd, state.body_f, *self._scratch_outputs(scratch), scratch.factor,
                   scratch.qdd, state.joint_q, state.joint_qd, solver.world_fault_step, joint_q_steps, joint_qd_steps]
        kernel = for_precision(articulation_step.articulation_replay, real)
        jobs = []
        for first, count in self._chunks:
            chunk_inputs = list(inputs)
            chunk_inputs[self._first_index] = first
            jobs.append(lambda i=chunk_inputs, n=count: wp.launch(kernel, dim=n, inputs=i, outputs=outputs,
                                                                  device=model.device, record_tape=False))
        WORKERS.run(jobs)

    def _record(self, tape, solver, state_in, state_out, control, dt: float):
        """Run the step and put its backward on ``tape``: the joint update's adjoint, the
        Cholesky solve's (``cholesky_solve_adjoint``) and ``articulation_system``'s, whose
        adjoint kernel recomputes the step's intermediates itself. So a recorded step keeps
        only its joint-space system (``mass_matrix``, ``rhs``, ``factor``, ``qdd``); the other
        intermediates live in one scratch that every recorded step shares."""
        model = self.model
        if self._shared is None:
            self._shared = ArticulationScratch(model, False)
            self._shared_grad_buffer = gradients_in_one_buffer(
                [a for a in vars(self._shared).values() if isinstance(a, wp.array)], model.device)
        scratch = copy.copy(self._shared)
        scratch.mass_matrix, scratch.rhs, scratch.qdd, scratch.factor = self._step_system()
        forward = self._arguments(solver, state_in, state_out, control, scratch, dt, 1, 0)
        integration = self.stepper.integration_launch(solver, state_in, state_out, scratch.qdd, dt)
        solve = cholesky_adjoint_launch(model, (model.articulation_dof_start, model.articulation_H_start),
                                        scratch.mass_matrix, scratch.rhs, scratch.qdd, scratch.factor,
                                        self._shared.adjoint)
        system = self._system_launch(solver, state_in, control, scratch, dt)
        launches = self._recorded_launches(forward, integration, solve, system)
        self._run_chunks(self._retargeted(launches["forward"], forward))

        def backward():
            for name, launch in (("integration", integration), ("solve", solve)):
                launches[name].retarget(launch.inputs, launch.outputs)
                launches[name].run()
            self._shared_grad_buffer.zero_()
            self._run_chunks(self._retargeted(launches["systems"], (system.inputs, system.outputs), launches["private"]))
            for total, parts in launches["private_sums"]:
                for part in parts:
                    total += part
            launches["private_buffer"].zero_()

        arrays = [*self._state_controls(state_in, control), state_in.body_q, state_in.body_qd, state_in.body_f,
                  state_out.joint_q, state_out.joint_qd, scratch.mass_matrix, scratch.rhs, scratch.qdd]
        tape.record_func(backward, [a for a in arrays if a.grad] + launches["model_arrays"])

    def _step_system(self) -> tuple:
        """A recorded step's own (mass_matrix, rhs, qdd, factor), zeroed, the first three with
        gradients: rows of blocks (one allocation per step and array cost more than the step's
        launch at one world). Each block is twice the steps of the last, up to
        ``SYSTEM_BLOCK_STEPS`` and ``SYSTEM_BLOCK_BYTES``, so a short rollout allocates little more
        than it uses."""
        if not self._system_rows:
            model = self.model
            entries, dofs = model.articulation_H_size, model.joint_dof_count
            sizes = ((entries, True), (dofs, True), (dofs, True), (entries, False))
            step_bytes = sum(n * (2 if grad else 1) for n, grad in sizes) * wp.types.type_size_in_bytes(model.dtype)
            most = int(np.clip(SYSTEM_BLOCK_BYTES // max(step_bytes, 1), 1, SYSTEM_BLOCK_STEPS))
            self._system_block_steps = min(2 * self._system_block_steps, most) if self._system_block_steps else 1
            blocks = [wp.zeros((self._system_block_steps, n), dtype=model.dtype, device=model.device,
                               requires_grad=grad) for n, grad in sizes]
            self._system_rows = list(zip(*(row_views(block) for block in blocks)))[::-1]
        return self._system_rows.pop()

    def _retargeted(self, launches: list, arguments: tuple, private: dict | None = None) -> list:
        """``launches`` (one per chunk) given ``arguments`` (inputs, outputs) with each chunk's
        first articulation: the first retargets, the others copy its arguments; ``private``:
        {input index: per extra chunk its own adjoint} for adjoint launches."""
        first, *others = launches
        first.retarget(*arguments)
        for k, (launch, (start, _)) in enumerate(zip(others, self._chunks[1:])):
            launch.copy_arguments(first)
            launch.set(self._first_index, start)
            for index, grads in (private or {}).items():
                launch.set(index, arguments[0][index], adjoint=grads[k])
        return launches

    def _recorded_launches(self, forward: tuple, integration: KernelLaunch, solve: KernelLaunch,
                           system: KernelLaunch) -> dict:
        """The ``PreparedLaunch``es that recorded steps retarget (on any tape), made from the first
        step's arguments: per chunk the forward (``forward``: inputs and outputs of
        ``articulation_steps``) and the ``articulation_system`` adjoint (``system``: the first
        chunk's), the joint update's and the solve's; ``private``: {input index: one zeroed
        adjoint per extra chunk} of the model arrays with gradients that every chunk reads
        (gravity, the fluid, the shape fields), views into ``private_buffer``, added to the shared adjoint
        after each step's backward (``private_sums``: numpy views, (shared, [private])) and then
        zeroed; ``model_arrays``: the model arrays with gradients (for ``tape.zero``)."""
        if self._launches is not None:
            return self._launches
        model = self.model
        device = model.device
        shared = {id(a) for a in (model.gravity, model.fluid, *penalty_shape_fields(model))}
        indices = [k for k, a in enumerate(system.inputs) if id(a) in shared and isinstance(a, wp.array) and a.grad]
        extra = len(self._chunks) - 1
        buffer, views = arrays_in_one_buffer([system.inputs[k].grad for k in indices for _ in range(extra)], device)
        private = {k: views[n * extra:(n + 1) * extra] for n, k in enumerate(indices)}
        self._launches = {
            "forward": self._chunk_launches(self._kernel(), *forward),
            "systems": self._chunk_launches(system.kernel, system.inputs, system.outputs, adjoint=True),
            "private": private, "private_buffer": buffer,
            "private_sums": [(system.inputs[k].grad.numpy(), [v.numpy() for v in private[k]])
                             for k in indices] if extra else [],
            "integration": PreparedLaunch(*integration, device, adjoint=True),
            "solve": PreparedLaunch(*solve, device),
            "model_arrays": [a for a in self._fields if a.grad],
        }
        return self._launches

    def _chunk_launches(self, kernel, inputs: list, outputs: list, adjoint: bool = False) -> list:
        """One ``PreparedLaunch`` of ``kernel`` per thread chunk, each with its chunk's first
        articulation in place of ``inputs``' one."""
        launches = []
        for first, count in self._chunks:
            chunk_inputs = list(inputs)
            chunk_inputs[self._first_index] = first
            launches.append(PreparedLaunch(kernel, count, chunk_inputs, outputs, self.model.device, adjoint=adjoint))
        return launches

    def _system_launch(self, solver, state_in, control, scratch, dt: float) -> KernelLaunch:
        """``articulation_system`` of the first thread chunk."""
        real = self.model.dtype
        first, count = self._chunks[0]
        return KernelLaunch(
            for_precision(articulation_step.articulation_system, real), count,
            [*self._fields, *self._state_controls(state_in, control), first, solver._friction_smoothing,
             real(self.model.contact_damping_depth), solver.contact_gradient_width, real(dt)],
            [state_in.body_q, state_in.body_qd, state_in.body_f, *self._scratch_outputs(scratch)],
        )

    def _run_chunks(self, launches: list):
        """Run the chunks' launches at once: the first on this thread, the others on ``WORKERS``'."""
        WORKERS.run([launch.run for launch in launches])

    def _kernel(self):
        return for_precision(articulation_step.articulation_steps, self.model.dtype)

    @staticmethod
    def _launch_arrays(state_in, state_out, control) -> tuple:
        """The state and control arrays an unrecorded launch reads or writes (its prepared
        launches are kept per set of them)."""
        return (state_in.joint_q, state_in.joint_qd, state_in.body_q, state_in.body_qd, state_in.body_f,
                state_out.joint_q, state_out.joint_qd, control.body_f_ext, control.joint_f, control.joint_target_q,
                control.joint_target_qd)

    @staticmethod
    def _state_controls(state_in, control) -> list:
        return [state_in.joint_q, state_in.joint_qd, control.body_f_ext, control.joint_f, control.joint_target_q,
                control.joint_target_qd]

    @staticmethod
    def _scratch_outputs(scratch) -> list:
        return [
            scratch.body_twist, scratch.body_bias_acc, scratch.dof_motion, scratch.body_damping, scratch.body_h,
            scratch.body_J, scratch.body_inertial_bias, scratch.subtree_mass, scratch.subtree_h, scratch.subtree_J,
            scratch.subtree_bias, scratch.subtree_damping, scratch.dof_subtree_force, scratch.mass_matrix,
            scratch.rhs, scratch.dof_inertia,
        ]

    def _arguments(self, solver, state_in, state_out, control, scratch, dt: float, steps: int,
                   final_kinematics: int) -> tuple:
        """(inputs, outputs) of ``articulation_steps`` with 0 as first articulation; body poses,
        velocities and wrenches go to ``state_in``'s arrays."""
        real = self.model.dtype
        inputs = [
            *self._fields, *self._state_controls(state_in, control),
            0, steps, final_kinematics, solver._friction_smoothing, real(self.model.contact_damping_depth),
            solver.contact_gradient_width, real(dt), solver.step_count, solver.max_coordinate, solver.max_speed,
        ]
        outputs = [
            state_in.body_q, state_in.body_qd, state_in.body_f, *self._scratch_outputs(scratch),
            scratch.factor, scratch.qdd, state_out.joint_q, state_out.joint_qd, solver.world_fault_step,
        ]
        return inputs, outputs

    def _run_prepared(self, solver, state_in, state_out, control, dt: float, steps: int, final_kinematics: int):
        """Unrecorded launches, one per thread chunk, through ``PreparedLaunch``es kept for the
        same states, control and settings; once ``PREPARED_LAUNCHES`` sets are kept, a set of the
        same settings is retargeted to new arrays (callers that step fresh states every time)."""
        arrays = tuple(id(a) for a in self._launch_arrays(state_in, state_out, control))
        settings = (float(dt), steps, final_kinematics, float(solver._friction_smoothing),
                    float(solver.contact_gradient_width), float(solver.max_coordinate), float(solver.max_speed))
        launches = self._prepared.get((arrays, settings))
        if launches is None:
            arguments = self._arguments(solver, state_in, state_out, control, self.stepper._scratch, dt, steps,
                                        final_kinematics)
            full = len(self._prepared) >= PREPARED_LAUNCHES
            spare = next((key for key in self._prepared if key[1] == settings), None) if full else None
            if spare is not None:
                launches = self._retargeted(self._prepared.pop(spare), arguments)
            else:
                if full:
                    self._prepared.clear()
                launches = self._chunk_launches(self._kernel(), *arguments)
            self._prepared[(arrays, settings)] = launches
        for launch in launches:
            launch.set(self._first_index + 7, solver.step_count)  # the step number
        self._run_chunks(launches)
