"""The report of a system-identification fit (``wpsim.opt.sysid.identify``): each measured
run replayed with the initial and the fitted model, the fit, its verdict, and the files a
reader looks at (``SysidResult.write``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wpsim.solvers import eval_fk

OUTPUT_FILES = ("sysid.json", "tracking.png", "history.png", "rollouts.usd", "rollouts.png", "calibrated.usda")
"""The files ``SysidResult.write`` writes into its folder, in its order."""
FRAME_RATE = 100.0
"""Frames per second of the rollouts ``SysidResult.write`` puts in its USD stage."""


def replay(run) -> tuple:
    """Of a ``wpsim.opt.sysid.RobotRun``: ((steps + 1, joints) simulated angles of the measured joints, the states at
    ``FRAME_RATE`` (``FrameStates``, made when read)) with the model's current parameters
    (unrecorded, one ``SemiImplicitSolver.replay``)."""
    model = run.model
    state = model.state(requires_grad=False)  # an unrecorded replay needs no gradient arrays
    state.assign(run.state0)
    forces, targets = run.input_arrays()
    q, qd = (a.numpy() for a in run.solver(threads=1).replay(state, forces, run.dt, run.control(),
                                                             joint_target_steps=targets))
    every = max(int(round(1.0 / (FRAME_RATE * run.dt))), 1)
    return q[:, run.coords], FrameStates(model, q[::every], qd[::every])


class FrameStates(Sequence):
    """States of a replay at some steps, each made (joint state and forward kinematics) when
    read: a fit's report needs them only if it writes its USD stage."""

    def __init__(self, model, joint_q: np.ndarray, joint_qd: np.ndarray):
        self.model, self.joint_q, self.joint_qd = model, joint_q, joint_qd

    def __len__(self) -> int:
        return len(self.joint_q)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        frame = self.model.state(requires_grad=False)
        frame.joint_q.assign(self.joint_q[k])
        frame.joint_qd.assign(self.joint_qd[k])
        return eval_fk(self.model, frame)


@dataclass
class FittedRun:
    """One measured run of a fit: its data file, the ``RobotRun`` replaying it, the measured
    joints' simulated angles (steps + 1, joints) rad with the initial and with the fitted
    model, and those replays' states at ``FRAME_RATE`` ("initial" / "fitted" -> ``FrameStates``)."""

    data: str
    run: object
    before: np.ndarray
    after: np.ndarray
    frames: dict

    def rms(self, simulated: np.ndarray) -> float:
        """RMS joint-angle error (rad) of ``simulated`` against this run's measurement."""
        return self.run.rms(simulated)


