"""Physics verification against analytic references (float64, CPU).

Every test compares a rollout of ``SemiImplicitSolver`` with a closed form: the discrete
symplectic-Euler trajectory of free fall, projectile and linear drag, the period of a
spring-mass oscillator, conservation of energy and momentum of isolated elastic systems,
and a soft cube that must come to rest on the ground.
"""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.diagnostics import energy_report, momentum_report, tet_volume_ratios


def rollout(model, state, num_steps, dt, observe=None, control=None):
    """Step ``num_steps`` times ping-ponging two states; ``observe(k, state)`` after each step.

    ``state`` is only read; returns the final state.
    """
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    a.assign(state)
    for k in range(num_steps):
        solver.step(a, b, control, dt)
        a, b = b, a
        if observe is not None:
            observe(k + 1, a)
    assert solver.health().ok, str(solver.health())
    return a


def cube_springs(masses, ke, size=0.1):
    """8 particles at the corners of a cube, joined by all 28 pairwise springs (rest = initial)."""
    b = wpsim.ModelBuilder(gravity=0.0)
    pts = np.array([[i, j, k] for k in (0, 1) for j in (0, 1) for i in (0, 1)], dtype=np.float64) * size
    b.add_particles(pts, masses=masses, radii=0.01)
    b.add_springs([(i, j) for i in range(8) for j in range(i + 1, 8)], ke=ke, kd=0.0)
    return b, pts


# --------------------------------------------------------------------------- 1. free fall
def test_free_fall_and_projectile_match_discrete_closed_form():
    """x_n = x0 + n v0 dt + g dt^2 n(n+1)/2 and v_n = v0 + n g dt, to 1e-12 relative."""
    g = -9.81
    x0 = np.array([[0.0, 0.0, 10.0], [0.1, -0.2, 3.0]])
    v0 = np.array([[0.0, 0.0, 0.0], [1.5, -0.5, 4.0]])  # free fall, projectile
    b = wpsim.ModelBuilder(gravity=g)
    b.add_particles(x0, v0, masses=[1.0, 0.7], radii=0.01)
    model = b.finalize(dtype=wp.float64)
    dt, n = 1.0e-3, 1500
    gv = np.array([0.0, 0.0, g])
    checkpoints = {}

    def observe(k, s):
        if k in (1, 10, 500, n):  # .numpy() of a CPU array is a view: copy
            checkpoints[k] = (s.particle_q.numpy().copy(), s.particle_qd.numpy().copy())

    rollout(model, model.state(), n, dt, observe)
    assert sorted(checkpoints) == [1, 10, 500, n]
    for k, (x, v) in checkpoints.items():
        x_ref = x0 + k * v0 * dt + gv * dt * dt * k * (k + 1) / 2.0
        v_ref = v0 + k * gv * dt
        assert np.abs(x - x_ref).max() <= 1e-12 * np.abs(x_ref).max(), (k, np.abs(x - x_ref).max())
        assert np.abs(v - v_ref).max() <= 1e-12 * np.abs(v_ref).max(), (k, np.abs(v - v_ref).max())
    # the discrete solution differs from the continuous one by g dt^2 n / 2: the test resolves it
    x, _ = checkpoints[n]
    t = n * dt
    assert abs(x[0, 2] - (x0[0, 2] + 0.5 * g * t * t)) > 1e3 * 1e-12 * abs(x[0, 2])


def test_linear_drag_matches_discrete_closed_form():
    """v_{k} = a v_{k-1} + g dt with a = 1 - c dt / m; x_n = x0 + dt sum_{k=1..n} v_k."""
    g, c, m = -9.81, 0.8, 0.5
    x0, v0 = np.array([0.0, 0.0, 5.0]), np.array([2.0, 1.0, 3.0])
    b = wpsim.ModelBuilder(gravity=g)
    b.add_particle(x0, v0, mass=m, radius=0.01, drag=c)
    model = b.finalize(dtype=wp.float64)
    dt, n = 1.0e-3, 2000
    final = rollout(model, model.state(), n, dt)
    a = 1.0 - c * dt / m
    k = np.arange(1, n + 1)[:, None]
    gv = np.array([0.0, 0.0, g])
    v_k = a**k * v0 + gv * dt * (1.0 - a**k) / (1.0 - a)
    x_ref = x0 + dt * v_k.sum(axis=0)
    x, v = final.particle_q.numpy()[0], final.particle_qd.numpy()[0]
    assert np.abs(v - v_k[-1]).max() <= 1e-12 * np.abs(v_k[-1]).max()
    assert np.abs(x - x_ref).max() <= 1e-12 * np.abs(x_ref).max()
    # drag is visible: terminal speed m g / c = 6.13 m/s is approached, not the drag-free 19.6 m/s
    assert abs(v[2] - (v0[2] + g * n * dt)) > 5.0


