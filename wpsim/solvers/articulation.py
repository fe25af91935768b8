"""One semi-implicit step of articulated rigid bodies in joint coordinates (used by
``SemiImplicitSolver``)."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.tape import active_tape, tape_paused
from wpsim.kernels import articulation, cholesky, couplings, implicit_terms, rigid_contact
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import KernelLaunch
from wpsim.solvers.broad_phase import RigidBroadPhase, contact_margin
from wpsim.solvers.inverse_weights import reference_inverse_weights
from wpsim.solvers.kinematics import ArticulationScratch, launch_kinematics
from wpsim.solvers.prepared_launch import launch_unrecorded
from wpsim.solvers.tendons import add_tendon_forces


class ArticulationStepper:
    """Launch sequence of a rigid-body step: kinematics, applied and contact wrenches,
    composite inertias and bias wrenches, joint-space assembly, Cholesky solve (with a
    custom backward on the tape), joint integration -- seven launches, and four more for
    the penalty contact's broad phase where it runs (``RigidBroadPhase``). With a
    ``SoftContact`` the penalty contact launch is replaced by its Newton solve, which turns
    the unconstrained accelerations into the constrained ones before the integration (and,
    unless its options say otherwise, enforces the joint limits instead of the penalty
    limit springs).

    Scratch arrays are reused while nothing is recorded and allocated per step while a
    ``wp.Tape`` records (the tape reads them at backward time).
    """

    def __init__(self, model, soft_contact=None, broad_phase: RigidBroadPhase | None = None):
        self.model = model
        self.soft_contact = soft_contact
        """A ``SoftContact`` replacing the penalty contact, or None."""
        self._penalty_contact = model.contact_pair_count > 0 and soft_contact is None
        options = None if soft_contact is None else soft_contact.options
        self._implicit_after_solve = options is not None and options.implicit_terms == "after solve"
        """MuJoCo's order of the implicit terms around the soft-constraint solve
        (``kernels.implicit_terms``), else wpsim's (in the solve's matrix)."""
        self._scratch = ArticulationScratch(model, requires_grad=False, implicit_after_solve=self._implicit_after_solve)
        self._limit_gains = ((soft_contact.dof_zeros,) * 2 if options is not None and options.joint_limits
                             else (model.joint_limit_ke, model.joint_limit_kd))
        """(limit_ke, limit_kd) of the joint-space assembly: zeros when the soft-constraint
        solve enforces the limits."""
        self._friction = (soft_contact.dof_zeros if options is not None and options.joint_friction
                          else model.joint_friction)
        """(D,) dry friction of the joint-space assembly: zeros when the soft-constraint solve
        has friction rows."""
        self._equality_rows = (0 if options is None or not options.equalities
                               else 1 + int(options.regularisation == "mujoco"))
        """How the joint couplings' time-constant part and point connections enter the
        joint-space system: 0 as implicit spring-dampers, 1 (2) as equality rows of the
        soft-constraint solve weighed from the mass matrix's diagonal (as MuJoCo weighs them)."""
        self._inverse_weights = (soft_contact.inverse_weights if soft_contact is not None else
                                 (wp.zeros((max(model.body_count, 1), 2), dtype=model.dtype, device=model.device),
                                  wp.zeros(max(model.joint_dof_count, 1), dtype=model.dtype, device=model.device)))
        """(bodies' (B, 2), dofs' (D,)) inverse weights the equality rows read with MuJoCo's weights."""
        self._weight_inputs = None  # (WEIGHT_INPUTS, the weights) of the last reference_inverse_weights
        self._reference = None  # (state, scratch, control) reference_inverse_weights reuses
        self.broad_phase = broad_phase if soft_contact is None else None
        """The penalty contact's per-step ``RigidBroadPhase``, or None (every candidate pair
        each step; a ``SoftContact`` runs its own)."""
        self._all_pairs = wp.array([model.contact_pair_count], dtype=int, device=model.device)
        if self.broad_phase is not None:
            self._near_pairs = (wp.zeros((self.broad_phase.capacity, 2), dtype=int, device=model.device),
                                wp.zeros(1, dtype=int, device=model.device))

    def begin(self, solver, state_in, control, dt: float, scratch: ArticulationScratch | None = None):
        """First half of a step: fill ``state_in.body_q``/``body_qd`` and start
        ``state_in.body_f`` from the applied and rigid contact wrenches (particle contacts
        may add theirs before ``finish``). Returns the step's (scratch, tape) for ``finish``.
        A recorded step gets a new scratch with gradients unless given ``scratch`` (one whose
        gradients the caller zeroes, for a tape it runs backward before the next step)."""
        model = self.model
        device = model.device
        tape = active_tape()
        recording = tape is not None and state_in.joint_q.requires_grad
        if scratch is None:
            scratch = self.recorded_scratch() if recording else self._scratch
        launch_kinematics(model, state_in, scratch)
        self.wrench_launch(state_in, control, scratch).run(device)
        if self._penalty_contact:
            pairs, pair_count = self._penalty_pairs(solver, state_in, recording)
            self.contact_launch(solver, state_in, scratch, pairs, pair_count, dt).run(device)
        return scratch, tape if recording else None

    def recorded_scratch(self) -> ArticulationScratch:
        """A new scratch with gradients for a recorded step (the always-zero damping blocks shared
        where no penalty contact fills them)."""
        return ArticulationScratch(self.model, True, None if self._penalty_contact else self._scratch,
                                   self._implicit_after_solve)

    WEIGHT_INPUTS = ("joint_q", "body_mass", "body_com", "body_inertia", "joint_armature")
    """The model arrays MuJoCo's reference inverse weights depend on (the layout aside)."""

    def reference_inverse_weights(self, solver) -> tuple:
        """MuJoCo's inverse weights of every body and dof (``wpsim.solvers.inverse_weights``) at
        the model's initial joint state, from its mass matrix without the step's damping terms;
        the last call's where ``WEIGHT_INPUTS`` hold the same values (as between the rollouts of
        a fit that changes only damping or friction)."""
        model = self.model
        inputs = [getattr(model, name).numpy() for name in self.WEIGHT_INPUTS]
        last = self._weight_inputs
        if last is not None and all(np.array_equal(a, b) for a, b in zip(inputs, last[0])):
            return last[1]
        if self._reference is None:  # one state, scratch and control for every call
            self._reference = (model.state(requires_grad=False), ArticulationScratch(model, requires_grad=False),
                               model.control())
        state, scratch, control = self._reference
        wp.copy(state.joint_q, model.joint_q)
        launch_kinematics(model, state, scratch)
        self.wrench_launch(state, control, scratch).run(model.device)
        self.subtree_launch(state, scratch, 0.0).run(model.device)
        self.assembly_launch(solver, state, control, scratch, 0.0).run(model.device)
        weights = reference_inverse_weights(model, scratch.mass_matrix.numpy(), scratch.dof_motion.numpy(),
                                            state.body_q.numpy())
        self._weight_inputs = ([a.copy() for a in inputs], weights)
        return weights

    def wrench_launch(self, state_in, control, scratch) -> KernelLaunch:
        """Start the body wrenches from the applied ones and the damping blocks from zero."""
        model = self.model
        return KernelLaunch(
            for_precision(articulation.init_body_wrenches, model.dtype), model.body_count,
            [model.body_mass, model.body_com, model.body_inertia, model.body_origin, model.body_fluid_frame,
             model.fluid, state_in.body_q,
             scratch.body_twist, scratch.body_bias_acc, control.body_f_ext],
            [state_in.body_f, scratch.body_damping, scratch.body_h, scratch.body_J, scratch.body_inertial_bias],
        )

    def contact_launch(self, solver, state_in, scratch, pairs, pair_count, dt: float) -> KernelLaunch:
        """Add the penalty contact wrenches of the listed shape pairs."""
        model = self.model
        real = model.dtype
        return KernelLaunch(
            for_precision(rigid_contact.eval_rigid_contacts, real), len(pairs),
            [
                *penalty_shape_fields(model), model.body_mass, model.body_origin, pairs, pair_count,
                state_in.body_q, state_in.body_qd,
                solver._friction_smoothing, real(model.contact_damping_depth), real(dt), solver.contact_gradient_width,
            ],
            [state_in.body_f, scratch.body_damping],
        )

    def subtree_launch(self, state_in, scratch, dt: float) -> KernelLaunch:
        """Composite inertias, bias wrenches and damping of every body's subtree, and every dof's
        subtree force column."""
        model = self.model
        return KernelLaunch(
            for_precision(articulation.subtree_inertia_and_bias, model.dtype), model.body_count,
            [
                model.body_joint, model.joint_type, model.joint_qd_start, model.joint_dfs_pos, model.joint_dfs_end,
                model.dfs_joint, model.joint_child, model.body_mass, scratch.dof_motion, scratch.body_h,
                scratch.body_J, scratch.body_inertial_bias, state_in.body_f, scratch.body_damping, model.real(dt),
            ],
            [scratch.subtree_mass, scratch.subtree_h, scratch.subtree_J, scratch.subtree_bias, scratch.subtree_damping,
             scratch.dof_subtree_force],
        )

    def assembly_launch(self, solver, state_in, control, scratch, dt: float, matrix=None) -> KernelLaunch:
        """The joint-space matrix (into ``matrix``, scratch.mass_matrix by default) and
        right-hand side of every articulation."""
        model = self.model
        real = model.dtype
        return KernelLaunch(
            for_precision(articulation.assemble_joint_space, real), model.joint_dof_count,
            [
                model.dof_joint, model.joint_articulation, model.articulation_dof_start, model.articulation_H_start,
                model.joint_type, model.joint_child, model.joint_dfs_pos, model.joint_dfs_end, model.joint_q_start,
                model.joint_qd_start, model.joint_armature, model.joint_damping, self._friction, model.joint_stiffness,
                model.joint_spring_ref, model.joint_target_ke,
                model.joint_target_kd, model.joint_limit_lower, model.joint_limit_upper, *self._limit_gains,
                model.joint_f_lower, model.joint_f_upper, model.joint_target_lower, model.joint_target_upper,
                model.joint_drive_force_limit, model.joint_drive_implicit, model.joint_damping_implicit,
                state_in.joint_q, state_in.joint_qd, scratch.dof_motion, scratch.dof_subtree_force,
                scratch.subtree_bias, control.joint_f,
                control.joint_target_q, control.joint_target_qd, solver._friction_smoothing, real(dt),
            ],
            [scratch.mass_matrix if matrix is None else matrix, scratch.rhs, scratch.dof_inertia],
        )

    def integration_launch(self, solver, state_in, state_out, accel, dt: float) -> KernelLaunch:
        """The joint update of every joint from the accelerations ``accel``."""
        model = self.model
        return KernelLaunch(
            for_precision(articulation.integrate_joints, model.dtype), model.joint_count,
            [
                model.joint_type, model.joint_child, model.joint_q_start, model.joint_qd_start, model.body_world,
                state_in.joint_q, state_in.joint_qd, accel, model.real(dt), solver.step_count,
                solver.max_coordinate, solver.max_speed,
            ],
            [state_out.joint_q, state_out.joint_qd, solver.world_fault_step],
        )

    def _penalty_pairs(self, solver, state_in, recording: bool) -> tuple:
        """(pairs, count) the penalty contact evaluates this step: the broad phase's near
        pairs (fresh arrays while a tape records, which reads them at backward time), or
        every candidate pair."""
        if self.broad_phase is None:
            return self.model.contact_pair, self._all_pairs
        if recording:
            pairs = wp.empty((self.broad_phase.capacity, 2), dtype=int, device=self.model.device)
            count = wp.zeros(1, dtype=int, device=self.model.device)
        else:
            pairs, count = self._near_pairs
        self.broad_phase.find(state_in, contact_margin(solver.contact_gradient_width), pairs, count)
        return pairs, count

    def _add_connections(self, scratch, state_in, dt: float):
        """The body connections' implicit spring-dampers (or equality rows) into the joint-space system."""
        model = self.model
        real, device = model.dtype, model.device
        slots = scratch.connection_jacobian.shape[1]
        scratch.connection_rate.zero_()
        scratch.connection_inverse_mass.zero_()
        common = [model.connection_body, model.connection_point_a, model.connection_point_b]
        wp.launch(
            for_precision(couplings.connection_jacobian, real), dim=(model.connection_count, slots),
            inputs=[*common, model.body_joint, model.joint_articulation, model.joint_dfs_pos, model.joint_dfs_end,
                    model.dof_joint, model.articulation_dof_start, model.body_origin, state_in.body_q,
                    state_in.joint_qd, scratch.dof_motion, scratch.dof_inertia],
            outputs=[scratch.connection_jacobian, scratch.connection_rate, scratch.connection_inverse_mass],
            device=device,
        )
        wp.launch(
            for_precision(couplings.connection_force, real), dim=model.connection_count,
            inputs=[*common, model.connection_rotation, model.connection_holds_rotation, model.connection_time_constant,
                    model.connection_damping_ratio, model.connection_solimp, model.body_origin, model.gravity,
                    state_in.body_q, scratch.body_twist, scratch.body_bias_acc, scratch.connection_rate,
                    scratch.connection_inverse_mass, self._inverse_weights[0], real(dt), self._equality_rows],
            outputs=[scratch.connection_force, scratch.connection_slope],
            device=device,
        )
        wp.launch(
            for_precision(couplings.add_body_connections, real), dim=(model.connection_count, slots, slots),
            inputs=[model.connection_body, model.body_joint, model.joint_articulation, model.articulation_dof_start,
                    model.articulation_H_start, scratch.connection_jacobian, scratch.connection_force,
                    scratch.connection_slope],
            outputs=[scratch.mass_matrix, scratch.rhs],
            device=device,
        )

    def finish(self, solver, begun: tuple, state_in, state_out, control, dt: float, solution: wp.array | None = None):
        """Second half of a step: joint accelerations from the wrenches in
        ``state_in.body_f``, then the joint update into ``state_out``. ``solution``: the
        soft-constraint solve's accelerations, already found (``SoftContact.solve``)."""
        model = self.model
        real, device = model.dtype, model.device
        scratch, tape = begun
        self.subtree_launch(state_in, scratch, dt).run(device)
        after = self._implicit_after_solve
        self.assembly_launch(solver, state_in, control, scratch, dt, scratch.damped_matrix if after else None).run(
            device)
        if after:
            self._split_implicit_terms(state_in, control, scratch, solver, dt)
        if model.coupling_count:
            wp.launch(
                for_precision(couplings.add_joint_couplings, real),
                dim=model.coupling_count,
                inputs=[
                    model.coupling_term_start, model.coupling_term_dof, model.coupling_term_coef, model.coupling_term_power,
                    model.coupling_rest,
                    model.coupling_time_constant, model.coupling_damping_ratio, model.coupling_ke, model.coupling_kd,
                    model.coupling_solimp, model.coupling_drive_ke, model.coupling_drive_kd,
                    model.coupling_drive_force_limit, model.coupling_drive_implicit,
                    model.dof_joint, model.joint_articulation, model.joint_q_start, model.joint_dfs_pos,
                    model.joint_dfs_end, model.articulation_dof_start, model.articulation_H_start, state_in.joint_q,
                    state_in.joint_qd, scratch.dof_inertia, self._inverse_weights[1], control.coupling_target, real(dt), self._equality_rows, int(after),
                ],
                outputs=[scratch.mass_matrix, scratch.rhs, scratch.damped_matrix, scratch.coupling_implicit],
                device=device,
            )
        if model.connection_count:
            self._add_connections(scratch, state_in, dt)
        if model.tendon_count:
            add_tendon_forces(model, scratch, state_in, control)
        cholesky_solve(model, scratch.mass_matrix, scratch.rhs, scratch.qdd, scratch.factor, scratch.adjoint, tape)
        accel = scratch.qdd
        if self.soft_contact is not None:
            accel = self.soft_contact.solve(scratch, state_in, tape, solver.step_count, solution)
            with tape_paused():  # where the next solve starts: no gradient flows through it
                wp.copy(state_out.joint_qdd_warm_start, accel)
        if after:
            accel = self._implicit_solve(scratch, state_in, accel, tape)
        self.integration_launch(solver, state_in, state_out, accel, dt).run(device)

    def _split_implicit_terms(self, state_in, control, scratch, solver, dt: float):
        """scratch.mass_matrix from scratch.damped_matrix without its implicit terms, which go
        to scratch.implicit (``implicit_terms.split_implicit_terms``)."""
        model = self.model
        wp.launch(
            for_precision(implicit_terms.split_implicit_terms, model.dtype), model.joint_dof_count,
            inputs=[model.dof_joint, model.joint_articulation, model.articulation_dof_start, model.articulation_H_start,
                    model.joint_type, model.joint_q_start, model.joint_damping, self._friction, model.joint_stiffness,
                    model.joint_spring_ref, model.joint_target_ke, model.joint_target_kd, model.joint_limit_lower,
                    model.joint_limit_upper, *self._limit_gains, model.joint_target_lower, model.joint_target_upper,
                    model.joint_drive_force_limit, model.joint_drive_implicit, model.joint_damping_implicit, state_in.joint_q, state_in.joint_qd,
                    scratch.damped_matrix, control.joint_target_q, control.joint_target_qd,
                    solver._friction_smoothing, model.real(dt)],
            outputs=[scratch.mass_matrix, scratch.implicit], device=model.device)

    def _implicit_solve(self, scratch, state_in, accel: wp.array, tape) -> wp.array:
        """The step's accelerations from the solve's ``accel`` a_c: a_c - (M + I)^-1 (I a_c)
        (``kernels.implicit_terms``; I holds the joint couplings' drive terms too)."""
        model = self.model
        real, device, dofs = model.dtype, model.device, model.joint_dof_count
        wp.launch(for_precision(implicit_terms.implicit_force, real), dofs, inputs=[scratch.implicit, accel],
                  outputs=[scratch.implicit_force], device=device)
        if model.coupling_count:
            wp.launch(for_precision(couplings.coupling_implicit_forces, real), model.coupling_count,
                      inputs=[model.coupling_term_start, model.coupling_term_dof, model.coupling_term_coef,
                              model.coupling_term_power, model.dof_joint, model.joint_q_start, model.joint_dfs_pos,
                              model.joint_dfs_end, state_in.joint_q, scratch.coupling_implicit, accel],
                      outputs=[scratch.implicit_force], device=device)
        cholesky_solve(model, scratch.damped_matrix, scratch.implicit_force, scratch.correction, scratch.damped_factor,
                       scratch.adjoint, tape)
        wp.launch(for_precision(implicit_terms.corrected_accelerations, real), dofs,
                  inputs=[accel, scratch.correction], outputs=[scratch.implicit_accel], device=device)
        return scratch.implicit_accel


