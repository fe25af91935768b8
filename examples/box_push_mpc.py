"""Residual MPC guided by a distilled policy: the box push under short-horizon iLQR, a policy, and both.

The task is ``wpsim.tasks.box_push`` (a three-link arm pushes a 0.3 kg cube to a goal pose
through soft-constraint contact; success: within 2 cm and 0.1 rad after 40 plan steps of
20 ms). Three stages:

1. teacher: batched full-horizon iLQR (40 plan steps) from many initial states, all worlds
   in one problem;
2. student: an MLP (two hidden layers of 64, ``wpsim.opt.imitation``) trained by imitation
   on the teacher's successful plans: observations (arm angles and rates, the box's offset
   from its goal, yaw error as sin and cos, position and velocity, the episode's phase) and
   controls, plus copies of the teacher's states perturbed (arm 0.02 rad and 0.2 rad/s, box
   3 mm) and labelled by the teacher's feedback gains, u = ū_t + K_t (x - x̄_t);
3. control on held-out initial states, re-planned at every plan step
   (``wpsim.opt.mpc.RecedingHorizon``): short-horizon iLQR alone (warm-started from the
   shifted plan), the policy alone, and the hybrid u_t = π(o_t) + r_t (iLQR started from
   the policy's rollout over the horizon), at horizons of 6, 12 and 24 plan steps, one iLQR
   iteration per control step (25 rollouts per world; the hybrid's policy rollout is one
   more).

Prints the success table and the time per control step (all held-out worlds together);
writes mpc.png (success against horizon; the box's path for world 0), mpc.usd (the hybrid
at the shortest horizon, worlds side by side) with mpc_frames.png, and result.json.
--test: 6 teacher states, 3 held out, horizon 6 only; fails unless the hybrid reaches at
least as many goals as iLQR alone and at least one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.apps.plan_report import write_plan_stage
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_render import render_strip
from wpsim.opt.ilqr import ilqr
from wpsim.opt.mpc import RecedingHorizon
from wpsim.tasks.box_push import (
    BOX_QUAT,
    BOX_XY,
    MAX_TORQUE,
    NQ,
    NX,
    box_errors,
    initial_states,
    make_problem,
    succeeded,
    yaw_of,
)

STEPS = 40
REPLAN_BUDGET = NX + 6  # the start, one linearisation (nx rollouts) and up to 5 line-search trials
PERTURBATION = ((slice(0, 3), 0.02), (slice(NQ, NQ + 3), 0.2), (BOX_XY, 0.003))  # rad, rad/s, m


def observe(k, x: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Observations (W, 16) of states x (W, nx) at plan step k against goals (W, 3)."""
    turn = yaw_of(x[:, BOX_QUAT]) - goals[:, 2]
    phase = np.full((len(x), 1), min(k, STEPS) / STEPS)
    return np.concatenate([x[:, :3], x[:, NQ:NQ + 3], x[:, BOX_XY] - goals[:, :2], np.sin(turn)[:, None],
                           np.cos(turn)[:, None], x[:, BOX_XY], x[:, 13:15], x[:, 18:19], phase], axis=1)


def imitation_data(teacher, goals: np.ndarray, copies: int, seed: int) -> tuple:
    """(observations, controls, plans used) of the teacher's successful plans (all of them
    if none succeeded) and ``copies`` perturbed copies of each of their states, labelled by
    the plans' feedback gains."""
    rng = np.random.default_rng(seed)
    ok = np.flatnonzero(succeeded(teacher.states[:, -1], goals))
    ok = ok if ok.size else np.arange(len(goals))
    obs, controls = [], []
    for k in range(STEPS):
        X, U, K = teacher.states[ok, k], teacher.controls[ok, k], teacher.gains[ok, k, :, :NX]
        obs.append(observe(k, X, goals[ok]))
        controls.append(U)
        for _ in range(copies):
            delta = np.zeros_like(X)
            for entries, scale in PERTURBATION:
                delta[:, entries] = rng.normal(0.0, scale, delta[:, entries].shape)
            obs.append(observe(k, X + delta, goals[ok]))
            controls.append(np.clip(U + np.einsum("wij,wj->wi", K, delta), -MAX_TORQUE, MAX_TORQUE))
    return np.concatenate(obs), np.concatenate(controls), len(ok)


