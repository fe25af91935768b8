"""The whole semi-implicit step of an articulation in one thread: forward kinematics, applied
and penalty contact wrenches, composite inertias and bias wrenches, the joint-space system,
its Cholesky solve and the joint update, the same ``@wp.func`` code the staged kernels of
``articulation`` and ``rigid_contact`` run, in the same order per articulation (so the two
paths agree bitwise on the CPU), and optionally several steps in a row.

For articulations whose penalty contact pairs each touch that articulation alone (the
other shape static); without joint couplings, body connections or soft-constraint contact
(``wpsim.solvers.fused_articulation`` checks this).
"""

import warp as wp

from .articulation import (
    articulation_fk,
    factor_and_solve,
    integrate_joint,
    joint_space_row,
    start_body_wrench,
    subtree_sums,
    vec6,
)
from .generic import kernel, mat33, transform, vec3
from .rigid_contact import pair_contact_wrenches


@kernel(enable_backward=False)
def articulation_steps(
    articulation_start: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    dfs_joint: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_parent: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    joint_X_p: wp.array(dtype=transform),
    joint_X_c: wp.array(dtype=transform),
    joint_axis: wp.array(dtype=vec3),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    joint_armature: wp.array(dtype=wp.Float),
    joint_damping: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    joint_stiffness: wp.array(dtype=wp.Float),
    joint_spring_ref: wp.array(dtype=wp.Float),
    joint_target_ke: wp.array(dtype=wp.Float),
    joint_target_kd: wp.array(dtype=wp.Float),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_limit_ke: wp.array(dtype=wp.Float),
    joint_limit_kd: wp.array(dtype=wp.Float),
    joint_f_lower: wp.array(dtype=wp.Float),
    joint_f_upper: wp.array(dtype=wp.Float),
    joint_target_lower: wp.array(dtype=wp.Float),
    joint_target_upper: wp.array(dtype=wp.Float),
    joint_drive_force_limit: wp.array(dtype=wp.Float),
    body_joint: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    body_com: wp.array(dtype=vec3),
    body_inertia: wp.array(dtype=mat33),
    body_origin: wp.array(dtype=vec3),
    gravity: wp.array(dtype=vec3),
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_ke: wp.array(dtype=wp.Float),
    shape_kd: wp.array(dtype=wp.Float),
    shape_mu: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
    shape_point_count: wp.array(dtype=int),
    shape_points: wp.array(dtype=vec3),
    shape_hull_points: wp.array(dtype=vec3),
    shape_hull_point_start: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    shape_plane_normal: wp.array(dtype=vec3),
    shape_plane_offset: wp.array(dtype=wp.Float),
    shape_plane_start: wp.array(dtype=int),
    shape_plane_count: wp.array(dtype=int),
    articulation_pair_start_in: wp.array(dtype=int),
    articulation_pair_in: wp.array2d(dtype=int),
    articulation_pair_count_in: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    body_f_ext: wp.array(dtype=vec6),
    joint_f: wp.array(dtype=wp.Float),
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    first_articulation: int,
    steps: int,
    final_kinematics: int,
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    gradient_width: wp.Float,
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    body_q_out: wp.array(dtype=transform),
    body_qd_out: wp.array(dtype=vec6),
    body_f_out: wp.array(dtype=vec6),
    body_twist_out: wp.array(dtype=vec6),
    body_bias_acc_out: wp.array(dtype=vec6),
    dof_motion_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
    subtree_mass_out: wp.array(dtype=wp.Float),
    subtree_h_out: wp.array(dtype=vec3),
    subtree_J_out: wp.array(dtype=mat33),
    subtree_bias_out: wp.array(dtype=vec6),
    subtree_damping_out: wp.array2d(dtype=mat33),
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    dof_inertia_out: wp.array(dtype=wp.Float),
    factor_out: wp.array(dtype=wp.Float),
    qdd_out: wp.array(dtype=wp.Float),
    joint_q_out: wp.array(dtype=wp.Float),
    joint_qd_out: wp.array(dtype=wp.Float),
    world_fault_step_out: wp.array(dtype=int),
):
    """One thread per articulation (``first_articulation + tid``): ``steps`` semi-implicit
    steps of ``dt`` seconds, numbered from ``step`` for the fault flags, from
    joint_q_in/joint_qd_in into joint_q_out/joint_qd_out. With ``steps`` > 1 the state
    arrays are given as both input and output (the update runs in place; every step reads
    the one before). ``articulation_pair_in`` lists the penalty contact pairs grouped by
    articulation (rows ``articulation_pair_start_in[a]`` to ``[a + 1]``). The scratch outputs
    hold the last step's intermediates, with body poses and velocities of the state that step
    started from; ``final_kinematics`` = 1 refills body_q_out/body_qd_out (and the twists,
    bias accelerations and motion columns) from the final joint state."""
    a = first_articulation + wp.tid()
    p0 = articulation_start[a]
    p1 = articulation_start[a + 1]
    for s in range(steps + final_kinematics):
        articulation_fk(a, articulation_start, dfs_joint, joint_type, joint_parent, joint_child, joint_X_p, joint_X_c,
                        joint_axis, joint_q_start, joint_qd_start, body_origin, gravity, joint_q_in, joint_qd_in,
                        body_q_out, body_qd_out, body_twist_out, body_bias_acc_out, dof_motion_out)
        if s == steps:
            break
        for pos in range(p0, p1):
            start_body_wrench(joint_child[dfs_joint[pos]], body_com, body_origin, body_q_out, body_f_ext, body_f_out,
                              body_damping_out)
        for i in range(articulation_pair_start_in[a], articulation_pair_start_in[a + 1]):
            pair_contact_wrenches(i, shape_kind, shape_body, shape_transform, shape_size, shape_ke, shape_kd, shape_mu,
                                  shape_point_start, shape_point_count, shape_points, shape_hull_points,
                                  shape_hull_point_start, shape_hull_point_count, shape_plane_normal,
                                  shape_plane_offset, shape_plane_start, shape_plane_count, body_mass, body_origin,
                                  articulation_pair_in, articulation_pair_count_in, body_q_out, body_qd_out,
                                  friction_smoothing, damping_depth, dt, gradient_width, body_f_out, body_damping_out)
        for pos in range(p0, p1):
            subtree_sums(joint_child[dfs_joint[pos]], body_joint, joint_dfs_pos, joint_dfs_end, dfs_joint, joint_child,
                         body_mass, body_com, body_inertia, body_origin, body_q_out, body_twist_out,
                         body_bias_acc_out, body_f_out, body_damping_out, subtree_mass_out, subtree_h_out,
                         subtree_J_out, subtree_bias_out, subtree_damping_out)
        for i in range(articulation_dof_start[a], articulation_dof_start[a + 1]):
            joint_space_row(i, dof_joint, joint_articulation, articulation_dof_start, articulation_H_start, joint_type,
                            joint_child, joint_dfs_pos, joint_dfs_end, joint_q_start, joint_qd_start, joint_armature,
                            joint_damping, joint_friction, joint_stiffness, joint_spring_ref, joint_target_ke,
                            joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke, joint_limit_kd,
                            joint_f_lower, joint_f_upper, joint_target_lower, joint_target_upper,
                            joint_drive_force_limit, joint_q_in, joint_qd_in, dof_motion_out, subtree_mass_out,
                            subtree_h_out, subtree_J_out, subtree_bias_out, subtree_damping_out, joint_f,
                            joint_target_q, joint_target_qd, friction_smoothing, dt, mass_matrix_out, rhs_out,
                            dof_inertia_out)
        factor_and_solve(a, articulation_dof_start, articulation_H_start, mass_matrix_out, rhs_out, factor_out, qdd_out)
        for pos in range(p0, p1):
            integrate_joint(dfs_joint[pos], joint_type, joint_child, joint_q_start, joint_qd_start, body_world,
                            joint_q_in, joint_qd_in, qdd_out, dt, step + s, max_coordinate, max_speed, joint_q_out,
                            joint_qd_out, world_fault_step_out)
