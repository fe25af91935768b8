"""Closed kinematic relations of articulations, as implicit spring-dampers added to the
joint-space system that ``wpsim.kernels.articulation.assemble_joint_space`` builds, before
its Cholesky solve: joint couplings (a polynomial of hinge and slide coordinates held at a
rest value: fixed tendons, joint equalities) and body connections (a point of one body held
at a point of another or of the world, a loop closure; with its orientation too, a weld). Each has a stiffness K and
damping D; the force uses the step-end position (``-dt K rate``) and dt D + dt^2 K enters the
matrix, so any stiffness is stable. Time-constant springs scale with the relation's effective
mass (J H^-1 J^T with the mass matrix H's diagonal, ``dof_inertia``: a scalar for a coupling,
3x3 matrices for a connection's gap and turn), and with d / (1 - d) (d: an impedance, as
MuJoCo's solimp holds a steady load).

Sums over a relation's terms run over a constant trip count (``MAX_COUPLING_TERMS``, masked):
a sum over a dynamic loop, used nonlinearly after it, lost its adjoint.
"""

import warp as wp

from .articulation import bottom, spatial, top, vec6
from .enums import MAX_COUPLING_POWER, MAX_COUPLING_TERMS
from .generic import kernel, mat33, quat, transform, vec3
from .soft_contact import impedance_at, reference_gains

HARD_DIRECTION_CUTOFF = wp.constant(0.1)
"""A connection's effective mass fades out in directions whose inverse mass is below about
this fraction of the trace of its inverse-mass matrix (see ``held_spring``)."""


@wp.func
def power_and_slope(q: wp.Float, power: int):
    """(q^p, p q^(p - 1)) for p in 1 .. MAX_COUPLING_POWER, by constant-trip products (no pow,
    so a negative q keeps its adjoint)."""
    one = q * type(q)(0.0) + type(q)(1.0)
    value = one
    slope = one
    for e in range(MAX_COUPLING_POWER):
        value = value * wp.where(e < power, q, one)
        slope = slope * wp.where(e < power - 1, q, one)
    return value, slope * type(q)(float(power))


@wp.func
def soft_row_law(violation: wp.Float, depth: wp.Float, rate: wp.Float, inverse_mass: wp.Float,
                 time_constant: wp.Float, damping_ratio: wp.Float, solimp: wp.array2d(dtype=wp.Float), row: int,
                 dt: wp.Float):
    """(force per unit of Jacobian, weight D) of an equality row of the soft-constraint solve as
    MuJoCo's law has it: force -D (b rate + k d violation), D = d / (1 - d) / A with A the
    row's ``inverse_mass``, d the impedance at ``depth`` (solimp ``row``), k and b from the
    solref with its time constant raised to 2 dt at least (MuJoCo's refsafe). Folded into the
    joint-space system as weight J^T J and force J^T f, the row's cost 1/2 D (J a - aref)^2 is
    always active (bilateral), so it is exactly that quadratic term of the solve's cost."""
    d = impedance_at(depth, solimp[row, 1], solimp[row, 0], solimp[row, 2], solimp[row, 3],
                     solimp[row, 4])
    stiffness, damping = reference_gains(wp.max(time_constant, type(dt)(2.0) * dt), damping_ratio, solimp[row, 1])
    weight = d / ((type(d)(1.0) - d) * wp.max(inverse_mass, type(d)(1.0e-15)))
    return -weight * (damping * rate + stiffness * d * violation), weight


@wp.func
def in_one_branch(i: int, k: int, dof_joint: wp.array(dtype=int), joint_dfs_pos: wp.array(dtype=int),
                  joint_dfs_end: wp.array(dtype=int)):
    """Whether dofs i and k lie on one branch of their articulation: one's joint is the
    other's or an ancestor of it."""
    a = dof_joint[i]
    b = dof_joint[k]
    return ((joint_dfs_pos[a] <= joint_dfs_pos[b] and joint_dfs_pos[b] < joint_dfs_end[a])
            or (joint_dfs_pos[b] <= joint_dfs_pos[a] and joint_dfs_pos[a] < joint_dfs_end[b]))


