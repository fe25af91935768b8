"""A learned residual torque for a robot arm with joint friction, trained end to end through the simulator.

The "measurements" (``assets/arm_2link_friction/``, made by ``assets/make_friction_data.py``)
come from MuJoCo stepping the 2-link arm of ``assets/arm_2link.xml`` with other masses,
damping and armature than the file and Coulomb friction of 0.3 and 0.2 N m on the joints,
an effect wpsim's joint model lacks: ten training runs of 1 s and three held-out runs of
1.5 s from random states under random sums of sines, at 200 Hz.

The training runs are cut into short multiple-shooting windows, each restarted from its
measured state; all windows are worlds of one replicated model, and the loss is their mean
squared joint-angle error (``wpsim.opt.residual``).

(a) The analytic model alone: link masses (inertias scaled), damping and armature, shared
    by every window, fitted by L-BFGS-B on the tape gradient (``fit_analytic``, wpsim.opt).
(b) The analytic model plus ``JointResidual``, a per-joint torque tau_res(q, qd, tau_cmd)
    (a 2x32 tanh MLP plus a linear term, zero at the start), trained with Adam through the
    PyTorch bridge ``wpsim.opt.torch.TorchStep`` together with the analytic parameters,
    which continue from (a)'s fit (``train_residual``).

Both are then simulated open loop over the held-out runs from their first samples; the
RMS joint-angle error of (b) must be at most 30 % of (a)'s. Writes heldout_00.png ...
(measured vs (a) vs (b) per held-out run), analytic_fit.png and residual_training.png
(loss and parameters per iteration) and result.json into --out.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.io.plots import plot_joint_tracking, plot_optimization_history
from wpsim.opt.residual import (
    JointResidual,
    fit_analytic,
    load_runs,
    open_loop,
    rms_error,
    shooting_windows,
    train_residual,
)

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOT = ASSETS / "arm_2link.xml"
DATA = ASSETS / "arm_2link_friction"
TRUTH = json.loads((DATA / "truth.json").read_text())
SETTINGS = {  # --test: shorter fits of the same data
    True: {"window_s": 0.05, "analytic_iterations": 30, "residual_iterations": 80},
    False: {"window_s": 0.05, "analytic_iterations": 60, "residual_iterations": 400},
}
TRAINING = {"lr": 1e-2, "analytic_lr": 1e-3, "lr_decay": 0.3}  # Adam, decaying to 0.3 x over the run
QD_SCALE = 0.1  # rad/s: the residual's rate input unit, small so that a tanh unit can switch with sign(qd)
LIMIT = 0.3  # largest ratio of held-out RMS errors (b) / (a) that --test accepts


def heldout_errors(held, simulated) -> dict:
    """Overall and per-run RMS joint-angle error (rad) of open-loop angles on the held-out runs."""
    per_run = {Path(run["name"]).name: float(np.sqrt(np.mean((sim - run["q"]) ** 2)))
               for sim, run in zip(simulated, held.runs)}
    return {"all": rms_error(held, simulated), "per_run": per_run}


def write_plots(out: Path, held, curves: dict, fit, history) -> list:
    """heldout_NN.png per held-out run, analytic_fit.png and residual_training.png."""
    paths = []
    for i, run in enumerate(held.runs):
        time_s = run["sample_steps"] * held.dt
        paths.append(plot_joint_tracking(time_s, run["q"], {label: sims[i] for label, sims in curves.items()},
                                         held.joints, out / f"heldout_{i:02d}.png",
                                         f"held-out {Path(run['name']).name}: open loop from the first sample"))
    paths.append(fit.plot(out / "analytic_fit.png", "(a) analytic model alone, L-BFGS-B over the windows"))
    units = dict(zip(fit.labels, fit.units))
    traces = {f"{label} ({units[label]})": [h["analytic"][label] for h in history] for label in history[0]["analytic"]}
    paths.append(plot_optimization_history([h["loss"] for h in history], traces, out / "residual_training.png",
                                           "(b) residual and analytic parameters, Adam through TorchStep"))
    return paths


def run(test: bool, out, device=None) -> dict:
    """Fit (a), train (b), compare them on the held-out runs; write the outputs into ``out``."""
    out, settings = Path(out), SETTINGS[test]
    torch.manual_seed(0)
    train = load_runs(ROBOT, sorted(DATA.glob("train_*.npz")))
    held = load_runs(ROBOT, sorted(DATA.glob("heldout_*.npz")))
    windows = shooting_windows(train, settings["window_s"])
    print(f"{len(train.runs)} training runs -> {windows.count} windows of {windows.steps} steps "
          f"({settings['window_s']:g} s); {len(held.runs)} held-out runs")

    start = time.perf_counter()
    values_a, fit = fit_analytic(train, windows, iterations=settings["analytic_iterations"], device=device)
    wall_a = time.perf_counter() - start
    print(f"(a) analytic fit: window loss {fit.loss0:.4g} -> {fit.loss:.4g} rad^2 in {fit.rollouts} rollouts, "
          f"{wall_a:.1f} s")
    print(fit.table())

    angles = np.concatenate([r["q"] for r in train.runs])
    torques = np.concatenate([r["tau"] for r in train.runs])
    residual = JointResidual(len(train.joints), hidden=32, layers=2, q_scale=angles.std(axis=0), qd_scale=QD_SCALE,
                             torque_scale=torques.std(axis=0))
    start = time.perf_counter()
    values_b, history = train_residual(train, windows, residual, values_a, iterations=settings["residual_iterations"],
                                       device=device, **TRAINING)
    wall_b = time.perf_counter() - start
    print(f"(b) residual training: window loss {history[0]['loss']:.4g} -> {history[-1]['loss']:.4g} rad^2 in "
          f"{len(history)} iterations, {wall_b:.1f} s")

    curves = {"file's model": open_loop(held, device=device),
              "(a) analytic fit": open_loop(held, values_a, device=device),
              "(b) analytic + residual": open_loop(held, values_b, residual, device=device)}
    errors = {label: heldout_errors(held, sims) for label, sims in curves.items()}
    rms_a, rms_b = errors["(a) analytic fit"]["all"], errors["(b) analytic + residual"]["all"]
    ratio = rms_b / rms_a
    for label, e in errors.items():
        print(f"held-out open-loop RMS joint-angle error, {label}: {e['all']:.5f} rad "
              f"({np.degrees(e['all']):.3f} deg)")
    print(f"ratio (b) / (a) = {ratio:.3f} (limit {LIMIT})")

    plots = write_plots(out, held, curves, fit, history)
    result = {
        "data": str(DATA.relative_to(ASSETS.parent)), "settings": {**settings, **TRAINING, "qd_scale_rad_s": QD_SCALE},
        "windows": windows.count, "window_steps": windows.steps, "dt_s": train.dt,
        "truth": TRUTH["parameters"], "frictionloss_N_m": TRUTH["frictionloss_N_m"],
        "analytic_fit": {"parameters": values_a, "loss0_rad2": fit.loss0, "loss_rad2": fit.loss,
                         "rollouts": fit.rollouts, "wall_s": wall_a},
        "residual_training": {"parameters": values_b, "loss0_rad2": history[0]["loss"],
                              "loss_rad2": history[-1]["loss"], "iterations": len(history), "wall_s": wall_b},
        "heldout_rms_rad": errors, "ratio_b_over_a": ratio, "plots": [p.name for p in plots],
    }
    write_json(out / "result.json", result)
    return result


def main(argv=None) -> int:
    """Command line: --device, --out, --test (shorter fits; fail unless (b) / (a) <= 0.3)."""

    def check(result):
        ratio = result["ratio_b_over_a"]
        return None if ratio <= LIMIT else f"held-out RMS error ratio (b) / (a) = {ratio:.3f} > {LIMIT}"

    return example_main(__doc__, "arm_residual", f"shorter fits; fail unless the held-out RMS joint-angle error "
                        f"with the residual is at most {LIMIT * 100:.0f} %% of the analytic fit's", run, check, argv,
                        inputs=[ROBOT, *sorted(DATA.iterdir())])


if __name__ == "__main__":
    raise SystemExit(main())
