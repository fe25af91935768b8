"""Closed kinematic relations of articulations, as implicit spring-dampers added to the
joint-space system that ``wpsim.kernels.articulation.assemble_joint_space`` builds, before
its Cholesky solve: joint couplings (a linear combination of hinge and slide coordinates held
at a rest value: fixed tendons, joint equalities) and body connections (a point of one body
held at a point of another or of the world: loop closures). Each has a stiffness K and
damping D; the force uses the step-end position (``-dt K rate``) and dt D + dt^2 K enters the
matrix, so any stiffness is stable. Time-constant springs scale with the relation's effective
mass, taken from the mass-matrix diagonal (``dof_inertia``), and with d / (1 - d) (d: an
impedance, as MuJoCo's solimp holds a steady load).

Sums over a relation's terms run over a constant trip count (``MAX_COUPLING_TERMS``, masked):
a sum over a dynamic loop, used nonlinearly after it, lost its adjoint.
"""

import warp as wp

from .articulation import bottom, top, vec6
from .enums import MAX_COUPLING_TERMS
from .generic import kernel, transform, vec3


@kernel
def add_joint_couplings(
    coupling_term_start: wp.array(dtype=int),
    coupling_term_dof: wp.array(dtype=int),
    coupling_term_coef: wp.array(dtype=wp.Float),
    coupling_rest: wp.array(dtype=wp.Float),
    coupling_time_constant: wp.array(dtype=wp.Float),
    coupling_damping_ratio: wp.array(dtype=wp.Float),
    coupling_ke: wp.array(dtype=wp.Float),
    coupling_kd: wp.array(dtype=wp.Float),
    coupling_impedance: wp.array(dtype=wp.Float),
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_inertia_in: wp.array(dtype=wp.Float),
    dt: wp.Float,
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
):
    """One thread per joint coupling (length L = sum c_k q_k of hinge and slide dofs): its
    spring-damper f = K (rest - L - dt dL/dt) - D dL/dt, K = ke + g m / (T zeta)^2 and
    D = kd + 2 g m / T with g = d / (1 - d) (d: impedance), m = 1 / sum(c_k^2 / H_kk) (from ``dof_inertia_in``, the diagonal
    before couplings; no time-constant part when T = 0), added as c_k f to the right-hand
    side and (dt D + dt^2 K) c_i c_k to the joint-space matrix (implicit in position and
    velocity, like an engaged limit)."""
    c = wp.tid()
    t0 = coupling_term_start[c]
    count = coupling_term_start[c + 1] - t0
    zero = coupling_rest[c] * type(coupling_rest[c])(0.0)
    one = type(zero)(1.0)
    length = zero
    rate = zero
    inverse = zero
    for t in range(MAX_COUPLING_TERMS):  # constant trip count: unrolled, so the sums stay differentiable
        term = t0 + wp.min(t, count - 1)
        used = wp.where(t < count, one, zero)
        d = coupling_term_dof[term]
        coef = coupling_term_coef[term] * used
        length += coef * joint_q_in[joint_q_start[dof_joint[d]]]
        rate += coef * joint_qd_in[d]
        inverse += coef * coef / dof_inertia_in[d]
    # branch-free: no time-constant part when T = 0
    period = coupling_time_constant[c]
    spring = wp.where(period > zero, one, zero)
    period = wp.where(period > zero, period, one)
    ratio = coupling_damping_ratio[c]
    spring = spring * coupling_impedance[c] / (one - coupling_impedance[c])
    stiffness = coupling_ke[c] + spring / (inverse * period * period * ratio * ratio)
    damping = coupling_kd[c] + spring * type(zero)(2.0) / (inverse * period)
    force = stiffness * (coupling_rest[c] - length - dt * rate) - damping * rate
    slope = dt * damping + dt * dt * stiffness
    a = joint_articulation[dof_joint[coupling_term_dof[t0]]]
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    for t in range(t0, t0 + count):
        i = coupling_term_dof[t]
        wp.atomic_add(rhs_out, i, coupling_term_coef[t] * force)
        for u in range(t0, t0 + count):
            k = coupling_term_dof[u]
            entry = articulation_H_start[a] + (i - d0) * n + (k - d0)
            wp.atomic_add(mass_matrix_out, entry, slope * coupling_term_coef[t] * coupling_term_coef[u])