@wp.func
def add_joint_coupling(
    c: int,
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
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_inertia_in: wp.array(dtype=wp.Float),
    dof_inverse_weight_in: wp.array(dtype=wp.Float),
    coupling_target: wp.array(dtype=wp.Float),
    dt: wp.Float,
    rows: int,
    implicit_after_solve: int,
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    damped_matrix_out: wp.array(dtype=wp.Float),
    coupling_implicit_out: wp.array(dtype=wp.Float),
):
    """Joint coupling ``c`` (length L = sum c_k q_k^p_k of hinge and slide dofs,
    slopes J_k = dL/dq_k): its spring-damper f = K (rest - L - dt dL/dt) - D dL/dt,
    K = ke + g m / (T zeta)^2 and D = kd + 2 g m / T with g = d / (1 - d) (d: solimp's dmin),
    m = 1 / sum(J_k^2 / H_kk) (from ``dof_inertia_in``, the diagonal before couplings; no
    time-constant part when T = 0), added as J_k f to the right-hand side and
    (dt D + dt^2 K) J_i J_k to the joint-space matrix (implicit in position and velocity,
    like an engaged limit). With ``rows`` (1: weights from the diagonal, 2: MuJoCo's, the
    sum of the coupled dofs' ``dof_inverse_weight_in``) the time-constant part is instead
    a soft-constraint equality row on L - rest (``soft_row_law``). The coupling's drive adds
    ke (target - L) - kd dL/dt (clamped to its force limit) to f, explicit in position, its
    implicit kd as dt kd J_i J_k where dofs i and k lie on one branch (``in_one_branch``: where
    MuJoCo's sparse mass matrix has entries, which its implicit integrators keep), into
    damped_matrix_out with ``implicit_after_solve`` (MuJoCo's order, ``implicit_terms``; dt kd
    also into coupling_implicit_out) or else with the rest."""
    t0 = coupling_term_start[c]
    count = coupling_term_start[c + 1] - t0
    zero = coupling_rest[c] * type(coupling_rest[c])(0.0)
    one = type(zero)(1.0)
    length = zero
    rate = zero
    inverse = zero
    reference_inverse = zero
    for t in range(MAX_COUPLING_TERMS):  # constant trip count: unrolled, so the sums stay differentiable
        term = t0 + wp.min(t, count - 1)
        used = wp.where(t < count, one, zero)
        d = coupling_term_dof[term]
        value, slope = power_and_slope(joint_q_in[joint_q_start[dof_joint[d]]], coupling_term_power[term])
        coef = coupling_term_coef[term] * used
        length += coef * value
        rate += coef * slope * joint_qd_in[d]
        inverse += coef * coef * slope * slope / dof_inertia_in[d]
        first_use = used
        for u in range(MAX_COUPLING_TERMS):  # a dof of several terms (powers) counts once, as MuJoCo's joint
            if u < t and coupling_term_dof[t0 + wp.min(u, count - 1)] == d:
                first_use = zero
        reference_inverse += first_use * dof_inverse_weight_in[d]
    # branch-free: no time-constant part when T = 0
    period = coupling_time_constant[c]
    spring = wp.where(period > zero, one, zero)
    period = wp.where(period > zero, period, one)
    ratio = coupling_damping_ratio[c]
    dmin = coupling_solimp[c, 0]
    row_force = zero
    row_weight = zero
    if rows != 0:
        if rows == 2:
            inverse = reference_inverse
        violation = length - coupling_rest[c]
        row_force, row_weight = soft_row_law(violation, wp.abs(violation), rate, inverse, period, ratio,
                                             coupling_solimp, c, dt)
        row_force = row_force * spring
        row_weight = row_weight * spring
        spring = zero
    spring = spring * dmin / (one - dmin)
    stiffness = coupling_ke[c] + spring / (inverse * period * period * ratio * ratio)
    damping = coupling_kd[c] + spring * type(zero)(2.0) / (inverse * period)
    drive = coupling_drive_ke[c] * (coupling_target[c] - length) - coupling_drive_kd[c] * rate
    drive_slope = dt * coupling_drive_kd[c] * coupling_drive_implicit[c]
    if wp.abs(drive) > coupling_drive_force_limit[c]:
        drive = wp.clamp(drive, -coupling_drive_force_limit[c], coupling_drive_force_limit[c])
        drive_slope = zero
    force = stiffness * (coupling_rest[c] - length - dt * rate) - damping * rate + row_force + drive
    weight = dt * damping + dt * dt * stiffness + row_weight
    if implicit_after_solve != 0:
        coupling_implicit_out[c] = drive_slope
    a = joint_articulation[dof_joint[coupling_term_dof[t0]]]
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    for t in range(t0, t0 + count):
        i = coupling_term_dof[t]
        unused, slope_i = power_and_slope(joint_q_in[joint_q_start[dof_joint[i]]], coupling_term_power[t])
        slope_i = slope_i * coupling_term_coef[t]
        wp.atomic_add(rhs_out, i, slope_i * force)
        for u in range(t0, t0 + count):
            k = coupling_term_dof[u]
            unused_k, slope_k = power_and_slope(joint_q_in[joint_q_start[dof_joint[k]]], coupling_term_power[u])
            entry = articulation_H_start[a] + (i - d0) * n + (k - d0)
            wp.atomic_add(mass_matrix_out, entry, weight * slope_i * slope_k * coupling_term_coef[u])
            if in_one_branch(i, k, dof_joint, joint_dfs_pos, joint_dfs_end):
                if implicit_after_solve != 0:
                    wp.atomic_add(damped_matrix_out, entry, drive_slope * slope_i * slope_k * coupling_term_coef[u])
                else:
                    wp.atomic_add(mass_matrix_out, entry, drive_slope * slope_i * slope_k * coupling_term_coef[u])


