"""Trajectory optimisation through contact: a two-joint finger spins a hinged spinner to a target angle.

The task (``wpsim.tasks.finger_spin``, built in code): a finger of two capsule links in the
horizontal plane touches a hinged capsule bar only through soft-constraint contact (time
constant 0.05 s, its gradient by the implicit adjoint), float64, 10 ms steps, the torques
(+-0.1 N m) held for 2 steps, T = 30 plan steps (0.6 s). Each initial state puts the
fingertip on the bar and asks for the bar turned onward by 0.6-1.0 rad. Success: the bar
within 0.1 rad of its target at t = T.

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

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.apps.plan_report import compare_planners, comparison_failure, method_summary
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import cem, shoot_adam, shoot_lbfgsb
from wpsim.tasks.finger_spin import DT, SPINNER, SUBSTEPS, initial_states, make_problem, succeeded

METHODS = {"Adam-shooting": shoot_adam, "L-BFGS-B": shoot_lbfgsb, "iLQR": ilqr, "CEM": cem}


def summary(result, targets: np.ndarray) -> dict:
    """Final cost statistics, misses (rad) and success of one planner's result."""
    miss = result.states[:, -1, SPINNER] - targets
    return method_summary(result, succeeded(result.states[:, -1], targets), miss_rad=miss.tolist())


def run(test: bool, out, device) -> dict:
    count, budget = (3, 60) if test else (16, 200)
    x0, targets = initial_states(count, seed=1)

    def panel(ax, results):
        for name, result in results.items():
            ax.plot(np.arange(result.states.shape[1]) * SUBSTEPS * DT, result.states[0, :, SPINNER], label=name)
        ax.axhline(targets[0], color="k", linestyle="--", label="target")
        ax.set(xlabel="t (s)", ylabel="spinner angle (rad)", title="world 0: the spinner under each plan")

    return compare_planners(make_problem(x0, targets, device=device), METHODS, budget, lambda r: summary(r, targets),
                            out, "plans", panel, (0.6, 0.0, 0.0), targets_rad=targets.tolist())


def main(argv=None) -> int:
    """Command line: --device, --out, --test (3 initial states, 60 rollouts each)."""

    return example_main(__doc__, "finger_spin", "3 initial states, 60 rollouts each; fail unless the best method "
                        "reaches 2 of 3 targets and every method lowers every cost", run,
                        lambda result: comparison_failure(result, success=2 / 3, every_world=True), argv)


if __name__ == "__main__":
    sys.exit(main())
