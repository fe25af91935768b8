"""Learned residual joint torques trained end to end through the simulator (needs torch).

A robot's analytic model (link masses, joint damping and armature of its file) misses
effects such as Coulomb joint friction. ``JointResidual`` is a torque per joint,
``tau_res(q, qd, tau_cmd)`` (N m or N), added to the commanded torque at every step; it is
a small tanh MLP plus a linear term, initialised to output exactly zero (so that training
starts from the analytic model).

Training is multiple shooting (``shooting_windows``): the measured runs are cut into short
windows (e.g. 0.1 s), each restarted from its measured state and simulated under the
measured torques; all windows are the worlds of one replicated model (``TorchRobot``,
through ``wpsim.opt.torch.TorchStep``), and the loss is their mean squared joint-angle error
(rad^2) at the measured samples. Short windows keep the gradients well conditioned where
one long open-loop rollout would not.

- ``fit_analytic``: the analytic parameters alone (``AnalyticParameters``: masses with
  inertias scaled, damping, armature; one value per robot shared by every window) fitted
  with ``wpsim.opt`` (a ``Problem`` over the windows' ``Rollout``, L-BFGS-B by default);
- ``train_residual``: a ``JointResidual`` and (optionally) the analytic parameters trained
  together with Adam through ``TorchStep``;
- ``open_loop``: each run simulated from its first sample to its end, for the held-out
  error (``rms_error``).

Runs come from ``wpsim.io.measurements`` files (``load_runs``): ``q:``, ``qd:`` and ``tau:``
columns of the robot's 1-dof joints, samples on the simulation grid (e.g. 200 Hz data for a
1 ms step); the torques are held over each sample period.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from wpsim.diff import Rollout
from wpsim.diff.losses import joint_tracking_loss
from wpsim.io.measurements import MeasurementError, load_trajectory
from wpsim.io.robots import import_robot
from wpsim.kernels.enums import JOINT_DOF_COUNT, JOINT_REVOLUTE
from wpsim.opt.minimize import minimize
from wpsim.opt.parameters import DerivedParameter, Parameter
from wpsim.opt.problem import Problem
from wpsim.opt.sysid import TYPICAL, UNITS
from wpsim.opt.torch import TorchStep
from wpsim.solvers import SemiImplicitSolver

ON_GRID = 1e-6
"""Largest distance (s) of a sample time from the simulation grid."""


@contextmanager
def one_torch_thread():
    """Run torch on one intra-op thread inside the block (restored after): the per-step
    tensors here are tiny, and on a busy 2-core CPU torch's thread pool cost 10x the
    arithmetic (2.9 s against 0.3 s per training iteration of 100 windows, measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _positive_scales(name: str, value, joints: int) -> torch.Tensor:
    scales = torch.as_tensor(value, dtype=torch.float64).flatten()
    if scales.numel() == 1:
        scales = scales.expand(joints).clone()
    if scales.numel() != joints or not bool(torch.all(torch.isfinite(scales) & (scales > 0.0))):
        raise ValueError(f"{name} must be one positive finite value or one per joint ({joints}), got {value!r}")
    return scales


class JointResidual(torch.nn.Module):
    """Residual generalized force per joint, ``tau_res = scale (MLP(x) + A x)`` with
    ``x = (q / q_scale, qd / qd_scale, tau_cmd / torque_scale)``.

    joints: number of joints J; hidden, layers: width and depth of the tanh MLP;
    q_scale (rad or m), qd_scale (rad/s or m/s), torque_scale (N m or N): typical sizes of
    the inputs (one value or one per joint); the output is in units of torque_scale.
    The output layer and the linear term start at zero: an untrained residual is exactly 0.
    """

    def __init__(self, joints: int, hidden: int = 32, layers: int = 2, q_scale=1.0, qd_scale=1.0,
                 torque_scale=1.0, dtype=torch.float64):
        super().__init__()
        joints, hidden, layers = (_positive_int(n, v) for n, v in (("joints", joints), ("hidden", hidden),
                                                                   ("layers", layers)))
        self.joints = joints
        scale = torch.cat([_positive_scales("q_scale", q_scale, joints), _positive_scales("qd_scale", qd_scale, joints),
                           _positive_scales("torque_scale", torque_scale, joints)])
        self.register_buffer("input_scale", scale.to(dtype))
        self.register_buffer("output_scale", _positive_scales("torque_scale", torque_scale, joints).to(dtype))
        widths = [3 * joints] + [hidden] * layers
        blocks = []
        for a, b in zip(widths[:-1], widths[1:]):
            blocks += [torch.nn.Linear(a, b, dtype=dtype), torch.nn.Tanh()]
        self.hidden = torch.nn.Sequential(*blocks)
        self.output = torch.nn.Linear(hidden, joints, dtype=dtype)
        self.linear = torch.nn.Linear(3 * joints, joints, bias=False, dtype=dtype)
        for p in (self.output.weight, self.output.bias, self.linear.weight):
            torch.nn.init.zeros_(p)

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau_cmd: torch.Tensor) -> torch.Tensor:
        """(..., J) residual torques (N m or N) from (..., J) angles, rates and commanded torques."""
        for name, t in (("q", q), ("qd", qd), ("tau_cmd", tau_cmd)):
            if t.shape[-1] != self.joints:
                raise ValueError(f"{name} has {t.shape[-1]} joints in its last axis, the residual {self.joints}")
        x = torch.cat([q, qd, tau_cmd], dim=-1) / self.input_scale
        return self.output_scale * (self.output(self.hidden(x)) + self.linear(x))


