"""Gauss-Newton / Levenberg-Marquardt on joint-tracking residuals (wpsim.opt.least_squares,
wpsim.opt.sysid.TrackingResiduals): the batched tape Jacobian against central differences in
float64, independence from the batch size, recovery of the parameters that made the data."""

import json
from pathlib import Path

import numpy as np
import pytest

from wpsim.io.measurements import load_trajectory
from wpsim.io.robots import import_robot
from wpsim.opt.least_squares import DifferenceResiduals, least_squares
from wpsim.opt.sysid import TrackingResiduals, identify, prepare_run

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOT, DATA = ASSETS / "arm_2link.xml", ASSETS / "arm_2link_sysid.csv"
TRUTH = json.loads((ASSETS / "arm_2link_sysid_truth.json").read_text())["parameters"]
FAMILIES = ["masses", "damping", "armature"]


def make_run(worlds: int = 1, duration: float = 0.2):
    builder, scene = import_robot(ROBOT)
    return prepare_run(builder, scene, load_trajectory(DATA), duration=duration, worlds=worlds)


@pytest.fixture(scope="module")
def residuals():
    return TrackingResiduals(make_run, FAMILIES, every=5, batch=32, jacobian="adjoint")


def test_batched_jacobian_matches_central_differences(residuals):
    x = residuals.params.x0 * np.array([1.1, 0.9, 1.3, 0.7, 1.0, 1.0]) + np.array([0, 0, 0, 0, 0.004, 0.002])
    jac = residuals.jacobian(x)
    assert jac.shape == (residuals.count, 6) and residuals.count == 80  # 40 steps x 2 joints, 3 passes of 32
    for i, label in enumerate(residuals.params.labels):
        h = 1e-6 * max(abs(x[i]), 1e-2)
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        fd = (residuals.values(up) - residuals.values(down)) / (2.0 * h)
        error = np.max(np.abs(fd - jac[:, i])) / np.max(np.abs(fd))
        assert error < 1e-6, f"{label}: relative error {error:.2e}"


def test_jacobian_rows_do_not_depend_on_the_batch(residuals):
    other = TrackingResiduals(make_run, FAMILIES, every=5, batch=80, jacobian="adjoint")
    x = residuals.params.x0
    assert np.allclose(residuals.jacobian(x), other.jacobian(x), rtol=1e-11, atol=1e-14)


def test_levenberg_marquardt_recovers_the_arm():
    residuals = TrackingResiduals(lambda worlds: make_run(worlds, 0.5), FAMILIES, every=10, batch=100,
                                  jacobian="adjoint")
    result = least_squares(residuals, iterations=15, progress=False)
    fitted = result.values()
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=1e-3), name
    assert result.loss < 1e-12 * result.loss0 and result.converged
    # 100 residuals: one 100-world pass per Jacobian, one Jacobian per iteration; every
    # rollout counted (the residual replays and the batched passes)
    assert result.gradients == len(result.history)
    assert result.rollouts > result.gradients


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="every must be an integer >= 1"):
        TrackingResiduals(make_run, FAMILIES, every=0)
    with pytest.raises(ValueError, match="every=500 leaves no residual in a run of 200 steps"):
        TrackingResiduals(make_run, FAMILIES, every=500)
    with pytest.raises(ValueError, match=r"starts must be an integer >= 1 \(1 with least-squares\)"):
        identify(ROBOT, DATA, ["damping"], method="least-squares", starts=2, duration=0.2, progress=False)


def test_difference_residuals_step_inside_an_upper_bound_and_spread_over_simulators():
    """A parameter on its upper bound is moved down for its column (the model is never run
    outside its bounds), the columns are the exact slopes of a linear path, and the runs
    spread over two simulators give the same Jacobian."""
    from types import SimpleNamespace

    slopes = np.array([[1.0, -2.0], [0.5, 3.0], [4.0, 0.25]])  # path sample (3,) per unit of each parameter
    seen = []

    def simulate(x):
        seen.append(np.array(x))
        return np.vstack([np.zeros(3), slopes @ x])  # (2, 3): the shared start, then one sample

    params = SimpleNamespace(upper=np.array([np.inf, 2.0]), write=lambda x: None)
    x = np.array([0.7, 2.0])  # the second on its upper bound
    measured = np.zeros((2, 3))
    for simulators in ([simulate], [simulate, simulate]):
        seen.clear()
        residuals = DifferenceResiduals(params, simulators, measured, 0.5)
        np.testing.assert_allclose(residuals.jacobian(x), 0.5 * slopes, rtol=1e-8)
        assert all(p[1] <= 2.0 for p in seen) and residuals.rollouts == 3


def test_projected_lm_stops_on_a_bound_and_reaches_an_inner_minimum():
    """``projected_lm`` on r(z) = (10 (z1 - z0^2), 1 - z0) (Rosenbrock, minimum at (1, 1)):
    inside the box [-2, 2]^2 from (-1.2, 1) it reaches (1, 1); with z0 <= 0.5 it ends on that
    bound, where the projected gradient vanishes (z1 = 0.25, the free variable's minimum)."""
    from wpsim.opt.least_squares import projected_lm

    def values(z):
        return np.array([10.0 * (z[1] - z[0] ** 2), 1.0 - z[0]])

    def jacobian(z):
        return np.array([[-20.0 * z[0], 10.0], [-1.0, 0.0]])

    for upper, expected in ((2.0, (1.0, 1.0)), (0.5, (0.5, 0.25))):
        z, ok, message = projected_lm(values, jacobian, np.array([-1.2, 1.0]), np.array([-2.0, -2.0]),
                                      np.array([upper, 2.0]), lambda: True, 1e-12)
        assert ok, message
        np.testing.assert_allclose(z, expected, atol=1e-6)
    z, ok, message = projected_lm(values, jacobian, np.array([-1.2, 1.0]), np.array([-2.0, -2.0]),
                                  np.array([2.0, 2.0]), lambda: False, 1e-12)
    assert not ok and message == "iteration limit reached"
