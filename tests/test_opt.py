"""wpsim.opt: declared parameters (bounds, log-space, scaling, derived), problems over
rollouts, optimisers and their results.

Gradients of the problem (through the parameter transform and the derived-parameter chain
rule) are checked against central differences of the problem's own loss in float64; fits
recover parameters that generated the data.
"""

import itertools
import json
import math
import re

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.validation import lame_parameters
from wpsim.diff import Rollout
from wpsim.diff.losses import squared_distance
from wpsim.io import plots
from wpsim.opt import DerivedParameter, NonFiniteLoss, Parameter, Problem, minimize

STEPS, DT = 60, 2.0e-3
KE_TRUE, KD_TRUE = 400.0, 2.0


def hanging_mass(ke=KE_TRUE, kd=KD_TRUE):
    """A particle on a spring below a fixed one (float64), plus a free particle that no
    loss term sees; released with a sideways push."""
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), mass=0.0)
    b.add_particle((0.1, 0.0, 0.8), (0.5, 0.0, 0.0), mass=0.2)
    b.add_particle((2.0, 0.0, 1.0), mass=0.1)
    b.add_spring(0, 1, ke=ke, kd=kd)
    return b.finalize(dtype=wp.float64, requires_grad=True)


def trajectory(model) -> list:
    """Particle positions after each step, as the measured data of a fit."""
    solver, state = wpsim.SemiImplicitSolver(model), model.state(requires_grad=False)
    states = wpsim.simulate(solver, state, STEPS, DT, keep_states=True)
    return [s.particle_q.numpy()[1:2].copy() for s in states]


def spring_problem(parameters, targets, model=None):
    model = model or hanging_mass(300.0, 1.0)
    measured = [wp.array(t, dtype=wp.vec3d) for t in targets]

    def loss_fn(k, state, loss):
        if k > 0:
            squared_distance(state.particle_q[1:2], measured[k], loss=loss)

    rollout = Rollout(wpsim.SemiImplicitSolver(model), STEPS, DT, loss_fn, mode="full")
    return Problem(rollout, model.state(), parameters), model


@pytest.fixture(scope="module")
def measured():
    return trajectory(hanging_mass())


def central_difference(problem, x, i, eps):
    up, down = x.copy(), x.copy()
    up[i] += eps
    down[i] -= eps
    return (problem.loss(up) - problem.loss(down)) / (2.0 * eps)


def test_problem_gradient_matches_central_differences(measured):
    params = [
        Parameter("model.spring_ke", log=True, lower=1.0),
        Parameter("model.spring_kd", index=0, lower=0.0, upper=10.0),
        Parameter("model.particle_mass", index=[1], log=True),
        Parameter("state.particle_qd", index=1, scale=0.1),
        Parameter("model.gravity"),
    ]
    problem, _ = spring_problem(params, measured)
    assert problem.params.labels[:3] == ["model.spring_ke[0]", "model.spring_kd[0]", "model.particle_mass[1]"]
    assert problem.params.units[:4] == ["N/m", "N s/m", "kg", "m/s"]
    x = problem.x0
    _, grad = problem.loss_and_grad(x)
    for i, label in enumerate(problem.params.labels):
        eps = 1e-6 * max(abs(x[i]), 1.0)
        fd = central_difference(problem, x, i, eps)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-12), label
    # the optimiser's vector: z = log x (log-space) or x / scale, and its gradient by the chain rule
    z = problem.params.to_internal(x)
    assert z[0] == pytest.approx(math.log(300.0)) and z[1] == pytest.approx(1.0)
    assert problem.params.to_physical(z) == pytest.approx(x)
    gz = problem.params.internal_gradient(x, grad)
    assert gz[0] == pytest.approx(grad[0] * 300.0) and gz[5] == pytest.approx(grad[5] * 0.1)


def lame_build(theta):
    mu, lam = lame_parameters(theta[0], theta[1])
    return {"model.tet_mu": np.full(6, mu[0]), "model.tet_lambda": np.full(6, lam[0])}


