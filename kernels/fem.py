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

Face-based strain smoothing (optional per tet): linear tets are too stiff in bending on
coarse meshes. A smoothed tet shares each of its faces' domains with the tet across the
face; a domain's elastic deformation is the weighted mean of its one or two tets' F Fa^-1
(weights: rest volume x det Fa / 4), its Lame parameters are the same means, and its
energy is its weight times psi at that mean. The elastic stress of a smoothed tet is then
the mean of its four domains' stresses, so forces stay minus the gradient of the energy.
A homogeneous deformation gives every domain the tets' own F: the element passes the patch
test, and a mesh of one tet (or of unsmoothed tets) behaves as before.

Quadratic tets (a tet with edge nodes, ``wpsim.kernels.quadratic_tets``) take the same
material, activation and damping at each of their four quadrature points; they are never
smoothed.
"""

import warp as wp

from .generic import kernel, mat33, set_deterministic, vec3
from .quadratic_tets import quadratic_deformation, quadratic_node_offsets, quadratic_point_forces, quadrature_point

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
    third = type(activation)(1.0) / type(activation)(3.0)
    if a == type(activation)(0.0):
        # a passive tet skips pow: 1 - a/3 has the value and the first derivative of (1 + a)^(-1/3) at a = 0
        return identity * (one - a * third), one + a
    return identity * wp.pow(one + a, -third), one + a


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
def active_stress(P: mat33, Fa_inv: mat33, det_a: wp.Float):
    """The stress P (Pa) of an elastic deformation F Fa^-1 as a stress of F: P Fa^-T det Fa."""
    return P * wp.transpose(Fa_inv) * det_a


@wp.func
def with_damping(P: mat33, F: mat33, F_dot: mat33, kd: wp.Float):
    """P (Pa) plus the damping stress of the Green strain rate sym(F^T F_dot) at F."""
    strain_rate = wp.transpose(F) * F_dot
    return P + F * (strain_rate + wp.transpose(strain_rate)) * (type(kd)(0.5) * kd)


@wp.func
def quadratic_point_stress(F: mat33, F_dot: mat33, mu: wp.Float, lam: wp.Float, kd: wp.Float, Fa_inv: mat33,
                           det_a: wp.Float, passive: bool):
    """First Piola-Kirchhoff stress (Pa: elastic, active, damping) at a quadrature point of deformation F, rate F_dot."""
    if passive:
        P = neo_hookean_stress(F, mu, lam)
    else:
        P = active_stress(neo_hookean_stress(F * Fa_inv, mu, lam), Fa_inv, det_a)
    return with_damping(P, F, F_dot, kd)


@wp.func
def tet_deformation(tet: int, tet_indices: wp.array2d(dtype=int), rest_inv: mat33, x: wp.array(dtype=vec3)):
    """Deformation gradient F = Ds Dm^-1 of tetrahedron ``tet`` for vertex values ``x``."""
    x0 = x[tet_indices[tet, 0]]
    Ds = wp.matrix_from_cols(
        x[tet_indices[tet, 1]] - x0, x[tet_indices[tet, 2]] - x0, x[tet_indices[tet, 3]] - x0
    )
    return Ds * rest_inv


@wp.func
def smoothing_domain_mean(
    d: int,
    domain_tets: wp.array2d(dtype=int),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_strain_in: wp.array(dtype=mat33),
    tet_weight_in: wp.array(dtype=wp.Float),
):
    """Weighted mean elastic deformation, mu and lambda of smoothing domain ``d``, and its weight (m^3)."""
    a = domain_tets[d, 0]
    b = domain_tets[d, 1]
    w = tet_weight_in[a]
    Fe = tet_strain_in[a] * w
    mu = tet_mu[a] * w
    lam = tet_lambda[a] * w
    if b >= 0:
        w_b = tet_weight_in[b]
        Fe = Fe + tet_strain_in[b] * w_b
        mu = mu + tet_mu[b] * w_b
        lam = lam + tet_lambda[b] * w_b
        w = w + w_b
    return Fe / w, mu / w, lam / w, w


@kernel
def tet_elastic_strain(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    tet_rest_volume: wp.array(dtype=wp.Float),
    tet_fiber: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    tet_activation: wp.array(dtype=wp.Float),
    tet_strain_out: wp.array(dtype=mat33),
    tet_weight_out: wp.array(dtype=wp.Float),
):
    """Write each tetrahedron's elastic deformation F Fa^-1 and its weight in each of its face
    domains, rest volume x det Fa / 4 (m^3)."""
    t = wp.tid()
    F = tet_deformation(t, tet_indices, tet_rest_inv[t], particle_q_in)
    Fa_inv, det_a = active_deformation_inverse(tet_activation[t], tet_fiber[t])
    tet_strain_out[t] = F * Fa_inv
    tet_weight_out[t] = tet_rest_volume[t] * det_a * type(det_a)(0.25)


@kernel
def smoothing_domain_stress(
    domain_tets: wp.array2d(dtype=int),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_strain_in: wp.array(dtype=mat33),
    tet_weight_in: wp.array(dtype=wp.Float),
    domain_stress_out: wp.array(dtype=mat33),
):
    """Write each smoothing domain's first Piola-Kirchhoff stress (Pa) at its mean elastic deformation."""
    d = wp.tid()
    Fe, mu, lam, w = smoothing_domain_mean(d, domain_tets, tet_mu, tet_lambda, tet_strain_in, tet_weight_in)
    domain_stress_out[d] = neo_hookean_stress(Fe, mu, lam)


