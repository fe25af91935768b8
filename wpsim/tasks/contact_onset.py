"""Contact onset and gradients: impacts at their time of impact against the analytic
continuous-time derivative, and damping that ramps in with depth against central differences.

- Two-ball shot: a cue ball (0.17 kg, radius 28.6 mm) at ``speed`` hits an equal resting ball
  head on after a 0.1 m gap, no gravity; restitution e = 0.9. With impacts the target leaves
  at (1 + e) / 2 of the cue's speed, so d x_target(0.4 s) / d speed = (1 + e) / 2 * 0.4 s
  exactly. Penalty contact (1 kN/m, 1 N s/m) is the comparison.
- Bounce: a 50 mm ball thrown up at ``rise`` from 0.6 m bounces once (restitution 0.7) on the
  ground or a static box's top; its height at 0.5 s and the derivative have closed forms.
- Cloth landing: a 4x4-cell cloth (2 kg/m^2) falls onto damped penalty ground (1 kN/m,
  3 N s/m); central differences of a random linear probe of its final positions along +z of
  every initial velocity, with full damping from first touch and with damping ramped in over
  2 mm (``ModelBuilder.contact_damping_depth``).

``python -m wpsim.apps.contact_onset [--out FILE.json]`` prints the figures.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.builder import ModelBuilder
from wpsim.diff.gradcheck import check_gradient
from wpsim.diff.losses import linear_state_loss
from wpsim.solvers import SemiImplicitSolver
from wpsim.solvers.rollout import simulate

RADIUS, MASS, GAP, SPAN, RESTITUTION = 0.0286, 0.17, 0.1, 0.4, 0.9  # m, kg, m, s, -: the shot
HEIGHT, BOUNCE_SPAN, G, BOUNCE_RESTITUTION, BALL = 0.6, 0.5, 9.81, 0.7, 0.05  # m, s, m/s^2, -, m
SHOT_EXACT = 0.5 * (1.0 + RESTITUTION) * SPAN
"""d x_target(SPAN) / d speed (s) of the impact shot."""
CLOTH_EPS = (1e-4, 3e-5, 1e-5, 3e-6, 1e-6)
"""Central-difference steps (m/s) of the cloth's vertical velocities."""


def final_coordinate(builder: ModelBuilder, steps: int, dt: float, particle: int, axis: int, wrt: int,
                     wrt_axis: int, gradient_width: float = 0.0, control_force=None):
    """Roll ``builder``'s model out (float64) and return (the final coordinate ``axis`` of
    ``particle`` (m), its tape derivative w.r.t. the initial velocity of particle ``wrt``
    along ``wrt_axis`` (s), the same w.r.t. its initial position (-)). ``control_force``:
    (P, 3) N held over the rollout."""
    model = builder.finalize(requires_grad=True, dtype=wp.float64)
    solver = SemiImplicitSolver(model, contact_gradient_width=gradient_width)
    state = model.state(requires_grad=True)
    control = model.control()
    if control_force is not None:
        control.particle_f_ext.assign(np.asarray(control_force, dtype=np.float64))
    pick = np.zeros((model.particle_count, 3))
    pick[particle, axis] = 1.0
    tape = wp.Tape()
    with tape:
        final = simulate(solver, state, steps, dt, control)
        loss = linear_state_loss(final, wp.array(pick, dtype=wp.vec3d), wp.zeros(model.particle_count, dtype=wp.vec3d))
    tape.backward(loss)
    if not solver.health().ok:
        raise RuntimeError(f"the rollout is unhealthy: {solver.health()}")
    return (float(loss.numpy()[0]), float(state.particle_qd.grad.numpy()[wrt, wrt_axis]),
            float(state.particle_q.grad.numpy()[wrt, wrt_axis]))


def shot(speed: float, dt: float, impacts: bool) -> tuple[float, float]:
    """(target ball's final x (m), its tape derivative w.r.t. the cue speed (s))."""
    b = ModelBuilder(gravity=0.0)
    b.add_particle((0.0, 0.0, 0.0), (speed, 0.0, 0.0), MASS, RADIUS)
    b.add_particle((2.0 * RADIUS + GAP, 0.0, 0.0), (0.0, 0.0, 0.0), MASS, RADIUS)
    b.set_particle_contact(True, ke=1.0e3, kd=1.0, mu=0.0)
    if impacts:
        b.set_particle_impacts(True, RESTITUTION)
    return final_coordinate(b, int(round(SPAN / dt)), dt, 1, 0, 0, 0)[:2]


