"""Rigid contact as soft constraints solved by Newton iterations on the joint accelerations
(a MuJoCo-style convex formulation), for contacts of bodies with static geometry and with
each other.

Per island (articulations whose bodies may touch each other, solved together; otherwise
one articulation), the accelerations a minimise
    f(a) = 1/2 (a - a0)^T H (a - a0) + sum_r 1/2 D_r min(0, J_r a - aref_r)^2
where H is block-diagonal in the articulations' mass matrices, a0 = H^-1 (tau - c) are the
unconstrained accelerations, and each contact point of a pair (``rigid_contact.plan_contact``)
adds the rows r of its pyramidal friction cone: with condim 3 the four edges n +- mu t1,
n +- mu t2 (J_r: the edge direction times the Jacobian of the contact point's relative
velocity, the second body's side subtracted), with condim 4 two more, n +- spin n on the
relative angular velocity (torsional friction), with condim 6 four more, n +- roll t1 and
n +- roll t2 on it (rolling friction), with condim 1 the normal n alone. A contact point
takes ``contact_parts`` slots of EDGES rows; rows beyond its 2 (condim - 1) edges weigh
nothing. A point counts within the pair's margin (``shape_margin``), and dist is its signed
distance less the margin. The reference acceleration aref_r = -b J_r v - k d dist pushes
penetrating points apart (k and b from the pair's solref as MuJoCo derives them,
``reference_gains``; d its impedance at |dist|, ``impedance_at``), and
the weight D_r = d / (1 - d) / A uses the diagonal approximation
A_rr ~ sum_k J_rk^2 / H_kk of a row's inverse effective mass, averaged over the slot's four
edges (one weight per contact point, so that opposite edges balance). f is convex and piecewise
quadratic; Newton steps a <- a - Hess^-1 grad converge to its minimiser, where grad = 0 (the
residual the implicit adjoint differentiates). Motion two touching bodies share (J_r a = 0)
costs nothing, so they fall together freely. A revolute or prismatic dof beyond a joint
limit adds one more row on its own dof (no friction), and a dof with dry friction a
friction-loss row whose force is bounded by the friction (``dof_rows``).
"""
import warp as wp

from .articulation import bottom, spatial, top, vec6
from .enums import JOINT_PRISMATIC, JOINT_REVOLUTE, SHAPE_PLANE
from .generic import kernel, transform, vec3
from .rigid_contact import PLAN_NONE, contact_plan, pair_poses, plan_contact

EDGES = 4
"""Rows per contact slot: of a contact point's friction pyramid (``edge_direction``), the
edges 4 part to 4 part + 3 of its part (``contact_parts``)."""


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
def point_motion(
    dof: int, pos_b: int, at: vec3, dof_joint: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int), dof_motion: wp.array(dtype=vec6),
):
    """(angular velocity, velocity of the point at ``at`` from the articulation origin) per unit
    rate of ``dof`` (a 6-vector) of the body whose joint has depth-first position ``pos_b``:
    zero unless the dof's joint is an ancestor of (or is) that body's joint."""
    j = dof_joint[dof]
    value = spatial(at * type(at[0])(0.0), at * type(at[0])(0.0))
    if joint_dfs_pos[j] <= pos_b and pos_b < joint_dfs_end[j]:
        s = dof_motion[dof]
        value = spatial(top(s), bottom(s) + wp.cross(top(s), at))
    return value


@wp.func
def contact_parts(condim: int):
    """Slots of EDGES rows a contact point with ``condim`` takes: 1 (condim 1: its normal row;
    3: its four sliding edges), 2 (condim 4: six edges), 3 (condim 6: ten edges)."""
    parts = int(1)
    if condim == 4:
        parts = 2
    elif condim == 6:
        parts = 3
    return parts


