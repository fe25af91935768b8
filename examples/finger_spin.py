"""Trajectory optimisation through contact: a two-joint finger spins a hinged spinner to a target angle.

The scene is built in code, in the horizontal plane (every hinge about z, so gravity does
no work): a finger of two capsule links (0.2 m and 0.16 m, radius 15 mm, 500 kg/m^3, joint
damping 0.02 N m s/rad, armature 1e-3 kg m^2) on a base at the origin, and a spinner, one
capsule bar of 0.24 m (radius 20 mm, 300 kg/m^3) on a hinge at (0.22, 0.12) m with damping
0.005 N m s/rad. The finger touches the bar only through soft-constraint contact
(``SoftContactOptions``, time constant 0.05 s, its gradient by the implicit adjoint),
float64, 10 ms steps, the torques held for 2 steps (T = 30 plan steps, 0.6 s) and bounded by
+-0.1 N m.

Each initial state puts the fingertip on the bar (at 6-10 cm from its hinge, the bar turned
by +-0.3 rad about its mean pose, the finger at rest) and asks for the bar turned onward by
0.6-1.0 rad. Cost: 50 rad^-2 (theta_T - target)^2 + 0.5 (spinner rate_T)^2 + 0.01 (finger
rates_T)^2, while moving 0.1 (theta - target)^2 + 1e-3 |rates|^2 per step, torque effort
1 (N m)^-2 u^2 and smoothness 5 (N m)^-2 (u_t - u_t-1)^2. Success: the bar within 0.1 rad
of its target at t = T.

Adam-shooting, L-BFGS-B-shooting, iLQR (A_t, B_t from vector-Jacobian products through
each recorded step) and CEM (32 plans per world per iteration) plan every initial state from
zero torques with the same budget of rollouts per world; the table gives the final cost
(mean, 10th and 90th percentiles over the initial states), the success rate and the wall
time. Writes plans.png (best cost against rollouts per method; the spinner angle against
its target), plans.usd (the best method's plans, side by side) with plans_frames.png, and
result.json. --test: 3 initial states, 60 rollouts each; fails unless the best method
reaches 2 of the 3 targets and every method lowers every world's cost.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

import wpsim
from wpsim import SemiImplicitSolver, SoftContactOptions
from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem, cem, shoot_adam, shoot_lbfgsb

LINKS = (0.2, 0.16)  # m, finger links
FINGER_RADIUS, BAR_RADIUS, BAR_HALF = 0.015, 0.02, 0.12  # m
HINGE = np.array([0.22, 0.12])  # m, the spinner's axis in the plane
ALONG_X = (0.0, np.sin(np.pi / 4), 0.0, np.cos(np.pi / 4))  # turns a capsule's z axis onto x
DT, SUBSTEPS, STEPS = 0.01, 2, 30  # s, steps per plan step, plan steps
MAX_TORQUE = 0.1  # N m
SPINNER = 2  # index of the spinner's angle in the state (joint_q of finger, finger, spinner)
SUCCESS_RAD = 0.1
METHODS = {"Adam-shooting": shoot_adam, "L-BFGS-B": shoot_lbfgsb, "iLQR": ilqr, "CEM": cem}


def scene() -> wpsim.ModelBuilder:
    """One finger and spinner (see the module docstring)."""
    b = wpsim.ModelBuilder()
    parent, offset = -1, 0.0
    for length in LINKS:
        link = b.add_body()
        b.add_shape_capsule(link, pos=(length / 2, 0.0, 0.0), rot=ALONG_X, radius=FINGER_RADIUS,
                            half_height=length / 2, density=500.0)
        b.add_joint_revolute(parent, link, axis=(0.0, 0.0, 1.0), parent_pos=(offset, 0.0, 0.0), damping=0.02,
                             armature=1e-3)
        parent, offset = link, length
    bar = b.add_body()
    b.add_shape_capsule(bar, rot=ALONG_X, radius=BAR_RADIUS, half_height=BAR_HALF, density=300.0)
    b.add_joint_revolute(-1, bar, axis=(0.0, 0.0, 1.0), parent_pos=(*HINGE, 0.0), damping=0.005, armature=1e-4)
    return b


def initial_states(count: int, seed: int) -> tuple:
    """(x0 (count, 6), targets (count,) rad): the fingertip on the bar, the finger at rest
    (elbow solved by two-link inverse kinematics), the target 0.6-1.0 rad onward in the
    direction the finger pushes."""
    rng = np.random.default_rng(seed)
    x0, targets = np.zeros((count, 6)), np.zeros(count)
    for i in range(count):
        theta = np.arctan2(HINGE[1], HINGE[0]) + np.pi / 2 + rng.uniform(-0.3, 0.3)
        along = np.array([np.cos(theta), np.sin(theta)])
        normal = np.array([-along[1], along[0]])
        side = np.sign(normal @ -HINGE)  # the finger's side of the bar
        tip = HINGE + rng.uniform(0.06, 0.10) * along + side * (FINGER_RADIUS + BAR_RADIUS - 5e-4) * normal
        l1, l2 = LINKS
        elbow = np.arccos(np.clip((tip @ tip - l1 * l1 - l2 * l2) / (2 * l1 * l2), -1.0, 1.0))
        shoulder = np.arctan2(tip[1], tip[0]) - np.arctan2(l2 * np.sin(elbow), l1 + l2 * np.cos(elbow))
        x0[i, :3] = shoulder, elbow, theta
        targets[i] = theta - side * rng.uniform(0.6, 1.0)  # pushing the bar away turns it by -side
    return x0, targets


def make_problem(x0: np.ndarray, targets: np.ndarray, steps: int = STEPS, device=None) -> TrajectoryProblem:
    """The planning problem (``steps`` plan steps) of the initial states ``x0`` and their
    spinner ``targets``."""
    goal = np.zeros((len(x0), 1, 6))
    goal[:, 0, SPINNER] = targets
    cost = TrajectoryCost(target=goal, running=np.array([0.0, 0.0, 0.1, 1e-3, 1e-3, 1e-3]),
                          terminal=np.array([0.0, 0.0, 50.0, 0.01, 0.01, 0.5]), effort=np.full(2, 1.0),
                          smoothness=np.full(2, 5.0))
    options = SoftContactOptions(time_constant=0.05)
    return TrajectoryProblem(scene(), x0, steps, SUBSTEPS, DT, actuated=[0, 1], lower=-MAX_TORQUE,
                             upper=MAX_TORQUE, cost=cost, device=device,
                             make_solver=lambda model: SemiImplicitSolver(model, soft_contact=options))


def summary(result, targets: np.ndarray) -> dict:
    """Final cost statistics, misses (rad) and success of one planner's result."""
    miss = result.states[:, -1, SPINNER] - targets
    success = np.abs(miss) < SUCCESS_RAD
    return {"rollouts_per_world": result.rollouts, "cost_mean": float(result.costs.mean()),
            "cost_p10": float(np.percentile(result.costs, 10)), "cost_p90": float(np.percentile(result.costs, 90)),
            "success_rate": float(success.mean()), "wall_s": result.wall_s, "miss_rad": miss.tolist(),
            "improved_everywhere": bool(np.all(result.costs < result.initial_costs)), "events": result.events,
            **result.to_dict()}


