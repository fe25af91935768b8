"""Per-world energies, momentum and element quality of a state.

``elastic_energy`` and ``centroids`` return device arrays and are differentiable when
called under a ``wp.Tape``; the ``*_report`` functions return host numbers.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.model import Control, Model, State
from wpsim.kernels import cloth, diagnostics, fem, springs
from wpsim.kernels.generic import for_precision
from wpsim.solvers.forces import SmoothingScratch, smoothed_strain_launch


def elastic_energy(model: Model, state: State, control: Control | None = None) -> wp.array:
    """Elastic energy (J) per world of springs, membranes, hinges and tetrahedra, shape (W,)."""
    energy = wp.zeros(model.num_worlds, dtype=model.dtype, device=model.device, requires_grad=state.requires_grad)
    q = state.particle_q
    control = control or model.control(requires_grad=False)
    if model.spring_count:
        wp.launch(
            for_precision(springs.spring_energy, model.dtype), dim=model.spring_count,
            inputs=[model.spring_indices, model.spring_ke, model.spring_rest_length, model.particle_world, q,
                    control.spring_activation],
            outputs=[energy], device=model.device,
        )
    if model.tri_count:
        wp.launch(
            for_precision(cloth.triangle_energy, model.dtype), dim=model.tri_count,
            inputs=[model.tri_indices, model.tri_rest_inv, model.tri_rest_area, model.tri_mu, model.tri_lambda,
                    model.particle_world, q],
            outputs=[energy], device=model.device,
        )
    if model.bend_count:
        wp.launch(
            for_precision(cloth.bending_energy, model.dtype), dim=model.bend_count,
            inputs=[model.bend_indices, model.bend_rest_angle, model.bend_ke, model.particle_world, q],
            outputs=[energy], device=model.device,
        )
    if model.tet_count:
        wp.launch(
            for_precision(fem.tetrahedron_energy, model.dtype), dim=model.tet_count,
            inputs=[model.tet_indices, model.tet_rest_inv, model.tet_rest_volume, model.tet_mu, model.tet_lambda,
                    model.tet_fiber, model.tet_face_domain, model.tet_edge_indices, model.particle_world, q,
                    control.tet_activation],
            outputs=[energy], device=model.device,
        )
    if model.domain_count:
        strain, weight, _ = SmoothingScratch(model).arrays(q)
        smoothed_strain_launch(model, q, control, strain, weight).run(model.device)
        wp.launch(
            for_precision(fem.smoothing_domain_energy, model.dtype), dim=model.domain_count,
            inputs=[model.domain_tets, model.tet_mu, model.tet_lambda, model.tet_indices, model.particle_world,
                    strain, weight],
            outputs=[energy], device=model.device,
        )
    return energy


def energy_report(model: Model, state: State, control: Control | None = None) -> dict:
    """Per-world kinetic, gravitational, elastic and total energy (J) as NumPy arrays (W,).

    Contact penalty energy is not included.
    """
    kinetic = wp.zeros(model.num_worlds, dtype=model.dtype, device=model.device)
    potential = wp.zeros_like(kinetic)
    wp.launch(
        for_precision(diagnostics.particle_energy, model.dtype), dim=model.particle_count,
        inputs=[model.particle_mass, model.particle_world, model.gravity, state.particle_q, state.particle_qd],
        outputs=[kinetic, potential], device=model.device,
    )
    report = {
        "kinetic": kinetic.numpy().astype(np.float64),
        "gravity": potential.numpy().astype(np.float64),
        "elastic": elastic_energy(model, state, control).numpy().astype(np.float64),
    }
    report["total"] = report["kinetic"] + report["gravity"] + report["elastic"]
    return report


def momentum_report(model: Model, state: State) -> dict:
    """Per-world linear (kg m/s) and angular (kg m^2/s, about the origin) momentum, (W, 3)."""
    linear = wp.zeros(model.num_worlds, dtype=model.vec3, device=model.device)
    angular = wp.zeros_like(linear)
    wp.launch(
        for_precision(diagnostics.particle_momentum, model.dtype), dim=model.particle_count,
        inputs=[model.particle_mass, model.particle_world, state.particle_q, state.particle_qd],
        outputs=[linear, angular], device=model.device,
    )
    return {"linear": linear.numpy().astype(np.float64), "angular": angular.numpy().astype(np.float64)}


def centroids(model: Model, state: State, weights: wp.array) -> wp.array:
    """Weighted particle centroid (m) per world, shape (W,); weights (P,) should sum to 1 per world."""
    out = wp.zeros(model.num_worlds, dtype=model.vec3, device=model.device, requires_grad=state.requires_grad)
    wp.launch(
        for_precision(diagnostics.weighted_centroid, model.dtype), dim=model.particle_count,
        inputs=[model.particle_world, weights, state.particle_q], outputs=[out], device=model.device,
    )
    return out


def mass_weights(model: Model) -> wp.array:
    """Per-particle weights m_i / M_world, so that ``centroids`` gives centres of mass."""
    mass = model.particle_mass.numpy().astype(np.float64)
    world = model.particle_world.numpy()
    total = np.bincount(world, weights=mass, minlength=model.num_worlds)
    weights = np.divide(mass, total[world], out=np.zeros_like(mass), where=total[world] > 0)
    return wp.array(weights, dtype=model.dtype, device=model.device)


def tet_volume_ratios(model: Model, state: State) -> np.ndarray:
    """Current over rest volume of every tetrahedron (E,; a quadratic one's smallest over its
    quadrature points); <= 0 means inverted."""
    out = wp.zeros(model.tet_count, dtype=model.dtype, device=model.device)
    wp.launch(
        for_precision(fem.tetrahedron_volume_ratio, model.dtype), dim=model.tet_count,
        inputs=[model.tet_indices, model.tet_rest_inv, model.tet_edge_indices, state.particle_q], outputs=[out],
        device=model.device,
    )
    return out.numpy().astype(np.float64)
