"""The fused soft-constraint contact step: one launch per unrecorded step (or per ``advance``
call, per CPU thread) runs the joint-space system, the contact rows and the Newton solve of
every contact island (``kernels.soft_contact_step``), with no allocation, no host read-back and
no host decision per step or iteration. A recorded step runs the same launch; its backward
replays the staged schedule at the launch's solution (no Newton iterations) and runs the
implicit adjoint there."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.tape import active_tape, tape_paused
from wpsim.kernels import soft_contact_step
from wpsim.kernels.generic import for_precision
from wpsim.solvers.fused_articulation import FusedArticulationStep, gradients_in_one_buffer
from wpsim.solvers.kinematics import ArticulationScratch

FUSED_ISLAND_DOFS = 64
"""The most dofs of a contact island of several articulations that the fused step takes: one
thread solves such an island as one dense system at every step, its articulations touching
or not (the staged schedule solves each step's touching ones), so the fused step is meant
for a robot and the few objects it handles. A chosen bound, not a measured crossover."""


def couplings_by_articulation(model) -> tuple | None:
    """(start (A + 1,), couplings): the joint couplings grouped by the articulation their dofs
    lie in (stable), or None when a coupling spans two articulations."""
    term_start, term_dof = model.coupling_term_start.numpy(), model.coupling_term_dof.numpy()
    dof_articulation = model.joint_articulation.numpy()[model.dof_joint.numpy()]
    owner = np.zeros(model.coupling_count, np.int64)
    for c in range(model.coupling_count):
        spanned = np.unique(dof_articulation[term_dof[term_start[c]:term_start[c + 1]]])
        if len(spanned) != 1:
            return None
        owner[c] = spanned[0]
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=model.articulation_count)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32), order.astype(np.int32)


def fused_soft_contact_unsuitable(model, soft_contact) -> str | None:
    """Why the fused soft-contact step cannot step ``model`` with ``soft_contact`` (a sentence),
    or None: it needs a joint with a dof, contact islands fixed at build time (no per-step
    broad phase; the articulations that candidate pairs join, consecutive in the model, of
    at most ``FUSED_ISLAND_DOFS`` dofs) and no read-back at every step."""
    if model.joint_dof_count == 0:
        return "no joint has a dof: the staged step has nothing to solve"
    if soft_contact.broad_phase is not None:
        return "a per-step broad phase lists the contact pairs"
    if soft_contact.options.raise_on_nonconvergence:
        return "raise_on_nonconvergence reads the convergence back at every step"
    if couplings_by_articulation(model) is None:
        return "a joint coupling spans two articulations"
    labels = soft_contact._candidate_islands.labels
    if np.any(np.diff(labels) < 0):
        return "the articulations of a contact island are not consecutive in the model"
    joined = np.bincount(labels) > 1
    dofs = np.bincount(labels, weights=np.diff(soft_contact._dof_start))
    if np.any(dofs[joined] > FUSED_ISLAND_DOFS):
        return (f"contact pairs join articulations into an island of {int(dofs[joined].max())} dofs, more than "
                f"FUSED_ISLAND_DOFS ({FUSED_ISLAND_DOFS}): each step's touching islands are solved staged")
    return None


class FusedSoftContactStep(FusedArticulationStep):
    """Steps every articulation of a model with soft-constraint contact in one
    ``soft_contact_steps`` launch (per CPU thread chunk), a thread per contact island (the
    ``SoftContact``'s islands of all candidate pairs); results are bitwise those of the
    staged schedule (``ArticulationStepper`` with its ``SoftContact``) on the CPU where each
    island is one articulation, within the solve's tolerance elsewhere. Each world's
    iterations and unconverged steps are kept on the device (``SoftContact.status``). While a ``wp.Tape`` records, each step runs the same
    launch and puts a replayed backward on the tape (``_record``); with the unrolled adjoint
    the staged schedule runs instead."""

    def __init__(self, model, stepper, threads: int | None = None):
        self.soft_contact = stepper.soft_contact
        super().__init__(model, stepper, threads)
        contact = self.soft_contact
        limit_ke, limit_kd = stepper._limit_gains
        replaced = {id(model.joint_limit_ke): limit_ke, id(model.joint_limit_kd): limit_kd}
        self._fields = [replaced.get(id(a), a) for a in self._fields]
        pairs, islands = contact._all_pairs, contact._candidate_islands
        self._fields += [
            stepper._friction, pairs.contact_pair, pairs.pair_row_start, pairs.pair_dof,
            pairs.pair_dof_count, pairs.pair_articulation, pairs.articulation_pair_start, pairs.articulation_pairs,
            islands.articulation_start, islands.articulations, islands.dof_start, islands.H_start, islands.dof_slot,
            contact.inverse_weights[0],
            contact.dof_row_settings,
            *(wp.array(a, dtype=int, device=model.device) for a in couplings_by_articulation(model)),
            contact.inverse_weights[1],
        ]
        after_shapes = next(k for k, a in enumerate(self._fields) if a is self._pair_start)
        self._fields[after_shapes:after_shapes] = [model.shape_bound_centre, model.shape_bound_half, model.shape_solref,
                                                   model.shape_solimp, model.shape_solmix, model.shape_priority,
                                                   model.shape_condim, model.shape_rotational_mu, model.shape_margin,
                                                   model.coupling_term_start, model.coupling_term_dof,
                                                   model.coupling_term_coef, model.coupling_term_power,
                                                   model.coupling_rest, model.coupling_time_constant,
                                                   model.coupling_damping_ratio, model.coupling_ke, model.coupling_kd,
                                                   model.coupling_solimp, model.coupling_drive_ke,
                                                   model.coupling_drive_kd, model.coupling_drive_force_limit,
                                                   model.coupling_drive_implicit]
        self._forces_index = len(self._fields) + 3
        """Index of the joint forces' table in the launches' inputs (after joint_q, joint_qd and the
        warm start)."""
        self._first_index = len(self._fields) + 8  # after the state's warm start and the couplings' targets too
        self._replay = self._replay_grads = self._watched = None
        """The replayed backward's shared arrays (``_replay_arrays``) and the convergence count
        at the current tape's first recorded step (``_watch_convergence``)."""
        self._no_steps = [wp.zeros((1, 1), dtype=model.dtype, device=model.device) for _ in range(2)]
        """The joint-state tables of a launch that records none (``replay`` 0)."""
        rows = contact._rows(pairs, False)
        rows["violation"] = contact._vector("violation", False, pairs.row_count)
        rows["row_step"] = contact._array("row_step", max(pairs.row_count, 1), False)
        rows["row_curvature"] = contact._array("row_curvature", max(pairs.row_count, 1), False)
        touching = (contact._index_array("fused_touching_pairs", max(pairs.articulation_pairs.shape[0], 1), False),
                    contact._index_array("fused_touching_pair_count", model.articulation_count, False))
        self._in_contact = rows["in_contact"]
        options = contact.options
        self._settings = [contact.side_column, *contact._dof_row_flags, *contact._params, *contact._impedance_curve,
                          contact._mujoco_weights, model.real(options.impratio), contact._friction_mixing,
                          model.real(contact._tolerance),
                          model.real(contact._slope_tolerance),
                          options.iterations, int(options.fixed_iterations), int(options.warm_start),
                          int(stepper._implicit_after_solve), stepper._equality_rows]
        self._outputs = [
            contact._vector("fused_accel", False),
            *(rows[k] for k in ("jacobian", "velocity", "inverse_mass", "distance", "in_contact", "aref", "weight",
                                "violation", "row_step", "row_curvature")), *touching,
            contact._vector("dof_curvature", False), contact._vector("gradient", False),
            contact._array("hessian", islands.hessian_size, False),
            contact._array("factor", islands.hessian_size, False), contact._vector("step", False),
            contact.world_iterations, contact.world_unconverged_steps, contact.world_first_unconverged,
            contact.world_worst_residual, *self._implicit_arrays(stepper._scratch),
        ]

    @staticmethod
    def _implicit_arrays(scratch) -> tuple:
        """The scratch of MuJoCo's order of the implicit terms (empty without it): the assembled
        matrix, its factor, the implicit terms, the final solve's right-hand side and solution,
        the joint couplings' implicit drive terms."""
        return (scratch.damped_matrix, scratch.damped_factor, scratch.implicit, scratch.implicit_force,
                scratch.correction, scratch.coupling_implicit)

    def _penalty_pairs(self) -> tuple:
        """No penalty pairs in the joint-space system: the soft-constraint rows take every pair."""
        return np.zeros((0, 2), np.int32), np.zeros(self.model.articulation_count + 1, np.int32)

    def _unit_worlds(self) -> np.ndarray:
        """World of each contact island (a thread of the launch steps one)."""
        return self.soft_contact._candidate_islands.world

    def step(self, solver, state_in, state_out, control, dt: float):
        """One step of ``dt`` s from ``state_in`` into ``state_out``: one launch per thread chunk
        (recorded: ``_record``), or the staged schedule on a tape with the unrolled adjoint."""
        if (active_tape() is not None and state_in.joint_q.requires_grad
                and self.soft_contact.options.adjoint == "unrolled"):
            begun = self.stepper.begin(solver, state_in, control, dt)
            self.stepper.finish(solver, begun, state_in, state_out, control, dt)
            return
        super().step(solver, state_in, state_out, control, dt)
        self._mark_rows()

    def _record(self, tape, solver, state_in, state_out, control, dt: float):
        """Run the step in one unrecorded launch and put its backward on ``tape``: the staged
        schedule replayed on a tape of its own at the launch's solution (the constrained
        accelerations it keeps in ``state_out.joint_qdd_warm_start``), without the Newton
        iterations, then run backward from ``state_out``'s gradients. So a recorded step keeps
        nothing but its states, and its gradients are the staged path's."""
        self._run_prepared(solver, state_in, state_out, control, dt, 1, 0)
        self._watch_convergence(tape)
        step_count = solver.step_count

        def backward():
            if state_out.joint_q.grad is None and state_out.joint_qd.grad is None:
                return
            scratch, replayed = self._replay_arrays()
            replayed.joint_q.grad, replayed.joint_qd.grad = state_out.joint_q.grad, state_out.joint_qd.grad
            self._replay_grads.zero_()
            latest, solver.step_count = solver.step_count, step_count  # the step's number for the fault flags
            with tape_paused():
                replay = wp.Tape()
                with replay:
                    begun = self.stepper.begin(solver, state_in, control, dt, scratch)
                    self.stepper.finish(solver, begun, state_in, replayed, control, dt,
                                        solution=state_out.joint_qdd_warm_start)
                replay.backward()
            solver.step_count = latest
            self._report_convergence(tape)

        arrays = [*self._state_controls(state_in, control), control.coupling_target, state_in.body_q,
                  state_in.body_qd, state_in.body_f, state_out.joint_q, state_out.joint_qd]
        tape.record_func(backward, [a for a in (*arrays, *self._fields) if a.grad is not None and a.size])

    def _replay_arrays(self) -> tuple:
        """(scratch, state) every replayed backward shares (made at the first): an
        ``ArticulationScratch`` whose gradients are views into one buffer (``_replay_grads``),
        zeroed before each replay, and the state the replay steps into (its joint gradients
        those of the recorded step's ``state_out``)."""
        if self._replay is None:
            scratch = ArticulationScratch(self.model, False, self.stepper._scratch,
                                          self.stepper._implicit_after_solve)
            damping = {id(scratch.body_damping), id(scratch.subtree_damping)}
            self._replay_grads = gradients_in_one_buffer(
                [a for a in vars(scratch).values() if isinstance(a, wp.array) and id(a) not in damping],
                self.model.device)
            self._replay = scratch, self.model.state(requires_grad=False)
        return self._replay

    def _watch_convergence(self, tape):
        """At a tape's first recorded step, note the device's count of unconverged solves (one
        read-back per tape), for ``_report_convergence``."""
        if self._watched is None or self._watched[0] is not tape:
            self._watched = [tape, int(self.soft_contact.world_unconverged_steps.numpy().sum()), False]

    def _report_convergence(self, tape):
        """At a tape's first backward step, warn once if solves went unconverged since its first
        recorded step: its adjoint assumes a converged solve (the staged steps warn as they go)."""
        watched = self._watched
        if watched is None or watched[0] is not tape or watched[2]:
            return
        watched[2] = True
        unconverged = int(self.soft_contact.world_unconverged_steps.numpy().sum()) - watched[1]
        if unconverged > 0:
            import warnings

            warnings.warn(f"{unconverged} island-step(s) of the soft-contact solve stopped at the iteration cap "
                          f"({self.soft_contact.options.iterations}) above the tolerance since this tape's first "
                          "recorded step (health() names the worlds); they are on this tape, and its adjoint assumes "
                          "a converged solve, so the gradient may be off (raise SoftContactOptions.iterations)",
                          stacklevel=3)

    def advance(self, solver, state, control, dt: float, steps: int):
        """``steps`` unrecorded steps of ``dt`` s in place on ``state``, in one launch (per thread)."""
        super().advance(solver, state, control, dt, steps)
        self._mark_rows()

    def _mark_rows(self):
        """The contact's latest rows and islands are the fused step's (``active_contacts``)."""
        contact = self.soft_contact
        contact.pairs, contact.islands = contact._all_pairs, contact._candidate_islands
        contact._last_in_contact = self._in_contact

    def _kernel(self):
        return for_precision(soft_contact_step.soft_contact_steps, self.model.dtype)

    def _arguments(self, solver, state_in, state_out, control, scratch, dt: float, steps: int,
                   final_kinematics: int) -> tuple:
        """(inputs, outputs) of ``soft_contact_steps``: ``articulation_steps``' with the state's
        warm start, the contact settings, and the solve's scratch, health and warm-start arrays."""
        inputs, outputs = super()._arguments(solver, state_in, state_out, control, scratch, dt, steps,
                                             final_kinematics)
        inputs.insert(len(self._fields) + 2, state_in.joint_qdd_warm_start)  # after joint_q, joint_qd
        forces = self._forces_index  # the joint forces' and targets' tables, before the applied wrenches
        inputs[forces:forces + 3] = [control.joint_f.reshape((1, -1)), control.joint_target_q.reshape((1, -1)),
                                     control.body_f_ext]  # one row each, every step
        inputs.insert(self._first_index - 1, control.coupling_target)  # the last control
        return ([*inputs, *self._settings, 0, 0],
                [*outputs, *self._outputs, state_out.joint_qdd_warm_start, *self._no_steps])

    def replay(self, solver, state, control, joint_f_steps, dt: float, joint_q_steps, joint_qd_steps,
               joint_target_steps=None):
        """``FusedArticulationStep.replay`` with soft-constraint contact: one unrecorded launch
        (per thread) of ``len(joint_f_steps)`` steps in place on ``state``, row s of
        ``joint_f_steps`` the joint forces of step s (and of ``joint_target_steps``, if given,
        the drives' position targets), the joint state before the first step and after each into
        the rows of ``joint_q_steps`` and ``joint_qd_steps``."""
        steps = joint_f_steps.shape[0]
        inputs, outputs = self._arguments(solver, state, state, control, self.stepper._scratch, dt, steps, 0)
        inputs[self._forces_index], inputs[-2] = joint_f_steps, 1
        if joint_target_steps is not None:
            inputs[self._forces_index + 1], inputs[-1] = joint_target_steps, 1
        outputs[-2:] = [joint_q_steps, joint_qd_steps]
        self._run_chunks(self._chunk_launches(self._kernel(), inputs, outputs))
        self._mark_rows()

    @staticmethod
    def _launch_arrays(state_in, state_out, control) -> tuple:
        return (*FusedArticulationStep._launch_arrays(state_in, state_out, control), state_in.joint_qdd_warm_start,
                state_out.joint_qdd_warm_start, control.coupling_target)
