"""The gradient audit: every differentiable parameter family against central differences.

Each case is a small float64 scene in a smooth regime (contacts stay closed, friction keeps
sliding, no element approaches inversion), rolled out for a few dozen steps; the loss is a
fixed random linear probe of the final positions and velocities. Every case runs with the
semi-implicit solver and, except particle-particle contact (unsupported there), again with
the backward-Euler solver, whose gradients come from its implicit (IFT) adjoint.
``run_audit`` returns one row per (solver, family, parameter).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import warp as wp

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import grid_points
from wpsim.core.tendon_builder import TendonWrap
from wpsim.diff.checkpoint import Rollout
from wpsim.diff.gradcheck import check_gradient, check_gradients
from wpsim.diff.losses import joint_state_loss, joint_tracking_loss, linear_state_loss
from wpsim.solvers import ImplicitEulerSolver, SemiImplicitSolver, SoftContactOptions
from wpsim.solvers.controllers import JointPDController
from wpsim.solvers.rollout import simulate

TOLERANCE = 1e-4
EPS = 1e-4


class AuditScene:
    """A float64 model, its initial state and control, and a random linear loss probe;
    ``healthy`` stays True while every rollout of the scene passes the solver's health check."""

    def __init__(self, builder: ModelBuilder, steps: int, dt: float, setup: Callable | None = None):
        self.model = builder.finalize(requires_grad=True, dtype=wp.float64)
        self.solver = None  # set by run_case
        self.state = self.model.state()
        self.control = self.model.control()
        if setup is not None:
            setup(self)
        self.steps, self.dt = steps, dt
        self.healthy = True
        rng = np.random.default_rng(7)
        n = self.model.particle_count
        self.weight_q = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3d)
        self.weight_qd = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3d)
        self.weight_joint_q = wp.array(rng.standard_normal(self.model.joint_coord_count), dtype=wp.float64)
        self.weight_joint_qd = wp.array(rng.standard_normal(self.model.joint_dof_count), dtype=wp.float64)

    def loss(self) -> wp.array:
        final = simulate(self.solver, self.state, self.steps, self.dt, self.control)
        self.healthy = self.healthy and self.solver.health().ok  # each rollout restarts the record
        loss = linear_state_loss(final, self.weight_q, self.weight_qd)
        return joint_state_loss(final, self.weight_joint_q, self.weight_joint_qd, loss)

    def array(self, path: str) -> wp.array:
        """Resolve "model.x", "state.x" or "control.x"."""
        owner, name = path.split(".")
        return getattr(getattr(self, owner), name)


def _chain_scene() -> AuditScene:
    """A fixed anchor and three particles linked by damped springs, with drag and pushes; the
    springs are actuated (rest lengths scaled by 1 + activation)."""
    b = ModelBuilder()
    anchor = b.add_particle((0.0, 0.0, 1.0), mass=0.0)
    ids = [anchor]
    for k in range(3):
        ids.append(b.add_particle((0.25 * (k + 1), 0.05 * k, 1.0 - 0.1 * k), (0.1 * k, 0.3, -0.2), mass=0.2 + 0.1 * k, drag=0.05))
    b.add_springs([(ids[k], ids[k + 1]) for k in range(3)], ke=[200.0, 150.0, 100.0], kd=[0.5, 0.3, 0.2],
                  rest_lengths=[0.22, 0.24, 0.26])

    def push(scene):
        scene.control.particle_f_ext.assign(np.array([[0.0, 0.0, 0.0], [0.3, 0.1, 0.0], [0.0, -0.2, 0.4], [0.1, 0.0, 0.2]]))
        scene.control.spring_activation.assign(np.array([0.05, -0.1, 0.08]))

    return AuditScene(b, 40, 2e-3, push)


def _cloth_scene() -> AuditScene:
    """A 3x2-cell cloth pinned along one edge, released with a small initial fold."""
    b = ModelBuilder()
    b.add_cloth_grid(pos=(0.0, 0.0, 1.0), dim_x=3, dim_y=2, cell_x=0.1, cell_y=0.1, fix_left=True, density=1.0,
                     tri_mu=50.0, tri_lambda=80.0, tri_kd=0.05, bend_ke=0.02, bend_kd=0.002)

    def fold(scene):
        q = scene.state.particle_q.numpy()
        q[:, 2] += 0.005 * np.sin(7.0 * q[:, 0] + 3.0 * q[:, 1])
        scene.state.particle_q.assign(q)

    return AuditScene(b, 40, 1e-3, fold)


def _soft_scene(fiber, strain_smoothing: bool = False, order: int = 1) -> AuditScene:
    """A 2x1x1-cell Neo-Hookean cantilever, fixed at x = 0, sagging while actuated (of
    strain-smoothed tets with ``strain_smoothing``, of quadratic tets with ``order`` 2)."""
    b = ModelBuilder()
    left_face = np.flatnonzero(grid_points((3, 2, 2), (1.0, 1.0, 1.0))[:, 0] == 0.0)
    b.add_soft_grid(pos=(0.0, 0.0, 1.0), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=300.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=2.0, fiber=fiber, fixed=left_face,
                    strain_smoothing=strain_smoothing, order=order)

    def actuate(scene):
        k = scene.model.tet_count
        scene.control.tet_activation.assign(0.1 * np.sin(np.arange(k)))

    return AuditScene(b, 40, 1e-3, actuate)


def _contact_scene(kind: str) -> AuditScene:
    """Particles resting at their contact equilibrium and sliding, so contacts stay closed."""
    b = ModelBuilder()
    m, r, ke = 0.1, 0.05, 1.0e3
    pen = m * 9.81 / ke
    if kind == "ground":
        b.add_ground_plane(ke=ke, kd=1.0, mu=0.4)
        b.add_particle((0.0, 0.0, r - pen), (1.0, 0.3, -0.02), mass=m, radius=r)
        b.add_particle((1.0, 0.0, r - 0.5 * pen), (-0.5, 0.8, 0.01), mass=m, radius=r)
    elif kind == "shapes":
        b.add_shape_sphere(pos=(0.0, 0.0, 0.0), radius=0.3, ke=ke, kd=1.0, mu=0.4)
        b.add_shape_box(pos=(2.0, 0.0, 0.0), hx=0.3, hy=0.3, hz=0.2, ke=ke, kd=1.0, mu=0.3)
        b.add_shape_capsule(pos=(4.0, 0.0, 0.0), rot=(np.sqrt(0.5), 0.0, 0.0, np.sqrt(0.5)), radius=0.2,
                            half_height=0.5, ke=ke, kd=1.0, mu=0.5)
        b.add_particle((0.0, 0.0, 0.3 + r - pen), (0.4, 0.2, -0.02), mass=m, radius=r)
        b.add_particle((2.0, 0.0, 0.2 + r - pen), (0.8, -0.3, 0.02), mass=m, radius=r)
        b.add_particle((4.0, 0.0, 0.2 + r - pen), (0.0, 0.7, -0.01), mass=m, radius=r)
    else:  # particle pairs
        b.set_particle_contact(True, ke=ke, kd=1.0, mu=0.4)
        b.add_particle((0.0, 0.0, 0.0), mass=0.0, radius=r)
        b.add_particle((0.0, 0.0, 2.0 * r - pen), (0.3, 0.1, -0.02), mass=m, radius=r)
        b.add_particle((1.0, 0.0, 0.0), (0.0, 0.0, 0.0), mass=0.0, radius=r)
        b.add_particle((1.0, 0.0, 2.0 * r - 0.5 * pen), (-0.2, 0.4, 0.01), mass=m, radius=r)
    return AuditScene(b, 50, 1e-3)


