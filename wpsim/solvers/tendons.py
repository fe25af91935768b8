"""Spatial tendons in the articulation step: their lengths, rates and Jacobians
(``kernels.tendons.spatial_tendon_jacobian``) and their forces on the joint-space right-hand
side; ``tendon_kinematics`` for any state."""

from __future__ import annotations

import warp as wp

from wpsim.kernels import tendons
from wpsim.kernels.generic import for_precision
from wpsim.solvers.kinematics import posed


def launch_tendon_jacobian(model, body_q, joint_qd, dof_motion, length, rate, jacobian):
    """Fill ``length`` (O,) m, ``rate`` (O,) m/s and ``jacobian`` (O, max dofs) m per unit dof
    (zeroed here) of the spatial tendons at poses ``body_q`` with dof motion columns
    ``dof_motion`` and rates ``joint_qd`` (recorded on an active tape)."""
    for array in (length, rate, jacobian):
        array.zero_()
    wp.launch(for_precision(tendons.spatial_tendon_jacobian, model.dtype),
              dim=model.tendon_count,
              inputs=[model.tendon_segment_start, model.tendon_articulation, model.segment_body, model.segment_point,
                      model.segment_wrap_kind, model.segment_wrap_body, model.segment_wrap_transform,
                      model.segment_wrap_radius, model.segment_side_body, model.segment_side_point, model.body_joint,
                      model.body_origin, model.joint_dfs_pos, model.joint_dfs_end, model.dof_joint,
                      model.articulation_dof_start, body_q, joint_qd, dof_motion],
              outputs=[length, rate, jacobian], device=model.device)


def add_tendon_forces(model, scratch, state_in, control):
    """J^T f of every spatial tendon's spring, damper and drive into ``scratch.rhs``
    (``kernels.tendons.spatial_tendon_forces``), after its Jacobian at ``state_in``."""
    launch_tendon_jacobian(model, state_in.body_q, state_in.joint_qd, scratch.dof_motion, scratch.tendon_length,
                           scratch.tendon_rate, scratch.tendon_jacobian)
    wp.launch(for_precision(tendons.spatial_tendon_forces, model.dtype),
              dim=(model.tendon_count, scratch.tendon_jacobian.shape[1]),
              inputs=[model.tendon_articulation, model.tendon_stiffness, model.tendon_spring_range, model.tendon_damping,
                      model.tendon_drive_ke, model.tendon_drive_kd, model.tendon_drive_force_limit,
                      model.tendon_target_range, model.articulation_dof_start, scratch.tendon_length,
                      scratch.tendon_rate, scratch.tendon_jacobian, control.tendon_target],
              outputs=[scratch.rhs], device=model.device)


def tendon_kinematics(model, state) -> tuple:
    """(lengths (O,) m, rates (O,) m/s, Jacobians (O, max dofs) m per unit of each dof of the
    tendon's articulation, in its dof order) of the spatial tendons in ``state``, from its joint
    coordinates and velocities (MuJoCo's ten_length, ten_velocity, ten_J), as NumPy arrays."""
    real = model.dtype
    poses, scratch = posed(model, state, False)
    length = wp.zeros(model.tendon_count, dtype=real, device=model.device)
    rate = wp.zeros_like(length)
    jacobian = wp.zeros((model.tendon_count, max(model.max_articulation_dofs, 1)), dtype=real, device=model.device)
    launch_tendon_jacobian(model, poses.body_q, state.joint_qd, scratch.dof_motion, length, rate, jacobian)
    return length.numpy(), rate.numpy(), jacobian.numpy()
