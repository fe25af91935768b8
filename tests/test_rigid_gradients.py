"""Gradients through rigid-body contact: an eps sweep across a bounce, and a throw
optimised so that the ball hits a target after one bounce."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff import check_gradient
from wpsim.diff.losses import body_position_loss
from wpsim.opt.optimisers import adaptive_gradient_descent

RADIUS, START, DT, STEPS = 0.05, (0.0, 0.0, 0.5), 4e-3, 200
LAUNCH_SPEED_UP = 1.0  # m/s, vertical launch speed of the throw


def ball_scene():
    """A 0.5 kg ball thrown from 0.5 m over a compliant, frictional ground."""
    b = wpsim.ModelBuilder()
    contact = dict(ke=1.0e4, kd=5.0, mu=0.3)
    b.add_ground_plane(**contact)
    ball = b.add_body()
    b.add_shape_sphere(ball, radius=RADIUS, density=0.5 / (4.0 / 3.0 * np.pi * RADIUS**3), **contact)
    b.add_joint_free(ball, pos=START)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    return model, wpsim.SemiImplicitSolver(model), model.state()


def final_position_loss(model, solver, state, target):
    """Squared distance (m^2) of the ball from ``target`` after STEPS steps."""

    def loss():
        final = wpsim.simulate(solver, state, STEPS, DT)
        wpsim.eval_fk(model, final)
        return body_position_loss(final, [0], target)

    return loss


def throw(velocity):
    """Final ball position (m) for an initial linear velocity (m/s)."""
    model, solver, state = ball_scene()
    qd = state.joint_qd.numpy()
    qd[:3] = velocity
    state.joint_qd.assign(qd)
    final = wpsim.simulate(solver, state, STEPS, DT)
    wpsim.eval_fk(model, final)
    return final.body_q.numpy()[0, :3]


@pytest.mark.parametrize("param", ["shape_ke", "shape_mu", "joint_qd"])
def test_gradient_across_a_bounce_matches_converged_differences(param):
    """Through a stiff bounce single-eps differences are unreliable: sweep eps, require the
    differences to settle (neighbours within 1%) and the tape to match them within 1%."""
    model, solver, state = ball_scene()
    qd = state.joint_qd.numpy()
    qd[:3] = (1.4, 0.25, 1.0)
    state.joint_qd.assign(qd)
    target = wp.array([[1.0, 0.2, 0.3]], dtype=wp.vec3d)
    array = state.joint_qd if param == "joint_qd" else getattr(model, param)
    direction = np.zeros(array.shape) if param == "joint_qd" else None
    if direction is not None:
        direction[:3] = (0.3, -0.2, 1.0)
    result = check_gradient(final_position_loss(model, solver, state, target), array,
                            eps=[1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6], tol=1e-2,
                            direction=direction)
    assert result.converged, result.sweep
    assert result.ok, (result.tape, result.sweep)


def test_throw_optimised_to_hit_target_after_one_bounce():
    """Gradient descent on the horizontal launch velocity (the vertical one is fixed): after
    0.8 s, having bounced once, the ball must be within 1 cm of a target 0.5 m from where
    the first guess ends."""
    target_position = throw((1.4, 0.25, LAUNCH_SPEED_UP))
    target = wp.array([target_position], dtype=wp.vec3d)
    model, solver, state = ball_scene()
    loss_fn = final_position_loss(model, solver, state, target)

    def loss_and_grad(horizontal):
        state.joint_qd.assign(np.concatenate([horizontal, [LAUNCH_SPEED_UP, 0.0, 0.0, 0.0]]))
        state.joint_qd.grad.zero_()
        tape = wp.Tape()
        with tape:
            loss = loss_fn()
        tape.backward(loss)
        return float(loss.numpy()[0]), state.joint_qd.grad.numpy()[:2].copy()

    guess = np.array([0.8, -0.2])
    v, history = adaptive_gradient_descent(loss_and_grad, guess, iterations=30, lr=1.0, tolerance=1e-6)
    launch = (v[0], v[1], LAUNCH_SPEED_UP)
    assert np.sqrt(history[0]) > 0.3
    assert np.linalg.norm(throw(launch) - target_position) < 0.01

    # the optimised trajectory touches the ground exactly once
    model, solver, state = ball_scene()
    state.joint_qd.assign(np.concatenate([launch, [0.0, 0.0, 0.0]]))
    heights = np.array([s.joint_q.numpy()[2] for s in wpsim.simulate(solver, state, STEPS, DT, keep_states=True)])
    touching = heights < RADIUS
    assert np.count_nonzero(touching[1:] & ~touching[:-1]) == 1


def _drop(width, height, steps):
    """Final ball height (m), its gradients w.r.t. the contact stiffnesses and the initial
    height, and the final coordinates, for a ball dropped from ``height`` with contact
    gradient width ``width``."""
    model, _, state = ball_scene()
    solver = wpsim.SemiImplicitSolver(model, contact_gradient_width=width)
    q = state.joint_q.numpy()
    q[2] = height
    state.joint_q.assign(q)
    weights = np.zeros(model.joint_coord_count)
    weights[2] = 1.0
    weight_q = wp.array(weights, dtype=wp.float64)
    weight_qd = wp.zeros(model.joint_dof_count, dtype=wp.float64)
    tape = wp.Tape()
    with tape:
        final = wpsim.simulate(solver, state, steps, DT)
        loss = wpsim.diff.losses.joint_state_loss(final, weight_q, weight_qd)
    tape.backward(loss)
    grads = float(model.shape_ke.grad.numpy().sum()), float(state.joint_q.grad.numpy()[2])
    return float(loss.numpy()[0]), grads, final.joint_q.numpy()


def test_soft_contact_gradient_sees_a_contact_before_it_happens():
    """The ball ends 4 mm above the ground. Exact gradients: none w.r.t. contact stiffness,
    d(final height)/d(initial height) = 1 (free fall). Smoothed ones feel the ground: a
    lower start would be pushed back (derivative below 1) and stiffness matters. The forward
    pass is bitwise the same."""
    steps = 20
    fall = 9.81 * DT**2 * steps * (steps + 1) / 2  # symplectic Euler from rest: 3.3 cm
    height = RADIUS + fall + 0.004
    hard_z, hard_grad, hard_q = _drop(0.0, height, steps)
    soft_z, soft_grad, soft_q = _drop(0.003, height, steps)
    assert np.array_equal(hard_q, soft_q) and hard_z == soft_z
    assert hard_z - RADIUS > 0.003
    assert hard_grad[0] == 0.0 and abs(hard_grad[1] - 1.0) < 1e-12
    assert soft_grad[0] != 0.0 and soft_grad[1] < 1.0 - 1e-3


def test_soft_contact_gradient_tends_to_the_exact_one_in_deep_contact():
    """Resting on the ground (penetration ~0.5 mm), a width far below the penetration gives
    the exact gradient."""
    m, ke = 0.5, 1.0e4
    rest = RADIUS - m * 9.81 / ke
    _, exact, _ = _drop(0.0, rest, 30)
    _, smooth, _ = _drop(1e-6, rest, 30)
    for e, s in zip(exact, smooth):
        assert e != 0.0
        assert abs(s - e) <= 1e-3 * abs(e)
