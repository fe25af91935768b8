"""Rigid-body system identification (wpsim.opt.sysid) and ``wpsim sysid``: fits against the
MuJoCo-generated runs of assets/, outputs, and bad input named in one line."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wpsim.io.measurements import save_trajectory
from wpsim.opt.sysid import identify
from wpsim.opt.verdict import Z95

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOT, DATA = ASSETS / "arm_2link.xml", ASSETS / "arm_2link_sysid.csv"
TRUTH = json.loads((ASSETS / "arm_2link_sysid_truth.json").read_text())["parameters"]


def wpsim_cli(*args):
    return subprocess.run([sys.executable, "-m", "wpsim.apps.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def assert_exit_matches_verdict(proc, report):
    """Exit status 0 for a fit the verdict accepts; 1 and one line saying why for a miss."""
    verdict = report["verdict"]
    assert proc.returncode == (0 if verdict["ok"] else 1), proc.stderr[-2000:]
    if not verdict["ok"]:
        assert proc.stderr.strip().splitlines()[-1] == f"wpsim sysid: poor fit: {'; '.join(verdict['reasons'])}"
    assert "Traceback" not in proc.stderr


def test_identify_leaves_the_fit_in_the_model():
    """(Recovery within 3 % of every parameter is asserted by examples/arm_sysid.py --test.)"""
    result = identify(ROBOT, DATA, ["damping", "initial_state"], iterations=5, duration=0.2, mode="full",
                      progress=False)
    fitted = result.fit.values()
    assert result.fit.loss < result.fit.loss0
    assert result.rms(result.simulated_after) < result.rms(result.simulated_before)
    assert result.run.model.joint_damping.numpy()[result.run.dofs] == pytest.approx(
        [fitted["link1_joint.damping"], fitted["link2_joint.damping"]])
    assert result.run.state0.joint_q.numpy()[result.run.coords] == pytest.approx(
        [fitted["link1_joint.q0"], fitted["link2_joint.q0"]])
    assert result.fit.units[result.fit.labels.index("link1_joint.qd0")] == "rad/s"


def test_cli_writes_report_plots_and_calibrated_robot(tmp_path):
    proc = wpsim_cli("sysid", ROBOT, DATA, "--fit", "damping", "--duration", "0.2", "--iterations", "3", "--out",
                     tmp_path, "--zero-order", "--quiet")
    report = json.loads((tmp_path / "sysid.json").read_text())
    assert_exit_matches_verdict(proc, report)
    assert "link1_joint.damping" in proc.stdout and "N m s/rad" in proc.stdout
    assert "zero-order baseline (nelder-mead" in proc.stdout
    assert report["joints"] == ["link1_joint", "link2_joint"] and report["steps"] == 200
    assert report["rms_error_rad"]["after"] < report["rms_error_rad"]["before"]
    assert report["zero_order"]["rollouts"] <= report["fit"]["rollouts"]
    for name in ("tracking.png", "history.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    stage = (tmp_path / "calibrated.usda").read_text()
    fitted = report["fit"]["parameters"][0]["fitted"]
    assert "PhysicsRevoluteJoint" in stage and f"{fitted:.6g}"[:5] in stage


def test_calibrated_robot_keeps_the_files_names_and_time_step(tmp_path):
    """calibrated.usda names its bodies and joints as the robot file did (they were
    /World/body_0, /World/joints/joint_0...), so the same data fits it again."""
    from wpsim.io.usd_physics import import_usd

    result = identify(ROBOT, DATA, ["damping"], iterations=1, duration=0.05, mode="full", progress=False)
    robot = result.write(tmp_path)["robot"]
    _, scene = import_usd(robot)
    assert scene.bodies == {"link1": 0, "link2": 1} and scene.joints == {"link1_joint": 0, "link2_joint": 1}
    assert scene.timestep == pytest.approx(result.run.dt)
    again = identify(robot, DATA, ["damping"], iterations=1, duration=0.05, mode="full", progress=False)
    assert again.run.joints == ["link1_joint", "link2_joint"]
    assert again.rms(again.simulated_before) == pytest.approx(result.rms(result.simulated_after), rel=1e-6)


@pytest.mark.parametrize("options, method", [(["--method", "least-squares", "--residual-every", "5"], "least-squares"),
                                             (["--starts", "3"], "lbfgsb, best of 3 starts")])
def test_cli_least_squares_and_multistart(tmp_path, options, method):
    proc = wpsim_cli("sysid", ROBOT, DATA, "--fit", "damping", "--duration", "0.2", "--iterations", "8", "--out",
                     tmp_path, "--quiet", *options)
    report = json.loads((tmp_path / "sysid.json").read_text())
    assert_exit_matches_verdict(proc, report)
    assert report["fit"]["method"] == method
    assert report["rms_error_rad"]["after"] < 0.5 * report["rms_error_rad"]["before"]
    assert [p["name"] for p in report["fit"]["parameters"]] == ["link1_joint.damping", "link2_joint.damping"]


def bad_data(tmp_path, **change):
    time = np.arange(0.0, 0.05, 0.001)
    columns = {"q:link1_joint": np.zeros_like(time), "tau:link1_joint": np.zeros_like(time)}
    columns.update(change)
    return save_trajectory(tmp_path / "bad.csv", time, columns)


@pytest.mark.parametrize(
    "args, message",
    [
        (lambda t: [ASSETS / "missing.xml", DATA], "missing.xml"),
        (lambda t: [ROBOT, t / "missing.csv"], "missing.csv: no such data file"),
        (lambda t: [ROBOT, DATA, t / "missing.csv"], "missing.csv: no such data file"),
        (lambda t: [ROBOT, DATA, DATA, "--method", "lbfgsb"], "several runs are fitted by least squares only"),
        (lambda t: [ROBOT, bad_data(t, **{"q:wrist": np.zeros(50)})],
         "column 'q:wrist' names an unknown 1-dof joint of the robot 'wrist'"),
        (lambda t: [ROBOT, DATA, "--fit", "masses,stiction"], r"unknown parameter family \['stiction'\]"),
        (lambda t: [ROBOT, DATA, "--duration", "5"], "duration 5 s is not within the data's 2 s"),
        (lambda t: [ROBOT, DATA, "--starts", "0"],
         r"--starts must be 1 to 1,024 \(the guesses are worlds of one model\), got 0$"),
        (lambda t: [ROBOT, DATA, "--method", "least-squares", "--residual-every", "0"],
         "every must be an integer >= 1"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, args, message):
    proc = wpsim_cli("sysid", *args(tmp_path), "--out", tmp_path / "out", "--quiet")
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("wpsim sysid: error:")]
    assert len(errors) == 1 and re.search(message, errors[0]), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_noise_floor_of_a_finely_sampled_signal_is_its_noise():
    from wpsim.opt.verdict import noise_floor

    rng = np.random.default_rng(0)
    time = np.arange(0.0, 2.0, 0.002)
    signal = np.stack([0.5 * np.sin(3.0 * time), 0.2 * np.cos(5.0 * time)], axis=1)
    assert noise_floor(signal) < 1e-5
    for sigma in (1e-3, 1e-2):
        assert noise_floor(signal + sigma * rng.standard_normal(signal.shape)) == pytest.approx(sigma, rel=0.1)


def test_a_fit_to_noisy_data_is_judged_good_and_its_intervals_hold_the_truth():
    """1 % noise (assets/arm_2link_sysid_noisy.csv): the fitted RMS is the data's noise floor,
    and every value MuJoCo simulated with lies within 3 standard errors (the 95 % interval's
    half-width / 1.96) of the fit: six exact 95 % intervals all hold the truth only about three
    times in four (here link1's mass is 2.2 standard errors off with least squares' intervals
    from every residual)."""
    result = identify(ROBOT, ASSETS / "arm_2link_sysid_noisy.csv", ["masses", "damping", "armature", "initial_state"],
                      iterations=60, duration=1.0, mode="full", progress=False)
    verdict = result.verdict
    assert verdict.ok, verdict.reasons
    assert 0.8 < verdict.rms / verdict.noise < 1.25
    for name, value in TRUTH.items():
        low, high = verdict.intervals[name]
        standard_error = (high - low) / (2.0 * Z95)
        assert abs(value - 0.5 * (low + high)) < 3.0 * standard_error, (name, low, value, high)
        assert high - low < 0.2 * value  # the data determines every parameter
    assert verdict.weak == [] and len(verdict.singular_values) == 10
    assert result.to_dict()["verdict"]["ok"] is True


def test_a_fit_that_misses_exits_1_and_says_why(tmp_path):
    """The masses are wrong and not fitted: damping alone cannot explain the run."""
    proc = wpsim_cli("sysid", ROBOT, DATA, "--fit", "damping", "--duration", "0.5", "--iterations", "20", "--out",
                     tmp_path, "--quiet")
    report = json.loads((tmp_path / "sysid.json").read_text())
    assert report["verdict"]["ok"] is False
    assert_exit_matches_verdict(proc, report)
    assert re.search(r"the RMS error \S+ deg is \S+x the data's noise floor", proc.stderr)
    assert "verdict: POOR FIT" in proc.stdout and "95 % confidence intervals" in proc.stdout
    assert (tmp_path / "calibrated.usda").is_file()  # the outputs are written all the same


def test_a_parameter_on_its_bound_a_blind_direction_and_a_terse_message_are_reported():
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.sysid import TrackingResiduals, prepare_run
    from wpsim.opt.verdict import judge

    data = load_trajectory(DATA)
    residuals = TrackingResiduals(lambda worlds: prepare_run(*import_robot(ROBOT), data, duration=0.1, worlds=worlds),
                                  ["damping"], every=5)
    x = np.array([0.0, 0.08])
    r, jac = residuals.values(x), residuals.jacobian(x)
    verdict = judge(residuals.params, x, r, jac, 1e-5, 1e-5, "ABNORMAL: ", 5)
    assert verdict.at_bounds == ["link1_joint.damping"] and not verdict.ok
    assert verdict.reasons == ["link1_joint.damping ended on a bound"]
    assert "line search found no decrease" in verdict.message
    blind = judge(residuals.params, np.array([0.1, 0.08]), r, np.stack([jac[:, 0], jac[:, 0]], axis=1), 1e-5, 1e-5,
                  "CONVERGENCE", 5)
    assert len(blind.weak) == 1 and "link1_joint.damping" in blind.weak[0] and "link2_joint.damping" in blind.weak[0]
    assert blind.ok  # undetermined is reported, not a miss: the fit may still match the data


def test_an_unmeasured_floating_base_is_warned_about(tmp_path):
    """A robot with a free joint, data of one hinge: the fit runs, and says that the base
    starts at the file's pose at rest and is not fitted to."""
    time = np.arange(0.0, 0.02, 0.002)
    data = save_trajectory(tmp_path / "hip.csv", time, {"q:fl_hip_joint": 0.1 + 0.0 * time})
    with pytest.warns(UserWarning, match=r"joint\(s\) torso_joint \(free or ball\) are not measured"):
        identify(ASSETS / "quadruped.xml", data, ["damping"], iterations=1, progress=False)
