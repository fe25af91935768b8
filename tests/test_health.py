"""Blow-up detection: per-world fault steps, raising, reset, and contact-list overflow."""

import numpy as np
import pytest
import warp as wp

import wpsim

DT = 0.01
MAX_VALUE = 1.0e5  # the solver's default max_coordinate (m) and max_speed (m/s)


def spring_pair(ke):
    """Two 1 kg particles joined by a spring of stiffness ke, released stretched by 1 cm."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particles([(0.0, 0.0, 0.0), (0.11, 0.0, 0.0)], masses=1.0, radii=0.01)
    b.add_spring(0, 1, ke=ke, kd=0.0, rest_length=0.1)
    return b


def predicted_fault_step(ke, num_steps):
    """First step index whose output exceeds the limits, by replaying the integrator in NumPy."""
    x = np.array([[0.0, 0.0, 0.0], [0.11, 0.0, 0.0]])
    v = np.zeros_like(x)
    for k in range(num_steps):
        d = x[1] - x[0]
        length = np.linalg.norm(d)
        f = d / length * ke * (length - 0.1)
        v = v + np.array([f, -f]) * DT
        x = x + v * DT
        if not np.isfinite(x).all() or np.linalg.norm(x, axis=1).max() > MAX_VALUE or np.linalg.norm(v, axis=1).max() > MAX_VALUE:
            return k
    return None


# worlds 1 and 3 are unstable (omega dt = sqrt(2 ke / m) dt = 2.2 and 2.05 > 2: the stretch
# grows by ~2.4x and ~1.6x per step), worlds 0 and 2 are not (omega dt = 0.045)
STIFFNESS = [10.0, 24200.0, 10.0, 21000.0]
NUM_STEPS = 60


def multi_world_model(dtype):
    scene = wpsim.ModelBuilder(gravity=0.0)
    for w, ke in enumerate(STIFFNESS):
        scene.add_builder(spring_pair(ke), offset=(0.0, 0.5 * w, 0.0))
    return scene.finalize(dtype=dtype)


def step_n(solver, model, num_steps):
    a, b = model.state(), model.state()
    for _ in range(num_steps):
        solver.step(a, b, None, DT)
        a, b = b, a
    return a


@pytest.mark.parametrize("dtype", [wp.float32, wp.float64], ids=["float32", "float64"])
def test_blow_up_is_reported_per_world_with_its_step(dtype):
    num_steps = NUM_STEPS
    expected = {w: predicted_fault_step(ke, num_steps) for w, ke in enumerate(STIFFNESS)}
    assert expected[0] is None and expected[2] is None
    assert expected[1] is not None and expected[3] is not None and 10 < expected[1] < expected[3] < num_steps - 5
    model = multi_world_model(dtype)
    solver = wpsim.SemiImplicitSolver(model)
    final = step_n(solver, model, num_steps)  # keeps stepping well after the blow-ups
    report = solver.health()
    assert report.fault_steps == {1: expected[1], 3: expected[3]}
    assert not report.ok and report.neighbor_overflow_particle is None
    assert "world 1 blew up at step %d" % expected[1] in str(report)
    # the healthy worlds are untouched by the others' NaN/Inf: still oscillating about 10 cm
    x = final.particle_q.numpy().reshape(4, 2, 3)
    for w in (0, 2):
        length = np.linalg.norm(x[w, 1] - x[w, 0])
        assert np.isfinite(x[w]).all() and 0.085 < length < 0.115
    assert not np.isfinite(x[1]).all() or np.abs(x[1]).max() > MAX_VALUE


def test_raise_on_blowup_names_world_and_step_and_reset_clears():
    model = multi_world_model(wp.float64)
    first = predicted_fault_step(STIFFNESS[1], NUM_STEPS)
    solver = wpsim.SemiImplicitSolver(model, raise_on_blowup=True)
    a, b = model.state(), model.state()
    with pytest.raises(wpsim.SimulationBlowUp) as info:
        for _ in range(NUM_STEPS):
            solver.step(a, b, None, DT)
            a, b = b, a
    assert isinstance(info.value, wpsim.SimulationError)
    assert f"world 1 blew up at step {first}" in str(info.value)
    assert "world 3" not in str(info.value)  # world 3 had not blown up yet
    assert solver.step_count == first + 1  # raised at the step that blew up
    solver.reset_health()
    report = solver.health()
    assert report.ok and report.fault_steps == {} and solver.step_count == 0
    assert str(report) == "healthy"
    solver.check_health()  # does not raise after the reset


def test_health_check_interval_delays_the_raise_not_the_step_index():
    model = multi_world_model(wp.float64)
    first = predicted_fault_step(STIFFNESS[1], NUM_STEPS)
    interval = 5
    solver = wpsim.SemiImplicitSolver(model, raise_on_blowup=True, health_check_interval=interval)
    with pytest.raises(wpsim.SimulationBlowUp) as info:
        step_n(solver, model, NUM_STEPS)
    assert solver.step_count == (first // interval + 1) * interval
    assert f"world 1 blew up at step {first}" in str(info.value)


def test_out_of_range_position_is_a_blow_up():
    """A finite but too-large state counts: a particle flying at 13 m/s past max_coordinate = 1 m."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particle((0.0, 0.0, 0.0), vel=(13.0, 0.0, 0.0), mass=1.0, radius=0.01)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, max_coordinate=1.0)
    step_n(solver, model, 10)
    # x after step k is 0.13 (k + 1) m: beyond 1 m first at k = 7
    assert solver.health().fault_steps == {0: 7}


