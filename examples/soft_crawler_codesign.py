"""Co-design: the soft crawler's stiffness distribution optimised jointly with its gait.

The robot and its gait are ``soft_crawler``'s: a 4x1x2-cell Neo-Hookean block (20 kPa) whose
four tet groups (back/front x bottom/top) follow 2 Hz sinusoids, eight gait parameters in
all, amplitudes at most 0.3. The design adds one stiffness scale per group, multiplying
both Lame parameters of its tets, within [0.25, 4] (5-80 kPa; the explicit step stays
stable at 4x, printed). float64. The objective is the forward displacement of the centre of mass
after 1 s; its gradients w.r.t. the gait and w.r.t. the tets' Lame parameters come from one
recorded rollout (the chain rule maps the latter onto the four scales).

Two runs of Adam from the same start (the nominal, uniform design and the small in-phase
gait), the same number of iterations: the gait alone on the nominal design, and the gait
with the stiffness scales (in log space, step 0.1 per iteration). Writes codesign.png
(objective per iteration of both runs; the designs), codesign.usd (the two optimised robots
as the variants "gait_only" and "co_designed") and result.json. --test: a 0.5 s horizon
and 12 iterations; fails unless co-design gains at least 0.3 cm more than the gait alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from soft_crawler import GROUPS, MODULUS, USD_FPS, CrawlConfig, Crawler, check_time_step, project

from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import write_rollouts
from wpsim.opt.optimisers import Adam

SCALE_BOUNDS = (0.25, 4.0)
DESIGN_RATE = 0.1  # Adam step on log(scale) per iteration


def optimise(crawler: Crawler, config: CrawlConfig, codesign: bool, label: str) -> dict:
    """Adam on the gait (and the log stiffness scales with ``codesign``); the best design found."""
    params = np.zeros((len(GROUPS), 2))
    params[:, 0] = config.initial_amplitude
    log_scales = np.zeros(len(GROUPS))
    gait_adam, design_adam = Adam(lr=config.learning_rate), Adam(lr=DESIGN_RATE)
    history, best = [], (-np.inf, params, log_scales)
    for it in range(config.iterations + 1):
        crawler.set_stiffness(np.exp(log_scales))
        displacement, grad, scale_grad = crawler.displacement_and_gradients(params)
        history.append(displacement)
        if displacement > best[0]:
            best = (displacement, params.copy(), log_scales.copy())
        progress_line(it, config.iterations, f"{label}: displacement {displacement:+.4f} m   stiffness scales "
                      + " ".join(f"{s:.2f}" for s in np.exp(log_scales)))
        if it < config.iterations:
            params = project(gait_adam.step(params, -grad))  # ascend
            if codesign:
                log_grad = scale_grad * np.exp(log_scales)
                log_scales = np.clip(design_adam.step(log_scales, -log_grad), *np.log(SCALE_BOUNDS))
    return {"displacements_m": history, "best_displacement_m": best[0], "best_params": best[1].tolist(),
            "best_stiffness_scales": np.exp(best[2]).tolist()}


def run(config: CrawlConfig, out_dir, device=None) -> dict:
    crawler = Crawler(config, device, dtype=wp.float64)
    check_time_step(crawler.model, config.dt, stiffness=SCALE_BOUNDS[1])
    runs = {"gait only": optimise(crawler, config, False, "gait only"),
            "co-designed": optimise(crawler, config, True, "co-design")}
    gain = runs["co-designed"]["best_displacement_m"] - runs["gait only"]["best_displacement_m"]
    for name, r in runs.items():
        print(f"{name:>12}: {r['best_displacement_m'] * 100:+.2f} cm in {config.horizon_s:.1f} s; stiffness "
              + ", ".join(f"{g} {s * MODULUS / 1e3:.0f} kPa" for g, s in zip(GROUPS, r["best_stiffness_scales"])))
    print(f"co-design gains {gain * 100:+.2f} cm over the gait alone on the nominal design")
    out = Path(out_dir)
    result = {"horizon_s": config.horizon_s, "iterations": config.iterations, "groups": list(GROUPS),
              "scale_bounds": SCALE_BOUNDS, "runs": runs, "codesign_gain_m": gain}
    write_json(out / "result.json", result)
    _plot(out / "codesign.png", runs)
    every = int(round(1.0 / (USD_FPS * config.dt)))
    takes = {}
    for name, r in runs.items():
        crawler.set_stiffness(np.array(r["best_stiffness_scales"]))
        take = name.replace(" ", "_").replace("-", "_")
        takes[take] = crawler._rollout(np.array(r["best_params"]), keep_states=True)[::every]
    write_rollouts(out / "codesign.usd", crawler.model, takes, fps=1.0 / (every * config.dt))
    print(f"wrote codesign.png, codesign.usd (variants 'gait_only' and 'co_designed'), result.json in {out}")
    return result


def _plot(path: Path, runs: dict):
    import matplotlib.pyplot as plt

    fig, (objective, design) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for name, r in runs.items():
        objective.plot(np.array(r["displacements_m"]) * 100, marker=".", label=name)
    objective.set(xlabel="Adam iteration", ylabel="forward displacement (cm)", title="Objective")
    objective.legend()
    x = np.arange(len(GROUPS))
    for offset, (name, r) in zip((-0.2, 0.2), runs.items()):
        design.bar(x + offset, np.array(r["best_stiffness_scales"]) * MODULUS / 1e3, width=0.4, label=name)
    design.set(xticks=x, xticklabels=GROUPS, ylabel="Young's modulus (kPa)", title="Stiffness per tet group")
    design.legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (0.5 s horizon, 12 iterations)."""

    def check(result):
        gain = result["codesign_gain_m"]
        return f"co-design gains only {gain * 100:.2f} cm over the gait alone (< 0.3 cm)" if gain < 0.003 else None

    return example_main(
        __doc__, "soft_crawler_codesign", "0.5 s horizon, 12 iterations; fail unless co-design gains > 0.3 cm",
        lambda test, out, device: run(CrawlConfig(iterations=12, horizon_s=0.5) if test else CrawlConfig(), out,
                                      device),
        check, argv)


if __name__ == "__main__":
    sys.exit(main())
