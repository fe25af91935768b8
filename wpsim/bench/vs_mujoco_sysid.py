"""Benchmark suite ``vs_mujoco_sysid``: ``wpsim.opt.sysid.identify`` against ``mujoco.sysid``
(MuJoCo's system-identification toolbox) on the same data from the same wrong start.

Case ``arm3_planar`` (``wpsim.bench.sysid_arm3``): a planar arm of three hinges hanging under gravity, 9
parameters (the three link masses, their inertias scaled with them; the three joint dampings;
the three armatures), 2.5 s at 2 ms (1,250 steps) driven by sums of sines. The data come from
MuJoCo with the true values (``TRUTH``); both tools start from the same wrong file (masses x0.6,
damping x0.3, armature 0, ``start_xml``), fit the three joint angles and start from the true
initial state. Case ``arm3_friction``: the same arm with dry friction in its hinges
(``FRICTION``, MuJoCo's frictionloss), 12 parameters (the nine and the three frictions), the
frictions started at 0. Case ``arm3_servo`` (``wpsim.bench.sysid_servo``): the arm driven by
a position servo on each hinge, their six gains (kp, kv) from kp x0.5 and kv x2, exact data.
Two data sets: ``exact`` and ``noise_1pct`` (Gaussian noise of 1 % of each
angle channel's standard deviation on every sample after the first, the same draws for both
tools, seed ``NOISE_SEED``). The full run also fits with wpsim's L-BFGS-B (``wpsim_lbfgsb``,
tape gradients) for the choice of ``identify``'s default method, and case
``arm6_full_inertia`` (``wpsim.bench.sysid_arm6``): 60 full inertial parameters of a 6-hinge
arm, judged by how well each tool's fitted model predicts data it was not fitted to.

- wpsim: ``identify(..., method="least-squares")`` from the files (robot MJCF, data CSV), the
  Jacobian by forward differences over the n + 1 worlds of one rollout (``TrackingResiduals``),
  its verdict included, as ``wpsim sysid`` runs it less the output files (with dry friction
  the run steps with the soft-constraint solve's friction-loss rows);
- MuJoCo: ``mujoco.sysid.optimize`` with its default optimiser (``mujoco.minimize``
  Levenberg-Marquardt, forward-difference Jacobians by ``mujoco.rollout`` on every core), the
  parameters as spec modifiers (mass with the inertia scaled alike, damping, armature,
  frictionloss), the
  residual of the three ``jointpos`` sensors.

Per case and tool: the worst parameter error (%), rollouts (wpsim: one per batched Jacobian
rollout and per residual evaluation; MuJoCo: one per model rolled out), optimiser iterations,
CPU seconds (``time.process_time``, every thread of the process) and wall seconds, and the
ratio of CPU seconds wpsim / MuJoCo, all from one run. Both fits run with numpy's BLAS on one
thread (``wpsim.opt.least_squares.one_blas_thread``, as wpsim's least squares always does):
idle BLAS threads spin and would count as CPU time on either side; MuJoCo's rollouts keep
their own threads (every core). The contact case is ``puck_contact``
(``wpsim.bench.sysid_contact``: a puck sliding on the floor, its mass, damping and friction
coefficient). Without ``mujoco.sysid`` (an optional part
of ``mujoco``: ``absl-py``, ``colorama``, ``tabulate``) the suite returns one record saying why.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

from wpsim.bench.mujoco_sysid import first_entry_modifier, mass_modifier, mujoco_fit, write_run_csv
from wpsim.bench.records import progress, record, skipped_record
from wpsim.bench.sysid_arm3 import (
    BODIES,
    DT,
    DURATION,
    JOINTS,
    NOISE,
    NOISE_SEED,
    make_data,
    start_xml,
    truth_vector,
    worst_error_percent,
)

SUITE = "vs_mujoco_sysid"
def run_wpsim(run: dict, folder: Path, device, method: str = "least-squares", friction: bool = False) -> dict:
    """``identify`` (by ``method``) of the 9 parameters (and with ``friction`` the hinges' dry
    friction) from the start file; errors, costs."""
    from wpsim.opt.sysid import identify

    robot, csv = folder / "arm3_start.xml", folder / "arm3_data.csv"
    robot.write_text(start_xml(sensors=False, friction=friction))
    write_run_csv(csv, run, JOINTS)
    families = ("damping", "armature", *(("friction",) if friction else ()))
    cpu, wall = time.process_time(), time.perf_counter()
    result = identify(robot, csv, ["masses", *families], method=method, iterations=60, progress=False, device=device)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    values = result.fit.values()
    fitted = [values[f"{b}.mass"] for b in BODIES] + [values[f"{j}.{family}"] for family in families for j in JOINTS]
    return {"error": worst_error_percent(fitted, truth_vector(friction)), "rollouts": result.fit.rollouts,
            "gradients": result.fit.gradients,
            "iterations": len(result.fit.history) - 1,
            "cpu": cpu, "wall": wall, "message": str(result.fit.message), "verdict_ok": bool(result.verdict.ok)}


def run_mujoco(mujoco, sysid, run: dict, friction: bool = False) -> dict:
    """``mujoco.sysid.optimize`` of the 9 parameters (and with ``friction`` the hinges'
    frictionloss) from the start file; errors, costs."""
    spec = mujoco.MjSpec.from_string(start_xml(friction=friction))
    start_mass = [spec.body(b).mass for b in BODIES]
    start_inertia = [np.array(spec.body(b).inertia) for b in BODIES]
    params = sysid.ParameterDict()
    for i, body in enumerate(BODIES):
        params.add(sysid.Parameter(f"{body}.mass", start_mass[i], 0.1 * start_mass[i], 10.0 * start_mass[i],
                                   modifier=mass_modifier(body, start_mass[i], start_inertia[i])))
    attributes = (("damping", 5.0), ("armature", 1.0), *((("frictionloss", 5.0),) if friction else ()))
    for attribute, upper in attributes:
        for joint in JOINTS:
            value = float(np.atleast_1d(getattr(spec.joint(joint), attribute))[0])
            params.add(sysid.Parameter(f"{joint}.{attribute}", value, 0.0, upper,
                                       modifier=first_entry_modifier("joint", joint, attribute)))
    fitted, out = mujoco_fit(mujoco, sysid, spec, params, run, "arm3_planar")
    values = [fitted[f"{b}.mass"].value[0] for b in BODIES] + [fitted[f"{j}.{a}"].value[0]
                                                               for a, _ in attributes for j in JOINTS]
    return {**out, "error": worst_error_percent(values, truth_vector(friction))}


def vs_mujoco_sysid_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``vs_mujoco_sysid`` (see the module docstring). ``quick``: the exact-data case
    only."""
    import warp as wp

    device = wp.get_device(device)
    try:
        import mujoco
        from mujoco import sysid
        sysid.optimize  # noqa: B018 - present only with the toolbox's optional dependencies
    except (ImportError, AttributeError) as error:
        return skipped_record(SUITE, device, f"mujoco.sysid is not usable ({error!r}); pip install 'mujoco[sysid]'")
    base = {"cores": os.cpu_count(), "mujoco": mujoco.__version__, "device": str(device), "precision": "float64",
            "parameters": 9, "steps": int(round(DURATION / DT)), "dt": DT,
            "start": "masses x0.6, damping x0.3, armature 0",
            "blas_threads": 1, "wpsim_jacobian": "forward differences, 10 worlds",
            "mujoco_optimizer": "mujoco.minimize (LM, forward differences)"}
    records = []
    with tempfile.TemporaryDirectory() as folder:
        for name, friction in (("arm3_planar", False), ("arm3_friction", True)):
            records += _arm3_records(mujoco, sysid, Path(folder), device, base, name, friction, quick)
        records += _servo_records(mujoco, sysid, Path(folder), device, base)
        if not quick:
            records += _full_inertia_records(mujoco, sysid, Path(folder), device, base)
        records += _contact_records(mujoco, sysid, Path(folder), device, base, quick)
    return records