def _onset_damping_scene() -> AuditScene:
    """The ground-contact particles of ``_contact_scene`` with damping that ramps in over
    2 mm, deeper than their resting penetration (1 mm): the damping depends on the depth."""
    scene = _contact_scene("ground")
    builder = ModelBuilder()
    builder.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.4)
    q, qd = scene.state.particle_q.numpy(), scene.state.particle_qd.numpy()
    builder.add_particles(q, qd, masses=0.1, radii=0.05)
    builder.contact_damping_depth = 2.0e-3
    return AuditScene(builder, 50, 1e-3)


def _impact_scene() -> AuditScene:
    """Particles that strike the ground, a static box and a sphere, and one another, at
    their time of impact (restitution 0.6, friction), each impact inside a step."""
    b = ModelBuilder()
    b.add_ground_plane(mu=0.3)
    b.add_shape_box(pos=(1.0, 0.0, 0.1), hx=0.2, hy=0.2, hz=0.1, mu=0.4)
    b.add_shape_sphere(pos=(2.0, 0.0, 0.0), radius=0.2, mu=0.2)
    b.set_particle_contact(True, mu=0.25)
    b.set_particle_impacts(True, restitution=0.6)
    r = 0.05
    b.add_particle((0.0, 0.0, 0.1123), (2.0, 0.5, -1.3), mass=0.1, radius=r)
    b.add_particle((1.05, 0.02, 0.2837), (1.8, -0.6, -1.1), mass=0.1, radius=r)
    b.add_particle((2.03, 0.01, 0.3311), (1.5, 0.4, -1.2), mass=0.1, radius=r)
    b.add_particle((3.0, 0.0, 0.6), (0.6, 0.8, 0.0), mass=0.2, radius=r)
    b.add_particle((3.1712, 0.01, 0.6), (-0.5, 0.0, 0.03), mass=0.1, radius=r)
    return AuditScene(b, 60, 2e-3)


def _arm_scene(explicit_drive_damping: bool = False, explicit_damping: bool = False) -> AuditScene:
    """A four-link chain hanging from the world: revolute (damped, armature, a joint spring),
    revolute with a PD drive and dry friction, prismatic with a PD drive and a spring, ball; pushed by joint
    torques and a body wrench. ``explicit_drive_damping``: the drives' damping acts
    explicitly (MuJoCo's Euler integrator); ``explicit_damping``: the joints' damping does
    (MuJoCo's Euler without eulerdamp)."""
    b = ModelBuilder()
    l1 = b.add_body()
    b.add_shape_capsule(l1, pos=(0.0, 0.0, -0.25), radius=0.05, half_height=0.2)
    b.add_joint_revolute(-1, l1, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.5), q=0.4, qd=0.5, damping=0.2,
                         armature=0.01, stiffness=2.0, spring_ref=0.1)
    l2 = b.add_body(mass=0.5, com=(0.02, 0.0, -0.15), inertia=(0.004, 0.005, 0.002))
    b.add_joint_revolute(l1, l2, axis=(0.0, 0.6, 0.8), parent_pos=(0.0, 0.0, -0.5), q=-0.3, qd=0.2,
                         target_ke=20.0, target_kd=1.0, friction=0.05)
    l3 = b.add_body()
    b.add_shape_box(l3, pos=(0.0, 0.0, -0.1), hx=0.05, hy=0.04, hz=0.1, density=800.0)
    b.add_joint_prismatic(l2, l3, axis=(0.0, 0.0, 1.0), parent_pos=(0.0, 0.02, -0.3), q=0.05, qd=0.1,
                          target_ke=50.0, target_kd=2.0, stiffness=20.0, spring_ref=0.03)
    l4 = b.add_body()
    b.add_shape_sphere(l4, pos=(0.05, 0.0, -0.1), radius=0.06)
    b.add_joint_ball(l3, l4, parent_pos=(0.0, 0.0, -0.2), q=(0.1, -0.05, 0.2, 0.97), qd=(0.3, -0.2, 0.4),
                     damping=0.05)
    for joint in (1, 2) if explicit_drive_damping else ():
        b.set_drive_damping_explicit(joint)
    for joint in (0, 3) if explicit_damping else ():
        b.set_joint_damping_explicit(joint)

    def setup(scene):
        rng = np.random.default_rng(3)
        scene.control.joint_f.assign(rng.standard_normal(scene.model.joint_dof_count) * 0.5)
        scene.control.joint_target_q.assign(rng.standard_normal(scene.model.joint_dof_count) * 0.2)
        scene.control.joint_target_qd.assign(rng.standard_normal(scene.model.joint_dof_count) * 0.2)
        scene.control.body_f_ext.assign(rng.standard_normal((scene.model.body_count, 6)) * 0.3)

    return AuditScene(b, 40, 2e-3, setup)


def _rigid_contact_scene() -> AuditScene:
    """A box sliding on the ground (four corners in contact) carrying a sphere resting on it:
    plane-box and box-sphere contacts stay closed, the box keeps sliding."""
    b = ModelBuilder()
    ke, g = 1.0e4, 9.81
    b.add_ground_plane(ke=ke, kd=20.0, mu=0.5)
    box = b.add_body()
    b.add_shape_box(box, hx=0.2, hy=0.15, hz=0.1, ke=ke, kd=20.0, mu=0.5, density=500.0)
    ball = b.add_body()
    b.add_shape_sphere(ball, radius=0.05, ke=ke, kd=20.0, mu=0.5, density=1000.0)
    m_box, m_ball = b.bodies.array("body_mass")
    ball_pen = m_ball * g / ke
    box_pen = (m_box + m_ball) * g / (4.0 * ke)
    b.add_joint_free(box, pos=(0.0, 0.0, 0.1 - box_pen), lin_vel=(0.8, 0.3, 0.0), ang_vel=(0.0, 0.0, 0.5))
    b.add_joint_free(ball, pos=(0.02, -0.01, 0.25 - box_pen - ball_pen), lin_vel=(0.8, 0.3, 0.0))
    return AuditScene(b, 50, 1e-3)


