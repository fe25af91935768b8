"""Particle neighbour lists with a skin (``ParticleNeighborLists``) and the cached prepared
launches of unrecorded steps (``PreparedLaunchCache``): fewer list builds and less launch work,
with the same results bitwise as a build and plain launches every step."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.bench.vs_newton import pinned_cloth
from wpsim.solvers.prepared_launch import PREPARED_LAUNCHES, PreparedLaunchCache
from wpsim.tasks import scene_library

DT = 1.0e-3


def pile(count=125, dtype=wp.float64):
    return scene_library.particles_on_ground(count).finalize(dtype=dtype, requires_grad=True)


def ping_pong(model, solver, steps, state=None):
    a, b = (state or model.state(requires_grad=False)), model.state(requires_grad=False)
    for _ in range(steps):
        solver.step(a, b, None, DT)
        a, b = b, a
    return a


def listed_pairs(state) -> set:
    count, index = state.neighbor_count.numpy(), state.neighbor_index.numpy()
    return {(i, int(j)) for i in range(len(count)) for j in index[i, :count[i]]}


def touching_pairs(model, state, margin=0.0) -> set:
    x, r = state.particle_q.numpy(), model.particle_radius.numpy()
    gap = np.linalg.norm(x[:, None] - x[None], axis=2) - (r[:, None] + r[None])
    return {(i, j) for i, j in zip(*np.nonzero(gap < margin)) if i != j}


def test_skin_lists_give_the_same_rollout_bitwise_with_fewer_builds():
    model = pile()
    tight = wpsim.SemiImplicitSolver(model, neighbor_skin=0.0)
    skinned = wpsim.SemiImplicitSolver(model)
    assert skinned.neighbors.skin == pytest.approx(0.5 * 0.02)
    a, b = ping_pong(model, tight, 300), ping_pong(model, skinned, 300)
    assert np.array_equal(a.particle_q.numpy(), b.particle_q.numpy())
    assert np.array_equal(a.particle_qd.numpy(), b.particle_qd.numpy())
    assert tight.neighbors.builds == 300 and skinned.neighbors.builds < 150
    assert len(touching_pairs(model, a)) > 40  # the pile has landed: many contacts were exercised
    assert skinned.health().ok


def test_reused_lists_hold_every_touching_pair_sorted():
    model = pile(dtype=wp.float32)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    reused = 0
    for _ in range(250):
        builds = solver.neighbors.builds
        solver.neighbors.prepare(a)
        reused += solver.neighbors.builds == builds
        assert touching_pairs(model, a) <= listed_pairs(a)
        count, index = a.neighbor_count.numpy(), a.neighbor_index.numpy()
        assert all(np.all(np.diff(index[i, :count[i]]) > 0) for i in range(len(count)))
        solver.step(a, b, None, DT)
        a, b = b, a
    assert reused > 150


def test_a_state_moved_by_hand_or_fresh_gets_new_lists():
    model = pile(dtype=wp.float32)
    solver = wpsim.SemiImplicitSolver(model)
    landed = ping_pong(model, solver, 250)
    builds = solver.neighbors.builds
    solver.step(landed, model.state(requires_grad=False), None, DT)
    assert solver.neighbors.builds == builds  # its own carried lists are reused
    start = model.state(requires_grad=False)
    solver.step(start, model.state(requires_grad=False), None, DT)  # fresh: no lists yet
    assert solver.neighbors.builds == builds + 1
    landed.assign(start)  # teleported back to the column: the lists it carries are stale
    solver.step(landed, model.state(requires_grad=False), None, DT)
    assert solver.neighbors.builds == builds + 2
    assert listed_pairs(landed) == listed_pairs(start)


def test_skin_build_that_overflows_is_redone_without_the_skin():
    """Particle 0 touches 1; 2 is within the skin of 0 but not touching. With room for one
    neighbour the skin build overflows, so the step builds tight lists, which fit."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.set_particle_contact(True, ke=1.0e2, kd=0.0, mu=0.0, max_neighbors=1)
    b.add_particles([(0.0, 0.0, 0.0), (0.09, 0.0, 0.0), (-0.11, 0.0, 0.0)], masses=1.0, radii=0.05)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, neighbor_skin=0.05)
    a = model.state()
    solver.step(a, model.state(), None, DT)
    assert listed_pairs(a) == {(0, 1), (1, 0)}
    assert solver.health().ok
    assert solver.neighbors.builds == 2