@dataclass
class RobotRuns:
    """Measured runs of a robot on one simulation grid.

    robot: the robot file; joints: the measured 1-dof joints; coords / dofs: their joint
    coordinate and dof indices in one world; hinges: revolute (else prismatic); dt (s);
    runs: per run a dict with "name", "steps" (grid steps), "sample_steps" (S,) grid step
    of each sample, "q" / "qd" (S, J) measured angles and rates at the samples and
    "tau" (steps, J) torques on the grid (held over each sample period).
    """

    robot: str
    joints: list
    coords: np.ndarray
    dofs: np.ndarray
    hinges: list
    dt: float
    runs: list


def load_runs(robot_file, data_files, dt: float | None = None) -> RobotRuns:
    """The measured runs ``data_files`` (``wpsim.io.measurements`` CSV/NPZ) of the robot in
    ``robot_file`` on the grid of ``dt`` seconds (default: the robot file's step)."""
    builder, scene = import_robot(robot_file)
    dt = dt or scene.timestep
    if not dt or not dt > 0.0:
        raise ValueError(f"dt must be a positive time step in s (the robot file gives none), got {dt!r}")
    if isinstance(data_files, (str, bytes)) or not data_files:
        raise ValueError("data_files must be a non-empty list of measurement files")
    model = builder.finalize(device="cpu")
    types, q_start, qd_start = (a.numpy() for a in (model.joint_type, model.joint_q_start, model.joint_qd_start))
    one_dof = {name: j for name, j in scene.joints.items() if JOINT_DOF_COUNT[int(types[j])] == 1}
    joints, runs = None, []
    for path in data_files:
        data = load_trajectory(path)
        for kind in ("q", "qd", "tau"):
            data.require(kind, one_dof, "1-dof joint of the robot")
        if joints is None:
            joints = data.names("q")
            if not joints:
                raise MeasurementError(f"{path}: no 'q:<joint>' column")
        for kind in ("q", "qd", "tau"):
            if sorted(data.names(kind)) != sorted(joints):
                raise MeasurementError(f"{path}: the '{kind}:' columns name {data.names(kind)}, the first file's "
                                       f"'q:' columns {joints}")
        offsets = (data.time - data.time[0]) / dt
        sample_steps = np.rint(offsets).astype(int)
        off = np.flatnonzero(np.abs(offsets - sample_steps) * dt > ON_GRID)
        if off.size:
            raise MeasurementError(f"{path}: sample {int(off[0])} at {data.time[off[0]]:g} s is not on the grid of "
                                   f"dt = {dt:g} s")
        steps = int(sample_steps[-1])
        grid = data.resample(data.time[0] + dt * np.arange(steps))
        runs.append({"name": str(path), "steps": steps, "sample_steps": sample_steps,
                     "q": np.stack([data.channel("q", j) for j in joints], axis=1),
                     "qd": np.stack([data.channel("qd", j) for j in joints], axis=1),
                     "tau": np.stack([grid.channel("tau", j) for j in joints], axis=1)})
    coords = np.array([q_start[one_dof[j]] for j in joints])
    dofs = np.array([qd_start[one_dof[j]] for j in joints])
    hinges = [int(types[one_dof[j]]) == JOINT_REVOLUTE for j in joints]
    return RobotRuns(str(robot_file), joints, coords, dofs, hinges, float(dt), runs)


