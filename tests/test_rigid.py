"""Rigid bodies and articulations: comparisons with MuJoCo on the same model and time step,
analytic references (energy, sliding distance, restitution, angular momentum), a box stack
and many worlds. All float64 on the CPU."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.geometry import quat_to_matrix
from wpsim.tasks import scene_library


def run(model, steps, dt, control=None, observe=None, state=None):
    """Step ``steps`` times ping-ponging two states; ``observe(k, state)`` sees every state
    a step started from (so its body poses are current). Returns the final state."""
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    if state is not None:
        a.assign(state)
    for k in range(steps):
        solver.step(a, b, control(k) if callable(control) else control, dt)
        if observe is not None:
            observe(k, a)
        a, b = b, a
    assert solver.health().ok, str(solver.health())
    wpsim.eval_fk(model, a)
    return a


# ---------------------------------------------------------------- MuJoCo comparisons
PENDULUM_XML = """<mujoco><option timestep="{dt}" gravity="0 0 -9.81"/><worldbody>
<body pos="0 0 2"><joint type="hinge" axis="1 0 0"/><inertial pos="0 0 -0.8" mass="1.3" diaginertia="0.02 0.03 0.04"/>
{child}</body></worldbody></mujoco>"""
DOUBLE_CHILD = """<body pos="0 0.1 -1"><joint type="hinge" axis="0.6 0.8 0"/>
<inertial pos="0.1 0 -0.5" mass="0.5" diaginertia="0.01 0.02 0.015"/></body>"""
CARTPOLE_XML = """<mujoco><option timestep="{dt}" gravity="0 0 -9.81"/><worldbody>
<body pos="0 0 1"><joint type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
<body><joint type="hinge" axis="0 1 0"/><inertial pos="0 0 0.5" mass="0.2" diaginertia="0.02 0.02 0.001"/></body>
</body></worldbody></mujoco>"""


def pendulum_builder(q0, double=False, qd0=(0.0, 0.0)):
    b = wpsim.ModelBuilder()
    link = b.add_body(mass=1.3, com=(0.0, 0.0, -0.8), inertia=(0.02, 0.03, 0.04))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 2.0), q=q0[0], qd=qd0[0])
    if double:
        tip = b.add_body(mass=0.5, com=(0.1, 0.0, -0.5), inertia=(0.01, 0.02, 0.015))
        b.add_joint_revolute(link, tip, axis=(0.6, 0.8, 0.0), parent_pos=(0.0, 0.1, -1.0), q=q0[1], qd=qd0[1])
    return b


def cartpole_builder(pole_angle):
    b = wpsim.ModelBuilder()
    cart = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0))
    pole = b.add_body(mass=0.2, com=(0.0, 0.0, 0.5), inertia=(0.02, 0.02, 0.001))
    b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0), q=pole_angle)
    return b


def mujoco_rollout(xml, qpos, qvel, steps, forces=None):
    """Joint positions after each of ``steps`` MuJoCo steps (Euler integrator, no contacts)."""
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    out = []
    for k in range(steps):
        if forces is not None:
            data.qfrc_applied[:] = forces[k]
        mujoco.mj_step(model, data)
        out.append(data.qpos.copy())
    return np.array(out)


def wpsim_rollout(builder, steps, dt, forces=None):
    model = builder.finalize(dtype=wp.float64)
    control = model.control()
    out = []

    def apply(k):
        if forces is not None:
            control.joint_f.assign(forces[k])
        return control

    run(model, steps, dt, apply, lambda k, s: out.append(s.joint_q.numpy().copy()))
    # observe sees the state each step starts from: shift by one to align with MuJoCo
    final = out[1:]
    return np.array(final)


def zero_crossing_period(q, dt):
    """Mean period (s) between upward zero crossings, linearly interpolated."""
    up = np.flatnonzero((q[:-1] < 0.0) & (q[1:] >= 0.0))
    times = (up + q[up] / (q[up] - q[up + 1])) * dt
    assert len(times) >= 3
    return float(np.mean(np.diff(times)))


def test_single_pendulum_period_matches_mujoco_and_theory():
    dt, steps, amp = 1e-3, 6000, 0.05
    ours = wpsim_rollout(pendulum_builder((amp, 0.0)), steps + 1, dt)[:, 0]
    theirs = mujoco_rollout(PENDULUM_XML.format(dt=dt, child=""), [amp], [0.0], steps)[:, 0]
    t_ours, t_mj = zero_crossing_period(ours, dt), zero_crossing_period(theirs, dt)
    # physical pendulum, small amplitude: T = 2 pi sqrt(I_pivot / (m g d))
    m, d = 1.3, 0.8
    t_theory = 2 * np.pi * np.sqrt((0.02 + m * d * d) / (m * 9.81 * d)) * (1 + amp**2 / 16)
    assert abs(t_ours - t_mj) / t_mj < 0.005
    assert abs(t_ours - t_theory) / t_theory < 0.005


def test_double_pendulum_matches_mujoco():
    dt, steps = 1e-3, 500
    q0, qd0 = (0.5, -0.4), (0.3, 1.0)
    ours = wpsim_rollout(pendulum_builder(q0, double=True, qd0=qd0), steps + 1, dt)
    theirs = mujoco_rollout(PENDULUM_XML.format(dt=dt, child=DOUBLE_CHILD), q0, qd0, steps)
    assert np.abs(theirs[-1] - np.asarray(q0)).max() > 0.3  # the chain really moved
    assert np.abs(ours - theirs).max() < 1e-3


def test_cartpole_under_force_sequence_matches_mujoco():
    dt, steps = 2e-3, 500
    forces = np.zeros((steps + 1, 2))
    forces[:, 0] = 3.0 * np.sin(np.arange(steps + 1) * dt * 7.0)
    ours = wpsim_rollout(cartpole_builder(0.2), steps + 1, dt, forces)
    theirs = mujoco_rollout(CARTPOLE_XML.format(dt=dt), [0.0, 0.2], [0.0, 0.0], steps, forces)
    assert np.abs(theirs[-1, 0]) > 0.05
    assert np.abs(ours - theirs).max() < 1e-3


# ---------------------------------------------------------------- analytic references
def body_energy(model, state):
    """Kinetic + potential energy (J) of all bodies from body poses and velocities."""
    m, com, inertia = model.body_mass.numpy(), model.body_com.numpy(), model.body_inertia.numpy()
    g = model.gravity.numpy()[0]
    total = 0.0
    for b, (pose, vel) in enumerate(zip(state.body_q.numpy(), state.body_qd.numpy())):
        R = quat_to_matrix(pose[3:])
        c = R @ com[b]
        w, v_origin = vel[:3], vel[3:]
        v_com = v_origin + np.cross(w, c)
        total += 0.5 * m[b] * v_com @ v_com + 0.5 * w @ (R @ inertia[b] @ R.T) @ w - m[b] * g @ (pose[:3] + c)
    return total


def test_pendulum_energy_drift_below_half_percent_over_10s():
    model = pendulum_builder((1.0, 0.0)).finalize(dtype=wp.float64)
    energies = []
    run(model, 5000, 2e-3, observe=lambda k, s: energies.append(body_energy(model, s)))
    e = np.array(energies)
    swing = 1.3 * 9.81 * 0.8 * (1 - np.cos(1.0))  # kinetic energy at the bottom
    assert np.abs(e - e[0]).max() / swing < 0.005


def free_box(b, half, pos, lin_vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), **contact):
    body = b.add_body()
    b.add_shape_box(body, hx=half, hy=half, hz=half, density=500.0, **contact)
    b.add_joint_free(body, pos=pos, lin_vel=lin_vel, ang_vel=ang_vel)
    return body


def test_sliding_box_stops_at_v2_over_2_mu_g():
    mu, v0, g = 0.4, 2.0, 9.81
    b = wpsim.ModelBuilder()
    b.friction_smoothing = 1e-3
    contact = dict(ke=2.0e5, kd=500.0, mu=mu)
    b.add_ground_plane(**contact)
    half = 0.1
    mass = 500.0 * 8 * half**3
    free_box(b, half, (0.0, 0.0, half - mass * g / (4 * contact["ke"])), lin_vel=(v0, 0.0, 0.0), **contact)
    model = b.finalize(dtype=wp.float64)
    final = run(model, 700, 1e-3)
    distance = final.joint_q.numpy()[0]
    expected = v0**2 / (2 * mu * g)
    assert abs(final.joint_qd.numpy()[0]) < 0.01
    assert abs(distance - expected) / expected < 0.02


def test_ball_bounces_to_restitution_height():
    r, h0, ke, kd = 0.1, 1.0, 1.0e4, 20.0
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=ke, kd=kd, mu=0.0)
    ball = b.add_body()
    b.add_shape_sphere(ball, radius=r, ke=ke, kd=kd, mu=0.0, density=500.0)
    b.add_joint_free(ball, pos=(0.0, 0.0, r + h0))
    model = b.finalize(dtype=wp.float64)
    m = model.body_mass.numpy()[0]
    heights = []
    run(model, 1600, 5e-4, observe=lambda k, s: heights.append(s.joint_q.numpy()[2] - r))
    heights = np.array(heights)
    touch = np.flatnonzero(heights < 0.0)[0]
    apex = heights[touch:].max()
    # linear spring-damper: e = exp(-zeta pi / sqrt(1 - zeta^2)), zeta = kd / (2 sqrt(ke m))
    zeta = kd / (2 * np.sqrt(ke * m))
    e = np.exp(-zeta * np.pi / np.sqrt(1 - zeta**2))
    assert 0.3 < e < 0.95
    assert abs(apex - e * e * h0) / (e * e * h0) < 0.05


def test_stack_of_five_boxes_stands_for_5s():
    b = wpsim.ModelBuilder()
    contact = dict(ke=1.0e5, kd=100.0, mu=0.6)
    b.add_ground_plane(**contact)
    half = 0.1
    for k in range(5):
        free_box(b, half, (0.0, 0.0, half + 2 * half * k), **contact)
    model = b.finalize(dtype=wp.float64)
    start = wpsim.eval_fk(model, model.state()).body_q.numpy()
    final = run(model, 5000, 1e-3)
    poses = final.body_q.numpy()
    assert np.abs(poses[:, :2] - start[:, :2]).max() < 0.01  # no sideways drift
    assert np.abs(poses[:, 2] - start[:, 2]).max() < 0.01  # sinks less than 1 cm in total
    tilt = [np.degrees(np.arccos(np.clip(quat_to_matrix(p[3:])[2, 2], -1, 1))) for p in poses]
    assert max(tilt) < 1.0


def test_spinning_free_body_conserves_angular_momentum():
    b = wpsim.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=2.0, inertia=(0.1, 0.2, 0.3))
    b.add_joint_free(body, pos=(0.0, 0.0, 1.0), rot=(0.1, 0.3, -0.2, 0.93), ang_vel=(3.0, 0.2, 2.0))
    model = b.finalize(dtype=wp.float64)
    inertia = np.diag([0.1, 0.2, 0.3])
    momenta = []

    def observe(k, state):
        R = quat_to_matrix(state.body_q.numpy()[0, 3:])
        w = state.body_qd.numpy()[0, :3]
        momenta.append(R @ inertia @ R.T @ w)

    run(model, 2000, 1e-3, observe=observe)
    L = np.array(momenta)
    assert np.linalg.norm(L[0]) > 0.5
    assert (np.linalg.norm(L - L[0], axis=1) / np.linalg.norm(L[0])).max() < 0.005


# ---------------------------------------------------------------- worlds and layout
def test_replicated_worlds_step_like_one_world():
    single = pendulum_builder((0.5, -0.4), double=True, qd0=(0.3, 1.0))
    many = wpsim.ModelBuilder()
    many.replicate(single, 4, spacing=(2.0, 0.0, 0.0))
    one = run(single.finalize(dtype=wp.float64), 200, 1e-3)
    model = many.finalize(dtype=wp.float64)
    assert model.num_worlds == 4 and model.articulation_count == 4
    final = run(model, 200, 1e-3)
    q = final.joint_q.numpy().reshape(4, 2)
    # equal up to round-off: spatial quantities are taken about the world origin, so the
    # offset of each world enters the arithmetic
    assert np.abs(q - one.joint_q.numpy()).max() < 1e-9
    x = final.body_q.numpy().reshape(4, 2, 7)
    assert np.allclose(x[:, :, 0] - x[0, :, 0], np.arange(4)[:, None] * 2.0, atol=1e-12)


def test_coordinates_are_laid_out_depth_first_per_articulation():
    b = wpsim.ModelBuilder()
    a1 = b.add_body(mass=1.0, inertia=(1, 1, 1))
    c1 = b.add_body(mass=1.0, inertia=(1, 1, 1))
    a2 = b.add_body(mass=1.0, inertia=(1, 1, 1))
    j_c1 = b.add_joint_revolute(a1, c1, q=0.7)  # added before its parent's joint
    j_a2 = b.add_joint_prismatic(-1, a2, q=0.3)
    j_a1 = b.add_joint_free(a1, pos=(1.0, 2.0, 3.0))
    model = b.finalize(dtype=wp.float64)
    q_start = model.joint_q_start.numpy()
    q = model.joint_q.numpy()
    assert q[q_start[j_c1]] == 0.7 and q[q_start[j_a2]] == 0.3
    assert np.allclose(q[q_start[j_a1]:q_start[j_a1] + 3], (1.0, 2.0, 3.0))
    assert model.articulation_count == 2


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda b: b.add_body(mass=-1.0), "negative mass"),
        (lambda b: b.add_body(mass=1.0, inertia=[[1, 0, 0], [0, -1, 0], [0, 0, 1]]), "not positive definite"),
        (lambda b: b.add_body(mass=1.0, inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "not symmetric"),
        (lambda b: b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.3)),
         r"body 2: principal moments \[0.1, 0.1, 0.3\] kg m\^2 break the triangle inequality"),
        (lambda b: b.add_joint_revolute(-1, 0, axis=(0.0, 0.0, 0.0)), "axis must be a non-zero"),
        (lambda b: b.add_joint_revolute(7, 0), "unknown parent body 7"),
        (lambda b: b.add_joint_revolute(-1, 0, limit_lower=1.0, limit_upper=-1.0), "lower"),
        (lambda b: (b.add_joint_revolute(0, 1), b.add_joint_revolute(1, 0)), "cycle"),
        (lambda b: (b.add_joint_revolute(-1, 0), b.add_joint_fixed(-1, 0)), "already has a joint"),
        (lambda b: b.add_shape_plane_on_body(), "plane must be static"),
    ],
)
def test_bad_rigid_input_names_the_element(make, message):
    b = wpsim.ModelBuilder()
    b.add_body(mass=1.0, inertia=(1.0, 1.0, 1.0))
    b.add_body(mass=1.0, inertia=(1.0, 1.0, 1.0))
    b.add_shape_plane_on_body = lambda: b._add_shape(0, 0, (0, 0, 0), (0, 0, 0, 1), (0, 0, 0), 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=message):
        make(b)
    # nothing half-added: the builder still finalizes once every body has a joint
    if b.joints.count == 0:
        assert b.bodies.count == 2


def test_body_without_joint_or_mass_is_rejected_at_finalize():
    b = wpsim.ModelBuilder()
    b.add_body(mass=1.0, inertia=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="body 0 has no joint"):
        b.finalize()
    b = wpsim.ModelBuilder()
    body = b.add_body()
    b.add_joint_free(body)
    with pytest.raises(ValueError, match="body 0: mass 0 kg"):
        b.finalize()


def test_shape_density_gives_analytic_mass_properties():
    b = wpsim.ModelBuilder()
    body = b.add_body()
    b.add_shape_box(body, pos=(0.3, 0.0, 0.0), hx=0.1, hy=0.2, hz=0.3, density=1000.0)
    b.add_shape_sphere(body, pos=(-0.2, 0.0, 0.0), radius=0.1, density=2000.0)
    b.add_joint_free(body)
    model = b.finalize(dtype=wp.float64)
    m_box, m_sphere = 1000.0 * 0.048, 2000.0 * 4 / 3 * np.pi * 1e-3
    com_x = (m_box * 0.3 - m_sphere * 0.2) / (m_box + m_sphere)
    assert np.isclose(model.body_mass.numpy()[0], m_box + m_sphere)
    assert np.allclose(model.body_com.numpy()[0], (com_x, 0.0, 0.0))
    I_yy = (m_box / 3 * (0.01 + 0.09) + m_box * (0.3 - com_x) ** 2
            + 0.4 * m_sphere * 0.01 + m_sphere * (0.2 + com_x) ** 2)
    assert np.isclose(model.body_inertia.numpy()[0][1, 1], I_yy)


# ---------------------------------------------------------------- particles against bodies
def test_particle_body_collision_conserves_momentum():
    """A particle glancing off a free sphere (no gravity, no friction): contact forces act
    equal and opposite, so linear momentum is conserved to round-off and angular momentum
    to the accuracy of the step."""
    b = wpsim.ModelBuilder(gravity=0.0)
    body = b.add_body()
    b.add_shape_sphere(body, radius=0.2, ke=5.0e3, kd=2.0, mu=0.0, density=100.0)
    b.add_joint_free(body)
    b.add_particle((-0.5, 0.1, 0.0), (1.0, 0.0, 0.0), mass=0.5, radius=0.05)
    model = b.finalize(dtype=wp.float64)
    m_b, inertia = model.body_mass.numpy()[0], model.body_inertia.numpy()[0]

    def momenta(state):
        x, v = state.particle_q.numpy()[0], state.particle_qd.numpy()[0]
        pose, twist = state.body_q.numpy()[0], state.body_qd.numpy()[0]
        R = quat_to_matrix(pose[3:])
        w = twist[:3]
        linear = 0.5 * v + m_b * twist[3:]
        angular = np.cross(x, 0.5 * v) + np.cross(pose[:3], m_b * twist[3:]) + R @ inertia @ R.T @ w
        return linear, angular

    start = momenta(wpsim.eval_fk(model, model.state()))
    final = run(model, 800, 1e-3)
    end = momenta(final)
    assert np.linalg.norm(final.body_qd.numpy()[0, 3:]) > 0.1  # the sphere was hit
    assert np.linalg.norm(end[0] - start[0]) < 1e-9
    assert np.linalg.norm(end[1] - start[1]) < 1e-3 * np.linalg.norm(start[1])


def test_soft_block_pushes_a_box_along_the_ground():
    """Two-way coupling: a soft block pushed by external forces slides a free box."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e4, kd=1.0, mu=0.3)
    box = b.add_body()
    b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05, ke=2.0e4, kd=5.0, mu=0.3, density=500.0)
    b.add_joint_free(box, pos=(0.1, 0.0, 0.05 - 0.5 * 9.81 / 8.0e4))
    first = b.add_soft_grid((-0.06, -0.03, 0.01), dim_x=2, dim_y=2, dim_z=2, cell_x=0.03, cell_y=0.03,
                            cell_z=0.03, density=500.0, young_modulus=5.0e4, poisson_ratio=0.3, kd=0.05,
                            radius=0.01)
    model = b.finalize(dtype=wp.float64)
    control = model.control()
    push = np.zeros((model.particle_count, 3))
    push[first:, 0] = 5.0 / (model.particle_count - first)  # 5 N in total
    control.particle_f_ext.assign(push)
    final = run(model, 1500, 2e-4, control)
    moved = final.body_q.numpy()[0, 0] - 0.1
    assert moved > 0.01
    gap = final.body_q.numpy()[0, 0] - 0.05 - final.particle_q.numpy()[:, 0].max()
    assert gap > -0.01  # the block presses on the box, it does not pass through it


