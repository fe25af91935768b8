"""Rigid contact as soft constraints solved by Newton iterations on the joint accelerations
(a MuJoCo-style convex formulation), for contacts between bodies and static geometry.

Per articulation, the accelerations a minimise
    f(a) = 1/2 (a - a0)^T H (a - a0) + sum_r 1/2 D_r min(0, J_r a - aref_r)^2
where a0 = H^-1 (tau - c) are the unconstrained accelerations and each contact point adds
four rows r along the edges n +- mu t1, n +- mu t2 of a pyramidal friction cone (J_r: the
edge direction times the point's velocity Jacobian, (ROWS_PER_PAIR,) rows per pair). The
reference acceleration aref_r = -b J_r v - k dist pushes penetrating points out
(k = 1 / time_constant^2, b = 2 damping_ratio / time_constant), and the weight
D_r = impedance / (1 - impedance) / A_rr uses the diagonal approximation
A_rr ~ sum_k J_rk^2 / H_kk of the row's inverse effective mass. f is convex and piecewise
quadratic; Newton steps a <- a - Hess^-1 grad converge to its minimiser, where grad = 0 (the
residual the implicit adjoint differentiates).
"""

import warp as wp

from .articulation import bottom, top, vec6
from .contact import shape_sdf
from .generic import kernel, transform, vec3
from .rigid_contact import contact_point, point_count

POINTS_PER_PAIR = 8
EDGES = 4
ROWS_PER_PAIR = POINTS_PER_PAIR * EDGES


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


@kernel
def soft_contact_rows(
    pair_shapes: wp.array2d(dtype=int),
    pair_articulation: wp.array(dtype=int),
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    body_joint: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    body_q: wp.array(dtype=transform),
    joint_qd: wp.array(dtype=wp.Float),
    dof_motion: wp.array(dtype=vec6),
    mass_matrix: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_velocity: wp.array(dtype=wp.Float),
    row_inverse_mass: wp.array(dtype=wp.Float),
    row_distance: wp.array(dtype=wp.Float),
    row_in_contact: wp.array(dtype=wp.Float),
):
    """One thread per (body shape, static shape) pair: for every contact point and cone
    edge, the row's Jacobian over the articulation's dofs, its velocity J_r v, the diagonal
    estimate sum_k J_rk^2 / H_kk of its inverse effective mass, the point's signed distance
    (m) and whether it penetrates (1) or not (0). (Sums go to arrays: a loop accumulator
    used nonlinearly after its loop would get a wrong adjoint from Warp.)"""
    p = wp.tid()
    a = pair_shapes[p, 0]
    s = pair_shapes[p, 1]
    body = shape_body[a]
    art = pair_articulation[p]
    d0 = articulation_dof_start[art]
    n_dofs = articulation_dof_start[art + 1] - d0
    h0 = articulation_H_start[art]
    X_a = body_q[body] * shape_transform[a]
    X_s = shape_transform[s]
    to_s = wp.transform_inverse(X_s)
    mu = (shape_mu[a] + shape_mu[s]) * type(shape_mu[a])(0.5)
    kind = shape_kind[a]
    pos_b = joint_dfs_pos[body_joint[body]]
    origin = body_origin[body]
    zero = mu * type(mu)(0.0)
    one = type(mu)(1.0)
    for k in range(POINTS_PER_PAIR):
        local, radius = contact_point(kind, shape_size[a], k)
        x = wp.transform_point(X_a, local)
        dist, n_local = shape_sdf(shape_kind[s], wp.transform_point(to_s, x), shape_size[s])
        n = wp.quat_rotate(wp.transform_get_rotation(X_s), n_local)
        gap = dist - radius
        at = x - n * radius - origin
        t1, t2 = tangent_basis(n)
        touching = zero
        if k < point_count(kind, 0) and gap < zero:
            touching = one
        for e in range(EDGES):
            r = p * ROWS_PER_PAIR + k * EDGES + e
            sign = one - type(one)(2.0) * type(one)(float(e % 2))
            tangent = t1
            if e >= 2:
                tangent = t2
            direction = n + tangent * (mu * sign)
            velocity = zero
            inverse_mass = zero
            for i in range(n_dofs):
                j = dof_joint[d0 + i]
                value = zero
                pos_j = joint_dfs_pos[j]
                if pos_j <= pos_b and pos_b < joint_dfs_end[j]:
                    s_i = dof_motion[d0 + i]
                    value = wp.dot(direction, bottom(s_i) + wp.cross(top(s_i), at))
                row_jacobian[r, i] = value
                velocity += value * joint_qd[d0 + i]
                inverse_mass += value * value / mass_matrix[h0 + i * n_dofs + i]
            row_velocity[r] = velocity
            row_inverse_mass[r] = inverse_mass
            row_distance[r] = gap
            row_in_contact[r] = touching


