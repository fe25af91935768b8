"""Contact whose onset does not jump with the inputs: impacts at their time of impact
(against the analytic continuous-time derivative), damping that ramps in with depth, and the
smoothed contact gradient for particles."""

import numpy as np
import pytest
import warp as wp

from wpsim import ImplicitEulerSolver, ModelBuilder, SemiImplicitSolver
from wpsim.solvers.rollout import simulate
from wpsim.tasks.contact_onset import (
    GAP,
    SHOT_EXACT,
    bounce,
    bounce_derivative,
    cloth_vertical_differences,
    final_coordinate,
    shot,
    sweep,
)


@pytest.mark.parametrize("dt", [1e-3, 2.5e-4])
def test_impact_shot_matches_the_continuous_time_derivative(dt):
    """Equal balls, restitution e: the target leaves at (1 + e) / 2 of the cue's speed, so
    d x_target(T) / d speed = (1 + e) / 2 T exactly. The tape derivative and the loss's slope
    over two periods of the step grid (speed steps dt v^2 / gap) agree with it within 5 %."""
    speeds, losses, tape = sweep(lambda v: shot(v, dt, True), 1.0, 2.0 * dt / GAP)
    np.testing.assert_allclose(tape, SHOT_EXACT, rtol=0.05)
    np.testing.assert_allclose(np.diff(losses) / np.diff(speeds), SHOT_EXACT, rtol=0.05)


def test_penalty_shot_has_the_sawtooth_that_impacts_remove():
    """The same shot with penalty contact (default onset-ramped damping) at 1 ms: its slope
    over the sweep wanders with the step grid (where the spring's first samples fall moves
    with the speed), so the check above can fail."""
    speeds, losses, _ = sweep(lambda v: shot(v, 1e-3, False), 1.0, 2.0 * 1e-3 / GAP)
    slopes = np.diff(losses) / np.diff(speeds)
    assert slopes.max() - slopes.min() > 0.2 * abs(slopes.mean())


@pytest.mark.parametrize("on_box", [False, True], ids=["ground", "box"])
def test_bounce_converges_to_the_continuous_time_derivative(on_box):
    """A ball bouncing once on the ground (or a static box's top): the tape derivative of its
    final height w.r.t. the throw speed is within 5 % of the analytic one at dt = 1 ms and
    0.25 ms and closer at the smaller step; the loss's slope over a sweep agrees too."""
    errors = []
    for dt in (1e-3, 2.5e-4):
        rises, losses, tape = sweep(lambda v: bounce(v, dt, on_box), 1.0, 0.02)
        exact = np.array([bounce_derivative(v) for v in rises])
        np.testing.assert_allclose(tape, exact, rtol=0.05)
        mid = 0.5 * (exact[1:] + exact[:-1])
        np.testing.assert_allclose(np.diff(losses) / np.diff(rises), mid, rtol=0.05)
        errors.append(np.abs(tape / exact - 1.0).max())
    assert errors[1] < 0.5 * errors[0]