# ---------------------------------------------------------------- mesh shapes
ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_mesh_body_has_volume_mass_properties_and_rests_like_a_box():
    from wpsim.io.mesh_files import load_surface

    cube = load_surface(ASSETS / "cube.obj")  # 0.1 m sides
    contact = dict(ke=2.0e4, kd=50.0, mu=0.5)
    models = []
    for use_mesh in (True, False):
        b = wpsim.ModelBuilder()
        b.add_ground_plane(**contact)
        body = b.add_body()
        if use_mesh:
            b.add_shape_mesh(body, cube.vertices, cube.faces, density=500.0, **contact)
        else:
            b.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05, density=500.0, **contact)
        b.add_joint_free(body, pos=(0.0, 0.0, 0.08), rot=(0.05, 0.02, 0.0, 1.0), lin_vel=(0.3, 0.0, 0.0))
        models.append(b.finalize(dtype=wp.float64))
    mesh, box = models
    for name in ("body_mass", "body_com", "body_inertia"):
        assert np.allclose(getattr(mesh, name).numpy(), getattr(box, name).numpy(), rtol=1e-9, atol=1e-12), name
    assert mesh.shape_point_count.numpy()[1] == 8  # the cube's hull: its corners
    mesh_final, box_final = run(mesh, 600, 1e-3), run(box, 600, 1e-3)
    assert abs(mesh_final.body_q.numpy()[0, 2] - 0.05) < 2e-3  # resting on a face
    assert np.allclose(mesh_final.body_q.numpy(), box_final.body_q.numpy(), atol=1e-6)