@kernel
def add_joint_couplings(
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
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_inertia_in: wp.array(dtype=wp.Float),
    dof_inverse_weight_in: wp.array(dtype=wp.Float),
    coupling_target: wp.array(dtype=wp.Float),
    dt: wp.Float,
    rows: int,
    implicit_after_solve: int,
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    damped_matrix_out: wp.array(dtype=wp.Float),
    coupling_implicit_out: wp.array(dtype=wp.Float),
):
    """One thread per joint coupling: ``add_joint_coupling``."""
    add_joint_coupling(wp.tid(), coupling_term_start, coupling_term_dof, coupling_term_coef, coupling_term_power,
                       coupling_rest, coupling_time_constant, coupling_damping_ratio, coupling_ke, coupling_kd,
                       coupling_solimp, coupling_drive_ke, coupling_drive_kd, coupling_drive_force_limit,
                       coupling_drive_implicit, dof_joint, joint_articulation, joint_q_start, joint_dfs_pos,
                       joint_dfs_end, articulation_dof_start, articulation_H_start, joint_q_in, joint_qd_in,
                       dof_inertia_in, dof_inverse_weight_in, coupling_target, dt, rows, implicit_after_solve,
                       mass_matrix_out, rhs_out, damped_matrix_out, coupling_implicit_out)