@wp.func
def edge_direction(edge: int, condim: int, n: vec3, t1: vec3, t2: vec3, mu: wp.Float, spin: wp.Float,
                   roll: wp.Float):
    """(angular, linear) direction (a 6-vector, on the relative angular velocity and the contact
    point's relative velocity) of edge ``edge`` (0-11) of a contact point's friction pyramid,
    and 1 for an edge of the pyramid (0 beyond it: a padding row of the slot, zero). Edge pair
    k = edge / 2, + for even edges: n +- mu t1, n +- mu t2, then n with +- spin n (torsion),
    +- roll t1, +- roll t2 (rolling) on the angular velocity; 2 (condim - 1) edges, condim 1 the
    normal alone."""
    zero = mu * type(mu)(0.0)
    k = edge // 2
    sign = type(mu)(1.0)
    if edge % 2 == 1:
        sign = -sign
    linear = n
    angular = n * zero
    if condim == 1:
        k = 5  # the normal alone
    elif k == 0:
        linear = n + t1 * (sign * mu)
    elif k == 1:
        linear = n + t2 * (sign * mu)
    elif k == 2:
        angular = n * (sign * spin)
    elif k == 3:
        angular = t1 * (sign * roll)
    else:
        angular = t2 * (sign * roll)
    real = zero + type(mu)(1.0)
    if (condim == 1 and edge > 0) or (condim > 1 and edge >= 2 * (condim - 1)):
        real = zero
    return spatial(angular, linear) * real, real


@wp.func
def side_jacobians(
    body: int, sign: wp.Float, direction_0: vec6, direction_1: vec6, direction_2: vec6, direction_3: vec6, x: vec3,
    r: int, pair: int, side: int, pair_dof: wp.array2d(dtype=int), pair_dof_count: wp.array2d(dtype=int),
    side_column: int, body_joint: wp.array(dtype=int), body_origin: wp.array(dtype=vec3),
    joint_articulation: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int), joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int), articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int), joint_qd: wp.array(dtype=wp.Float), dof_motion: wp.array(dtype=vec6),
    mass_matrix: wp.array(dtype=wp.Float), row_jacobian: wp.array2d(dtype=wp.Float),
):
    """Write sign * direction_e . (angular velocity of ``body`` and velocity of its point x per
    unit rate of each dof of side ``side`` of the pair's columns, ``pair_dof``; ``point_motion``)
    into rows r + e (the slot's four pyramid edges), columns from side * ``side_column`` on;
    returns (their parts of J_r v, their parts sum_k J_rk^2 / H_kk of the inverse effective
    mass) as 4-vectors. Each dof's motion is computed once for the four edges."""
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
    column = side * side_column
    for c in range(pair_dof_count[pair, side]):
        dof = pair_dof[pair, column + c]
        v = point_motion(dof, pos_b, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion)
        rate = joint_qd[dof]
        diagonal = mass_matrix[h0 + (dof - d0) * (n_dofs + 1)]
        value_0 = sign * wp.dot(direction_0, v)
        value_1 = sign * wp.dot(direction_1, v)
        value_2 = sign * wp.dot(direction_2, v)
        value_3 = sign * wp.dot(direction_3, v)
        row_jacobian[r, column + c] = value_0
        row_jacobian[r + 1, column + c] = value_1
        row_jacobian[r + 2, column + c] = value_2
        row_jacobian[r + 3, column + c] = value_3
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
    body_a: int, body_b: int, sign_a: wp.Float, direction_0: vec6, direction_1: vec6, direction_2: vec6,
    direction_3: vec6, x: vec3, body_joint: wp.array(dtype=int), body_origin: wp.array(dtype=vec3),
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
        v = (point_motion(d0 + i, pos_a, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion)
             - point_motion(d0 + i, pos_b, at, dof_joint, joint_dfs_pos, joint_dfs_end, dof_motion))
        value = wp.vector(wp.dot(direction_0, v), wp.dot(direction_1, v), wp.dot(direction_2, v),
                          wp.dot(direction_3, v)) * sign_a
        inverse_mass = inverse_mass + wp.cw_mul(value, value) / mass_matrix[h0 + i * n_dofs + i]
    return inverse_mass


@wp.func
def bound_gap(ka: int, kb: int, X_a: transform, X_b: transform, centre_a: vec3, half_a: vec3, centre_b: vec3,
              half_b: vec3):
    """A lower bound (m) of the distance between two shapes from their bounding spheres (the
    spheres around their boxes, ``shape_bound_centre`` / ``shape_bound_half``; a plane is its
    half-space z <= 0), less a slack of 1e-3 of the radii for rounding: above zero, the
    shapes cannot touch."""
    radius_a = wp.length(half_a)
    radius_b = wp.length(half_b)
    slack = type(radius_a)(1.0e-3) * (radius_a + radius_b)
    c_a = wp.transform_point(X_a, centre_a)
    c_b = wp.transform_point(X_b, centre_b)
    gap = wp.length(c_a - c_b) - radius_a - radius_b
    if kb == SHAPE_PLANE:
        gap = wp.transform_point(wp.transform_inverse(X_b), c_a)[2] - radius_a
    elif ka == SHAPE_PLANE:
        gap = wp.transform_point(wp.transform_inverse(X_a), c_b)[2] - radius_b
    return gap - slack


