"""Rigid contact as soft constraints solved by Newton iterations on the joint accelerations
(a MuJoCo-style convex formulation), for contacts of bodies with static geometry and with
each other.

Per island (articulations whose bodies may touch each other, solved together; otherwise
one articulation), the accelerations a minimise
    f(a) = 1/2 (a - a0)^T H (a - a0) + sum_r 1/2 D_r min(0, J_r a - aref_r)^2
where H is block-diagonal in the articulations' mass matrices, a0 = H^-1 (tau - c) are the
unconstrained accelerations, and each contact slot of a pair (``rigid_contact.plan_contact``)
adds four rows r along the edges n +- mu t1, n +- mu t2 of a pyramidal friction cone (J_r:
the edge direction times the Jacobian of the contact point's relative velocity, the second
body's side subtracted). The reference acceleration aref_r = -b J_r v - k dist pushes
penetrating points apart (k = 1 / time_constant^2, b = 2 damping_ratio / time_constant), and
the weight D_r = impedance / (1 - impedance) / A uses the diagonal approximation
A_rr ~ sum_k J_rk^2 / H_kk of a row's inverse effective mass, averaged over the slot's four
edges (one weight per contact point, so that opposite edges balance). f is convex and piecewise
quadratic; Newton steps a <- a - Hess^-1 grad converge to its minimiser, where grad = 0 (the
residual the implicit adjoint differentiates). Motion two touching bodies share (J_r a = 0)
costs nothing, so they fall together freely. A revolute or prismatic dof beyond a joint
limit adds one more row on its own dof (no friction), and a dof with dry friction a
friction-loss row whose force is bounded by the friction (``dof_rows``).
"""
import warp as wp

from .articulation import bottom, top, vec6
from .enums import JOINT_PRISMATIC, JOINT_REVOLUTE
from .generic import kernel, transform, vec3
from .rigid_contact import contact_plan, pair_poses, plan_contact

EDGES = 4
"""Rows per contact slot: the edges n +- mu t1, n +- mu t2 of its friction pyramid."""


@wp.func
def tangent_basis(n: vec3):
    """Two unit vectors orthogonal to unit n and to each other."""
    zero = n[0] * type(n[0])(0.0)
    one = type(n[0])(1.0)
    helper = wp.vector(one, zero, zero)
    if wp.abs(n[0]) > type(n[0])(0.9):
        helper = wp.vector(zero, one, zero)
    t1 = wp.normalize(wp.cross(n, helper))
    return t1, wp.cross(n, t1)


@wp.func
def point_velocity(
    dof: int, pos_b: int, at: vec3, dof_joint: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int), dof_motion: wp.array(dtype=vec6),
):
    """Velocity per unit rate of ``dof`` of the point at ``at`` from the articulation origin on
    the body whose joint has depth-first position ``pos_b``: zero unless the dof's joint is an
    ancestor of (or is) that body's joint."""
    j = dof_joint[dof]
    value = at * type(at[0])(0.0)
    if joint_dfs_pos[j] <= pos_b and pos_b < joint_dfs_end[j]:
        s = dof_motion[dof]
        value = bottom(s) + wp.cross(top(s), at)
    return value


@wp.func
def side_jacobians(
    body: int, sign: wp.Float, direction_0: vec3, direction_1: vec3, direction_2: vec3, direction_3: vec3, x: vec3,
    r: int, column: int, body_joint: wp.array(dtype=int), body_origin: wp.array(dtype=vec3),
    joint_articulation: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int), joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int), articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int), joint_qd: wp.array(dtype=wp.Float), dof_motion: wp.array(dtype=vec6),
    mass_matrix: wp.array(dtype=wp.Float), row_jacobian: wp.array2d(dtype=wp.Float),
):
    """Write sign * direction_e . (velocity of the point x of ``body`` per unit rate of each dof
    of its articulation) into rows r + e (the slot's four cone edges) from ``column`` on;
    returns (their parts of J_r v, their parts sum_k J_rk^2 / H_kk of the inverse effective
    mass) as 4-vectors. Each dof's point velocity is computed once for the four edges."""
    art = joint_articulation[body_joint[body]]
    d0 = articulation_dof_start[art]
    n_dofs = articulation_dof_start[art + 1] - d0
    h0 = articulation_H_start[art]
    pos_b = joint_dfs_pos[body_joint[body]]
    at = x - body_origin[body]
    velocity_0 = sign * type(sign)(0.0)
    velocity_1 = velocity_0
    velocity_2 = velocity_0
    velocity_3 = velocity_0
    inverse_mass_0 = velocity_0
    inverse_mass_1 = velocity_0
    inverse_mass_2 = velocity_0
    inverse_mass_3 = velocity_0
    for i in range(n_dofs):
        v = point_velocity(d0 + i, pos_b, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion)
        rate = joint_qd[d0 + i]
        diagonal = mass_matrix[h0 + i * n_dofs + i]
        value_0 = sign * wp.dot(direction_0, v)
        value_1 = sign * wp.dot(direction_1, v)
        value_2 = sign * wp.dot(direction_2, v)
        value_3 = sign * wp.dot(direction_3, v)
        row_jacobian[r, column + i] = value_0
        row_jacobian[r + 1, column + i] = value_1
        row_jacobian[r + 2, column + i] = value_2
        row_jacobian[r + 3, column + i] = value_3
        velocity_0 += value_0 * rate
        velocity_1 += value_1 * rate
        velocity_2 += value_2 * rate
        velocity_3 += value_3 * rate
        inverse_mass_0 += value_0 * value_0 / diagonal
        inverse_mass_1 += value_1 * value_1 / diagonal
        inverse_mass_2 += value_2 * value_2 / diagonal
        inverse_mass_3 += value_3 * value_3 / diagonal
    return (wp.vector(velocity_0, velocity_1, velocity_2, velocity_3),
            wp.vector(inverse_mass_0, inverse_mass_1, inverse_mass_2, inverse_mass_3))


