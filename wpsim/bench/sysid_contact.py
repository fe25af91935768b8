"""Case ``puck_contact`` of the ``vs_mujoco_sysid`` suite: a contact case. A puck (a sphere of
5 cm radius on two slide joints, x along the floor and z up) rests on the floor under gravity
and is pushed back and forth along x by a sine force, sliding on the floor (the floor's own
friction 0.05 is below the puck's, so the puck's sets the pair's, MuJoCo's rule). Its x is
measured (2 s at 2 ms); both tools fit three parameters (the puck's mass, its inertia scaled
alike, the x joint's damping and the puck's sliding friction coefficient) to MuJoCo's data
from the same wrong start (``START``): wpsim with ``--fit masses,damping,contact_friction``
(its soft-constraint contact: pyramidal cone and row weights as MuJoCo's), MuJoCo with mass,
damping and geom-friction modifiers.
"""

from __future__ import annotations

import time

import numpy as np

BODY, JOINT, GEOM = "puck", "x", "puck_geom"
TRUTH = {"mass": 1.0, "damping": 0.5, "mu": 0.4}
"""The puck's mass (kg), its x joint's damping (N s/m) and its sliding friction."""
START = {"mass": 0.6, "damping": 0.3, "mu": 0.5}
"""The wrong start: factors of the true values."""
DT, DURATION = 0.002, 2.0
EXCITATION = ((5.0, 0.7, 0.0), (2.0, 1.9, 0.5))
"""(amplitude N, frequency Hz, phase rad) of each sine of the force along x."""


def puck_xml(mass: float, damping: float, mu: float, sensors: bool = True) -> str:
    """The puck's MJCF with this mass (inertia scaled with it), x damping and friction (and a
    ``jointpos`` sensor of x, which MuJoCo's fit reads)."""
    inertia = 0.4 * mass * 0.05 ** 2
    sensor = f'<jointpos name="q_{JOINT}" joint="{JOINT}"/>' if sensors else ""
    return (f'<mujoco model="puck_contact"><option timestep="{DT}" gravity="0 0 -9.81"/><worldbody>'
            f'<geom name="floor" type="plane" size="5 5 0.1" friction="0.05"/>'
            f'<body name="{BODY}" pos="0 0 0.05"><joint name="{JOINT}" type="slide" axis="1 0 0" '
            f'damping="{damping:.17g}"/><joint name="z" type="slide" axis="0 0 1"/>'
            f'<inertial pos="0 0 0" mass="{mass:.17g}" diaginertia="{inertia:.17g} {inertia:.17g} {inertia:.17g}"/>'
            f'<geom name="{GEOM}" type="sphere" size="0.05" friction="{mu:.17g}"/></body></worldbody>'
            f'<actuator><motor name="push" joint="{JOINT}"/></actuator><sensor>{sensor}</sensor></mujoco>')


def start_values() -> tuple:
    """(mass, damping, friction) of the wrong start."""
    return tuple(TRUTH[k] * START[k] for k in ("mass", "damping", "mu"))


def truth_vector() -> np.ndarray:
    """The 3 true values in the order mass, damping, friction."""
    return np.array([TRUTH["mass"], TRUTH["damping"], TRUTH["mu"]])


def make_puck_data(mujoco, noisy: bool, noise: float, seed: int) -> dict:
    """MuJoCo's run of the true puck: times, forces (steps + 1, 1), the joint state (x, z) and
    its rates, x as measured (``noisy``: Gaussian noise of ``noise`` of x's standard deviation
    after the first sample) and the fraction of steps sliding (in contact, faster than 1 mm/s)."""
    model = mujoco.MjModel.from_xml_string(puck_xml(*truth_vector()))
    data = mujoco.MjData(model)
    time_s = np.arange(int(round(DURATION / DT)) + 1) * DT
    force = sum(a * np.sin(2 * np.pi * f * time_s + p) for a, f, p in EXCITATION)[:, None]
    q, qd, sliding = np.empty((len(time_s), 2)), np.empty((len(time_s), 2)), np.zeros(len(time_s), bool)
    for k in range(len(time_s)):
        q[k], qd[k] = data.qpos, data.qvel
        data.ctrl[:] = force[k]
        mujoco.mj_step(model, data)
        sliding[k] = data.ncon > 0 and abs(data.qvel[0]) > 1e-3
    measured = q[:, :1].copy()
    if noisy:
        measured[1:] += np.random.default_rng(seed).normal(0.0, 1.0, measured[1:].shape) * noise * measured.std()
    return {"time": time_s, "torque": force, "q": q, "qd": qd, "measured": measured,
            "sliding_fraction": float(sliding.mean())}


def fit_puck_wpsim(run: dict, folder, device) -> dict:
    """``identify`` of the three parameters from the start file; the worst error (%), costs."""
    from wpsim.bench.mujoco_sysid import write_run_csv
    from wpsim.opt.sysid import identify

    robot, csv = folder / "puck_start.xml", folder / "puck_data.csv"
    robot.write_text(puck_xml(*start_values(), sensors=False))
    write_run_csv(csv, run, (JOINT,))
    cpu, wall = time.process_time(), time.perf_counter()
    result = identify(robot, csv, ["masses", "damping", "contact_friction"], iterations=60, progress=False,
                      device=device)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    values = result.fit.values()
    return {"error": _worst_error([values[f"{BODY}.mass"], values[f"{JOINT}.damping"], values[f"{BODY}.mu"]]),
            "rollouts": result.fit.rollouts, "gradients": result.fit.gradients,
            "iterations": len(result.fit.history) - 1, "cpu": cpu, "wall": wall,
            "message": str(result.fit.message), "verdict_ok": bool(result.verdict.ok)}


def fit_puck_mujoco(mujoco, sysid, run: dict) -> dict:
    """``mujoco.sysid.optimize`` of the three parameters from the start file; the same figures."""
    from wpsim.bench.mujoco_sysid import first_entry_modifier, mass_modifier, mujoco_fit

    spec = mujoco.MjSpec.from_string(puck_xml(*start_values()))
    mass, damping, mu = start_values()
    params = sysid.ParameterDict()
    params.add(sysid.Parameter(f"{BODY}.mass", mass, 0.1 * mass, 10.0 * mass,
                               modifier=mass_modifier(BODY, mass, np.array(spec.body(BODY).inertia))))
    params.add(sysid.Parameter(f"{JOINT}.damping", damping, 0.0, 5.0,
                               modifier=first_entry_modifier("joint", JOINT, "damping")))
    params.add(sysid.Parameter(f"{BODY}.mu", mu, 0.0, 5.0, modifier=first_entry_modifier("geom", GEOM, "friction")))
    fitted, out = mujoco_fit(mujoco, sysid, spec, params, run, "puck_contact")
    return {**out, "error": _worst_error([fitted[name].value[0] for name in (f"{BODY}.mass", f"{JOINT}.damping",
                                                                             f"{BODY}.mu")])}


def _worst_error(fitted) -> float:
    from wpsim.bench.mujoco_sysid import worst_error_percent

    return worst_error_percent(fitted, truth_vector())