@dataclass
class ShootingWindows:
    """K windows of ``steps`` grid steps cut from measured runs (world k = window k).

    q0, qd0: (K, J) measured start states; tau: (steps, K, J) torques (N m or N);
    weight: (steps + 1, K) 1 where a window's state at that step was measured, else 0;
    target: (steps + 1, K, J) the measured angles there (0 elsewhere);
    origin: (run index, first grid step) of every window.
    """

    steps: int
    q0: np.ndarray
    qd0: np.ndarray
    tau: np.ndarray
    weight: np.ndarray
    target: np.ndarray
    origin: list

    @property
    def count(self) -> int:
        return self.q0.shape[0]


def shooting_windows(runs: RobotRuns, window_s: float, stride_s: float | None = None) -> ShootingWindows:
    """Windows of ``window_s`` seconds starting every ``stride_s`` (default ``window_s``)
    seconds, at samples, in every run (those that fit inside their run)."""
    if not window_s > 0.0:
        raise ValueError(f"window_s must be > 0 s, got {window_s!r}")
    stride_s = window_s if stride_s is None else stride_s
    if not stride_s > 0.0:
        raise ValueError(f"stride_s must be > 0 s, got {stride_s!r}")
    steps = max(int(round(window_s / runs.dt)), 1)
    stride = max(int(round(stride_s / runs.dt)), 1)
    starts = []
    for r, run in enumerate(runs.runs):
        sampled = set(run["sample_steps"].tolist())
        starts += [(r, k) for k in range(0, run["steps"] - steps + 1, stride) if k in sampled]
    if not starts:
        raise ValueError(f"window_s = {window_s:g} s leaves no window (runs of at most "
                         f"{max(r['steps'] for r in runs.runs) * runs.dt:g} s, stride_s = {stride_s:g} s)")
    joints = len(runs.joints)
    q0, qd0 = np.empty((len(starts), joints)), np.empty((len(starts), joints))
    tau = np.empty((steps, len(starts), joints))
    weight, target = np.zeros((steps + 1, len(starts))), np.zeros((steps + 1, len(starts), joints))
    for w, (r, k) in enumerate(starts):
        run = runs.runs[r]
        first = int(np.searchsorted(run["sample_steps"], k))
        q0[w], qd0[w] = run["q"][first], run["qd"][first]
        tau[:, w] = run["tau"][k:k + steps]
        inside = np.flatnonzero((run["sample_steps"] > k) & (run["sample_steps"] <= k + steps))
        weight[run["sample_steps"][inside] - k, w] = 1.0
        target[run["sample_steps"][inside] - k, w] = run["q"][inside]
    return ShootingWindows(steps, q0, qd0, tau, weight, target, starts)