@kernel
def smoothing_domain_energy(
    domain_tets: wp.array2d(dtype=int),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_indices: wp.array2d(dtype=int),
    particle_world: wp.array(dtype=int),
    tet_strain_in: wp.array(dtype=mat33),
    tet_weight_in: wp.array(dtype=wp.Float),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each smoothing domain's elastic energy (J) into its world's entry."""
    d = wp.tid()
    Fe, mu, lam, w = smoothing_domain_mean(d, domain_tets, tet_mu, tet_lambda, tet_strain_in, tet_weight_in)
    world = particle_world[tet_indices[domain_tets[d, 0], 0]]
    wp.atomic_add(energy_out, world, w * neo_hookean_energy_density(Fe, mu, lam))


def tet_force_kernel(passive_shortcut: bool):
    """The tet force kernel: ``eval_tetrahedra`` (recorded steps; every tet through its active
    deformation, so gradients reach the activations), or with ``passive_shortcut``
    ``eval_tetrahedra_unrecorded`` (no adjoint), where a tet at activation 0 skips its active
    deformation: Fa^-1 = I and det Fa = 1 there, the skipped products by them are exact, and its
    forces are bitwise the same on the CPU (tested), which alone launches it (a CUDA compiler may
    fuse multiply-adds across the skipped products)."""

    def eval_tetrahedra(
        tet_indices: wp.array2d(dtype=int),
        tet_rest_inv: wp.array(dtype=mat33),
        tet_rest_volume: wp.array(dtype=wp.Float),
        tet_mu: wp.array(dtype=wp.Float),
        tet_lambda: wp.array(dtype=wp.Float),
        tet_kd: wp.array(dtype=wp.Float),
        tet_fiber: wp.array(dtype=vec3),
        tet_face_domain: wp.array2d(dtype=int),
        tet_edge_indices: wp.array2d(dtype=int),
        particle_q_in: wp.array(dtype=vec3),
        particle_qd_in: wp.array(dtype=vec3),
        domain_stress_in: wp.array(dtype=mat33),
        tet_activation: wp.array(dtype=wp.Float),
        particle_f_out: wp.array(dtype=vec3),
    ):
        """Accumulate each tetrahedron's elastic, damping and active forces (N) onto its nodes
        (the elastic stress of a smoothed tet: the mean of its face domains' ``domain_stress_in``;
        a quadratic tet's: integrated over its four quadrature points)."""
        t = wp.tid()
        Dm_inv = tet_rest_inv[t]
        passive = False
        if wp.static(passive_shortcut):
            passive = tet_activation[t] == type(tet_kd[t])(0.0)
        if passive:
            Fa_inv, det_a = wp.identity(3, dtype=type(tet_kd[t])), type(tet_kd[t])(1.0)
        else:
            Fa_inv, det_a = active_deformation_inverse(tet_activation[t], tet_fiber[t])
        if tet_edge_indices[t, 0] >= 0:
            w = type(det_a)(-0.25) * tet_rest_volume[t]
            x_vertices, x_edges_a, x_edges_b = quadratic_node_offsets(t, tet_indices, tet_edge_indices, particle_q_in)
            v_vertices, v_edges_a, v_edges_b = quadratic_node_offsets(t, tet_indices, tet_edge_indices, particle_qd_in)
            zero = type(w)(0.0)
            f0 = wp.vector(zero, zero, zero)
            f_vertices = wp.matrix_from_rows(f0, f0, f0)
            f_edges_a = f_vertices
            f_edges_b = f_vertices
            for point in range(4):
                l = quadrature_point(point, w)
                F = quadratic_deformation(x_vertices, x_edges_a, x_edges_b, l, Dm_inv)
                F_dot = quadratic_deformation(v_vertices, v_edges_a, v_edges_b, l, Dm_inv)
                P = quadratic_point_stress(F, F_dot, tet_mu[t], tet_lambda[t], tet_kd[t], Fa_inv, det_a, passive)
                g, g_vertices, g_edges_a, g_edges_b = quadratic_point_forces(Dm_inv * wp.transpose(P) * w, l)
                f0 = f0 + g
                f_vertices = f_vertices + g_vertices
                f_edges_a = f_edges_a + g_edges_a
                f_edges_b = f_edges_b + g_edges_b
            wp.atomic_add(particle_f_out, tet_indices[t, 0], f0)
            for k in range(3):
                wp.atomic_add(particle_f_out, tet_indices[t, k + 1], f_vertices[k])
                wp.atomic_add(particle_f_out, tet_edge_indices[t, k], f_edges_a[k])
                wp.atomic_add(particle_f_out, tet_edge_indices[t, k + 3], f_edges_b[k])
            return
        F = tet_deformation(t, tet_indices, Dm_inv, particle_q_in)
        F_dot = tet_deformation(t, tet_indices, Dm_inv, particle_qd_in)
        if tet_face_domain[t, 0] >= 0:
            P = (domain_stress_in[tet_face_domain[t, 0]] + domain_stress_in[tet_face_domain[t, 1]]
                 + domain_stress_in[tet_face_domain[t, 2]]
                 + domain_stress_in[tet_face_domain[t, 3]]) * type(det_a)(0.25)
        elif passive:
            P = neo_hookean_stress(F, tet_mu[t], tet_lambda[t])
        else:
            P = neo_hookean_stress(F * Fa_inv, tet_mu[t], tet_lambda[t])
        if not passive:
            P = active_stress(P, Fa_inv, det_a)
        P = with_damping(P, F, F_dot, tet_kd[t])
        H = P * wp.transpose(Dm_inv) * (-tet_rest_volume[t])
        f1 = wp.vector(H[0, 0], H[1, 0], H[2, 0])
        f2 = wp.vector(H[0, 1], H[1, 1], H[2, 1])
        f3 = wp.vector(H[0, 2], H[1, 2], H[2, 2])
        wp.atomic_add(particle_f_out, tet_indices[t, 0], -(f1 + f2 + f3))
        wp.atomic_add(particle_f_out, tet_indices[t, 1], f1)
        wp.atomic_add(particle_f_out, tet_indices[t, 2], f2)
        wp.atomic_add(particle_f_out, tet_indices[t, 3], f3)

    name = "eval_tetrahedra_unrecorded" if passive_shortcut else "eval_tetrahedra"
    eval_tetrahedra.__name__ = eval_tetrahedra.__qualname__ = name
    return kernel(eval_tetrahedra, enable_backward=not passive_shortcut)


eval_tetrahedra = tet_force_kernel(passive_shortcut=False)
eval_tetrahedra_unrecorded = tet_force_kernel(passive_shortcut=True)


@kernel
def tetrahedron_energy(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    tet_rest_volume: wp.array(dtype=wp.Float),
    tet_mu: wp.array(dtype=wp.Float),
    tet_lambda: wp.array(dtype=wp.Float),
    tet_fiber: wp.array(dtype=vec3),
    tet_face_domain: wp.array2d(dtype=int),
    tet_edge_indices: wp.array2d(dtype=int),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    tet_activation: wp.array(dtype=wp.Float),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each unsmoothed tetrahedron's elastic energy (J) into its world's entry
    (smoothed ones: ``smoothing_domain_energy``; quadratic ones: summed over their quadrature points)."""
    t = wp.tid()
    if tet_face_domain[t, 0] >= 0:
        return
    Dm_inv = tet_rest_inv[t]
    Fa_inv, det_a = active_deformation_inverse(tet_activation[t], tet_fiber[t])
    if tet_edge_indices[t, 0] >= 0:
        psi = type(det_a)(0.0)
        vertices, edges_a, edges_b = quadratic_node_offsets(t, tet_indices, tet_edge_indices, particle_q_in)
        for point in range(4):
            F = quadratic_deformation(vertices, edges_a, edges_b, quadrature_point(point, det_a), Dm_inv)
            psi = psi + neo_hookean_energy_density(F * Fa_inv, tet_mu[t], tet_lambda[t]) * type(det_a)(0.25)
    else:
        F = tet_deformation(t, tet_indices, Dm_inv, particle_q_in)
        psi = neo_hookean_energy_density(F * Fa_inv, tet_mu[t], tet_lambda[t])
    wp.atomic_add(energy_out, particle_world[tet_indices[t, 0]], tet_rest_volume[t] * det_a * psi)


@kernel
def tetrahedron_volume_ratio(
    tet_indices: wp.array2d(dtype=int),
    tet_rest_inv: wp.array(dtype=mat33),
    tet_edge_indices: wp.array2d(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    volume_ratio_out: wp.array(dtype=wp.Float),
):
    """Write det(F) (current over rest volume; <= 0 means inverted) of every tetrahedron (of a
    quadratic one: the smallest over its quadrature points)."""
    t = wp.tid()
    Dm_inv = tet_rest_inv[t]
    ratio = wp.determinant(tet_deformation(t, tet_indices, Dm_inv, particle_q_in))
    if tet_edge_indices[t, 0] >= 0:
        vertices, edges_a, edges_b = quadratic_node_offsets(t, tet_indices, tet_edge_indices, particle_q_in)
        for point in range(4):
            F = quadratic_deformation(vertices, edges_a, edges_b, quadrature_point(point, ratio), Dm_inv)
            if point == 0:
                ratio = wp.determinant(F)
            else:
                ratio = wp.min(ratio, wp.determinant(F))
    volume_ratio_out[t] = ratio