def table(rows: dict) -> str:
    """The comparison as text."""
    lines = [f"{'method':<14} {'rollouts':>8} {'cost mean':>10} {'p10':>8} {'p90':>8} {'success':>8} {'wall s':>7}"]
    for name, r in rows.items():
        lines.append(f"{name:<14} {r['rollouts_per_world']:>8d} {r['cost_mean']:>10.3f} {r['cost_p10']:>8.3f} "
                     f"{r['cost_p90']:>8.3f} {r['success_rate']:>8.0%} {r['wall_s']:>7.1f}")
    return "\n".join(lines)


def run(test: bool, out, device) -> dict:
    out = Path(out)
    count, budget = (3, 60) if test else (12, 200)
    x0, targets = initial_states(count, seed=1)
    problem = make_problem(x0, targets, device=device)
    results = {name: method(problem, budget) for name, method in METHODS.items()}
    rows = {name: summary(result, targets) for name, result in results.items()}
    print(table(rows))
    best = max(rows, key=lambda name: (rows[name]["success_rate"], -rows[name]["cost_mean"]))
    _plot(out / "plans.png", results, targets)
    _write_stage(out / "plans.usd", problem, results[best].states)
    render_strip(out / "plans.usd", out / "plans_frames.png")
    result = {"initial_states": count, "budget_rollouts_per_world": budget, "targets_rad": targets.tolist(),
              "best": best, "methods": rows}
    write_json(out / "result.json", result)
    print(f"best: {best}; wrote plans.png, plans.usd, plans_frames.png, result.json in {out}")
    return result


def _write_stage(path: Path, problem: TrajectoryProblem, states: np.ndarray):
    """The plans' rollouts (states (W, T + 1, 6)) as one take, the worlds side by side."""
    model = problem.plans.model
    frames = []
    for k in range(states.shape[1]):
        frame = model.state(requires_grad=False)
        problem.plans.write_state(frame, states[:, k])
        frames.append(frame)
    write_rollouts(path, model, {"best": frames}, fps=1.0 / (SUBSTEPS * DT), world_spacing=(0.6, 0.0, 0.0))


def _plot(path: Path, results: dict, targets: np.ndarray):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name, result in results.items():
        history = np.array([result.initial_costs, *result.history])
        spent = np.linspace(1, result.rollouts, len(history))
        axes[0].semilogy(spent, history.mean(axis=1), label=name)
        axes[1].plot(np.arange(result.states.shape[1]) * SUBSTEPS * DT, result.states[0, :, SPINNER], label=name)
    axes[0].set(xlabel="rollouts per world", ylabel="best cost (mean over worlds)", title="cost against budget")
    axes[0].legend()
    axes[1].axhline(targets[0], color="k", linestyle="--", label="target")
    axes[1].set(xlabel="t (s)", ylabel="spinner angle (rad)", title="world 0: the spinner under each plan")
    axes[1].legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (3 initial states, 60 rollouts each)."""

    def check(result):
        methods = result["methods"]
        best = methods[result["best"]]
        if best["success_rate"] < 2 / 3:
            return f"the best method ({result['best']}) reaches only {best['success_rate']:.0%} of the targets"
        worse = [name for name, r in methods.items() if not r["improved_everywhere"]]
        if worse:
            return f"{', '.join(worse)} did not lower the cost of every world"
        return None

    return example_main(__doc__, "finger_spin", "3 initial states, 60 rollouts each; fail unless the best method "
                        "reaches 2 of 3 targets and every method lowers every cost", run, check, argv)


if __name__ == "__main__":
    sys.exit(main())
