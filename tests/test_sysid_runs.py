"""System identification from several measured runs at once (``wpsim.opt.several_runs``,
``identify`` and ``wpsim sysid`` with several data files)."""

import json
from pathlib import Path

import numpy as np
import pytest

from wpsim.opt.sysid import identify

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def _arm_runs(folder: Path, seconds: float = 0.5) -> tuple:
    """Two runs of the 3-link arm of ``vs_mujoco_sysid`` simulated by MuJoCo with its true
    values: "wrist", from rest, torque on the third hinge alone (the first link barely moves:
    its mass is not determined), and "shoulder", from a bent pose, torques on the first two
    hinges; (start robot file: masses x0.6, damping x0.3, no armature; the two data files)."""
    mujoco = pytest.importorskip("mujoco")
    from wpsim.bench import sysid_arm3 as arm
    from wpsim.bench.mujoco_sysid import write_run_csv

    files = []
    for name, q0, gains in (("wrist", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)), ("shoulder", (0.5, -0.3, 0.2), (1.0, 1.0, 0.0))):
        files.append(folder / f"{name}.csv")
        write_run_csv(files[-1], arm.make_data(mujoco, False, q0=q0, gains=gains, duration=seconds), arm.JOINTS)
    robot = folder / "arm3_start.xml"
    robot.write_text(arm.start_xml(sensors=False))
    return robot, files


def _worst_error_percent(result) -> float:
    from wpsim.bench import sysid_arm3 as arm

    return arm.worst_error_percent(result.fit.x)


def test_two_runs_determine_what_neither_does_alone(tmp_path):
    """The wrist run alone leaves the first link's mass undetermined and misses; the shoulder
    run alone leaves the second's weak and misses; the two fitted together recover all nine
    values, and the report gives each run's error."""
    robot, (wrist, shoulder) = _arm_runs(tmp_path)
    alone = identify(robot, wrist, progress=False, device="cpu")
    assert not alone.verdict.ok and any("link1.mass" in weak for weak in alone.verdict.weak)
    assert not identify(robot, shoulder, progress=False, device="cpu").verdict.ok
    both = identify(robot, [wrist, shoulder], progress=False, device="cpu")
    assert both.verdict.ok, both.verdict.reasons
    assert both.verdict.weak == [] and _worst_error_percent(both) < 1e-5
    assert [r.data for r in both.runs] == [str(wrist), str(shoulder)]
    for r in both.runs:  # each run's model holds the fitted values and replays its own run
        np.testing.assert_allclose(r.run.model.joint_damping.numpy()[r.run.dofs], both.run.model.joint_damping.numpy()[
            both.run.dofs], rtol=0, atol=0)
        assert r.rms(r.after) < 1e-9 < r.rms(r.before)
    paths = both.write(tmp_path / "out")
    report = json.loads(Path(paths["report"]).read_text())
    assert [run["data"] for run in report["runs"]] == [str(wrist), str(shoulder)]
    assert report["rms_error_rad"]["after"] == pytest.approx(both.overall_rms("after"))
    errors = [both.runs[i].after - both.runs[i].run.measured for i in (0, 1)]
    pooled = np.sqrt(sum(np.sum(e**2) for e in errors) / sum(e.size for e in errors))
    assert report["rms_error_rad"]["after"] == pytest.approx(pooled, rel=1e-12)
    from pxr import Usd

    stage = Usd.Stage.Open(str(paths["rollouts"]))
    takes = stage.GetDefaultPrim().GetVariantSets().GetVariantSet("iteration").GetVariantNames()
    assert sorted(takes) == ["fitted", "fitted_run2", "initial", "initial_run2"]
    assert "shoulder.csv" in both.summary() and "2 runs" in both.summary()


def test_several_runs_are_fitted_by_multiple_shooting(tmp_path):
    """Windows of every run, all worlds of one replay per setting, reach the values too."""
    robot, files = _arm_runs(tmp_path, seconds=0.3)
    windows = identify(robot, files, progress=False, device="cpu", shooting="multiple", window=0.1)
    assert windows.window_s == pytest.approx(0.1) and windows.verdict.ok, windows.verdict.reasons
    assert _worst_error_percent(windows) < 1e-4


def test_stacked_residuals_are_the_pooled_error_and_their_jacobians_agree(tmp_path):
    """r . r of the stacked runs is the mean squared error over every row of both runs (runs
    of different lengths), and the stacked Jacobian by batched adjoints equals the one by
    differences."""
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.several_runs import StackedResiduals
    from wpsim.opt.sysid import TrackingResiduals, prepare_run

    robot, files = _arm_runs(tmp_path, seconds=0.1)
    families = ["masses", "damping", "armature"]

    def stacked(jacobian: str) -> StackedResiduals:
        parts = []
        for path, seconds in zip(files, (0.1, 0.06)):
            data = load_trajectory(path)
            parts.append(TrackingResiduals(lambda worlds=1, data=data, seconds=seconds: prepare_run(
                *import_robot(robot), data, None, seconds, "cpu", worlds), families, jacobian=jacobian))
        return StackedResiduals(parts, [str(f) for f in files])

    by_differences, by_adjoint = stacked("differences"), stacked("adjoint")
    x = np.array([1.0, 0.7, 0.45, 0.1, 0.1, 0.05, 0.005, 0.005, 0.002])
    r = by_differences.values(x)
    errors = [(part.values(x) / np.sqrt(part.weight)) for part in by_differences.parts]
    assert r @ r == pytest.approx(sum(e @ e for e in errors) / sum(e.size for e in errors), rel=1e-12)
    assert r.size == by_differences.count == sum(e.size for e in errors)
    exact, differences = by_adjoint.jacobian(x), by_differences.jacobian(x)
    assert np.abs(exact - differences).max() < 1e-6 * np.abs(exact).max()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"method": "lbfgsb"}, "several runs are fitted by least squares only"),
        ({"families": ["damping", "initial_state"]}, "initial_state with several runs"),
        ({"zero_order": True}, "the zero-order baseline fits one run"),
    ],
)
def test_what_several_runs_do_not_do_is_refused(options, message):
    data = ASSETS / "arm_2link_sysid.csv"
    with pytest.raises(ValueError, match=message):
        identify(ASSETS / "arm_2link.xml", [data, data], progress=False, duration=0.1, **options)


@pytest.mark.parametrize("families", [["damping"], ["masses"]])  # joint parameters, or bodies' only
def test_runs_measuring_different_joints_are_refused_naming_the_file(tmp_path, families):
    from wpsim.io.measurements import load_trajectory, save_trajectory

    full = load_trajectory(ASSETS / "arm_2link_sysid.csv")
    partial = save_trajectory(tmp_path / "partial.csv", full.time, {
        name: full.columns[name] for name in ("q:link1_joint", "tau:link1_joint", "tau:link2_joint")})
    with pytest.raises(ValueError, match=r"partial.csv: measures the joints \['link1_joint'\], the first run "
                                         r"\['link1_joint', 'link2_joint'\]: every run must measure the same joints"):
        identify(ASSETS / "arm_2link.xml", [ASSETS / "arm_2link_sysid.csv", partial], families, progress=False,
                 duration=0.1)