@kernel
def connection_jacobian(
    connection_body: wp.array2d(dtype=int),
    connection_point_a: wp.array(dtype=vec3),
    connection_point_b: wp.array(dtype=vec3),
    body_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    dof_inertia_in: wp.array(dtype=wp.Float),
    jacobian_out: wp.array2d(dtype=vec3),
    rate_out: wp.array(dtype=vec3),
    inverse_mass_out: wp.array(dtype=wp.Float),
):
    """One thread per (body connection c, dof slot s of its articulation): the column
    d(p_a - p_b)/dq_k (m per unit of dof k; zero for slots past the articulation's dofs and
    dofs moving neither point), and its share of the gap's rate (m/s, summed atomically) and
    of the inverse effective mass sum |J_k|^2 / H_kk."""
    c, slot = wp.tid()
    a = connection_body[c, 0]
    b = connection_body[c, 1]
    art = joint_articulation[body_joint[a]]
    d0 = articulation_dof_start[art]
    n = articulation_dof_start[art + 1] - d0
    k = d0 + wp.min(slot, n - 1)
    motion = dof_motion_in[k]
    zero = motion[0] * type(motion[0])(0.0)
    one = type(zero)(1.0)
    used = wp.where(slot < n, one, zero)
    omega = top(motion)
    velocity = bottom(motion)
    origin = body_origin[a]
    j = dof_joint[k]
    pos_a = joint_dfs_pos[body_joint[a]]
    moves_a = wp.where(joint_dfs_pos[j] <= pos_a and pos_a < joint_dfs_end[j], one, zero)
    p_a = wp.transform_point(body_q_in[a], connection_point_a[c])
    column = moves_a * (velocity + wp.cross(omega, p_a - origin))
    if b >= 0:
        pos_b = joint_dfs_pos[body_joint[b]]
        moves_b = wp.where(joint_dfs_pos[j] <= pos_b and pos_b < joint_dfs_end[j], one, zero)
        p_b = wp.transform_point(body_q_in[b], connection_point_b[c])
        column = column - moves_b * (velocity + wp.cross(omega, p_b - origin))
    column = used * column
    jacobian_out[c, slot] = column
    wp.atomic_add(rate_out, c, column * joint_qd_in[k])
    wp.atomic_add(inverse_mass_out, c, wp.dot(column, column) / dof_inertia_in[k])


@kernel
def connection_force(
    connection_body: wp.array2d(dtype=int),
    connection_point_a: wp.array(dtype=vec3),
    connection_point_b: wp.array(dtype=vec3),
    connection_time_constant: wp.array(dtype=wp.Float),
    connection_damping_ratio: wp.array(dtype=wp.Float),
    connection_impedance: wp.array(dtype=wp.Float),
    body_q_in: wp.array(dtype=transform),
    rate_in: wp.array(dtype=vec3),
    inverse_mass_in: wp.array(dtype=wp.Float),
    dt: wp.Float,
    force_out: wp.array(dtype=vec3),
    slope_out: wp.array(dtype=wp.Float),
):
    """One thread per body connection: the generalized-force direction -(K (gap + dt rate) +
    D rate) (N) and the matrix weight dt D + dt^2 K of its implicit spring-damper, K = m /
    (T zeta)^2, D = 2 m / T, m = 1 / inverse mass (none when no dof moves the gap)."""
    c = wp.tid()
    a = connection_body[c, 0]
    b = connection_body[c, 1]
    gap = wp.transform_point(body_q_in[a], connection_point_a[c])
    if b >= 0:
        gap = gap - wp.transform_point(body_q_in[b], connection_point_b[c])
    else:
        gap = gap - connection_point_b[c]
    inverse = inverse_mass_in[c]
    zero = inverse * type(inverse)(0.0)
    one = type(zero)(1.0)
    held = connection_impedance[c] / (one - connection_impedance[c])
    mass = held * wp.where(inverse > zero, one / wp.max(inverse, type(zero)(1.0e-30)), zero)
    period = connection_time_constant[c]
    ratio = connection_damping_ratio[c]
    stiffness = mass / (period * period * ratio * ratio)
    damping = type(zero)(2.0) * mass / period
    rate = rate_in[c]
    force_out[c] = -(stiffness * (gap + dt * rate) + damping * rate)
    slope_out[c] = dt * damping + dt * dt * stiffness


@kernel
def add_body_connections(
    connection_body: wp.array2d(dtype=int),
    body_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    jacobian_in: wp.array2d(dtype=vec3),
    force_in: wp.array(dtype=vec3),
    slope_in: wp.array(dtype=wp.Float),
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
):
    """One thread per (body connection, dof slot i, dof slot k): slope J_i . J_k added to
    the joint-space matrix, and (k = 0) J_i . force to the right-hand side."""
    c, i, k = wp.tid()
    art = joint_articulation[body_joint[connection_body[c, 0]]]
    d0 = articulation_dof_start[art]
    n = articulation_dof_start[art + 1] - d0
    if i < n and k < n:
        column = jacobian_in[c, i]
        wp.atomic_add(mass_matrix_out, articulation_H_start[art] + i * n + k,
                      slope_in[c] * wp.dot(column, jacobian_in[c, k]))
        if k == 0:
            wp.atomic_add(rhs_out, d0 + i, wp.dot(column, force_in[c]))