def run(test: bool, out, device) -> dict:
    from wpsim.opt.imitation import fit_imitation

    out = Path(out)
    teachers, held_out, budget, horizons = (6, 3, 120, (6,)) if test else (32, 12, 200, (6, 12, 24))
    x0, goals = initial_states(teachers + held_out, seed=5)
    teacher = ilqr(make_problem(x0[:teachers], goals[:teachers], STEPS, device=device), budget)
    obs, controls, used = imitation_data(teacher, goals[:teachers], copies=4, seed=0)
    reached = int(succeeded(teacher.states[:, -1], goals[:teachers]).sum())
    print(f"teacher: iLQR over {STEPS} plan steps reaches {reached} of {teachers} goals ({teacher.wall_s:.1f} s); "
          f"{len(obs)} imitation samples from {used} plans")
    policy = fit_imitation(obs, controls, -MAX_TORQUE, MAX_TORQUE, epochs=3000)
    print(f"student: final imitation loss {policy.losses[-1]:.2e} ({policy.wall_s:.1f} s)")
    xe, ge = x0[teachers:], goals[teachers:]

    def nominal(k, x):
        return policy(observe(k, x, ge))

    episode = make_problem(xe, ge, STEPS, device=device)
    _, alone, _, _ = episode.plans.simulate(policy=nominal)
    rows = {"policy alone": {"success_rate": float(succeeded(alone[:, -1], ge).mean()), "s_per_step": 0.0}}
    loops = {}
    for horizon in horizons:
        for name, guide in (("iLQR alone", None), ("hybrid", nominal)):
            mpc = RecedingHorizon(make_problem(xe, ge, horizon, device=device), REPLAN_BUDGET + (guide is not None),
                                  nominal=guide)
            loop = loops[name, horizon] = mpc.run(xe, STEPS)
            position, yaw = box_errors(loop.states[:, -1], ge)
            rows[f"{name} H={horizon}"] = {"success_rate": float(succeeded(loop.states[:, -1], ge).mean()),
                                           "s_per_step": loop.seconds_per_control_step, "horizon": horizon,
                                           "position_error_m": position.tolist(), "yaw_error_rad": yaw.tolist(),
                                           "events": loop.events}
            print(f"{name:>10} H={horizon:<3d} success {rows[f'{name} H={horizon}']['success_rate']:>5.0%}  "
                  f"{loop.seconds_per_control_step:.3f} s per control step ({held_out} worlds)", flush=True)
    print(table(rows))
    _plot(out / "mpc.png", rows, loops, alone, ge, horizons)
    shortest = loops["hybrid", horizons[0]]
    write_plan_stage(out / "mpc.usd", episode, shortest.states, (0.0, 0.7, 0.0))
    render_strip(out / "mpc.usd", out / "mpc_frames.png")
    result = {"teacher_states": teachers, "teacher_successes": reached, "plans_imitated": used,
              "held_out_states": held_out,
              "teacher_budget": budget, "replan_budget": REPLAN_BUDGET, "imitation_samples": len(obs),
              "imitation_loss": policy.losses[-1], "rows": rows}
    write_json(out / "result.json", result)
    print(f"wrote mpc.png, mpc.usd, mpc_frames.png, result.json in {out}")
    return result


def table(rows: dict) -> str:
    """The controllers' success rates and times per control step as text."""
    lines = [f"{'controller':<18} {'success':>8} {'s / control step':>17}"]
    lines += [f"{name:<18} {r['success_rate']:>8.0%} {r['s_per_step']:>17.3f}" for name, r in rows.items()]
    return "\n".join(lines)


def _plot(path: Path, rows: dict, loops: dict, alone: np.ndarray, goals: np.ndarray, horizons):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name in ("iLQR alone", "hybrid"):
        axes[0].plot(horizons, [100 * rows[f"{name} H={h}"]["success_rate"] for h in horizons], "o-", label=name)
    axes[0].axhline(100 * rows["policy alone"]["success_rate"], color="k", linestyle="--", label="policy alone")
    axes[0].set(xlabel="planning horizon (plan steps of 20 ms)", ylabel="success (%)", ylim=(-5, 105),
                title="held-out initial states")
    axes[0].legend()
    paths = {f"{name} H={horizons[0]}": loops[name, horizons[0]].states for name in ("iLQR alone", "hybrid")}
    paths["policy alone"] = alone
    for name, states in paths.items():
        axes[1].plot(states[0, :, 3], states[0, :, 4], label=name)
    axes[1].plot(*goals[0, :2], "k*", markersize=12, label="goal")
    axes[1].set(xlabel="x (m)", ylabel="y (m)", title="world 0: the box's centre", aspect="equal")
    axes[1].legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (6 teacher states, 3 held out, horizon 6)."""

    def check(result):
        rows = result["rows"]
        hybrid, alone = rows["hybrid H=6"]["success_rate"], rows["iLQR alone H=6"]["success_rate"]
        if hybrid < alone or hybrid == 0.0:
            return f"the hybrid reaches {hybrid:.0%} of the goals, iLQR alone {alone:.0%}"
        return None

    return example_main(__doc__, "box_push_mpc", "6 teacher states, 3 held out, horizon 6; fail unless the hybrid "
                        "reaches at least one goal and no fewer than iLQR alone", run, check, argv)


if __name__ == "__main__":
    sys.exit(main())
