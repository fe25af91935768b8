"""Billiards: a cue shot that sends an object ball to a spot on the table, through impacts at their time of impact.

Seven balls (radius 28.6 mm, 0.17 kg) on a frictionless table in the x-y plane, without
gravity: a cue ball at the origin and six object balls spread over 0.4-0.75 m ahead of it.
Balls collide as impacts resolved at their time of impact
(``ModelBuilder.set_particle_impacts``: restitution 0.95, ball-ball friction 0.05): within
the step of first contact a ball drifts to the impact time, its velocity jumps there, and
it drifts on, so the final positions are continuous, smooth functions of the shot. Float64,
1 ms steps, 1.5 s. (No rolling resistance: a velocity-dependent force such as drag is
evaluated at the start of a step, so it would leave a small step-grid ripple in the gradient.)

The decision is the cue ball's velocity (vx, vy) in m/s; the loss is the squared distance
(m^2) from object ball 4 at the end to a spot. L-BFGS-B (``wpsim.opt.minimize``) follows the
tape gradient through the 1,500 steps.

Why impacts: the same shot with penalty contact (a spring of 1e4 N/m while balls overlap)
has a loss that wanders with the step grid as the cue speed changes (the step on which each
contact starts moves with the speed), so its local derivative disagrees with the loss's
slope over a sweep; with impacts they agree. sweep.png shows both.

Writes shot.png (the paths of every ball before and after, the spot, the miss per iteration),
sweep.png (loss against the cue speed, penalty contact and impacts), billiards.usd (takes
"initial" and "optimised") with billiards_frames.png, and result.json. --test: at most 12
iterations; fails unless the ball ends within 1 cm of the spot, the loss falls 100x, and the
impact loss's slope over the sweep matches the tape derivative within 5 %.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import ModelBuilder, SemiImplicitSolver
from wpsim.apps.console import example_main
from wpsim.diff.checkpoint import Rollout
from wpsim.diff.losses import squared_distance
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import UsdRecorder
from wpsim.io.usd_render import render_strip
from wpsim.opt import DerivedParameter, Problem, minimize
from wpsim.solvers.rollout import simulate

RADIUS, MASS = 0.0286, 0.17  # m, kg
RESTITUTION, BALL_FRICTION, OVERLAP_KE = 0.95, 0.05, 1.0e4  # -, -, N/m
TARGET_BALL = 4  # the object ball the shot should place (particle index)
DT, HORIZON = 1e-3, 1.5  # s
SPOT = (1.7, 0.8)  # m, where the target ball should stop
SUCCESS_CM = 1.0
USD_EVERY = 20  # steps per USD frame (50 frames per second)


@dataclass
class ShotConfig:
    """Settings of the shot optimisation."""

    cue_velocity: tuple = (2.0, 0.05)  # m/s, the first shot
    iterations: int = 30
    sweep_points: int = 21
    sweep_width: float = 0.02  # m/s, cue speeds swept around the first shot's (two step-grid periods)


def rack() -> np.ndarray:
    """Ball centres (7, 3) in m: the cue ball, then six object balls spread apart, so that each
    impact of a shot is an event of its own."""
    return np.array([(0.0, 0.0, 0.0), (0.4, 0.0, 0.0), (0.56, 0.085, 0.0), (0.55, -0.1, 0.0), (0.74, 0.01, 0.0),
                     (0.71, 0.19, 0.0), (0.75, -0.2, 0.0)])


def cue_velocities(count: int, cue_velocity) -> np.ndarray:
    """Initial velocities (count, 3) in m/s: the cue ball's (vx, vy, 0), the rack at rest."""
    qd = np.zeros((count, 3))
    qd[0, :2] = cue_velocity
    return qd


def table(impacts: bool, device=None):
    """The model of the table (impacts or penalty contact) and its solver."""
    b = ModelBuilder(gravity=0.0)
    b.add_particles(rack(), masses=MASS, radii=RADIUS)
    b.set_particle_contact(True, ke=OVERLAP_KE, kd=1.0, mu=BALL_FRICTION)
    if impacts:
        b.set_particle_impacts(True, RESTITUTION)
    model = b.finalize(device=device, requires_grad=True, dtype=wp.float64)
    return model, SemiImplicitSolver(model)


