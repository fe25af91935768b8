"""Trajectory optimisation through contact on a real robot: MuJoCo Menagerie's Franka Panda pushes a cube to a goal pose.

The task (``wpsim.tasks.panda_push``): the Menagerie file franka_emika_panda/mjx_single_cube.xml
as it is, the arm's position servos, the closed hand's fingertip pads and capsule touching a
4 x 4 x 6 cm cube and the floor through the file's soft-constraint contact (gradients and
linearisations by the implicit adjoint), float64, 5 ms steps. The plans set the position
targets of joints 1-7 (rad, within the joints' ranges), each held for 4 steps; T = 40 plan
steps (0.8 s). Each initial state puts the fingertips on the cube's -x face and asks for the
cube 6-10 cm onward, +-2 cm sideways and turned by +-0.15 rad. Success: the cube within
1.5 cm and 0.15 rad of its goal at t = T.

iLQR (A_t, B_t by vector-Jacobian products through each recorded step), Adam-shooting and
CEM (32 plans per world per iteration) plan every initial state from holding the start
pose with the same budget of rollouts per world; the table gives the final cost (mean,
10th and 90th percentiles over the initial states), the success rate and the wall time.
Writes plans.png (best cost against rollouts; the cube's path under each method for world
0), plans.usd (the best method's plans side by side) with plans_frames.png, and
result.json. --test: 2 initial states, 104 rollouts each; fails unless every method lowers
every world's cost and the best method takes the cube at least 40 % of the way to its goal
(mean distance; measured: 50 %).
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
from wpsim.tasks.panda_push import CUBE_XY, cube_errors, initial_states, make_problem, scene_path, succeeded

STEPS = 40
ADAM_LR = 0.002
"""Adam's step, a fraction of each target's half range (about 6 mrad). Swept on 2 initial
states, 100 rollouts each (mean final cost): 0.001 gave 4.16, 0.002 4.21, 0.005 7.34."""
METHODS = {"iLQR": ilqr, "Adam-shooting": lambda problem, budget: shoot_adam(problem, budget, lr=ADAM_LR),
           "CEM": lambda problem, budget: cem(problem, budget, samples=32, initial_std=0.01)}
"""The planners; CEM samples 32 plans per iteration with a std of 0.01 of each target's half
range (about 0.03 rad). Swept on 2 initial states, 300 rollouts each (mean final cost):
0.002 gave 9.59, 0.005 7.77, 0.01 6.98, 0.02 11.0."""


def summary(result, goals: np.ndarray, start_distance: np.ndarray) -> dict:
    """Final cost statistics, cube errors and success of one planner's result; ``distance_ratio``:
    the cube's mean final distance to its goal over its mean distance at the start."""
    position, yaw = cube_errors(result.states[:, -1], goals)
    return method_summary(result, succeeded(result.states[:, -1], goals), position_error_m=position.tolist(),
                          yaw_error_rad=yaw.tolist(), distance_ratio=float(position.mean() / start_distance.mean()))


def run(test: bool, out, device) -> dict:
    count, budget = (2, 104) if test else (16, 300)
    x0, goals = initial_states(count, seed=1)
    start_distance = cube_errors(x0, goals)[0]
    return compare_planners(make_problem(x0, goals, STEPS, device=device), METHODS, budget,
                            lambda r: summary(r, goals, start_distance), out, "plans",
                            path_panel(CUBE_XY, goals[0], "cube"), (0.0, 1.0, 0.0), goals=goals.tolist())


def check(result: dict) -> str | None:
    """--test: every method lowers every world's cost, the best takes the cube 40 % of the way."""
    failure = comparison_failure(result, success=0.0, every_world=True)
    ratio = min(r["distance_ratio"] for r in result["methods"].values())
    return failure or (f"no method takes the cube 40 % of the way to its goal (best distance ratio {ratio:.2f})"
                       if ratio > 0.6 else None)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (2 initial states, 104 rollouts each)."""

    return example_main(__doc__, "panda_push", "2 initial states, 104 rollouts each; fail unless every method "
                        "lowers every world's cost and the best takes the cube 40 % of the way to its goal", run, check,
                        argv, inputs=(scene_path(),))


if __name__ == "__main__":
    sys.exit(main())
