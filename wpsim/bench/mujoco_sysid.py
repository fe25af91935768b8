"""What the ``vs_mujoco_sysid`` suite's cases share: a run written as the measured-data file
``wpsim sysid`` reads, and one timed fit by MuJoCo's system-identification toolbox
(``mujoco.sysid``) on a run of joint angles."""

from __future__ import annotations

import time

import numpy as np


def write_run_csv(path, run: dict, joints) -> None:
    """Write ``run`` ("time" (N,) s, "measured" and "qd" (N, J) rad and rad/s, "torque" (N, J)
    N m) as ``q:``, ``qd:`` and ``tau:`` columns of ``joints`` (``wpsim.io.measurements``)."""
    from wpsim.io.measurements import save_trajectory

    columns = {}
    for i, joint in enumerate(joints):
        columns[f"q:{joint}"], columns[f"qd:{joint}"] = run["measured"][:, i], run["qd"][:, i]
        columns[f"tau:{joint}"] = run["torque"][:, i]
    save_trajectory(path, run["time"], columns)


def mujoco_fit(mujoco, sysid, spec, params, run: dict, name: str, steps: int | None = None) -> tuple:
    """``mujoco.sysid.optimize`` of ``params`` (a ParameterDict of ``spec``) to the ``jointpos``
    sensors of ``run``'s first ``steps`` steps (default all), from its first state, with its
    torques: (fitted ParameterDict, {"rollouts", "iterations", "cpu", "wall"})."""
    from wpsim.opt.least_squares import one_blas_thread

    last = len(run["time"]) - 1 if steps is None else steps
    model = spec.compile()
    data = mujoco.MjData(model)
    initial = sysid.create_initial_state(model, run["q"][0], run["qd"][0], data.act)
    control = sysid.TimeSeries(run["time"][:last + 1], run["torque"][:last + 1])
    # mujoco.rollout's sensor row k is read at the start of step k and stamped with the time after it
    sensors = sysid.TimeSeries.from_names(run["time"][1:last + 1], run["measured"][:last], model)
    sequences = sysid.ModelSequences(name, spec, "measured", initial, control, sensors)
    counted = {"rollouts": 0, "calls": 0}
    residual_fn = sysid.build_residual_fn(models_sequences=[sequences])

    def counting(x, p, **kwargs):
        counted["rollouts"] += 1 if np.ndim(x) == 1 else np.shape(x)[1]
        counted["calls"] += 1
        return residual_fn(x, p, **kwargs)

    cpu, wall = time.process_time(), time.perf_counter()
    with one_blas_thread():
        fitted, result = sysid.optimize(initial_params=params, residual_fn=counting, verbose=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return fitted, {"rollouts": counted["rollouts"], "cpu": cpu, "wall": wall,
                    "iterations": len(result.extras.get("objective", [])) or counted["calls"]}