def _two_ball_state(restitution: float, mu: float, offset: float):
    """The final state of a 0.3 kg ball at (1, 0, 0.2) m/s striking a resting 0.1 kg one
    off-centre by ``offset`` (m), with impacts."""
    b = ModelBuilder(gravity=0.0)
    b.set_particle_contact(True, mu=mu)
    b.set_particle_impacts(True, restitution)
    b.add_particle((0.0, 0.0, 0.0), (1.0, 0.0, 0.2), 0.3, 0.05)
    b.add_particle((0.15, offset, 0.0), (0.0, 0.0, 0.0), 0.1, 0.05)
    model = b.finalize("cpu", dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state = simulate(solver, model.state(), 200, 1e-3)
    assert solver.health().ok
    return state


def test_oblique_elastic_impact_conserves_momentum_and_energy():
    """An oblique, frictionless, elastic impact of unequal balls keeps momentum and kinetic
    energy; with restitution 0.5 and friction momentum is still kept and energy is lost."""
    mass = np.array([0.3, 0.1])[:, None]
    start_p = 0.3 * np.array([1.0, 0.0, 0.2])
    start_e = 0.5 * 0.3 * (1.0 + 0.04)
    state = _two_ball_state(1.0, 0.0, 0.06)
    v = state.particle_qd.numpy()
    assert np.linalg.norm(v[1]) > 0.1  # the balls did collide
    np.testing.assert_allclose((mass * v).sum(axis=0), start_p, atol=1e-12)
    np.testing.assert_allclose(0.5 * (mass[:, 0] * (v * v).sum(axis=1)).sum(), start_e, rtol=1e-12)
    state = _two_ball_state(0.5, 0.3, 0.06)
    v = state.particle_qd.numpy()
    np.testing.assert_allclose((mass * v).sum(axis=0), start_p, atol=1e-12)
    assert 0.5 * (mass[:, 0] * (v * v).sum(axis=1)).sum() < 0.95 * start_e


def test_a_ball_with_impacts_comes_to_rest_on_penalty_contact():
    """Dropped with restitution 0.5, a ball stops bouncing and rests at its penalty depth."""
    b = ModelBuilder()
    b.add_ground_plane(ke=1.0e4, kd=10.0)
    b.add_particle((0.0, 0.0, 0.3), mass=0.1, radius=0.05)
    b.set_particle_impacts(True, 0.5)
    model = b.finalize("cpu", dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state = simulate(solver, model.state(), 3000, 1e-3)
    assert solver.health().ok
    np.testing.assert_allclose(state.particle_q.numpy()[0, 2], 0.05 - 0.1 * 9.81 / 1.0e4, atol=2e-4)
    assert abs(state.particle_qd.numpy()[0, 2]) < 1e-3


def test_impact_and_damping_settings_are_checked():
    b = ModelBuilder()
    with pytest.raises(ValueError, match="restitution"):
        b.set_particle_impacts(True, 1.5)
    b.add_particle((0.0, 0.0, 1.0))
    b.contact_damping_depth = -1e-3
    with pytest.raises(ValueError, match="contact_damping_depth"):
        b.finalize("cpu")
    b.contact_damping_depth = 0.0
    b.set_particle_impacts(True, 0.5)
    with pytest.raises(ValueError, match="particle impacts"):
        ImplicitEulerSolver(b.finalize("cpu"))


def test_onset_damping_makes_a_cloth_landing_differentiable_along_the_fall():
    """Full damping from first touch makes the loss jump with the cloth's vertical speed:
    central differences along +z never settle. Damping ramped in over 2 mm makes it
    continuous: the differences settle on the tape derivative."""
    _, jumpy = cloth_vertical_differences(0.0)
    assert np.ptp(jumpy) > 0.05 * np.abs(jumpy).max()
    tape, smooth = cloth_vertical_differences(2.0e-3)
    np.testing.assert_allclose(smooth[-3:], tape, rtol=1e-5)


def _slide(height: float, width: float):
    """A ball sliding at 1 m/s with its bottom ``height`` (m) above a rough ground (below it:
    pressed in by a force that holds it there), without gravity, 0.1 s; (final x (m), its
    tape derivative w.r.t. the initial height) with contact gradient width ``width`` (m)."""
    b = ModelBuilder(gravity=0.0)
    b.add_ground_plane(ke=1.0e3, kd=0.0, mu=0.5)
    b.add_particle((0.0, 0.0, 0.05 + height), (1.0, 0.0, 0.0), 0.1, 0.05)
    x, _, dx_dz = final_coordinate(b, 100, 1e-3, 0, 0, 0, 2, width, [[0.0, 0.0, 1.0e3 * min(height, 0.0)]])
    return x, dx_dz


def test_smoothed_particle_contact_gradient_sees_a_contact_before_it_happens():
    """A ball gliding 1 mm above rough ground: its exact gradient w.r.t. its height is 0 (no
    contact); with a gradient width of 1 mm the backward sees the friction it would meet
    lower down, so raising it would carry it further (positive), while the forward pass and
    the loss are unchanged."""
    loss_exact, exact = _slide(1e-3, 0.0)
    loss_smooth, smooth = _slide(1e-3, 1e-3)
    assert exact == 0.0 and smooth > 0.0
    assert loss_smooth == loss_exact


def test_smoothed_particle_contact_gradient_bias_shrinks_with_the_width():
    """Pressed 0.5 mm into the ground, the smoothed gradient differs from the exact one by an
    amount that falls with the width (order w bias)."""
    _, exact = _slide(-5e-4, 0.0)
    bias = [abs(_slide(-5e-4, w)[1] - exact) for w in (2e-4, 1e-4, 5e-5)]
    assert bias[0] > bias[1] > bias[2] and bias[2] < 0.1 * abs(exact)
