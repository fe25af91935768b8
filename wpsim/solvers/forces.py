"""Launch sequence evaluating every particle force of a model (shared by the solvers)."""

from __future__ import annotations

import warp as wp

from wpsim.kernels import cloth, fem, particles, springs
from wpsim.kernels.generic import for_precision


def launch_forces(model, q: wp.array, qd: wp.array, control, friction_dt: float, friction_smoothing, state_in,
                  f: wp.array):
    """Write into ``f`` (N, shape (P,)) the forces on particles at positions ``q`` (m) and
    velocities ``qd`` (m/s): drag, external force and contact first (overwriting ``f``),
    then springs, membranes, bending hinges and tetrahedra (accumulated). Gravity is not
    included. ``friction_dt`` (s) is the time step that bounds the friction slope for an
    explicit step (0: no bound). From ``state_in`` it reads the contact neighbour lists and
    the body poses and velocities, and adds contact reactions into its ``body_f``.
    ``model`` is read by attribute, so a proxy with the same arrays works too. Launch kinds
    without elements are skipped.
    """
    real, device = model.dtype, model.device
    wp.launch(
        for_precision(particles.eval_particle_forces, real),
        dim=model.particle_count,
        inputs=[
            model.particle_mass, model.particle_radius, model.particle_drag, model.particle_world,
            model.shape_kind, model.shape_body, model.shape_world, model.shape_transform, model.shape_size,
            model.shape_ke, model.shape_kd, model.shape_mu, model.pair_ke, model.pair_kd, model.pair_mu,
            model.body_origin, q, qd, state_in.neighbor_count, state_in.neighbor_index, state_in.body_q,
            state_in.body_qd, control.particle_f_ext, friction_smoothing, real(friction_dt),
        ],
        outputs=[f, state_in.body_f],
        device=device,
    )
    if model.spring_count:
        wp.launch(
            for_precision(springs.eval_springs, real),
            dim=model.spring_count,
            inputs=[model.spring_indices, model.spring_ke, model.spring_kd, model.spring_rest_length, q, qd],
            outputs=[f],
            device=device,
        )
    if model.tri_count:
        wp.launch(
            for_precision(cloth.eval_triangles, real),
            dim=model.tri_count,
            inputs=[
                model.tri_indices, model.tri_rest_inv, model.tri_rest_area,
                model.tri_mu, model.tri_lambda, model.tri_kd, q, qd,
            ],
            outputs=[f],
            device=device,
        )
    if model.bend_count:
        wp.launch(
            for_precision(cloth.eval_bending, real),
            dim=model.bend_count,
            inputs=[model.bend_indices, model.bend_rest_angle, model.bend_ke, model.bend_kd, q, qd],
            outputs=[f],
            device=device,
        )
    if model.tet_count:
        wp.launch(
            for_precision(fem.eval_tetrahedra, real),
            dim=model.tet_count,
            inputs=[
                model.tet_indices, model.tet_rest_inv, model.tet_rest_volume, model.tet_mu,
                model.tet_lambda, model.tet_kd, model.tet_fiber, q, qd, control.tet_activation,
            ],
            outputs=[f],
            device=device,
        )
