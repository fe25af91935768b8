"""System identification through contact: the friction coefficient of a tossed box from its measured path.

The "measurement" (``assets/box_toss.csv``, made by ``assets/make_box_toss_data.py``) is
MuJoCo's run of a 10 cm, 1 kg box launched just above the ground at 2 m/s with a spin:
it lands, slides 0.65 m and stops; its centre was recorded at 100 Hz for 0.8 s with both
geoms' friction at 0.35. wpsim imports ``assets/box_toss.xml`` (whose friction says 0.8),
starts from the same launch and steps it with soft-constraint contact (the implicit
adjoint), and fits one friction coefficient shared by both shapes (log-space) with
L-BFGS-B on the tape gradient of the mean squared distance (m^2) between the simulated
and the measured centre. MuJoCo's contact model is not wpsim's, so even the true friction
leaves a residual: it is reported (RMS, mm) next to the fitted one. Nelder-Mead from the
same start with the same number of rollouts is the zero-order baseline.

Writes path.png (measured and simulated paths seen from above, and the distance over time),
history.png (loss and friction per iteration), box_toss.usd (the initial and the fitted
rollouts as the variants of "iteration") and result.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import SemiImplicitSolver, SoftContactOptions
from wpsim.apps.console import example_main
from wpsim.diff import Rollout
from wpsim.diff.losses import squared_distance
from wpsim.diff.markers import BodyMarkers
from wpsim.io.files import write_json
from wpsim.io.measurements import load_trajectory
from wpsim.io.mjcf import import_mjcf
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip
from wpsim.opt import Parameter, Problem, minimize

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TRUTH = json.loads((ASSETS / "box_toss_truth.json").read_text())


class BoxToss:
    """The imported box, the measured centre on the sample grid, and the friction problem."""

    def __init__(self, duration: float, device=None):
        builder, scene = import_mjcf(ASSETS / "box_toss.xml")
        self.model = builder.finalize(device=device, requires_grad=True, dtype=wp.float64)
        self.dt = scene.timestep
        self.every = int(round(TRUTH["sample_period_s"] / self.dt))
        self.steps = int(round(duration / self.dt))
        data = load_trajectory(ASSETS / "box_toss.csv")
        data.require("marker", ["box"], "marker of the box")
        self.times = self.dt * self.every * np.arange(self.steps // self.every + 1)
        self.measured = data.resample(self.times).channel("marker", "box")
        self.state0 = self.model.state()
        qd = self.state0.joint_qd.numpy()
        qd[:3], qd[3:] = TRUTH["start"]["velocity_m_per_s"], TRUTH["start"]["spin_rad_per_s"]
        self.state0.joint_qd.assign(qd)
        self.centre = BodyMarkers(self.model, ["box"], [scene.bodies["box"]], [(0.0, 0.0, 0.0)])
        self.solver = SemiImplicitSolver(self.model, soft_contact=SoftContactOptions())
        targets = [wp.array(p[None], dtype=wp.vec3d, device=self.model.device) for p in self.measured]
        weight = 1.0 / (len(self.measured) - 1)

        def loss_fn(k, state, loss):
            if k > 0 and k % self.every == 0:
                squared_distance(self.centre.positions(state), targets[k // self.every], axis_weights=(weight,) * 3,
                                 loss=loss)

        self.rollout = Rollout(self.solver, self.steps, self.dt, loss_fn, mode="checkpoint")

    def problem(self) -> Problem:
        """Fit one friction coefficient shared by the ground and the box (log-space)."""
        return Problem(self.rollout, self.state0, [Parameter("model.shape_mu", shared=True, log=True, name="friction",
                                                             unit="-", lower=0.02, upper=2.0)])

    def path(self, friction: float) -> tuple:
        """(centre positions at the samples (N, 3) m, States at every sample) with ``friction``."""
        self.model.shape_mu.assign(np.full(self.model.shape_count, friction))
        solver = SemiImplicitSolver(self.model, soft_contact=SoftContactOptions())
        state, following = self.model.state(requires_grad=False), self.model.state(requires_grad=False)
        state.assign(self.state0)
        frames, states = [self.centre.positions(state).numpy()[0]], [state]
        for k in range(self.steps):
            solver.step(state, following, None, self.dt)
            state, following = following, self.model.state(requires_grad=False)
            if (k + 1) % self.every == 0:
                frames.append(self.centre.positions(state).numpy()[0])
                states.append(state)
        return np.array(frames), states


def rms_mm(path: np.ndarray, measured: np.ndarray) -> float:
    """RMS distance (mm) between two sampled paths."""
    return float(np.sqrt(np.mean(np.sum((path - measured) ** 2, axis=1))) * 1e3)


def run(test: bool, out, device=None) -> dict:
    """Fit the friction (shorter horizon and fewer iterations with ``test``); write the outputs."""
    out = Path(out)
    duration, iterations = (0.6, 8) if test else (0.8, 30)
    toss = BoxToss(duration, device)
    initial = float(toss.model.shape_mu.numpy()[0])
    print(f"box_toss.csv: {len(toss.measured)} samples over {toss.times[-1]:.2f} s; file friction {initial:g}, "
          f"true (MuJoCo) {TRUTH['friction']:g}")
    fit = minimize(toss.problem(), "lbfgsb", iterations=iterations)
    baseline = minimize(BoxToss(duration, device).problem(), "nelder-mead", iterations=100 * iterations,
                        max_rollouts=fit.rollouts)
    fitted = fit.values()["friction"]
    paths = {name: toss.path(mu) for name, mu in
             (("initial", initial), ("true", TRUTH["friction"]), ("fitted", fitted))}
    result = {
        "friction": {"initial": initial, "fitted": fitted, "truth": TRUTH["friction"],
                     "relative_error": fitted / TRUTH["friction"] - 1.0},
        "rms_path_error_mm": {name: rms_mm(p[0], toss.measured) for name, p in paths.items()},
        "gradient_fit": {"loss_m2": fit.loss, "rollouts": fit.rollouts, "wall_s": fit.wall_s},
        "zero_order": {"method": baseline.method, "friction": baseline.values()["friction"],
                       "loss_m2": baseline.loss, "rollouts": baseline.rollouts},
    }
    print(fit.table())
    errors = result["rms_path_error_mm"]
    print(f"friction {fitted:.4f} against MuJoCo's {TRUTH['friction']:g} ({result['friction']['relative_error']:+.2%}); "
          f"path RMS error {errors['initial']:.1f} mm initially, {errors['fitted']:.2f} mm fitted, "
          f"{errors['true']:.2f} mm at the true friction (the two contact models differ)")
    print(f"Nelder-Mead with a budget of {fit.rollouts} rollouts (used {baseline.rollouts}): friction "
          f"{result['zero_order']['friction']:.4f}, loss {baseline.loss:.3g} m^2 against {fit.loss:.3g} m^2")
    write_json(out / "result.json", result)
    fit.plot(out / "history.png", "box toss: friction fit")
    _plot(out / "path.png", toss, paths)
    write_rollouts(out / "box_toss.usd", toss.model, {"initial": paths["initial"][1], "fitted": paths["fitted"][1]},
                   fps=1.0 / (toss.dt * toss.every))
    render_strip(out / "box_toss.usd", out / "box_toss_frames.png", take="fitted")
    return result


def _plot(path, toss: BoxToss, paths: dict):
    """Paths from above and the distance to the measurement over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, error) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    top.plot(toss.measured[:, 0], toss.measured[:, 1], "k.", label="measured (MuJoCo)")
    for name, (frames, _) in paths.items():
        top.plot(frames[:, 0], frames[:, 1], label=f"wpsim, {name} friction")
        error.plot(toss.times, np.linalg.norm(frames - toss.measured, axis=1) * 1e3, label=name)
    top.set(xlabel="x (m)", ylabel="y (m)", title="box centre seen from above")
    top.legend(fontsize=8)
    top.axis("equal")
    error.set(xlabel="time (s)", ylabel="distance to the measurement (mm)", yscale="log", title="path error")
    error.legend(fontsize=8)
    for ax in (top, error):
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (0.6 s, 8 iterations; friction within 3 %)."""

    def check(result):
        error = result["friction"]["relative_error"]
        return f"friction off by {error:+.2%} (> 3 %)" if abs(error) > 0.03 else None

    return example_main(__doc__, "box_toss_friction", "short run; fail unless the friction is within 3 %%", run,
                        check, argv,
                        inputs=[ASSETS / name for name in ("box_toss.xml", "box_toss.csv", "box_toss_truth.json")])


if __name__ == "__main__":
    raise SystemExit(main())
