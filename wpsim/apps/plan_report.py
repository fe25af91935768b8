"""Summaries, tables, plots and stages of the trajectory planners' results: the examples'
comparisons of ``wpsim.opt.trajopt`` planners at equal rollout budgets (``compare_planners``
runs one and writes its files, ``comparison_failure`` is its --test check)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip


def method_summary(result, success: np.ndarray, **extra) -> dict:
    """Final cost statistics (mean, 10th and 90th percentiles over the worlds), the success
    rate of the (W,) ``success`` mask and the result's record, with ``extra`` entries."""
    return {"rollouts_per_world": result.rollouts, "cost_mean": float(result.costs.mean()),
            "cost_p10": float(np.percentile(result.costs, 10)), "cost_p90": float(np.percentile(result.costs, 90)),
            "success_rate": float(np.mean(success)), "wall_s": result.wall_s,
            "improved_everywhere": bool(np.all(result.costs < result.initial_costs)), **extra, **result.to_dict()}


def comparison_table(rows: dict) -> str:
    """The summaries of ``method_summary`` per method name as a text table."""
    lines = [f"{'method':<14} {'rollouts':>8} {'cost mean':>10} {'p10':>8} {'p90':>8} {'success':>8} {'wall s':>7}"]
    for name, r in rows.items():
        lines.append(f"{name:<14} {r['rollouts_per_world']:>8d} {r['cost_mean']:>10.3f} {r['cost_p10']:>8.3f} "
                     f"{r['cost_p90']:>8.3f} {r['success_rate']:>8.0%} {r['wall_s']:>7.1f}")
    return "\n".join(lines)


def best_method(rows: dict) -> str:
    """The method with the highest success rate, ties to the lowest mean cost."""
    return max(rows, key=lambda name: (rows[name]["success_rate"], -rows[name]["cost_mean"]))


def plot_comparison(path: Path, results: dict, panel):
    """Two panels: the best cost (mean over the worlds) against rollouts per world, one line
    per method, and ``panel(ax, results)``'s picture of the plans."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name, result in results.items():
        history = np.array([result.initial_costs, *result.history])
        axes[0].semilogy(np.linspace(1, result.rollouts, len(history)), history.mean(axis=1), label=name)
    axes[0].set(xlabel="rollouts per world", ylabel="best cost (mean over worlds)", title="cost against budget")
    axes[0].legend()
    panel(axes[1], results)
    axes[1].legend()
    save_figure(fig, path)


def path_panel(xy: slice, goal, what: str):
    """A ``plot_comparison`` panel: the path of the state entries ``xy`` (x and y, m) of world
    0 under each method, and its goal point (x, y) m; ``what`` names the body."""

    def panel(ax, results):
        for name, result in results.items():
            ax.plot(*result.states[0, :, xy].T, label=name)
        ax.plot(*goal[:2], "k*", markersize=12, label="goal")
        ax.set(xlabel="x (m)", ylabel="y (m)", title=f"world 0: the {what}'s centre under each plan", aspect="equal")

    return panel


def compare_planners(problem, methods: dict, budget: int, summarise, out: Path, name: str, panel,
                     world_spacing, **record) -> dict:
    """Plan ``problem`` with every method (name -> ``method(problem, budget)``) at ``budget``
    rollouts per world, print the table of ``summarise(result)``, and write NAME.png
    (``plot_comparison`` with ``panel``), NAME.usd with NAME_frames.png (the best method's
    plans of the first worlds) and result.json (``record`` entries, the summaries, the best)."""
    out = Path(out)
    results = {method: plan(problem, budget) for method, plan in methods.items()}
    rows = {method: summarise(result) for method, result in results.items()}
    print(comparison_table(rows))
    best = best_method(rows)
    plot_comparison(out / f"{name}.png", results, panel)
    write_plan_stage(out / f"{name}.usd", problem, results[best].states, world_spacing)
    render_strip(out / f"{name}.usd", out / f"{name}_frames.png")
    result = {"initial_states": problem.worlds, "budget_rollouts_per_world": budget, **record, "best": best,
              "methods": rows}
    write_json(out / "result.json", result)
    print(f"best: {best}; wrote {name}.png, {name}.usd, {name}_frames.png, result.json in {out}")
    return result


def comparison_failure(result: dict, success: float, every_world: bool = False) -> str | None:
    """Why a ``compare_planners`` result fails a test: the best method below the ``success``
    rate, or a method that did not lower the mean cost (with ``every_world``: every world's)."""
    methods, best = result["methods"], result["methods"][result["best"]]
    if best["success_rate"] < success:
        return f"the best method ({result['best']}) reaches only {best['success_rate']:.0%} of the goals"
    if every_world:
        worse = [name for name, r in methods.items() if not r["improved_everywhere"]]
    else:
        worse = [name for name, r in methods.items() if not r["cost_mean"] < np.mean(r["initial_costs"])]
    if worse:
        return f"{', '.join(worse)} did not lower the {'cost of every world' if every_world else 'mean cost'}"
    return None


def write_plan_stage(path: Path, problem, states: np.ndarray, world_spacing, shown: int = 3):
    """The rollouts ``states`` (W, T + 1, nx) of a ``TrajectoryProblem``'s first ``shown``
    worlds as one USD take at one frame per plan step, the worlds ``world_spacing`` (m) apart
    (a few worlds, so that a picture of the stage shows the scene at a readable scale)."""
    shown = min(shown, len(states))
    batch = problem.batch(f"stage{shown}", np.arange(shown))
    frames = []
    for k in range(states.shape[1]):
        frame = batch.model.state(requires_grad=False)
        batch.write_state(frame, states[:shown, k])
        frames.append(frame)
    write_rollouts(path, batch.model, {"best": frames}, fps=1.0 / (problem.substeps * problem.dt),
                   world_spacing=world_spacing)
