"""Receding-horizon control (``wpsim.opt.mpc``) and imitation (``wpsim.opt.imitation``) on the
slider of test_trajopt (a double integrator, exactly linear): every re-plan applies the first
control of the LQ optimum from the current state, the hybrid keeps an optimal policy's controls
(residual zero) and corrects a poor one, the controller callback of ``simulate`` and ``run``
agree, and bad input is named. (The box-push comparison of iLQR alone, the distilled policy and
the hybrid is asserted by ``examples/box_push_mpc.py --test``, run by test_examples.)"""

import numpy as np
import pytest
import warp as wp
from test_trajopt import slider_optimum, slider_problem

from wpsim.opt.mpc import RecedingHorizon
from wpsim.solvers.rollout import simulate

wp.config.log_level = wp.LOG_WARNING

X0 = np.array([[0.0, 0.0], [0.4, -0.5]])
BUDGET = 2 * 3 + 1  # the start and two iterations of 2 linearisation rows and one trial


def test_each_replan_applies_the_first_control_of_the_lq_optimum():
    """From the states the closed loop reaches, each control is the first of the least-squares
    optimum over the horizon; the loop drives both sliders towards x = 1 m."""
    mpc = RecedingHorizon(slider_problem(X0, steps=8), BUDGET, ilqr_options={"mu0": 1e-12, "min_mu": 1e-12})
    loop = mpc.run(X0, plan_steps=12)
    for k in (0, 5, 11):
        probe = slider_problem(loop.states[:, k], steps=8)
        np.testing.assert_allclose(loop.controls[:, k, 0], slider_optimum(probe)[0][:, 0], rtol=1e-7, atol=1e-9)
    assert np.all(np.abs(loop.states[:, -1, 0] - 1.0) < 0.1 * np.abs(X0[:, 0] - 1.0))
    assert len(loop.plan_s) == 12 and loop.seconds_per_control_step > 0.0 and loop.events == []


def test_simulate_controller_runs_the_same_loop():
    """``RecedingHorizon`` as ``simulate``'s controller (a re-plan every plan step of 2
    simulator steps) gives the states of ``run``."""
    problem = slider_problem(X0, steps=6)
    loop = RecedingHorizon(problem, BUDGET).run(X0, plan_steps=5)
    plant = problem.builder.replicated(2).finalize(dtype=wp.float64)
    state = plant.state()
    problem.plans.write_state(state, X0)
    mpc = RecedingHorizon(problem, BUDGET)
    states = simulate(problem.make_solver(plant), state, 5 * problem.substeps, problem.dt, keep_states=True,
                      controller=mpc)
    reached = np.stack([problem.plans.read_state(states[k * problem.substeps]) for k in range(6)], axis=1)
    np.testing.assert_allclose(reached, loop.states, rtol=0, atol=1e-12)


def test_hybrid_keeps_an_optimal_policy_and_corrects_a_poor_one():
    """Around the open-loop optimum of the whole horizon as its nominal policy, the first
    plan's residual is zero; around a zero policy, the plan is iLQR's own optimum."""
    problem = slider_problem(X0, steps=8)
    optimum = slider_optimum(problem)[0]
    hybrid = RecedingHorizon(problem, BUDGET + 1, nominal=lambda k, x: optimum[:, k, None])
    np.testing.assert_allclose(hybrid.act(0, X0), optimum[:, 0, None], rtol=1e-9, atol=1e-12)
    zero = RecedingHorizon(problem, BUDGET + 1, nominal=lambda k, x: np.zeros((len(x), 1)),
                           ilqr_options={"mu0": 1e-12, "min_mu": 1e-12})
    np.testing.assert_allclose(zero.act(0, X0), optimum[:, 0, None], rtol=1e-7, atol=1e-9)


def test_bad_input_is_named():
    """Too small a budget, states of another number of worlds and a non-finite state."""
    problem = slider_problem(X0, steps=4)
    with pytest.raises(ValueError, match=r"budget must be an integer >= 4 rollouts per world per re-plan, got 3"):
        RecedingHorizon(problem, 3)
    with pytest.raises(ValueError, match=r"restart: x0 must hold the problem's 2 worlds, got 1"):
        problem.restart(X0[:1])
    with pytest.raises(ValueError, match=r"x0 is not finite in world 1, entry 0"):
        RecedingHorizon(problem, 4).run(np.array([[0.0, 0.0], [np.nan, 0.0]]), 2)


def test_imitation_recovers_a_linear_controller_and_refuses_bad_data():
    """Behaviour cloning of u = clip(G o) (a saturating linear law) fits it to 2e-2 of the
    bounds (RMS) on held-out observations; non-finite data and controls beyond the bounds are named."""
    from wpsim.opt.imitation import fit_imitation

    rng = np.random.default_rng(0)
    gain = np.array([[0.8, -0.5, 0.2], [0.1, 0.4, -0.9]])
    obs = rng.normal(size=(400, 3))
    policy = fit_imitation(obs, np.clip(obs @ gain.T, -1.0, 1.0), -1.0, 1.0, epochs=1000)
    held_out = rng.normal(size=(100, 3))
    error = policy(held_out) - np.clip(held_out @ gain.T, -1.0, 1.0)
    assert np.abs(error).max() < 0.1 and np.sqrt(np.mean(error ** 2)) < 2e-2
    assert policy.losses[-1] < 1e-2 * policy.losses[0]
    with pytest.raises(ValueError, match=r"observations\[3, 1\] is not finite"):
        bad = obs.copy()
        bad[3, 1] = np.inf
        fit_imitation(bad, np.zeros((400, 2)), -1.0, 1.0)
    with pytest.raises(ValueError, match=r"controls\[0, 1\] = 2.0 is outside its bounds \[-1.0, 1.0\]"):
        fit_imitation(obs[:1], np.array([[0.0, 2.0]]), -1.0, 1.0)