@wp.func
def shared_inverse_masses(
    body_a: int, body_b: int, sign_a: wp.Float, direction_0: vec3, direction_1: vec3, direction_2: vec3,
    direction_3: vec3, x: vec3, body_joint: wp.array(dtype=int), body_origin: wp.array(dtype=vec3),
    joint_articulation: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int), joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int), articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int), dof_motion: wp.array(dtype=vec6), mass_matrix: wp.array(dtype=wp.Float),
):
    """sum_k J_rk^2 / H_kk of a slot's four edge rows between two bodies of one articulation (a
    4-vector), J_rk the sum of both sides (a dof moving both bodies alike cancels; summing the
    sides' squares would count it twice and make self-contact softer than asked)."""
    art = joint_articulation[body_joint[body_a]]
    d0 = articulation_dof_start[art]
    n_dofs = articulation_dof_start[art + 1] - d0
    h0 = articulation_H_start[art]
    at = x - body_origin[body_a]
    pos_a = joint_dfs_pos[body_joint[body_a]]
    pos_b = joint_dfs_pos[body_joint[body_b]]
    zero = sign_a * type(sign_a)(0.0)
    inverse_mass = wp.vector(zero, zero, zero, zero)
    for i in range(n_dofs):
        v = (point_velocity(d0 + i, pos_a, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion)
             - point_velocity(d0 + i, pos_b, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion))
        value = wp.vector(wp.dot(direction_0, v), wp.dot(direction_1, v), wp.dot(direction_2, v),
                          wp.dot(direction_3, v)) * sign_a
        inverse_mass = inverse_mass + wp.cw_mul(value, value) / mass_matrix[h0 + i * n_dofs + i]
    return inverse_mass


