"""What the ``vs_mujoco_sysid`` suite's cases share: a run written as the measured-data file
``wpsim sysid`` reads, the spec modifiers of MuJoCo's parameters, and one timed fit by
MuJoCo's system-identification toolbox (``mujoco.sysid``) on a run of joint angles."""

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
    controls ("control", else its "torque" for motors of gear 1): (fitted ParameterDict,
    {"rollouts", "iterations", "cpu", "wall"})."""
    from wpsim.opt.least_squares import one_blas_thread

    last = len(run["time"]) - 1 if steps is None else steps
    model = spec.compile()
    data = mujoco.MjData(model)
    initial = sysid.create_initial_state(model, run["q"][0], run["qd"][0], data.act)
    inputs = run["control"] if "control" in run else run["torque"]
    control = sysid.TimeSeries(run["time"][:last + 1], inputs[:last + 1])
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


def mass_modifier(body: str, start_mass: float, start_inertia: np.ndarray):
    """A ``mujoco.sysid`` modifier setting ``body``'s mass, its inertia scaled alike from the
    start's (``start_mass`` kg, ``start_inertia`` the diagonal, kg m^2)."""
    def modify(spec, param):
        spec.body(body).mass = param.value[0]
        spec.body(body).inertia = start_inertia * (param.value[0] / start_mass)
    return modify


def first_entry_modifier(element: str, name: str, attribute: str):
    """A ``mujoco.sysid`` modifier setting the first entry of an ``attribute`` of the spec's
    ``element`` ("joint" or "geom") ``name`` (MuJoCo 4's joint damping is a vector whose first
    entry is the linear one; a geom's friction's first is the sliding one)."""
    def modify(spec, param):
        target = getattr(spec, element)(name)
        value = np.array(getattr(target, attribute), dtype=np.float64, ndmin=1)
        value[0] = param.value[0]
        setattr(target, attribute, value if value.size > 1 else float(value[0]))
    return modify


def worst_error_percent(fitted, truth) -> float:
    """The largest relative error (%) of ``fitted`` against ``truth``, entry by entry."""
    fitted, truth = np.asarray(fitted, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    return float(np.max(np.abs(fitted - truth) / np.abs(truth)) * 100.0)