def _mesh_contact_scene() -> AuditScene:
    """A triangle-mesh block (its hull corners in contact) sliding and turning on the ground."""
    import trimesh

    block = trimesh.creation.box(extents=(0.3, 0.2, 0.1))
    b = ModelBuilder()
    ke = 1.0e4
    b.add_ground_plane(ke=ke, kd=20.0, mu=0.5)
    body = b.add_body()
    b.add_shape_mesh(body, block.vertices, block.faces, ke=ke, kd=20.0, mu=0.4, density=400.0)
    sink = b.bodies.array("body_mass")[0] * 9.81 / (4.0 * ke)
    b.add_joint_free(body, pos=(0.0, 0.0, 0.05 - sink), lin_vel=(0.7, -0.2, 0.0), ang_vel=(0.0, 0.0, 0.8))
    return AuditScene(b, 50, 1e-3)


def _mesh_on_mesh_scene(soft: bool = False) -> AuditScene:
    """A triangle-mesh block (mu 0.4) on a static mesh slab, its hull corners and edge points
    against the slab's top face plane: sliding and turning for 40 ms from the penalty
    springs' rest depth; or (``soft``) turning in place for 10 ms (before it sticks) from the
    soft-constraint solve's rest depth (3e-6 m, as a block left on the slab settles). A
    block sliding at 0.5 m/s on soft-constraint contact hops off its pyramidal friction
    rows (as MuJoCo's pyramidal cone does; more so with the 16 contact points here), and
    central differences would cross contact changes."""
    import trimesh

    b = ModelBuilder()
    ke = 1.0e4
    slab = trimesh.creation.box(extents=(1.0, 1.0, 0.1))
    b.add_shape_mesh(-1, slab.vertices, slab.faces, pos=(0.0, 0.0, -0.05), ke=ke, kd=20.0, mu=0.5)
    block = trimesh.creation.box(extents=(0.3, 0.2, 0.1))
    body = b.add_body()
    b.add_shape_mesh(body, block.vertices, block.faces, ke=ke, kd=20.0, mu=0.4, density=400.0)
    sink = 3e-6 if soft else b.bodies.array("body_mass")[0] * 9.81 / (16.0 * ke)  # 4 corners, 12 edge points
    b.add_joint_free(body, pos=(0.0, 0.0, 0.05 - sink), lin_vel=(0.0, 0.0, 0.0) if soft else (0.6, -0.2, 0.0),
                     ang_vel=(0.0, 0.0, 0.6))
    return AuditScene(b, 10 if soft else 40, 1e-3)


def _incline_scene() -> AuditScene:
    """A box sliding down a 0.3 rad incline (mu 0.1), settled into its four corner contacts,
    pushed by an external wrench; stepped with soft-constraint contact."""
    b = ModelBuilder()
    angle = 0.3
    tilt = (np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2))
    b.add_shape_plane(rot=tilt, mu=0.1)
    box = b.add_body()
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.1)
    normal = np.array([0.0, -np.sin(angle), np.cos(angle)])
    down = -np.array([0.0, np.cos(angle), np.sin(angle)])
    b.add_joint_free(box, pos=normal * (0.1 - 4.0e-4), rot=tilt, lin_vel=down * 0.4)

    def setup(scene):
        scene.control.body_f_ext.assign([[0.0, 0.0, 0.2, 1.0, 0.5, 0.0]])

    return AuditScene(b, 30, 1e-3, setup)


def _landing_scene() -> AuditScene:
    """A ball 2 mm above the ground falling at 0.2 m/s and sliding: it touches down a third of
    the way into the 30 steps, so the soft contact's onset lies inside the rollout (stepped with
    the impedance curve, which grows from zero at the surface)."""
    b = ModelBuilder()
    b.add_ground_plane(mu=0.3)
    ball = b.add_body()
    b.add_shape_sphere(ball, radius=0.05, density=500.0, mu=0.3)
    b.add_joint_free(ball, pos=(0.0, 0.0, 0.052), lin_vel=(0.3, 0.1, -0.2))
    return AuditScene(b, 30, 1e-3)


def _softness_scene() -> AuditScene:
    """A ball sliding on the ground, pressed 0.4 mm into it, both shapes with soft-contact
    settings of their own (``set_shape_softness``; the depth inside both impedance widths),
    which the pair mixes."""
    b = ModelBuilder()
    ground = b.add_ground_plane(mu=0.2)
    ball = b.add_body()
    sphere = b.add_shape_sphere(ball, radius=0.1, density=500.0, mu=0.2)
    b.add_joint_free(ball, pos=(0.0, 0.0, 0.0996), lin_vel=(0.4, 0.1, -0.02))
    b.set_shape_softness(sphere, solref=(0.015, 0.8), solimp=(0.7, 0.92, 0.004, 0.3, 3.0), solmix=3.0)
    b.set_shape_softness(ground, solref=(0.03, 1.3), solimp=(0.8, 0.97, 0.002, 0.6, 2.0))
    return AuditScene(b, 30, 1e-3)


def _margin_scene() -> AuditScene:
    """A ball sliding 2.6 mm above the ground, inside the pair's 3 mm contact margin (2 mm on the
    ball, 1 mm on the ground), so its rows push 0.4 mm past the margin as in ``_softness_scene``."""
    b = ModelBuilder()
    ground = b.add_ground_plane(mu=0.2)
    ball = b.add_body()
    sphere = b.add_shape_sphere(ball, radius=0.1, density=500.0, mu=0.2)
    b.add_joint_free(ball, pos=(0.0, 0.0, 0.1026), lin_vel=(0.4, 0.1, -0.02))
    b.set_shape_margin(sphere, 0.002)
    b.set_shape_margin(ground, 0.001)
    return AuditScene(b, 30, 1e-3)