def test_mesh_shape_input_is_checked():
    from wpsim.io.mesh_files import load_surface

    cube = load_surface(ASSETS / "cube.obj")
    b = wpsim.ModelBuilder()
    body = b.add_body()
    with pytest.raises(ValueError, match="gripper: the surface is open"):
        b.add_shape_mesh(body, cube.vertices, cube.faces[:-1], name="gripper")
    with pytest.raises(ValueError, match="gripper: the enclosed volume"):
        b.add_shape_mesh(body, cube.vertices, cube.faces[:, ::-1], name="gripper")
    assert b.shapes.count == 0 and b.bodies.array("body_mass")[0] == 0.0


def test_float32_stacks_far_from_the_origin_behave_like_the_first():
    """16 box stacks 2 m apart (up to 30 m out) in float32: spatial quantities are taken
    about each articulation's own origin and the face test tolerates rounding of far poses,
    so every world stays standing like world 0."""
    builder = wpsim.ModelBuilder()
    builder.replicate(scene_library.box_stack(), 16, spacing=(2.0, 0.0, 0.0))
    model = builder.finalize()
    final = run(model, 800, 1e-3)
    z = final.body_q.numpy()[:, 2].reshape(16, 5)
    assert np.abs(z - z[0]).max() < 1e-4
    assert np.abs(z[0] - (0.1 + 0.2 * np.arange(5))).max() < 0.005


