"""Semi-implicit (symplectic Euler) solver for particles, springs, cloth and soft bodies."""

from __future__ import annotations

import copy
import os

import warp as wp

from wpsim.core.model import Control, Model, State
from wpsim.core.tape import active_tape
from wpsim.core.validation import require_count
from wpsim.kernels import contact
from wpsim.solvers.articulation import ArticulationStepper
from wpsim.solvers.articulation_size import check_articulation_sizes
from wpsim.solvers.base import SolverBase
from wpsim.solvers.broad_phase import rigid_broad_phase
from wpsim.solvers.forces import SmoothingScratch, force_launches
from wpsim.solvers.fused_articulation import CUDA_MAX_DOFS, FusedArticulationStep, fused_step_unsuitable
from wpsim.solvers.fused_soft_contact import FusedSoftContactStep, fused_soft_contact_unsuitable
from wpsim.solvers.kinematics import eval_fk
from wpsim.solvers.neighbor_lists import SKIN_PER_RADIUS, ParticleNeighborLists
from wpsim.solvers.particle_step import PreparedParticleSteps, integrate_launch
from wpsim.solvers.prepared_launch import caching_launches
from wpsim.solvers.soft_contact import SoftContact
from wpsim.solvers.soft_contact_options import SoftContactOptions


class SemiImplicitSolver(SolverBase):
    """Explicit force evaluation followed by a symplectic Euler update.

    Particles take at most seven launches: broad phase (only with particle-particle contact,
    not recorded on the tape; see ``neighbor_skin``), particle forces (drag, external, contact), springs,
    triangles, bending hinges, tetrahedra, integration (with impacts cut at their time of
    impact when the model has ``particle_impacts``). Launches of absent element kinds
    are skipped. Forces of the step are written into ``state_in.particle_f``, the contact
    neighbour list into ``state_in.neighbor_*``; positions and velocities into
    ``state_out``. Recorded on ``wp.Tape`` like any launch: give every step a fresh
    ``state_out`` while recording. Unrecorded CPU steps re-run launches prepared for their
    arrays (``PreparedParticleSteps``) and split the element forces over ``threads``.

    Rigid bodies add seven launches (see ``ArticulationStepper``); their poses are computed
    before the particle forces, so particles collide with body shapes and push back on the
    bodies (two-way coupling).

    Args:
        model: the Model to step.
        contact_gradient_width: "hard contact, soft gradient" for penalty contact (rigid
            bodies, and particles with shapes and with each other): with a width w > 0 (m)
            the forward pass is unchanged, but the backward pass differentiates the normal
            force as the smooth function ke w softplus((ke pen - kd v_n) / (ke w)) of the
            penetration pen. Gradients then see contacts up to a few w before they happen
            (pairs within 6 w are evaluated) and change smoothly at contact onset. Bias:
            they are no longer the exact gradients of the forward rollout; they differ by
            terms of order w (inside a resting contact the slope is about sigmoid(pen / w)
            instead of 1). 0 (default): exact gradients.
        soft_contact: a ``SoftContactOptions`` to resolve rigid-body contact (with static
            shapes and between bodies) as soft constraints by Newton iterations
            (differentiated implicitly or unrolled) instead of the penalty forces; None
            (default): penalty contact.
        broad_phase: True: rigid contact (penalty or soft-constraint) evaluates only the
            candidate pairs whose shapes' boxes overlap each step (a BVH over the shapes,
            ``wpsim.solvers.broad_phase``); False: every candidate pair each step; None
            (default): True above ``BROAD_PHASE_MIN_PAIRS`` candidate pairs without a plane. Soft-constraint
            contact with ``fixed_iterations`` (no read-back) evaluates every pair.
        contact_pair_capacity: the most near pairs a step keeps (default: the pairs with
            planes plus 16 per shape); ``health()`` reports a step that found more.
        fused: True: step the rigid bodies with one launch per step (``FusedArticulationStep``,
            with soft-constraint contact ``FusedSoftContactStep``, whose recorded steps run
            staged; a ``ValueError`` says why a model does not allow it); False: the staged launches;
            None (default): fused wherever the model allows it (on CUDA only for articulations
            of at most ``CUDA_MAX_DOFS`` dofs).
        threads: CPU threads of the fused step's launches, recorded or not, and of the element
            forces of unrecorded particle steps (``ElementThreads``, from
            ``MIN_ELEMENTS_PER_SHARE`` elements per thread: split by whole worlds, results are
            bitwise one thread's; within ``advance`` a world may be split by fractions, which
            sums each particle's forces in another order, equal to rounding) (default: every core).
        neighbor_skin: with particle-particle contact, the skin (m) of the neighbour lists
            (``ParticleNeighborLists``): lists are rebuilt only when a particle has moved more
            than half of it, results are unchanged. Default: ``SKIN_PER_RADIUS`` particle radii
            on the CPU; 0 on CUDA (a build every step, no read-back, so steps can be captured).
        **health_options: see ``SolverBase`` (raise_on_blowup, health_check_interval,
            max_coordinate, max_speed).
    """

    def __init__(self, model: Model, contact_gradient_width: float = 0.0, soft_contact: SoftContactOptions | None = None,
                 broad_phase: bool | None = None, contact_pair_capacity: int | None = None, fused: bool | None = None,
                 threads: int | None = None, neighbor_skin: float | None = None, **health_options):
        super().__init__(model, **health_options)
        if not contact_gradient_width >= 0.0:
            raise ValueError(f"contact_gradient_width must be >= 0 m, got {contact_gradient_width}")
        self.contact_gradient_width = model.real(contact_gradient_width)
        if model.body_count:  # before any scratch is allocated
            check_articulation_sizes(model)
        phase = rigid_broad_phase(model, broad_phase, contact_pair_capacity,
                                  reads_back=soft_contact is None or not soft_contact.fixed_iterations)
        self.soft_contact = None if soft_contact is None else SoftContact(model, soft_contact, phase)
        self._articulations = ArticulationStepper(model, self.soft_contact, phase) if model.body_count else None
        self.refresh_inverse_weights()
        self.broad_phase = phase
        self.fused = self._fused_step(fused, threads)
        """The ``FusedArticulationStep`` stepping the rigid bodies, or None (staged launches)."""
        """The per-step ``RigidBroadPhase`` of rigid contact (its ``tested`` pairs per step,
        ``capacity``), or None: every candidate pair each step."""
        self._smoothing = SmoothingScratch(model)
        self._prepared_particles = PreparedParticleSteps(model, threads or os.cpu_count() or 1) \
            if model.device.is_cpu and model.particle_count else None
        """Unrecorded CPU particle steps through prepared launches (``PreparedParticleSteps``), or None."""
        self._advancing = False
        """Within ``advance``: a world's element forces may be split by fraction over threads."""
        self.neighbors = None
        """The ``ParticleNeighborLists`` of particle-particle contact (its ``builds``), or None."""
        if model.particle_max_neighbors > 0:
            if neighbor_skin is None:
                neighbor_skin = SKIN_PER_RADIUS * model.particle_max_radius if model.device.is_cpu else 0.0
            if not neighbor_skin >= 0.0:
                raise ValueError(f"neighbor_skin must be >= 0 m, got {neighbor_skin}")
            self.neighbors = ParticleNeighborLists(model, self._neighbor_margin(), neighbor_skin,
                                                   self.neighbor_overflow)

    def refresh_inverse_weights(self):
        """Recompute the reference inverse weights of the soft-constraint rows (regularisation
        "mujoco": from the model's masses, inertias and armature at its initial joint state)
        after those changed, as MuJoCo's compiler derives them for every model it builds
        (system identification rewrites them between rollouts); nothing to do otherwise. The
        weights are constants of a step: no gradient flows through them."""
        contact = self.soft_contact
        if self._articulations is not None and contact is not None and contact.options.regularisation == "mujoco":
            contact.set_inverse_weights(*self._articulations.reference_inverse_weights(self))

    def _fused_step(self, fused: bool | None, threads: int | None):
        """The fused step the options ask for, or None."""
        model = self.model
        why_not = fused_step_unsuitable(model, self.broad_phase, self.soft_contact is not None)
        if why_not is None and self.soft_contact is not None:
            why_not = fused_soft_contact_unsuitable(model, self.soft_contact)
        if fused and why_not is not None:
            raise ValueError(f"fused=True: the fused articulation step cannot step this model: {why_not}")
        if fused is None:
            fused = why_not is None and (model.device.is_cpu or model.max_articulation_dofs <= CUDA_MAX_DOFS)
        if not fused:
            return None
        kind = FusedArticulationStep if self.soft_contact is None else FusedSoftContactStep
        return kind(model, self._articulations, threads)

    def health(self):
        """``SolverBase.health`` plus the soft-contact convergence record and the pairs the
        broad phase dropped."""
        report = super().health()
        if self.broad_phase is not None:
            report.dropped_contact_pairs = self.broad_phase.dropped
        if self.soft_contact is not None:
            report.unconverged_contact, report.contact_iterations = self.soft_contact.status()
        return report

    def reset_health(self):
        """``SolverBase.reset_health`` and the soft-contact convergence record."""
        super().reset_health()
        if self.soft_contact is not None:
            self.soft_contact.reset_status()
        if self.broad_phase is not None:
            self.broad_phase.reset()

    def step(self, state_in: State, state_out: State, control: Control | None, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out`` under ``control``."""
        self._entry.step(state_in, state_out, control, dt)
        model = self.model
        control = self._zero_control if control is None else control
        if self.fused is not None:
            self.fused.step(self, state_in, state_out, control, dt)
            self._step_done()
            return
        with caching_launches(self._launches):
            if self.neighbors is not None:
                self.neighbors.prepare(state_in)
            bodies = None
            if self._articulations is not None:
                bodies = self._articulations.begin(self, state_in, control, dt)
            if model.particle_count:
                self._step_particles(state_in, state_out, control, dt)
            if bodies is not None:
                self._articulations.finish(self, bodies, state_in, state_out, control, dt)
            if self.neighbors is not None:
                self.neighbors.carry(state_in, state_out)
        self._step_done()

    def advance(self, state: State, control: Control | None, dt: float, steps: int) -> State:
        """``steps`` unrecorded steps of ``dt`` s in place on ``state`` under one ``control``;
        returns ``state``. With the fused step, one launch (per thread) runs them all;
        otherwise ``SolverBase.advance``, where the element forces of a model with fewer worlds
        than threads may be split by fraction over the threads (``ElementThreads``): then the
        states equal those of ``step`` to rounding, not bitwise."""
        self._check_advance(state, control, dt, steps)
        if self.fused is None:
            self._advancing = True
            try:
                super().advance(state, control, dt, steps)
            finally:
                self._advancing = False
            return eval_fk(self.model, state)
        self._check_unrecorded(state, steps)
        self.fused.advance(self, state, self._zero_control if control is None else control, dt, steps)
        self._steps_done(steps)
        return state

    def replay(self, state: State, joint_f_steps, dt: float, control: Control | None = None,
               joint_target_steps=None) -> tuple:
        """Unrecorded steps of ``dt`` s in place on ``state``, one per row of ``joint_f_steps``
        ((steps, joint dofs) array of the model's dtype, N m or N: the joint forces of each step;
        ``joint_target_steps``, if given, likewise the drives' position targets of each step, rad
        or m; the other inputs from ``control``); returns (joint_q, joint_qd) arrays of (steps + 1,
        coordinates) and (steps + 1, dofs): the state before the first step and after each.
        With the fused articulation step (penalty or soft-constraint contact) one launch (per
        thread) runs them all; otherwise ``step`` into a second state and back, a control per
        step. For replaying
        measured inputs many times (system identification); ``state``'s body arrays are not
        brought up to date."""
        model = self.model
        steps = require_count("replay: steps", joint_f_steps.shape[0], 1)
        if joint_f_steps.shape[1:] != (model.joint_dof_count,) or joint_f_steps.dtype != model.dtype:
            raise ValueError(f"replay: joint_f_steps must be (steps, {model.joint_dof_count}) of the model's dtype, "
                             f"got {joint_f_steps.shape} of {joint_f_steps.dtype}")
        if joint_target_steps is not None and (joint_target_steps.shape != joint_f_steps.shape
                                               or joint_target_steps.dtype != model.dtype):
            raise ValueError(f"replay: joint_target_steps must be {joint_f_steps.shape} of the model's dtype like "
                             f"joint_f_steps, got {joint_target_steps.shape} of {joint_target_steps.dtype}")
        control = self._zero_control if control is None else control
        self._check_advance(state, control, dt, steps)
        q = wp.empty((steps + 1, model.joint_coord_count), dtype=model.dtype, device=model.device)
        qd = wp.empty((steps + 1, model.joint_dof_count), dtype=model.dtype, device=model.device)
        if isinstance(self.fused, FusedArticulationStep) and not model.particle_count:
            self.fused.replay(self, state, control, joint_f_steps, dt, q, qd, joint_target_steps)
            self._steps_done(steps)
            return q, qd
        stepped = copy.copy(control)  # its own joint forces (and targets), the other inputs shared
        stepped.joint_f = wp.empty_like(control.joint_f, requires_grad=False)
        if joint_target_steps is not None:
            stepped.joint_target_q = wp.empty_like(control.joint_target_q, requires_grad=False)
        other = model.state(requires_grad=False)
        states = (state, other)
        wp.copy(q, state.joint_q, count=model.joint_coord_count)
        wp.copy(qd, state.joint_qd, count=model.joint_dof_count)
        for k in range(steps):
            wp.copy(stepped.joint_f, joint_f_steps, src_offset=k * model.joint_dof_count, count=model.joint_dof_count)
            if joint_target_steps is not None:
                wp.copy(stepped.joint_target_q, joint_target_steps, src_offset=k * model.joint_dof_count,
                        count=model.joint_dof_count)
            self.step(states[k % 2], states[(k + 1) % 2], stepped, dt)
            after = states[(k + 1) % 2]
            wp.copy(q, after.joint_q, dest_offset=(k + 1) * model.joint_coord_count, count=model.joint_coord_count)
            wp.copy(qd, after.joint_qd, dest_offset=(k + 1) * model.joint_dof_count, count=model.joint_dof_count)
        if steps % 2:
            state.assign(other)
        return q, qd

    def _step_particles(self, state_in: State, state_out: State, control: Control, dt: float):
        """Particle forces (with reactions on bodies) and the symplectic Euler update."""
        if self._prepared_particles is not None and active_tape() is None:
            self._prepared_particles.run(self, state_in, state_out, control, dt, by_fraction=self._advancing)
            return
        launches = force_launches(self.model, state_in.particle_q, state_in.particle_qd, control, dt,
                                  self._friction_smoothing, state_in, state_in.particle_f, self._smoothing,
                                  self.contact_gradient_width)
        for launch in [*launches, integrate_launch(self, state_in, state_out, dt)]:
            launch.run(self.model.device)

    def _neighbor_margin(self) -> float:
        """Gap (m) within which particle pairs are listed: ``GRADIENT_REACH`` gradient widths for
        smoothed contact gradients, and one particle radius for impacts (a pair closing faster than
        that in one step is missed)."""
        margin = float(contact.GRADIENT_REACH) * float(self.contact_gradient_width)
        if self.model.particle_impacts:
            margin = max(margin, self.model.particle_max_radius)
        return margin