def _spinning_ball_scene(spin: float) -> AuditScene:
    """A ball pressed 0.4 mm into the ground, rolling while slipping at 0.05 m/s, spinning at ``spin``
    rad/s about the vertical, condim 6 (torsional and rolling friction 0.02 m on the ball): at
    6 rad/s a torsion edge of its pyramid carries the contact, at 0.5 rad/s a rolling edge."""
    b = ModelBuilder()
    ground = b.add_ground_plane(mu=0.5)
    ball = b.add_body()
    sphere = b.add_shape_sphere(ball, radius=0.1, density=500.0, mu=0.5)
    b.add_joint_free(ball, pos=(0.0, 0.0, 0.0996), lin_vel=(0.45, 0.1, -0.02), ang_vel=(-1.0, 4.0, spin))
    b.set_shape_condim(sphere, 6, torsional=0.02, rolling=0.02)
    b.set_shape_condim(ground, 6, torsional=0.0, rolling=0.0)
    return AuditScene(b, 30, 1e-3)


def _fluid_scene() -> AuditScene:
    """A tilted plate (principal axes off its body axes) carrying a hinged rod, thrown tumbling
    through a medium of density 900 kg/m^3 and viscosity 0.3 Pa s in a wind, no gravity: the
    inertia-box drag on both bodies."""
    b = ModelBuilder(gravity=0.0)
    plate = b.add_body()
    tilt = np.array([0.3, 0.2, 0.1, 0.9])
    b.add_shape_box(plate, hx=0.1, hy=0.05, hz=0.02, rot=tilt / np.linalg.norm(tilt), density=300.0)
    b.add_joint_free(plate, lin_vel=(0.5, -0.2, 1.0), ang_vel=(3.0, -2.0, 4.0))
    rod = b.add_body()
    b.add_shape_capsule(rod, radius=0.02, half_height=0.1, density=500.0)
    b.add_joint_revolute(plate, rod, axis=(0.0, 1.0, 0.0), parent_pos=(0.2, 0.0, 0.0), child_pos=(-0.1, 0.0, 0.0),
                         qd=1.0)
    b.fluid_density, b.fluid_viscosity, b.wind = 900.0, 0.3, (0.4, -0.3, 0.2)
    return AuditScene(b, 30, 2e-3)


def _box_on_box_scene() -> AuditScene:
    """A box sliding at 0.4 m/s on another resting on the ground (mu 0.3), both settled into
    their contacts; stepped with soft-constraint contact (one island of two bodies)."""
    b = ModelBuilder()
    b.add_ground_plane(mu=0.3)
    for k in range(2):
        box = b.add_body()
        b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.3)
        b.add_joint_free(box, pos=(0.0, 0.0, 0.1 + k * (0.2 - 1e-4) - 1e-4), lin_vel=(0.4 * k, 0.0, 0.0))
    return AuditScene(b, 30, 1e-3)


def _edge_on_edge_scene() -> AuditScene:
    """A bar turned 45 degrees about its length, its lower edge sliding at 0.5 m/s across the
    upper edges of two boxes standing on edge (two edge-edge contacts, mu 0.5), settled onto
    them; it keeps sliding."""
    b = ModelBuilder()
    ke, half = 1.0e5, 0.1
    on_edge = (0.0, np.sin(np.pi / 8), 0.0, np.cos(np.pi / 8))
    for x in (-0.1, 0.1):
        b.add_shape_box(-1, pos=(x, 0.0, 0.0), hx=half, hy=half, hz=half, rot=on_edge, ke=ke, kd=200.0, mu=0.5)
    bar = b.add_body()
    b.add_shape_box(bar, hx=0.2, hy=half, hz=half, density=500.0, ke=ke, kd=200.0, mu=0.5)
    sink = b.bodies.array("body_mass")[0] * 9.81 / (2.0 * ke)
    b.add_joint_free(bar, pos=(0.0, 0.003, 2.0 * half * np.sqrt(2.0) - sink),
                     rot=(np.sin(np.pi / 8), 0.0, 0.0, np.cos(np.pi / 8)), lin_vel=(0.5, 0.05, 0.0))
    return AuditScene(b, 40, 1e-3)


def _limit_scene() -> AuditScene:
    """A pendulum held by gravity against its lower joint limit (no penalty gains); stepped
    with the limit as a soft constraint of the contact solve."""
    b = ModelBuilder()
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.3), inertia=(0.001, 0.001, 0.001))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), q=0.199, qd=-0.05, limit_lower=0.2, limit_upper=2.0,
                         limit_ke=0.0, limit_kd=0.0)
    return AuditScene(b, 30, 1e-3)


def _joint_friction_scene() -> AuditScene:
    """A two-link arm swinging under gravity against dry joint friction (0.3 and 0.1 N m), both
    joints sliding throughout; stepped with the friction as rows of the soft-constraint solve."""
    b = ModelBuilder()
    upper = b.add_body(mass=1.0, com=(0.0, 0.0, -0.2), inertia=(0.01, 0.01, 0.002))
    b.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.6, qd=0.8, friction=0.3)
    lower = b.add_body(mass=0.5, com=(0.0, 0.0, -0.15), inertia=(0.004, 0.004, 0.001))
    b.add_joint_revolute(upper, lower, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.4), q=-0.4, qd=-1.0,
                         friction=0.1)
    return AuditScene(b, 30, 1e-3)


def _equality_scene() -> AuditScene:
    """A three-link chain swinging in one plane, its middle joint held to a quadratic of the
    first (a joint equality with an impedance curve) and its tip connected to the world
    (a connect equality closing the loop), both violated at the start; stepped with the
    equalities as rows of the soft-constraint solve."""
    b = ModelBuilder()
    joints, parent = [], -1
    for k in range(3):
        link = b.add_body(mass=1.0 - 0.2 * k, com=(0.15, 0.0, 0.0), inertia=(0.001, 0.008, 0.008))
        joints.append(b.add_joint_revolute(parent, link, axis=(0.0, 1.0, 0.0),
                                           parent_pos=(0.0, 0.0, 1.0) if k == 0 else (0.3, 0.0, 0.0),
                                           q=(0.2, -0.3, 0.4)[k], qd=(0.5, -0.2, 0.3)[k]))
        parent = link
    b.add_joint_coupling((joints[1], joints[0], joints[0]), (1.0, -0.5, -0.3), rest=0.1, time_constant=0.03,
                         damping_ratio=0.8, impedance=(0.8, 0.97, 0.01, 0.4, 3.0), powers=(1, 1, 2))
    b.add_body_connection(parent, (0.3, 0.0, 0.0), -1, (0.75, 0.0, 0.8), time_constant=0.02)
    return AuditScene(b, 30, 1e-3)


