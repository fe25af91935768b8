"""Closed kinematic relations: joint couplings (fixed tendons, joint equalities up to a
quartic polynomial) and body connections (connect equalities, welds), against analytic
results, MuJoCo and central differences."""

import contextlib

import numpy as np
import pytest
import warp as wp
from test_real_robot_files import quiet

import wpsim
from wpsim.core.geometry import quat_to_matrix
from wpsim.io.mjcf import import_mjcf


# ---------------------------------------------------------------- joint couplings
def two_sliders(ke=0.0, kd=0.0, time_constant=0.0, rest=0.0, coefs=(1.0, -1.0)):
    """Two 1 kg sliders along x (no gravity), coupled by a linear coupling."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    joints = []
    for k in range(2):
        body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
        joints.append(builder.add_joint_prismatic(-1 if k == 0 else 0, body, axis=(1.0, 0.0, 0.0)))
    builder.add_joint_coupling(joints, coefs, rest=rest, time_constant=time_constant, ke=ke, kd=kd)
    return builder


def test_a_coupling_spring_oscillates_at_its_analytic_frequency():
    """Slider 1 rides on slider 0; a coupling on q1 alone (a tendon spring, ke = 40 N/m on a
    1 kg relative mode with the base held) rings at sqrt(ke / m_reduced)."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    base = builder.add_body(mass=1.0e6, inertia=np.eye(3))
    builder.add_joint_prismatic(-1, base, axis=(1.0, 0.0, 0.0))
    tip = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    j1 = builder.add_joint_prismatic(base, tip, axis=(1.0, 0.0, 0.0), q=0.1)
    builder.add_joint_coupling([j1], [1.0], rest=0.0, ke=40.0)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    state, spare = model.state(), model.state()
    dt, q = 5e-4, []
    for _ in range(4000):
        solver.step(state, spare, None, dt)
        state, spare = spare, state
        q.append(state.joint_q.numpy()[1])
    q = np.array(q)
    crossings = np.flatnonzero((q[:-1] > 0) & (q[1:] <= 0))
    period = np.diff(crossings).mean() * dt
    assert period == pytest.approx(2 * np.pi / np.sqrt(40.0), rel=5e-3)
    assert np.abs(q).max() == pytest.approx(0.1, rel=1e-2)  # implicit: slightly damped, never growing


