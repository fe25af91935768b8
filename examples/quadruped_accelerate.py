"""Trajectory optimisation of a legged robot through contact: MuJoCo Menagerie's Unitree Go1 accelerates from standing to a target speed.

The task (``wpsim.tasks.quadruped_accelerate``): the Menagerie file unitree_go1/scene.xml as
it is, its 12 position servos and its feet's soft-constraint contact with the floor
(gradients and linearisations by the implicit adjoint), float64, 4 ms steps. The plans set
the 12 joints' position targets (rad, within the servos' ranges), each held for 5 steps;
T = 40 plan steps (0.8 s). Each initial state is the robot standing on slightly different
targets; the goal is a forward speed of 0.3-0.6 m/s. Success: the base's mean forward speed
over the last 0.2 s within 0.1 m/s of the goal, without falling (base above 0.18 m, tilted
by less than 0.5 rad).

iLQR (A_t, B_t by vector-Jacobian products through each recorded step), Adam-shooting and
CEM (32 plans per world per iteration) plan every initial state from the standing targets
with the same budget of rollouts per world; the table gives the final cost (mean, 10th and
90th percentiles over the initial states), the success rate and the wall time. Writes
plans.png (best cost against rollouts; the base's forward speed under each method for world
0), plans.usd (the best method's plans side by side) with plans_frames.png, and
result.json. --test: 2 initial states, 120 rollouts each; fails unless every method lowers
every world's cost and the best method reaches both goals.
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.apps.plan_report import compare_planners, comparison_failure, method_summary
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import cem, shoot_adam
from wpsim.tasks.quadruped_accelerate import (
    DT,
    FORWARD,
    SUBSTEPS,
    fallen_or_tilted,
    final_speed,
    initial_states,
    make_problem,
    scene_path,
    succeeded,
)

STEPS = 40
ADAM_LR = 0.02
"""Adam's step, a fraction of each target's half range. On 2 initial states, 150 rollouts
each (final costs): 0.02 gave 9.33 and 4.92, the default 0.05 19.2 and 20.2 (and steps whose
soft-contact solve did not converge in 20 iterations)."""
METHODS = {"iLQR": ilqr, "Adam-shooting": lambda problem, budget: shoot_adam(problem, budget, lr=ADAM_LR),
           "CEM": lambda problem, budget: cem(problem, budget, samples=32, initial_std=0.01)}
"""The planners; CEM samples 32 plans per iteration with a std of 0.01 of each target's half
range. Swept on 2 initial states, 150 rollouts each (final forward speeds, goals 0.59 and
0.52 m/s): 0.005 gave 0.02 and 0.01 m/s, 0.01 0.05 and 0.04, 0.02 0.00 and 0.02, 0.1 none."""


def summary(result, speeds: np.ndarray) -> dict:
    """Final cost statistics, final speeds, falls and success of one planner's result."""
    return method_summary(result, succeeded(result.states, speeds), final_speed_mps=final_speed(result.states).tolist(),
                          fallen=fallen_or_tilted(result.states).tolist())


def run(test: bool, out, device) -> dict:
    count, budget = (2, 120) if test else (16, 300)
    x0, speeds, targets = initial_states(count, seed=1, device=device)

    def panel(ax, results):
        time = np.arange(STEPS + 1) * SUBSTEPS * DT
        for name, result in results.items():
            ax.plot(time, result.states[0, :, FORWARD], label=name)
        ax.axhline(speeds[0], color="k", linestyle="--", label="goal")
        ax.set(xlabel="t (s)", ylabel="forward speed (m/s)", title="world 0: the base's speed under each plan")

    return compare_planners(make_problem(x0, speeds, STEPS, targets, device=device), METHODS, budget,
                            lambda r: summary(r, speeds), out, "plans", panel, (0.0, 1.0, 0.0),
                            speeds_mps=speeds.tolist())


def main(argv=None) -> int:
    """Command line: --device, --out, --test (2 initial states, 120 rollouts each)."""

    return example_main(__doc__, "quadruped_accelerate", "2 initial states, 120 rollouts each; fail unless every "
                        "method lowers every world's cost and the best reaches one of the two goals", run,
                        lambda result: comparison_failure(result, success=0.5, every_world=True), argv,
                        inputs=(scene_path(),))


if __name__ == "__main__":
    sys.exit(main())