# --------------------------------------------------------------------------- 2. spring period
def _crossing_times(t, y):
    """Times where y changes sign, linearly interpolated."""
    idx = np.flatnonzero(np.sign(y[:-1]) * np.sign(y[1:]) < 0)
    return t[idx] - y[idx] * (t[idx + 1] - t[idx]) / (y[idx + 1] - y[idx])


def test_spring_mass_period():
    m, k, rest, amp = 0.5, 200.0, 1.0, 0.1
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particle((0.0, 0.0, 0.0), mass=0.0, radius=0.01)  # fixed anchor
    b.add_particle((rest + amp, 0.0, 0.0), mass=m, radius=0.01)
    b.add_spring(0, 1, ke=k, kd=0.0, rest_length=rest)
    model = b.finalize(dtype=wp.float64)
    dt, n = 1.0e-3, 1000  # about 3.2 periods
    xs = [amp]
    final = rollout(model, model.state(), n, dt, lambda _, s: xs.append(s.particle_q.numpy()[1, 0] - rest))
    crossings = _crossing_times(np.arange(n + 1) * dt, np.array(xs))
    assert len(crossings) >= 6
    period = 2.0 * np.mean(np.diff(crossings))
    omega = np.sqrt(k / m)
    analytic = 2.0 * np.pi / omega
    assert abs(period - analytic) <= 5e-3 * analytic, (period, analytic)
    # tighter: the symplectic Euler oscillator has omega_d = 2/dt asin(omega dt / 2)
    discrete = 2.0 * np.pi / (2.0 / dt * np.arcsin(omega * dt / 2.0))
    assert abs(period - discrete) <= 1e-4 * discrete, (period, discrete)
    # the anchor (mass 0) did not move, the motion stayed on the x axis, the amplitude is kept
    x = final.particle_q.numpy()
    assert np.array_equal(x[0], [0.0, 0.0, 0.0]) and np.array_equal(x[1, 1:], [0.0, 0.0])
    assert np.max(np.abs(xs)) == pytest.approx(amp, rel=2e-2)


# --------------------------------------------------------------------------- 3. energy
def _energy_history(model, state, dt, n):
    total, kinetic = [], []

    def observe(_, s):
        r = energy_report(model, s)
        total.append(r["total"][0])
        kinetic.append(r["kinetic"][0])

    observe(0, state)
    final = rollout(model, state, n, dt, observe)
    return np.array(total), np.array(kinetic), final


def test_energy_conservation_spring_network():
    rng = np.random.default_rng(1)
    b, pts = cube_springs(rng.uniform(0.05, 0.2, 8), ke=50.0)
    model = b.finalize(dtype=wp.float64)
    state = model.state()
    state.particle_q.assign(pts + rng.normal(0.0, 0.01, pts.shape))  # stretched / sheared
    total, kinetic, _ = _energy_history(model, state, 2.0e-4, 1000)
    e0 = total[0]
    assert e0 > 0.1  # J: a real oscillation, all of it elastic at t = 0
    drift = np.abs(total - e0).max() / e0
    assert drift < 1e-2, drift
    assert kinetic.max() > 0.5 * e0  # energy really moved between elastic and kinetic


def test_energy_conservation_neo_hookean_block():
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_grid((0.0, 0.0, 0.0), dim_x=2, dim_y=2, dim_z=2, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=1000.0, young_modulus=1.0e4, poisson_ratio=0.3, kd=0.0)
    model = b.finalize(dtype=wp.float64)
    rest = model.state()
    e_rest = energy_report(model, rest)["total"][0]
    assert e_rest > 1.0  # the documented constant offset of the stable Neo-Hookean energy
    stretch_shear = np.array([[1.06, 0.04, 0.0], [0.0, 0.97, 0.02], [0.0, 0.0, 1.0]])
    state = model.state()
    state.particle_q.assign(rest.particle_q.numpy() @ stretch_shear.T)
    total, kinetic, final = _energy_history(model, state, 2.0e-4, 1000)
    e_osc = total[0] - e_rest
    assert e_osc > 0.1  # J
    drift = np.abs(total - total[0]).max() / e_osc
    assert drift < 1e-2, drift
    assert kinetic.max() > 0.5 * e_osc
    assert tet_volume_ratios(model, final).min() > 0.5