@dataclass
class SysidResult:
    """A fitted robot: the measured runs (``FittedRun``: one per data file) with their replays
    before and after, the fit (and the zero-order baseline with the same rollout budget, if
    asked), its verdict and how the runs were replayed. ``run``, ``data``,
    ``simulated_before``, ``simulated_after`` and ``frames`` are the first run's."""

    robot: str
    runs: list
    families: list
    fit: object
    zero_order: object | None = None
    verdict: object = None
    """``wpsim.opt.verdict.Verdict`` of the fit."""
    window_s: float | None = None
    """Multiple shooting's window (s; ``wpsim.opt.shooting``; a run shorter than it is one
    window), None for one rollout of each whole run."""
    missed: object = None
    """The fit of one rollout of each whole run that missed before ``identify``'s "auto" fitted
    windows instead (an ``OptimizationResult``), or None."""

    @property
    def run(self):
        return self.runs[0].run

    @property
    def data(self) -> str:
        return self.runs[0].data

    @property
    def simulated_before(self) -> np.ndarray:
        return self.runs[0].before

    @property
    def simulated_after(self) -> np.ndarray:
        return self.runs[0].after

    @property
    def frames(self) -> dict:
        return self.runs[0].frames

    def rms(self, simulated: np.ndarray) -> float:
        """RMS joint-angle error (rad) of a simulation of the first run against its measurement."""
        return self.run.rms(simulated)

    def overall_rms(self, which: str) -> float:
        """RMS joint-angle error (rad) over every sample of every run of the "before" or "after" replays."""
        return pooled_rms([r.run for r in self.runs], [getattr(r, which) for r in self.runs])

    def to_dict(self) -> dict:
        """JSON-ready report (rad, s, the parameters' units); "rms_error_rad" is over every run,
        "runs" gives each run's."""
        return {
            "robot": self.robot, "data": self.data, "joints": self.run.joints, "dt_s": self.run.dt,
            "steps": self.run.steps, "families": self.families, "shooting_window_s": self.window_s,
            "single_shooting_missed": None if self.missed is None else self.missed.to_dict(),
            "rms_error_rad": {"before": self.overall_rms("before"), "after": self.overall_rms("after")},
            "runs": [{"data": r.data, "steps": r.run.steps,
                      "rms_error_rad": {"before": r.rms(r.before), "after": r.rms(r.after)}} for r in self.runs],
            "fit": self.fit.to_dict(),
            "zero_order": None if self.zero_order is None else self.zero_order.to_dict(),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            **({"bodies": self.run.body_inertials()} if "inertia" in self.families else {}),
        }

    def summary(self) -> str:
        """The fitted parameters with units, the errors and the costs, as text."""
        whole = "one rollout of the whole run" if len(self.runs) == 1 else \
            f"one rollout of each whole run, {len(self.runs)} runs"
        lines = [self.fit.table(),
                 f"RMS joint error {np.degrees(self.overall_rms('before')):.4g} deg before, "
                 f"{np.degrees(self.overall_rms('after')):.4g} deg after ({whole})"]
        if len(self.runs) > 1:
            lines += [f"  {r.data}: {np.degrees(r.rms(r.before)):.4g} deg before, {np.degrees(r.rms(r.after)):.4g} "
                      f"deg after ({r.run.steps * r.run.dt:.4g} s)" for r in self.runs]
        if self.window_s is not None:
            lines.append(f"fitted by multiple shooting: windows of {self.window_s:.4g} s, each from the measured state "
                         f"at its start")
        if self.missed is not None:
            lines.append(f"(after one rollout of the whole run missed: loss {self.missed.loss:.6g} rad^2, "
                         f"{self.missed.rollouts} rollouts, {self.missed.message})")
        if self.zero_order is not None:
            z = self.zero_order
            lines.append(f"zero-order baseline ({z.method}, {z.rollouts} rollouts): loss {z.loss0:.6g} -> "
                         f"{z.loss:.6g} rad^2 against {self.fit.loss:.6g} rad^2 with gradients "
                         f"({self.fit.rollouts} rollouts)")
        if "inertia" in self.families:
            for name, body in self.run.body_inertials().items():
                moments = np.linalg.eigvalsh(np.array(body["inertia_kg_m2"]))
                lines.append(f"{name}: mass {body['mass_kg']:.6g} kg, centre of mass "
                             f"({', '.join(f'{1e3 * c:.4g}' for c in body['com_m'])}) mm, principal moments "
                             f"({', '.join(f'{m:.4g}' for m in moments)}) kg m^2")
        if self.verdict is not None:
            lines += self.verdict.lines(dict(zip(self.fit.labels, self.fit.units)))
        return "\n".join(lines)

    def write(self, out) -> dict:
        """Write sysid.json, tracking.png (measured vs simulated before and after, the runs one
        after another), history.png, rollouts.usd (the initial and the fitted model's replays
        as the variants of "iteration": "initial" and "fitted" of the first run, then
        "initial_run2", "fitted_run2", ... of the others), rollouts.png (frames of the first
        run's fitted replay) and calibrated.usda (the fitted robot as a UsdPhysics stage with
        the file's body and joint names and the time step) into the folder ``out``; returns
        name -> path."""
        from pathlib import Path

        from wpsim.io.files import write_json
        from wpsim.io.plots import plot_joint_tracking
        from wpsim.io.usd_export import write_rollouts
        from wpsim.io.usd_physics import export_physics
        from wpsim.io.usd_render import render_strip

        out = Path(out)
        report, tracking, history, rollouts, frames, robot = (out / name for name in OUTPUT_FILES)
        time, measured, before, after = _runs_in_turn(self.runs)
        curves = {"initial model": before, "fitted model": after}
        sources = ", ".join(Path(r.data).name for r in self.runs)
        takes = {}
        for number, r in enumerate(self.runs, start=1):
            suffix = "" if number == 1 else f"_run{number}"
            takes.update({f"{name}{suffix}": states for name, states in r.frames.items()})
        return {
            "report": write_json(report, self.to_dict()),
            "tracking": plot_joint_tracking(time, measured, curves, self.run.joints, tracking,
                                            f"{Path(self.robot).name} against {sources}"),
            "history": self.fit.plot(history),
            "rollouts": write_rollouts(rollouts, self.run.model, takes, FRAME_RATE, body_names=self.run.body_names),
            "frames": render_strip(rollouts, frames, take="fitted")["out"],
            "robot": export_physics(self.run.model, robot, self.run.dt, self.run.body_names, self.run.joint_names),
        }


def pooled_rms(runs: list, simulated: list) -> float:
    """RMS joint-angle error (rad) over every sample of every run (``RobotRun``) of its
    ``simulated`` angles (steps + 1, joints)."""
    errors = [angles - run.measured for run, angles in zip(runs, simulated)]
    return float(np.sqrt(sum(np.sum(e**2) for e in errors) / sum(e.size for e in errors)))


RUN_GAP_S = 0.1
"""Gap (s) between one run and the next in ``SysidResult``'s tracking plot."""


def _runs_in_turn(runs: list) -> tuple:
    """(time (N,) s, measured, before, after (N, joints) rad) of ``runs`` (``FittedRun``) one
    after another on one time axis, ``RUN_GAP_S`` apart, a row of NaN between runs (a gap in
    the plotted lines)."""
    times, tables, start = [], [], 0.0
    for r in runs:
        if times:
            times.append([np.nan])
            tables.append(np.full((1, 3, r.before.shape[1]), np.nan))
        t = start + r.run.dt * np.arange(r.run.steps + 1)
        times.append(t)
        tables.append(np.stack([r.run.measured, r.before, r.after], axis=1))
        start = t[-1] + RUN_GAP_S
    table = np.concatenate(tables)
    return np.concatenate(times), table[:, 0], table[:, 1], table[:, 2]
