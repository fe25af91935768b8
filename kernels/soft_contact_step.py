"""The whole soft-constraint contact step of a contact island in one thread: its joint-space
system (``articulation_step.articulation_dynamics``, without penalty contact), the
unconstrained accelerations, the contact rows of its pairs, the Newton solve with the exact
line search and the convergence test, and the joint update -- the functions the staged
launches of ``soft_contact`` run, in their order, so the two schedules agree bitwise on the CPU
where each island is one articulation (elsewhere to the solve's tolerance: the staged islands
are those of each step's contacts, so articulations apart converge on their own there).

One thread per contact island: the articulations that some candidate pair joins, fixed when
the model is built (an articulation alone where its pairs touch only static shapes or
itself), consecutive in the model (``wpsim.solvers.fused_soft_contact`` checks this). No
host decision per step or iteration: the loop exits in the kernel, and each world's
iterations and unconverged steps are kept on the device.
"""

import warp as wp

from .articulation import articulation_fk, integrate_joint, vec6
from .articulation_step import articulation_dynamics, record_joint_state
from .cholesky import factor_and_solve, triangular_solves
from .couplings import add_joint_coupling, coupling_implicit_force
from .generic import kernel, mat33, quat, transform, vec3
from .implicit_terms import implicit_term
from .soft_contact import EDGES, pair_rows, slot_parameters, slot_times
from .soft_contact_newton import (
    any_slot,
    island_gradient,
    island_hessian,
    island_line_search,
    step_ratio,
    touching_pair_list,
)


