"""Launch sequence evaluating every particle force of a model (shared by the solvers)."""

from __future__ import annotations

import warp as wp

from wpsim.core.fields import warp_dtype
from wpsim.core.tape import active_tape
from wpsim.kernels import cloth, fem, particles, springs
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import KernelLaunch


class SmoothingScratch:
    """The per-evaluation arrays of strain-smoothed tetrahedra (elastic deformations and
    weights per tet, stresses per domain): one reused set off the tape, a fresh set for
    every evaluation recorded on one (the tape reads them back in its backward)."""

    def __init__(self, model):
        self.model = model
        self._reused = None
        self.no_domains = model.tet_rest_inv[:0] if model.tet_count else None
        """The empty domain stress tet launches read when no tet is smoothed: one view, so that
        prepared launches find the same array every step."""

    def _allocate(self, requires_grad: bool) -> tuple:
        model = self.model
        mat33 = warp_dtype("mat33", model.dtype)
        kw = {"device": model.device, "requires_grad": requires_grad}
        return (wp.empty(model.tet_count, dtype=mat33, **kw), wp.empty(model.tet_count, dtype=model.dtype, **kw),
                wp.empty(model.domain_count, dtype=mat33, **kw))

    def arrays(self, q: wp.array) -> tuple:
        """(tet strain (E,) mat33, tet weight (E,) m^3, domain stress (G,) mat33 Pa) for an
        evaluation at positions ``q``."""
        if active_tape() is not None and q.requires_grad:
            return self._allocate(True)
        if self._reused is None:
            self._reused = self._allocate(False)
        return self._reused


def smoothed_strain_launch(model, q: wp.array, control, strain: wp.array, weight: wp.array) -> KernelLaunch:
    """Write every tet's elastic deformation and domain weight (``fem.tet_elastic_strain``)."""
    return KernelLaunch(
        for_precision(fem.tet_elastic_strain, model.dtype), model.tet_count,
        [model.tet_indices, model.tet_rest_inv, model.tet_rest_volume, model.tet_fiber, q, control.tet_activation],
        [strain, weight],
    )


def launch_forces(model, q: wp.array, qd: wp.array, control, friction_dt: float, friction_smoothing, state_in,
                  f: wp.array, smoothing: SmoothingScratch | None = None, gradient_width=0.0):
    """Run ``force_launches`` (same arguments)."""
    for launch in force_launches(model, q, qd, control, friction_dt, friction_smoothing, state_in, f, smoothing,
                                 gradient_width):
        launch.run(model.device)


def force_launches(model, q: wp.array, qd: wp.array, control, friction_dt: float, friction_smoothing, state_in,
                   f: wp.array, smoothing: SmoothingScratch | None = None, gradient_width=0.0) -> list:
    """The ``KernelLaunch``es that write into ``f`` (N, shape (P,)) the forces on particles at
    positions ``q`` (m) and velocities ``qd`` (m/s): drag, external force and contact first
    (overwriting ``f``), then springs, membranes, bending hinges and tetrahedra (accumulated).
    Gravity is not included. ``friction_dt`` (s) is the time step that bounds the friction slope
    for an explicit step (0: no bound). From ``state_in`` they read the contact neighbour lists
    and the body poses and velocities, and add contact reactions into its ``body_f``.
    ``model`` is read by attribute, so a proxy with the same arrays works too. Launch kinds
    without elements are left out. ``smoothing``: the solver's scratch, needed when the model
    has strain-smoothed tets. ``gradient_width`` (m): the smoothed contact gradient of
    ``SemiImplicitSolver``; the contact damping ramps in over ``model.contact_damping_depth``.
    """
    launches = [particle_force_launch(model, q, qd, control, friction_dt, friction_smoothing, state_in, f,
                                      gradient_width)]
    smoothing_launches, domain_stress = smoothed_stress_launches(model, q, control, smoothing)
    return [*launches, *smoothing_launches, *element_launches(model, q, qd, control, f, domain_stress)]