class Shot:
    """Rollouts of one table as a function of the cue velocity."""

    def __init__(self, impacts: bool, device=None):
        self.model, self.solver = table(impacts, device)
        self.steps = round(HORIZON / DT)
        self.state0 = self.model.state(requires_grad=True)
        self.spot = wp.array([(*SPOT, 0.0)], dtype=self.model.vec3, device=self.model.device)

    def aim(self, cue_velocity):
        """Set the cue ball's initial velocity (vx, vy) in m/s."""
        self.state0.particle_qd.assign(cue_velocities(self.model.particle_count, cue_velocity))

    def loss_term(self, k: int, state, loss):
        """The rollout's loss: squared distance (m^2) of the target ball to the spot at the end."""
        if k == self.steps:
            squared_distance(state.particle_q[TARGET_BALL:TARGET_BALL + 1], self.spot, (1.0, 1.0, 0.0), loss)

    def states(self, cue_velocity) -> list:
        """Every state of the shot (steps + 1), unrecorded."""
        self.aim(cue_velocity)
        states = simulate(self.solver, self.state0, self.steps, DT, keep_states=True)
        self.solver.check_health()
        return states

    def loss_and_slope(self, cue_velocity) -> tuple[float, float]:
        """Loss (m^2) and its tape derivative along the cue's direction (m^2 per m/s)."""
        self.aim(cue_velocity)
        rollout = Rollout(self.solver, self.steps, DT, self.loss_term, mode="full")
        loss = rollout.forward(self.state0)
        rollout.zero_grad()
        rollout.backward()
        v = np.asarray(cue_velocity, dtype=np.float64)
        grad = self.state0.particle_qd.grad.numpy()[0, :2]
        return float(loss), float(grad @ v / np.linalg.norm(v))


def sweep(config: ShotConfig, device=None) -> dict:
    """Loss and tape derivative over cue speeds around the first shot's, for both contact models."""
    v0 = np.asarray(config.cue_velocity, dtype=np.float64)
    direction = v0 / np.linalg.norm(v0)
    speeds = np.linalg.norm(v0) + np.linspace(-0.5, 0.5, config.sweep_points) * config.sweep_width
    curves = {}
    for name, impacts in (("penalty contact", False), ("impacts", True)):
        shot = Shot(impacts, device)
        values = [shot.loss_and_slope(s * direction) for s in speeds]
        losses = np.array([v[0] for v in values])
        tape = np.array([v[1] for v in values])
        slope = np.diff(losses) / np.diff(speeds)
        mid_tape = 0.5 * (tape[1:] + tape[:-1])
        curves[name] = {"loss_m2": losses.tolist(), "tape_derivative": tape.tolist(),
                        "sweep_slope": slope.tolist(),
                        "worst_slope_error": float(np.max(np.abs(slope - mid_tape)) / np.max(np.abs(mid_tape)))}
    return {"speeds_m_per_s": speeds.tolist(), "curves": curves}


def optimise(config: ShotConfig, device=None) -> tuple[Shot, object]:
    """L-BFGS-B over the cue velocity (vx, vy), vz held at 0 by its bounds."""
    shot = Shot(True, device)
    shot.aim(config.cue_velocity)
    rollout = Rollout(shot.solver, shot.steps, DT, shot.loss_term, mode="full")
    count = shot.model.particle_count

    def velocities(cue):
        return {"state.particle_qd": cue_velocities(count, cue)}

    problem = Problem(rollout, shot.state0, [
        DerivedParameter("cue velocity", config.cue_velocity, velocities, labels=("vx", "vy"),
                         units=("m/s", "m/s"), lower=(0.5, -1.5), upper=(4.0, 1.5), scale=(0.5, 0.02))])
    result = minimize(problem, "lbfgsb", iterations=config.iterations, tolerance=1e-16, progress=True)
    return shot, result


def run(config: ShotConfig, out_dir, device=None) -> dict:
    """Optimise the shot, sweep both contact models, write the plots, stage and result.json."""
    out = Path(out_dir)
    shot, opt = optimise(config, device)
    best = np.asarray(opt.x[:2])
    first_states, best_states = shot.states(config.cue_velocity), shot.states(best)
    miss0 = float(np.sqrt(opt.loss0) * 100)
    miss = float(np.sqrt(opt.loss) * 100)
    print(f"target ball {TARGET_BALL} to the spot {SPOT} m: miss {miss0:.2f} cm -> {miss:.4f} cm in "
          f"{len(opt.history) - 1} iterations ({opt.rollouts} rollouts); cue velocity "
          f"({best[0]:.4f}, {best[1]:.4f}) m/s")
    swept = sweep(config, device)
    for name, curve in swept["curves"].items():
        print(f"{name}: the loss's slope over the sweep differs from the tape derivative by up to "
              f"{curve['worst_slope_error'] * 100:.1f} % of its size")
    result = {"config": asdict(config), "initial_miss_cm": miss0, "final_miss_cm": miss,
              "loss_reduction": opt.loss0 / max(opt.loss, 1e-300), "cue_velocity_m_per_s": best.tolist(),
              "iterations": len(opt.history) - 1, "rollouts": opt.rollouts, "message": opt.message,
              "history": [{"iteration": h["iteration"], "loss_m2": h["loss"]} for h in opt.history],
              "sweep": swept, "healthy": shot.solver.health().ok}
    write_json(out / "result.json", result)
    _plot_shot(out / "shot.png", first_states, best_states, opt.history)
    _plot_sweep(out / "sweep.png", swept)
    _write_usd(out / "billiards.usd", shot.model, {"initial": first_states, "optimised": best_states})
    render_strip(out / "billiards.usd", out / "billiards_frames.png")
    print(f"wrote {out / 'shot.png'}, {out / 'sweep.png'}, {out / 'billiards.usd'}, {out / 'result.json'}")
    return result


