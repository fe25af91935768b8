"""Trajectory optimisation through contact: a three-link arm pushes a box to a goal pose on the ground.

The task (``wpsim.tasks.box_push``): a planar arm of three capsule links and a 0.3 kg cube on
a free joint, touching each other and the ground only through soft-constraint contact
(gradients and linearisations by the implicit adjoint), float64, 10 ms steps; the torques
(+-1 N m) are held for 2 steps, T = 40 plan steps (0.8 s). Each initial state puts the
fingertip on the box's -x face and asks for the box 5-10 cm onward, +-3 cm sideways and
turned by +-0.25 rad. Success: the box within 2 cm and 0.1 rad of its goal at t = T.

Adam-shooting, iLQR (A_t, B_t by vector-Jacobian products through each recorded step) and
CEM (16 plans per world per iteration) plan every initial state from zero torques with the
same budget of rollouts per world; the table gives the final cost (mean, 10th and 90th
percentiles over the initial states), the success rate and the wall time. Writes plans.png
(best cost against rollouts; the box's path under each method for world 0), plans.usd (the
best method's plans side by side) with plans_frames.png, and result.json. --test: 6 initial
states, 60 rollouts each; fails unless the best method reaches 2 of the 6 goals and every
method lowers the mean cost. (At 3 states, 2 of 3 goals flipped with a 0.5 % change of the
contact's time constant: 0.0199 s gave 1 of 3, 0.0201 s 2 of 3.)
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.apps.plan_report import compare_planners, comparison_failure, method_summary, path_panel
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import cem, shoot_adam
from wpsim.tasks.box_push import BOX_XY, box_errors, initial_states, make_problem, succeeded

STEPS = 40
METHODS = {"Adam-shooting": shoot_adam, "iLQR": ilqr,
           "CEM": lambda problem, budget: cem(problem, budget, samples=16, initial_std=0.1)}
"""The planners; CEM samples 16 plans per iteration with a std of a tenth of the torque range
(the box moves under small torques: at half the range, as elsewhere, no sample improves)."""


def summary(result, goals: np.ndarray) -> dict:
    """Final cost statistics, box errors and success of one planner's result."""
    position, yaw = box_errors(result.states[:, -1], goals)
    return method_summary(result, succeeded(result.states[:, -1], goals), position_error_m=position.tolist(),
                          yaw_error_rad=yaw.tolist())


def run(test: bool, out, device) -> dict:
    count, budget = (6, 60) if test else (12, 200)
    x0, goals = initial_states(count, seed=1)
    return compare_planners(make_problem(x0, goals, STEPS, device=device), METHODS, budget,
                            lambda r: summary(r, goals), out, "plans", path_panel(BOX_XY, goals[0], "box"),
                            (0.0, 0.7, 0.0), goals=goals.tolist())


def main(argv=None) -> int:
    """Command line: --device, --out, --test (6 initial states, 60 rollouts each)."""

    return example_main(__doc__, "box_push", "6 initial states, 60 rollouts each; fail unless the best method "
                        "reaches 2 of 6 goals and every method lowers the mean cost", run,
                        lambda result: comparison_failure(result, success=2 / 6), argv)


if __name__ == "__main__":
    sys.exit(main())