# ---------------------------------------------------------------- regressions
def test_small_box_rests_on_a_big_box_in_float32():
    b = wpsim.ModelBuilder()
    b.add_shape_box(pos=(0.013, 0.007, 0.5), hx=1.0, hy=1.0, hz=0.5)
    cube = b.add_body()
    b.add_shape_box(cube, hx=0.05, hy=0.05, hz=0.05)
    b.add_joint_free(cube, pos=(0.0, 0.0, 1.05))
    final = run(b.finalize(), 1000, 1e-3)
    assert abs(final.joint_q.numpy()[2] - 1.05) < 0.002


def test_capsule_lying_across_a_small_box_is_held():
    b = wpsim.ModelBuilder()
    b.add_shape_box(pos=(0.0, 0.0, 0.1), hx=0.1, hy=0.1, hz=0.1)
    rod = b.add_body()
    b.add_shape_capsule(rod, rot=(0.0, 0.7071068, 0.0, 0.7071068), radius=0.05, half_height=1.0, ke=1.0e5, kd=50.0)
    b.add_joint_free(rod, pos=(0.0, 0.0, 0.26))
    final = run(b.finalize(dtype=wp.float64), 1000, 1e-3)
    assert 0.24 < final.joint_q.numpy()[2] < 0.26


@pytest.mark.parametrize("kd", [0.0, 1.0e3, 1.0e4])
def test_touching_bodies_fall_together_at_g(kd):
    """Contact damping between two bodies must not resist the motion they share."""
    b = wpsim.ModelBuilder()
    for k in range(2):
        ball = b.add_body()
        b.add_shape_sphere(ball, radius=0.1, kd=kd)
        b.add_joint_free(ball, pos=(0.0, 0.0, 1.0 + 0.2 * k - 5e-4))
    final = run(b.finalize(dtype=wp.float64), 100, 1e-3)
    vz = final.joint_qd.numpy().reshape(2, 6)[:, 2]
    assert vz.mean() / 0.1 == pytest.approx(-9.81, rel=1e-6)