def penalty_shape_fields(model) -> list:
    """The shape fields the penalty contact reads, in its kernels' argument order."""
    return [
        model.shape_kind, model.shape_body, model.shape_transform, model.shape_size, model.shape_ke, model.shape_kd,
        model.shape_mu, model.shape_point_start, model.shape_point_count, model.shape_points,
        model.shape_hull_points, model.shape_hull_point_start, model.shape_hull_point_count,
        model.shape_plane_normal, model.shape_plane_offset, model.shape_plane_start, model.shape_plane_count,
    ]


def cholesky_solve(model, matrix: wp.array, rhs: wp.array, out: wp.array, factor: wp.array, work: wp.array, tape,
                   blocks: tuple | None = None):
    """out = matrix^-1 rhs per articulation (dense symmetric positive definite blocks laid out
    by ``articulation_H_start``; ``factor`` receives the Cholesky factors, ``work`` is
    scratch). ``blocks``: other (dof_start, H_start) block layouts, e.g. contact islands. On
    ``tape`` its backward is one transposed solve (``cholesky_solve_adjoint``)."""
    starts = (model.articulation_dof_start, model.articulation_H_start) if blocks is None else blocks
    launch_unrecorded(for_precision(cholesky.cholesky_solve, model.dtype), starts[0].shape[0] - 1,
                      [*starts, matrix, rhs], [factor, out], model.device)
    if tape is not None:
        record_cholesky_backward(model, starts, matrix, rhs, out, factor, work, tape)


def cholesky_adjoint_launch(model, starts: tuple, matrix: wp.array, rhs: wp.array, out: wp.array, factor: wp.array,
                            work: wp.array) -> KernelLaunch:
    """The backward of ``cholesky_solve`` as a launch: one transposed solve
    (``cholesky_solve_adjoint``) from ``out.grad`` into ``matrix.grad`` and ``rhs.grad``."""
    return KernelLaunch(for_precision(cholesky.cholesky_solve_adjoint, model.dtype), starts[0].shape[0] - 1,
                        [*starts, factor, out, out.grad], [work, matrix.grad, rhs.grad])


def record_cholesky_backward(model, starts: tuple, matrix: wp.array, rhs: wp.array, out: wp.array, factor: wp.array,
                             work: wp.array, tape):
    """Put the backward of ``cholesky_solve`` (``cholesky_adjoint_launch``) on ``tape``."""
    launch = cholesky_adjoint_launch(model, starts, matrix, rhs, out, factor, work)

    def backward():
        wp.launch(launch.kernel, dim=launch.dim, inputs=launch.inputs, outputs=launch.outputs, device=model.device,
                  record_tape=False)

    tape.record_func(backward=backward, arrays=[matrix, rhs, out])