def _tendon_drive_scene() -> AuditScene:
    """Two fingers on slides from a fixed palm, a drive on the coupling of their mean position
    (an actuator on a fixed tendon: ke 100 N/m, kd 5 N s/m, implicit) pulling them towards a
    target length, and dry joint friction."""
    b = ModelBuilder(gravity=0.0)
    palm = b.add_body(mass=1.0, inertia=(1e-3, 1e-3, 1e-3))
    b.add_joint_fixed(-1, palm)
    fingers = [b.add_joint_prismatic(palm, b.add_body(mass=0.05, inertia=(1e-5, 1e-5, 1e-5)), axis=(0.0, side, 0.0),
                                     q=0.01, qd=0.2 * side, damping=0.3) for side in (1.0, -1.0)]
    b.set_coupling_drive(b.add_joint_coupling(fingers, (0.5, 0.5)), ke=100.0, kd=5.0, force_limit=50.0)

    def setup(scene):
        scene.control.coupling_target.assign([0.03])

    return AuditScene(b, 30, 1e-3, setup)


def _spatial_tendon_scene() -> AuditScene:
    """A two-link pendulum whose spatial tendon runs from a world point around a cylinder on the
    first link (passing on its side point's side) to the second link: a spring (40 N/m, damping
    0.3 N s/m) and a drive (ke 60 N/m, kd 0.5 N s/m) pulling it towards a target length."""
    b = ModelBuilder()
    upper = b.add_body()
    b.add_shape_capsule(upper, pos=(0.0, 0.0, -0.25), radius=0.04, half_height=0.2)
    b.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.3, qd=0.4)
    lower = b.add_body()
    b.add_shape_capsule(lower, pos=(0.0, 0.0, -0.2), radius=0.03, half_height=0.15)
    b.add_joint_revolute(upper, lower, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.5), q=-0.5, qd=-0.3)
    wrap = TendonWrap(upper, (0.0, 0.0, -0.5), (0.0, 0.70710678, 0.0, 0.70710678), 0.06, "cylinder",
                      side=(upper, (0.0, 0.1, -0.5)))
    tendon = b.add_spatial_tendon([(-1, (0.0, 0.25, 0.8)), wrap, (lower, (0.0, 0.03, -0.3))], stiffness=40.0,
                                  damping=0.3, rest_length=0.7)
    b.set_tendon_drive(tendon, ke=60.0, kd=0.5)

    def setup(scene):
        scene.control.tendon_target.assign([0.75])

    return AuditScene(b, 30, 1e-3, setup)


def _coupled_scene() -> AuditScene:
    """Two particles resting on a free box that slides on the ground (particle-body contact
    in both directions, box-ground contact; all contacts stay closed)."""
    b = ModelBuilder()
    ke, g, m, r = 1.0e4, 9.81, 0.05, 0.02
    b.add_ground_plane(ke=ke, kd=20.0, mu=0.5)
    box = b.add_body()
    b.add_shape_box(box, hx=0.2, hy=0.15, hz=0.05, ke=ke, kd=2.0, mu=0.4, density=400.0)
    m_box = b.bodies.array("body_mass")[0]
    pen = m * g / ke
    sink = (m_box + 2 * m) * g / (4.0 * ke)
    b.add_joint_free(box, pos=(0.0, 0.0, 0.05 - sink), lin_vel=(0.6, 0.2, 0.0))
    b.add_particle((0.05, 0.0, 0.1 + r - pen - sink), (0.7, 0.25, 0.0), mass=m, radius=r)
    b.add_particle((-0.08, 0.05, 0.1 + r - pen - sink), (0.5, 0.1, 0.0), mass=m, radius=r)
    return AuditScene(b, 50, 1e-3)


@dataclass(frozen=True)
class AuditCase:
    """One audited parameter: family, parameter label, scene factory, array path in the scene."""

    family: str
    param: str
    scene: Callable[[], AuditScene]
    array: str
    relative: bool = False  # perturb each entry in proportion to itself (keeps zeros, e.g. fixed masses)
    solver: str = "semi-implicit"  # a key of SOLVERS
    eps: float | None = None  # relative FD step if not EPS: poses in contact need a smaller one


SOLVERS = {
    "semi-implicit": SemiImplicitSolver,
    "implicit Euler": ImplicitEulerSolver,
    "soft contact": lambda model: SemiImplicitSolver(model, soft_contact=SoftContactOptions(tolerance=1e-13)),
    "soft contact, impedance curve": lambda model: SemiImplicitSolver(model, soft_contact=SoftContactOptions(
        tolerance=1e-13, impedance_min=0.0, impedance=0.95, impedance_width=1e-3)),
    "smoothed contact": lambda model: SemiImplicitSolver(model, contact_gradient_width=1.0e-5),
}
"""Solver classes the audit runs, by name."""

