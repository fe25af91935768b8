"""The spatial-vector conventions (wpsim.core.spatial): what the simulator does with a free
joint's joint_qd (linear, angular) and what it reports in body_qd (angular, linear)."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.fields import STATE_FIELDS
from wpsim.core.spatial import (
    BODY_ANGULAR,
    BODY_LINEAR,
    FREE_ANGULAR,
    FREE_LINEAR,
    body_velocity,
    free_joint_velocity,
    set_free_joint_velocity,
)

STEPS, DT = 50, 1.0e-3


def _free_body():
    """(model, free joint) of a body without gravity at (1, 0.5, 0.2) m, turned 90 degrees
    about z (so its axes are not the world's)."""
    b = wpsim.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=2.0, inertia=(0.1, 0.1, 0.1))
    rot = (0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4))
    joint = b.add_joint_free(body, pos=(1.0, 0.5, 0.2), rot=rot)
    return b.finalize(dtype=wp.float64), joint


def _run(model, state):
    return wpsim.simulate(wpsim.SemiImplicitSolver(model), state, STEPS, DT)


def test_a_free_joint_velocity_is_linear_then_angular_and_body_qd_angular_then_linear():
    """joint_qd = (v, 0) translates the body by v t without turning it, and its body_qd is
    (0, v); joint_qd = (0, w) turns it about its own origin (w in body axes) without moving
    that origin, and body_qd's angular part is R w in world axes."""
    model, joint = _free_body()
    v = np.array([0.3, -0.2, 0.1])
    state = model.state()
    set_free_joint_velocity(model, state, joint, linear=v)
    assert np.allclose(state.joint_qd.numpy()[FREE_LINEAR], v) and np.allclose(state.joint_qd.numpy()[FREE_ANGULAR], 0)
    start = wpsim.eval_fk(model, model.state()).body_q.numpy()[0]
    end = _run(model, state)
    wpsim.eval_fk(model, end)
    assert np.allclose(end.body_q.numpy()[0, :3], start[:3] + v * STEPS * DT, atol=1e-12)
    assert np.allclose(end.body_q.numpy()[0, 3:], start[3:], atol=1e-12)
    assert np.allclose(end.body_qd.numpy()[0][BODY_ANGULAR], 0.0, atol=1e-12)
    assert np.allclose(end.body_qd.numpy()[0][BODY_LINEAR], v, atol=1e-12)
    assert np.allclose(body_velocity(model, end, 0).linear, v, atol=1e-12)
    assert np.allclose(free_joint_velocity(model, end, joint).linear, v, atol=1e-12)

    state = model.state()
    set_free_joint_velocity(model, state, joint, angular=(0.5, 0.0, 0.0))  # about the body's x = world y
    end = wpsim.eval_fk(model, _run(model, state))
    assert np.allclose(end.body_q.numpy()[0, :3], start[:3], atol=1e-12)
    world_w = np.array([0.0, 0.5, 0.0])
    assert np.allclose(end.body_qd.numpy()[0][BODY_ANGULAR], world_w, atol=1e-9)
    # body_qd's linear part is the velocity of the body frame's origin (it turns in place)
    assert np.allclose(end.body_qd.numpy()[0][BODY_LINEAR], 0.0, atol=1e-9)
    velocity = body_velocity(model, end, 0)
    assert np.allclose(velocity.linear, 0.0, atol=1e-9) and np.allclose(velocity.angular, world_w, atol=1e-9)
    assert np.allclose(free_joint_velocity(model, end, joint).angular, (0.5, 0.0, 0.0), atol=1e-9)


def test_the_field_specs_say_the_order():
    """The Model/State docs name the layout of joint_qd and body_qd."""
    docs = {s.name: s.doc for s in STATE_FIELDS}
    assert "(linear, angular)" in docs["joint_qd"] and "(angular, linear)" in docs["body_qd"]


def test_free_joint_accessors_refuse_other_joints_and_bad_values():
    b = wpsim.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_revolute(-1, body, axis=(1.0, 0.0, 0.0))
    model = b.finalize()
    with pytest.raises(ValueError, match="joint 0 is not a free joint"):
        free_joint_velocity(model, model.state(), 0)
    with pytest.raises(ValueError, match="joint 3 does not exist"):
        free_joint_velocity(model, model.state(), 3)
    free, joint = _free_body()
    with pytest.raises(ValueError, match="3 finite numbers"):
        set_free_joint_velocity(free, free.state(), joint, linear=(1.0, np.nan, 0.0))


def test_the_accessors_load_with_wpsim():
    assert wpsim.core.spatial.free_joint_velocity is free_joint_velocity
