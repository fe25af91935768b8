"""Standard scenes shared by the demo, the benchmarks, the examples and the tests.

Each function returns a ModelBuilder (not yet finalized) and documents the time step it is
stable at.
"""

from __future__ import annotations

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import grid_points


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


def _capsule_link(b: ModelBuilder, length: float, radius: float, density: float = 1000.0) -> int:
    """A body holding a capsule from its origin down to z = -length; returns the body."""
    body = b.add_body()
    b.add_shape_capsule(body, pos=(0.0, 0.0, -0.5 * length), radius=radius,
                        half_height=max(0.5 * length - radius, 0.0), density=density)
    return body


def arm(links: int = 7, length: float = 0.15, radius: float = 0.03) -> ModelBuilder:
    """A hanging arm of ``links`` capsule links on revolute joints with alternating axes, PD
    drives holding each joint at 0.2 rad and light damping; no ground. Stable at dt = 1e-3 s."""
    b = ModelBuilder()
    parent, offset = -1, (0.0, 0.0, 1.5)
    for k in range(links):
        link = _capsule_link(b, length, radius)
        axis = (1.0, 0.0, 0.0) if k % 2 == 0 else (0.0, 1.0, 0.0)
        b.add_joint_revolute(parent, link, axis=axis, parent_pos=offset, q=0.3, target_ke=20.0, target_kd=0.5,
                             damping=0.05, armature=0.01)
        parent, offset = link, (0.0, 0.0, -length)
    return b


def box_stack(count: int = 5, half: float = 0.1) -> ModelBuilder:
    """``count`` boxes (half extent ``half`` m, 4 kg each at the default size) stacked on
    the ground on free joints. Stable at dt = 1e-3 s."""
    b = ModelBuilder()
    contact = dict(ke=1.0e5, kd=100.0, mu=0.6)
    b.add_ground_plane(**contact)
    for k in range(count):
        body = b.add_body()
        b.add_shape_box(body, hx=half, hy=half, hz=half, density=500.0, **contact)
        b.add_joint_free(body, pos=(0.0, 0.0, half * (2 * k + 1)))
    return b


def box_pile(side: int, layers: int, half: float = 0.1, spacing: float = 0.25, seed: int = 0) -> ModelBuilder:
    """``layers`` layers of ``side`` x ``side`` boxes of half extent ``half`` (m) on the
    ground, ``spacing`` (m) apart, each turned about the vertical by up to 0.3 rad at random,
    dropped from 2 mm above the layer below (contact ke 1e5 N/m, kd 100 N s/m, mu 0.5):
    closer than about 2.25 half extents, turned neighbours overlap. Stable at dt = 1e-3 s."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    contact = dict(ke=1.0e5, kd=100.0, mu=0.5)
    b.add_ground_plane(**contact)
    for layer in range(layers):
        for row in range(side):
            for column in range(side):
                body = b.add_body()
                b.add_shape_box(body, hx=half, hy=half, hz=half, density=500.0, **contact)
                yaw = rng.uniform(-0.3, 0.3)
                b.add_joint_free(body, pos=(column * spacing, row * spacing, half + 0.002 + (2 * half + 0.002) * layer),
                                 rot=(0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)))
    return b


def quadruped(leg_length: float = 0.2) -> ModelBuilder:
    """A 4-legged robot standing on the ground: a box torso on a free joint and four legs of
    three revolute joints each (hip abduction, hip flexion, knee), 12 joints held by PD
    drives; capsule legs with rounded feet. Stable at dt = 5e-4 s."""
    b = ModelBuilder()
    contact = dict(ke=2.0e4, kd=100.0, mu=0.8)
    b.add_ground_plane(**contact)
    torso = b.add_body()
    b.add_shape_box(torso, hx=0.25, hy=0.1, hz=0.05, density=400.0, **contact)
    b.add_joint_free(torso, pos=(0.0, 0.0, 2 * leg_length * 0.9 + 0.05))
    drive = dict(target_ke=200.0, target_kd=5.0, armature=0.01, damping=0.1)
    for sx in (1.0, -1.0):
        for sy in (1.0, -1.0):
            hip = b.add_body(mass=0.2, inertia=(1e-4, 1e-4, 1e-4))
            b.add_joint_revolute(torso, hip, axis=(1.0, 0.0, 0.0), parent_pos=(0.2 * sx, 0.12 * sy, 0.0), **drive)
            thigh = _capsule_link(b, leg_length, 0.025)
            b.add_joint_revolute(hip, thigh, axis=(0.0, 1.0, 0.0), q=0.3, **drive)
            shin = _capsule_link(b, leg_length, 0.02)
            b.add_joint_revolute(thigh, shin, axis=(0.0, 1.0, 0.0), parent_pos=(0.0, 0.0, -leg_length), q=-0.6,
                                 **drive)
    return b