@wp.func
def coupling_implicit_force(
    c: int,
    coupling_term_start: wp.array(dtype=int),
    coupling_term_dof: wp.array(dtype=int),
    coupling_term_coef: wp.array(dtype=wp.Float),
    coupling_term_power: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    coupling_implicit_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    force_out: wp.array(dtype=wp.Float),
):
    """Joint coupling ``c``: adds sum_k w J_i J_k a_k over the dofs k on one branch
    with i (``in_one_branch``) to force_out[i], its drive's implicit term (w = dt kd,
    ``coupling_implicit_in``; J_k = dL/dq_k) at the accelerations a, as ``add_joint_couplings``
    puts it in the matrix: the part of MuJoCo's order's final solve (``implicit_terms``) that is
    not on the diagonal."""
    t0 = coupling_term_start[c]
    count = coupling_term_start[c + 1] - t0
    for t in range(t0, t0 + count):
        i = coupling_term_dof[t]
        unused, slope_i = power_and_slope(joint_q_in[joint_q_start[dof_joint[i]]], coupling_term_power[t])
        for u in range(t0, t0 + count):
            k = coupling_term_dof[u]
            if in_one_branch(i, k, dof_joint, joint_dfs_pos, joint_dfs_end):
                unused_k, slope_k = power_and_slope(joint_q_in[joint_q_start[dof_joint[k]]], coupling_term_power[u])
                wp.atomic_add(force_out, i, coupling_implicit_in[c] * coupling_term_coef[t] * slope_i
                              * coupling_term_coef[u] * slope_k * accel_in[k])


@kernel
def coupling_implicit_forces(
    coupling_term_start: wp.array(dtype=int),
    coupling_term_dof: wp.array(dtype=int),
    coupling_term_coef: wp.array(dtype=wp.Float),
    coupling_term_power: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    coupling_implicit_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    force_out: wp.array(dtype=wp.Float),
):
    """One thread per joint coupling: ``coupling_implicit_force``."""
    coupling_implicit_force(wp.tid(), coupling_term_start, coupling_term_dof, coupling_term_coef,
                            coupling_term_power, dof_joint, joint_q_start, joint_dfs_pos, joint_dfs_end,
                            joint_q_in, coupling_implicit_in, accel_in, force_out)


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
    jacobian_out: wp.array2d(dtype=vec6),
    rate_out: wp.array(dtype=vec6),
    inverse_mass_out: wp.array2d(dtype=mat33),
):
    """One thread per (body connection c, dof slot s of its articulation): the column of
    d(turn, gap)/dq_k (spatial: the relative rotation of the first body against the second,
    rad, and the gap p_a - p_b, m, per unit of dof k; zero for slots past the articulation's
    dofs and dofs moving neither body), its share of their rates (summed atomically) and of
    the inverse effective inertia and mass matrices sum J_k J_k^T / H_kk (rotation,
    translation: J H^-1 J^T with H's diagonal)."""
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
    turn = moves_a * omega
    if b >= 0:
        pos_b = joint_dfs_pos[body_joint[b]]
        moves_b = wp.where(joint_dfs_pos[j] <= pos_b and pos_b < joint_dfs_end[j], one, zero)
        p_b = wp.transform_point(body_q_in[b], connection_point_b[c])
        column = column - moves_b * (velocity + wp.cross(omega, p_b - origin))
        turn = turn - moves_b * omega
    entry = used * spatial(turn, column)
    jacobian_out[c, slot] = entry
    wp.atomic_add(rate_out, c, entry * joint_qd_in[k])
    wp.atomic_add(inverse_mass_out, c, 0, wp.outer(top(entry), top(entry)) / dof_inertia_in[k])
    wp.atomic_add(inverse_mass_out, c, 1, wp.outer(bottom(entry), bottom(entry)) / dof_inertia_in[k])


@wp.func
def held_spring(inverse: mat33, held: wp.Float, period: wp.Float, ratio: wp.Float):
    """(stiffness, damping) matrices of a time-constant spring on a 3-vector of inverse
    effective mass matrix A: K = M / (T zeta)^2, D = 2 M / T with M = held A (A^2 + eps^2)^-1,
    eps = HARD_DIRECTION_CUTOFF trace(A): A's inverse in the directions the dofs move easily,
    fading to 0 in those they barely move (where 1 / eigenvalue would be a stiff spring
    acting through a dof's tiny lever)."""
    eps = wp.max((inverse[0, 0] + inverse[1, 1] + inverse[2, 2]) * type(held)(HARD_DIRECTION_CUTOFF), type(held)(1.0e-30))
    square = inverse * inverse + wp.identity(n=3, dtype=type(held)) * (eps * eps)
    mass = held * inverse * wp.inverse(square)
    return mass / (period * period * ratio * ratio), type(held)(2.0) * mass / period


