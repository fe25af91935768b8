"""Multiple shooting for system identification (``wpsim.opt.shooting``): windows of a measured
run replayed from their own fitted starting states, chosen automatically for a chaotic run."""

import json
from pathlib import Path

import numpy as np
import pytest

from wpsim.opt.sysid import identify

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARM = ASSETS / "arm_2link.xml"
TRUTH = json.loads((ASSETS / "arm_2link_sysid_truth.json").read_text())["parameters"]


def _worst_error(result, truth) -> float:
    values = result.fit.values()
    return max(abs(values[name] / value - 1.0) for name, value in truth.items())


def _chaotic_arm(folder: Path) -> tuple:
    """A 3-link arm started near upright with little damping, swinging over the top for 2 s
    under sine torques, simulated by MuJoCo: (start robot file, data file, true values)."""
    mujoco = pytest.importorskip("mujoco")
    from wpsim.bench import sysid_arm3 as arm
    from wpsim.bench.mujoco_sysid import write_run_csv

    mass, damping, armature = arm.TRUTH["mass"], tuple(0.1 * d for d in arm.TRUTH["damping"]), arm.TRUTH["armature"]
    model = mujoco.MjModel.from_xml_string(arm.arm_xml(mass, damping, armature))
    data = mujoco.MjData(model)
    steps = int(round(2.0 / arm.DT))
    time_s = np.arange(steps + 1) * arm.DT
    torque = np.stack([sum(a * np.sin(2 * np.pi * f * time_s + p) for a, f, p in hinge) for hinge in arm.EXCITATION], 1)
    data.qpos[:] = (2.8, -1.2, 1.5)
    q, qd = np.empty((steps + 1, 3)), np.empty((steps + 1, 3))
    for k in range(steps + 1):
        q[k], qd[k] = data.qpos, data.qvel
        data.ctrl[:] = torque[k]
        mujoco.mj_step(model, data)
    assert np.ptp(q[:, 0]) > 2.0 * np.pi  # the first link goes over the top
    robot, csv = folder / "arm3_start.xml", folder / "arm3_chaotic.csv"
    start = (tuple(0.6 * m for m in mass), tuple(0.3 * d for d in damping), (0.0, 0.0, 0.0))
    robot.write_text(arm.arm_xml(*start, sensors=False))
    write_run_csv(csv, {"time": time_s, "measured": q, "qd": qd, "torque": torque}, arm.JOINTS)
    truth = {f"{b}.mass": m for b, m in zip(arm.BODIES, mass)}
    truth |= {f"{j}.damping": d for j, d in zip(arm.JOINTS, damping)}
    truth |= {f"{j}.armature": a for j, a in zip(arm.JOINTS, armature)}
    return robot, csv, truth


def test_a_chaotic_run_is_fitted_by_multiple_shooting_by_default(tmp_path):
    """The issue's case: one rollout of 2 s over the top from a wrong start (masses x0.6,
    damping x0.3, armature 0) ends far off, with a poor-fit verdict; the default finds the
    growth, cuts the run into windows and recovers every parameter."""
    robot, csv, truth = _chaotic_arm(tmp_path)
    single = identify(robot, csv, progress=False, shooting="single")
    assert single.window_s is None and _worst_error(single, truth) > 0.1 and not single.verdict.ok
    default = identify(robot, csv, progress=False)
    assert default.window_s is not None and 0.05 <= default.window_s < 2.0
    assert _worst_error(default, truth) < 0.01, default.fit.values()  # measured: below 1e-6
    assert default.verdict.ok, default.verdict.reasons
    assert "multiple shooting" in default.summary()


