"""The throw demo (``wpsim demo --task throw``): the throw task of ``wpsim.tasks.throw`` (a soft
cube thrown so that, after bouncing off the ground, it lands on a target) optimised by
gradient descent with an adaptive step (``wpsim.opt.optimisers.adaptive_gradient_descent``),
with its plots, result file and USD stage.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_render import render_strip
from wpsim.opt.optimisers import adaptive_gradient_descent
from wpsim.tasks.throw import BounceProblem, DemoConfig


def run_demo(out_dir="wpsim_out", config: DemoConfig | None = None, device=None, quiet: bool = False) -> dict:
    """Run the optimisation, write loss.png, trajectory.png, result.json and rollout.usd
    into ``out_dir``."""
    config = config or DemoConfig()
    problem = BounceProblem(config, device)
    target = problem.final_centroid(config.hidden_velocity)
    problem.target.assign([target])
    if not quiet:
        print(f"target spot at {config.horizon_s:.2f} s: x = {target[0]:.3f} m, y = {target[1]:.3f} m")
    tried, accepted_iterates = [], []

    def report(it, velocity, loss, accepted):
        tried.append(velocity.tolist())
        if accepted:
            accepted_iterates.append((it, velocity.copy()))
        if not quiet:
            v = ", ".join(f"{c:.3f}" for c in velocity)
            mark = "" if accepted else "  (rejected, smaller step)"
            progress_line(it, config.iterations, f"loss {loss:.3e} m^2   v0 ({v}) m/s{mark}")

    best, losses = adaptive_gradient_descent(
        problem.loss_and_gradient, config.initial_velocity, config.iterations, config.learning_rate,
        tolerance=config.tolerance_m2, callback=report
    )
    result = {
        "config": asdict(config),
        "target_m": target.tolist(),
        "losses_m2": losses,
        "tried_velocities_m_per_s": tried,
        "best_velocity_m_per_s": best.tolist(),
        "loss_reduction": losses[0] / max(losses[-1], 1e-300),
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    _plot(out, problem, config, losses, best, target)
    write_usd(out / "rollout.usd", problem, accepted_iterates, target)
    render_strip(out / "rollout.usd", out / "rollout_frames.png")
    if not quiet:
        print(f"loss {losses[0]:.3e} -> {losses[-1]:.3e} m^2 ({result['loss_reduction']:.3g}x lower); "
              f"final horizontal distance to the target {np.sqrt(losses[-1]) * 100:.2f} cm")
        print(f"wrote {out / 'loss.png'}, {out / 'trajectory.png'}, {out / 'result.json'}, {out / 'rollout_frames.png'}, "
              f"{out / 'rollout.usd'} "
              f"(variant set 'iteration': the throw after each of the {len(accepted_iterates)} accepted steps)")
    return result


def write_usd(path: Path, problem: BounceProblem, iterates: list, target, fps: float = 100.0) -> Path:
    """The rollout of every accepted iterate as the variants "iteration_<kkk>" (zero-padded,
    so that they sort) of one USD stage at about ``fps`` frames per second (a whole number of
    steps per frame), with the target spot ((3,) m) as the red marker set "target"."""
    from wpsim.io.usd_export import UsdRecorder

    every = max(1, int(round(1.0 / (fps * problem.config.dt))))
    recorder = UsdRecorder(problem.model, fps=1.0 / (every * problem.config.dt))
    for iteration, velocity in iterates:
        recorder.begin_take(f"iteration_{iteration:03d}")
        for state in problem.states(velocity)[::every]:
            recorder.record(state)
        recorder.add_markers("target", [target], radius=0.02, color=(0.9, 0.1, 0.1))
    return recorder.write(path)


def _plot(out: Path, problem: BounceProblem, config: DemoConfig, losses, final_velocity, target):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogy(losses, marker=".")
    ax.set_xlabel("iteration (best loss so far)")
    ax.set_ylabel("squared horizontal miss (m^2)")
    ax.set_title("Bounce to target: loss")
    ax.grid(True, which="both", alpha=0.3)
    save_figure(fig, out / "loss.png")
    plt.close(fig)

    fig, (side, top) = plt.subplots(1, 2, figsize=(10, 3.8))
    for velocity, label in ((config.initial_velocity, "initial guess"), (final_velocity, "optimised")):
        path = problem.trajectory(velocity)
        text = f"{label}: v0 = ({', '.join(f'{c:.2f}' for c in velocity)}) m/s"
        side.plot(path[:, 0], path[:, 2], label=text)
        top.plot(path[:, 0], path[:, 1], label=text)
        top.plot(path[-1, 0], path[-1, 1], "o", color=top.lines[-1].get_color())
    top.plot([target[0]], [target[1]], "r*", markersize=14, label="target spot")
    side.axhline(0.0, color="k", linewidth=0.8)
    side.set(xlabel="x (m)", ylabel="height z (m)", title="Centre of mass, side view")
    top.set(xlabel="x (m)", ylabel="y (m)", title=f"Top view (dots: position at {config.horizon_s:.1f} s)")
    top.legend(fontsize=8)
    for ax in (side, top):
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(True, alpha=0.3)
    save_figure(fig, out / "trajectory.png")
    plt.close(fig)