@wp.func
def point_bias_acceleration(body: int, point: vec3, body_origin: wp.array(dtype=vec3), gravity: wp.array(dtype=vec3),
                            body_twist: wp.array(dtype=vec6), body_bias_acc: wp.array(dtype=vec6)):
    """The acceleration (m/s^2) of the world ``point`` fixed on ``body`` at zero joint
    accelerations, J' qd: from the body's twist (w, v) and velocity-product spatial
    acceleration (al, a) at its articulation origin o (``body_bias_acc`` less the base's -g),
    a + al x r + w x (v + w x r) with r = point - o."""
    twist = body_twist[body]
    spatial_acc = body_bias_acc[body]
    w = top(twist)
    r = point - body_origin[body]
    return bottom(spatial_acc) + gravity[0] + wp.cross(top(spatial_acc), r) + wp.cross(w, bottom(twist) + wp.cross(w, r))


@kernel
def connection_force(
    connection_body: wp.array2d(dtype=int),
    connection_point_a: wp.array(dtype=vec3),
    connection_point_b: wp.array(dtype=vec3),
    connection_rotation: wp.array(dtype=quat),
    connection_holds_rotation: wp.array(dtype=int),
    connection_time_constant: wp.array(dtype=wp.Float),
    connection_damping_ratio: wp.array(dtype=wp.Float),
    connection_solimp: wp.array2d(dtype=wp.Float),
    body_origin: wp.array(dtype=vec3),
    gravity: wp.array(dtype=vec3),
    body_q_in: wp.array(dtype=transform),
    body_twist_in: wp.array(dtype=vec6),
    body_bias_acc_in: wp.array(dtype=vec6),
    rate_in: wp.array(dtype=vec6),
    inverse_mass_in: wp.array2d(dtype=mat33),
    body_inverse_weight_in: wp.array2d(dtype=wp.Float),
    dt: wp.Float,
    rows: int,
    force_out: wp.array(dtype=vec6),
    slope_out: wp.array2d(dtype=mat33),
):
    """One thread per body connection: the generalized-force direction -(K (e + dt rate) +
    D rate) of its implicit spring-dampers on the gap e (N) and, for a weld, on the turn
    (N m: e = 2 vec(E) sign(E_w), E = q_a r^-1 q_b^-1 the rotation from the held orientation,
    the rotation vector to third order), and their matrix weights dt D + dt^2 K (rotation,
    translation); K and D from ``held_spring`` with d solimp's dmin. With ``rows`` (1:
    weights from the diagonal, 2: MuJoCo's, the bodies' translational
    ``body_inverse_weight_in``) a point connection's gap is instead three soft-constraint
    equality rows along the world axes (``soft_row_law``, their impedance at the gap's
    length, and, as MuJoCo's connect, the gap's velocity-product acceleration J' qd taken out
    of their reference acceleration: ``point_bias_acceleration``); a weld keeps its
    spring-dampers."""
    c = wp.tid()
    a = connection_body[c, 0]
    b = connection_body[c, 1]
    X_a = body_q_in[a]
    gap = wp.transform_point(X_a, connection_point_a[c])
    q_b = wp.quat_identity(dtype=type(gap[0]))
    if b >= 0:
        gap = gap - wp.transform_point(body_q_in[b], connection_point_b[c])
        q_b = wp.transform_get_rotation(body_q_in[b])
    else:
        gap = gap - connection_point_b[c]
    error = wp.transform_get_rotation(X_a) * wp.quat_inverse(connection_rotation[c]) * wp.quat_inverse(q_b)
    zero = gap[0] * type(gap[0])(0.0)
    one = type(zero)(1.0)
    welded = wp.where(connection_holds_rotation[c] != 0, one, zero)
    turn = type(zero)(2.0) * wp.where(error[3] < zero, -one, one) * wp.vector(error[0], error[1], error[2])
    dmin = connection_solimp[c, 0]
    held = dmin / (one - dmin)
    period = connection_time_constant[c]
    ratio = connection_damping_ratio[c]
    stiffness, damping = held_spring(inverse_mass_in[c, 1], held, period, ratio)
    stiffness_r, damping_r = held_spring(inverse_mass_in[c, 0], held * welded, period, ratio)
    rate = rate_in[c]
    gap_force = -(stiffness * (gap + dt * bottom(rate)) + damping * bottom(rate))
    gap_slope = dt * damping + dt * dt * stiffness
    if rows != 0 and connection_holds_rotation[c] == 0:
        inverse = wp.get_diag(inverse_mass_in[c, 1])
        if rows == 2:
            reference = body_inverse_weight_in[a, 0]
            if b >= 0:
                reference += body_inverse_weight_in[b, 0]
            inverse = wp.vector(reference, reference, reference)
        depth = zero  # the impedance at the gap's length, as MuJoCo's connect (no NaN adjoint at 0)
        if wp.dot(gap, gap) > zero:
            depth = wp.length(gap)
        rate_b = bottom(rate)
        bias = point_bias_acceleration(a, wp.transform_point(X_a, connection_point_a[c]), body_origin, gravity,
                                       body_twist_in, body_bias_acc_in)
        if b >= 0:
            bias = bias - point_bias_acceleration(b, wp.transform_point(body_q_in[b], connection_point_b[c]),
                                                  body_origin, gravity, body_twist_in, body_bias_acc_in)
        force_x, weight_x = soft_row_law(gap[0], depth, rate_b[0], inverse[0], period, ratio, connection_solimp, c, dt)
        force_y, weight_y = soft_row_law(gap[1], depth, rate_b[1], inverse[1], period, ratio, connection_solimp, c, dt)
        force_z, weight_z = soft_row_law(gap[2], depth, rate_b[2], inverse[2], period, ratio, connection_solimp, c, dt)
        weights = wp.vector(weight_x, weight_y, weight_z)
        gap_force = wp.vector(force_x, force_y, force_z) - wp.cw_mul(weights, bias)
        gap_slope = wp.diag(weights)
    force_out[c] = spatial(-(stiffness_r * (turn + dt * top(rate)) + damping_r * top(rate)), gap_force)
    slope_out[c, 0] = dt * damping_r + dt * dt * stiffness_r
    slope_out[c, 1] = gap_slope


@kernel
def add_body_connections(
    connection_body: wp.array2d(dtype=int),
    body_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    jacobian_in: wp.array2d(dtype=vec6),
    force_in: wp.array(dtype=vec6),
    slope_in: wp.array2d(dtype=mat33),
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
):
    """One thread per (body connection, dof slot i, dof slot k): J_i^T S J_k with S the slope
    matrices (rotation and translation parts) added to the joint-space matrix, and (k = 0)
    J_i . force to the right-hand side."""
    c, i, k = wp.tid()
    art = joint_articulation[body_joint[connection_body[c, 0]]]
    d0 = articulation_dof_start[art]
    n = articulation_dof_start[art + 1] - d0
    if i < n and k < n:
        column = jacobian_in[c, i]
        other = jacobian_in[c, k]
        wp.atomic_add(mass_matrix_out, articulation_H_start[art] + i * n + k,
                      wp.dot(top(column), slope_in[c, 0] * top(other))
                      + wp.dot(bottom(column), slope_in[c, 1] * bottom(other)))
        if k == 0:
            wp.atomic_add(rhs_out, d0 + i, wp.dot(column, force_in[c]))
