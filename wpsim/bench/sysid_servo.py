"""Case ``arm3_servo`` of the ``vs_mujoco_sysid`` suite: the position gains kp and velocity gains
kv of three position servos (6 parameters), fitted by ``wpsim sysid --fit servo_gains`` and by
``mujoco.sysid`` (the actuators' gainprm and biasprm) to the same MuJoCo-made data from the
same wrong start.

The arm is the 3-hinge arm of ``vs_mujoco_sysid`` (its true masses, damping and armature,
known) with a position servo on each hinge (``KP``, ``KV``) following sine targets
(``TARGETS``) from rest for ``DURATION_S`` s at 2 ms; the data hold the angles, rates and the
targets as ``ctrl:`` columns. The start: kp x0.5, kv x2.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

KP, KV = (20.0, 12.0, 6.0), (1.0, 0.6, 0.3)
"""The true position gains (N m/rad) and velocity gains (N m s/rad) of the arm's servos."""
TARGETS = ((0.6, 0.8, 0.0), (0.6, 1.3, 0.5), (0.6, 2.1, 1.0))
"""Per hinge (amplitude rad, frequency Hz, phase rad) of its servo's target."""
START = {"kp": 0.5, "kv": 2.0}
DURATION_S = 1.0


def servo_arm_xml(kp=KP, kv=KV, sensors: bool = True, motor_last: bool = False) -> str:
    """The 3-hinge arm of ``vs_mujoco_sysid`` (``wpsim.bench.sysid_arm3``) with its true masses, damping and armature and a
    position servo ``a_<joint>`` on each hinge (``motor_last``: a motor of gear 2 on the third
    instead), with ``jointpos`` sensors unless ``sensors`` is False."""
    from wpsim.bench import sysid_arm3 as arm

    xml = arm.arm_xml(arm.TRUTH["mass"], arm.TRUTH["damping"], arm.TRUTH["armature"], sensors=sensors)
    for i, (joint, p, v) in enumerate(zip(arm.JOINTS, kp, kv)):
        servo = (f'<motor name="a_{joint}" joint="{joint}" gear="2"/>' if motor_last and i == 2 else
                 f'<position name="a_{joint}" joint="{joint}" kp="{p}" kv="{v}"/>')
        xml = xml.replace(f'<motor name="m_{joint}" joint="{joint}"/>', servo)
    return xml


def start_servo_xml(sensors: bool = True) -> str:
    """The servo arm at the wrong start (``START``)."""
    return servo_arm_xml(tuple(START["kp"] * k for k in KP), tuple(START["kv"] * k for k in KV), sensors)


def make_servo_data(mujoco, seconds: float = DURATION_S, motor_last: bool = False) -> dict:
    """The true servo arm's run by MuJoCo from rest under ``TARGETS`` (and a sine control of the
    motor): times, controls (the last row unused), angles, rates (and the angles as measured)."""
    from wpsim.bench import sysid_arm3 as arm

    model = mujoco.MjModel.from_xml_string(servo_arm_xml(motor_last=motor_last))
    time_s = np.arange(int(round(seconds / arm.DT)) + 1) * arm.DT
    control = np.stack([a * np.sin(2 * np.pi * f * time_s + p) for a, f, p in TARGETS], 1)
    q, qd = arm.simulate(mujoco, model, mujoco.MjData(model), control)
    return {"time": time_s, "control": control, "q": q, "qd": qd, "measured": q}


def write_servo_csv(path, run: dict) -> Path:
    """Write ``run`` (``make_servo_data``) as ``q:``, ``qd:`` and ``ctrl:a_<joint>`` columns."""
    from wpsim.bench import sysid_arm3 as arm
    from wpsim.io.measurements import save_trajectory

    columns = {}
    for i, joint in enumerate(arm.JOINTS):
        columns |= {f"q:{joint}": run["measured"][:, i], f"qd:{joint}": run["qd"][:, i],
                    f"ctrl:a_{joint}": run["control"][:, i]}
    return save_trajectory(path, run["time"], columns)


def truth_vector() -> np.ndarray:
    """The 6 true values in the order of ``--fit servo_gains``: the kps, then the kvs."""
    return np.array([*KP, *KV])


def fit_servo_wpsim(run: dict, folder: Path, device) -> dict:
    """``identify(..., ["servo_gains"])`` from the start file: worst error (%), costs."""
    from wpsim.bench.mujoco_sysid import worst_error_percent
    from wpsim.opt.sysid import identify

    robot, csv = folder / "servo_start.xml", folder / "servo_data.csv"
    robot.write_text(start_servo_xml(sensors=False))
    write_servo_csv(csv, run)
    cpu, wall = time.process_time(), time.perf_counter()
    result = identify(robot, csv, ["servo_gains"], iterations=60, progress=False, device=device)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"error": worst_error_percent(result.fit.x, truth_vector()), "rollouts": result.fit.rollouts,
            "iterations": len(result.fit.history) - 1, "cpu": cpu, "wall": wall,
            "message": str(result.fit.message), "verdict_ok": bool(result.verdict.ok)}


def servo_gain_modifier(actuator: str, gain: str):
    """A ``mujoco.sysid`` modifier setting a position servo's kp (gainprm[0] = kp, biasprm[1] =
    -kp) or kv (biasprm[2] = -kv)."""
    def modify(spec, param):
        target = spec.actuator(actuator)
        gains, biases = np.array(target.gainprm), np.array(target.biasprm)
        if gain == "kp":
            gains[0], biases[1] = param.value[0], -param.value[0]
        else:
            biases[2] = -param.value[0]
        target.gainprm, target.biasprm = gains, biases
    return modify


def fit_servo_mujoco(mujoco, sysid, run: dict) -> dict:
    """``mujoco.sysid.optimize`` of the 6 gains (bounds 0.1x to 10x the start) from the start
    file: worst error (%), costs."""
    from wpsim.bench import sysid_arm3 as arm
    from wpsim.bench.mujoco_sysid import mujoco_fit, worst_error_percent

    spec = mujoco.MjSpec.from_string(start_servo_xml())
    params = sysid.ParameterDict()
    starts = {"kp": [START["kp"] * k for k in KP], "kv": [START["kv"] * k for k in KV]}
    for gain in ("kp", "kv"):
        for joint, value in zip(arm.JOINTS, starts[gain]):
            params.add(sysid.Parameter(f"{joint}.{gain}", value, 0.1 * value, 10.0 * value,
                                       modifier=servo_gain_modifier(f"a_{joint}", gain)))
    fitted, out = mujoco_fit(mujoco, sysid, spec, params, run, "arm3_servo")
    values = [fitted[f"{joint}.{gain}"].value[0] for gain in ("kp", "kv") for joint in arm.JOINTS]
    return {**out, "error": worst_error_percent(values, truth_vector())}