def _tool_records(case: str, sides: dict, common: dict) -> tuple:
    """(records, CPU ratio wpsim / MuJoCo) of ``case``: each tool's worst error, rollouts, CPU
    and wall seconds (``sides``: tool -> its fit's findings; wpsim's with its message and
    verdict), and the ratio."""
    records = []
    for tool, out in sides.items():
        params = {**common, "mode": tool, "iterations": out["iterations"],
                  **({"message": out["message"], "verdict_ok": out["verdict_ok"]} if tool == "wpsim" else {})}
        records += [record(SUITE, case, params, "error_percent", out["error"]),
                    record(SUITE, case, params, "count", out["rollouts"]),
                    record(SUITE, case, {**params, "clock": "process"}, "wall_s", out["cpu"]),
                    record(SUITE, case, {**params, "clock": "wall"}, "wall_s", out["wall"])]
    ratio = sides["wpsim"]["cpu"] / sides["mujoco"]["cpu"]
    records.append(record(SUITE, case, {**common, "mode": "cpu wpsim/mujoco"}, "time_ratio", ratio))
    return records, ratio


def _servo_records(mujoco, sysid, folder: Path, device, base: dict) -> list:
    """Case ``arm3_servo`` (``wpsim.bench.sysid_servo``): both tools' worst error, rollouts,
    iterations, CPU and wall seconds and the CPU ratio, exact data."""
    from wpsim.bench import sysid_servo as servo

    data = servo.make_servo_data(mujoco)
    sides = {"mujoco": servo.fit_servo_mujoco(mujoco, sysid, data), "wpsim": servo.fit_servo_wpsim(data, folder, device)}
    common = {**base, "parameters": 6, "steps": int(round(servo.DURATION_S / DT)), "data": "exact",
              "start": "kp x0.5, kv x2", "wpsim_jacobian": "forward differences, 7 worlds"}
    records, ratio = _tool_records("arm3_servo", sides, common)
    w, m = sides["wpsim"], sides["mujoco"]
    progress(f"{SUITE} arm3_servo exact: worst error wpsim {w['error']:.2g} % / mujoco {m['error']:.2g} %, CPU s "
             f"{w['cpu']:.3f} / {m['cpu']:.3f} (x{ratio:.2f}), rollouts {w['rollouts']} / {m['rollouts']}, "
             f"iterations {w['iterations']} / {m['iterations']}")
    return records