class AnalyticParameters(torch.nn.Module):
    """The analytic parameters of a robot, shared by all its worlds, as torch parameters:
    the mass (kg) of every body with mass, its inertia scaled with it (optimised as the
    log of its ratio to the file's value), and the damping (N m s/rad or N s/m) and armature
    (kg m^2 or kg) of the measured joints (optimised in units of ``TYPICAL`` or their file
    value, kept >= 0 by ``project_``).

    model: a one-world Model of the robot; body_names: body index -> name; runs: the
    ``RobotRuns`` (joints, dofs, hinges); values: optional label -> physical start value
    (e.g. ``fit_analytic``'s), labels as in ``labels``.
    """

    def __init__(self, model, body_names: dict, runs: RobotRuns, values: dict | None = None):
        super().__init__()
        as_tensor = lambda a: torch.tensor(a.numpy(), dtype=torch.float64)  # noqa: E731
        self.register_buffer("mass0", as_tensor(model.body_mass))
        self.register_buffer("inertia0", as_tensor(model.body_inertia))
        self.register_buffer("damping0", as_tensor(model.joint_damping))
        self.register_buffer("armature0", as_tensor(model.joint_armature))
        self.bodies = np.flatnonzero(self.mass0.numpy() > 0.0)
        self.dofs = np.asarray(runs.dofs)
        self.mass_labels = [f"{body_names.get(int(b), f'body{b}')}.mass" for b in self.bodies]
        self.joint_labels = {f: [f"{j}.{f}" for j in runs.joints] for f in ("damping", "armature")}
        for family in ("damping", "armature"):
            initial = getattr(self, f"{family}0")[self.dofs]
            self.register_buffer(f"{family}_scale", torch.clamp(initial, min=TYPICAL[f"joint_{family}"]))
        self.log_mass_ratio = torch.nn.Parameter(torch.zeros(len(self.bodies), dtype=torch.float64))
        self.damping_units = torch.nn.Parameter(self.damping0[self.dofs] / self.damping_scale)
        self.armature_units = torch.nn.Parameter(self.armature0[self.dofs] / self.armature_scale)
        if values:
            self.assign(values)

    @property
    def labels(self) -> list:
        """Parameter labels (e.g. "link1.mass", "link1_joint.damping"), in ``values`` order."""
        return self.mass_labels + self.joint_labels["damping"] + self.joint_labels["armature"]

    def assign(self, values: dict):
        """Set the physical values of the labels in ``values`` (others keep theirs)."""
        unknown = sorted(set(values) - set(self.labels))
        if unknown:
            raise ValueError(f"values: unknown parameter {unknown[0]!r}; expected some of {', '.join(self.labels)}")
        with torch.no_grad():
            for i, label in enumerate(self.mass_labels):
                if label in values:
                    self.log_mass_ratio[i] = float(np.log(values[label] / float(self.mass0[self.bodies[i]])))
            for family in ("damping", "armature"):
                units, scale = getattr(self, f"{family}_units"), getattr(self, f"{family}_scale")
                for i, label in enumerate(self.joint_labels[family]):
                    if label in values:
                        units[i] = values[label] / scale[i]

    def project_(self):
        """Clamp damping and armature at 0 (after an optimiser step)."""
        with torch.no_grad():
            self.damping_units.clamp_(min=0.0)
            self.armature_units.clamp_(min=0.0)

    def values(self) -> dict:
        """label -> physical value (kg, N m s/rad, kg m^2 for hinges)."""
        masses = self.mass0[self.bodies] * torch.exp(self.log_mass_ratio)
        flat = torch.cat([masses, self.damping_units * self.damping_scale, self.armature_units * self.armature_scale])
        flat = flat.detach().cpu().numpy()
        return dict(zip(self.labels, flat.tolist()))

    def fields(self, worlds: int) -> dict:
        """Model field -> tensor in world layout (worlds, rows per world, ...) for ``TorchStep``."""
        device = self.mass0.device
        bodies, dofs = (torch.as_tensor(self.bodies, device=device),), (torch.as_tensor(self.dofs, device=device),)
        ratio = torch.ones_like(self.mass0).index_put(bodies, torch.exp(self.log_mass_ratio))
        per_world = {
            "body_mass": self.mass0 * ratio,
            "body_inertia": self.inertia0 * ratio[:, None, None],
            "joint_damping": self.damping0.index_put(dofs, self.damping_units * self.damping_scale),
            "joint_armature": self.armature0.index_put(dofs, self.armature_units * self.armature_scale),
        }
        return {name: t.expand(worlds, *t.shape).contiguous() for name, t in per_world.items()}


