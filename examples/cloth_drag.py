"""Trajectory optimisation of a cloth: drag a cloth lying on the ground so that it comes to rest on a spot.

A 0.2 m x 0.2 m cloth (4 x 4 vertices, 0.5 kg/m^2, 20 g; membrane moduli 20 N/m, bending
1e-3 N m/rad) lies on the ground (penalty contact 100 N/m, 0.5 N s/m, Coulomb friction
0.5, smoothed) and slides with an initial velocity of up to 0.2 m/s in any direction. Two
corners of its -x edge are pulled by horizontal forces within +-0.3 N per axis (nu = 4),
held for 10 steps of 2 ms (30 plan steps, 0.6 s). The planner's state is every vertex's
position and velocity (``TrajectoryProblem(state="particles")``, nx = 96). Cost: each
vertex's x, y against its place in the cloth moved to the goal (terminal 200 m^-2 per
vertex, 1 m^-2 per plan step while moving), the velocities at the end (1 (m/s)^-2),
effort 0.1 N^-2. Success: the cloth's centre within 2 cm of the goal at the end.

Adam-shooting, iLQR (one Jacobian row per state entry: 96 rollouts per linearisation) and
CEM (16 plans per iteration) plan every initial state from zero forces with the same
budget of rollouts per world. Writes drag.png (best cost against rollouts; the centre's
path for world 0), drag.usd (the best method's plans, side by side) with drag_frames.png,
and result.json. --test: 2 initial states, 110 rollouts each; fails unless the best method
brings both to their goal and every method lowers the mean cost.
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import ModelBuilder
from wpsim.apps.console import example_main
from wpsim.apps.plan_report import compare_planners, comparison_failure, method_summary
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem, cem, shoot_adam

SIZE, VERTICES, DENSITY, RADIUS = 0.2, 4, 0.5, 0.005  # m, per side, kg/m^2, m
DT, SUBSTEPS, STEPS = 2e-3, 10, 30  # s, simulator steps per plan step, plan steps
MAX_FORCE = 0.3  # N per axis
SUCCESS_M = 0.02
METHODS = {"Adam-shooting": shoot_adam, "iLQR": ilqr,
           "CEM": lambda problem, budget: cem(problem, budget, samples=16)}


def scene() -> ModelBuilder:
    """The cloth at rest on the ground, its corner at the origin."""
    b = ModelBuilder()
    b.add_ground_plane(ke=100.0, kd=0.5, mu=0.5)
    cell = SIZE / (VERTICES - 1)
    b.add_cloth_grid(pos=(0.0, 0.0, RADIUS), dim_x=VERTICES - 1, dim_y=VERTICES - 1, cell_x=cell, cell_y=cell,
                     density=DENSITY, tri_mu=20.0, tri_lambda=20.0, tri_kd=0.05, bend_ke=1e-3, bend_kd=1e-5,
                     radius=RADIUS)
    return b


def rest_positions() -> np.ndarray:
    """(P, 3) vertex positions of the cloth at rest (m)."""
    return scene().finalize(dtype=wp.float64).particle_q.numpy().astype(np.float64)


def initial_states(count: int, seed: int) -> tuple:
    """(x0 (count, nx), goals (count, 2) m): the cloth at rest position sliding at up to
    0.2 m/s; the goal 10-15 cm from its centre within +-40 degrees of +x."""
    rng = np.random.default_rng(seed)
    rest = rest_positions()
    centre = rest.mean(axis=0)
    x0, goals = np.zeros((count, 6 * len(rest))), np.zeros((count, 2))
    for i in range(count):
        speed, heading = rng.uniform(0.0, 0.2), rng.uniform(-np.pi, np.pi)
        x0[i, :rest.size] = rest.ravel()
        x0[i, rest.size:] = np.tile([speed * np.cos(heading), speed * np.sin(heading), 0.0], len(rest))
        turn, distance = rng.uniform(-0.7, 0.7), rng.uniform(0.10, 0.15)
        goals[i] = centre[:2] + distance * np.array([np.cos(turn), np.sin(turn)])
    return x0, goals


def make_problem(x0: np.ndarray, goals: np.ndarray, device=None) -> TrajectoryProblem:
    """The plans from x0 (W, nx) to the goals (W, 2) (see the module docstring)."""
    rest = rest_positions()
    n = rest.size
    target = np.zeros((len(goals), 1, 2 * n))
    target[:, 0, :n] = (rest[None] + np.concatenate([goals - rest.mean(axis=0)[:2], np.zeros((len(goals), 1))],
                                                    axis=1)[:, None]).reshape(len(goals), n)
    planar = np.tile([1.0, 1.0, 0.0], len(rest))
    running, terminal = np.zeros(2 * n), np.zeros(2 * n)
    running[:n], terminal[:n], terminal[n:] = planar, 200.0 * planar, 1.0
    cost = TrajectoryCost(target=target, running=running, terminal=terminal, effort=np.full(4, 0.1))
    corners = np.flatnonzero((rest[:, 0] == rest[:, 0].min()) & np.isin(rest[:, 1], rest[:, 1].min()
                                                                         + [0.0, SIZE]))
    actuated = (3 * corners[:, None] + np.arange(2)).ravel()  # x and y of both corners
    return TrajectoryProblem(scene(), x0, STEPS, SUBSTEPS, DT, actuated=actuated, lower=-MAX_FORCE, upper=MAX_FORCE,
                             cost=cost, device=device, state="particles", jacobian_worlds=512)


def centres(states: np.ndarray) -> np.ndarray:
    """(..., 2) horizontal centre of the cloth in (..., nx) states (its vertices' mean; m)."""
    n = states.shape[-1] // 2
    return states[..., :n].reshape(*states.shape[:-1], -1, 3)[..., :2].mean(axis=-2)


def summary(result, goals: np.ndarray) -> dict:
    """Final cost statistics, misses (m) and success of one planner's result."""
    miss = np.linalg.norm(centres(result.states[:, -1]) - goals, axis=1)
    return method_summary(result, miss < SUCCESS_M, miss_m=miss.tolist())


def run(test: bool, out, device) -> dict:
    count, budget = (2, 110) if test else (6, 400)
    x0, goals = initial_states(count, seed=2)

    def panel(ax, results):
        for name, result in results.items():
            ax.plot(*centres(result.states[0]).T, label=name)
        ax.plot(*goals[0], "k*", markersize=12, label="goal")
        ax.set(xlabel="x (m)", ylabel="y (m)", title="world 0: the cloth's centre under each plan", aspect="equal")

    return compare_planners(make_problem(x0, goals, device=device), METHODS, budget, lambda r: summary(r, goals), out,
                            "drag", panel, (0.0, 0.4, 0.0), goals_m=goals.tolist())


def main(argv=None) -> int:
    """Command line: --device, --out, --test (2 initial states, 110 rollouts each)."""

    return example_main(__doc__, "cloth_drag", "2 initial states, 110 rollouts each; fail unless the best method "
                        "reaches both goals and every method lowers the mean cost", run,
                        lambda result: comparison_failure(result, success=1.0), argv)


if __name__ == "__main__":
    sys.exit(main())
