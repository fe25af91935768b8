"""ModelBuilder: accumulates a scene on the host and finalizes it into a device Model."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import warp as wp

from wpsim.core import geometry
from wpsim.core import mass as mass_props
from wpsim.core.model import Model
from wpsim.core.rigid_builder import RigidBodyBuilder
from wpsim.core.tables import Table
from wpsim.core.tendon_builder import SpatialTendonBuilder, shifted_tendon
from wpsim.core.validation import (
    as_array,
    lame_parameters,
    require_finite,
    require_indices,
    require_nonnegative,
    require_pose,
    require_positive,
)
from wpsim.kernels.enums import SHAPE_BOX, SHAPE_CAPSULE, SHAPE_MESH, SHAPE_PLANE, SHAPE_SPHERE
from wpsim.kernels.quadratic_tets import TET_EDGES

_AXES = {"x": 0, "y": 1, "z": 2}
_IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)
MAX_MESH_POINTS = 128
"""Contact points of a mesh shape at most (``add_shape_mesh``)."""


class ModelBuilder(RigidBodyBuilder, SpatialTendonBuilder):
    """Host-side scene description: particles, springs, cloth, soft bodies, rigid bodies and
    joints, collision shapes.

    Every ``add_*`` call validates its input and raises ``ValueError`` naming the element
    kind and index before anything is stored. Elements belong to world 0 unless they come
    from ``add_builder``/``replicate``, which give each copy its own world index; all worlds
    are stepped by the same kernel launches.

    Args:
        up_axis: "x", "y" or "z" (default "z").
        gravity: gravitational acceleration (m/s^2): a number along the up axis (default
            -9.81), or a 3-vector in any direction.
    """

    def __init__(self, up_axis: str = "z", gravity=-9.81):
        if up_axis not in _AXES:
            raise ValueError(f"up_axis must be one of 'x', 'y', 'z', got {up_axis!r}")
        self.up_axis = _AXES[up_axis]
        self.up_vector = tuple(float(i == self.up_axis) for i in range(3))
        self.gravity = float(gravity) if np.ndim(gravity) == 0 else tuple(float(g) for g in gravity)
        self.fluid_density = 0.0
        """Density (kg/m^3) of the medium the bodies move in (MuJoCo's option density): quadratic
        drag on each body's equivalent box (``kernels.articulation.fluid_wrench``)."""
        self.fluid_viscosity = 0.0
        """Viscosity (Pa s) of the medium (MuJoCo's option viscosity): linear drag."""
        self.wind = (0.0, 0.0, 0.0)
        """Velocity (m/s) of the medium."""
        self.friction_smoothing = 0.01
        """Speed (m/s) below which Coulomb friction is smoothed (force ~ speed)."""
        self.contact_damping_depth = 1.0e-3
        """Penetration (m) over which penalty-contact damping ramps up from 0 at first touch
        to the full kd (Hunt-Crossley style; the contact force is then continuous at onset,
        see ``kernels.contact.onset_damping``); 0: full damping from first touch."""
        self.particle_impacts = False
        self.impact_restitution = 0.0
        self.particle_contact = False
        self.pair_ke, self.pair_kd, self.pair_mu = 1.0e3, 1.0, 0.5
        self.particle_max_neighbors = 16
        self.particles = Table("particle")
        self.springs = Table("spring")
        self.triangles = Table("triangle")
        self.hinges = Table("bending hinge")
        self.tetrahedra = Table("tetrahedron")
        self.shapes = Table("shape")
        self.shape_points = Table("shape contact point")
        self.shape_meshes: dict[int, tuple] = {}
        """Triangle meshes of mesh shapes: shape index -> (vertices (V, 3) m, faces (F, 3))."""
        self.visual_meshes: list[tuple] = []
        """Drawn-only meshes: (body (-1: static), pose (7,) position m + quaternion x, y, z, w in
        the body frame, vertices (V, 3) m, faces (F, 3)); no mass, no contact."""
        self._init_rigid()

    # ------------------------------------------------------------------ counts
    @property
    def particle_count(self) -> int:
        return self.particles.count

    @property
    def num_worlds(self) -> int:
        """1 + the largest world index used by a particle, body or world-owned shape (0 if empty)."""
        worlds = [self.particles.array("particle_world"), self.shapes.array("shape_world"), self.bodies.array("body_world")]
        used = np.concatenate(worlds)
        return int(used.max()) + 1 if used.size and used.max() >= 0 else 0

    # ------------------------------------------------------------------ particles
    def add_particle(self, pos, vel=(0.0, 0.0, 0.0), mass: float = 1.0, radius: float = 0.05, drag: float = 0.0) -> int:
        """Add one particle (position m, velocity m/s, mass kg (0 = fixed), radius m, drag N s/m)."""
        return int(self.add_particles([pos], [vel], mass, radius, drag)[0])

    def add_particles(self, positions, velocities=(0.0, 0.0, 0.0), masses=1.0, radii=0.05, drag=0.0) -> np.ndarray:
        """Add N particles; per-particle arguments broadcast. Returns their indices."""
        q = as_array("particle positions", positions, (3,))
        n = len(q)
        first = self.particles.append(
            n, particle_q=q, particle_qd=velocities, particle_mass=masses, particle_radius=radii, particle_drag=drag,
            particle_world=np.zeros(n, dtype=np.int64),
        )
        return np.arange(first, first + n)

    def _rest_positions(self) -> np.ndarray:
        return self.particles.array("particle_q")

    def _indices(self, kind: str, table: Table, indices, arity: int) -> np.ndarray:
        idx = as_array(f"{kind} indices", indices, (arity,), dtype=np.int64)
        require_indices(kind, idx, self.particle_count, table.count)
        return idx

    # ------------------------------------------------------------------ elements
    def add_spring(self, i: int, j: int, ke: float, kd: float = 0.0, rest_length: float | None = None) -> int:
        """Add a spring between particles i and j (ke N/m, kd N s/m, rest length m)."""
        rest = None if rest_length is None else [rest_length]
        return self.add_springs([(i, j)], ke, kd, rest)

    def add_springs(self, pairs, ke, kd=0.0, rest_lengths=None) -> int:
        """Add springs (S, 2); rest lengths default to the current particle distances."""
        idx = self._indices("spring", self.springs, pairs, 2)
        if rest_lengths is None:
            x = self._rest_positions()
            rest_lengths = np.linalg.norm(x[idx[:, 1]] - x[idx[:, 0]], axis=1)
        return self.springs.append(len(idx), spring_indices=idx, spring_ke=ke, spring_kd=kd, spring_rest_length=rest_lengths)

    def add_triangles(self, triangles, mu, lam, kd=0.0) -> int:
        """Add cloth membrane triangles (T, 3) at their current (rest) shape.

        mu, lam: membrane Lame-style moduli (N/m); kd: strain-rate damping (N s/m).
        """
        idx = self._indices("triangle", self.triangles, triangles, 3)
        rest_inv, area = geometry.triangle_rest_frames(self._rest_positions(), idx, self.triangles.count)
        return self.triangles.append(len(idx), tri_indices=idx, tri_rest_inv=rest_inv, tri_rest_area=area, tri_mu=mu,
                                     tri_lambda=lam, tri_kd=kd)

    def add_bending_hinges(self, hinges, ke, kd=0.0, rest_angles=None) -> int:
        """Add bending hinges (B, 4) = (opposite A, opposite B, edge start, edge end).

        ke: stiffness (N m/rad^2), kd: damping (N m s/rad^2); rest angles (rad) default to
        the current dihedral angles.
        """
        idx = self._indices("bending hinge", self.hinges, hinges, 4)
        if rest_angles is None:
            rest_angles = geometry.dihedral_angles(self._rest_positions(), idx)
        return self.hinges.append(len(idx), bend_indices=idx, bend_rest_angle=rest_angles, bend_ke=ke, bend_kd=kd)

    def add_tetrahedra(self, tets, mu, lam, kd=0.0, fiber=(0.0, 0.0, 0.0), strain_smoothing: bool = False,
                       edge_nodes=None) -> int:
        """Add positively oriented tetrahedra (E, 4) at their current (rest) shape.

        mu, lam: Lame parameters (Pa); kd: strain-rate damping (Pa s); fiber: unit actuation
        direction per tet, or zero for volumetric actuation; strain_smoothing: average the
        strain over face domains (``wpsim.kernels.fem``), much less stiff in bending on coarse
        meshes than plain linear tets, at about twice the cost of their force evaluation;
        edge_nodes (E, 6): particles at the midpoints of each tet's edges, in
        ``wpsim.kernels.quadratic_tets.TET_EDGES`` order, which make the tets quadratic
        (10-node; not smoothed).
        """
        idx = self._indices("tetrahedron", self.tetrahedra, tets, 4)
        rest_inv, volume = geometry.tet_rest_frames(self._rest_positions(), idx, self.tetrahedra.count)
        fib = as_array("tetrahedron fiber", fiber, (3,), len(idx))
        norms = np.linalg.norm(fib, axis=1)
        bad = np.flatnonzero((norms > 0) & (np.abs(norms - 1.0) > 1e-6))
        if bad.size:
            raise ValueError(f"tetrahedron {self.tetrahedra.count + bad[0]}: fiber direction must be unit or zero")
        if edge_nodes is None:
            edges = np.full((len(idx), 6), -1, dtype=np.int64)
        else:
            if strain_smoothing:
                raise ValueError("quadratic tetrahedra (edge_nodes given) cannot be strain-smoothed")
            edges = as_array("tetrahedron edge nodes", edge_nodes, (6,), len(idx), dtype=np.int64)
            require_indices("tetrahedron", np.concatenate([idx, edges], axis=1), self.particle_count,
                            self.tetrahedra.count)
            geometry.check_edge_nodes(self._rest_positions(), idx, edges, self.tetrahedra.count)
        return self.tetrahedra.append(
            len(idx), tet_indices=idx, tet_rest_inv=rest_inv, tet_rest_volume=volume, tet_mu=mu, tet_lambda=lam,
            tet_kd=kd, tet_fiber=fib, tet_smoothed=int(bool(strain_smoothing)), tet_edge_indices=edges,
        )

    # ------------------------------------------------------------------ meshes
    def _place_vertices(self, vertices, pos, rot, scale) -> np.ndarray:
        v = as_array("mesh vertices", vertices, (3,))
        require_finite("mesh vertex", "position", v)
        return v * np.asarray(scale, dtype=np.float64) @ geometry.quat_to_matrix(rot).T + np.asarray(pos, dtype=np.float64)

    def _add_mesh_particles(self, x, masses, vel, radius, fixed) -> int:
        masses = np.array(masses, dtype=np.float64)
        if fixed is not None:
            fixed = np.asarray(fixed, dtype=np.int64)
            if fixed.size and (fixed.min() < 0 or fixed.max() >= len(x)):
                raise ValueError(f"fixed vertex index out of range (mesh has {len(x)} vertices)")
            masses[fixed] = 0.0
        return int(self.add_particles(x, vel, masses, radius)[0])

    def _tables(self) -> tuple:
        return (self.particles, self.springs, self.triangles, self.hinges, self.tetrahedra, self.shapes,
                self.shape_points, self.bodies, self.joints, self.joint_coords, self.joint_dofs)

    @contextmanager
    def _all_or_nothing(self):
        """Undo every row (and mesh shape) added inside the block if it raises."""
        tables = self._tables()
        marks = [t.mark() for t in tables]
        kept = (dict(self.shape_meshes), list(self.visual_meshes), list(self.joint_couplings),
                list(self.body_connections), list(self.spatial_tendons))
        try:
            yield
        except BaseException:
            for table, mark in zip(tables, marks):
                table.rollback(mark)
            self.shape_meshes, self.visual_meshes, self.joint_couplings, self.body_connections, self.spatial_tendons = kept
            raise

    def add_cloth_mesh(
        self, vertices, triangles, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, scale=1.0, vel=(0.0, 0.0, 0.0),
        density=0.1, tri_mu=100.0, tri_lambda=100.0, tri_kd=0.0, bend_ke=0.0, bend_kd=0.0, radius=0.01, fixed=None,
    ) -> int:
        """Add a cloth from a triangle mesh; returns the index of its first particle.

        density: areal density (kg/m^2), lumped onto vertices; tri_*: membrane parameters;
        bend_*: hinge parameters for every interior edge; fixed: vertex indices with mass 0.
        Nothing is added if any check fails.
        """
        x = self._place_vertices(vertices, pos, rot, scale)
        tris = as_array("cloth triangles", triangles, (3,), dtype=np.int64)
        require_indices("triangle", tris, len(x), self.triangles.count)
        _, area = geometry.triangle_rest_frames(x, tris, self.triangles.count)
        with self._all_or_nothing():
            start = self._add_mesh_particles(x, geometry.lumped_masses(len(x), tris, area, density), vel, radius, fixed)
            self.add_triangles(tris + start, tri_mu, tri_lambda, tri_kd)
            hinges = geometry.hinges_from_triangles(tris)
            if len(hinges) and (bend_ke > 0 or bend_kd > 0):
                self.add_bending_hinges(hinges + start, bend_ke, bend_kd)
        return start

    def add_cloth_grid(
        self, pos, rot=_IDENTITY_QUAT, vel=(0.0, 0.0, 0.0), dim_x: int = 8, dim_y: int = 8,
        cell_x: float = 0.1, cell_y: float = 0.1, fix_left: bool = False, fix_right: bool = False, **cloth,
    ) -> int:
        """Add a dim_x x dim_y cell cloth in its local x-y plane, corner at ``pos`` (m).

        fix_left / fix_right fix the vertices at local x = 0 / x = dim_x * cell_x; other
        keyword arguments go to ``add_cloth_mesh``.
        """
        x = geometry.grid_points((dim_x + 1, dim_y + 1), (cell_x, cell_y))
        fixed = np.flatnonzero((fix_left & (x[:, 0] == 0.0)) | (fix_right & (x[:, 0] == x[:, 0].max())))
        return self.add_cloth_mesh(x, geometry.grid_triangles(dim_x, dim_y), pos, rot, vel=vel, fixed=fixed, **cloth)

    def add_soft_mesh(
        self, vertices, tets, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, scale=1.0, vel=(0.0, 0.0, 0.0),
        density=1000.0, young_modulus=None, poisson_ratio=None, mu=None, lam=None, kd=0.0,
        fiber=(0.0, 0.0, 0.0), radius=0.01, fixed=None, strain_smoothing: bool = False, order: int | None = None,
    ) -> int:
        """Add a soft body from a tetrahedral mesh; returns the index of its first particle.

        Material: either young_modulus (Pa) and poisson_ratio, or Lame mu and lam (Pa).
        density (kg/m^3) is lumped onto nodes; kd is strain-rate damping (Pa s); fiber is
        the actuation direction (zero: volumetric); strain_smoothing: face-based strain
        smoothing (see ``add_tetrahedra``). ``tets``: (E, 4) vertices, or (E, 10) quadratic
        tets (vertices, then their edge midpoints in any order). order: 1 linear, 2 quadratic
        tets (a node added at the midpoint of every edge of (E, 4) tets, fixed where both its
        ends are in ``fixed``); default: 2 for (E, 10) tets, else 1. Nothing is added if any
        check fails.
        """
        if young_modulus is not None or poisson_ratio is not None:
            if young_modulus is None or poisson_ratio is None or mu is not None or lam is not None:
                raise ValueError("give either young_modulus and poisson_ratio, or mu and lam")
            mu, lam = lame_parameters(young_modulus, poisson_ratio, "tetrahedron", self.tetrahedra.count)
        elif mu is None or lam is None:
            raise ValueError("soft body material missing: give young_modulus and poisson_ratio, or mu and lam")
        x = self._place_vertices(vertices, pos, rot, scale)
        nodes = np.asarray(tets)
        ten = nodes.ndim == 2 and nodes.shape[1] == 10
        order = (2 if ten else 1) if order is None else order
        if order not in (1, 2) or (ten and order == 1):
            raise ValueError(f"soft body order must be 1 (linear) or 2 (quadratic tets), got {order!r}"
                             + (" for (E, 10) quadratic tets" if ten else ""))
        idx = as_array("soft body tetrahedra", tets, (10 if ten else 4,), dtype=np.int64)
        require_indices("tetrahedron", idx, len(x), self.tetrahedra.count)
        edges = None
        if ten:
            idx, edges = geometry.ordered_edge_nodes(x, idx, self.tetrahedra.count)
        _, volume = geometry.tet_rest_frames(x, idx, self.tetrahedra.count)
        if order == 2 and not ten:
            vertex_count = len(x)
            x, edges = geometry.edge_midpoint_nodes(x, idx)
            if fixed is not None:
                fixed = np.asarray(fixed, dtype=np.int64).ravel()
                if fixed.size and (fixed.min() < 0 or fixed.max() >= vertex_count):
                    raise ValueError(f"fixed vertex index out of range (mesh has {vertex_count} vertices)")
                held = np.zeros(vertex_count, dtype=bool)
                held[fixed] = True
                ends = np.stack([idx[:, list(e)] for e in TET_EDGES], axis=1)
                both = held[ends].all(axis=2)
                fixed = np.union1d(fixed, edges[both])
        if edges is None:
            masses = geometry.lumped_masses(len(x), idx, volume, density)
        else:
            masses = geometry.quadratic_lumped_masses(len(x), idx, edges, volume, density)
        rotated_fiber = as_array("tetrahedron fiber", fiber, (3,), len(idx)) @ geometry.quat_to_matrix(rot).T
        with self._all_or_nothing():
            start = self._add_mesh_particles(x, masses, vel, radius, fixed)
            self.add_tetrahedra(idx + start, mu, lam, kd, rotated_fiber, strain_smoothing,
                                None if edges is None else edges + start)
        return start

    def add_soft_grid(
        self, pos, rot=_IDENTITY_QUAT, vel=(0.0, 0.0, 0.0), dim_x: int = 4, dim_y: int = 4, dim_z: int = 4,
        cell_x: float = 0.1, cell_y: float = 0.1, cell_z: float = 0.1, **soft,
    ) -> int:
        """Add a dim_x x dim_y x dim_z cell soft block (6 tets per cell), corner at ``pos`` (m).

        Other keyword arguments go to ``add_soft_mesh``.
        """
        x = geometry.grid_points((dim_x + 1, dim_y + 1, dim_z + 1), (cell_x, cell_y, cell_z))
        return self.add_soft_mesh(x, geometry.grid_tetrahedra(dim_x, dim_y, dim_z), pos, rot, vel=vel, **soft)

    # ------------------------------------------------------------------ shapes
    def _add_shape(self, kind, body, pos, rot, size, ke, kd, mu, density=0.0, mass_properties=None,
                   points=None) -> int:
        index = self.shapes.count
        if not (isinstance(body, (int, np.integer)) and -1 <= body < self.bodies.count):
            raise ValueError(f"shape {index}: body {body} does not exist (-1 = static, {self.bodies.count} bodies)")
        if kind == SHAPE_PLANE and body != -1:
            raise ValueError(f"shape {index}: a plane must be static (body -1)")
        transform = require_pose("shape", index, pos, rot)
        require_nonnegative("shape", "density", np.array([density]), "kg/m^3", index)
        world = self.bodies.array("body_world")[body] if body >= 0 else (-1 if kind == SHAPE_PLANE else 0)
        points = np.zeros((0, 3)) if points is None else points
        with self._all_or_nothing():
            self.shapes.append(
                1, shape_kind=[kind], shape_body=[body], shape_world=[world], shape_transform=[transform],
                shape_size=[size], shape_ke=ke, shape_kd=kd, shape_mu=mu, shape_point_start=[self.shape_points.count],
                shape_point_count=[len(points)], shape_collision_type=[1], shape_collision_mask=[1],
                shape_solref=[(0.0, 0.0)], shape_solimp=[(0.0,) * 5], shape_solmix=[1.0], shape_priority=[0],
                shape_condim=[3], shape_rotational_mu=[(0.0, 0.0)], shape_margin=[0.0],
            )
            if len(points):
                self.shape_points.append(len(points), shape_points=points)
            if body >= 0 and density > 0:
                m, com, inertia = mass_properties(density)
                self._add_shape_mass(body, m, com, inertia, transform)
        return index

    def add_ground_plane(self, height: float = 0.0, ke: float = 1.0e4, kd: float = 10.0, mu: float = 0.5, world: int = -1) -> int:
        """Add an infinite ground plane normal to the up axis at ``height`` (m); shared by all worlds."""
        up = np.array(self.up_vector)
        rot = geometry.quat_between((0.0, 0.0, 1.0), up)
        index = self._add_shape(SHAPE_PLANE, -1, up * height, rot, (0.0, 0.0, 0.0), ke, kd, mu)
        self.shapes.array("shape_world")[index] = world
        return index

    def add_shape_plane(self, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, ke: float = 1.0e4, kd: float = 10.0,
                        mu: float = 0.5) -> int:
        """Add a static infinite plane through ``pos`` with normal along the local z axis of
        ``rot`` (world 0); see ``add_ground_plane`` for one shared by all worlds."""
        return self._add_shape(SHAPE_PLANE, -1, pos, rot, (0.0, 0.0, 0.0), ke, kd, mu)

    def add_shape_sphere(self, body=-1, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, radius=0.5, ke=1.0e4, kd=10.0, mu=0.5,
                         density=1000.0) -> int:
        """Add a sphere of ``radius`` (m) centred at ``pos`` (body frame, or world if static).

        On a body, a positive ``density`` (kg/m^3) adds the solid's mass and inertia to it.
        ke (N/m), kd (N s/m), mu: contact stiffness, damping, friction.
        """
        require_positive("shape", "radius", np.array([radius]), "m", self.shapes.count)
        return self._add_shape(SHAPE_SPHERE, body, pos, rot, (radius, 0.0, 0.0), ke, kd, mu, density,
                               lambda rho: mass_props.sphere_mass_properties(radius, rho))

    def add_shape_box(self, body=-1, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, hx=0.5, hy=0.5, hz=0.5, ke=1.0e4, kd=10.0,
                      mu=0.5, density=1000.0) -> int:
        """Add a box with half extents (hx, hy, hz) (m) in its frame at ``pos``/``rot``; see
        ``add_shape_sphere`` for the other arguments."""
        require_positive("shape", "half extent", np.array([hx, hy, hz]), "m", self.shapes.count)
        return self._add_shape(SHAPE_BOX, body, pos, rot, (hx, hy, hz), ke, kd, mu, density,
                               lambda rho: mass_props.box_mass_properties((hx, hy, hz), rho))

    def add_shape_capsule(
        self, body=-1, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, radius=0.1, half_height=0.5, ke=1.0e4, kd=10.0, mu=0.5,
        density=1000.0,
    ) -> int:
        """Add a capsule along its local z axis: segment half length ``half_height``, ``radius``
        (m); see ``add_shape_sphere`` for the other arguments."""
        require_positive("shape", "radius", np.array([radius]), "m", self.shapes.count)
        require_nonnegative("shape", "half height", np.array([half_height]), "m", self.shapes.count)
        return self._add_shape(SHAPE_CAPSULE, body, pos, rot, (radius, half_height, 0.0), ke, kd, mu, density,
                               lambda rho: mass_props.capsule_mass_properties(radius, half_height, rho))

    def add_shape_mesh(self, body, vertices, faces, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT, scale=1.0, ke=1.0e4,
                       kd=10.0, mu=0.5, density=1000.0, name: str = "mesh", max_points: int = MAX_MESH_POINTS) -> int:
        """Add a closed triangle mesh (vertices (V, 3) in m before ``scale``, faces (F, 3))
        in its frame at ``pos``/``rot`` on ``body`` (or static with -1).

        The surface must bound a solid (closed, manifold, consistently wound, outward; see
        ``wpsim.core.meshing.check_solid``; ``name`` labels errors). On a body, a positive
        ``density`` adds the solid's volume-integral mass properties. Contact: the vertices
        of the mesh's convex hull are its contact points against planes, spheres, capsules
        and boxes (a primitive's corner pressing into a mesh face is not detected); two
        meshes test each hull's vertices and points along its edges against the other
        hull's face planes (``kernels.rigid_contact``); particles do not touch mesh shapes. A hull with more than ``max_points``
        vertices keeps that many, spread over it (farthest-point sampling, as MuJoCo's
        ``maxhullvert`` caps a hull): contact cost grows with the points, and exported meshes'
        hulls often have thousands.
        """
        from wpsim.core.meshing import check_solid, check_vertices

        v = self._place_vertices(vertices, (0.0, 0.0, 0.0), _IDENTITY_QUAT, scale)
        check_vertices(v, name)
        f = as_array(f"{name} faces", faces, (3,), dtype=np.int64)
        check_solid(v, f, name)
        hull, mesh_mass = mass_props.mesh_hull_and_mass(v, f)
        half = 0.5 * (v.max(axis=0) - v.min(axis=0))
        if max_points < 4:
            raise ValueError(f"{name}: max_points must be >= 4, got {max_points}")
        points = mass_props.spread_subset(hull, max_points)
        index = self._add_shape(SHAPE_MESH, body, pos, rot, half, ke, kd, mu, density, mesh_mass, points=points)
        self.shape_meshes[index] = (v, f)
        return index

    def add_visual_mesh(self, body, vertices, faces, pos=(0.0, 0.0, 0.0), rot=_IDENTITY_QUAT) -> int:
        """Add a mesh that is only drawn (renderer, USD export), at ``pos``/``rot`` on ``body``
        (-1: static): vertices (V, 3) m, faces (F, 3), any surface (open ones too); it has no
        mass and no contact. Returns its index in ``visual_meshes``."""
        if not -1 <= body < self.body_count:
            raise ValueError(f"visual mesh: body {body} does not exist (0..{self.body_count - 1}, or -1)")
        index = len(self.visual_meshes)
        v = as_array("visual mesh vertices", vertices, (3,))
        require_finite("visual mesh vertex", "position", v)
        f = as_array("visual mesh faces", faces, (3,), dtype=np.int64)
        if len(f) and (f.min() < 0 or f.max() >= len(v)):
            raise ValueError(f"visual mesh {index}: a face refers to a vertex outside [0, {len(v)})")
        self.visual_meshes.append((int(body), require_pose("visual mesh", index, pos, rot), v, f))
        return index

    def set_particle_contact(self, enabled=True, ke=1.0e3, kd=1.0, mu=0.5, max_neighbors=16):
        """Enable particle-particle contact (same world only) with a compliant law.

        ke (N/m), kd (N s/m), mu; max_neighbors bounds the contacts per particle per step
        (an overflow is reported by the solver's health check).
        """
        for name, value in (("ke", ke), ("kd", kd), ("mu", mu)):
            require_nonnegative("particle contact", name, np.array([value]), "")
        if max_neighbors < 1:
            raise ValueError("particle contact: max_neighbors must be >= 1")
        self.particle_contact = bool(enabled)
        self.pair_ke, self.pair_kd, self.pair_mu = float(ke), float(kd), float(mu)
        self.particle_max_neighbors = int(max_neighbors)

    def set_particle_impacts(self, enabled=True, restitution=0.5):
        """Resolve particle impacts at their time of impact (with static shapes, the ground
        included, and, with ``set_particle_contact``, between particles), as velocity jumps with a coefficient of restitution in
        [0, 1] and Coulomb friction (the shape's or pair's mu), instead of first penetrating.

        Within the step in which a particle would reach a surface, the solver moves it to the
        impact time, reflects its normal velocity there, and continues for the rest of the
        step, so states (and their gradients) are continuous in the inputs and converge to
        the continuous-time impact as dt shrinks. Penalty contact still acts on particles
        that overlap. Shapes on bodies and mesh shapes keep penalty contact only.
        """
        if not 0.0 <= restitution <= 1.0:
            raise ValueError(f"particle impacts: restitution must lie in [0, 1], got {restitution}")
        self.particle_impacts = bool(enabled)
        self.impact_restitution = float(restitution)

    # ------------------------------------------------------------------ worlds
    def add_builder(self, other: ModelBuilder, offset=(0.0, 0.0, 0.0)) -> int:
        """Append a copy of ``other`` as new world(s), translated by ``offset`` (m).

        Returns the world index of the copy's world 0. Shapes that ``other`` shares across
        its worlds (world -1) belong to the copy's world. Particles, static shapes and the
        joint frames of articulation roots are translated. Settings of ``self`` are kept.
        """
        if other is self:
            raise ValueError("cannot add a builder to itself")
        if other.up_axis != self.up_axis:
            raise ValueError("add_builder: the builders have different up axes")
        world0 = self.num_worlds
        if other.num_worlds > 1 and (other.shapes.array("shape_world") == -1).any():
            raise ValueError("add_builder: cannot copy shared shapes of a builder with several worlds")
        shift, body_shift, joint_shift = self.particle_count, self.body_count, self.joints.count
        shape_shift, point_shift = self.shapes.count, self.shape_points.count
        offset = np.asarray(offset, dtype=np.float64)
        static_shape = other.shapes.array("shape_body") < 0
        root_joint = other.joints.array("joint_parent") < 0

        def translated(poses, rows):
            out = poses.copy()
            out[rows, :3] += offset
            return out

        def remap(name, arr):
            if name.endswith("_indices"):  # particle indices of springs, triangles, hinges, tets (-1: none)
                return np.where(arr >= 0, arr + shift, arr)
            if name.endswith("_world"):
                return np.maximum(arr, 0) + world0
            if name == "particle_q":
                return arr + offset
            if name == "shape_transform":
                return translated(arr, static_shape)
            if name in ("shape_body", "joint_parent", "joint_child"):
                return np.where(arr >= 0, arr + body_shift, arr)
            if name == "shape_point_start":
                return arr + point_shift
            if name == "joint_X_p":
                return translated(arr, root_joint)
            return arr

        with self._all_or_nothing():
            for table, source in zip(self._tables(), other._tables()):
                table.extend_from(source, remap)
        self.shape_meshes.update({shape_shift + i: mesh for i, mesh in other.shape_meshes.items()})
        self.joint_couplings += [(tuple(j + joint_shift for j in joints), *rest)
                                 for joints, *rest in other.joint_couplings]
        self.body_connections += [(a + body_shift, pa, b + body_shift if b >= 0 else -1, pb if b >= 0 else pb + offset,
                                   *rest) for a, pa, b, pb, *rest in other.body_connections]
        self.spatial_tendons += [shifted_tendon(tendon, body_shift, offset) for tendon in other.spatial_tendons]
        for body, pose, vertices, faces in other.visual_meshes:
            placed = pose if body >= 0 else np.concatenate([pose[:3] + offset, pose[3:]])
            self.visual_meshes.append((body + body_shift if body >= 0 else -1, placed, vertices, faces))
        self.excluded_body_pairs |= {(a + body_shift, b + body_shift if b >= 0 else -1)
                                     for a, b in other.excluded_body_pairs}
        return world0

    def _mesh_hulls(self) -> dict:
        """Each mesh shape's contact hull (the convex hull of its contact points, shape frame)
        as Model arrays for mesh-mesh contact: its face planes, and its contact points with
        points along its edges added (``geometry.convex_hull_planes_and_edges``), tested
        against the other hull's planes."""
        kinds, starts, counts = (self.shapes.array(n) for n in ("shape_kind", "shape_point_start", "shape_point_count"))
        points = self.shape_points.array("shape_points")
        out = {name: [] for name in ("plane_start", "plane_count", "hull_point_start", "hull_point_count")}
        normals, offsets, hull_points = [np.zeros((0, 3))], [np.zeros(0)], [np.zeros((0, 3))]
        planes_so_far = points_so_far = 0
        for kind, start, count in zip(kinds, starts, counts):
            n, o, along = np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3))
            if kind == SHAPE_MESH:
                n, o, along = geometry.convex_hull_planes_and_edges(points[start:start + count])
                along = np.concatenate([points[start:start + count], along])
            for name, value in (("plane_start", planes_so_far), ("plane_count", len(o)),
                                ("hull_point_start", points_so_far), ("hull_point_count", len(along))):
                out[name].append(value)
            normals.append(n)
            offsets.append(o)
            hull_points.append(along)
            planes_so_far += len(o)
            points_so_far += len(along)
        return {**{f"shape_{name}": np.asarray(v, np.int64) for name, v in out.items()},
                "shape_plane_normal": np.concatenate(normals), "shape_plane_offset": np.concatenate(offsets),
                "shape_hull_points": np.concatenate(hull_points)}

    def replicate(self, other: ModelBuilder, num_worlds: int, spacing=(0.0, 0.0, 0.0)) -> list:
        """Add ``num_worlds`` copies of ``other``, copy k offset by k * spacing (m); returns world indices."""
        if num_worlds < 1:
            raise ValueError("replicate: num_worlds must be >= 1")
        return [self.add_builder(other, np.asarray(spacing, dtype=np.float64) * k) for k in range(num_worlds)]

    def replicated(self, num_worlds: int, spacing=(0.0, 0.0, 0.0)) -> ModelBuilder:
        """A new builder with this one's settings (gravity, contact and smoothing options)
        holding ``num_worlds`` copies of it (``replicate``): world k's elements are the
        rows of this builder's elements shifted by k times their counts."""
        axis = next(name for name, index in _AXES.items() if index == self.up_axis)
        batch = ModelBuilder(up_axis=axis, gravity=self.gravity)
        for name, value in vars(self).items():
            if isinstance(value, (bool, int, float, tuple)):
                setattr(batch, name, value)
        batch.replicate(self, num_worlds, spacing)
        return batch

    # ------------------------------------------------------------------ finalize
    def finalize(self, device=None, requires_grad: bool = False, dtype=wp.float32) -> Model:
        """Create the Model on ``device`` at precision ``dtype`` (wp.float32 or wp.float64)."""
        if dtype not in (wp.float32, wp.float64):
            raise ValueError(f"dtype must be wp.float32 or wp.float64, got {dtype}")
        gravity = np.asarray(self.gravity, dtype=np.float64)
        if gravity.shape not in ((), (3,)) or not np.isfinite(gravity).all():
            raise ValueError(f"gravity must be a finite number (along the up axis) or 3-vector in m/s^2, got "
                             f"{self.gravity!r}")
        medium = np.array([self.fluid_density, self.fluid_viscosity, *np.ravel(self.wind)], dtype=np.float64)
        if medium.shape != (5,) or not (np.isfinite(medium).all() and (medium[:2] >= 0.0).all()):
            raise ValueError(f"fluid_density (kg/m^3) and fluid_viscosity (Pa s) must be finite and >= 0 and wind a "
                             f"finite 3-vector (m/s), got {self.fluid_density!r}, {self.fluid_viscosity!r}, "
                             f"{self.wind!r}")
        if not 0.0 <= self.contact_damping_depth < np.inf:
            raise ValueError(f"contact_damping_depth must be a finite depth >= 0 m, got {self.contact_damping_depth}")
        p = self.particles
        arrays = {}
        for table in (p, self.springs, self.triangles, self.hinges, self.tetrahedra, self.shapes, self.shape_points):
            arrays.update(table.arrays())
        arrays.update(
            gravity=[np.array(self.up_vector) * gravity if gravity.ndim == 0 else gravity],
            fluid=[medium],
            pair_ke=[self.pair_ke],
            pair_kd=[self.pair_kd],
            pair_mu=[self.pair_mu],
            impact_restitution=[self.impact_restitution],
        )
        contact_filter = self._contact_filter()
        arrays.update(contact_filter, **self._contact_pairs(contact_filter))
        arrays["tet_face_domain"], arrays["domain_tets"] = geometry.face_smoothing_domains(
            arrays["tet_indices"], arrays["tet_smoothed"])
        arrays.update(self._mesh_hulls())
        rigid_arrays, rigid_scalars = self._rigid_layout()
        arrays.update(rigid_arrays)
        scalars = {
            "num_worlds": max(self.num_worlds, 1),
            "particle_count": p.count,
            "spring_count": self.springs.count,
            "tri_count": self.triangles.count,
            "bend_count": self.hinges.count,
            "tet_count": self.tetrahedra.count,
            "domain_count": len(arrays["domain_tets"]),
            "shape_count": self.shapes.count,
            "up_axis": self.up_axis,
            "up_vector": self.up_vector,
            "friction_smoothing": float(self.friction_smoothing),
            "contact_damping_depth": float(self.contact_damping_depth),
            "particle_impacts": bool(self.particle_impacts and p.count),
            "particle_max_neighbors": self.particle_max_neighbors if self.particle_contact and p.count else 0,
            "particle_max_radius": float(p.array("particle_radius").max()) if p.count else 0.0,
            "contact_pair_count": len(arrays["contact_pair"]),
            "shape_meshes": dict(self.shape_meshes),
            "visual_meshes": list(self.visual_meshes),
            **rigid_scalars,
        }
        return Model(arrays, scalars, device, dtype, requires_grad)