def gripper(time_constant=0.01):
    """Two 1 kg fingers sliding along x on a fixed palm, coupled q1 = q0 (coefs 1, -1)."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    palm = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    builder.add_joint_fixed(-1, palm)
    joints = []
    for side in (1.0, -1.0):
        finger = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
        joints.append(builder.add_joint_prismatic(palm, finger, axis=(side, 0.0, 0.0)))
    builder.add_joint_coupling(joints, [1.0, -1.0], time_constant=time_constant)
    return builder, joints


def test_a_joint_equality_makes_two_joints_move_together():
    """A 2 N push on one finger alone moves both (0.5 m in 1 s, as 2 kg), the mismatch below
    1e-3 of the travel, at 10 ms steps as at 1 ms; replicated worlds keep their couplings."""
    for dt in (1e-3, 1e-2):
        builder, joints = gripper()
        model = builder.replicated(2).finalize(dtype=wp.float64)
        solver = wpsim.SemiImplicitSolver(model)
        state, spare, control = model.state(), model.state(), model.control()
        f = np.zeros(model.joint_dof_count)
        f[model.joint_qd_start.numpy()[joints[0]]] = 2.0  # world 0 only
        control.joint_f.assign(f)
        for _ in range(int(round(1.0 / dt))):
            solver.step(state, spare, control, dt)
            state, spare = spare, state
        q = state.joint_q.numpy()[model.joint_q_start.numpy()]
        assert q[1] == pytest.approx(0.5, rel=0.05) and abs(q[1] - q[2]) < 1e-3 * q[1]
        assert np.abs(q[4:]).max() < 1e-12  # world 1 was not pushed


def test_couplings_need_one_articulation_and_hinge_or_slide_joints():
    builder = wpsim.ModelBuilder(gravity=0.0)
    joints = []
    for k in range(2):
        body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
        joints.append(builder.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0)))
    builder.add_joint_coupling(joints, [1.0, -1.0], ke=10.0)
    with pytest.raises(ValueError, match="different articulations"):
        builder.finalize()
    with pytest.raises(ValueError, match="not a hinge or slide"):
        builder.add_joint_coupling([7], [1.0])


def test_coupling_gradient_matches_central_differences():
    """d(final q1)/d(initial qd) through a coupled two-link arm (a spring and a time-constant
    coupling on q0 - 0.5 q1), tape against central differences in float64."""
    from wpsim.diff.losses import joint_state_loss

    builder = wpsim.ModelBuilder(gravity=0.0)
    base = builder.add_body(mass=1.0, com=(0.2, 0.0, 0.0), inertia=np.eye(3) * 0.01)
    j0 = builder.add_joint_revolute(-1, base, axis=(0.0, 0.0, 1.0))
    tip = builder.add_body(mass=0.5, com=(0.2, 0.0, 0.0), inertia=np.eye(3) * 0.005)
    j1 = builder.add_joint_revolute(base, tip, axis=(0.0, 0.0, 1.0), parent_pos=(0.4, 0.0, 0.0))
    builder.add_joint_coupling([j0, j1], [1.0, -0.5], rest=0.1, time_constant=0.05, damping_ratio=0.7, ke=2.0)
    model = builder.finalize(dtype=wp.float64, requires_grad=True)
    solver = wpsim.SemiImplicitSolver(model)
    weight = wp.array([0.0, 1.0], dtype=wp.float64)

    def loss_of(qd0, record=False):
        state = model.state(requires_grad=record)
        state.joint_qd.assign(qd0)
        tape = wp.Tape() if record else None
        with tape if record else contextlib.nullcontext():
            final = wpsim.simulate(solver, state, 200, 2e-3)
            loss = joint_state_loss(final, weight)
        if record:
            tape.backward(loss=loss)
            return float(loss.numpy()[0]), state.joint_qd.grad.numpy().copy()
        return float(loss.numpy()[0])

    qd0 = np.array([1.0, -0.5])
    value, grad = loss_of(qd0, record=True)
    assert abs(value - 0.0) > 1e-3
    eps = 1e-6
    for k in range(2):
        step = np.zeros(2)
        step[k] = eps
        fd = (loss_of(qd0 + step) - loss_of(qd0 - step)) / (2 * eps)
        assert grad[k] == pytest.approx(fd, rel=1e-6, abs=1e-10)


COUPLED_HAND = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="{dt}" integrator="implicitfast"/>
  <worldbody>
    <body name="palm" pos="0 0 1">
      <geom type="box" size="0.05 0.05 0.02"/>
      <body name="f1" pos="0.05 0 0"><joint name="a" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01"/></body>
      <body name="f2" pos="-0.05 0 0"><joint name="b" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01"/></body>
      <body name="f3" pos="0 0.05 0"><joint name="c" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.01"/></body>
      <body name="f4" pos="0 -0.05 0"><joint name="d" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.01"/></body>
    </body>
  </worldbody>
  <equality><joint joint1="a" joint2="b" polycoef="0 -1 0 0 0" solref="0.01 1"/></equality>
  <tendon><fixed name="t" stiffness="0.5" damping="0.01"><joint joint="c" coef="1"/><joint joint="d" coef="1"/></fixed></tendon>
</mujoco>"""