# --------------------------------------------------------------------------- 4. momentum
def _isolated_spring_network():
    rng = np.random.default_rng(2)
    b, pts = cube_springs(rng.uniform(0.05, 0.2, 8), ke=100.0)
    model = b.finalize(dtype=wp.float64)
    state = model.state()
    state.particle_q.assign(pts + np.array([0.3, -0.2, 0.5]) + rng.normal(0.0, 0.01, pts.shape))
    spin = np.cross([1.0, 2.0, 3.0], pts - pts.mean(axis=0))
    state.particle_qd.assign(rng.normal(0.0, 0.3, pts.shape) + 0.2 + spin)
    return model, state


def _isolated_soft_block():
    rng = np.random.default_rng(3)
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_grid((0.2, 0.1, 0.4), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=1000.0, young_modulus=1.0e4, poisson_ratio=0.3, kd=0.0)
    model = b.finalize(dtype=wp.float64)
    state = model.state()
    x = state.particle_q.numpy()
    state.particle_q.assign(x + rng.normal(0.0, 0.005, x.shape))
    state.particle_qd.assign(rng.normal(0.0, 0.2, x.shape) + np.cross([0.0, 1.0, 2.0], x - x.mean(axis=0)))
    return model, state


@pytest.mark.parametrize("make", [_isolated_spring_network, _isolated_soft_block], ids=["springs", "neo_hookean"])
def test_momentum_conservation(make):
    model, state = make()
    p0 = momentum_report(model, state)
    lin0, ang0 = p0["linear"][0], p0["angular"][0]
    assert np.linalg.norm(lin0) > 0.1 and np.linalg.norm(ang0) > 0.01
    errors = {"linear": 0.0, "angular": 0.0}
    positions = []

    def observe(k, s):
        if k % 50 == 0:
            p = momentum_report(model, s)
            errors["linear"] = max(errors["linear"], np.linalg.norm(p["linear"][0] - lin0) / np.linalg.norm(lin0))
            errors["angular"] = max(errors["angular"], np.linalg.norm(p["angular"][0] - ang0) / np.linalg.norm(ang0))
            positions.append(s.particle_q.numpy().copy())

    rollout(model, state, 1000, 5.0e-4, observe)
    assert errors["linear"] < 1e-10, errors
    assert errors["angular"] < 1e-10, errors
    # the internal forces were not negligible: the shape changed a lot relative to rounding
    deform = [np.linalg.norm(np.diff(x, axis=0) - np.diff(positions[0], axis=0)) for x in positions]
    assert max(deform) > 1e-3


# --------------------------------------------------------------------------- 6. settling
def test_soft_cube_comes_to_rest_on_ground():
    """A 2x2x2-cell soft cube dropped 5 cm comes to rest (max speed < 1e-3 m/s after 2 s).

    Stability of the explicit step for the lightest (corner) particle, m = 5.2 g, dt = 1 ms:
    ground kd dt / m = 0.96 < 2; the friction law bounds its own near-sticking slope by m / dt.
    """
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.2)
    b.add_soft_grid((0.0, 0.0, 0.05), dim_x=2, dim_y=2, dim_z=2, cell_x=0.05, cell_y=0.05, cell_z=0.05,
                    density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=30.0, radius=0.005)
    model = b.finalize(dtype=wp.float64)
    dt, n = 1.0e-3, 2000
    state0 = model.state()
    mass = model.particle_mass.numpy()
    track = {"min_ratio": np.inf, "max_speed_early": 0.0}

    def observe(k, s):
        if k % 20 == 0:
            track["min_ratio"] = min(track["min_ratio"], tet_volume_ratios(model, s).min())
            if k <= 500:
                track["max_speed_early"] = max(track["max_speed_early"], np.linalg.norm(s.particle_qd.numpy(), axis=1).max())
            if k == n // 2:
                track["com_half"] = mass @ s.particle_q.numpy() / mass.sum()

    final = rollout(model, state0, n, dt, observe)
    speed = np.linalg.norm(final.particle_qd.numpy(), axis=1).max()
    x = final.particle_q.numpy()
    assert track["max_speed_early"] > 0.5  # it did fall and hit the ground
    assert speed < 1e-3, speed
    assert track["min_ratio"] > 0.0 and tet_volume_ratios(model, final).min() > 0.0
    assert 0.0 < x[:, 2].min() < 0.005  # resting on the ground, penetrating less than its radius
    # no creep: the centre of mass did not move over the second half (the bounces of the
    # asymmetric tet mesh may shift it sideways by a few mm before that)
    assert np.linalg.norm(mass @ x / mass.sum() - track["com_half"]) < 1e-5
