"""Learned residual joint torques (wpsim.opt.residual): zero when untrained, a constant one
is exactly an extra joint_f, training through the simulator recovers a missing constant
torque, and bad arguments are named. (The friction data set against MuJoCo is asserted by
examples/arm_residual.py --test.)"""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import warp as wp  # noqa: E402

from wpsim.io.measurements import save_trajectory  # noqa: E402
from wpsim.io.robots import import_robot  # noqa: E402
from wpsim.opt import residual as R  # noqa: E402
from wpsim.solvers import SemiImplicitSolver  # noqa: E402

ROBOT = Path(__file__).resolve().parents[1] / "assets" / "arm_2link.xml"
JOINTS = ("link1_joint", "link2_joint")
DT = 1e-3  # s, the robot file's step


def wpsim_run(q0, qd0, tau: np.ndarray, extra=(0.0, 0.0)) -> tuple:
    """(steps + 1, 2) angles and rates of the arm stepped by the plain solver under
    joint_f = tau + extra (N m), from q0 (rad) and qd0 (rad/s)."""
    model = import_robot(ROBOT)[0].finalize(device="cpu", dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state, nxt = model.state(), model.state()
    state.joint_q.assign(np.asarray(q0, dtype=np.float64))
    state.joint_qd.assign(np.asarray(qd0, dtype=np.float64))
    control = model.control()
    q, qd = [state.joint_q.numpy().copy()], [state.joint_qd.numpy().copy()]
    for k in range(len(tau)):
        control.joint_f.assign(tau[k] + np.asarray(extra))
        solver.step(state, nxt, control, DT)
        state, nxt = nxt, state
        q.append(state.joint_q.numpy().copy())
        qd.append(state.joint_qd.numpy().copy())
    return np.array(q), np.array(qd)


def excitation(steps: int, phase: float) -> np.ndarray:
    """(steps, 2) sum-of-sines torques (N m)."""
    t = DT * np.arange(steps)
    return np.stack([0.6 * np.sin(2 * np.pi * 3.0 * t + phase), 0.25 * np.cos(2 * np.pi * 5.0 * t + phase)], axis=1)


def write_runs(folder: Path, extra, runs: int = 2, steps: int = 100) -> list:
    """Measurement CSVs of the arm with an extra constant torque that the files do not list."""
    paths = []
    for r in range(runs):
        q0, qd0 = (0.3 - 0.4 * r, -0.2 + 0.3 * r), (0.5 * r, -0.4)
        tau = excitation(steps, 1.3 * r)
        q, qd = wpsim_run(q0, qd0, tau, extra)
        columns = {}
        for j, name in enumerate(JOINTS):
            columns.update({f"q:{name}": q[:, j], f"qd:{name}": qd[:, j],
                            f"tau:{name}": np.append(tau[:, j], tau[-1, j])})
        paths.append(save_trajectory(folder / f"run{r}.csv", DT * np.arange(steps + 1), columns))
    return paths


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return R.load_runs(ROBOT, write_runs(tmp_path_factory.mktemp("runs"), extra=(0.0, 0.0)))


def test_untrained_residual_is_exactly_zero(runs):
    residual = R.JointResidual(2, q_scale=0.5, qd_scale=0.1, torque_scale=(1.0, 0.5))
    x = torch.randn(7, 2, dtype=torch.float64)
    assert torch.equal(residual(x, 3.0 * x, -x), torch.zeros(7, 2, dtype=torch.float64))
    windows = R.shooting_windows(runs, 0.05)
    robot = R.TorchRobot(runs, windows.count)
    analytic = robot.parameters()
    with torch.no_grad():
        plain = robot.rollout(windows.q0, windows.qd0, windows.tau, analytic)
        with_residual = robot.rollout(windows.q0, windows.qd0, windows.tau, analytic, residual)
    assert torch.equal(plain, with_residual)


def test_constant_residual_is_an_extra_joint_torque(runs):
    extra = np.array([0.3, -0.15])  # N m
    residual = R.JointResidual(2)
    with torch.no_grad():
        residual.output.bias.copy_(torch.as_tensor(extra))
    robot = R.TorchRobot(runs, 1)
    run = runs.runs[1]
    with torch.no_grad():
        angles = robot.rollout(run["q"][None, 0], run["qd"][None, 0], run["tau"][:, None], robot.parameters(),
                               residual)[:, 0].numpy()
    expected = wpsim_run(run["q"][0], run["qd"][0], run["tau"], extra)[0]
    without = wpsim_run(run["q"][0], run["qd"][0], run["tau"])[0]
    assert np.abs(expected - without).max() > 1e-3  # the extra torque moves the arm visibly
    np.testing.assert_allclose(angles, expected, rtol=0.0, atol=1e-12)


def test_training_recovers_a_missing_constant_torque(tmp_path):
    extra = np.array([0.25, -0.1])  # N m, in the "measured" runs but not in the model
    runs = R.load_runs(ROBOT, write_runs(tmp_path, extra))
    windows = R.shooting_windows(runs, 0.02)
    torch.manual_seed(0)
    residual = R.JointResidual(2, hidden=8, torque_scale=0.5)
    robot = R.TorchRobot(runs, windows.count)
    with torch.no_grad():
        before = robot.window_loss(windows, robot.parameters(), residual).item()
    _, history = R.train_residual(runs, windows, residual, iterations=60, lr=3e-2, train_analytic=False)
    assert history[0]["loss"] == pytest.approx(before, rel=1e-9)
    assert history[-1]["loss"] < 1e-3 * before
    with torch.no_grad():
        learned = residual(torch.as_tensor(windows.q0), torch.as_tensor(windows.qd0), torch.as_tensor(windows.tau[0]))
    np.testing.assert_allclose(learned.mean(dim=0).numpy(), extra, atol=0.01)


def test_analytic_fit_over_windows_recovers_damping(tmp_path):
    """The damping of the data (0.05 N m s/rad, the file's) from a model started at 0.15."""
    runs = R.load_runs(ROBOT, write_runs(tmp_path, extra=(0.0, 0.0)))
    windows = R.shooting_windows(runs, 0.05)
    values, fit = R.fit_analytic(runs, windows, iterations=20, families=["damping"],
                                 start={"link1_joint.damping": 0.15, "link2_joint.damping": 0.15})
    assert fit.loss < 1e-6 * fit.loss0
    assert values["link1_joint.damping"] == pytest.approx(0.05, rel=1e-3)
    assert values["link2_joint.damping"] == pytest.approx(0.05, rel=1e-3)
    robot = R.TorchRobot(runs, windows.count)  # the torch path's loss is the wpsim.opt one
    with torch.no_grad():
        start = robot.parameters({"link1_joint.damping": 0.15, "link2_joint.damping": 0.15})
        assert robot.window_loss(windows, start).item() == pytest.approx(fit.loss0, rel=1e-9)


@pytest.mark.parametrize("make, name", [
    (lambda runs: R.JointResidual(0), "joints"),
    (lambda runs: R.JointResidual(2, hidden=0), "hidden"),
    (lambda runs: R.JointResidual(2, layers=1.5), "layers"),
    (lambda runs: R.JointResidual(2, qd_scale=-1.0), "qd_scale"),
    (lambda runs: R.JointResidual(2, torque_scale=(1.0, 2.0, 3.0)), "torque_scale"),
    (lambda runs: R.JointResidual(2)(torch.zeros(1, 3), torch.zeros(1, 3), torch.zeros(1, 3)), "q has 3 joints"),
    (lambda runs: R.shooting_windows(runs, 0.0), "window_s"),
    (lambda runs: R.shooting_windows(runs, 5.0), "window_s"),
    (lambda runs: R.shooting_windows(runs, 0.05, stride_s=-1.0), "stride_s"),
    (lambda runs: R.load_runs(ROBOT, [], dt=1e-3), "data_files"),
    (lambda runs: R.load_runs(ROBOT, [runs.runs[0]["name"]], dt=-1.0), "dt"),
    (lambda runs: R.load_runs(ROBOT, [runs.runs[0]["name"]], dt=3e-3 / 7), "grid"),
    (lambda runs: R.TorchRobot(runs, 0), "worlds"),
    (lambda runs: R.TorchRobot(runs, 1).parameters({"link3.mass": 1.0}), "values"),
    (lambda runs: R.train_residual(runs, R.shooting_windows(runs, 0.05), R.JointResidual(3)), "residual"),
    (lambda runs: R.train_residual(runs, R.shooting_windows(runs, 0.05), R.JointResidual(2), iterations=0),
     "iterations"),
    (lambda runs: R.train_residual(runs, R.shooting_windows(runs, 0.05), R.JointResidual(2), lr=-1.0), "lr"),
    (lambda runs: R.fit_analytic(runs, R.shooting_windows(runs, 0.05), families=["friction"]), "families"),
    (lambda runs: R.fit_analytic(runs, R.shooting_windows(runs, 0.05), start={"link1.mass": 1.0},
                                 families=["damping"]), "start"),
])
def test_bad_arguments_are_named(runs, make, name):
    with pytest.raises(ValueError, match=name):
        make(runs)