SEMI_IMPLICIT_CASES = (
    AuditCase("particle", "initial position", _chain_scene, "state.particle_q"),
    AuditCase("particle", "initial velocity", _chain_scene, "state.particle_qd"),
    AuditCase("particle", "mass", _chain_scene, "model.particle_mass", relative=True),
    AuditCase("particle", "drag", _chain_scene, "model.particle_drag"),
    AuditCase("particle", "gravity", _chain_scene, "model.gravity"),
    AuditCase("particle", "external force (control)", _chain_scene, "control.particle_f_ext"),
    AuditCase("spring", "ke", _chain_scene, "model.spring_ke"),
    AuditCase("spring", "kd", _chain_scene, "model.spring_kd"),
    AuditCase("spring", "rest length", _chain_scene, "model.spring_rest_length"),
    AuditCase("actuated spring", "activation (control)", _chain_scene, "control.spring_activation"),
    AuditCase("cloth membrane", "mu", _cloth_scene, "model.tri_mu"),
    AuditCase("cloth membrane", "lambda", _cloth_scene, "model.tri_lambda"),
    AuditCase("cloth membrane", "kd", _cloth_scene, "model.tri_kd"),
    AuditCase("cloth membrane", "rest shape", _cloth_scene, "model.tri_rest_inv"),
    AuditCase("cloth bending", "ke", _cloth_scene, "model.bend_ke"),
    AuditCase("cloth bending", "kd", _cloth_scene, "model.bend_kd"),
    AuditCase("cloth bending", "rest angle", _cloth_scene, "model.bend_rest_angle"),
    AuditCase("soft body", "mu", lambda: _soft_scene((0.0, 0.0, 0.0)), "model.tet_mu"),
    AuditCase("soft body", "lambda", lambda: _soft_scene((0.0, 0.0, 0.0)), "model.tet_lambda"),
    AuditCase("soft body", "kd", lambda: _soft_scene((0.0, 0.0, 0.0)), "model.tet_kd"),
    AuditCase("soft body", "rest shape", lambda: _soft_scene((0.0, 0.0, 0.0)), "model.tet_rest_inv"),
    AuditCase("soft body", "rest volume", lambda: _soft_scene((0.0, 0.0, 0.0)), "model.tet_rest_volume"),
    AuditCase("tet activation", "volumetric", lambda: _soft_scene((0.0, 0.0, 0.0)), "control.tet_activation"),
    AuditCase("tet activation", "fiber", lambda: _soft_scene((1.0, 0.0, 0.0)), "control.tet_activation"),
    *(AuditCase("smoothed soft body", param, lambda: _soft_scene((1.0, 0.0, 0.0), strain_smoothing=True), path)
      for param, path in (("mu", "model.tet_mu"), ("lambda", "model.tet_lambda"), ("kd", "model.tet_kd"),
                          ("rest shape", "model.tet_rest_inv"), ("rest volume", "model.tet_rest_volume"),
                          ("fiber activation", "control.tet_activation"), ("initial positions", "state.particle_q"))),
    *(AuditCase("quadratic soft body", param, lambda: _soft_scene((1.0, 0.0, 0.0), order=2), path)
      for param, path in (("mu", "model.tet_mu"), ("lambda", "model.tet_lambda"), ("kd", "model.tet_kd"),
                          ("rest shape", "model.tet_rest_inv"), ("rest volume", "model.tet_rest_volume"),
                          ("fiber activation", "control.tet_activation"), ("initial positions", "state.particle_q"))),
    AuditCase("quadratic soft body", "volumetric activation", lambda: _soft_scene((0.0, 0.0, 0.0), order=2),
              "control.tet_activation"),
    AuditCase("ground contact", "ke", lambda: _contact_scene("ground"), "model.shape_ke"),
    AuditCase("ground contact", "kd", lambda: _contact_scene("ground"), "model.shape_kd"),
    AuditCase("ground contact", "mu", lambda: _contact_scene("ground"), "model.shape_mu"),
    AuditCase("ground contact", "initial velocity", lambda: _contact_scene("ground"), "state.particle_qd"),
    AuditCase("shape contact", "ke", lambda: _contact_scene("shapes"), "model.shape_ke"),
    AuditCase("shape contact", "kd", lambda: _contact_scene("shapes"), "model.shape_kd"),
    AuditCase("shape contact", "mu", lambda: _contact_scene("shapes"), "model.shape_mu"),
    AuditCase("shape contact", "shape pose", lambda: _contact_scene("shapes"), "model.shape_transform", eps=1e-6),
    AuditCase("particle contact", "ke", lambda: _contact_scene("pairs"), "model.pair_ke"),
    AuditCase("particle contact", "kd", lambda: _contact_scene("pairs"), "model.pair_kd"),
    AuditCase("particle contact", "mu", lambda: _contact_scene("pairs"), "model.pair_mu"),
    AuditCase("onset-damped contact", "kd", _onset_damping_scene, "model.shape_kd"),
    AuditCase("onset-damped contact", "initial velocity", _onset_damping_scene, "state.particle_qd"),
)

IMPACT_CASES = (
    AuditCase("particle impacts", "initial velocity", _impact_scene, "state.particle_qd"),
    AuditCase("particle impacts", "initial position", _impact_scene, "state.particle_q", eps=1e-6),
    AuditCase("particle impacts", "restitution", _impact_scene, "model.impact_restitution"),
    AuditCase("particle impacts", "shape mu", _impact_scene, "model.shape_mu"),
    AuditCase("particle impacts", "pair mu", _impact_scene, "model.pair_mu"),
    AuditCase("smoothed particle contact", "ke", lambda: _contact_scene("ground"), "model.shape_ke",
              solver="smoothed contact"),
    AuditCase("smoothed particle contact", "initial velocity", lambda: _contact_scene("pairs"), "state.particle_qd",
              solver="smoothed contact"),
)
"""Impacts at their time of impact, and the smoothed contact gradient in closed contact
(width 10 um, a hundredth of the resting penetration, so its bias is below the tolerance)."""

