"""The planar 3-hinge arm of the ``vs_mujoco_sysid`` suite (cases ``arm3_planar``,
``arm3_friction``, and with servos ``arm3_servo``): its true values, the wrong start both tools
fit from, its MJCF and its MuJoCo-made runs."""

from __future__ import annotations

import numpy as np

from wpsim.bench.mujoco_sysid import worst_error_percent as relative_error

JOINTS = ("j1", "j2", "j3")
BODIES = ("link1", "link2", "link3")
TRUTH = {"mass": (1.2, 0.8, 0.5), "damping": (0.2, 0.15, 0.1), "armature": (0.01, 0.008, 0.005)}
"""The true values: kg, N m s/rad, kg m^2 per link / hinge."""
START = {"mass": 0.6, "damping": 0.3, "armature": 0.0, "friction": 0.0}
"""The wrong start: factors of the true values."""
FRICTION = (0.3, 0.2, 0.1)
"""The true dry friction (MuJoCo's frictionloss, N m) of the hinges in case ``arm3_friction``."""
INERTIA = ((0.01, 0.01, 0.001), (0.0045, 0.0045, 0.0006), (0.0018, 0.0018, 0.0003))
"""Diagonal inertias (kg m^2) of the links at the true masses."""
DT, DURATION, NOISE, NOISE_SEED = 0.002, 2.5, 0.01, 3
Q0 = (0.2, -0.3, 0.4)
EXCITATION = (((3.0, 0.7, 0.0), (1.5, 2.3, 0.4)), ((1.5, 1.1, 1.0), (0.7, 3.1, 0.0)),
              ((0.6, 1.7, 2.0), (0.3, 4.3, 0.5)))
"""Per hinge, (amplitude N m, frequency Hz, phase rad) of each sine of its torque."""

def arm_xml(mass, damping, armature, sensors: bool = True, friction=(0.0, 0.0, 0.0), stiffness=(0.0, 0.0, 0.0)) -> str:
    """The planar arm's MJCF with these link masses (inertias scaled with them), joint
    dampings, armatures, dry frictions (frictionloss, N m) and spring stiffnesses (N m/rad,
    about 0 rad) (and ``jointpos`` sensors of the hinges, which MuJoCo's fit reads)."""
    links, close = [], []
    lengths = (0.3, 0.25, 0.2)
    for i, (body, joint) in enumerate(zip(BODIES, JOINTS)):
        scale = mass[i] / TRUTH["mass"][i]
        inertia = " ".join(f"{v * scale:.17g}" for v in INERTIA[i])
        pos = "0 0 1" if i == 0 else f"0 0 -{lengths[i - 1]}"
        links.append(f'<body name="{body}" pos="{pos}"><joint name="{joint}" type="hinge" axis="0 1 0" '
                     f'damping="{damping[i]:.17g}" armature="{armature[i]:.17g}" frictionloss="{friction[i]:.17g}" '
                     f'stiffness="{stiffness[i]:.17g}"/>'
                     f'<inertial pos="0 0 -{lengths[i] / 2}" mass="{mass[i]:.17g}" diaginertia="{inertia}"/>'
                     f'<geom type="capsule" size="0.02" fromto="0 0 0 0 0 -{lengths[i]}" contype="0" '
                     f'conaffinity="0"/>')
        close.append("</body>")
    motors = "".join(f'<motor name="m_{j}" joint="{j}"/>' for j in JOINTS)
    sensors = "".join(f'<jointpos name="q_{j}" joint="{j}"/>' for j in JOINTS) if sensors else ""
    return (f'<mujoco model="arm3_planar"><compiler angle="radian"/><option timestep="{DT}" gravity="0 0 -9.81"/>'
            f'<worldbody>{"".join(links)}{"".join(close)}</worldbody><actuator>{motors}</actuator>'
            f'<sensor>{sensors}</sensor></mujoco>')


def start_xml(sensors: bool = True, friction: bool = False) -> str:
    """The arm's MJCF at the wrong start (``START``); ``friction``: with dry friction (from
    START's factor of ``FRICTION``)."""
    return arm_xml(*(tuple(v * START[k] for v in TRUTH[k]) for k in ("mass", "damping", "armature")), sensors,
                   tuple(v * START["friction"] for v in FRICTION) if friction else (0.0, 0.0, 0.0))


def truth_vector(friction: bool = False) -> np.ndarray:
    """The 9 true values in the order masses, dampings, armatures (and the 3 frictions)."""
    return np.array([*TRUTH["mass"], *TRUTH["damping"], *TRUTH["armature"], *(FRICTION if friction else ())])


def simulate(mujoco, model, data, ctrl: np.ndarray) -> tuple:
    """(angles, rates) (len(ctrl), nq) of MuJoCo stepping ``data`` under one row of ``ctrl`` per
    step, each recorded before its step."""
    q, qd = np.empty((len(ctrl), model.nq)), np.empty((len(ctrl), model.nv))
    for k in range(len(ctrl)):
        q[k], qd[k] = data.qpos, data.qvel
        data.ctrl[:] = ctrl[k]
        mujoco.mj_step(model, data)
    return q, qd


def worst_error_percent(fitted, truth=None) -> float:
    """The worst relative error (%) of ``fitted`` against ``truth`` (default the 9 true values)."""
    return relative_error(fitted, truth_vector() if truth is None else truth)


def make_data(mujoco, noisy: bool, friction: bool = False, xml: str | None = None, q0=Q0, gains=(1.0, 1.0, 1.0),
              duration: float = DURATION) -> dict:
    """The true arm's run (``friction``: with ``FRICTION``; ``xml``: this arm's file instead)
    of ``duration`` s from the angles ``q0`` (rad) under ``EXCITATION`` scaled by ``gains``
    (one per hinge): times, torques (steps + 1, 3) (the last row unused), angles and rates
    (steps + 1, 3) and the angles as measured (with noise after the first sample)."""
    if xml is None:
        xml = arm_xml(TRUTH["mass"], TRUTH["damping"], TRUTH["armature"],
                      friction=FRICTION if friction else (0.0, 0.0, 0.0))
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    steps = int(round(duration / DT))
    time_s = np.arange(steps + 1) * DT
    torque = np.stack([g * sum(a * np.sin(2 * np.pi * f * time_s + p) for a, f, p in hinge)
                       for g, hinge in zip(gains, EXCITATION)], 1)
    data.qpos[:] = q0
    q, qd = simulate(mujoco, model, data, torque)
    measured = q.copy()
    if noisy:
        rng = np.random.default_rng(NOISE_SEED)
        measured[1:] += rng.normal(0.0, 1.0, (steps, 3)) * NOISE * q.std(axis=0)
    return {"time": time_s, "torque": torque, "q": q, "qd": qd, "measured": measured}