def _arm3_records(mujoco, sysid, folder: Path, device, base: dict, name: str, friction: bool, quick: bool) -> list:
    """Case ``name``: the 3-hinge arm's fit by both tools (``friction``: with the hinges' dry
    friction in the data and fitted, 12 parameters), exact data (and with noise unless
    ``quick``); errors, rollouts, iterations, CPU and wall seconds, the CPU ratio (and without
    friction, unless ``quick``, wpsim's L-BFGS-B)."""
    records = []
    base = {**base, "parameters": 12 if friction else 9, "wpsim_jacobian": f"forward differences, "
            f"{13 if friction else 10} worlds", **({"start": base["start"] + ", friction 0"} if friction else {})}
    for case in ("exact",) if quick else ("exact", "noise_1pct"):
        data = make_data(mujoco, noisy=case != "exact", friction=friction)
        sides = {"mujoco": run_mujoco(mujoco, sysid, data, friction),
                 "wpsim": run_wpsim(data, folder, device, friction=friction)}
        if not quick and not friction:  # wpsim's other method, for its default: L-BFGS-B on tape gradients
            sides["wpsim_lbfgsb"] = run_wpsim(data, folder, device, "lbfgsb")
        for tool, out in sides.items():
            params = {**base, "mode": tool, "data": case, "iterations": out["iterations"],
                      **({"message": out["message"], "verdict_ok": out["verdict_ok"], "gradients": out["gradients"]}
                         if tool.startswith("wpsim") else {})}
            records += [record(SUITE, name, params, "error_percent", out["error"]),
                        record(SUITE, name, params, "count", out["rollouts"]),
                        record(SUITE, name, {**params, "clock": "process"}, "wall_s", out["cpu"]),
                        record(SUITE, name, {**params, "clock": "wall"}, "wall_s", out["wall"])]
        ratio = sides["wpsim"]["cpu"] / sides["mujoco"]["cpu"]
        records.append(record(SUITE, name, {**base, "mode": "cpu wpsim/mujoco", "data": case}, "time_ratio", ratio))
        if "wpsim_lbfgsb" in sides:
            other = sides["wpsim_lbfgsb"]
            records.append(record(SUITE, name, {**base, "mode": "cpu wpsim_lbfgsb/wpsim", "data": case},
                                  "time_ratio", other["cpu"] / sides["wpsim"]["cpu"]))
            progress(f"{SUITE} {name} {case}: wpsim L-BFGS-B worst error {other['error']:.2g} %, "
                     f"CPU s {other['cpu']:.3f}, iterations {other['iterations']}")
        progress(f"{SUITE} {name} {case}: worst error wpsim {sides['wpsim']['error']:.2g} % / mujoco "
                 f"{sides['mujoco']['error']:.2g} %, CPU s {sides['wpsim']['cpu']:.3f} / "
                 f"{sides['mujoco']['cpu']:.3f} (x{ratio:.2f}), rollouts {sides['wpsim']['rollouts']} / "
                 f"{sides['mujoco']['rollouts']}, iterations {sides['wpsim']['iterations']} / "
                 f"{sides['mujoco']['iterations']}")
    return records