def test_recorded_gradients_through_reused_lists_match_a_build_every_step():
    model = pile(64)
    targets = wp.array(model.particle_q.numpy() + np.array([0.01, 0.0, -0.05]), dtype=model.vec3)
    grads = []
    for skin in (0.0, 0.01):
        solver = wpsim.SemiImplicitSolver(model, neighbor_skin=skin)
        state0 = model.state()
        tape = wp.Tape()
        with tape:
            final = wpsim.simulate(solver, state0, 200, DT)
            loss = wpsim.diff.losses.squared_distance(final.particle_q, targets)
        tape.backward(loss=loss)
        grads.append((state0.particle_q.grad.numpy().copy(), model.pair_ke.grad.numpy().copy()))
        tape.zero()
        if skin:
            assert solver.neighbors.builds < 100
    assert np.array_equal(grads[0][0], grads[1][0]) and np.array_equal(grads[0][1], grads[1][1])
    assert np.abs(grads[0][1]).max() > 0.0  # pair contacts shaped the loss


def test_neighbor_skin_is_checked():
    with pytest.raises(ValueError, match="neighbor_skin"):
        wpsim.SemiImplicitSolver(pile(8), neighbor_skin=-1.0)


@pytest.mark.parametrize("fresh", [False, True])
def test_unrecorded_cached_cloth_steps_equal_recorded_ones(fresh):
    """Off the tape a solver's CPU particle steps re-run launches prepared for their arrays
    (ping-pong states hit them; fresh states every step fill the kept plans, then retarget
    them); the states equal those of recorded steps (plain launches) bitwise."""
    model = pinned_cloth(6).finalize(dtype=wp.float64)
    steps, dt = 24, 5.0e-4
    recording = wpsim.SemiImplicitSolver(model)
    states = [model.state()]
    with wp.Tape():
        for _ in range(steps):
            states.append(model.state())
            recording.step(states[-2], states[-1], None, dt)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    for _ in range(steps):
        if fresh:
            b = model.state(requires_grad=False)
        solver.step(a, b, None, dt)
        a, b = b, a
    assert len(recording._prepared_particles._plans) == 0
    assert 1 <= len(solver._prepared_particles._plans) <= PREPARED_LAUNCHES
    assert np.array_equal(a.particle_q.numpy(), states[-1].particle_q.numpy())
    assert np.array_equal(a.particle_qd.numpy(), states[-1].particle_qd.numpy())
    assert not np.array_equal(a.particle_q.numpy(), model.particle_q.numpy())


@wp.kernel
def _scaled_sum(a: wp.array(dtype=float), scale: float, step: int, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = out[i] + scale * a[i] + float(step)


def test_launch_cache_keys_on_arrays_retargets_values_and_spares():
    cache = PreparedLaunchCache(capacity=2)
    a, b, c = (wp.array(np.full(4, v, dtype=np.float32), device="cpu") for v in (1.0, 2.0, 3.0))
    out = wp.zeros(4, dtype=float, device="cpu")
    cache.run(_scaled_sum, 4, [a, 1.0, 0], [out], "cpu")
    cache.run(_scaled_sum, 4, [a, 2.0, 5], [out], "cpu")  # same arrays: one kept launch, new values
    assert len(cache) == 1 and np.allclose(out.numpy(), 1.0 + 2.0 + 5.0)
    cache.run(_scaled_sum, 4, [b, 1.0, 0], [out], "cpu")
    cache.run(_scaled_sum, 4, [c, 1.0, 0], [out], "cpu")  # full: the oldest (a's) is retargeted to c
    assert len(cache) == 2 and np.allclose(out.numpy(), 8.0 + 2.0 + 3.0)
    cache.run(_scaled_sum, 4, [b, -1.0, 1], [out], "cpu")
    assert np.allclose(out.numpy(), 13.0 - 2.0 + 1.0)
    short = wp.zeros(2, dtype=float, device="cpu")
    cache.run(_scaled_sum, 2, [a, 1.0, 0], [short], "cpu")  # another dim: never a retargeted 4-thread launch
    assert len(cache) == 2 and np.allclose(short.numpy(), 1.0) and np.allclose(out.numpy(), 12.0)