def test_mjcf_joint_equality_and_tendon_spring_follow_mujoco(tmp_path):
    """A mirrored finger pair (equality q_a = -q_b, solref 0.01 1) and a tendon spring on the
    other pair, from a perturbed state (the equality violated by 3e-3 rad), contact off: both
    simulators pull the violation below 1e-5 rad within 0.2 s (MuJoCo faster at first: its
    impedance scales the reference acceleration, wpsim's the spring) and the fingers agree to
    1e-3 rad; the tendon pair agrees to first order in the step (wpsim's spring is implicit,
    MuJoCo's explicit): a quarter of the step, a quarter of the difference."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    found = {}
    for dt in (0.002, 0.0005):
        path = tmp_path / f"hand_{dt}.xml"
        path.write_text(COUPLED_HAND.format(dt=dt))
        (builder, scene), _ = quiet(import_mjcf, path)
        assert len(builder.joint_couplings) == 2 and not scene.unhonoured
        ours, theirs, q0 = rollouts(path, steps=int(round(1.0 / dt)), seed=4)
        assert np.abs(theirs - q0).max() > 0.1
        settled = int(round(0.2 / dt))
        for side in (ours, theirs):
            assert abs(q0[0] + q0[1]) > 1e-3 and np.abs(side[settled:, 0] + side[settled:, 1]).max() < 1e-5
        assert np.abs(ours[:, :2] - theirs[:, :2]).max() < 1e-3
        found[dt] = np.abs(ours[:, 2:] - theirs[:, 2:]).max()
    assert 3.0 < found[0.002] / found[0.0005] < 5.0




POLY_PAIR = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="a" type="hinge" axis="0 1 0" damping="0.02" ref="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
      <body name="hand" pos="0.2 0 0">
        <joint name="b" type="hinge" axis="1 0 0" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.1" size="0.015"/>
      </body>
    </body>
  </worldbody>
  <equality><joint joint1="b" joint2="a" polycoef="0.05 0.5 -1.5 0.8 0" solref="0.004 1"/></equality>
</mujoco>"""


def test_mjcf_polynomial_joint_equality_follows_mujoco(tmp_path):
    """A cubic joint equality b - b0 = 0.05 + 0.5 x - 1.5 x^2 + 0.8 x^3, x = a - a0 (a has a
    ref, so the polynomial is expanded about a shifted origin), from a perturbed state that
    violates it by 0.16 rad, contact off, swinging through 1.6 rad: both simulators hold it
    within 0.02 rad during the swing after 0.2 s (wpsim about 3x looser: its effective inertia
    is the mass-matrix diagonal's) and within 2e-3 rad over the last 0.1 s, and the joints
    agree with MuJoCo's to 0.02 rad over 1 s."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = tmp_path / "poly.xml"
    path.write_text(POLY_PAIR)
    (builder, scene), _ = quiet(import_mjcf, path)
    assert len(builder.joint_couplings) == 1 and not scene.unhonoured
    ours, theirs, q0 = rollouts(path, steps=1000, seed=2)
    assert np.abs(theirs - q0).max() > 1.0

    def violation(q):
        x = q[:, 0] - 0.2  # a - a0: a0 is its ref
        return q[:, 1] - (0.05 + 0.5 * x - 1.5 * x**2 + 0.8 * x**3)

    assert abs(violation(q0[None])[0]) > 0.1
    for side in (ours, theirs):
        assert np.abs(violation(side[200:])).max() < 0.02
        assert np.abs(violation(side[-100:])).max() < 2e-3
    assert np.abs(ours - theirs).max() < 0.02


def test_couplings_check_their_powers():
    builder, joints = wpsim.ModelBuilder(gravity=0.0), []
    for k in range(2):
        body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
        joints.append(builder.add_joint_revolute(-1 if k == 0 else 0, body, axis=(0.0, 0.0, 1.0)))
    with pytest.raises(ValueError, match="powers must be 1 to 4"):
        builder.add_joint_coupling(joints, (1.0, 1.0), powers=(1, 5))
    with pytest.raises(ValueError, match="distinct"):
        builder.add_joint_coupling((joints[1], joints[1]), (1.0, 1.0), powers=(2, 2))
    builder.add_joint_coupling((joints[0], joints[1], joints[1]), (1.0, 0.5, 0.5), powers=(1, 1, 2))


# ---------------------------------------------------------------- body connections
FOUR_BAR = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <body name="crank" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="1"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0.4" size="0.02"/>
        <body name="rocker" pos="0.1 0 0.4">
          <joint name="j3" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 -0.1" size="0.02"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><connect body1="rocker" anchor="0.3 0 -0.1" solref="{tc} 1"/></equality>
</mujoco>"""


