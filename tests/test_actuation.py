"""Actuated springs (per-step rest-length activation in Control), state-aware controllers in
``simulate`` and the quadratic joint-state loss."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff import check_gradient, check_gradients, diagnostics
from wpsim.diff.losses import joint_tracking_loss, linear_state_loss
from wpsim.solvers.controllers import JointPDController


def _spring_pair(length):
    """Two 1 kg particles ``length`` m apart on a spring of rest length 0.1 m, no gravity."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particles([(0.0, 0.0, 0.0), (length, 0.0, 0.0)], masses=1.0, radii=0.01)
    b.add_spring(0, 1, ke=100.0, kd=0.0, rest_length=0.1)
    return b.finalize(requires_grad=True, dtype=wp.float64)


def test_activation_scales_the_rest_length():
    """At 0.08 m a spring of rest length 0.1 m with activation -0.2 is at rest (no force, no
    elastic energy); without activation it is compressed and pushes particle 0 away with
    ke * 0.02 = 2 N."""
    model = _spring_pair(0.08)
    solver = wpsim.SemiImplicitSolver(model)
    control = model.control()
    for activation, force, energy in ((-0.2, 0.0, 0.0), (0.0, -2.0, 0.5 * 100.0 * 0.02 ** 2)):
        control.spring_activation.fill_(activation)
        state, out = model.state(), model.state()
        solver.step(state, out, control, 1e-3)
        assert state.particle_f.numpy()[0, 0] == pytest.approx(force, abs=1e-12)
        assert diagnostics.elastic_energy(model, state, control).numpy()[0] == pytest.approx(energy, abs=1e-15)


def _actuated_chain(steps):
    """A hanging chain of three particles on actuated springs, one Control per step with a
    sinusoidal activation; loss: a random linear probe of every 5th state."""
    b = wpsim.ModelBuilder()
    ids = [b.add_particle((0.0, 0.0, 1.0), mass=0.0)]
    for k in range(3):
        ids.append(b.add_particle((0.2 * (k + 1), 0.03 * k, 1.0 - 0.05 * k), mass=0.1, drag=0.02))
    b.add_springs([(ids[k], ids[k + 1]) for k in range(3)], ke=[300.0, 200.0, 150.0], kd=[0.2, 0.2, 0.2],
                  rest_lengths=[0.2, 0.2, 0.2])
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    controls = []
    for k in range(steps):
        control = model.control()
        control.spring_activation.assign(0.1 * np.sin(0.4 * k + np.arange(3)))
        controls.append(control)
    rng = np.random.default_rng(5)
    wq = wp.array(rng.standard_normal((4, 3)), dtype=wp.vec3d)
    wqd = wp.array(rng.standard_normal((4, 3)), dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k % 5 == 0:
            linear_state_loss(state, wq, wqd, loss)

    return model, controls, loss_fn


def test_per_step_activations_are_differentiable_through_a_checkpointed_rollout():
    """The gradients of every step's activation (and of the spring stiffness) from a
    checkpointed rollout agree with central differences along random and coordinate
    directions; the activations change the trajectory."""
    steps = 20
    model, controls, loss_fn = _actuated_chain(steps)
    rollout = wpsim.Rollout(wpsim.SemiImplicitSolver(model), steps, 2e-3, loss_fn, control=controls,
                            mode="checkpoint", segment_length=6)
    state = model.state(requires_grad=True)
    arrays = {f"control[{k}]": c.spring_activation for k, c in enumerate(controls)}
    arrays["model.spring_ke"] = model.spring_ke
    checks = check_gradients(lambda: rollout.forward(state), rollout.backward, arrays)
    assert checks.ok, str(checks)
    grads = np.array([c.spring_activation.grad.numpy() for c in controls])
    assert np.abs(grads[:-1]).min() > 0.0  # every step but the last reaches a later loss term
    still = wpsim.Rollout(wpsim.SemiImplicitSolver(model), steps, 2e-3, loss_fn, mode="full")
    assert still.forward(state) != pytest.approx(rollout.forward(state), rel=1e-6)


def _pendulum():
    b = wpsim.ModelBuilder()
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.3), inertia=(0.01, 0.01, 0.002))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.4, qd=0.1)
    return b.finalize(requires_grad=True, dtype=wp.float64)


def test_simulate_controller_receives_the_state():
    """A PD controller in ``simulate`` reads each step's state: its torques follow the
    trajectory, the rollout equals one stepped by hand, and the gain gradient on the tape
    matches central differences."""
    model = _pendulum()
    steps, dt = 30, 0.01
    controller = JointPDController(model, dt, target_q=[0.0], kp=[5.0], kd=[0.5])
    solver = wpsim.SemiImplicitSolver(model)
    seen = []

    def recording(k, state, control):
        controller(k, state, control)
        seen.append((state.joint_q.numpy()[0], control.joint_f.numpy()[0]))

    states = wpsim.simulate(solver, model.state(), steps, dt, controller=recording, keep_states=True)
    for k, (q, tau) in enumerate(seen):
        assert q == states[k].joint_q.numpy()[0]
        assert tau == pytest.approx(-5.0 * q - 0.5 * states[k].joint_qd.numpy()[0], rel=1e-12)
    a, b, control = model.state(), model.state(), model.control()
    for k in range(steps):
        control.joint_f.zero_()
        controller(k, a, control)
        solver.step(a, b, control, dt)
        a, b = b, a
    assert np.array_equal(a.joint_q.numpy(), states[-1].joint_q.numpy())
    with pytest.raises(ValueError, match="either control or controller"):
        wpsim.simulate(solver, model.state(), 1, dt, model.control(), controller=controller)

    target, weight = wp.array([0.1], dtype=wp.float64), wp.array([1.0], dtype=wp.float64)

    def loss():
        final = wpsim.simulate(solver, model.state(), steps, dt, controller=controller)
        return joint_tracking_loss(final, target, weight, target_qd=target, weights_qd=weight)

    result = check_gradient(loss, controller.kp, eps=[1e-4, 1e-5, 1e-6])
    assert result.ok and result.converged, result.sweep


def test_quadratic_joint_state_loss_value():
    """joint_tracking_loss with velocities: sum w (q - q*)^2 + sum w' (qd - qd*)^2."""
    model = _pendulum()
    state = model.state()
    q, qd = state.joint_q.numpy(), state.joint_qd.numpy()
    arrays = [wp.array([v], dtype=wp.float64) for v in (0.1, 2.0, -0.3, 0.5)]
    loss = joint_tracking_loss(state, arrays[0], arrays[1], target_qd=arrays[2], weights_qd=arrays[3])
    assert loss.numpy()[0] == pytest.approx(2.0 * (q[0] - 0.1) ** 2 + 0.5 * (qd[0] + 0.3) ** 2, rel=1e-14)
    with pytest.raises(ValueError, match="both target_qd and weights_qd"):
        joint_tracking_loss(state, arrays[0], arrays[1], target_qd=arrays[2])