def overlapping_particles(max_neighbors):
    b = wpsim.ModelBuilder(gravity=0.0)
    b.set_particle_contact(True, ke=1.0e2, kd=0.0, mu=0.0, max_neighbors=max_neighbors)
    b.add_particles([(0.0, 0.0, 0.0), (0.01, 0.0, 0.0), (0.0, 0.01, 0.0)], masses=1.0, radii=0.05)
    return b.finalize(dtype=wp.float64)


def test_neighbor_overflow_is_reported_and_raises_simulation_error():
    model = overlapping_particles(max_neighbors=1)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    solver.step(a, b, None, 1.0e-3)
    assert np.array_equal(a.neighbor_count.numpy(), [1, 1, 1])  # truncated at capacity
    report = solver.health()
    assert report.neighbor_overflow_particle == 2  # the highest-index particle that overflowed
    assert report.fault_steps == {} and not report.ok
    with pytest.raises(wpsim.SimulationError) as info:
        solver.check_health()
    assert not isinstance(info.value, wpsim.SimulationBlowUp)
    assert "particle 2" in str(info.value) and "max_neighbors" in str(info.value)
    assert solver.check_health(raise_error=False).neighbor_overflow_particle == 2
    solver.reset_health()
    assert solver.health().ok


def test_enough_neighbor_capacity_is_healthy():
    model = overlapping_particles(max_neighbors=2)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    solver.step(a, b, None, 1.0e-3)
    assert np.array_equal(a.neighbor_count.numpy(), [2, 2, 2])
    assert solver.check_health().ok
    # the overlapping particles were pushed apart (contact forces act)
    assert np.linalg.norm(a.particle_f.numpy(), axis=1).min() > 1.0


@pytest.mark.parametrize("runner", ["simulate", "Rollout"])
def test_health_steps_count_per_rollout(runner):
    """A rollout's health report names its own steps (0..T-1) and none of an earlier
    rollout's faults: a stable run (dt = 0.1 ms), then the unstable one, then a stable one."""
    model = multi_world_model(wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    expected = {w: predicted_fault_step(ke, NUM_STEPS) for w, ke in enumerate(STIFFNESS) if w in (1, 3)}

    def run(dt):
        if runner == "simulate":
            wpsim.simulate(solver, model.state(), NUM_STEPS, dt)
        else:
            wpsim.Rollout(solver, NUM_STEPS, dt, lambda k, state, loss: None).forward(model.state())
        return solver.health()

    assert run(1.0e-4).ok and solver.step_count == NUM_STEPS
    assert run(DT).fault_steps == expected  # not NUM_STEPS + expected
    assert run(1.0e-4).ok  # the previous rollout's faults are gone