@pytest.mark.parametrize("time_constant, angle_tol, gap_tol", [(0.02, 5e-3, 2.5e-3), (0.005, 5e-4, 2e-4)])
def test_mjcf_connect_closes_a_four_bar_that_settles_where_mujocos_does(tmp_path, time_constant, angle_tol, gap_tol):
    """A damped four-bar closed by a connect equality (the rocker's tip pinned to the world)
    falls from its drawn pose and settles under gravity. wpsim's rest pose is within
    ``angle_tol`` rad of MuJoCo's and its pin within ``gap_tol`` m (printed: 2.6e-3 rad and
    1.5 mm at solref 0.02, MuJoCo's pin 0.35 mm; 1.6e-4 rad and 0.09 mm at 0.005, MuJoCo's
    0.03 mm): the hold is about 4x softer than MuJoCo's for the same solref (its effective
    mass is J H^-1 J^T with the mass matrix's diagonal), and it tightens with the time
    constant."""
    mujoco = pytest.importorskip("mujoco")
    from wpsim.solvers import SemiImplicitSolver
    from wpsim.solvers.kinematics import eval_fk

    path = tmp_path / "four_bar.xml"
    path.write_text(FOUR_BAR.format(tc=time_constant))
    theirs = mujoco.MjModel.from_xml_path(str(path))
    theirs.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    data = mujoco.MjData(theirs)
    for _ in range(5000):
        mujoco.mj_step(theirs, data)
    (builder, scene), _ = quiet(import_mjcf, path, ke=0.0, kd=0.0)
    assert len(builder.body_connections) == 1 and not scene.unhonoured
    model = builder.finalize(dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state, spare = model.state(), model.state()
    for _ in range(5000):
        solver.step(state, spare, None, 1e-3)
        state, spare = spare, state
    assert np.abs(state.joint_q.numpy() - data.qpos).max() < angle_tol
    assert np.abs(data.qpos - theirs.qpos0).max() > 0.1  # it moved
    pose = eval_fk(model, state).body_q.numpy()[2]
    tip = pose[:3] + quat_to_matrix(pose[3:]) @ np.array([0.3, 0.0, -0.1])
    assert np.linalg.norm(tip - model.connection_point_b.numpy()[0]) < gap_tol


def assert_velocity_gradient_matches(builder, weights, eps: float):
    """The tape gradient of sum(weights * final joint angles) after 0.3 s w.r.t. the initial
    joint velocities (0.8, -0.3, 0.2) of a three-joint chain agrees with central
    differences of step ``eps`` (rad/s) to 1e-6 (float64)."""
    from wpsim.diff.losses import joint_state_loss

    model = builder.finalize(dtype=wp.float64, requires_grad=True)
    solver = wpsim.SemiImplicitSolver(model)
    weight = wp.array(weights, dtype=wp.float64)

    def loss_of(qd0, record=False):
        state = model.state(requires_grad=record)
        state.joint_qd.assign(qd0)
        tape = wp.Tape() if record else None
        with tape if record else contextlib.nullcontext():
            loss = joint_state_loss(wpsim.simulate(solver, state, 150, 2e-3), weight)
        if record:
            tape.backward(loss=loss)
            return state.joint_qd.grad.numpy().copy()
        return float(loss.numpy()[0])

    qd0 = np.array([0.8, -0.3, 0.2])
    grad = loss_of(qd0, record=True)
    for k in range(3):
        step = np.zeros(3)
        step[k] = eps
        fd = (loss_of(qd0 + step) - loss_of(qd0 - step)) / (2 * eps)
        assert grad[k] == pytest.approx(fd, rel=1e-6, abs=1e-10)


@pytest.mark.parametrize("to_world", [True, False])
def test_connection_gradient_matches_central_differences(to_world):
    """d(final crank angle)/d(initial velocities) through a three-link chain whose tip is
    pinned to the world, or to the first link (a loop inside the articulation), tape against
    central differences in float64."""
    builder = wpsim.ModelBuilder(gravity=-9.81)
    parent = -1
    for k in range(3):
        body = builder.add_body(mass=1.0, com=(0.25, 0.0, 0.0), inertia=np.eye(3) * 0.02)
        builder.add_joint_revolute(parent, body, axis=(0.0, 1.0, 0.0), parent_pos=(0.0 if k == 0 else 0.5, 0.0, 0.0),
                                   q=0.0 if k == 0 else -1.5, damping=0.1)
        parent = body
    if to_world:
        builder.add_body_connection(parent, (0.5, 0.0, 0.0), -1, (0.04, 0.0, -0.43), time_constant=0.02,
                                    impedance=0.9)
    else:
        builder.add_body_connection(parent, (0.5, 0.0, 0.0), 0, (0.1, 0.0, -0.4), time_constant=0.02, impedance=0.9)
    assert_velocity_gradient_matches(builder, (1.0, 0.0, 0.0), 1e-6)


def test_body_connections_are_checked():
    builder = wpsim.ModelBuilder()
    a, b = builder.add_body(mass=1.0, inertia=np.eye(3)), builder.add_body(mass=1.0, inertia=np.eye(3))
    builder.add_joint_revolute(-1, a, axis=(0.0, 0.0, 1.0))
    builder.add_joint_revolute(-1, b, axis=(0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="impedance"):
        builder.add_body_connection(a, (0, 0, 0), b, (0, 0, 0), impedance=1.0)
    builder.add_body_connection(a, (0, 0, 0), b, (0, 0, 0))
    with pytest.raises(ValueError, match="one articulation"):
        builder.finalize()


WELDED_BOX = """<mujoco>
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <body name="box" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.03" density="800"/>
    </body>
  </worldbody>
  <equality><weld body1="box" relpose="{relpose}" anchor="{anchor}"/></equality>
</mujoco>"""


def rotation_angle(R) -> float:
    """Angle (rad) of a rotation matrix."""
    return float(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)))