class TorchRobot:
    """The robot in ``worlds`` worlds of one float64 model, stepped through ``TorchStep``
    with the measured torques plus an optional residual."""

    def __init__(self, runs: RobotRuns, worlds: int, device=None):
        worlds = _positive_int("worlds", worlds)
        builder, scene = import_robot(runs.robot)
        self.single = builder.finalize(device=device, dtype=wp.float64)
        self.body_names = {index: name for name, index in scene.bodies.items()}
        self.model = builder.replicated(worlds).finalize(device=device, requires_grad=True, dtype=wp.float64)
        self.step = TorchStep(SemiImplicitSolver(self.model), runs.dt, worlds=worlds)
        self.runs, self.worlds, self.device = runs, worlds, self.step.torch_device
        self.coords = torch.as_tensor(runs.coords, device=self.device)
        self.dofs = torch.as_tensor(runs.dofs, device=self.device)

    def tensor(self, values) -> torch.Tensor:
        """``values`` as a float64 tensor on the model's device."""
        return torch.as_tensor(values, dtype=torch.float64, device=self.device)

    def parameters(self, values: dict | None = None) -> AnalyticParameters:
        """``AnalyticParameters`` of this robot on its device (the file's values, or ``values``)."""
        return AnalyticParameters(self.single, self.body_names, self.runs, values).to(self.device)

    def rollout(self, q0, qd0, tau, analytic: AnalyticParameters, residual: JointResidual | None = None):
        """(steps + 1, worlds, J) angles of the measured joints from (worlds, J) start angles
        and rates under (steps, worlds, J) torques, plus ``residual``'s at every step."""
        q0, qd0, tau = self.tensor(q0), self.tensor(qd0), self.tensor(tau)
        if q0.shape != (self.worlds, len(self.runs.joints)) or tau.shape[1:] != q0.shape or q0.shape != qd0.shape:
            raise ValueError(f"q0, qd0 must be (worlds, joints) = {(self.worlds, len(self.runs.joints))} and tau "
                             f"(steps, worlds, joints), got {tuple(q0.shape)}, {tuple(qd0.shape)}, {tuple(tau.shape)}")
        state = self.step.initial_state()
        state["joint_q"][:, self.coords] = q0
        state["joint_qd"][:, self.dofs] = qd0
        params = analytic.fields(self.worlds)
        angles = [q0]
        for k in range(tau.shape[0]):
            torque = tau[k]
            if residual is not None:
                torque = torque + residual(state["joint_q"][:, self.coords], state["joint_qd"][:, self.dofs], tau[k])
            joint_f = torch.zeros_like(state["joint_qd"])
            joint_f[:, self.dofs] = torque
            state = self.step(state, {"joint_f": joint_f}, params)
            angles.append(state["joint_q"][:, self.coords])
        return torch.stack(angles)

    def window_loss(self, windows: ShootingWindows, analytic: AnalyticParameters,
                    residual: JointResidual | None = None) -> torch.Tensor:
        """Mean squared joint-angle error (rad^2) of the windows at their measured samples."""
        if windows.count != self.worlds:
            raise ValueError(f"windows: {windows.count} windows for a robot of {self.worlds} worlds")
        angles = self.rollout(windows.q0, windows.qd0, windows.tau, analytic, residual)
        weight = self.tensor(windows.weight)
        error = (angles - self.tensor(windows.target)) ** 2 * weight[..., None]
        return error.sum() / (weight.sum() * len(self.runs.joints))


