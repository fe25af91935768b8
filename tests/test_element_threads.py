"""Element forces of unrecorded CPU steps split over threads (``wpsim.solvers.element_threads``):
by world bitwise one thread's, by fraction equal to rounding and reproducible, every element
kind and control covered, and the shared worker threads' error and busy paths."""

import threading

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.checkpoint import Rollout
from wpsim.diff.losses import linear_state_loss
from wpsim.solvers import element_threads
from wpsim.solvers.cpu_workers import CpuWorkers
from wpsim.solvers.element_threads import ELEMENT_KINDS, shares_by_fraction, shares_by_world
from wpsim.solvers.prepared_launch import PREPARED_LAUNCHES

DT = 2.0e-4
STEPS = 40


def world(smoothed: bool = False) -> wpsim.ModelBuilder:
    """One world with every element kind: a cloth (triangles, hinges) pinned along one side, a
    soft block (tets) on the ground and a spring between them."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.3)
    cloth = b.add_cloth_grid((0.0, 0.0, 0.3), dim_x=4, dim_y=3, cell_x=0.05, cell_y=0.05, density=0.5,
                             tri_mu=50.0, tri_lambda=50.0, tri_kd=0.01, bend_ke=1.0e-3, bend_kd=1.0e-5,
                             fix_left=True)
    block = b.add_soft_grid((0.3, 0.0, 0.001), dim_x=2, dim_y=2, dim_z=1, cell_x=0.04, cell_y=0.04, cell_z=0.04,
                            density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=2.0, radius=0.005,
                            strain_smoothing=smoothed)
    b.add_spring(cloth + 4, block + 2, ke=20.0, kd=0.1)
    return b


def model_of(worlds: int, smoothed: bool = False, dtype=wp.float64):
    scene = wpsim.ModelBuilder()
    scene.replicate(world(smoothed), worlds, (1.0, 0.0, 0.0))
    return scene.finalize(device="cpu", dtype=dtype)


@pytest.fixture
def tiny_shares(monkeypatch):
    """Split from 8 elements per share on, so that small test models split."""
    monkeypatch.setattr(element_threads, "MIN_ELEMENTS_PER_SHARE", 8)


def control_with_activation(model):
    """A control with every tet and spring activated differently."""
    control = model.control()
    control.tet_activation.assign(np.linspace(-0.2, 0.3, model.tet_count))
    control.spring_activation.assign(np.linspace(0.1, -0.1, model.spring_count))
    return control


def rollout(model, threads: int, control=None):
    """Final positions and velocities after ``STEPS`` unrecorded steps, and the solver."""
    solver = wpsim.SemiImplicitSolver(model, threads=threads)
    state = model.state(requires_grad=False)
    solver.advance(state, control, DT, STEPS)
    assert solver.health().ok, str(solver.health())
    return np.concatenate([state.particle_q.numpy(), state.particle_qd.numpy()]), solver


def test_one_world_splits_by_fraction_equal_to_rounding_and_reproducible(tiny_shares):
    model = model_of(1)
    control = control_with_activation(model)
    one, single = rollout(model, 1, control)
    three, split = rollout(model, 3, control)
    again, _ = rollout(model, 3, control)
    assert single._prepared_particles.element_threads is None
    threads = split._prepared_particles.element_threads
    assert threads.shares == 3 and not threads.by_world
    np.testing.assert_array_equal(three, again)
    scale = np.abs(one).max(axis=0)
    np.testing.assert_allclose(three, one, rtol=0.0, atol=1.0e-11 * scale.max())
    assert np.abs(one - rollout(model, 1)[0]).max() > 1.0e-6  # the activations act


def test_worlds_split_by_world_bitwise_as_one_thread_and_as_recorded_steps(tiny_shares):
    model = model_of(4, dtype=wp.float32)
    control = control_with_activation(model)
    one, _ = rollout(model, 1, control)
    two, split = rollout(model, 2, control)
    assert split._prepared_particles.element_threads.by_world
    np.testing.assert_array_equal(two, one)
    solver = wpsim.SemiImplicitSolver(model, threads=2)
    states = [model.state(requires_grad=False) for _ in range(STEPS + 1)]
    with wp.Tape():
        for k in range(STEPS):
            solver.step(states[k], states[k + 1], control, DT)
    recorded = np.concatenate([states[-1].particle_q.numpy(), states[-1].particle_qd.numpy()])
    np.testing.assert_array_equal(recorded, one)


def test_steps_of_one_world_are_bitwise_and_checkpointed_rollouts_rerun_them(tiny_shares):
    """``step`` splits one world by fraction nowhere (only ``advance`` does): unrecorded steps on
    two threads are bitwise one thread's, and a checkpointed rollout's re-runs reproduce its
    forward, giving the full tape's loss and gradients bitwise."""
    model = model_of(1, dtype=wp.float32)
    control = control_with_activation(model)
    finals = []
    for threads in (1, 2):
        solver = wpsim.SemiImplicitSolver(model, threads=threads)
        a, b = model.state(requires_grad=False), model.state(requires_grad=False)
        for _ in range(STEPS):
            solver.step(a, b, control, DT)
            a, b = b, a
        finals.append(a.particle_q.numpy())
    np.testing.assert_array_equal(finals[1], finals[0])
    grad_model = world().finalize(device="cpu", requires_grad=True)
    weights = wp.array(np.random.default_rng(4).normal(size=(grad_model.particle_count, 3)), dtype=wp.vec3)
    zero = wp.zeros_like(weights)

    def loss_fn(k, state, loss):
        if k % 5 == 0:
            linear_state_loss(state, weights, zero, loss)

    results = []
    for mode in ("full", "checkpoint"):
        start = grad_model.state()
        rollout = Rollout(wpsim.SemiImplicitSolver(grad_model, threads=2), STEPS, DT, loss_fn, mode=mode,
                          segment_length=7)
        loss = rollout.forward(start)
        rollout.backward()
        results.append((loss, start.particle_q.grad.numpy().copy(), grad_model.tri_mu.grad.numpy().copy()))
        grad_model.tri_mu.grad.zero_()
    assert results[0][0] == results[1][0]
    for full, checkpointed in zip(results[0][1:], results[1][1:]):
        assert np.abs(full).max() > 0.0
        np.testing.assert_array_equal(checkpointed, full)