@pytest.mark.parametrize("anchor, tolerance, turn_tolerance", [((0.05, -0.08, 1.03), 2e-3, 5e-3),
                                                            ((0.2, 0.0, 1.1), 6e-3, 0.04)])
def test_mjcf_weld_pulls_a_free_box_to_its_relative_pose_as_mujoco(tmp_path, anchor, tolerance, turn_tolerance):
    """A free box welded to the world 0.1 m and 0.5 rad away from where it is drawn is pulled
    there under gravity. MuJoCo's convention: relpose's quaternion is the world's orientation
    in the box's frame, its position the box point held at the anchor (world frame). After
    1.5 s the box's pose is within ``tolerance`` (m) and ``turn_tolerance`` (rad) of MuJoCo's,
    which is itself within 15 mm and 80 mrad (its sag under gravity) of the held pose: 2 mm
    and 5 mrad for a weld point at the box centre; 6 mm and 40 mrad for one 0.17 m from it,
    where MuJoCo sags 11 mm and 60 mrad (wpsim's sag has MuJoCo's size, not its direction:
    wpsim's effective masses are per part, gap and turn, from the mass-matrix diagonal,
    MuJoCo solves the six rows together, and its impedance grows with the violation where
    wpsim's is solimp's d0)."""
    mujoco = pytest.importorskip("mujoco")
    from wpsim.solvers.kinematics import eval_fk

    axis = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0)
    R_held, p_held = quat_to_matrix([*(np.sin(0.25) * axis), np.cos(0.25)]), np.array([0.05, -0.08, 1.03])
    anchor = np.array(anchor)
    point = R_held.T @ (anchor - p_held)  # the box point that is at the anchor in the held pose
    relpose = " ".join(f"{v:.12g}" for v in [*point, np.cos(0.25), *(-np.sin(0.25) * axis)])
    path = tmp_path / "weld.xml"
    path.write_text(WELDED_BOX.format(relpose=relpose, anchor=" ".join(map(str, anchor))))
    theirs = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(theirs)
    for _ in range(1500):
        mujoco.mj_step(theirs, data)
    R_mj = data.xmat[1].reshape(3, 3)
    assert np.linalg.norm(data.xpos[1] - p_held) < 0.015 and rotation_angle(R_mj.T @ R_held) < 0.08
    (builder, scene), _ = quiet(import_mjcf, path)
    assert len(builder.body_connections) == 1 and not scene.unhonoured
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    state, spare = model.state(), model.state()
    for _ in range(1500):
        solver.step(state, spare, None, 1e-3)
        state, spare = spare, state
    pose = eval_fk(model, state).body_q.numpy()[0]
    assert np.linalg.norm(pose[:3] - data.xpos[1]) < tolerance
    assert rotation_angle(quat_to_matrix(pose[3:]).T @ R_mj) < turn_tolerance
    assert np.linalg.norm(pose[:3] - np.array([0.0, 0.0, 1.0])) > 0.05  # it moved
    assert rotation_angle(quat_to_matrix(pose[3:])) > 0.4


