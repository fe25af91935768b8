"""Standard scenes shared by the demo, the benchmarks, the examples and the tests.

Each function returns a ModelBuilder (not yet finalized) and documents the time step it is
stable at.
"""

from __future__ import annotations

import numpy as np

from .builder import ModelBuilder
from .geometry import grid_points


def particles_on_ground(count: int = 1000, radius: float = 0.02, seed: int = 0) -> ModelBuilder:
    """``count`` particles (10 g each) dropped in a loose column onto the ground, with
    particle-particle contact. Stable at dt = 1e-3 s."""
    side = int(np.ceil(count ** (1.0 / 3.0)))
    rng = np.random.default_rng(seed)
    pts = grid_points((side, side, side), (2.5 * radius,) * 3)[:count]
    pts += rng.uniform(-0.2 * radius, 0.2 * radius, pts.shape) + np.array([0.0, 0.0, 0.1])
    b = ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.4)
    b.set_particle_contact(True, ke=1.0e3, kd=1.0, mu=0.4, max_neighbors=16)
    b.add_particles(pts, masses=0.01, radii=radius)
    return b


def cloth_on_sphere(dim: int = 32) -> ModelBuilder:
    """A 1 m x 1 m cloth of dim x dim cells falling onto a sphere. Stable at dt = 1e-3 s
    (dim = 32)."""
    b = ModelBuilder()
    b.add_shape_sphere(pos=(0.5, 0.5, 0.3), radius=0.3, ke=100.0, kd=0.01, mu=0.3)
    b.add_ground_plane(ke=100.0, kd=0.01, mu=0.3)
    cell = 1.0 / dim
    b.add_cloth_grid(pos=(0.0, 0.0, 0.8), dim_x=dim, dim_y=dim, cell_x=cell, cell_y=cell, density=0.5,
                     tri_mu=20.0, tri_lambda=20.0, tri_kd=0.01, bend_ke=1.0e-4, bend_kd=1.0e-6, radius=0.2 * cell)
    return b


def soft_block(dim: int = 10, cell: float = 0.02, height: float = 0.05) -> ModelBuilder:
    """A dim^3-cell Neo-Hookean block (E = 50 kPa, nu = 0.3, 1000 kg/m^3) released ``height``
    (m) above the ground. Stable at dt = 2e-4 s for dim = 10."""
    b = ModelBuilder()
    b.add_ground_plane(ke=1.0e4, kd=1.0, mu=0.5)
    b.add_soft_grid(pos=(0.0, 0.0, height), dim_x=dim, dim_y=dim, dim_z=dim, cell_x=cell, cell_y=cell, cell_z=cell,
                    density=1000.0, young_modulus=5.0e4, poisson_ratio=0.3, kd=5.0, radius=0.25 * cell)
    return b


def bouncing_cube(velocity=(1.0, 0.0, 2.0), cells: int = 2, size: float = 0.1) -> ModelBuilder:
    """The demo scene: a small soft cube thrown with ``velocity`` (m/s) so that it bounces on the
    ground. Stable at dt = 1e-3 s."""
    cell = size / cells
    b = ModelBuilder()
    b.add_ground_plane(ke=2.0e3, kd=0.5, mu=0.3)
    b.add_soft_grid(pos=(0.0, 0.0, 0.05), vel=velocity, dim_x=cells, dim_y=cells, dim_z=cells, cell_x=cell,
                    cell_y=cell, cell_z=cell, density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=1.0,
                    radius=0.005)
    return b
