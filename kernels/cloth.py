"""Cloth: triangle membrane elasticity and dihedral-angle bending.

Membrane energy per unit rest area (N/m), with F the 3x2 deformation gradient and
J = |F e1 x F e2| the area ratio:
    psi = mu/2 (|F|^2 - 2) - mu (J - 1) + lambda/2 (J - 1)^2,
zero with zero stress for any rigid motion of the rest triangle. Damping acts on the Green
strain rate, so rigid rotations are not damped.

Bending energy per interior edge: 1/2 ke (theta - theta_rest)^2, theta the signed dihedral
angle (rad) between the two triangles sharing the edge; damping -kd dtheta/dt.
"""

import warp as wp

from .generic import kernel, mat22, mat32, set_deterministic, vec3

set_deterministic(__name__)


@wp.func
def membrane_stress(F: mat32, F_dot: mat32, mu: wp.Float, lam: wp.Float, kd: wp.Float):
    """First Piola-Kirchhoff stress (N/m) of the membrane, elastic plus strain-rate damping."""
    one = type(mu)(1.0)
    c0 = wp.vector(F[0, 0], F[1, 0], F[2, 0])
    c1 = wp.vector(F[0, 1], F[1, 1], F[2, 1])
    normal = wp.cross(c0, c1)
    J = wp.length(normal)
    P = F * mu
    if J > type(mu)(1.0e-12):
        n = normal / J
        P = P + wp.matrix_from_cols(wp.cross(c1, n), wp.cross(n, c0)) * (lam * (J - one) - mu)
    strain_rate = wp.transpose(F) * F_dot
    strain_rate = (strain_rate + wp.transpose(strain_rate)) * type(mu)(0.5)
    return P + F * strain_rate * kd


@wp.func
def membrane_energy_density(F: mat32, mu: wp.Float, lam: wp.Float):
    """Elastic energy per unit rest area (J/m^2) of the membrane."""
    one = type(mu)(1.0)
    c0 = wp.vector(F[0, 0], F[1, 0], F[2, 0])
    c1 = wp.vector(F[0, 1], F[1, 1], F[2, 1])
    J = wp.length(wp.cross(c0, c1))
    return mu * type(mu)(0.5) * (wp.ddot(F, F) - type(mu)(2.0)) - mu * (J - one) + lam * type(mu)(0.5) * (J - one) * (J - one)


@kernel
def eval_triangles(
    tri_indices: wp.array2d(dtype=int),
    tri_rest_inv: wp.array(dtype=mat22),
    tri_rest_area: wp.array(dtype=wp.Float),
    tri_mu: wp.array(dtype=wp.Float),
    tri_lambda: wp.array(dtype=wp.Float),
    tri_kd: wp.array(dtype=wp.Float),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    particle_f_out: wp.array(dtype=vec3),
):
    """Accumulate each triangle's membrane forces (N) onto its three particles."""
    t = wp.tid()
    i = tri_indices[t, 0]
    j = tri_indices[t, 1]
    k = tri_indices[t, 2]
    x0 = particle_q_in[i]
    v0 = particle_qd_in[i]
    Dm_inv = tri_rest_inv[t]
    F = wp.matrix_from_cols(particle_q_in[j] - x0, particle_q_in[k] - x0) * Dm_inv
    F_dot = wp.matrix_from_cols(particle_qd_in[j] - v0, particle_qd_in[k] - v0) * Dm_inv
    P = membrane_stress(F, F_dot, tri_mu[t], tri_lambda[t], tri_kd[t])
    H = P * wp.transpose(Dm_inv) * (-tri_rest_area[t])
    f1 = wp.vector(H[0, 0], H[1, 0], H[2, 0])
    f2 = wp.vector(H[0, 1], H[1, 1], H[2, 1])
    wp.atomic_add(particle_f_out, i, -(f1 + f2))
    wp.atomic_add(particle_f_out, j, f1)
    wp.atomic_add(particle_f_out, k, f2)


@wp.func
def hinge_angle(n1: vec3, n2: vec3, e: vec3):
    """Signed angle (rad) from normal n1 to n2 about edge e; n1, n2 need not be unit
    (atan2 of two arguments scaled by the same |n1||n2| is unchanged)."""
    return wp.atan2(wp.dot(wp.cross(n1, n2), e) / wp.length(e), wp.dot(n1, n2))