def bounce_height(rise: float) -> float:
    """Analytic height (m) at BOUNCE_SPAN of a ball thrown up at ``rise`` (m/s) from HEIGHT,
    after it has bounced once (at about 0.45 s)."""
    drop = HEIGHT - BALL
    t_hit = (rise + np.sqrt(rise * rise + 2.0 * G * drop)) / G
    rebound = BOUNCE_RESTITUTION * (G * t_hit - rise)
    after = BOUNCE_SPAN - t_hit
    return BALL + rebound * after - 0.5 * G * after * after


def bounce_derivative(rise: float) -> float:
    """d bounce_height / d rise (s), by a central difference of the closed form."""
    h = 1e-6
    return (bounce_height(rise + h) - bounce_height(rise - h)) / (2.0 * h)


def bounce(rise: float, dt: float, on_box: bool) -> tuple[float, float]:
    """(final height (m), tape derivative w.r.t. ``rise`` (s)) of the bounce, with impacts."""
    b = ModelBuilder(gravity=-G)
    b.add_particle((0.0, 0.0, HEIGHT), (0.3, 0.0, rise), 1.0, BALL)
    if on_box:
        b.add_shape_box(pos=(0.0, 0.0, -0.5), hx=1.0, hy=1.0, hz=0.5, mu=0.0)
    else:
        b.add_ground_plane(mu=0.0)
    b.set_particle_impacts(True, BOUNCE_RESTITUTION)
    return final_coordinate(b, int(round(BOUNCE_SPAN / dt)), dt, 0, 2, 0, 2)[:2]


def sweep(fn, start: float, width: float, count: int = 5):
    """(inputs, losses, tape derivatives) of ``fn(x) -> (loss, derivative)`` over a sweep."""
    values = np.linspace(start, start + width, count)
    results = [fn(v) for v in values]
    return values, np.array([r[0] for r in results]), np.array([r[1] for r in results])


def cloth_vertical_differences(depth: float) -> tuple[float, np.ndarray]:
    """(tape derivative, central differences at CLOTH_EPS) of the cloth landing along +z of
    every initial velocity, with damping ramped in over ``depth`` (m)."""
    b = ModelBuilder()
    b.add_cloth_grid(pos=(0.0, 0.0, 0.08), dim_x=4, dim_y=4, cell_x=0.05, cell_y=0.05, density=2.0,
                     tri_mu=200.0, tri_lambda=400.0, tri_kd=0.01, bend_ke=0.001, bend_kd=0.0001, vel=(0.3, 0.0, -1.0))
    b.add_ground_plane(ke=1.0e3, kd=3.0, mu=0.3)
    b.contact_damping_depth = depth
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state = model.state(requires_grad=True)
    weights = wp.array(np.random.default_rng(1).standard_normal((model.particle_count, 3)), dtype=wp.vec3d)
    still = wp.zeros(model.particle_count, dtype=wp.vec3d)
    direction = np.zeros((model.particle_count, 3))
    direction[:, 2] = 1.0
    result = check_gradient(lambda: linear_state_loss(simulate(solver, state, 150, 1e-3), weights, still),
                            state.particle_qd, eps=list(CLOTH_EPS), direction=direction)
    return result.tape, np.array([fd for _, fd, _ in result.sweep])


def study() -> dict:
    """Every figure of the module docstring."""
    out = {"shot_exact_s": SHOT_EXACT, "shot": {}, "bounce": {}, "cloth": {}}
    for dt in (1e-3, 5e-4, 2.5e-4):
        for impacts in (False, True):
            speeds, losses, tape = sweep(lambda v, dt=dt, impacts=impacts: shot(v, dt, impacts), 1.0, 2.0 * dt / GAP)
            slopes = np.diff(losses) / np.diff(speeds)
            out["shot"][f"{'impacts' if impacts else 'penalty'} dt={dt:g}"] = {
                "tape_s": tape.tolist(), "sweep_slope_s": slopes.tolist(),
                "worst_tape_error": float(np.abs(tape / SHOT_EXACT - 1.0).max()),
                "worst_slope_error": float(np.abs(slopes / SHOT_EXACT - 1.0).max())}
        for on_box in (False, True):
            rises, _, tape = sweep(lambda v, dt=dt, on_box=on_box: bounce(v, dt, on_box), 1.0, 0.02)
            exact = np.array([bounce_derivative(v) for v in rises])
            out["bounce"][f"{'box' if on_box else 'ground'} dt={dt:g}"] = {
                "worst_tape_error": float(np.abs(tape / exact - 1.0).max())}
    for depth in (0.0, 2e-3):
        tape, fd = cloth_vertical_differences(depth)
        out["cloth"][f"damping depth {depth * 1e3:g} mm"] = {
            "tape": tape, "central_differences": fd.tolist(),
            "fd_spread": float(np.ptp(fd) / np.abs(fd).max()), "fd_vs_tape_at_1e-6": float(abs(fd[-1] / tape - 1.0))}
    return out