def test_a_damped_run_keeps_one_rollout_and_fitted_window_states_absorb_noise():
    """The damped two-link arm does not amplify errors: auto keeps single shooting. Forced
    windows of 0.25 s recover the parameters from exact data, and from 1 % noise within 5 %
    (their starting states fitted, not taken from the noisy samples)."""
    auto = identify(ARM, ASSETS / "arm_2link_sysid.csv", progress=False)
    assert auto.window_s is None and _worst_error(auto, TRUTH) < 1e-6
    exact = identify(ARM, ASSETS / "arm_2link_sysid.csv", progress=False, shooting="multiple", window=0.25)
    assert exact.window_s == pytest.approx(0.25) and _worst_error(exact, TRUTH) < 1e-6
    noisy = identify(ARM, ASSETS / "arm_2link_sysid_noisy.csv", progress=False, shooting="multiple", window=0.25)
    assert _worst_error(noisy, TRUTH) < 0.05  # measured 1.6 %


def test_the_projected_jacobian_is_the_derivative_of_the_residuals_with_fitted_window_states():
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.shooting import ShootingResiduals
    from wpsim.opt.sysid import prepare_run, robot_parameters

    data = load_trajectory(ASSETS / "arm_2link_sysid.csv")

    def make_run(worlds=1):
        builder, scene = import_robot(ARM)
        return prepare_run(builder, scene, data, duration=0.5, worlds=worlds)

    residuals = ShootingResiduals(make_run, lambda run: robot_parameters(run, ["masses", "damping", "armature"]), 100)
    # at the truth of exact data the window states fit exactly, where the projection (which
    # leaves out the residuals' curvature in the states) is the derivative
    x = np.array([TRUTH[label] for label in residuals.params.labels])
    jacobian = residuals.jacobian(x)
    assert jacobian.shape == (residuals.count, len(x)) and residuals.count == 2 * 500
    for column in range(len(x)):
        step = np.zeros_like(x)
        step[column] = 1e-5 * x[column]
        central = (residuals.values(x + step) - residuals.values(x - step)) / (2.0 * step[column])
        np.testing.assert_allclose(jacobian[:, column], central, rtol=1e-3, atol=1e-3 * np.abs(central).max())


@pytest.mark.parametrize("kwargs, message", [
    ({"shooting": "multiple", "families": ["damping", "initial_state"]}, "initial_state"),
    ({"shooting": "multiple", "method": "lbfgsb"}, "least-squares"),
    ({"shooting": "multiple", "window": 30.0}, "longer than"),
    ({"shooting": "sometimes"}, "unknown shooting"),
    ({"shooting": "multiple", "window": -1.0}, "positive time"),
])
def test_bad_shooting_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        identify(ARM, ASSETS / "arm_2link_sysid.csv", progress=False, iterations=1, **kwargs)


def test_auto_fits_windows_where_one_rollout_of_the_whole_run_misses(tmp_path):
    """The 3-hinge arm of ``vs_mujoco_sysid`` (MuJoCo's data, 2.5 s, damped: no chaos for the
    probe) from masses x0.5 and damping x0.3: one rollout of the whole run stalls far from the
    truth (490 % measured), so "auto" fits ``FALLBACK_WINDOW_S`` windows from the start again
    and keeps them; the missed fit is reported."""
    mujoco = pytest.importorskip("mujoco")
    from wpsim.bench import sysid_arm3 as arm
    from wpsim.bench.mujoco_sysid import write_run_csv
    from wpsim.opt.sysid import FALLBACK_WINDOW_S

    robot, data = tmp_path / "start.xml", tmp_path / "data.csv"
    robot.write_text(arm.arm_xml(*(tuple(v * f for v in arm.TRUTH[k]) for k, f in
                                   (("mass", 0.5), ("damping", 0.3), ("armature", 0.0))), sensors=False))
    write_run_csv(data, arm.make_data(mujoco, noisy=False), arm.JOINTS)
    result = identify(robot, data, ["masses", "damping", "armature"], progress=False, device="cpu")
    assert result.missed is not None and result.window_s == FALLBACK_WINDOW_S
    values = result.fit.values()
    fitted = [values[f"{b}.mass"] for b in arm.BODIES] + [values[f"{j}.{f}"] for f in ("damping", "armature")
                                                          for j in arm.JOINTS]
    assert arm.worst_error_percent(fitted) < 1e-4 and result.verdict.ok
    assert result.to_dict()["single_shooting_missed"]["loss"] > 1e3 * result.fit.loss
    assert "after one rollout of the whole run missed" in result.summary()