@wp.func
def pair_rows(
    p: int,
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
    shape_points: wp.array(dtype=vec3),
    shape_hull_points: wp.array(dtype=vec3),
    shape_hull_point_start: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    shape_plane_normal: wp.array(dtype=vec3),
    shape_plane_offset: wp.array(dtype=wp.Float),
    shape_plane_start: wp.array(dtype=int),
    shape_plane_count: wp.array(dtype=int),
    body_joint: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    joint_articulation: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    contact_pair_in: wp.array2d(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    mass_matrix_in: wp.array(dtype=wp.Float),
    side_column: int,
    row_jacobian_out: wp.array2d(dtype=wp.Float),
    row_velocity_out: wp.array(dtype=wp.Float),
    row_inverse_mass_out: wp.array(dtype=wp.Float),
    row_distance_out: wp.array(dtype=wp.Float),
    row_in_contact_out: wp.array(dtype=wp.Float),
):
    """Rows of shape pair ``p`` (see ``soft_contact_rows``)."""
    a = contact_pair_in[p, 0]
    b = contact_pair_in[p, 1]
    ka = shape_kind[a]
    kb = shape_kind[b]
    body_a, body_b, X_a, X_b = pair_poses(a, b, shape_body, shape_transform, body_q_in)
    mu = (shape_mu[a] + shape_mu[b]) * type(shape_mu[a])(0.5)
    zero = mu * type(mu)(0.0)
    one = type(mu)(1.0)
    plan, flip, axis, side = contact_plan(ka, kb, shape_size[a], shape_size[b], X_a, X_b, zero)
    sign_a = one  # +1 when a is the first shape (the normal points towards it)
    if flip:
        sign_a = -one
    first_row = pair_row_start_in[p]
    for slot in range((pair_row_start_in[p + 1] - first_row) // EDGES):
        valid, pen, n, x = plan_contact(plan, flip, axis, side, slot, a, b, ka, kb, shape_size[a], shape_size[b], X_a,
                                        X_b, shape_points, shape_point_start, shape_hull_points,
                                        shape_hull_point_start, shape_hull_point_count, shape_plane_normal,
                                        shape_plane_offset, shape_plane_start, shape_plane_count)
        touching = zero
        velocity = wp.vector(zero, zero, zero, zero)
        inverse_mass = velocity
        r = first_row + slot * EDGES
        if valid and pen > zero:  # rows of slots not in contact are never read but for their zero weight
            touching = one
            t1, t2 = tangent_basis(n)
            direction_0 = n + t1 * (mu * one)  # the edges n +- mu t1, n +- mu t2
            direction_1 = n + t1 * (mu * -one)
            direction_2 = n + t2 * (mu * one)
            direction_3 = n + t2 * (mu * -one)
            velocity, inverse_mass = side_jacobians(
                body_a, sign_a, direction_0, direction_1, direction_2, direction_3, x, r, 0, body_joint, body_origin,
                joint_articulation, joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start,
                articulation_H_start, joint_qd_in, dof_motion_in, mass_matrix_in, row_jacobian_out)
            if body_b >= 0:
                velocity_b, inverse_mass_b = side_jacobians(
                    body_b, -sign_a, direction_0, direction_1, direction_2, direction_3, x, r, side_column, body_joint,
                    body_origin, joint_articulation, joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start,
                    articulation_H_start, joint_qd_in, dof_motion_in, mass_matrix_in, row_jacobian_out)
                velocity = velocity + velocity_b
                inverse_mass = inverse_mass + inverse_mass_b
                if joint_articulation[body_joint[body_b]] == joint_articulation[body_joint[body_a]]:
                    inverse_mass = shared_inverse_masses(
                        body_a, body_b, sign_a, direction_0, direction_1, direction_2, direction_3, x, body_joint,
                        body_origin, joint_articulation, joint_dfs_pos, joint_dfs_end, dof_joint,
                        articulation_dof_start, articulation_H_start, dof_motion_in, mass_matrix_in)
        for e in range(EDGES):
            row_velocity_out[r + e] = velocity[e]
            row_inverse_mass_out[r + e] = inverse_mass[e]
            row_distance_out[r + e] = -pen
            row_in_contact_out[r + e] = touching


@kernel
def soft_contact_rows(
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
    shape_points: wp.array(dtype=vec3),
    shape_hull_points: wp.array(dtype=vec3),
    shape_hull_point_start: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    shape_plane_normal: wp.array(dtype=vec3),
    shape_plane_offset: wp.array(dtype=wp.Float),
    shape_plane_start: wp.array(dtype=int),
    shape_plane_count: wp.array(dtype=int),
    body_joint: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    joint_articulation: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    contact_pair_in: wp.array2d(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    mass_matrix_in: wp.array(dtype=wp.Float),
    side_column: int,
    row_jacobian_out: wp.array2d(dtype=wp.Float),
    row_velocity_out: wp.array(dtype=wp.Float),
    row_inverse_mass_out: wp.array(dtype=wp.Float),
    row_distance_out: wp.array(dtype=wp.Float),
    row_in_contact_out: wp.array(dtype=wp.Float),
):
    """One thread per shape pair of the step (shape a on a body, b static or on a body): for
    every contact slot of the pair (``rigid_contact.plan_contact``) and cone edge, the row's
    Jacobian of the relative velocity along the edge direction (columns from 0 over the
    dofs of a's articulation, from ``side_column`` over b's), its
    velocity J_r v, the diagonal estimate sum_k J_rk^2 / H_kk of its inverse effective
    mass, the slot's signed distance (m) and whether it penetrates (1) or not (0). (Sums go
    to arrays: a loop accumulator used nonlinearly after its loop would get a wrong adjoint
    from Warp.)"""
    pair_rows(wp.tid(), shape_kind, shape_body, shape_transform, shape_size, shape_mu, shape_point_start,
              shape_points, shape_hull_points, shape_hull_point_start, shape_hull_point_count, shape_plane_normal,
              shape_plane_offset, shape_plane_start, shape_plane_count, body_joint, body_origin, joint_articulation,
              joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start, articulation_H_start,
              contact_pair_in, pair_row_start_in, body_q_in, joint_qd_in, dof_motion_in, mass_matrix_in,
              side_column, row_jacobian_out, row_velocity_out, row_inverse_mass_out, row_distance_out,
              row_in_contact_out)


@wp.func
def row_parameters(
    r: int,
    row_velocity: wp.array(dtype=wp.Float),
    row_inverse_mass: wp.array(dtype=wp.Float),
    row_distance: wp.array(dtype=wp.Float),
    row_in_contact: wp.array(dtype=wp.Float),
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    row_aref_out: wp.array(dtype=wp.Float),
    row_weight_out: wp.array(dtype=wp.Float),
):
    """Row r's reference acceleration and weight (see ``soft_contact_row_parameters``)."""
    one = type(impedance)(1.0)
    stiffness = one / (time_constant * time_constant)
    damping = type(impedance)(2.0) * damping_ratio / time_constant
    row_aref_out[r] = -damping * row_velocity[r] - stiffness * row_distance[r]
    first = r - r % EDGES
    inverse_mass = (row_inverse_mass[first] + row_inverse_mass[first + 1] + row_inverse_mass[first + 2]
                    + row_inverse_mass[first + 3]) * type(one)(0.25)
    row_weight_out[r] = row_in_contact[r] * impedance / (one - impedance) / (inverse_mass + type(one)(1.0e-12))


@kernel
def soft_contact_row_parameters(
    row_velocity_in: wp.array(dtype=wp.Float),
    row_inverse_mass_in: wp.array(dtype=wp.Float),
    row_distance_in: wp.array(dtype=wp.Float),
    row_in_contact_in: wp.array(dtype=wp.Float),
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    row_aref_out: wp.array(dtype=wp.Float),
    row_weight_out: wp.array(dtype=wp.Float),
):
    """One thread per row: reference acceleration aref = -b J v - k dist and weight
    D = impedance / (1 - impedance) / A (0 for points not in contact), A the mean of A_rr
    over the slot's four edges. One weight per slot: with a weight per edge, edges nearly
    orthogonal to the motion got large weights, and at a penetrating contact their unequal
    forces added up to a spurious friction force (a pendulum resting on its own base sank
    24 mm)."""
    row_parameters(wp.tid(), row_velocity_in, row_inverse_mass_in, row_distance_in, row_in_contact_in, time_constant,
                   damping_ratio, impedance, row_aref_out, row_weight_out)


@wp.func
def row_times(r: int, pair: int, pair_dof: wp.array2d(dtype=int), pair_dof_count: wp.array2d(dtype=int),
              side_column: int, row_jacobian: wp.array2d(dtype=wp.Float), vector: wp.array(dtype=wp.Float)):
    """J_r . vector over the dofs of both sides of row r's pair (side b's columns from
    ``side_column`` on)."""
    x = vector[0] * type(vector[0])(0.0)
    for side in range(2):
        d0 = pair_dof[pair, side]
        for i in range(pair_dof_count[pair, side]):
            x += row_jacobian[r, side * side_column + i] * vector[d0 + i]
    return x


@wp.func
def row_violation(r: int, row_pair: wp.array(dtype=int), pair_dof: wp.array2d(dtype=int),
                  pair_dof_count: wp.array2d(dtype=int), row_jacobian: wp.array2d(dtype=wp.Float),
                  row_aref: wp.array(dtype=wp.Float), row_weight: wp.array(dtype=wp.Float),
                  accel: wp.array(dtype=wp.Float), side_column: int):
    """J_r a - aref_r of row r (see ``soft_contact_violation``)."""
    x = row_aref[r] * type(row_aref[r])(0.0)
    if row_weight[r] != x:
        x = row_times(r, row_pair[r], pair_dof, pair_dof_count, side_column, row_jacobian, accel) - row_aref[r]
    return x


@kernel
def soft_contact_violation(
    row_pair_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    row_jacobian_in: wp.array2d(dtype=wp.Float),
    row_aref_in: wp.array(dtype=wp.Float),
    row_weight_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    side_column: int,
    row_violation_out: wp.array(dtype=wp.Float),
):
    """One thread per row r: J_r a - aref_r (negative: the row pushes); 0 for rows not in
    contact (D_r = 0), which the solve does not read."""
    r = wp.tid()
    row_violation_out[r] = row_violation(r, row_pair_in, pair_dof_in, pair_dof_count_in, row_jacobian_in, row_aref_in,
                                         row_weight_in, accel_in, side_column)


@wp.func
def row_force(weight: wp.Float, violation: wp.Float):
    """D min(0, x): the row's (non-positive) force."""
    return weight * wp.min(violation, violation * type(violation)(0.0))


@wp.func
def row_active(weight: wp.Float, violation: wp.Float):
    """D if the row pushes (x < 0), else 0: its Hessian weight."""
    zero = weight * type(weight)(0.0)
    if violation < zero:
        return weight
    return zero


@wp.func
def dof_rows(jtype: int, q: wp.Float, qd: wp.Float, accel: wp.Float, lower: wp.Float, upper: wp.Float,
             friction: wp.Float, weight: wp.Float, stiffness: wp.Float, damping: wp.Float, limits: int,
             friction_rows: int):
    """(d cost / d a_i, d^2 cost / d a_i^2) of the rows on dof i's own acceleration a_i:
    with ``limits``, a revolute or prismatic dof beyond its lower (upper) limit has a row
    J = e_i (-e_i), x = J a + b J qd + k dist (dist < 0: beyond the limit), cost 1/2 D min(0, x)^2;
    with ``friction_rows``, a dof with dry friction F > 0 (N m or N) has the friction-loss
    row x = a_i + b qd_i (reference -b qd_i: it resists the velocity, no position term) with
    the Huber cost 1/2 D x^2 for |D x| <= F, F |x| - F^2 / (2 D) beyond, so its force is
    D x clamped to [-F, F]: it sticks below F and slides at F."""
    zero = q * type(q)(0.0)
    one = zero + type(q)(1.0)
    force = zero
    curvature = zero
    if limits != 0 and (jtype == JOINT_REVOLUTE or jtype == JOINT_PRISMATIC):
        sign = zero
        distance = zero
        if q < lower:
            sign = one
            distance = q - lower
        if q > upper:
            sign = -one
            distance = upper - q
        if sign != zero:
            x = sign * accel + damping * sign * qd + stiffness * distance
            force += sign * row_force(weight, x)
            curvature += row_active(weight, x)
    if friction_rows != 0 and friction > zero:
        x = accel + damping * qd
        force += wp.clamp(weight * x, -friction, friction)
        if wp.abs(weight * x) < friction:
            curvature += weight
    return force, curvature


@wp.func
def island_gradient(
    island: int,
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    articulation_pairs: wp.array(dtype=int),
    pair_articulation: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    accel_free: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    gradient_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    dof_curvature_out: wp.array(dtype=wp.Float),
):
    """Island ``island``'s cost gradient (see ``soft_contact_newton_system``), and the Hessian
    weight of each of its rows in contact (D_r [x_r < 0], into row_curvature_out) and of each
    dof's own rows (dof_curvature_out). Returns 1 if any of those weights differs from the one
    the arrays held (the Hessian they describe has changed), else 0."""
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = impedance * type(impedance)(0.0)
    changed = int(0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        for i in range(n_dofs):
            m_row = articulation_H_start[art] + i * n_dofs
            g = zero
            for k in range(n_dofs):
                g += mass_matrix[m_row + k] * (accel[d0 + k] - accel_free[d0 + k])
            gradient_out[d0 + i] = g
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art + 1]):
            pair = articulation_pairs[entry]
            if pair_articulation[pair] == art:  # each pair once, by the articulation of its shape a
                shared = pair_dof_count[pair, 0] > 0 and pair_dof[pair, 1] == pair_dof[pair, 0]
                sides = 2  # side b of a static shape has no dofs
                if shared:
                    sides = 1  # both sides on one articulation: each coefficient sums them
                for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                    if row_weight[first] != zero:  # slots not in contact (most) add nothing; edges share the weight
                        for r in range(first, first + EDGES):
                            force = row_force(row_weight[r], row_violation[r])
                            active = row_active(row_weight[r], row_violation[r])
                            if active != row_curvature_out[r]:
                                changed = 1
                            row_curvature_out[r] = active
                            for side_i in range(sides):
                                for i in range(pair_dof_count[pair, side_i]):
                                    dof = pair_dof[pair, side_i] + i
                                    c = row_jacobian[r, side_i * side_column + i]
                                    if shared:
                                        c += row_jacobian[r, side_column + i]
                                    wp.atomic_add(gradient_out, dof, c * force)
    one = type(impedance)(1.0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        for i in range(n_dofs):
            dof = d0 + i
            j = dof_joint[dof]
            weight = impedance / (one - impedance) * mass_matrix[articulation_H_start[art] + i * (n_dofs + 1)]
            force, curvature = dof_rows(joint_type[j], joint_q[joint_q_start[j]], joint_qd[dof], accel[dof],
                                        joint_limit_lower[dof], joint_limit_upper[dof], joint_friction[dof], weight,
                                        one / (time_constant * time_constant),
                                        type(one)(2.0) * damping_ratio / time_constant, limits, friction_rows)
            wp.atomic_add(gradient_out, dof, force)
            if curvature != dof_curvature_out[dof]:
                changed = 1
            dof_curvature_out[dof] = curvature
    return changed


@wp.func
def island_hessian(
    island: int,
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    dof_slot: wp.array(dtype=int),
    island_dof_start: wp.array(dtype=int),
    island_H_start: wp.array(dtype=int),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    articulation_pairs: wp.array(dtype=int),
    pair_articulation: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_curvature: wp.array(dtype=wp.Float),
    dof_curvature: wp.array(dtype=wp.Float),
    side_column: int,
    impedance: wp.Float,
    hessian_out: wp.array(dtype=wp.Float),
):
    """Island ``island``'s cost Hessian (see ``soft_contact_newton_system``) from the rows' and
    dofs' Hessian weights that ``island_gradient`` recorded: the lower triangle and diagonal
    (the Cholesky factorisation reads no more; the entries above stay zero)."""
    i0 = island_dof_start[island]
    n_island = island_dof_start[island + 1] - i0
    h_island = island_H_start[island]
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = impedance * type(impedance)(0.0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        c0 = dof_slot[d0] - i0  # the island column of the articulation's first dof
        for i in range(n_dofs):
            base = h_island + (c0 + i) * n_island
            m_row = articulation_H_start[art] + i * n_dofs
            for k in range(c0 + i + 1):
                hessian_out[base + k] = zero
            for k in range(i + 1):
                hessian_out[base + c0 + k] = mass_matrix[m_row + k]
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art + 1]):
            pair = articulation_pairs[entry]
            if pair_articulation[pair] == art:  # each pair once, by the articulation of its shape a
                shared = pair_dof_count[pair, 0] > 0 and pair_dof[pair, 1] == pair_dof[pair, 0]
                sides = 2  # side b of a static shape has no dofs
                if shared:
                    sides = 1  # both sides on one articulation: each coefficient sums them
                for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                    if row_weight[first] != zero:  # slots not in contact (most) add nothing; edges share the weight
                        for r in range(first, first + EDGES):
                            active = row_curvature[r]
                            if active != zero:
                                for side_i in range(sides):
                                    for i in range(pair_dof_count[pair, side_i]):
                                        dof = pair_dof[pair, side_i] + i
                                        c = row_jacobian[r, side_i * side_column + i]
                                        if shared:
                                            c += row_jacobian[r, side_column + i]
                                        own = dof_slot[dof] - i0
                                        w = active * c
                                        if w != zero:
                                            base = h_island + own * n_island
                                            for side in range(2):
                                                n_side = pair_dof_count[pair, side]
                                                cs = int(0)
                                                if n_side > 0:
                                                    cs = dof_slot[pair_dof[pair, side]] - i0
                                                for k in range(wp.min(n_side, own - cs + 1)):
                                                    entry_jk = row_jacobian[r, side * side_column + k]
                                                    if entry_jk != zero:
                                                        wp.atomic_add(hessian_out, base + cs + k, w * entry_jk)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        for dof in range(d0, articulation_dof_start[art + 1]):
            if dof_curvature[dof] != zero:
                own = dof_slot[dof] - i0
                wp.atomic_add(hessian_out, h_island + own * (n_island + 1), dof_curvature[dof])


@kernel
def soft_contact_newton_system(
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    dof_slot_in: wp.array(dtype=int),
    island_dof_start_in: wp.array(dtype=int),
    island_H_start_in: wp.array(dtype=int),
    island_articulation_start_in: wp.array(dtype=int),
    island_articulations_in: wp.array(dtype=int),
    articulation_pair_start_in: wp.array(dtype=int),
    articulation_pairs_in: wp.array(dtype=int),
    pair_articulation_in: wp.array(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    accel_free_in: wp.array(dtype=wp.Float),
    row_jacobian_in: wp.array2d(dtype=wp.Float),
    row_weight_in: wp.array(dtype=wp.Float),
    row_violation_in: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    gradient_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    dof_curvature_out: wp.array(dtype=wp.Float),
    hessian_out: wp.array(dtype=wp.Float),
):
    """One thread per island (articulations whose bodies touch, solved together; its dofs at
    the positions ``dof_slot_in``, from ``island_dof_start_in``): for every dof i,
    gradient_i = (H (a - a0))_i + sum_r J_ri D_r min(0, x_r) and row i of the island's Hessian
    blockdiag(H) + sum_r D_r [x_r < 0] J_r^T J_r, row by row over the pairs of its
    articulations and their slots in contact (D_r != 0), adding only the rows' nonzero columns
    up to the diagonal (the Cholesky factorisation reads the lower triangle; the entries
    above it stay zero); then the rows on one dof (``dof_rows``: joint limits, dry friction),
    weighted D = impedance / (1 - impedance) H_ii. The rows' and dofs' Hessian weights go to
    row_curvature_out and dof_curvature_out."""
    island = wp.tid()
    island_gradient(island, dof_joint, articulation_dof_start, articulation_H_start, joint_type, joint_q_start,
                    joint_limit_lower, joint_limit_upper, joint_friction, island_articulation_start_in,
                    island_articulations_in,
                    articulation_pair_start_in, articulation_pairs_in, pair_articulation_in, pair_row_start_in,
                    pair_dof_in, pair_dof_count_in, mass_matrix_in, accel_free_in, row_jacobian_in, row_weight_in,
                    row_violation_in, joint_q_in, joint_qd_in, accel_in, side_column, limits, friction_rows,
                    time_constant, damping_ratio, impedance, gradient_out, row_curvature_out, dof_curvature_out)
    island_hessian(island, articulation_dof_start, articulation_H_start, dof_slot_in, island_dof_start_in,
                   island_H_start_in, island_articulation_start_in, island_articulations_in,
                   articulation_pair_start_in, articulation_pairs_in, pair_articulation_in, pair_row_start_in,
                   pair_dof_in, pair_dof_count_in, mass_matrix_in, row_jacobian_in, row_weight_in, row_curvature_out,
                   dof_curvature_out, side_column, impedance, hessian_out)


@wp.func
def line_slope(
    alpha: wp.Float,
    dof_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    e0: int,
    e1: int,
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    articulation_pairs: wp.array(dtype=int),
    pair_articulation: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    row_step: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    step: wp.array(dtype=wp.Float),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
):
    """(phi'(alpha), phi''(alpha)) of the rows' part of the cost along a - alpha d: every row
    x_r(alpha) = x_r - alpha J_r d of the pairs of the island's articulations
    (``island_articulations`` e0 to e1; each pair counted by the articulation of its shape
    a) adds -D s min(0, x) and D s^2 [x < 0] with s = J_r d (``row_step``); the rows on one dof (``dof_rows``:
    limits, friction) add -s dcost/da and s^2 d^2cost/da^2 at a - alpha d."""
    zero = alpha * type(alpha)(0.0)
    slope = zero
    curvature = zero
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art + 1]):
            pair = articulation_pairs[entry]
            if pair_articulation[pair] == art:
                for r in range(pair_row_start[pair], pair_row_start[pair + 1]):
                    if row_weight[r] != zero:
                        s = row_step[r]
                        x = row_violation[r] - alpha * s
                        slope -= s * row_force(row_weight[r], x)
                        curvature += row_active(row_weight[r], x) * s * s
    if limits != 0 or friction_rows != 0:
        one = type(impedance)(1.0)
        stiffness = one / (time_constant * time_constant)
        damping = type(impedance)(2.0) * damping_ratio / time_constant
        for e in range(e0, e1):
            art = island_articulations[e]
            d0 = articulation_dof_start[art]
            n = articulation_dof_start[art + 1] - d0
            for dof in range(d0, d0 + n):
                weight = impedance / (one - impedance) * mass_matrix[articulation_H_start[art] + (dof - d0) * (n + 1)]
                j = dof_joint[dof]
                s = step[dof]
                force, active = dof_rows(joint_type[j], joint_q[joint_q_start[j]], joint_qd[dof],
                                         accel[dof] - alpha * s, joint_limit_lower[dof], joint_limit_upper[dof],
                                         joint_friction[dof], weight, stiffness, damping, limits, friction_rows)
                slope -= s * force
                curvature += active * s * s
    return slope, curvature


@wp.func
def step_ratio(e0: int, e1: int, island_articulations: wp.array(dtype=int), articulation_dof_start: wp.array(dtype=int),
               step: wp.array(dtype=wp.Float), accel: wp.array(dtype=wp.Float)):
    """max |step| / (1 + max |accel|) over the dofs of the articulations ``island_articulations``
    e0 to e1."""
    zero = accel[0] * type(accel[0])(0.0)
    largest_step = zero
    largest_accel = zero
    for e in range(e0, e1):
        art = island_articulations[e]
        for i in range(articulation_dof_start[art], articulation_dof_start[art + 1]):
            largest_step = wp.max(largest_step, wp.abs(step[i]))
            largest_accel = wp.max(largest_accel, wp.abs(accel[i]))
    return largest_step / (type(zero)(1.0) + largest_accel)


LINE_SEARCH_EVALUATIONS = 61
"""Evaluations of phi' at most per line search (bisection halves the bracket at each)."""


@wp.func
def island_line_search(
    island: int,
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_dof_start: wp.array(dtype=int),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    articulation_pairs: wp.array(dtype=int),
    pair_articulation: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    accel_free: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    step: wp.array(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    row_step: wp.array(dtype=wp.Float),
):
    """Island ``island``'s exact step length (see ``soft_contact_line_search``); J_r d of its
    rows in contact go to ``row_step`` once, before the evaluations."""
    i0 = island_dof_start[island]
    i1 = island_dof_start[island + 1]
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = accel[0] * type(accel[0])(0.0)
    one = zero + type(zero)(1.0)
    if i1 == i0:  # an island without dofs has nothing to search
        return one
    if step_ratio(e0, e1, island_articulations, articulation_dof_start, step, accel) <= tolerance:
        return one
    dhd = zero  # d^T H d
    dhr = zero  # d^T H (a - a0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n = articulation_dof_start[art + 1] - d0
        h0 = articulation_H_start[art]
        for i in range(n):
            for k in range(n):
                h = mass_matrix[h0 + i * n + k] * step[d0 + i]
                dhd += h * step[d0 + k]
                dhr += h * (accel[d0 + k] - accel_free[d0 + k])
        for entry in range(articulation_pair_start[art], articulation_pair_start[art + 1]):
            pair = articulation_pairs[entry]
            if pair_articulation[pair] == art:
                for r in range(pair_row_start[pair], pair_row_start[pair + 1]):
                    if row_weight[r] != zero:
                        row_step[r] = row_times(r, pair, pair_dof, pair_dof_count, side_column, row_jacobian, step)
    # evaluation 0 at alpha = 0 gives phi'(0); then Newton steps on phi' from alpha = 1
    alpha = zero
    start = zero
    lo = zero
    hi = -one  # no upper bracket yet
    for evaluation in range(LINE_SEARCH_EVALUATIONS):
        slope, curvature = line_slope(
            alpha, dof_joint, joint_type, joint_q_start, joint_limit_lower, joint_limit_upper, joint_friction, e0,
            e1, island_articulations, articulation_pair_start, articulation_pairs, pair_articulation, pair_row_start,
            mass_matrix, row_weight, row_violation, row_step, joint_q, joint_qd, accel, step, articulation_dof_start,
            articulation_H_start, limits, friction_rows, time_constant, damping_ratio, impedance)
        slope += alpha * dhd - dhr
        curvature += dhd
        if evaluation == 0:
            start = slope
            alpha = one
            if not (start < zero and curvature > zero):  # not a descent direction: the full step
                break
            continue
        if wp.abs(slope) <= slope_tolerance * wp.abs(start):
            break
        if slope < zero:
            lo = alpha
        else:
            hi = alpha
        trial = alpha - slope / curvature
        if hi >= zero and (trial <= lo or trial >= hi):
            trial = type(zero)(0.5) * (lo + hi)
        if trial == alpha:  # no step left in this precision
            break
        alpha = trial
    return alpha


@kernel(enable_backward=False)
def soft_contact_line_search(
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_dof_start_in: wp.array(dtype=int),
    island_articulation_start_in: wp.array(dtype=int),
    island_articulations_in: wp.array(dtype=int),
    articulation_pair_start_in: wp.array(dtype=int),
    articulation_pairs_in: wp.array(dtype=int),
    pair_articulation_in: wp.array(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    accel_free_in: wp.array(dtype=wp.Float),
    row_jacobian_in: wp.array2d(dtype=wp.Float),
    row_weight_in: wp.array(dtype=wp.Float),
    row_violation_in: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    step_in: wp.array(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    row_step_out: wp.array(dtype=wp.Float),
    alpha_out: wp.array(dtype=wp.Float),
):
    """One thread per island: the exact minimiser alpha >= 0 of the (convex, piecewise
    quadratic) cost phi(alpha) = f(a - alpha d) along the Newton step d, by Newton steps on
    the piecewise-linear phi' kept inside a bracket (bisection where a step leaves it), until
    |phi'| <= slope_tolerance |phi'(0)| or no step is left in the precision; 1 where d is
    not a descent direction, or already within the convergence tolerance (max |d| <=
    tolerance (1 + max |a|), where the search would only see rounding and the full step keeps
    an unrolled adjoint exact). J_r d of every row in contact is computed once, into
    ``row_step_out``."""
    island = wp.tid()
    alpha_out[island] = island_line_search(
        island, dof_joint, articulation_dof_start, articulation_H_start, joint_type, joint_q_start, joint_limit_lower,
        joint_limit_upper, joint_friction, island_dof_start_in, island_articulation_start_in, island_articulations_in,
        articulation_pair_start_in, articulation_pairs_in, pair_articulation_in, pair_row_start_in, pair_dof_in,
        pair_dof_count_in, mass_matrix_in, accel_free_in, row_jacobian_in, row_weight_in, row_violation_in,
        joint_q_in, joint_qd_in, accel_in, step_in, side_column, limits, friction_rows, time_constant, damping_ratio,
        impedance, tolerance, slope_tolerance, row_step_out)


@kernel
def newton_update(accel_in: wp.array(dtype=wp.Float), step_in: wp.array(dtype=wp.Float),
                  alpha_in: wp.array(dtype=wp.Float), dof_island_in: wp.array(dtype=int),
                  accel_out: wp.array(dtype=wp.Float)):
    """accel_out = accel_in - alpha_in[island] step_in: the line-searched Newton step."""
    i = wp.tid()
    accel_out[i] = accel_in[i] - alpha_in[dof_island_in[i]] * step_in[i]


@kernel(enable_backward=False)
def island_residual(articulation_dof_start: wp.array(dtype=int), island_dof_start_in: wp.array(dtype=int),
                    island_articulation_start_in: wp.array(dtype=int), island_articulations_in: wp.array(dtype=int),
                    step_in: wp.array(dtype=wp.Float), accel_in: wp.array(dtype=wp.Float),
                    residual_out: wp.array(dtype=wp.Float)):
    """One thread per island: max |Newton step| / (1 + max |a|) over its dofs, the optimality
    residual Hess^-1 grad f relative to the accelerations (read by the host)."""
    island = wp.tid()
    residual_out[island] = type(residual_out[island])(0.0)
    if island_dof_start_in[island + 1] > island_dof_start_in[island]:
        residual_out[island] = step_ratio(island_articulation_start_in[island],
                                          island_articulation_start_in[island + 1], island_articulations_in,
                                          articulation_dof_start, step_in, accel_in)


@kernel
def to_island_order(values_in: wp.array(dtype=wp.Float), island_dofs_in: wp.array(dtype=int),
                    ordered_out: wp.array(dtype=wp.Float)):
    """ordered_out[p] = values_in[island_dofs_in[p]]: a dof vector in the islands' order."""
    p = wp.tid()
    ordered_out[p] = values_in[island_dofs_in[p]]


@kernel
def from_island_order(ordered_in: wp.array(dtype=wp.Float), island_dofs_in: wp.array(dtype=int),
                      values_out: wp.array(dtype=wp.Float)):
    """values_out[island_dofs_in[p]] = ordered_in[p]: back to the model's dof order."""
    p = wp.tid()
    values_out[island_dofs_in[p]] = ordered_in[p]


@kernel(enable_backward=False)
def negate(values_in: wp.array(dtype=wp.Float), result_out: wp.array(dtype=wp.Float)):
    """result_out = -values_in."""
    i = wp.tid()
    result_out[i] = -values_in[i]