def test_long_chains_and_massless_intermediate_links_build():
    b = wpsim.ModelBuilder()
    parent = -1
    for k in range(1200):
        link = b.add_body(mass=1.0, inertia=(0.01, 0.01, 0.01))
        b.add_joint_revolute(parent, link, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.01))
        parent = link
    assert b.finalize().joint_dof_count == 1200
    b = wpsim.ModelBuilder()  # a universal joint: a massless link between two hinges
    cross = b.add_body()
    b.add_joint_revolute(-1, cross, axis=(1.0, 0.0, 0.0))
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.3), inertia=(0.01, 0.01, 0.01))
    b.add_joint_revolute(cross, link, axis=(0.0, 1.0, 0.0), q=0.3)
    final = run(b.finalize(dtype=wp.float64), 200, 1e-3)
    assert np.isfinite(final.joint_q.numpy()).all() and abs(final.joint_q.numpy()[1]) < 0.3


def test_joint_spring_oscillates_about_its_rest_coordinate():
    """A 2 kg slider on a 50 N/m joint spring relaxed at 0.1 m, started at rest at 0, without
    gravity: x(t) = 0.1 (1 - cos(omega t)), omega = sqrt(k / m); a hinge spring likewise
    about 0.3 rad with I = 0.02 kg m^2. Both within 0.5 % of the amplitude after 2 s at 1 ms."""
    b = wpsim.ModelBuilder(gravity=0.0)
    slider = b.add_body(mass=2.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_prismatic(-1, slider, axis=(1.0, 0.0, 0.0), stiffness=50.0, spring_ref=0.1)
    wheel = b.add_body(mass=1.0, inertia=(0.02, 0.02, 0.02))
    b.add_joint_revolute(-1, wheel, axis=(0.0, 0.0, 1.0), parent_pos=(1.0, 0.0, 0.0), stiffness=0.5, spring_ref=0.3)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    final = wpsim.simulate(solver, model.state(), 2000, 1e-3)
    t = 2.0
    expected = [0.1 * (1.0 - np.cos(np.sqrt(50.0 / 2.0) * t)), 0.3 * (1.0 - np.cos(np.sqrt(0.5 / 0.02) * t))]
    q = final.joint_q.numpy()
    assert abs(q[0] - expected[0]) < 5e-4 and abs(q[1] - expected[1]) < 1.5e-3, (q, expected)


def test_mjcf_joint_springs_are_honoured_and_ball_springs_reported(tmp_path):
    """MJCF stiffness / springref reach hinge joints (springref in the file's degrees); a ball
    joint's stiffness, which wpsim lacks, is listed as not honoured."""
    path = tmp_path / "springs.xml"
    path.write_text("""<mujoco><worldbody>
      <body><joint name="h" type="hinge" stiffness="3" springref="30"/><geom type="sphere" size="0.1"/>
        <body pos="0 0 -0.3"><joint type="ball" stiffness="2"/><geom type="sphere" size="0.1"/></body>
      </body></worldbody></mujoco>""")
    with pytest.warns(UserWarning, match="ball joints have no spring"):
        builder, scene = wpsim.io.mjcf.import_mjcf(path)
    model = builder.finalize()
    np.testing.assert_allclose(model.joint_stiffness.numpy()[0], 3.0)
    np.testing.assert_allclose(model.joint_spring_ref.numpy()[0], np.radians(30.0), rtol=1e-6)
    assert [item.attribute for item in scene.unhonoured] == ["stiffness"]


def test_joint_dry_friction_stops_a_slider_at_v2_m_over_2f():
    """A 2 kg slider launched at 1 m/s on a horizontal slide with 4 N of dry friction
    decelerates at f / m and stops after m v^2 / (2 f) = 0.25 m (within 1 %: the friction is
    smoothed below 1 cm/s); a slider without friction keeps going."""
    b = wpsim.ModelBuilder(gravity=0.0)
    for friction in (4.0, 0.0):
        body = b.add_body(mass=2.0, inertia=(0.1, 0.1, 0.1))
        b.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0), qd=1.0, friction=friction)
    model = b.finalize(dtype=wp.float64)
    final = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 1500, 1e-3)
    q, qd = final.joint_q.numpy(), final.joint_qd.numpy()
    assert abs(q[0] - 0.25) < 2.5e-3 and abs(qd[0]) < 1e-3, (q, qd)
    assert abs(q[1] - 1.5) < 1e-9