@wp.func
def mixed(value_a: wp.Float, value_b: wp.Float, priority_a: int, priority_b: int, mujoco_mixing: int):
    """A friction coefficient of two shapes in contact from theirs: the mean, or with
    ``mujoco_mixing`` MuJoCo's rule (the higher priority's, else the larger)."""
    value = (value_a + value_b) * type(value_a)(0.5)
    if mujoco_mixing != 0:
        value = wp.max(value_a, value_b)
        if priority_a > priority_b:
            value = value_a
        elif priority_b > priority_a:
            value = value_b
    return value


@wp.func
def pair_mu(a: int, b: int, shape_mu: wp.array(dtype=wp.Float), shape_priority: wp.array(dtype=int),
            mujoco_mixing: int):
    """The sliding friction coefficient of shapes a and b in contact (``mixed``)."""
    return mixed(shape_mu[a], shape_mu[b], shape_priority[a], shape_priority[b], mujoco_mixing)


@wp.func
def pair_condim(a: int, b: int, shape_condim: wp.array(dtype=int), shape_priority: wp.array(dtype=int)):
    """The contact dimensions of shapes a and b: the higher priority's condim, else the larger."""
    condim = wp.max(shape_condim[a], shape_condim[b])
    if shape_priority[a] > shape_priority[b]:
        condim = shape_condim[a]
    elif shape_priority[b] > shape_priority[a]:
        condim = shape_condim[b]
    return condim