def fit_analytic(runs: RobotRuns, windows: ShootingWindows, iterations: int = 40, method: str = "lbfgsb",
                 families=("masses", "damping", "armature"), start: dict | None = None,
                 progress: bool = False, device=None) -> tuple:
    """(label -> fitted value, ``OptimizationResult``): the analytic ``families`` alone,
    one value per robot shared by every window, fitted by ``wpsim.opt.minimize`` to the
    windows' mean squared joint-angle error (rad^2), tape gradients over one rollout of all
    windows as worlds; from the file's values, or those of ``start`` (label -> value);
    ``device``: Warp's (default: Warp's default device)."""
    iterations = _positive_int("iterations", iterations)
    unknown = [f for f in families if f not in ("masses", "damping", "armature")]
    if unknown or not families:
        raise ValueError(f"families: unknown {unknown or list(families)}; choose from masses, damping, armature")
    robot = TorchRobot(runs, windows.count, device)
    model, K = robot.model, windows.count
    coords_per, dofs_per = model.joint_coord_count // K, model.joint_dof_count // K
    state0 = model.state()
    q, qd = state0.joint_q.numpy().reshape(K, coords_per), state0.joint_qd.numpy().reshape(K, dofs_per)
    q[:, runs.coords], qd[:, runs.dofs] = windows.q0, windows.qd0
    state0.joint_q.assign(q.ravel())
    state0.joint_qd.assign(qd.ravel())
    controls = []
    for k in range(windows.steps):
        f = np.zeros((K, dofs_per))
        f[:, runs.dofs] = windows.tau[k]
        control = model.control(requires_grad=False)  # measured inputs, not parameters
        control.joint_f.assign(f.ravel())
        controls.append(control)
    norm = windows.weight.sum() * len(runs.joints)
    weights, targets = {}, {}
    for k in np.flatnonzero(windows.weight.sum(axis=1) > 0.0):
        w, t = np.zeros((K, coords_per)), np.zeros((K, coords_per))
        w[:, runs.coords] = windows.weight[k][:, None] / norm
        t[:, runs.coords] = windows.target[k]
        weights[k] = wp.array(w.ravel(), dtype=wp.float64, device=model.device)
        targets[k] = wp.array(t.ravel(), dtype=wp.float64, device=model.device)

    def loss_fn(k, state, loss):
        if k in weights:
            joint_tracking_loss(state, targets[k], weights[k], loss=loss)

    rollout = Rollout(SemiImplicitSolver(model), windows.steps, runs.dt, loss_fn, control=controls, mode="full")
    analytic = robot.parameters()
    problem = Problem(rollout, state0, _shared_parameters(analytic, runs, K, families))
    x0 = problem.x0
    for label, value in (start or {}).items():
        if label not in problem.params.labels:
            raise ValueError(f"start: {label!r} is not a fitted parameter ({', '.join(problem.params.labels)})")
        x0[problem.params.labels.index(label)] = value
    fit = minimize(problem, method, iterations=iterations, x0=x0, progress=progress)
    return fit.values(), fit


def _shared_parameters(analytic: AnalyticParameters, runs: RobotRuns, worlds: int, families) -> list:
    """``wpsim.opt`` declarations of ``families``, each value written into every world."""
    params = []
    if "masses" in families:
        mass0, inertia0 = analytic.mass0.cpu().numpy(), analytic.inertia0.cpu().numpy()
        bodies = analytic.bodies

        def build(masses):
            mass, inertia = mass0.copy(), inertia0.copy()
            mass[bodies] = masses
            inertia[bodies] *= (masses / mass0[bodies])[:, None, None]
            return {"model.body_mass": np.tile(mass, worlds), "model.body_inertia": np.tile(inertia, (worlds, 1, 1))}

        params.append(DerivedParameter("masses", mass0[bodies], build, labels=tuple(analytic.mass_labels),
                                       units=("kg",) * len(bodies), log=True))
    per_world = len(analytic.damping0)
    for family in ("damping", "armature"):
        if family not in families:
            continue
        for i, (dof, hinge, label) in enumerate(zip(runs.dofs, runs.hinges, analytic.joint_labels[family])):
            params.append(Parameter(f"model.joint_{family}", index=dof + per_world * np.arange(worlds), shared=True,
                                    lower=0.0, name=label, unit=UNITS[family][hinge],
                                    scale=float(getattr(analytic, f"{family}_scale")[i])))
    return params