@wp.func
def articulation_violations(
    a: int,
    articulation_contact_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_aref: wp.array(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    side_column: int,
    row_violation_out: wp.array(dtype=wp.Float),
):
    """The violations J_r a - aref_r of the rows of articulation ``a``'s pairs in contact
    (``touching_pairs``) at ``accel`` (0 for their rows not in contact), as ``row_violation``
    gives them, a slot's four rows at once; the rows of the other pairs are not read."""
    start = articulation_contact_pair_start[a]
    for entry in range(start, start + touching_pair_count[a]):
        pair = touching_pairs[entry]
        zero = row_aref[0] * type(row_aref[0])(0.0)
        for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
            times = wp.vector(zero, zero, zero, zero)
            active = row_weight[first] != zero  # a slot's edges share its weight
            if active:
                times = slot_times(first, pair, pair_dof, pair_dof_count, side_column, row_jacobian, accel)
            for e in range(EDGES):
                x = zero
                if active:
                    x = times[e] - row_aref[first + e]
                row_violation_out[first + e] = x


@wp.func
def contact_solve(
    island: int,
    world: int,
    step: int,
    dof_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    articulation_contact_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    island_dof_start: wp.array(dtype=int),
    island_H_start: wp.array(dtype=int),
    dof_slot: wp.array(dtype=int),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    mass_matrix: wp.array(dtype=wp.Float),
    qdd: wp.array(dtype=wp.Float),
    warm_start_accel: wp.array(dtype=wp.Float),
    dof_row_settings: wp.array2d(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    impedance: wp.Float,
    mujoco_weights: int,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    iterations: int,
    fixed_iterations: int,
    warm_start: int,
    row_aref: wp.array(dtype=wp.Float),
    row_violation_out: wp.array(dtype=wp.Float),
    row_step_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    dof_curvature_out: wp.array(dtype=wp.Float),
    gradient_out: wp.array(dtype=wp.Float),
    hessian_out: wp.array(dtype=wp.Float),
    newton_factor_out: wp.array(dtype=wp.Float),
    newton_step_out: wp.array(dtype=wp.Float),
    accel_out: wp.array(dtype=wp.Float),
    world_contact_iterations_out: wp.array(dtype=int),
    world_unconverged_steps_out: wp.array(dtype=int),
    world_first_unconverged_out: wp.array(dtype=int),
    world_worst_residual_out: wp.array(dtype=wp.Float),
):
    """Island ``island``'s constrained accelerations into accel_out from the unconstrained
    ``qdd``, by the staged solve's Newton iterations (its articulations consecutive, so that
    its dofs are the model's d0 to d0 + n in order: ``dof_slot`` is d for dof d) from the
    warm start (``warm_start`` = 1: the least-cost point on the line from ``qdd`` through
    ``warm_start_accel``) or ``qdd``, stopping where the
    applied step is within ``tolerance`` (``fixed_iterations``: after ``iterations``); the
    iterations and, above the tolerance at the cap, the unconverged step go to ``world``'s
    health entries."""
    d0 = island_dof_start[island]
    n = island_dof_start[island + 1] - d0
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = impedance * type(impedance)(0.0)
    for i in range(n):
        accel_out[d0 + i] = qdd[d0 + i]
    residual = zero
    done = int(0)
    first = int(0)
    if warm_start != 0:
        first = -1  # pass -1 moves from qdd along qdd - warm_start_accel, then the Newton iterations
    for k in range(first, iterations):
        for e in range(e0, e1):
            articulation_violations(island_articulations[e], articulation_contact_pair_start, touching_pairs,
                                    touching_pair_count, pair_row_start, pair_dof, pair_dof_count, row_jacobian,
                                    row_aref, row_weight, accel_out, side_column, row_violation_out)
        ascent_alpha = zero + type(zero)(1.0)
        if k < 0:
            ascent_alpha = zero  # no better point on that line: stay at qdd
            for i in range(n):
                newton_step_out[d0 + i] = qdd[d0 + i] - warm_start_accel[d0 + i]
        else:
            changed = island_gradient(island, dof_joint, articulation_dof_start, articulation_H_start, joint_type,
                                      joint_q_start, joint_limit_lower, joint_limit_upper, joint_friction,
                                      island_articulation_start, island_articulations,
                                      articulation_contact_pair_start, touching_pairs, touching_pair_count,
                                      pair_row_start, pair_dof, pair_dof_count, mass_matrix, qdd, row_jacobian,
                                      row_weight, row_violation_out, joint_q, joint_qd, accel_out, dof_row_settings,
                                      side_column, limits, friction_rows, impedance, mujoco_weights, gradient_out,
                                      row_curvature_out, dof_curvature_out)
            if k == 0 or changed != 0:
                island_hessian(island, articulation_dof_start, articulation_H_start, dof_slot, island_dof_start,
                               island_H_start, island_articulation_start, island_articulations,
                               articulation_contact_pair_start, touching_pairs, touching_pair_count,
                               pair_row_start, pair_dof, pair_dof_count, mass_matrix, row_jacobian, row_weight,
                               row_curvature_out, dof_curvature_out, side_column, impedance, hessian_out)
                factor_and_solve(island, island_dof_start, island_H_start, hessian_out, gradient_out,
                                 newton_factor_out, newton_step_out)
            else:  # the same rows push as at the last factorisation: the Hessian and its factor are unchanged
                triangular_solves(n, island_H_start[island], d0, newton_factor_out, gradient_out, newton_step_out)
        alpha = island_line_search(
            island, dof_joint, articulation_dof_start, articulation_H_start, joint_type, joint_q_start,
            joint_limit_lower, joint_limit_upper, joint_friction, island_dof_start,
            island_articulation_start, island_articulations, articulation_contact_pair_start,
            touching_pairs, touching_pair_count, pair_row_start, pair_dof, pair_dof_count, mass_matrix,
            qdd, row_jacobian, row_weight, row_violation_out, joint_q, joint_qd, accel_out, newton_step_out,
            dof_row_settings, side_column, limits, friction_rows, mujoco_weights, tolerance,
            slope_tolerance, ascent_alpha, row_step_out)
        for i in range(n):
            accel_out[d0 + i] = accel_out[d0 + i] - alpha * newton_step_out[d0 + i]
        if k >= 0:
            residual = step_ratio(e0, e1, island_articulations, articulation_dof_start, newton_step_out, accel_out)
            wp.atomic_max(world_contact_iterations_out, world, k + 1)
            if fixed_iterations == 0 and residual <= tolerance:
                done = 1
                break
    if fixed_iterations == 0 and done == 0:
        wp.atomic_add(world_unconverged_steps_out, world, 1)
        wp.atomic_min(world_first_unconverged_out, world, step)
        wp.atomic_max(world_worst_residual_out, world, residual)


@kernel(enable_backward=False)
def soft_contact_steps(
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
    joint_drive_implicit: wp.array(dtype=wp.Float),
    joint_damping_implicit: wp.array(dtype=wp.Float),
    body_joint: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    body_com: wp.array(dtype=vec3),
    body_inertia: wp.array(dtype=mat33),
    body_origin: wp.array(dtype=vec3),
    gravity: wp.array(dtype=vec3),
    fluid: wp.array2d(dtype=wp.Float),
    body_fluid_frame: wp.array(dtype=quat),
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
    shape_bound_centre: wp.array(dtype=vec3),
    shape_bound_half: wp.array(dtype=vec3),
    shape_solref: wp.array2d(dtype=wp.Float),
    shape_solimp: wp.array2d(dtype=wp.Float),
    shape_solmix: wp.array(dtype=wp.Float),
    shape_priority: wp.array(dtype=int),
    shape_condim: wp.array(dtype=int),
    shape_rotational_mu: wp.array2d(dtype=wp.Float),
    shape_margin: wp.array(dtype=wp.Float),
    coupling_term_start: wp.array(dtype=int),
    coupling_term_dof: wp.array(dtype=int),
    coupling_term_coef: wp.array(dtype=wp.Float),
    coupling_term_power: wp.array(dtype=int),
    coupling_rest: wp.array(dtype=wp.Float),
    coupling_time_constant: wp.array(dtype=wp.Float),
    coupling_damping_ratio: wp.array(dtype=wp.Float),
    coupling_ke: wp.array(dtype=wp.Float),
    coupling_kd: wp.array(dtype=wp.Float),
    coupling_solimp: wp.array2d(dtype=wp.Float),
    coupling_drive_ke: wp.array(dtype=wp.Float),
    coupling_drive_kd: wp.array(dtype=wp.Float),
    coupling_drive_force_limit: wp.array(dtype=wp.Float),
    coupling_drive_implicit: wp.array(dtype=wp.Float),
    articulation_pair_start_in: wp.array(dtype=int),
    articulation_pair_in: wp.array2d(dtype=int),
    articulation_pair_count_in: wp.array(dtype=int),
    assembly_friction_in: wp.array(dtype=wp.Float),
    contact_pair_in: wp.array2d(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    pair_articulation_in: wp.array(dtype=int),
    articulation_contact_pair_start_in: wp.array(dtype=int),
    articulation_contact_pairs_in: wp.array(dtype=int),
    island_articulation_start_in: wp.array(dtype=int),
    island_articulations_in: wp.array(dtype=int),
    island_dof_start_in: wp.array(dtype=int),
    island_H_start_in: wp.array(dtype=int),
    dof_slot_in: wp.array(dtype=int),
    body_inverse_weight_in: wp.array2d(dtype=wp.Float),
    dof_row_settings_in: wp.array2d(dtype=wp.Float),
    articulation_coupling_start_in: wp.array(dtype=int),
    articulation_couplings_in: wp.array(dtype=int),
    dof_inverse_weight_in: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    joint_qdd_warm_start_in: wp.array(dtype=wp.Float),
    joint_f_steps_in: wp.array2d(dtype=wp.Float),
    joint_target_q_steps_in: wp.array2d(dtype=wp.Float),
    body_f_ext: wp.array(dtype=vec6),
    joint_target_qd: wp.array(dtype=wp.Float),
    coupling_target: wp.array(dtype=wp.Float),
    first_island: int,
    steps: int,
    final_kinematics: int,
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    gradient_width: wp.Float,
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    side_column: int,
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    impedance_min: wp.Float,
    impedance_width: wp.Float,
    impedance_midpoint: wp.Float,
    impedance_power: wp.Float,
    mujoco_weights: int,
    impratio: wp.Float,
    friction_mixing: int,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    iterations: int,
    fixed_iterations: int,
    warm_start: int,
    implicit_after_solve: int,
    equality_rows: int,
    replay: int,
    target_rows: int,
    body_q_out: wp.array(dtype=transform),
    body_qd_out: wp.array(dtype=vec6),
    body_f_out: wp.array(dtype=vec6),
    body_twist_out: wp.array(dtype=vec6),
    body_bias_acc_out: wp.array(dtype=vec6),
    dof_motion_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
    body_h_out: wp.array(dtype=vec3),
    body_J_out: wp.array(dtype=mat33),
    body_inertial_bias_out: wp.array(dtype=vec6),
    subtree_mass_out: wp.array(dtype=wp.Float),
    subtree_h_out: wp.array(dtype=vec3),
    subtree_J_out: wp.array(dtype=mat33),
    subtree_bias_out: wp.array(dtype=vec6),
    subtree_damping_out: wp.array2d(dtype=mat33),
    dof_subtree_force_out: wp.array(dtype=vec6),
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    dof_inertia_out: wp.array(dtype=wp.Float),
    factor_out: wp.array(dtype=wp.Float),
    qdd_out: wp.array(dtype=wp.Float),
    joint_q_out: wp.array(dtype=wp.Float),
    joint_qd_out: wp.array(dtype=wp.Float),
    world_fault_step_out: wp.array(dtype=int),
    accel_out: wp.array(dtype=wp.Float),
    row_jacobian_out: wp.array2d(dtype=wp.Float),
    row_velocity_out: wp.array(dtype=wp.Float),
    row_inverse_mass_out: wp.array(dtype=wp.Float),
    row_distance_out: wp.array(dtype=wp.Float),
    row_in_contact_out: wp.array(dtype=wp.Float),
    row_aref_out: wp.array(dtype=wp.Float),
    row_weight_out: wp.array(dtype=wp.Float),
    row_violation_out: wp.array(dtype=wp.Float),
    row_step_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    touching_pairs_out: wp.array(dtype=int),
    touching_pair_count_out: wp.array(dtype=int),
    dof_curvature_out: wp.array(dtype=wp.Float),
    gradient_out: wp.array(dtype=wp.Float),
    hessian_out: wp.array(dtype=wp.Float),
    newton_factor_out: wp.array(dtype=wp.Float),
    newton_step_out: wp.array(dtype=wp.Float),
    world_contact_iterations_out: wp.array(dtype=int),
    world_unconverged_steps_out: wp.array(dtype=int),
    world_first_unconverged_out: wp.array(dtype=int),
    world_worst_residual_out: wp.array(dtype=wp.Float),
    damped_matrix_out: wp.array(dtype=wp.Float),
    damped_factor_out: wp.array(dtype=wp.Float),
    implicit_out: wp.array(dtype=wp.Float),
    implicit_force_out: wp.array(dtype=wp.Float),
    correction_out: wp.array(dtype=wp.Float),
    coupling_implicit_out: wp.array(dtype=wp.Float),
    joint_qdd_warm_start_out: wp.array(dtype=wp.Float),
    joint_q_steps_out: wp.array2d(dtype=wp.Float),
    joint_qd_steps_out: wp.array2d(dtype=wp.Float),
):
    """One thread per contact island (``first_island + tid``; an island's articulations are
    consecutive, ``wpsim.solvers.fused_soft_contact``): ``steps`` semi-implicit
    steps of ``dt`` seconds with soft-constraint contact, the joint forces of step s row
    s * ``replay`` of ``joint_f_steps_in`` and the drives' position targets row s * ``target_rows`` of
    ``joint_target_q_steps_in`` (0: row 0 at every step; 1: a row per step; with ``replay`` 1
    the joint coordinates and rates before step 0 and after every step go to rows
    0..steps of joint_q_steps_out / joint_qd_steps_out, as ``articulation_replay`` records
    them), numbered from ``step`` for the fault flags and the contact health, from joint_q_in/joint_qd_in into
    joint_q_out/joint_qd_out (in place with ``steps`` > 1, as ``articulation_steps``). Per
    step: each articulation's joint-space system (``articulation_pair_in`` lists no penalty pairs; the limit
    gains and ``assembly_friction_in`` are zero where the solve has rows for them) with its joint
    couplings (``articulation_couplings_in``; ``couplings.add_joint_coupling``, ``equality_rows``
    as the staged step's), its unconstrained
    accelerations into qdd_out, the rows of the articulation's contact pairs (those of
    ``articulation_contact_pairs_in`` whose shape a it moves; reference accelerations and
    weights only for the pairs with a slot in contact, listed in touching_pairs_out: the solve
    visits no other), the island's ``contact_solve`` into accel_out from the warm start
    (``warm_start`` = 1) or the unconstrained accelerations, which it keeps in
    joint_qdd_warm_start_out for the next step, with ``implicit_after_solve`` MuJoCo's order of
    the implicit terms (``kernels.implicit_terms``: the solve's matrix without them, into
    mass_matrix_out, the assembled one in damped_matrix_out), the joint update. The
    scratch outputs hold the last step's intermediates; ``final_kinematics`` = 1 refills
    the body poses from the final joint state."""
    island = first_island + wp.tid()
    a0 = island_articulations_in[island_articulation_start_in[island]]
    a1 = a0 + island_articulation_start_in[island + 1] - island_articulation_start_in[island]
    world = body_world[joint_child[dfs_joint[articulation_start[a0]]]]
    if replay != 0:
        for a in range(a0, a1):
            record_joint_state(a, articulation_start, dfs_joint, joint_type, joint_q_start, joint_qd_start,
                               joint_q_in, joint_qd_in, 0, joint_q_steps_out, joint_qd_steps_out)
    for s in range(steps):
        for a in range(a0, a1):
            articulation_dynamics(a, articulation_start, articulation_dof_start, articulation_H_start, dfs_joint,
                dof_joint, joint_type, joint_parent, joint_child, joint_articulation, joint_X_p, joint_X_c, joint_axis,
                joint_q_start, joint_qd_start, joint_dfs_pos, joint_dfs_end, joint_armature, joint_damping,
                assembly_friction_in, joint_stiffness, joint_spring_ref, joint_target_ke, joint_target_kd,
                joint_limit_lower, joint_limit_upper, joint_limit_ke, joint_limit_kd, joint_f_lower, joint_f_upper,
                joint_target_lower, joint_target_upper, joint_drive_force_limit, joint_drive_implicit,
                joint_damping_implicit, body_joint, body_world, body_mass, body_com, body_inertia, body_origin,
                gravity, fluid, body_fluid_frame, shape_kind, shape_body, shape_transform, shape_size, shape_ke,
                shape_kd, shape_mu, shape_point_start, shape_point_count, shape_points, shape_hull_points,
                shape_hull_point_start, shape_hull_point_count, shape_plane_normal, shape_plane_offset,
                shape_plane_start, shape_plane_count, articulation_pair_start_in, articulation_pair_in,
                articulation_pair_count_in, joint_q_in, joint_qd_in, body_f_ext, joint_f_steps_in[s * replay],
                joint_target_q_steps_in[s * target_rows], joint_target_qd, friction_smoothing, damping_depth, gradient_width, dt, body_q_out,
                body_qd_out, body_f_out, body_twist_out, body_bias_acc_out, dof_motion_out, body_damping_out,
                body_h_out, body_J_out, body_inertial_bias_out, subtree_mass_out, subtree_h_out, subtree_J_out,
                subtree_bias_out, subtree_damping_out, dof_subtree_force_out, mass_matrix_out, rhs_out,
                dof_inertia_out)
            d0 = articulation_dof_start[a]
            d1 = articulation_dof_start[a + 1]
            if implicit_after_solve != 0:
                h0 = articulation_H_start[a]
                for entry in range(h0, h0 + (d1 - d0) * (d1 - d0)):
                    damped_matrix_out[entry] = mass_matrix_out[entry]
                for i in range(d0, d1):  # the solve's matrix: the assembled one less its implicit diagonal
                    implicit = implicit_term(i, dof_joint, joint_type, joint_q_start, joint_damping,
                                             assembly_friction_in, joint_stiffness, joint_spring_ref, joint_target_ke,
                                             joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                                             joint_limit_kd, joint_target_lower, joint_target_upper,
                                             joint_drive_force_limit, joint_drive_implicit, joint_damping_implicit,
                                             joint_q_in, joint_qd_in, joint_target_q_steps_in[s * target_rows],
                                             joint_target_qd,
                                             friction_smoothing, dt)
                    diagonal = h0 + (i - d0) * (d1 - d0 + 1)
                    mass_matrix_out[diagonal] = mass_matrix_out[diagonal] - implicit
                    implicit_out[i] = implicit
            for entry in range(articulation_coupling_start_in[a], articulation_coupling_start_in[a + 1]):
                add_joint_coupling(articulation_couplings_in[entry], coupling_term_start, coupling_term_dof,
                                   coupling_term_coef, coupling_term_power, coupling_rest, coupling_time_constant,
                                   coupling_damping_ratio, coupling_ke, coupling_kd, coupling_solimp,
                                   coupling_drive_ke, coupling_drive_kd, coupling_drive_force_limit,
                                   coupling_drive_implicit, dof_joint, joint_articulation, joint_q_start,
                                   joint_dfs_pos, joint_dfs_end, articulation_dof_start, articulation_H_start,
                                   joint_q_in, joint_qd_in, dof_inertia_out, dof_inverse_weight_in, coupling_target,
                                   dt, equality_rows, implicit_after_solve, mass_matrix_out, rhs_out,
                                   damped_matrix_out, coupling_implicit_out)
            factor_and_solve(a, articulation_dof_start, articulation_H_start, mass_matrix_out, rhs_out, factor_out,
                             qdd_out)
        for a in range(a0, a1):  # the rows once every body of the island has its pose and motion columns
            for entry in range(articulation_contact_pair_start_in[a], articulation_contact_pair_start_in[a + 1]):
                pair = articulation_contact_pairs_in[entry]
                if pair_articulation_in[pair] == a:  # a pair joining two articulations: by its shape a's
                    pair_rows(pair, shape_kind, shape_body, shape_transform, shape_size, shape_mu, shape_priority,
                              shape_condim, shape_rotational_mu, shape_margin, shape_point_start,
                              shape_points, shape_hull_points, shape_hull_point_start, shape_hull_point_count,
                              shape_plane_normal, shape_plane_offset, shape_plane_start, shape_plane_count,
                              shape_bound_centre, shape_bound_half, body_joint, body_origin, joint_articulation,
                              joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start, articulation_H_start,
                              contact_pair_in, pair_row_start_in, pair_dof_in, pair_dof_count_in, body_q_out,
                              joint_qd_in, dof_motion_out, mass_matrix_out, side_column, friction_mixing,
                              row_jacobian_out, row_velocity_out, row_inverse_mass_out, row_distance_out,
                              row_in_contact_out)
                    if any_slot(pair, pair_row_start_in, row_in_contact_out) != 0:  # the solve visits no pair apart
                        for first in range(pair_row_start_in[pair], pair_row_start_in[pair + 1], EDGES):
                            slot_parameters(first, pair, shape_body, shape_mu, shape_solref, shape_solimp,
                                            shape_solmix, shape_priority, shape_condim, contact_pair_in,
                                            row_velocity_out, row_inverse_mass_out, row_distance_out,
                                            row_in_contact_out, body_inverse_weight_in, time_constant,
                                            damping_ratio, impedance, impedance_min, impedance_width,
                                            impedance_midpoint, impedance_power, mujoco_weights, impratio,
                                            friction_mixing, row_aref_out, row_weight_out)
            touching_pair_list(a, articulation_contact_pair_start_in, articulation_contact_pairs_in,
                               pair_articulation_in, pair_row_start_in, row_in_contact_out, touching_pairs_out,
                               touching_pair_count_out)
        contact_solve(island, world, step + s, dof_joint, joint_type, joint_q_start, joint_limit_lower,
                      joint_limit_upper, joint_friction, articulation_dof_start, articulation_H_start,
                      pair_row_start_in, pair_dof_in, pair_dof_count_in,
                      articulation_contact_pair_start_in, touching_pairs_out, touching_pair_count_out,
                      island_articulation_start_in, island_articulations_in, island_dof_start_in, island_H_start_in,
                      dof_slot_in, joint_q_in, joint_qd_in,
                      mass_matrix_out, qdd_out, joint_qdd_warm_start_in, dof_row_settings_in, row_jacobian_out,
                      row_weight_out, side_column, limits, friction_rows, impedance, mujoco_weights, tolerance,
                      slope_tolerance, iterations, fixed_iterations, warm_start, row_aref_out, row_violation_out,
                      row_step_out, row_curvature_out, dof_curvature_out, gradient_out, hessian_out, newton_factor_out,
                      newton_step_out, accel_out, world_contact_iterations_out, world_unconverged_steps_out,
                      world_first_unconverged_out, world_worst_residual_out)
        for a in range(a0, a1):
            d0 = articulation_dof_start[a]
            d1 = articulation_dof_start[a + 1]
            implicit_terms = int(0)  # 1 if some dof or joint coupling of the articulation has an implicit term
            c0 = articulation_coupling_start_in[a]
            c1 = articulation_coupling_start_in[a + 1]
            for d in range(d0, d1):
                joint_qdd_warm_start_out[d] = accel_out[d]
                if implicit_after_solve != 0:
                    if implicit_out[d] != implicit_out[d] * type(dt)(0.0):
                        implicit_terms = 1
            if implicit_after_solve != 0:
                for entry in range(c0, c1):
                    c = articulation_couplings_in[entry]
                    if coupling_implicit_out[c] != coupling_implicit_out[c] * type(dt)(0.0):
                        implicit_terms = 1
            if implicit_terms != 0:  # none: the final solve would change nothing
                for d in range(d0, d1):
                    implicit_force_out[d] = implicit_out[d] * accel_out[d]
                for entry in range(c0, c1):
                    coupling_implicit_force(articulation_couplings_in[entry], coupling_term_start, coupling_term_dof,
                                            coupling_term_coef, coupling_term_power, dof_joint, joint_q_start,
                                            joint_dfs_pos, joint_dfs_end, joint_q_in, coupling_implicit_out, accel_out,
                                            implicit_force_out)
                factor_and_solve(a, articulation_dof_start, articulation_H_start, damped_matrix_out,
                                 implicit_force_out, damped_factor_out, correction_out)
                for d in range(d0, d1):
                    accel_out[d] = accel_out[d] - correction_out[d]
            for pos in range(articulation_start[a], articulation_start[a + 1]):
                integrate_joint(dfs_joint[pos], joint_type, joint_child, joint_q_start, joint_qd_start, body_world,
                                joint_q_in, joint_qd_in, accel_out, dt, step + s, max_coordinate, max_speed,
                                joint_q_out, joint_qd_out, world_fault_step_out)
            if replay != 0:
                record_joint_state(a, articulation_start, dfs_joint, joint_type, joint_q_start, joint_qd_start,
                                   joint_q_out, joint_qd_out, s + 1, joint_q_steps_out, joint_qd_steps_out)
    if final_kinematics != 0:
        for a in range(a0, a1):
            articulation_fk(a, articulation_start, dfs_joint, joint_type, joint_parent, joint_child, joint_X_p,
                            joint_X_c, joint_axis, joint_q_start, joint_qd_start, body_origin, gravity, joint_q_in,
                            joint_qd_in, body_q_out, body_qd_out, body_twist_out, body_bias_acc_out, dof_motion_out)