@kernel
def soft_contact_row_parameters(
    time_constant: wp.Float,
    damping_ratio: wp.Float,
    impedance: wp.Float,
    row_velocity: wp.array(dtype=wp.Float),
    row_inverse_mass: wp.array(dtype=wp.Float),
    row_distance: wp.array(dtype=wp.Float),
    row_in_contact: wp.array(dtype=wp.Float),
    row_aref: wp.array(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
):
    """One thread per row: reference acceleration aref = -b J v - k dist and weight
    D = impedance / (1 - impedance) / A_rr (0 for points not in contact)."""
    r = wp.tid()
    one = type(impedance)(1.0)
    stiffness = one / (time_constant * time_constant)
    damping = type(impedance)(2.0) * damping_ratio / time_constant
    row_aref[r] = -damping * row_velocity[r] - stiffness * row_distance[r]
    row_weight[r] = row_in_contact[r] * impedance / (one - impedance) / (row_inverse_mass[r] + type(one)(1.0e-12))


@kernel
def soft_contact_violation(
    pair_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_aref: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
):
    """One thread per row r: J_r a - aref_r (negative: the row pushes)."""
    r = wp.tid()
    art = pair_articulation[r // ROWS_PER_PAIR]
    d0 = articulation_dof_start[art]
    n_dofs = articulation_dof_start[art + 1] - d0
    x = -row_aref[r]
    for i in range(n_dofs):
        x += row_jacobian[r, i] * accel[d0 + i]
    row_violation[r] = x


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


@kernel
def soft_contact_newton_system(
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    accel_free: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    gradient: wp.array(dtype=wp.Float),
    hessian: wp.array(dtype=wp.Float),
):
    """One thread per dof i: gradient_i = (H (a - a0))_i + sum_r J_ri D_r min(0, x_r) and
    row i of the Hessian H + sum_r D_r [x_r < 0] J_r^T J_r."""
    dof = wp.tid()
    art = joint_articulation[dof_joint[dof]]
    d0 = articulation_dof_start[art]
    n_dofs = articulation_dof_start[art + 1] - d0
    i = dof - d0
    base = articulation_H_start[art] + i * n_dofs
    first = articulation_pair_start[art] * ROWS_PER_PAIR
    last = articulation_pair_start[art + 1] * ROWS_PER_PAIR
    g = mass_matrix[base] * type(mass_matrix[base])(0.0)
    for k in range(n_dofs):
        g += mass_matrix[base + k] * (accel[d0 + k] - accel_free[d0 + k])
        h = mass_matrix[base + k]
        for r in range(first, last):
            h += row_active(row_weight[r], row_violation[r]) * row_jacobian[r, i] * row_jacobian[r, k]
        hessian[base + k] = h
    for r in range(first, last):
        g += row_jacobian[r, i] * row_force(row_weight[r], row_violation[r])
    gradient[dof] = g


@kernel
def newton_update(accel: wp.array(dtype=wp.Float), step: wp.array(dtype=wp.Float), accel_out: wp.array(dtype=wp.Float)):
    """a_out = a - step."""
    i = wp.tid()
    accel_out[i] = accel[i] - step[i]


@kernel(enable_backward=False)
def max_abs(values: wp.array(dtype=wp.Float), out: wp.array(dtype=wp.Float)):
    """out[0] = max |values| (one thread; a convergence measure read by the host)."""
    m = values[0] * type(values[0])(0.0)
    for i in range(values.shape[0]):
        m = wp.max(m, wp.abs(values[i]))
    out[0] = m


@kernel(enable_backward=False)
def negate(values: wp.array(dtype=wp.Float), out: wp.array(dtype=wp.Float)):
    """out = -values."""
    i = wp.tid()
    out[i] = -values[i]