def train_residual(runs: RobotRuns, windows: ShootingWindows, residual: JointResidual,
                   analytic_values: dict | None = None, iterations: int = 200, lr: float = 3e-3,
                   analytic_lr: float = 1e-3, lr_decay: float = 0.1, train_analytic: bool = True,
                   progress: bool = False, device=None) -> tuple:
    """Train ``residual`` (and, with ``train_analytic``, the analytic parameters starting
    from ``analytic_values``) with Adam on the windows' mean squared joint-angle error
    (rad^2) through ``TorchStep``; the learning rates decay geometrically to ``lr_decay``
    times their start over the run; ``device``: Warp's (default: Warp's default device).
    Returns (label -> analytic values, history: one dict per iteration with the "loss"
    (rad^2) before its step, "wall_s" and the "analytic" values after it)."""
    iterations = _positive_int("iterations", iterations)
    for name, value in (("lr", lr), ("analytic_lr", analytic_lr), ("lr_decay", lr_decay)):
        if not value > 0.0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
    if residual.joints != len(runs.joints):
        raise ValueError(f"residual: {residual.joints} joints, the runs measure {len(runs.joints)}")
    robot = TorchRobot(runs, windows.count, device)
    analytic = robot.parameters(analytic_values)
    residual.to(robot.device)
    groups = [{"params": list(residual.parameters()), "lr": lr}]
    if train_analytic:
        groups.append({"params": list(analytic.parameters()), "lr": analytic_lr})
    optimiser = torch.optim.Adam(groups)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda i: lr_decay ** (i / iterations))
    from wpsim.io.progress import ProgressBar

    bar = ProgressBar(iterations, "residual", enabled=progress, every=max(iterations // 20, 1))
    history, start = [], time.perf_counter()
    with one_torch_thread(), bar:
        for i in range(iterations):
            optimiser.zero_grad()
            loss = robot.window_loss(windows, analytic, residual)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"train_residual: the loss is {loss.item()} at iteration {i}")
            loss.backward()
            optimiser.step()
            schedule.step()
            analytic.project_()
            history.append({"iteration": i, "loss": loss.item(), "wall_s": time.perf_counter() - start,
                            "analytic": analytic.values()})
            bar.update(f"loss {loss.item():.4g} rad^2")
    return analytic.values(), history


def open_loop(runs: RobotRuns, analytic_values: dict | None = None, residual: JointResidual | None = None,
              device=None) -> list:
    """Per run, (S, J) simulated angles (rad or m) at its samples: every run simulated from
    its first measured state to its end under its torques (runs as worlds of one model on
    ``device``), with the analytic values given (default: the file's) and ``residual``."""
    robot = TorchRobot(runs, len(runs.runs), device)
    if residual is not None:
        residual.to(robot.device)
    steps = max(run["steps"] for run in runs.runs)
    tau = np.zeros((steps, len(runs.runs), len(runs.joints)))
    for w, run in enumerate(runs.runs):
        tau[: run["steps"], w] = run["tau"]
    q0 = np.stack([run["q"][0] for run in runs.runs])
    qd0 = np.stack([run["qd"][0] for run in runs.runs])
    with torch.no_grad(), one_torch_thread():
        angles = robot.rollout(q0, qd0, tau, robot.parameters(analytic_values), residual).cpu().numpy()
    return [angles[run["sample_steps"], w] for w, run in enumerate(runs.runs)]


def rms_error(runs: RobotRuns, simulated: list) -> float:
    """RMS joint-angle error (rad or m) of ``open_loop``'s angles over every run's samples."""
    errors = np.concatenate([(sim - run["q"]).ravel() for sim, run in zip(simulated, runs.runs)])
    return float(np.sqrt(np.mean(errors ** 2)))