def test_derived_parameter_jacobian_and_gradient():
    """Young's modulus and Poisson ratio -> Lame arrays of every tet: the central-difference
    Jacobian of the host function matches the analytic one, and the problem gradient
    matches central differences of the loss."""
    b = wpsim.ModelBuilder()
    b.add_soft_grid(pos=(0.0, 0.0, 0.5), vel=(0.3, 0.0, -0.5), dim_x=1, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1,
                    cell_z=0.1, density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=1.0)
    b.add_particles([(0.3, 0.0, 0.5)], masses=0.1)
    b.add_spring(0, 8, ke=50.0)
    model = b.finalize(dtype=wp.float64, requires_grad=True)
    target = wp.array(np.full((model.particle_count, 3), 0.1), dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == 40:
            squared_distance(state.particle_q, target, loss=loss)

    material = DerivedParameter("material", [2.0e4, 0.3], lame_build, labels=("young_modulus", "poisson_ratio"),
                                units=("Pa", "-"), lower=[1.0e3, 0.0], upper=[1.0e6, 0.49])
    rollout = Rollout(wpsim.SemiImplicitSolver(model), 40, 1.0e-3, loss_fn, mode="checkpoint")
    problem = Problem(rollout, model.state(), [material])
    E, nu = 2.0e4, 0.3
    jac = problem.params.parts[0].jacobian(np.array([E, nu]))
    dmu = [1.0 / (2.0 * (1.0 + nu)), -E / (2.0 * (1.0 + nu) ** 2)]
    dlam = [nu / ((1.0 + nu) * (1.0 - 2.0 * nu)), E * (1.0 + 2.0 * nu**2) / ((1.0 + nu) * (1.0 - 2.0 * nu)) ** 2]
    assert jac["model.tet_mu"] == pytest.approx(np.tile(dmu, (6, 1)), rel=1e-7)
    assert jac["model.tet_lambda"] == pytest.approx(np.tile(dlam, (6, 1)), rel=1e-7)
    x = problem.x0
    _, grad = problem.loss_and_grad(x)
    for i, eps in enumerate((2.0, 1e-5)):
        assert grad[i] == pytest.approx(central_difference(problem, x, i, eps), rel=1e-5)
    # writing the vector writes the arrays
    problem.params.write(np.array([4.0e4, 0.25]))
    mu, lam = lame_parameters(4.0e4, 0.25)
    assert model.tet_mu.numpy() == pytest.approx(np.full(6, mu[0]))
    assert model.tet_lambda.numpy() == pytest.approx(np.full(6, lam[0]))


@pytest.mark.parametrize("method", ["lbfgsb", "adam"])
def test_fit_recovers_spring_stiffness_and_damping(measured, method, tmp_path):
    params = [Parameter("model.spring_ke", log=True, name="ke"), Parameter("model.spring_kd", log=True, name="kd")]
    problem, model = spring_problem(params, measured)
    iterations = 40 if method == "lbfgsb" else 150
    result = minimize(problem, method, iterations=iterations, lr=0.05, progress=False)
    tolerance = 1e-4 if method == "lbfgsb" else 0.03
    assert result.x[0] == pytest.approx(KE_TRUE, rel=tolerance)
    assert result.x[1] == pytest.approx(KD_TRUE, rel=tolerance)
    assert result.loss < 1e-3 * result.loss0
    # the fitted values are left in the model, the history starts at x0 and keeps the best
    assert model.spring_ke.numpy()[0] == pytest.approx(result.x[0])
    assert result.history[0]["x"] == pytest.approx([300.0, 1.0])
    assert min(h["loss"] for h in result.history) == pytest.approx(result.loss)
    assert result.rollouts >= len(result.history) - 1 and result.gradients == result.rollouts
    data = json.loads(result.save_json(tmp_path / "fit.json").read_text())
    assert [p["name"] for p in data["parameters"]] == ["ke", "kd"]
    assert data["parameters"][0]["unit"] == "N/m" and data["parameters"][0]["fitted"] == pytest.approx(result.x[0])
    assert result.plot(tmp_path / "fit.png").stat().st_size > 10_000
    assert "ke " in result.table() and "N/m" in result.table()


def test_zero_order_baseline_with_the_same_rollout_budget(measured):
    params = [Parameter("model.spring_ke", log=True), Parameter("model.spring_kd", log=True)]
    gradient = minimize(spring_problem(params, measured)[0], "lbfgsb", iterations=40, progress=False)
    budget = gradient.rollouts
    zero_order = minimize(spring_problem(params, measured)[0], "nelder-mead", iterations=10_000, max_rollouts=budget,
                          progress=False)
    assert zero_order.rollouts <= budget and zero_order.gradients == 0
    assert "budget" in zero_order.message
    assert zero_order.loss > 10.0 * gradient.loss  # same rollouts, the gradient fit gets much closer
    assert zero_order.loss < zero_order.loss0


@pytest.mark.parametrize(
    "parameter, message",
    [
        (Parameter("model.spring_kee"), r"unknown parameter 'model.spring_kee'.*did you mean model.spring_ke"),
        (Parameter("body.mass"), "must be 'model.<field>'"),
        (Parameter("model.spring_indices"), "integer/topology field"),
        (Parameter("model.particle_mass", index=7), "row 7 out of range"),
        (Parameter("model.spring_ke", lower=500.0), r"initial value 300 N/m is outside its bounds \[500, inf\]"),
        (Parameter("state.particle_qd", index=0, log=True), r"particle_qd\[0, 0\]: log-space needs a positive value"),
        (Parameter("model.tet_mu"), "the array is empty"),
    ],
)
def test_bad_parameters_are_named(measured, parameter, message):
    with pytest.raises(ValueError, match=message):
        spring_problem([parameter], measured)


def test_entries_declared_twice_and_missing_gradients_are_errors(measured):
    with pytest.raises(ValueError, match="declared twice"):
        spring_problem([Parameter("model.particle_mass", index=1), Parameter("model.particle_mass", index=[1, 2])],
                       measured)
    model = hanging_mass(300.0, 1.0)
    model_no_grad = wpsim.ModelBuilder()
    model_no_grad.add_particle((0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="requires_grad"):
        spring_problem([Parameter("model.particle_mass")], measured, model_no_grad.finalize(dtype=wp.float64))
    assert model.particle_count == 3


def test_parameter_without_gradient_path_is_reported(measured):
    """Particle 2 is seen by no loss term: its mass has no path to the loss."""
    problem, _ = spring_problem([Parameter("model.spring_ke"), Parameter("model.particle_mass", index=2)], measured)
    with pytest.warns(UserWarning, match=r"no gradient path to the loss from model.particle_mass\[2\]"):
        result = minimize(problem, "lbfgsb", iterations=3, progress=False)
    assert result.no_gradient == ["model.particle_mass[2]"]
    assert result.to_dict()["no_gradient"] == ["model.particle_mass[2]"]


@wp.kernel
def sqrt_height_loss(q: wp.array(dtype=wp.vec3d), weight: wp.float64, centre: wp.float64,
                     loss: wp.array(dtype=wp.float64)):
    """loss += weight sqrt(z - 0.5) + 4 (z - centre)^2 of particle 0: NaN once z < 0.5."""
    z = q[0][2]
    wp.atomic_add(loss, 0, weight * wp.sqrt(z - wp.float64(0.5)) + wp.float64(4.0) * (z - centre) ** wp.float64(2.0))


def sqrt_height_problem(weight: float, centre: float) -> Problem:
    """The height z of a particle (start 0.9 m) under ``sqrt_height_loss``."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particle((0.0, 0.0, 0.9), mass=1.0)
    model = b.finalize(dtype=wp.float64, requires_grad=True)

    def loss_fn(k, state, loss):
        if k == 1:
            wp.launch(sqrt_height_loss, dim=1, inputs=[state.particle_q, weight, centre], outputs=[loss])

    rollout = Rollout(wpsim.SemiImplicitSolver(model), 1, 1e-3, loss_fn, mode="full")
    return Problem(rollout, model.state(), [Parameter("state.particle_q", index=0)])


@pytest.mark.filterwarnings("ignore:no gradient path")
def test_nan_loss_stops_with_the_best_result_and_names_the_values():
    """The minimum lies on the edge of the NaN region: Adam backs off from it until its step
    halved MAX_BACKOFFS times is still too long, then stops with the best point."""
    problem = sqrt_height_problem(1.0, 0.4)
    result = minimize(problem, "adam", iterations=200, lr=0.2, progress=False)
    assert not result.success
    assert "stopped at iteration" in result.message and "state.particle_q[0, 2] = " in result.message
    assert "after 20 halvings of the step" in result.message
    assert np.isfinite(result.loss) and result.x[2] >= 0.5
    with pytest.raises(NonFiniteLoss, match="the loss is nan"):
        problem.loss(np.array([0.0, 0.0, 0.2]))
    with pytest.raises(NonFiniteLoss, match="the loss is nan"):
        minimize(problem, "adam", iterations=3, x0=[0.0, 0.0, 0.2], progress=False)


@pytest.mark.parametrize("method, options", [("lbfgsb", {}), ("adam", {"lr": 0.3}), ("nelder-mead", {})])
@pytest.mark.filterwarnings("ignore:no gradient path")
def test_a_nan_trial_point_is_backed_off_from(method, options):
    """A NaN below z = 0.5 m used to end the run at the first trial step across it (the
    minimum is at 0.55 m); now each method steps back and says so."""
    result = minimize(sqrt_height_problem(0.0, 0.55), method, iterations=100, progress=False, **options)
    assert result.success and result.x[2] == pytest.approx(0.55, abs=1e-3)
    backoffs = sum(h.get("backoffs", 0) for h in result.history)  # those before the last iteration
    said = re.search(r"backed off from (\d+) trial point\(s\) with a non-finite loss or gradient \(first: the loss "
                     r"is nan at state.particle_q\[0, 0\] = ", result.message)
    assert said and int(said[1]) >= backoffs >= 1
    assert sum(h.get("backoffs", 0) for h in result.to_dict()["history"]) == backoffs


def drawn_tick_labels(axis) -> list:
    """The labels of an axis's major ticks within its view limits."""
    lo, hi = sorted(axis.get_view_interval())
    return [tick.label1 for tick, at in zip(axis.get_major_ticks(), axis.get_majorticklocs()) if lo <= at <= hi]


def test_history_plot_texts_do_not_overlap_at_nine_parameters(tmp_path, monkeypatch):
    """At 9 parameters the stacked panels' vertical labels ran into each other."""
    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figures.append(fig))
    labels = [f"model.joint_damping[{i}] (N m s/rad or N s/m)" for i in range(9)]
    traces = {label: np.linspace(0.0, i + 1.0, 20) ** 2 for i, label in enumerate(labels)}
    plots.plot_optimization_history(np.geomspace(1.0, 1e-3, 20), traces, tmp_path / "h.png")
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = []  # (panel, extent, text) of every visible text of every panel
    for k, ax in enumerate(fig.axes):
        for t in [ax.title, ax.xaxis.label, ax.yaxis.label, *drawn_tick_labels(ax.xaxis), *drawn_tick_labels(ax.yaxis)]:
            if t.get_visible() and t.get_text():
                texts.append((k, t.get_window_extent(renderer), t.get_text()))
    shown = " ".join(text.replace("\n", " ") for _, _, text in texts)
    assert all(label in shown for label in labels)
    for (a, box_a, text_a), (b, box_b, text_b) in itertools.combinations(texts, 2):
        assert a == b or not box_a.overlaps(box_b), f"{text_a!r} overlaps {text_b!r}"


def log_space_height_problem(upper: float) -> Problem:
    """The height z of a particle (start 1 m) in log-space, pulled towards 10^5 m."""
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particle((1.0, 1.0, 1.0), mass=1.0)
    model = b.finalize(dtype=wp.float64, requires_grad=True)
    target = wp.array([[1.0, 1.0, 1.0e5]], dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == 1:
            squared_distance(state.particle_q, target, loss=loss)

    rollout = Rollout(wpsim.SemiImplicitSolver(model), 1, 1e-3, loss_fn, mode="full")
    return Problem(rollout, model.state(), [Parameter("state.particle_q", index=0, log=True, upper=upper)])


@pytest.mark.filterwarnings("ignore:no gradient path")
def test_a_log_space_parameter_running_away_is_warned_about():
    """A log-space parameter without an upper bound went to 10^5 times its start silently."""
    with pytest.warns(UserWarning, match=r"log-space parameter state.particle_q\[0, 2\] moved by more than a factor "
                                         r"e\^10 from its start \(1 -> .* m\) with no bound on that side"):
        result = minimize(log_space_height_problem(math.inf), "lbfgsb", iterations=40, progress=False)
    runaways = [w for w in result.warnings if w.startswith("log-space parameter")]
    assert result.x[2] > 2.2e4 and len(runaways) == 1 and "state.particle_q[0, 2]" in runaways[0]
    # a trial step whose exp overflowed ended minimize with a ValueError; now it is backed off from
    assert "state.particle_q[0, 2] overflows at the optimiser's value" in result.message
    bounded = minimize(log_space_height_problem(1.0e6), "lbfgsb", iterations=40, progress=False)
    assert bounded.x[2] > 2.2e4 and not any(w.startswith("log-space parameter") for w in bounded.warnings)


def falling_pendulum(steps: int, **rollout_options) -> tuple:
    """(model, Rollout of ``steps`` ms) of an inverted pendulum (a particle on a stiff spring
    above its pivot) falling over, its loss on the final position: the adjoint of the early
    states grows exponentially back from the last one."""
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.0), mass=0.0)
    b.add_particle((1.0e-6, 0.0, 0.05), mass=0.01)
    b.add_spring(0, 1, ke=1.0e3)
    model = b.finalize(dtype=wp.float64, requires_grad=True)
    target = wp.array([[0.0, 0.0, -0.05]], dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == steps:
            squared_distance(state.particle_q[1:2], target, loss=loss)

    return model, Rollout(wpsim.SemiImplicitSolver(model), steps, 1.0e-3, loss_fn, **rollout_options)


def test_adjoint_growth_is_warned_once_with_the_state_range():
    """The falling pendulum over 0.8 s: the problem warns once, naming the states."""
    model, rollout = falling_pendulum(800, mode="checkpoint")
    problem = Problem(rollout, model.state(), [Parameter("model.spring_ke", log=True)])
    with pytest.warns(UserWarning, match=r"the adjoint of states 0-\d+ is more than 1000x what the loss terms .*\(up to "
                                         r"state 800\).*"
                                         r"truncation_window"):
        problem.loss_and_grad(problem.x0)
    problem.loss_and_grad(problem.x0)
    assert len(problem.warnings) == 1