@wp.func
def pair_rows(
    p: int,
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    shape_priority: wp.array(dtype=int),
    shape_condim: wp.array(dtype=int),
    shape_rotational_mu: wp.array2d(dtype=wp.Float),
    shape_margin: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
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
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    mass_matrix_in: wp.array(dtype=wp.Float),
    side_column: int,
    friction_mixing: int,
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
    mu = pair_mu(a, b, shape_mu, shape_priority, friction_mixing)
    condim = pair_condim(a, b, shape_condim, shape_priority)
    spin = mixed(shape_rotational_mu[a, 0], shape_rotational_mu[b, 0], shape_priority[a], shape_priority[b],
                 friction_mixing)
    roll = mixed(shape_rotational_mu[a, 1], shape_rotational_mu[b, 1], shape_priority[a], shape_priority[b],
                 friction_mixing)
    parts = contact_parts(condim)
    zero = mu * type(mu)(0.0)
    one = type(mu)(1.0)
    margin = shape_margin[a] + shape_margin[b]  # points closer (m) are in contact, pushed towards it
    gap = bound_gap(ka, kb, X_a, X_b, shape_bound_centre[a], shape_bound_half[a], shape_bound_centre[b],
                    shape_bound_half[b])
    plan = PLAN_NONE  # shapes apart (most pairs): no narrow phase, every slot out of contact at distance gap
    flip = False
    axis = int(0)
    side = zero
    if gap <= margin:
        plan, flip, axis, side = contact_plan(ka, kb, shape_size[a], shape_size[b], X_a, X_b, margin)
    sign_a = one  # +1 when a is the first shape (the normal points towards it)
    if flip:
        sign_a = -one
    first_row = pair_row_start_in[p]
    for slot in range((pair_row_start_in[p + 1] - first_row) // EDGES):
        valid = False
        pen = -gap
        n = wp.vector(zero, zero, one)
        x = n
        if gap <= margin:
            valid, pen, n, x = plan_contact(plan, flip, axis, side, slot // parts, a, b, ka, kb, shape_size[a],
                                            shape_size[b], X_a, X_b, shape_points, shape_point_start,
                                            shape_hull_points, shape_hull_point_start, shape_hull_point_count,
                                            shape_plane_normal, shape_plane_offset, shape_plane_start,
                                            shape_plane_count)
        touching = wp.vector(zero, zero, zero, zero)
        velocity = touching
        inverse_mass = velocity
        r = first_row + slot * EDGES
        if valid and pen > -margin:  # rows of slots not in contact are never read but for their zero weight
            t1, t2 = tangent_basis(n)
            x = x + n * (pen * type(pen)(0.5))  # midway between the surfaces, where MuJoCo places a contact
            edge = (slot % parts) * EDGES
            direction_0, edge_0 = edge_direction(edge, condim, n, t1, t2, mu, spin, roll)
            direction_1, edge_1 = edge_direction(edge + 1, condim, n, t1, t2, mu, spin, roll)
            direction_2, edge_2 = edge_direction(edge + 2, condim, n, t1, t2, mu, spin, roll)
            direction_3, edge_3 = edge_direction(edge + 3, condim, n, t1, t2, mu, spin, roll)
            touching = wp.vector(edge_0, edge_1, edge_2, edge_3)
            velocity, inverse_mass = side_jacobians(
                body_a, sign_a, direction_0, direction_1, direction_2, direction_3, x, r, p, 0, pair_dof_in,
                pair_dof_count_in, side_column, body_joint, body_origin, joint_articulation, joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start,
                articulation_H_start, joint_qd_in, dof_motion_in, mass_matrix_in, row_jacobian_out)
            if body_b >= 0:
                velocity_b, inverse_mass_b = side_jacobians(
                    body_b, -sign_a, direction_0, direction_1, direction_2, direction_3, x, r, p, 1, pair_dof_in,
                    pair_dof_count_in, side_column, body_joint, body_origin, joint_articulation, joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start,
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
            row_distance_out[r + e] = -pen - margin
            row_in_contact_out[r + e] = touching[e]


@kernel
def soft_contact_rows(
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    shape_priority: wp.array(dtype=int),
    shape_condim: wp.array(dtype=int),
    shape_rotational_mu: wp.array2d(dtype=wp.Float),
    shape_margin: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
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
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    mass_matrix_in: wp.array(dtype=wp.Float),
    side_column: int,
    friction_mixing: int,
    row_jacobian_out: wp.array2d(dtype=wp.Float),
    row_velocity_out: wp.array(dtype=wp.Float),
    row_inverse_mass_out: wp.array(dtype=wp.Float),
    row_distance_out: wp.array(dtype=wp.Float),
    row_in_contact_out: wp.array(dtype=wp.Float),
):
    """One thread per shape pair of the step (shape a on a body, b static or on a body): for
    every contact point of the pair (``rigid_contact.plan_contact``; ``contact_parts`` slots
    each, by the pair's condim) and pyramid edge, the row's Jacobian of the relative motion
    along the edge direction (``edge_direction``; columns from 0 over the dofs that move a's
    body, from ``side_column`` over b's: ``pair_dof_in``), its velocity J_r v, the diagonal estimate
    sum_k J_rk^2 / H_kk of its inverse effective mass, the slot's signed distance (m; for
    shapes apart by their bounding spheres, ``bound_gap``, a lower bound, without a narrow
    phase) less the pair's margin (``shape_margin``), and whether it is an edge of a point
    within the margin (1) or not (0). (Sums go
    to arrays: a loop accumulator used nonlinearly after its loop would get a wrong adjoint
    from Warp.)"""
    pair_rows(wp.tid(), shape_kind, shape_body, shape_transform, shape_size, shape_mu, shape_priority, shape_condim,
              shape_rotational_mu, shape_margin, shape_point_start,
              shape_points, shape_hull_points, shape_hull_point_start, shape_hull_point_count, shape_plane_normal,
              shape_plane_offset, shape_plane_start, shape_plane_count, shape_bound_centre, shape_bound_half,
              body_joint, body_origin, joint_articulation,
              joint_dfs_pos, joint_dfs_end, dof_joint, articulation_dof_start, articulation_H_start,
              contact_pair_in, pair_row_start_in, pair_dof_in, pair_dof_count_in, body_q_in, joint_qd_in,
              dof_motion_in, mass_matrix_in,
              side_column, friction_mixing, row_jacobian_out, row_velocity_out, row_inverse_mass_out,
              row_distance_out, row_in_contact_out)


@wp.kernel(enable_backward=False)
def soft_contact_pair_parts(
    contact_pair: wp.array2d(dtype=int),
    shape_condim: wp.array(dtype=int),
    shape_priority: wp.array(dtype=int),
    parts_out: wp.array(dtype=int),
):
    """One thread per candidate pair: the slots each of its contact points takes
    (``contact_parts`` of the pair's condim)."""
    i = wp.tid()
    parts_out[i] = contact_parts(pair_condim(contact_pair[i, 0], contact_pair[i, 1], shape_condim, shape_priority))


@wp.func
def impedance_at(penetration: wp.Float, impedance: wp.Float, impedance_min: wp.Float, width: wp.Float,
                 midpoint: wp.Float, power: wp.Float):
    """A contact's impedance at ``penetration`` (m), MuJoCo's solimp curve: dmin + (dmax - dmin)
    y(x), x = penetration / width in [0, 1], y = x^p / m^(p-1) up to the midpoint m and
    1 - (1 - x)^p / (1 - m)^(p-1) beyond; ``impedance`` (dmax) at every depth for width 0."""
    one = type(impedance)(1.0)
    value = impedance
    if width > impedance * type(impedance)(0.0):
        x = wp.clamp(penetration / width, impedance * type(impedance)(0.0), one)
        y = one - wp.pow(one - x, power) / wp.pow(one - midpoint, power - one)
        if x <= midpoint:
            y = wp.pow(x, power) / wp.pow(midpoint, power - one)
        value = impedance_min + (impedance - impedance_min) * y
    return value


@wp.func
def reference_gains(solref_0: wp.Float, solref_1: wp.Float, impedance: wp.Float):
    """(k 1/s^2, b 1/s) of a row's reference acceleration aref = -b J v - k d dist as MuJoCo
    derives them from solref and solimp's dmax (``impedance``): from a time constant and a
    damping ratio (solref_0 > 0) k = 1 / (dmax^2 tc^2 ratio^2), b = 2 / (dmax tc); from the
    direct form (-stiffness, -damping) k = -solref_0 / dmax^2, b = -solref_1 / dmax."""
    one = type(impedance)(1.0)
    stiffness = -solref_0 / (impedance * impedance)
    damping = -solref_1 / impedance
    if solref_0 > impedance * type(impedance)(0.0):
        scale = impedance * solref_0 * solref_1
        stiffness = one / (scale * scale)
        damping = type(impedance)(2.0) / (impedance * solref_0)
    return stiffness, damping


@wp.func
def shape_softness(s: int, shape_solref: wp.array2d(dtype=wp.Float), shape_solimp: wp.array2d(dtype=wp.Float),
                   time_constant: wp.Float, damping_ratio: wp.Float, impedance: wp.Float, impedance_min: wp.Float,
                   impedance_width: wp.Float, impedance_midpoint: wp.Float, impedance_power: wp.Float):
    """(solref, solimp) of shape s as 2- and 5-vectors: its own (``ModelBuilder.set_shape_softness``)
    or, where its solref is 0 0, the solve's settings."""
    zero = impedance * type(impedance)(0.0)
    solref = wp.vector(time_constant, damping_ratio)
    solimp = wp.vector(impedance_min, impedance, impedance_width, impedance_midpoint, impedance_power)
    if shape_solref[s, 0] != zero or shape_solref[s, 1] != zero:
        solref = wp.vector(shape_solref[s, 0], shape_solref[s, 1])
        solimp = wp.vector(shape_solimp[s, 0], shape_solimp[s, 1], shape_solimp[s, 2], shape_solimp[s, 3],
                           shape_solimp[s, 4])
    return solref, solimp


@wp.func
def pair_softness(a: int, b: int, shape_solref: wp.array2d(dtype=wp.Float), shape_solimp: wp.array2d(dtype=wp.Float),
                  shape_solmix: wp.array(dtype=wp.Float), shape_priority: wp.array(dtype=int), time_constant: wp.Float,
                  damping_ratio: wp.Float, impedance: wp.Float, impedance_min: wp.Float, impedance_width: wp.Float,
                  impedance_midpoint: wp.Float, impedance_power: wp.Float):
    """(solref, solimp) of the contacts between shapes a and b, combined as MuJoCo combines two
    geoms': the higher priority's alone; at equal priority mixed with weight solmix_a /
    (solmix_a + solmix_b) (1/2 if both are below 1e-15, all to the other if one is), except a
    direct-form solref (either entry <= 0), which takes each entry's minimum."""
    zero = impedance * type(impedance)(0.0)
    ref_a, imp_a = shape_softness(a, shape_solref, shape_solimp, time_constant, damping_ratio, impedance,
                                  impedance_min, impedance_width, impedance_midpoint, impedance_power)
    ref_b, imp_b = shape_softness(b, shape_solref, shape_solimp, time_constant, damping_ratio, impedance,
                                  impedance_min, impedance_width, impedance_midpoint, impedance_power)
    solref = ref_a
    solimp = imp_a
    if shape_priority[b] > shape_priority[a]:
        solref = ref_b
        solimp = imp_b
    elif shape_priority[b] == shape_priority[a]:
        tiny = type(impedance)(1.0e-15)
        mix_a = shape_solmix[a]
        mix_b = shape_solmix[b]
        mix = type(impedance)(0.5)
        if mix_a >= tiny and mix_b >= tiny:
            mix = mix_a / (mix_a + mix_b)
        elif mix_a < tiny and mix_b >= tiny:
            mix = type(impedance)(0.0)
        elif mix_a >= tiny and mix_b < tiny:
            mix = type(impedance)(1.0)
        rest = type(impedance)(1.0) - mix
        solimp = imp_a * mix + imp_b * rest
        solref = wp.vector(wp.min(ref_a[0], ref_b[0]), wp.min(ref_a[1], ref_b[1]))
        if solref[0] > zero:  # both in the time-constant form
            solref = ref_a * mix + ref_b * rest
    return solref, solimp


@wp.func
def pyramid_inverse_mass(a: int, b: int, condim: int, shape_body: wp.array(dtype=int),
                         shape_mu: wp.array(dtype=wp.Float), shape_priority: wp.array(dtype=int), friction_mixing: int,
                         body_inverse_weight: wp.array2d(dtype=wp.Float)):
    """A contact edge row's inverse mass as MuJoCo estimates a pyramid's (whatever its condim):
    2 mu^2 (1 + mu^2) times the two bodies' translational inverse weights at the reference pose
    (mu at least 1e-5), or for a frictionless contact (condim 1) those weights alone (at least
    1e-15)."""
    mu = wp.max(pair_mu(a, b, shape_mu, shape_priority, friction_mixing), type(shape_mu[a])(1.0e-5))
    translation = body_inverse_weight[shape_body[a], 0]
    if shape_body[b] >= 0:
        translation += body_inverse_weight[shape_body[b], 0]
    if condim != 1:
        translation = type(mu)(2.0) * mu * mu * (type(mu)(1.0) + mu * mu) * translation
    return wp.max(translation, type(mu)(1.0e-15))


@wp.func
def dof_row_weight(impedance: wp.Float, diagonal: wp.Float, inverse_weight: wp.Float, mujoco_weights: int):
    """D of the rows on one dof (joint limit, dry friction): impedance / (1 - impedance) times
    its mass-matrix ``diagonal``, or, with ``mujoco_weights``, over its ``inverse_weight`` at the
    reference pose, as MuJoCo weighs them."""
    scale = impedance / (type(impedance)(1.0) - impedance)
    if mujoco_weights != 0:
        return scale / inverse_weight
    return scale * diagonal


@wp.func
def slot_parameters(
    first: int,
    pair: int,
    shape_body: wp.array(dtype=int),
    shape_mu: wp.array(dtype=wp.Float),
    shape_solref: wp.array2d(dtype=wp.Float),
    shape_solimp: wp.array2d(dtype=wp.Float),
    shape_solmix: wp.array(dtype=wp.Float),
    shape_priority: wp.array(dtype=int),
    shape_condim: wp.array(dtype=int),
    contact_pair: wp.array2d(dtype=int),
    row_velocity: wp.array(dtype=wp.Float),
    row_inverse_mass: wp.array(dtype=wp.Float),
    row_distance: wp.array(dtype=wp.Float),
    row_in_contact: wp.array(dtype=wp.Float),
    body_inverse_weight: wp.array2d(dtype=wp.Float),
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
    row_aref_out: wp.array(dtype=wp.Float),
    row_weight_out: wp.array(dtype=wp.Float),
):
    """The reference accelerations and weights of the four edge rows of shape pair ``pair``'s
    contact slot from row ``first`` (see ``soft_contact_slot_parameters``); the edges share the
    slot's distance, settings and weight, which a padding row (in-contact flag 0) multiplies by 0."""
    one = type(impedance)(1.0)
    weight = row_in_contact[first] * type(one)(0.0)
    stiffness = weight
    damping = weight
    d = weight
    if row_in_contact[first] != weight:  # slots out of contact (most) weigh nothing and are never read
        a = contact_pair[pair, 0]
        b = contact_pair[pair, 1]
        condim = pair_condim(a, b, shape_condim, shape_priority)
        solref, solimp = pair_softness(a, b, shape_solref, shape_solimp, shape_solmix, shape_priority, time_constant,
                                       damping_ratio, impedance, impedance_min, impedance_width, impedance_midpoint,
                                       impedance_power)
        d = impedance_at(wp.abs(row_distance[first]), solimp[1], solimp[0], solimp[2], solimp[3], solimp[4])
        stiffness, damping = reference_gains(solref[0], solref[1], solimp[1])
        if mujoco_weights != 0:
            weight = d / (one - d) / pyramid_inverse_mass(a, b, condim, shape_body, shape_mu, shape_priority,
                                                          friction_mixing, body_inverse_weight)
        else:
            inverse_mass = (row_inverse_mass[first] * row_in_contact[first]
                            + row_inverse_mass[first + 1] * row_in_contact[first + 1]
                            + row_inverse_mass[first + 2] * row_in_contact[first + 2]
                            + row_inverse_mass[first + 3] * row_in_contact[first + 3])
            edges = row_in_contact[first] + row_in_contact[first + 1] + row_in_contact[first + 2] + row_in_contact[
                first + 3]
            weight = d / (one - d) / (inverse_mass / edges + type(one)(1.0e-12))
        if condim != 1:
            weight = weight * impratio
    for e in range(EDGES):
        row_aref_out[first + e] = -damping * row_velocity[first + e] - stiffness * d * row_distance[first + e]
        row_weight_out[first + e] = weight * row_in_contact[first + e]


@kernel
def soft_contact_slot_parameters(
    shape_body: wp.array(dtype=int),
    shape_mu: wp.array(dtype=wp.Float),
    shape_solref: wp.array2d(dtype=wp.Float),
    shape_solimp: wp.array2d(dtype=wp.Float),
    shape_solmix: wp.array(dtype=wp.Float),
    shape_priority: wp.array(dtype=int),
    shape_condim: wp.array(dtype=int),
    contact_pair_in: wp.array2d(dtype=int),
    row_pair_in: wp.array(dtype=int),
    row_velocity_in: wp.array(dtype=wp.Float),
    row_inverse_mass_in: wp.array(dtype=wp.Float),
    row_distance_in: wp.array(dtype=wp.Float),
    row_in_contact_in: wp.array(dtype=wp.Float),
    body_inverse_weight_in: wp.array2d(dtype=wp.Float),
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
    row_aref_out: wp.array(dtype=wp.Float),
    row_weight_out: wp.array(dtype=wp.Float),
):
    """One thread per contact slot (its four edge rows from row EDGES * tid): reference
    accelerations aref = -b J v - k d dist and one weight D = d / (1 - d) / A (both 0 for a
    slot not in contact, D 0 for its padding rows), from the pair's solref and solimp
    (``pair_softness``; the scalar settings stand for shapes without their own): k and b as
    MuJoCo derives them (``reference_gains``), d the impedance at the slot's |distance| past
    the margin
    (``impedance_at``), A the mean of A_rr over the slot's pyramid edges, or, with
    ``mujoco_weights``, MuJoCo's estimate from the bodies' inverse weights at the reference pose
    (``pyramid_inverse_mass``), times ``impratio`` but for a frictionless contact (MuJoCo's ratio
    of frictional to normal impedance, which a pyramid's edges share). One weight per
    slot: with a weight per edge, edges nearly orthogonal to the motion got large weights, and
    at a penetrating contact their unequal forces added up to a spurious friction force (a
    pendulum resting on its own base sank 24 mm)."""
    first = wp.tid() * EDGES
    slot_parameters(first, row_pair_in[first], shape_body, shape_mu, shape_solref, shape_solimp, shape_solmix,
                    shape_priority, shape_condim, contact_pair_in, row_velocity_in, row_inverse_mass_in, row_distance_in,
                    row_in_contact_in, body_inverse_weight_in, time_constant, damping_ratio, impedance, impedance_min,
                    impedance_width, impedance_midpoint, impedance_power, mujoco_weights, impratio, friction_mixing,
                    row_aref_out, row_weight_out)


@wp.func
def row_times(r: int, pair: int, pair_dof: wp.array2d(dtype=int), pair_dof_count: wp.array2d(dtype=int),
              side_column: int, row_jacobian: wp.array2d(dtype=wp.Float), vector: wp.array(dtype=wp.Float)):
    """J_r . vector over the columns of both sides of row r's pair (side b's from
    ``side_column`` on; ``pair_dof``: each column's dof)."""
    x = vector[0] * type(vector[0])(0.0)
    for side in range(2):
        for i in range(pair_dof_count[pair, side]):
            column = side * side_column + i
            x += row_jacobian[r, column] * vector[pair_dof[pair, column]]
    return x


@wp.func
def slot_times(first: int, pair: int, pair_dof: wp.array2d(dtype=int), pair_dof_count: wp.array2d(dtype=int),
               side_column: int, row_jacobian: wp.array2d(dtype=wp.Float), vector: wp.array(dtype=wp.Float)):
    """J_r . vector of the four edge rows of the contact slot from row ``first`` (a 4-vector,
    each entry summed in the order of ``row_times``) in one pass over the pair's dofs."""
    zero = vector[0] * type(vector[0])(0.0)
    x = wp.vector(zero, zero, zero, zero)
    for side in range(2):
        for i in range(pair_dof_count[pair, side]):
            column = side * side_column + i
            v = vector[pair_dof[pair, column]]
            x = x + wp.vector(row_jacobian[first, column] * v, row_jacobian[first + 1, column] * v,
                              row_jacobian[first + 2, column] * v, row_jacobian[first + 3, column] * v)
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


DOF_INVERSE_WEIGHT = wp.constant(0)
DOF_LIMIT_SOLREF = wp.constant(1)
DOF_LIMIT_SOLIMP = wp.constant(3)
DOF_FRICTION_SOLREF = wp.constant(8)
DOF_FRICTION_SOLIMP = wp.constant(10)
DOF_SETTINGS = 15
"""Columns of the (D, DOF_SETTINGS) settings of the rows on one dof (``SoftContact.dof_row_settings``):
its inverse weight at the reference pose, then the limit row's solref (2) and solimp (5), then
the friction-loss row's."""


@wp.func
def settings_row(settings: wp.array2d(dtype=wp.Float), dof: int, solref: int, solimp: int, penetration: wp.Float):
    """(impedance at ``penetration`` by the solimp from column ``solimp``, k, b from the solref from
    column ``solref``: ``reference_gains``) of one of dof ``dof``'s rows."""
    dmax = settings[dof, solimp + 1]
    d = impedance_at(penetration, dmax, settings[dof, solimp], settings[dof, solimp + 2], settings[dof, solimp + 3],
                     settings[dof, solimp + 4])
    stiffness, damping = reference_gains(settings[dof, solref], settings[dof, solref + 1], dmax)
    return d, stiffness, damping


@wp.func
def dof_rows(jtype: int, q: wp.Float, qd: wp.Float, accel: wp.Float, lower: wp.Float, upper: wp.Float,
             friction: wp.Float, diagonal: wp.Float, settings: wp.array2d(dtype=wp.Float), dof: int,
             mujoco_weights: int, limits: int, friction_rows: int):
    """(d cost / d a_i, d^2 cost / d a_i^2) of the rows on dof i's own acceleration a_i:
    with ``limits``, a revolute or prismatic dof beyond its lower (upper) limit has a row
    J = e_i (-e_i), x = J a + b J qd + k d dist (dist < 0: beyond the limit; d the limit
    solimp's impedance at |dist|), cost 1/2 D min(0, x)^2; with ``friction_rows``, a dof with
    dry friction F > 0 (N m or N) has the friction-loss row x = a_i + b qd_i (reference -b
    qd_i: it resists the velocity, no position term; d its solimp's impedance at zero
    violation) with the Huber cost 1/2 D x^2 for |D x| <= F, F |x| - F^2 / (2 D) beyond, so
    its force is D x clamped to [-F, F]: it sticks below F and slides at F. k, b and d from
    the dof's ``settings`` row (``settings_row``), D from d and the mass-matrix
    ``diagonal`` as ``dof_row_weight`` says; MuJoCo's law for both rows."""
    zero = q * type(q)(0.0)
    one = zero + type(q)(1.0)
    force = zero
    curvature = zero
    inverse_weight = settings[dof, DOF_INVERSE_WEIGHT]
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
            d, stiffness, damping = settings_row(settings, dof, DOF_LIMIT_SOLREF, DOF_LIMIT_SOLIMP, -distance)
            weight = dof_row_weight(d, diagonal, inverse_weight, mujoco_weights)
            x = sign * accel + damping * sign * qd + stiffness * d * distance
            force += sign * row_force(weight, x)
            curvature += row_active(weight, x)
    if friction_rows != 0 and friction > zero:
        d, stiffness, damping = settings_row(settings, dof, DOF_FRICTION_SOLREF, DOF_FRICTION_SOLIMP, zero)
        weight = dof_row_weight(d, diagonal, inverse_weight, mujoco_weights)
        x = accel + damping * qd
        force += wp.clamp(weight * x, -friction, friction)
        if wp.abs(weight * x) < friction:
            curvature += weight
    return force, curvature
