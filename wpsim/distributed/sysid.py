"""System identification over many measured trajectories, one shard per trajectory.

A measured run (``wpsim.io.measurements``, the robot driven by its recorded torques) is cut
into W consecutive time windows of equal length on the simulation grid; each window is a
trajectory of its own: its rollout starts from the measured state at the window's start
(angles, and rates from ``qd:`` columns or a one-sided difference), applies the measured
torques, and its loss is the mean squared joint-angle error (rad^2) over its steps
(``wpsim.opt.sysid.robot_problem``). The pool's loss is the mean over the windows (weight
1 / W each, summed in window order): the mean squared error over every step of every
window. Restarting each window from the data keeps long runs well conditioned (a form of
multiple shooting); the parameters are those every window shares: "masses", "damping",
"armature" (not the per-window "initial_state").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.distributed.pool import ShardPool
from wpsim.distributed.problem import DistributedProblem
from wpsim.distributed.scene import Scene
from wpsim.distributed.transport import count_option

SHARED_FAMILIES = ("masses", "damping", "armature")
"""``wpsim.opt.sysid.FAMILIES`` that every window shares."""


def window_problem(robot_file, data_file, families, start: int, steps: int, dt: float | None = None,
                   mode: str = "full", device=None):
    """The ``Problem`` of one window: ``steps`` simulation steps of ``dt`` (s; default the
    robot file's) from grid step ``start`` of the data in ``data_file`` (its first sample is
    step 0), fitting ``families`` of the robot in ``robot_file``; a ``Scene`` build function."""
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.sysid import prepare_run, robot_problem

    builder, scene = import_robot(robot_file)
    dt = dt or scene.timestep
    data = load_trajectory(data_file)
    window = data.resample(data.time[0] + dt * (start + np.arange(steps + 1)))
    run = prepare_run(builder, scene, window, dt, steps * dt, device)
    return robot_problem(run, list(families), mode)


def window_scenes(robot_file, data_file, families=SHARED_FAMILIES, windows: int = 8, duration: float | None = None,
                  dt: float | None = None, mode: str = "full") -> list:
    """W = ``windows`` ``Scene``s of ``window_problem`` covering the first ``duration`` s of the
    data (default all of it), each ``floor(duration / dt / W)`` steps, weight 1 / W. The
    files are read on the workers, at their absolute paths: every node must see them there."""
    from wpsim.io.measurements import MeasurementError, load_trajectory
    from wpsim.io.robots import import_robot

    families = list(families)
    bad = [f for f in families if f not in SHARED_FAMILIES]
    if bad or not families:
        raise ValueError(f"window fits take the shared families {', '.join(SHARED_FAMILIES)}; got {bad or families} "
                         "(initial_state differs per window)")
    windows = count_option("windows", windows, 1)
    step = dt or import_robot(robot_file)[1].timestep
    if not step or step <= 0.0:
        raise ValueError(f"{robot_file}: the robot file gives no time step; pass dt")
    data = load_trajectory(data_file)
    span = float(data.time[-1] - data.time[0])
    duration = span if duration is None else float(duration)
    if not 0.0 < duration <= span + 1e-9:
        raise MeasurementError(f"{data_file}: duration {duration:g} s is not within the data's {span:g} s")
    steps = int(np.floor(duration / step / windows + 1e-9))
    if steps < 2:
        raise ValueError(f"{windows} windows of {duration:g} s at dt {step:g} s leave {steps} steps per window; "
                         "2 or more are needed")
    files = (str(Path(robot_file).resolve()), str(Path(data_file).resolve()))
    return [Scene(window_problem, (*files, tuple(families), w * steps, steps, dt, mode),
                  weight=1.0 / windows, name=f"window {w} of {data_file}: steps {w * steps}-{(w + 1) * steps}")
            for w in range(windows)]


def identify_windows(robot_file, data_file, families=SHARED_FAMILIES, windows: int = 8, workers: int = 0,
                     method: str = "lbfgsb", iterations: int = 30, starts: int = 1, duration: float | None = None,
                     dt: float | None = None, mode: str = "full", progress: bool = True, **pool_options):
    """Fit ``families`` of ``robot_file`` to the ``windows`` windows of ``data_file`` (see the
    module docstring) with ``wpsim.opt.minimize``'s ``method``; ``starts`` > 1 fits that many
    guesses side by side (``wpsim.opt.multistart``: the declared one and random ones) and
    keeps the best. ``workers`` is the flag: 0 in this process, >= 1 on that many Ray
    workers (``pool_options`` go to ``WorkerPool``). Returns the ``OptimizationResult`` (the
    best start's, with ``starts`` > 1)."""
    from wpsim.opt.minimize import minimize
    from wpsim.opt.multistart import multistart

    starts = count_option("starts", starts, 1)
    with ShardPool(window_scenes(robot_file, data_file, families, windows, duration, dt, mode), workers,
                   **pool_options) as pool:
        if starts == 1:
            return minimize(DistributedProblem(pool), method, iterations=iterations, progress=progress)
        return multistart(DistributedProblem(pool, worlds=starts), method=method, iterations=iterations,
                          progress=progress).best_fit()