@wp.func
def dihedral_angle(x0: vec3, x1: vec3, x2: vec3, x3: vec3):
    """Signed dihedral angle (rad) at edge x2-x3 between triangles (x0,x2,x3) and (x1,x3,x2)."""
    return hinge_angle(wp.cross(x2 - x0, x3 - x0), wp.cross(x3 - x1, x2 - x1), x3 - x2)


@kernel
def eval_bending(
    bend_indices: wp.array2d(dtype=int),
    bend_rest_angle: wp.array(dtype=wp.Float),
    bend_ke: wp.array(dtype=wp.Float),
    bend_kd: wp.array(dtype=wp.Float),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    particle_f_out: wp.array(dtype=vec3),
):
    """Accumulate each hinge's bending forces (N) onto its four particles."""
    b = wp.tid()
    i0 = bend_indices[b, 0]
    i1 = bend_indices[b, 1]
    i2 = bend_indices[b, 2]
    i3 = bend_indices[b, 3]
    x0 = particle_q_in[i0]
    x1 = particle_q_in[i1]
    x2 = particle_q_in[i2]
    x3 = particle_q_in[i3]
    n1 = wp.cross(x2 - x0, x3 - x0)
    n2 = wp.cross(x3 - x1, x2 - x1)
    e = x3 - x2
    e_len = wp.length(e)
    n1_sq = wp.dot(n1, n1)
    n2_sq = wp.dot(n2, n2)
    tiny = type(e_len)(1.0e-20)
    if e_len * e_len > tiny and n1_sq > tiny and n2_sq > tiny:
        a = n1 / n1_sq
        c = n2 / n2_sq
        # gradient of the dihedral angle w.r.t. the four vertices
        g0 = a * (-e_len)
        g1 = c * (-e_len)
        g2 = (a * wp.dot(x3 - x0, e) + c * wp.dot(x3 - x1, e)) / e_len
        g3 = (a * wp.dot(x0 - x2, e) + c * wp.dot(x1 - x2, e)) / e_len
        theta = hinge_angle(n1, n2, e)
        theta_dot = (
            wp.dot(g0, particle_qd_in[i0]) + wp.dot(g1, particle_qd_in[i1])
            + wp.dot(g2, particle_qd_in[i2]) + wp.dot(g3, particle_qd_in[i3])
        )
        scale = -(bend_ke[b] * (theta - bend_rest_angle[b]) + bend_kd[b] * theta_dot)
        wp.atomic_add(particle_f_out, i0, g0 * scale)
        wp.atomic_add(particle_f_out, i1, g1 * scale)
        wp.atomic_add(particle_f_out, i2, g2 * scale)
        wp.atomic_add(particle_f_out, i3, g3 * scale)


@kernel
def triangle_energy(
    tri_indices: wp.array2d(dtype=int),
    tri_rest_inv: wp.array(dtype=mat22),
    tri_rest_area: wp.array(dtype=wp.Float),
    tri_mu: wp.array(dtype=wp.Float),
    tri_lambda: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each triangle's membrane elastic energy (J) into its world's entry."""
    t = wp.tid()
    i = tri_indices[t, 0]
    x0 = particle_q_in[i]
    F = wp.matrix_from_cols(
        particle_q_in[tri_indices[t, 1]] - x0, particle_q_in[tri_indices[t, 2]] - x0
    ) * tri_rest_inv[t]
    wp.atomic_add(
        energy_out, particle_world[i], tri_rest_area[t] * membrane_energy_density(F, tri_mu[t], tri_lambda[t])
    )


@kernel
def bending_energy(
    bend_indices: wp.array2d(dtype=int),
    bend_rest_angle: wp.array(dtype=wp.Float),
    bend_ke: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each hinge's bending energy (J) into its world's entry."""
    b = wp.tid()
    theta = dihedral_angle(
        particle_q_in[bend_indices[b, 0]], particle_q_in[bend_indices[b, 1]],
        particle_q_in[bend_indices[b, 2]], particle_q_in[bend_indices[b, 3]],
    )
    d = theta - bend_rest_angle[b]
    wp.atomic_add(energy_out, particle_world[bend_indices[b, 0]], type(d)(0.5) * bend_ke[b] * d * d)