def test_dry_friction_comes_from_mjcf_frictionloss_and_urdf_dynamics(tmp_path):
    mjcf = tmp_path / "f.xml"
    mjcf.write_text('<mujoco><worldbody><body><joint type="hinge" frictionloss="0.3"/>'
                    '<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')
    builder, scene = wpsim.io.mjcf.import_mjcf(mjcf)
    assert builder.finalize().joint_friction.numpy().tolist() == pytest.approx([0.3]) and scene.unhonoured == []
    urdf = tmp_path / "f.urdf"
    urdf.write_text('<robot name="r"><link name="base"/><link name="arm"><inertial><mass value="1"/>'
                    '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
                    '<joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>'
                    '<limit lower="-1" upper="1" effort="1" velocity="1"/><dynamics damping="0.1" friction="0.2"/>'
                    '</joint></robot>')
    builder, _ = wpsim.io.urdf.import_urdf(urdf)
    assert builder.finalize().joint_friction.numpy().tolist() == pytest.approx([0.2])


def test_excluded_contacts_hold_in_every_replicated_world():
    """exclude_contact removes a body pair's shape pairs (and a body's pairs with static
    shapes for -1) in the builder and in every world of its replicas; bad bodies are refused."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane()
    bodies = []
    for k in range(3):
        body = b.add_body()
        b.add_shape_sphere(body, radius=0.1)
        b.add_joint_free(body, pos=(0.3 * k, 0.0, 0.5))
        bodies.append(body)
    b.exclude_contact(bodies[0], bodies[1])
    b.exclude_contact(bodies[2], -1)
    with pytest.raises(ValueError, match="does not exist"):
        b.exclude_contact(7, 0)
    model = b.replicated(2).finalize()
    shape_body = model.shape_body.numpy()
    local = [tuple(sorted(int(shape_body[s]) % 3 if shape_body[s] >= 0 else -1 for s in pair))
             for pair in model.contact_pair.numpy()]
    assert sorted(local) == sorted([(-1, 0), (-1, 1), (0, 2), (1, 2)] * 2)  # both worlds, exclusions kept