def _contact_records(mujoco, sysid, folder: Path, device, base: dict, quick: bool) -> list:
    """Case ``puck_contact`` (``wpsim.bench.sysid_contact``): both tools' worst error, rollouts,
    iterations, CPU and wall seconds and the CPU ratio, exact data (and with noise unless
    ``quick``)."""
    from wpsim.bench import sysid_contact as puck

    records, name = [], "puck_contact"
    base = {**base, "parameters": 3, "steps": int(round(puck.DURATION / puck.DT)), "dt": puck.DT,
            "start": "mass x0.6, damping x0.3, friction x0.5", "wpsim_jacobian": "forward differences, 4 worlds"}
    for case in ("exact",) if quick else ("exact", "noise_1pct"):
        data = puck.make_puck_data(mujoco, case != "exact", NOISE, NOISE_SEED)
        sides = {"mujoco": puck.fit_puck_mujoco(mujoco, sysid, data), "wpsim": puck.fit_puck_wpsim(data, folder, device)}
        found, ratio = _tool_records(name, sides, {**base, "data": case, "sliding_fraction": data["sliding_fraction"]})
        records += found
        progress(f"{SUITE} {name} {case}: worst error wpsim {sides['wpsim']['error']:.2g} % / mujoco "
                 f"{sides['mujoco']['error']:.2g} %, CPU s {sides['wpsim']['cpu']:.3f} / {sides['mujoco']['cpu']:.3f} "
                 f"(x{ratio:.2f}), iterations {sides['wpsim']['iterations']} / {sides['mujoco']['iterations']}")
    return records


def _full_inertia_records(mujoco, sysid, folder: Path, device, base: dict) -> list:
    """Case ``arm6_full_inertia`` (``wpsim.bench.sysid_arm6``): both tools' fit and prediction
    RMS, rollouts, iterations, CPU and wall seconds, and the CPU ratio."""
    from wpsim.bench import sysid_arm6 as arm6

    data = arm6.make_arm6_data(mujoco)
    sides = {"mujoco": arm6.fit_mujoco(mujoco, sysid, data), "wpsim": arm6.fit_wpsim(data, folder, device)}
    base = {**base, "parameters": 60, "steps": int(round(arm6.FIT_S / arm6.DT)), "predicted_steps":
            int(round(arm6.DURATION_S / arm6.DT)), "start": "masses x0.7, centres of mass 2 cm lower, moments x1.3",
            "wpsim_jacobian": "forward differences, 61 worlds", "data": "exact"}
    records = []
    for tool, out in sides.items():
        params = {**base, "mode": tool, "iterations": out["iterations"]}
        records += [record(SUITE, "arm6_full_inertia", {**params, "window": "fit"}, "rms_rad", out["fit_rms"]),
                    record(SUITE, "arm6_full_inertia", {**params, "window": "prediction"}, "rms_rad",
                           out["predict_rms"]),
                    record(SUITE, "arm6_full_inertia", params, "count", out["rollouts"]),
                    record(SUITE, "arm6_full_inertia", {**params, "clock": "process"}, "wall_s", out["cpu"]),
                    record(SUITE, "arm6_full_inertia", {**params, "clock": "wall"}, "wall_s", out["wall"])]
    ratio = sides["wpsim"]["cpu"] / sides["mujoco"]["cpu"]
    records.append(record(SUITE, "arm6_full_inertia", {**base, "mode": "cpu wpsim/mujoco"}, "time_ratio", ratio))
    w, m = sides["wpsim"], sides["mujoco"]
    progress(f"{SUITE} arm6_full_inertia: prediction RMS wpsim {w['predict_rms']:.2g} / mujoco {m['predict_rms']:.2g} "
             f"rad, CPU s {w['cpu']:.2f} / {m['cpu']:.2f} (x{ratio:.2f}), rollouts {w['rollouts']} / "
             f"{m['rollouts']}, iterations {w['iterations']} / {m['iterations']}")
    return records