WELDED_CHAIN = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <body name="l1" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="l2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>
        <body name="l3" pos="0 0 -0.2">
          <joint name="j3" type="hinge" axis="0 0 1" damping="0.05"/>
          <geom type="capsule" fromto="0 0 0 -0.2 0 0" size="0.02"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><weld body1="l3" body2="l1" solref="0.005 1"/></equality>
</mujoco>"""


def test_mjcf_weld_inside_an_articulation_locks_the_loop_as_mujoco(tmp_path):
    """A three-link chain whose last link is welded to its first in the drawn pose (the
    position locks j2, only the rotation locks j3) swings as one rigid body: from a perturbed
    state, j2 and j3 return to within 1e-3 rad of 0 after 0.3 s, and j1 agrees with MuJoCo's
    to 0.02 rad over 1 s."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = tmp_path / "chain.xml"
    path.write_text(WELDED_CHAIN)
    ours, theirs, q0 = rollouts(path, steps=1000, seed=1)
    assert np.abs(q0[1:]).max() > 1e-3 and np.abs(theirs[:, 0] - q0[0]).max() > 0.3
    for side in (ours, theirs):
        assert np.abs(side[300:, 1:]).max() < 1e-3
    assert np.abs(ours[:, 0] - theirs[:, 0]).max() < 0.02


@pytest.mark.parametrize("to_world", [True, False])
def test_weld_gradient_matches_central_differences(to_world):
    """d(final angles)/d(initial velocities) through a three-link chain (hinges about y, x,
    y) whose tip is welded to the world, or to the first link, in a pose away from where it
    starts: tape against central differences in float64."""
    builder = wpsim.ModelBuilder(gravity=-9.81)
    parent = -1
    for k, axis in enumerate([(0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]):
        body = builder.add_body(mass=1.0, com=(0.25, 0.0, 0.0), inertia=np.diag([0.01, 0.02, 0.02]))
        builder.add_joint_revolute(parent, body, axis=axis, parent_pos=(0.0 if k == 0 else 0.5, 0.0, 0.0),
                                   q=0.0 if k == 0 else -0.4, damping=0.1)
        parent = body
    turn = np.array([0.0, np.sin(0.1), 0.0, np.cos(0.1)])
    if to_world:
        builder.add_body_connection(parent, (0.5, 0.0, 0.0), -1, (1.2, 0.1, -0.5), time_constant=0.02,
                                    impedance=0.9, rotation=turn)
    else:
        builder.add_body_connection(parent, (0.5, 0.0, 0.0), 0, (1.1, 0.0, -0.4), time_constant=0.02,
                                    impedance=0.9, rotation=turn)
    assert_velocity_gradient_matches(builder, (1.0, 0.5, 0.25), 1e-4)  # small gradients: a smaller step is noise
