"""Static equilibrium, stable time step and cost of a meshed soft block, for the element
convergence study (``wpsim.bench.fem_convergence``).

``ElasticBlock`` meshes a box with a grid of cells (six tets each) of one element kind:
plain linear tets, strain-smoothed tets or quadratic (10-node) tets. Its static solve is
Newton's method on the nodal force balance f_int(x) + f_load = 0 (float64, gravity off;
loads given per node): each Newton step solves K du = f_int + f_load by conjugate gradients
with K v = -(f_int(x + h v) - f_int(x - h v)) / 2h, a central difference of the simulator's
own force launch. Loads come from ``surface_load`` (a traction integrated over boundary faces
with the consistent weights of the element's face: a third of the area at each vertex of a
linear face; none at the vertices and a third at each edge node of a quadratic face) or
from the lumped masses (gravity, as the simulator applies it).
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

ELEMENT_KINDS = ("linear tets", "strain-smoothed tets", "quadratic tets")
NEWTON_TOLERANCE = 1e-8
"""Relative force balance (|f_int + f_load| / |f_load|) at which a static solve stops."""


class ElasticBlock:
    """A box (m) of ``cells`` (nx, ny, nz) grid cells of one ``ELEMENT_KINDS`` kind, with the
    grid nodes chosen by ``fixed(points)`` (a boolean per point) held; float64, no gravity."""

    def __init__(self, size, cells, kind: str, young: float, poisson: float, fixed, density: float = 1000.0,
                 device=None):
        from wpsim.core import geometry
        from wpsim.core.builder import ModelBuilder
        from wpsim.solvers.forces import SmoothingScratch

        if kind not in ELEMENT_KINDS:
            raise ValueError(f"element kind must be one of {ELEMENT_KINDS}, got {kind!r}")
        spacing = np.asarray(size, dtype=np.float64) / np.asarray(cells)
        points = geometry.grid_points(tuple(c + 1 for c in cells), tuple(spacing))
        self.kind, self.cells = kind, tuple(cells)
        builder = ModelBuilder(gravity=0.0)
        builder.add_soft_mesh(points, geometry.grid_tetrahedra(*cells), density=density, young_modulus=young,
                              poisson_ratio=poisson, fixed=np.flatnonzero(fixed(points)),
                              strain_smoothing=kind == "strain-smoothed tets",
                              order=2 if kind == "quadratic tets" else 1)
        self.builder = builder
        self.model = model = builder.finalize(device=device, dtype=wp.float64)
        self.x0 = model.particle_q.numpy().astype(np.float64)
        self.mass = model.particle_mass.numpy().astype(np.float64)
        self.free = np.flatnonzero(self.mass > 0.0)
        self.state = model.state(requires_grad=False)
        self.control = model.control()
        self._scratch = SmoothingScratch(model)
        self._f = wp.zeros(model.particle_count, dtype=model.vec3, device=model.device)
        self.force_evaluations = 0

    @property
    def nodes(self) -> int:
        """Particles of the mesh (vertices and, for quadratic tets, edge nodes)."""
        return self.model.particle_count

    def internal_forces(self, q: np.ndarray) -> np.ndarray:
        """Element forces (P, 3) N at positions ``q`` (P, 3) m, at rest velocities."""
        from wpsim.solvers.forces import launch_forces

        self.state.particle_q.assign(q)
        launch_forces(self.model, self.state.particle_q, self.state.particle_qd, self.control, 0.0, 0.0, self.state,
                      self._f, self._scratch)
        self.force_evaluations += 1
        return self._f.numpy().astype(np.float64)

    def _stiffness_product(self, q: np.ndarray, v: np.ndarray, step: float) -> np.ndarray:
        """K v (free dofs, N/m * m) at ``q`` by a central difference of length ``step`` (m)."""
        size = np.linalg.norm(v)
        if size == 0.0:
            return np.zeros_like(v)
        d = np.zeros_like(q)
        d[self.free] = (step / size) * v.reshape(-1, 3)
        return -(self.internal_forces(q + d) - self.internal_forces(q - d))[self.free].ravel() * (size / (2 * step))

    def solve(self, load: np.ndarray, iterations: int = 12) -> tuple:
        """(displacement (P, 3) m, Newton steps, relative force balance left) of the static
        equilibrium under nodal ``load`` (P, 3) N; the balance is above ``NEWTON_TOLERANCE``
        only if the steps ran out."""
        from scipy.sparse.linalg import LinearOperator, cg

        q = self.x0.copy()
        dofs = 3 * len(self.free)
        scale = np.linalg.norm(load[self.free])
        step = 1e-7 * float(np.ptp(self.x0, axis=0).max())
        balance = np.inf
        for newton in range(1, iterations + 1):
            residual = (self.internal_forces(q) + load)[self.free].ravel()
            balance = np.linalg.norm(residual) / scale
            if balance <= NEWTON_TOLERANCE:
                return q - self.x0, newton - 1, balance
            K = LinearOperator((dofs, dofs), matvec=lambda v, q=q: self._stiffness_product(q, v, step))
            du, _ = cg(K, residual, rtol=min(1e-3, 0.1 * balance) if newton > 1 else 1e-6, maxiter=20 * dofs)
            q[self.free] += du.reshape(-1, 3)
        return q - self.x0, iterations, balance

    def gravity_load(self, g: float = 9.81) -> np.ndarray:
        """Nodal weights (P, 3) N of the lumped masses under gravity ``g`` (m/s^2) along -z."""
        load = np.zeros_like(self.x0)
        load[:, 2] = -g * self.mass
        return load

    def surface_load(self, on_surface, traction) -> np.ndarray:
        """Nodal forces (P, 3) N of the traction ``traction(points (F, 3)) -> (F, 3)`` Pa over the
        boundary faces whose vertices all satisfy ``on_surface(points) -> bool``, consistent
        with the faces' shape functions (the traction taken at each node)."""
        from wpsim.core.geometry import boundary_faces
        from wpsim.kernels.quadratic_tets import TET_EDGES

        tets = self.model.tet_indices.numpy()
        edge_nodes = self.model.tet_edge_indices.numpy()
        midpoint = {}
        for t in np.flatnonzero(edge_nodes[:, 0] >= 0):
            for k, (i, j) in enumerate(TET_EDGES):
                midpoint[frozenset((tets[t, i], tets[t, j]))] = edge_nodes[t, k]
        load = np.zeros_like(self.x0)
        for face in boundary_faces(tets):
            corners = self.x0[face]
            if not on_surface(corners).all():
                continue
            area = 0.5 * np.linalg.norm(np.cross(corners[1] - corners[0], corners[2] - corners[0]))
            mids = [midpoint.get(frozenset((face[a], face[b]))) for a, b in ((0, 1), (1, 2), (2, 0))]
            nodes = np.array(mids if mids[0] is not None else face)
            load[nodes] += traction(self.x0[nodes]) * (area / 3.0)
        return load

    def stable_time_step(self, iterations: int = 60) -> float:
        """The explicit (semi-implicit Euler) step limit 2 / omega_max (s) at rest, omega_max^2
        the largest eigenvalue of M^-1 K by power iteration on the free dofs."""
        rng = np.random.default_rng(0)
        inv_mass = np.repeat(1.0 / self.mass[self.free], 3)
        v = rng.normal(size=3 * len(self.free))
        step = 1e-7 * float(np.ptp(self.x0, axis=0).max())
        eigen = 0.0
        for _ in range(iterations):
            v /= np.linalg.norm(v)
            w = inv_mass * self._stiffness_product(self.x0, v, step)
            eigen = float(v @ w)
            v = w
        return 2.0 / np.sqrt(eigen)

    def step_cost(self, steps: int = 20, dt: float = 1e-6) -> float:
        """Wall time (s) of one semi-implicit step of this mesh in float32 (what users run),
        the mean of ``steps`` after a first one."""
        from wpsim.solvers import SemiImplicitSolver

        model = self.builder.finalize(device=self.model.device, dtype=wp.float32)
        solver = SemiImplicitSolver(model)
        a, b = model.state(requires_grad=False), model.state(requires_grad=False)
        solver.step(a, b, None, dt)
        wp.synchronize_device(model.device)
        start = time.perf_counter()
        for _ in range(steps):
            solver.step(a, b, None, dt)
            a, b = b, a
        wp.synchronize_device(model.device)
        return (time.perf_counter() - start) / steps
