"""Dry joint friction (MuJoCo's frictionloss) as friction-loss rows of the soft-constraint
solve: stick and slip of a slider against the analytic motion, an imported double pendulum
against MuJoCo. Its gradients are rows of the gradient audit ("soft joint friction")."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SoftContactOptions

MASS, FRICTION = 2.0, 1.0  # kg, N


def slide(speed: float, push: float, seconds: float = 1.0, dt: float = 1e-3) -> tuple:
    """(position m, velocity m/s) of a 2 kg slider on a frictional (1 N) prismatic joint after
    ``seconds``, started at ``speed`` and pushed along the joint by ``push`` N."""
    b = wpsim.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=MASS, com=(0.0, 0.0, 0.0), inertia=(0.01, 0.01, 0.01))
    b.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0), qd=speed, friction=FRICTION)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    control = model.control()
    control.joint_f.assign([push])
    state = wpsim.simulate(solver, model.state(), round(seconds / dt), dt, control=control)
    assert solver.health().ok
    return float(state.joint_q.numpy()[0]), float(state.joint_qd.numpy()[0])


def test_slider_slows_at_the_friction_force_and_stops():
    q, qd = slide(speed=0.5, push=0.0, seconds=1.5)  # stops after 0.5 / (F / m) = 1 s
    assert q == pytest.approx(0.5 ** 2 / (2.0 * FRICTION / MASS), rel=2e-3)
    assert abs(qd) < 1e-3


def test_slider_sticks_below_the_friction_force_and_slides_above_it():
    q, qd = slide(speed=0.0, push=0.6)
    assert abs(qd) < 1e-4 and abs(q) < 1e-4  # a soft constraint creeps: 0.6 N / (D b) = 3e-5 m/s
    q, qd = slide(speed=0.0, push=1.6)
    assert qd == pytest.approx((1.6 - FRICTION) / MASS, rel=1e-3)
    assert q == pytest.approx(0.5 * (1.6 - FRICTION) / MASS, rel=2e-3)


PENDULUM = """<mujoco><option timestep="0.001" integrator="Euler"/><worldbody>
<body pos="0 0 1"><joint type="hinge" axis="1 0 0" frictionloss="{f1}" {softness}/>
<geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/>
<body pos="0 0 -0.4"><joint type="hinge" axis="1 0 0" frictionloss="{f2}" {softness}/>
<geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.5"/></body></body></worldbody></mujoco>"""


SOFTNESS = 'solreffriction="0.03 0.9" solimpfriction="0.95 0.99 0.001"'
"""The pendulum's friction rows: their own solref and solimp (dmin 0.95 holds at zero violation)."""


def mujoco_swing(q0, steps: int, friction=(0.4, 0.15)) -> np.ndarray:
    """(steps // 250, 2) joint angles of the MJCF double pendulum every 0.25 s in MuJoCo, its
    friction rows' softness ``SOFTNESS``."""
    mujoco = pytest.importorskip("mujoco")
    mj = mujoco.MjModel.from_xml_string(PENDULUM.format(f1=friction[0], f2=friction[1], softness=SOFTNESS))
    data = mujoco.MjData(mj)
    data.qpos[:] = q0
    angles = []
    for k in range(steps):
        mujoco.mj_step(mj, data)
        if (k + 1) % 250 == 0:
            angles.append(data.qpos.copy())
    return np.array(angles)


def test_imported_double_pendulum_with_frictionloss_swings_as_in_mujoco(tmp_path):
    q0, steps = np.array([1.0, -0.5]), 2000
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM.format(f1=0.4, f2=0.15, softness=SOFTNESS))
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**scene.contact_settings))
    a, b = model.state(), model.state()
    a.joint_q.assign(q0)
    angles = []
    for k in range(steps):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
        if (k + 1) % 250 == 0:
            angles.append(a.joint_q.numpy().copy())
    assert solver.health().ok
    reference = mujoco_swing(q0, steps)
    assert np.abs(np.array(angles) - reference).max() < 1e-10  # measured 5.6e-16 rad
    assert np.abs(mujoco_swing(q0, steps, friction=(0.0, 0.0)) - reference).max() > 0.1  # the friction matters
