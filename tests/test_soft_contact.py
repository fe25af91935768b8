"""Soft-constraint rigid contact solved by Newton iterations: resting and incline physics,
implicit (IFT) gradients against unrolled ones and central differences, checkpointed
rollouts and many worlds."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff import Rollout, check_gradient
from wpsim.losses import joint_state_loss
from wpsim.solvers import SoftContactOptions

G = 9.81


def incline_box(angle: float = 0.0, mu: float = 0.5, speed: float = 0.0, sink: float = 0.0, worlds: int = 1):
    """A 0.2 m, 4 kg box on a plane tilted by ``angle`` about x, ``sink`` m into it, moving
    down the slope at ``speed`` (m/s)."""
    single = wpsim.ModelBuilder()
    half_turn = (np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2))
    single.add_shape_plane(rot=half_turn, mu=mu)
    box = single.add_body()
    single.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=mu)
    normal = np.array([0.0, -np.sin(angle), np.cos(angle)])
    down = -np.array([0.0, np.cos(angle), np.sin(angle)])
    single.add_joint_free(box, pos=normal * (0.1 - sink), rot=half_turn, lin_vel=down * speed)
    if worlds == 1:
        return single.finalize(dtype=wp.float64, requires_grad=True)
    many = wpsim.ModelBuilder()
    many.replicate(single, worlds, spacing=(1.0, 0.0, 0.0))
    return many.finalize(dtype=wp.float64, requires_grad=True)


def run(model, steps, dt=1e-3, **options):
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**options))
    a, b = model.state(), model.state()
    path = []
    for _ in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
        path.append(a.joint_q.numpy().copy())
    assert solver.health().ok
    return np.array(path), solver


def test_resting_box_neither_sinks_nor_jitters():
    path, solver = run(incline_box(), 1000)
    z = path[:, 2]
    assert 0.099 < z[-1] < 0.1  # penetration below 1 mm
    assert np.ptp(z[500:]) < 1e-6  # at rest: no jitter
    assert np.abs(path[-1, :2]).max() < 1e-9
    assert solver.soft_contact.last_iterations <= 5


@pytest.mark.parametrize("mu", [0.5, 0.1])
def test_box_on_incline_sticks_or_slides_with_the_analytic_acceleration(mu):
    angle = 0.3  # tan = 0.309
    path, _ = run(incline_box(angle, mu), 600)
    down = -np.array([0.0, np.cos(angle), np.sin(angle)])
    s = path[:, :3] @ down
    t = np.arange(len(s)) * 1e-3
    accel = 2.0 * np.polyfit(t[300:], s[300:], 2)[0]
    if mu > np.tan(angle):
        assert abs(s[-1] - s[300]) < 5e-4  # settled; a soft constraint creeps below 2 mm/s
    else:
        expected = G * (np.sin(angle) - mu * np.cos(angle))
        assert abs(accel - expected) / expected < 0.02


def sliding_scene():
    """A box sliding down a 0.3 rad incline with mu = 0.1, settled into its contacts."""
    return incline_box(0.3, 0.1, speed=0.4, sink=4.0e-4)


def loss_of(model, solver, steps=30, dt=1e-3):
    rng = np.random.default_rng(4)
    w_q = wp.array(rng.normal(size=model.joint_coord_count), dtype=wp.float64)
    w_qd = wp.array(rng.normal(size=model.joint_dof_count), dtype=wp.float64)
    state = model.state()

    def loss():
        final = wpsim.simulate(solver, state, steps, dt)
        return joint_state_loss(final, w_q, w_qd)

    return loss, state


@pytest.mark.parametrize("param", ["shape_mu", "body_mass", "joint_qd"])
def test_implicit_gradient_matches_unrolled_and_central_differences(param):
    grads = {}
    for adjoint in ("implicit", "unrolled"):
        model = sliding_scene()
        solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(adjoint=adjoint, tolerance=1e-13))
        loss, state = loss_of(model, solver)
        array = state.joint_qd if param == "joint_qd" else getattr(model, param)
        tape = wp.Tape()
        with tape:
            value = loss()
        tape.backward(value)
        grads[adjoint] = array.grad.numpy().copy()
        if adjoint == "implicit":
            direction = np.random.default_rng(1).normal(size=array.shape)
            if param == "body_mass":
                direction *= array.numpy()
            tape.zero()
            result = check_gradient(loss, array, eps=1e-6, direction=direction, tol=1e-4)
            assert result.ok, (result.tape, result.fd, result.rel_error)
    scale = np.abs(grads["unrolled"]).max()
    assert scale > 0
    assert np.abs(grads["implicit"] - grads["unrolled"]).max() <= 1e-4 * scale


def test_checkpointed_rollout_matches_full_bitwise():
    results = []
    for mode in ("full", "checkpoint"):
        model = sliding_scene()
        solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
        w_q = wp.array(np.linspace(-1.0, 1.0, model.joint_coord_count), dtype=wp.float64)
        w_qd = wp.zeros(model.joint_dof_count, dtype=wp.float64)

        def loss_fn(k, state, loss):
            if k % 5 == 0:
                joint_state_loss(state, w_q, w_qd, loss)

        rollout = Rollout(solver, 20, 1e-3, loss_fn, mode=mode, segment_length=6)
        state = model.state()
        value = rollout.forward(state)
        rollout.backward()
        results.append((value, state.joint_qd.grad.numpy().copy(), model.shape_mu.grad.numpy().copy()))
    assert results[0][0] == results[1][0]
    assert np.abs(results[0][1]).max() > 0
    assert all(np.array_equal(a, b) for a, b in zip(results[0][1:], results[1][1:]))


def test_many_worlds_solve_independently():
    one, _ = run(sliding_scene(), 100)
    many, _ = run(incline_box(0.3, 0.1, speed=0.4, sink=4.0e-4, worlds=3), 100)
    per_world = many.reshape(100, 3, 7)  # free-joint coordinates are relative to each world's root frame
    assert np.abs(one[-1] - one[0]).max() > 0.01
    assert np.abs(per_world - one[:, None, :]).max() < 1e-9


def test_unsupported_scenes_are_refused():
    b = wpsim.ModelBuilder()
    for k in range(2):
        body = b.add_body()
        b.add_shape_sphere(body, radius=0.1)
        b.add_joint_free(body, pos=(0.0, 0.0, 0.3 * k))
    model = b.finalize()
    with pytest.raises(ValueError, match="static shapes only"):
        wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    with pytest.raises(ValueError, match="adjoint"):
        wpsim.SemiImplicitSolver(sliding_scene(), soft_contact=SoftContactOptions(adjoint="exact"))