def _paths(states) -> np.ndarray:
    return np.array([s.particle_q.numpy()[:, :2] for s in states])


def _plot_shot(path: Path, first_states, best_states, history):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (first, best, curve) = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    for ax, states, title in ((first, first_states, "first shot"), (best, best_states, "optimised shot")):
        paths = _paths(states)
        for k in range(paths.shape[1]):
            width = 2.0 if k in (0, TARGET_BALL) else 0.8
            ax.plot(paths[:, k, 0], paths[:, k, 1], linewidth=width, label="cue" if k == 0 else
                    ("target ball" if k == TARGET_BALL else None))
            ax.add_patch(plt.Circle(paths[-1, k], RADIUS, fill=False))
        ax.plot(*SPOT, "r*", markersize=14, label="spot")
        ax.set(xlabel="x (m)", ylabel="y (m)", title=title)
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    curve.semilogy([h["iteration"] for h in history], [np.sqrt(h["loss"]) * 100 for h in history], marker=".")
    curve.axhline(SUCCESS_CM, color="k", linestyle=":", label=f"{SUCCESS_CM:g} cm")
    curve.set(xlabel="L-BFGS-B iteration", ylabel="miss (cm)", title="Distance of the target ball to the spot")
    curve.legend(fontsize=8)
    curve.grid(True, which="both", alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def _plot_sweep(path: Path, swept: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speeds = np.asarray(swept["speeds_m_per_s"])
    fig, (loss_ax, slope_ax) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for name, curve in swept["curves"].items():
        loss_ax.plot(speeds, curve["loss_m2"], marker=".", label=name)
        line, = slope_ax.plot(speeds, curve["tape_derivative"], label=f"{name}: tape derivative")
        slope_ax.plot(0.5 * (speeds[1:] + speeds[:-1]), curve["sweep_slope"], "--", color=line.get_color(),
                      label=f"{name}: slope between sweep points")
    loss_ax.set(xlabel="cue speed (m/s)", ylabel="loss (m^2)", title="Loss along the first shot's direction")
    slope_ax.set(xlabel="cue speed (m/s)", ylabel="d loss / d speed (m^2 per m/s)",
                 title="Local derivative against the loss's slope")
    for ax in (loss_ax, slope_ax):
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def _write_usd(path: Path, model, takes: dict):
    recorder = UsdRecorder(model, fps=1.0 / (USD_EVERY * DT))
    for name, states in takes.items():
        recorder.begin_take(name)
        for state in states[::USD_EVERY]:
            recorder.record(state)
        recorder.add_markers("spot", [(*SPOT, 0.0)], radius=0.015, color=(0.9, 0.1, 0.1))
    recorder.write(path)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (fewer iterations and sweep points; asserts the shot)."""

    def check(result):
        failures = []
        if result["final_miss_cm"] > SUCCESS_CM:
            failures.append(f"the target ball ends {result['final_miss_cm']:.2f} cm from the spot")
        if result["loss_reduction"] < 100.0:
            failures.append(f"the loss fell only {result['loss_reduction']:.3g}x (< 100x)")
        worst = result["sweep"]["curves"]["impacts"]["worst_slope_error"]
        if worst > 0.05:
            failures.append(f"with impacts the sweep's slope differs from the tape derivative by {worst:.1%}")
        return "; ".join(failures) or None

    def run_example(test, out, device):
        config = ShotConfig(iterations=12, sweep_points=9) if test else ShotConfig()
        return run(config, out, device)

    return example_main(__doc__, "billiards", "at most 12 iterations, a coarser sweep; fail unless the ball ends "
                        "within 1 cm of the spot, the loss falls 100x and the sweep agrees with the tape",
                        run_example, check, argv)


if __name__ == "__main__":
    sys.exit(main())