def test_strain_smoothed_tets_split_equal_to_rounding(tiny_shares):
    model = model_of(1, smoothed=True)
    assert model.domain_count > 0
    one, _ = rollout(model, 1)
    two, split = rollout(model, 2)
    assert split._prepared_particles.element_threads.shares == 2
    np.testing.assert_allclose(two, one, rtol=0.0, atol=1.0e-11 * np.abs(one).max())


def test_steps_between_fresh_states_and_controls_reuse_nothing_stale(tiny_shares):
    """Prepared launches are kept by array identity: stepping other states and another control
    gives what a fresh solver gives."""
    model = model_of(1)
    control = control_with_activation(model)
    solver = wpsim.SemiImplicitSolver(model, threads=2)
    warm = model.state(requires_grad=False)
    solver.advance(warm, None, DT, 3)
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    solver.step(a, b, control, DT)
    fresh_a, fresh_b = model.state(requires_grad=False), model.state(requires_grad=False)
    wpsim.SemiImplicitSolver(model, threads=2).step(fresh_a, fresh_b, control, DT)
    np.testing.assert_array_equal(b.particle_q.numpy(), fresh_b.particle_q.numpy())
    np.testing.assert_array_equal(b.particle_qd.numpy(), fresh_b.particle_qd.numpy())


def test_fresh_states_every_step_retarget_kept_plans(tiny_shares):
    """Stepping into a new state every step (more steps than ``PREPARED_LAUNCHES`` kept plans)
    retargets kept plans and gives bitwise the ping-pong steps' result, split by world."""
    model = model_of(3)
    control = control_with_activation(model)
    steps = 2 * PREPARED_LAUNCHES + 3
    reference = model.state(requires_grad=False)
    other = model.state(requires_grad=False)
    ping_pong = wpsim.SemiImplicitSolver(model, threads=2)
    for k in range(steps):
        ping_pong.step(*((reference, other) if k % 2 == 0 else (other, reference)), control, DT)
    reference = other if steps % 2 else reference
    solver = wpsim.SemiImplicitSolver(model, threads=2)
    assert solver._prepared_particles.element_threads.by_world
    state = model.state(requires_grad=False)
    for _ in range(steps):
        fresh = model.state(requires_grad=False)
        solver.step(state, fresh, control, DT)
        state = fresh
    assert len(solver._prepared_particles._plans) <= PREPARED_LAUNCHES
    np.testing.assert_array_equal(state.particle_q.numpy(), reference.particle_q.numpy())
    np.testing.assert_array_equal(state.particle_qd.numpy(), reference.particle_qd.numpy())


def test_share_ranges_cover_every_element_once():
    model = model_of(5, dtype=wp.float32)
    for shares in (2, 3, 5):
        for ranges in (shares_by_world(model, shares), shares_by_fraction(model, shares)):
            assert len(ranges) == shares
            for kind in ELEMENT_KINDS:
                bounds = [ranges[k][kind] for k in range(shares)]
                assert bounds[0][0] == 0 and bounds[-1][1] == getattr(model, f"{kind}_count")
                assert all(bounds[k][1] == bounds[k + 1][0] and bounds[k][0] <= bounds[k][1] for k in range(shares - 1))
    by_world = shares_by_world(model, 2)
    per_world = {kind: getattr(model, f"{kind}_count") // 5 for kind in ELEMENT_KINDS}
    assert all(by_world[0][kind][1] % max(per_world[kind], 1) == 0 for kind in ELEMENT_KINDS)  # whole worlds
    assert shares_by_world(model, 6) is None  # fewer worlds than shares
    one = model_of(1, dtype=wp.float32)
    assert shares_by_world(one, 2) is None
    fraction = shares_by_fraction(one, 2)
    assert fraction[0]["tet"][1] < one.tet_count / 2  # the first share also computes the particle forces


def test_an_element_joining_two_worlds_is_split_by_fraction():
    scene = wpsim.ModelBuilder()
    scene.replicate(world(), 2, (1.0, 0.0, 0.0))
    scene.add_spring(0, scene.particles.count - 1, ke=1.0)
    assert shares_by_world(scene.finalize(device="cpu"), 2) is None


def test_workers_hand_back_errors_and_run_inline_when_busy():
    workers = CpuWorkers()
    ran = []

    def fail():
        raise RuntimeError("share failed")

    with pytest.raises(RuntimeError, match="share failed"):
        workers.run([lambda: ran.append("first"), fail])
    assert ran == ["first"]
    threads = []
    workers.run([lambda: threads.append(threading.get_ident()), lambda: threads.append(threading.get_ident())])
    assert threads[0] == threading.get_ident() and threads[1] != threads[0]
    inline = []
    outer = [lambda: workers.run([lambda: inline.append(threading.get_ident())] * 2)]
    workers.run(outer * 2)  # a nested run finds the workers busy and runs its jobs where it is
    assert len(inline) == 4
