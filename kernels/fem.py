"""Soft bodies: linear tetrahedral FEM with a stable Neo-Hookean material and actuation.

Energy density (J/m^3) of the elastic part Fe of the deformation gradient:
    psi = mu/2 (tr(Fe^T Fe) - 3) + l/2 (det Fe - alpha)^2,
with l = lambda + mu and alpha = 1 + mu / l, so that the rest state is stress free, the
small-strain limit is linear elasticity with Lame parameters (mu, lambda), and inverted
elements still have a finite, restoring energy.

Actuation: F = Fe Fa with an active deformation Fa set by the per-tet activation a (signed,
dimensionless, clamped at -0.9). With a fibre direction d (unit): Fa = I + a d d^T, the
fibre lengthens by 1 + a. Without one (d = 0): Fa = (1 + a)^(1/3) I, the volume scales by
1 + a. Damping acts on the Green strain rate (Pa s), so rigid rotations are not damped.
"""

import warp as wp

from .generic import kernel, mat33, set_deterministic, vec3

set_deterministic(__name__)

MIN_ACTIVATION = -0.9


@wp.func
def active_deformation_inverse(activation: wp.Float, fiber: vec3):
    """Inverse active deformation Fa^-1 and det(Fa) for an activation and fibre direction."""
    one = type(activation)(1.0)
    a = wp.max(activation, type(activation)(MIN_ACTIVATION))
    identity = wp.identity(3, dtype=type(activation))
    if wp.dot(fiber, fiber) > type(activation)(0.0):
        return identity - wp.outer(fiber, fiber) * (a / (one + a)), one + a
    return identity * wp.pow(one + a, type(activation)(-1.0) / type(activation)(3.0)), one + a


@wp.func
def cofactor(F: mat33):
    """Cofactor matrix d det(F) / dF."""
    c0 = wp.vector(F[0, 0], F[1, 0], F[2, 0])
    c1 = wp.vector(F[0, 1], F[1, 1], F[2, 1])
    c2 = wp.vector(F[0, 2], F[1, 2], F[2, 2])
    return wp.matrix_from_cols(wp.cross(c1, c2), wp.cross(c2, c0), wp.cross(c0, c1))


@wp.func
def neo_hookean_stress(Fe: mat33, mu: wp.Float, lam: wp.Float):
    """First Piola-Kirchhoff stress (Pa) of the stable Neo-Hookean energy at Fe."""
    l = lam + mu
    alpha = type(mu)(1.0) + mu / l
    return Fe * mu + cofactor(Fe) * (l * (wp.determinant(Fe) - alpha))


@wp.func
def neo_hookean_energy_density(Fe: mat33, mu: wp.Float, lam: wp.Float):
    """Stable Neo-Hookean energy density (J/m^3) at Fe."""
    half = type(mu)(0.5)
    l = lam + mu
    alpha = type(mu)(1.0) + mu / l
    d = wp.determinant(Fe) - alpha
    return half * mu * (wp.ddot(Fe, Fe) - type(mu)(3.0)) + half * l * d * d


@wp.func
def tet_deformation(tet: int, tet_indices: wp.array2d(dtype=int), rest_inv: mat33, x: wp.array(dtype=vec3)):
    """Deformation gradient F = Ds Dm^-1 of tetrahedron ``tet`` for vertex values ``x``."""
    x0 = x[tet_indices[tet, 0]]
    Ds = wp.matrix_from_cols(
        x[tet_indices[tet, 1]] - x0, x[tet_indices[tet, 2]] - x0, x[tet_indices[tet, 3]] - x0
    )
    return Ds * rest_inv


@kernel
def eval_tetrahedra(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    tet_rest_volume: wp.array(dtype=wp.Float),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_kd: wp.array(dtype=wp.Float),
    tet_fiber: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    tet_activation: wp.array(dtype=wp.Float),
    particle_f_out: wp.array(dtype=vec3),
):
    """Accumulate each tetrahedron's elastic, damping and active forces (N) onto its vertices."""
    t = wp.tid()
    Dm_inv = tet_rest_inv[t]
    F = tet_deformation(t, tet_indices, Dm_inv, particle_q_in)
    F_dot = tet_deformation(t, tet_indices, Dm_inv, particle_qd_in)
    Fa_inv, det_a = active_deformation_inverse(tet_activation[t], tet_fiber[t])
    P = neo_hookean_stress(F * Fa_inv, tet_mu[t], tet_lambda[t]) * wp.transpose(Fa_inv) * det_a
    strain_rate = wp.transpose(F) * F_dot
    P = P + F * (strain_rate + wp.transpose(strain_rate)) * (type(det_a)(0.5) * tet_kd[t])
    H = P * wp.transpose(Dm_inv) * (-tet_rest_volume[t])
    f1 = wp.vector(H[0, 0], H[1, 0], H[2, 0])
    f2 = wp.vector(H[0, 1], H[1, 1], H[2, 1])
    f3 = wp.vector(H[0, 2], H[1, 2], H[2, 2])
    wp.atomic_add(particle_f_out, tet_indices[t, 0], -(f1 + f2 + f3))
    wp.atomic_add(particle_f_out, tet_indices[t, 1], f1)
    wp.atomic_add(particle_f_out, tet_indices[t, 2], f2)
    wp.atomic_add(particle_f_out, tet_indices[t, 3], f3)


@kernel
def tetrahedron_energy(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    tet_rest_volume: wp.array(dtype=wp.Float),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_fiber: wp.array(dtype=vec3),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    tet_activation: wp.array(dtype=wp.Float),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each tetrahedron's elastic energy (J) into its world's entry."""
    t = wp.tid()
    F = tet_deformation(t, tet_indices, tet_rest_inv[t], particle_q_in)
    Fa_inv, det_a = active_deformation_inverse(tet_activation[t], tet_fiber[t])
    psi = neo_hookean_energy_density(F * Fa_inv, tet_mu[t], tet_lambda[t])
    wp.atomic_add(energy_out, particle_world[tet_indices[t, 0]], tet_rest_volume[t] * det_a * psi)


@kernel
def tetrahedron_volume_ratio(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    particle_q_in: wp.array(dtype=vec3),
    volume_ratio_out: wp.array(dtype=wp.Float),
):
    """Write det(F) (current over rest volume; <= 0 means inverted) of every tetrahedron."""
    t = wp.tid()
    volume_ratio_out[t] = wp.determinant(tet_deformation(t, tet_indices, tet_rest_inv[t], particle_q_in))