RIGID_CASES = (
    AuditCase("rigid body", "mass", _arm_scene, "model.body_mass", relative=True),
    AuditCase("rigid body", "inertia", _arm_scene, "model.body_inertia"),
    AuditCase("rigid body", "centre of mass", _arm_scene, "model.body_com"),
    AuditCase("rigid body", "gravity", _arm_scene, "model.gravity"),
    *(AuditCase("fluid (inertia-box drag)", param, _fluid_scene, path, relative=relative)
      for param, path, relative in (("medium (density, viscosity, wind)", "model.fluid", True),
                                    ("body mass", "model.body_mass", True), ("inertia", "model.body_inertia", False),
                                    ("initial velocities", "state.joint_qd", False))),
    AuditCase("rigid body", "external wrench (control)", _arm_scene, "control.body_f_ext"),
    AuditCase("joint", "initial coordinates", _arm_scene, "state.joint_q"),
    AuditCase("joint", "initial velocities", _arm_scene, "state.joint_qd"),
    AuditCase("joint", "damping", _arm_scene, "model.joint_damping"),
    AuditCase("joint", "armature", _arm_scene, "model.joint_armature"),
    AuditCase("joint", "dry friction", _arm_scene, "model.joint_friction"),
    AuditCase("joint spring", "stiffness", _arm_scene, "model.joint_stiffness"),
    AuditCase("joint spring", "rest coordinate", _arm_scene, "model.joint_spring_ref"),
    AuditCase("joint", "link offset (parent frame)", _arm_scene, "model.joint_X_p"),
    AuditCase("joint", "child frame", _arm_scene, "model.joint_X_c"),
    AuditCase("joint drive", "ke", _arm_scene, "model.joint_target_ke"),
    AuditCase("joint drive", "kd", _arm_scene, "model.joint_target_kd"),
    *(AuditCase("joint coupling drive (actuator on a fixed tendon)", param, _tendon_drive_scene, path)
      for param, path in (("target length (control)", "control.coupling_target"),
                          ("initial velocities", "state.joint_qd"))),
    *(AuditCase("spatial tendon (wrapping a cylinder)", param, _spatial_tendon_scene, path)
      for param, path in (("stiffness", "model.tendon_stiffness"), ("rest length", "model.tendon_spring_range"),
                          ("damping", "model.tendon_damping"), ("drive ke", "model.tendon_drive_ke"),
                          ("target length (control)", "control.tendon_target"),
                          ("wrap radius", "model.segment_wrap_radius"), ("path points", "model.segment_point"),
                          ("initial coordinates", "state.joint_q"))),
    AuditCase("joint, explicit damping (MuJoCo's eulerdamp disabled)", "damping",
              lambda: _arm_scene(explicit_damping=True), "model.joint_damping"),
    AuditCase("joint drive, explicit damping (MuJoCo's Euler)", "kd", lambda: _arm_scene(True),
              "model.joint_target_kd"),
    AuditCase("joint drive", "position target (control)", _arm_scene, "control.joint_target_q"),
    AuditCase("joint drive", "velocity target (control)", _arm_scene, "control.joint_target_qd"),
    AuditCase("joint drive", "torque (control)", _arm_scene, "control.joint_f"),
    AuditCase("rigid contact", "ke", _rigid_contact_scene, "model.shape_ke"),
    AuditCase("rigid contact", "kd", _rigid_contact_scene, "model.shape_kd"),
    AuditCase("rigid contact", "mu", _rigid_contact_scene, "model.shape_mu"),
    AuditCase("rigid contact", "body mass", _rigid_contact_scene, "model.body_mass", relative=True),
    AuditCase("rigid contact", "initial coordinates", _rigid_contact_scene, "state.joint_q", eps=1e-6),
    AuditCase("rigid contact", "initial velocities", _rigid_contact_scene, "state.joint_qd"),
    AuditCase("rigid edge-edge contact", "ke", _edge_on_edge_scene, "model.shape_ke"),
    AuditCase("rigid edge-edge contact", "mu", _edge_on_edge_scene, "model.shape_mu"),
    AuditCase("rigid edge-edge contact", "initial coordinates", _edge_on_edge_scene, "state.joint_q", eps=1e-6),
    AuditCase("rigid edge-edge contact", "initial velocities", _edge_on_edge_scene, "state.joint_qd"),
    AuditCase("rigid mesh-mesh contact", "ke", _mesh_on_mesh_scene, "model.shape_ke"),
    AuditCase("rigid mesh-mesh contact", "mu", _mesh_on_mesh_scene, "model.shape_mu"),
    AuditCase("rigid mesh-mesh contact", "hull plane offsets", _mesh_on_mesh_scene, "model.shape_plane_offset",
              eps=1e-6),
    AuditCase("rigid mesh-mesh contact", "initial velocities", _mesh_on_mesh_scene, "state.joint_qd"),
    AuditCase("rigid mesh contact", "ke", _mesh_contact_scene, "model.shape_ke"),
    AuditCase("rigid mesh contact", "mu", _mesh_contact_scene, "model.shape_mu"),
    AuditCase("rigid mesh contact", "contact points", _mesh_contact_scene, "model.shape_points", eps=1e-6),
    AuditCase("particle-body contact", "ke", _coupled_scene, "model.shape_ke"),
    AuditCase("particle-body contact", "mu", _coupled_scene, "model.shape_mu"),
    AuditCase("particle-body contact", "body mass", _coupled_scene, "model.body_mass", relative=True),
    AuditCase("particle-body contact", "particle velocity", _coupled_scene, "state.particle_qd"),
)
"""Articulated and contacting rigid bodies (semi-implicit solver only)."""

SOFT_CONTACT_CASES = (
    AuditCase("soft contact", "mu", _incline_scene, "model.shape_mu", solver="soft contact"),
    AuditCase("soft contact", "body mass", _incline_scene, "model.body_mass", relative=True, solver="soft contact"),
    AuditCase("soft contact", "initial coordinates", _incline_scene, "state.joint_q", solver="soft contact",
              eps=1e-6),
    AuditCase("soft contact", "initial velocities", _incline_scene, "state.joint_qd", solver="soft contact"),
    AuditCase("soft contact", "external wrench (control)", _incline_scene, "control.body_f_ext",
              solver="soft contact"),
    AuditCase("soft body-body contact", "mu", _box_on_box_scene, "model.shape_mu", solver="soft contact"),
    AuditCase("soft body-body contact", "body mass", _box_on_box_scene, "model.body_mass", relative=True,
              solver="soft contact"),
    AuditCase("soft body-body contact", "initial coordinates", _box_on_box_scene, "state.joint_q",
              solver="soft contact", eps=1e-6),
    AuditCase("soft body-body contact", "initial velocities", _box_on_box_scene, "state.joint_qd",
              solver="soft contact"),
    AuditCase("soft edge-edge contact", "mu", _edge_on_edge_scene, "model.shape_mu", solver="soft contact"),
    AuditCase("soft edge-edge contact", "initial velocities", _edge_on_edge_scene, "state.joint_qd",
              solver="soft contact"),
    AuditCase("soft mesh-mesh contact", "mu", lambda: _mesh_on_mesh_scene(soft=True), "model.shape_mu",
              solver="soft contact"),
    AuditCase("soft mesh-mesh contact", "initial velocities", lambda: _mesh_on_mesh_scene(soft=True),
              "state.joint_qd", solver="soft contact"),
    AuditCase("soft joint limit", "lower limit", _limit_scene, "model.joint_limit_lower", solver="soft contact"),
    AuditCase("soft joint limit", "initial velocity", _limit_scene, "state.joint_qd", solver="soft contact"),
    *(AuditCase("soft equality rows (joint, connect)", param, _equality_scene, path, relative=relative,
                solver="soft contact")
      for param, path, relative in (("initial coordinates", "state.joint_q", False),
                                    ("initial velocities", "state.joint_qd", False),
                                    ("body mass", "model.body_mass", True))),
    AuditCase("soft joint friction", "dry friction", _joint_friction_scene, "model.joint_friction",
              solver="soft contact"),
    AuditCase("soft joint friction", "initial velocities", _joint_friction_scene, "state.joint_qd",
              solver="soft contact"),
    *(AuditCase("soft contact onset (solimp curve)", param, _landing_scene, path,
                solver="soft contact, impedance curve", eps=eps)
      for param, path, eps in (("initial velocities", "state.joint_qd", None), ("mu", "model.shape_mu", None),
                               ("initial coordinates", "state.joint_q", 1e-6))),
    *(AuditCase("soft contact per-shape softness", param, _softness_scene, path, solver="soft contact", eps=1e-6)
      for param, path in (("solref", "model.shape_solref"), ("solimp", "model.shape_solimp"),
                          ("solmix", "model.shape_solmix"))),
    *(AuditCase(f"soft {edge} friction (condim 6)", param, lambda spin=spin: _spinning_ball_scene(spin), path,
                solver="soft contact")
      for edge, spin in (("torsional", 6.0), ("rolling", 0.5))
      for param, path in (("rotational mu", "model.shape_rotational_mu"), ("initial velocities", "state.joint_qd"))),
    *(AuditCase("soft contact within a margin", param, _margin_scene, path, solver="soft contact", eps=1e-6)
      for param, path in (("margin", "model.shape_margin"), ("initial coordinates", "state.joint_q"))),
    AuditCase("soft mesh contact", "mu", _mesh_contact_scene, "model.shape_mu", solver="soft contact"),
    AuditCase("soft mesh contact", "contact points", _mesh_contact_scene, "model.shape_points", solver="soft contact",
              eps=1e-6),
)
"""Rigid contact as soft constraints, gradients through the implicit (IFT) adjoint."""