def particle_force_launch(model, q: wp.array, qd: wp.array, control, friction_dt: float, friction_smoothing,
                          state_in, f: wp.array, gradient_width=0.0) -> KernelLaunch:
    """The launch that overwrites ``f`` with each particle's drag, external and contact force
    (``force_launches``' first)."""
    real = model.dtype
    return KernelLaunch(
        for_precision(particles.eval_particle_forces, real), model.particle_count,
        [
            model.particle_mass, model.particle_radius, model.particle_drag, model.particle_world,
            model.shape_kind, model.shape_body, model.shape_world, model.shape_transform, model.shape_size,
            model.shape_ke, model.shape_kd, model.shape_mu, model.pair_ke, model.pair_kd, model.pair_mu,
            model.body_origin, q, qd, state_in.neighbor_count, state_in.neighbor_index, state_in.body_q,
            state_in.body_qd, control.particle_f_ext, friction_smoothing, real(model.contact_damping_depth),
            real(gradient_width), real(friction_dt),
        ],
        [f, state_in.body_f],
    )


def smoothed_stress_launches(model, q: wp.array, control, smoothing: SmoothingScratch | None) -> tuple:
    """(launches, domain stress (G,) mat33 Pa): the strain and domain-stress launches of
    strain-smoothed tets, which the tet force launches read; none and an empty stress without
    smoothing domains (None without tets)."""
    if not model.tet_count:
        return [], None
    if not model.domain_count:
        return [], model.tet_rest_inv[:0] if smoothing is None else smoothing.no_domains
    strain, weight, domain_stress = smoothing.arrays(q)
    return [
        smoothed_strain_launch(model, q, control, strain, weight),
        KernelLaunch(
            for_precision(fem.smoothing_domain_stress, model.dtype), model.domain_count,
            [model.domain_tets, model.tet_mu, model.tet_lambda, strain, weight], [domain_stress],
        ),
    ], domain_stress


class WholeElements:
    """Every element of a model: what ``element_launches`` takes when it is given no chunk
    (``ElementChunk`` has the same two methods for a contiguous share of each kind)."""

    def __init__(self, model):
        self.model = model

    def count(self, kind: str) -> int:
        """Elements of ``kind`` ("spring", "tri", "bend", "tet")."""
        return getattr(self.model, f"{kind}_count")

    @staticmethod
    def view(array: wp.array, kind: str) -> wp.array:
        """``array`` (one entry per element of ``kind``) as the launch reads it."""
        return array


def element_launches(model, q: wp.array, qd: wp.array, control, f: wp.array, domain_stress: wp.array,
                     elements=None, recorded: bool = True) -> list:
    """The launches that add into ``f`` (N) the forces of springs, membranes, bending hinges and
    tetrahedra at positions ``q`` (m) and velocities ``qd`` (m/s), in that order; ``elements``:
    which of them (an ``ElementChunk``; default ``WholeElements``). Kinds without elements are
    left out. ``domain_stress``: from ``smoothed_stress_launches``. ``recorded=False``: CPU
    launches no tape records, where passive tets take ``fem.eval_tetrahedra_unrecorded``'s
    shortcut (bitwise the same forces, no adjoint)."""
    real = model.dtype
    elements = WholeElements(model) if elements is None else elements
    count, view = elements.count, elements.view
    launches = []
    if count("spring"):
        launches.append(KernelLaunch(
            for_precision(springs.eval_springs, real), count("spring"),
            [*(view(a, "spring") for a in (model.spring_indices, model.spring_ke, model.spring_kd,
                                           model.spring_rest_length)),
             q, qd, view(control.spring_activation, "spring")],
            [f],
        ))
    if count("tri"):
        launches.append(KernelLaunch(
            for_precision(cloth.eval_triangles, real), count("tri"),
            [*(view(a, "tri") for a in (model.tri_indices, model.tri_rest_inv, model.tri_rest_area, model.tri_mu,
                                        model.tri_lambda, model.tri_kd)),
             q, qd],
            [f],
        ))
    if count("bend"):
        launches.append(KernelLaunch(
            for_precision(cloth.eval_bending, real), count("bend"),
            [*(view(a, "bend") for a in (model.bend_indices, model.bend_rest_angle, model.bend_ke, model.bend_kd)),
             q, qd],
            [f],
        ))
    if count("tet"):
        launches.append(KernelLaunch(
            for_precision(fem.eval_tetrahedra if recorded else fem.eval_tetrahedra_unrecorded, real), count("tet"),
            [*(view(a, "tet") for a in (model.tet_indices, model.tet_rest_inv, model.tet_rest_volume, model.tet_mu,
                                        model.tet_lambda, model.tet_kd, model.tet_fiber, model.tet_face_domain,
                                        model.tet_edge_indices)),
             q, qd, domain_stress, view(control.tet_activation, "tet")],
            [f],
        ))
    return launches