IMPLICIT_CASES = tuple(
    replace(case, solver="implicit Euler")
    for case in SEMI_IMPLICIT_CASES
    if case.family != "particle contact"  # not supported by ImplicitEulerSolver
)
"""The same scenes and parameters stepped by the backward-Euler solver (IFT adjoint)."""

AUDIT_CASES = SEMI_IMPLICIT_CASES + IMPACT_CASES + RIGID_CASES + SOFT_CONTACT_CASES + IMPLICIT_CASES


def double_pendulum():
    """A float64 double pendulum (two revolute links, the upper one swinging), with gradients."""
    b = ModelBuilder()
    upper = b.add_body(mass=1.0, com=(0.0, 0.0, -0.2), inertia=(0.01, 0.01, 0.002))
    b.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.5, qd=0.2)
    lower = b.add_body(mass=0.5, com=(0.0, 0.0, -0.15), inertia=(0.004, 0.004, 0.001))
    b.add_joint_revolute(upper, lower, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.4), q=-0.3)
    return b.finalize(requires_grad=True, dtype=wp.float64)


def controlled_pendulum(mode: str = "checkpoint") -> tuple:
    """(model, initial state, controller, rollout): a float64 double pendulum under a PD
    controller (gains kp, kd) in a ``Rollout`` (``mode`` "full" or "checkpoint", segments of 5
    steps) of 16 steps whose loss tracks joint coordinates and velocities at every 4th state."""
    model = double_pendulum()
    dt = 0.01
    controller = JointPDController(model, dt, target_q=[0.2, 0.1], kp=[3.0, 1.0], kd=[0.2, 0.1])
    target_q, weights = wp.array([0.1, -0.2], dtype=wp.float64), wp.array([1.0, 0.5], dtype=wp.float64)
    target_qd, weights_qd = wp.array([0.0, 0.3], dtype=wp.float64), wp.array([0.2, 0.1], dtype=wp.float64)

    def loss_fn(k, state, loss):
        if k % 4 == 0:
            joint_tracking_loss(state, target_q, weights, loss, target_qd=target_qd, weights_qd=weights_qd)

    rollout = Rollout(SemiImplicitSolver(model), 16, dt, loss_fn, control=controller, mode=mode, segment_length=5)
    return model, model.state(requires_grad=True), controller, rollout


def _controlled_pendulum_rollout() -> tuple:
    """``controlled_pendulum`` checkpointed; its gains, body masses and initial joint velocities."""
    model, state, controller, rollout = controlled_pendulum()
    return rollout, state, {"controller.kp": controller.kp, "model.body_mass": model.body_mass,
                            "state.joint_qd": state.joint_qd}


def _impact_rollout() -> tuple:
    """The particle-impact scene in a checkpointed ``Rollout`` (segments of 20 steps) with a
    linear probe of the final state; initial velocities, restitution and friction are checked."""
    scene = _impact_scene()
    solver = SemiImplicitSolver(scene.model)

    def loss_fn(k, state, loss):
        if k == scene.steps:
            linear_state_loss(state, scene.weight_q, scene.weight_qd, loss)

    rollout = Rollout(solver, scene.steps, scene.dt, loss_fn, segment_length=20)
    state = scene.model.state(requires_grad=True)
    wp.copy(state.particle_qd, scene.state.particle_qd)
    arrays = {"state.particle_qd": state.particle_qd, "model.impact_restitution": scene.model.impact_restitution,
              "model.shape_mu": scene.model.shape_mu}
    return rollout, state, arrays


@dataclass(frozen=True)
class RolloutCase:
    """A whole rollout checked by ``check_gradients`` over several arrays at once, along random
    and coordinate directions."""

    family: str
    param: str
    build: Callable[[], tuple]  # () -> (Rollout, its initial State, name -> array)


ROLLOUT_CASES = (
    RolloutCase("rollout: checkpointed, PD controller", "controller gains, body masses, initial joint velocities",
                _controlled_pendulum_rollout),
    RolloutCase("rollout: checkpointed, particle impacts", "initial velocities, restitution, shape friction",
                _impact_rollout),
)
"""Rollout-level rows: several arrays of a whole (checkpointed, controlled) rollout at once."""


def run_rollout_case(case: RolloutCase, tol: float = TOLERANCE) -> dict:
    """Check one whole rollout; returns its row (the worst direction's error)."""
    rollout, state, arrays = case.build()
    checks = check_gradients(lambda: rollout.forward(state), rollout.backward, arrays, tol=tol)
    label, worst = checks.worst
    return {"solver": "semi-implicit", "family": case.family, "param": f"{case.param} (worst: {label})",
            "rel_error": worst.rel_error, "ok": checks.ok, "tape": worst.tape, "fd": worst.fd}


def run_case(case: AuditCase, eps: float | None = None, tol: float = TOLERANCE) -> dict:
    """Check one case; returns its row (family, param, rel_error, ok, tape, fd)."""
    scene = case.scene()
    scene.solver = SOLVERS[case.solver](scene.model)
    param = scene.array(case.array)
    direction = None
    if case.relative:
        direction = np.random.default_rng(0).standard_normal(param.shape) * param.numpy()
    eps = eps if eps is not None else case.eps if case.eps is not None else EPS
    result = check_gradient(scene.loss, param, eps=eps, tol=tol, direction=direction)
    ok = result.ok and scene.healthy
    return {"solver": case.solver, "family": case.family, "param": case.param, "rel_error": result.rel_error,
            "ok": ok, "tape": result.tape, "fd": result.fd}


def run_audit(progress: Callable[[int, int, dict], None] | None = None) -> list:
    """Run every audit case, then every rollout case; ``progress(done, total, row)`` is called after each."""
    rows = []
    total = len(AUDIT_CASES) + len(ROLLOUT_CASES)
    for case in (*AUDIT_CASES, *ROLLOUT_CASES):
        rows.append(run_case(case) if isinstance(case, AuditCase) else run_rollout_case(case))
        if progress is not None:
            progress(len(rows), total, rows[-1])
    return rows
