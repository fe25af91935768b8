"""Case ``arm6_full_inertia`` of the ``vs_mujoco_sysid`` suite: the full inertial parameters
(mass, centre of mass, rotational inertia: 10 per body, 60 in all) of a 6-hinge arm, fitted by
``wpsim sysid --fit inertia`` and by ``mujoco.sysid`` (its pseudo-inertia parameters) to the
same MuJoCo-made data from the same wrong start.

The arm: six links hanging 0.2 m apart along -z, hinges about z, y, y, x, y, x, every centre
of mass off its hinge axis and every inertia with products, joint damping known (not fitted); 2.5 s
at 2 ms driven by two sines per hinge. The start: masses x0.7, centres of mass 2 cm further
down the link, principal moments x1.3. A serial arm's joint angles determine only some
combinations of its 60 inertial parameters (its base parameters), so a parameter-by-parameter
error means nothing here: each tool fits the first ``FIT_S`` seconds and its fitted model
then predicts all ``DURATION_S`` seconds in its own simulator; the figure of accuracy is the
RMS joint-angle error of that prediction (rad).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

BODIES = tuple(f"seg{i}" for i in range(1, 7))
JOINTS = tuple(f"a{i}" for i in range(1, 7))
AXES = ("0 0 1", "0 1 0", "0 1 0", "1 0 0", "0 1 0", "1 0 0")
MASS = (2.0, 1.6, 1.2, 0.8, 0.5, 0.3)
"""True link masses (kg)."""
COM = ((0.02, 0.01, -0.1), (-0.015, 0.02, -0.09), (0.01, 0.015, -0.11), (0.02, -0.02, -0.08), (-0.01, 0.01, -0.1),
       (0.015, 0.02, -0.05))
"""True centres of mass (m) in each link's frame."""
PRINCIPAL = ((0.012, 0.02, 0.016), (0.008, 0.014, 0.011), (0.005, 0.009, 0.007), (0.003, 0.005, 0.004),
             (0.0015, 0.0025, 0.002), (0.0008, 0.0012, 0.001))
"""True principal moments (kg m^2) about each centre of mass; products come from ``ROTATION``."""
ROTATION = ((0.3, 0.2, 0.1), (-0.2, 0.25, 0.15), (0.1, -0.3, 0.2), (0.25, 0.1, -0.2), (-0.15, 0.2, 0.3),
            (0.2, -0.1, 0.25))
"""Small rotations (rad, as a rotation vector) of each link's principal axes."""
DAMPING = 0.05  # N m s/rad, every hinge, known
DT, DURATION_S, FIT_S = 0.002, 2.5, 1.5
Q0 = (0.3, -0.4, 0.5, 0.2, -0.3, 0.4)
EXCITATION = ((0.3, 0.6), (3.0, 0.9), (2.0, 1.3), (0.5, 1.7), (0.4, 2.1), (0.12, 2.6))
"""Per hinge, (amplitude N m, base frequency Hz): torque a sin(2 pi f t + i) + a/2 sin(2 pi 2.3 f t)."""
START = {"mass": 0.7, "com_shift": 0.02, "moments": 1.3}


def _inertia(i: int, moments_scale: float = 1.0) -> np.ndarray:
    """(3, 3) inertia (kg m^2) of link ``i`` about its centre of mass."""
    from scipy.spatial.transform import Rotation

    R = Rotation.from_rotvec(ROTATION[i]).as_matrix()
    return R @ np.diag(np.array(PRINCIPAL[i]) * moments_scale) @ R.T


def arm6_xml(start: bool = False) -> str:
    """The arm's MJCF (true values, or the wrong start), ``jointpos`` sensors and motors."""
    links = []
    for i, (body, joint) in enumerate(zip(BODIES, JOINTS)):
        mass = MASS[i] * (START["mass"] if start else 1.0)
        com = np.array(COM[i]) - ((0.0, 0.0, START["com_shift"]) if start else 0.0)
        I = _inertia(i, START["moments"] if start else 1.0)  # noqa: E741
        full = " ".join(f"{v:.17g}" for v in (I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]))
        pos = "0 0 1.5" if i == 0 else "0 0 -0.2"
        links.append(f'<body name="{body}" pos="{pos}"><joint name="{joint}" type="hinge" axis="{AXES[i]}" '
                     f'damping="{DAMPING}"/><inertial pos="{" ".join(f"{c:.17g}" for c in com)}" '
                     f'mass="{mass:.17g}" fullinertia="{full}"/><geom type="capsule" size="0.02" '
                     f'fromto="0 0 0 0 0 -0.2" contype="0" conaffinity="0"/>')
    motors = "".join(f'<motor name="m_{j}" joint="{j}"/>' for j in JOINTS)
    sensors = "".join(f'<jointpos name="q_{j}" joint="{j}"/>' for j in JOINTS)
    return (f'<mujoco model="arm6"><option timestep="{DT}" gravity="0 0 -9.81"/><worldbody>{"".join(links)}'
            f'{"</body>" * len(BODIES)}</worldbody><actuator>{motors}</actuator><sensor>{sensors}</sensor></mujoco>')


def simulate_mujoco(mujoco, model, run: dict) -> np.ndarray:
    """(steps + 1, 6) joint angles of ``model`` under ``run``'s torques from its first state."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = run["q"][0], run["qd"][0]
    q = np.empty_like(run["q"])
    for k in range(len(q)):
        q[k] = data.qpos
        data.ctrl[:] = run["torque"][k]
        mujoco.mj_step(model, data)
    return q


def make_arm6_data(mujoco) -> dict:
    """The true arm's run by MuJoCo: times, torques, angles, rates (and the angles as measured)."""
    time_s = np.arange(int(round(DURATION_S / DT)) + 1) * DT
    torque = np.stack([a * np.sin(2 * np.pi * f * time_s + i) + 0.5 * a * np.sin(2 * np.pi * 2.3 * f * time_s)
                       for i, (a, f) in enumerate(EXCITATION)], axis=1)
    model = mujoco.MjModel.from_xml_string(arm6_xml())
    data = mujoco.MjData(model)
    data.qpos[:] = Q0
    q, qd = np.empty((len(time_s), 6)), np.empty((len(time_s), 6))
    for k in range(len(time_s)):
        q[k], qd[k] = data.qpos, data.qvel
        data.ctrl[:] = torque[k]
        mujoco.mj_step(model, data)
    return {"time": time_s, "torque": torque, "q": q, "qd": qd, "measured": q}


def fit_wpsim(run: dict, folder: Path, device) -> dict:
    """``identify(..., ["inertia"])`` on the first ``FIT_S`` s from the start file; the RMS (rad)
    of the fit and of the fitted model's prediction of the whole run; costs."""
    from wpsim.bench.mujoco_sysid import write_run_csv
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.replays import MeasuredReplay
    from wpsim.opt.sysid import identify, prepare_run

    robot, csv = folder / "arm6_start.xml", folder / "arm6_data.csv"
    robot.write_text(arm6_xml(start=True))
    write_run_csv(csv, run, JOINTS)
    cpu, wall = time.process_time(), time.perf_counter()
    result = identify(robot, csv, ["inertia"], iterations=60, duration=FIT_S, progress=False, device=device)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    builder, scene = import_robot(robot)
    whole = prepare_run(builder, scene, load_trajectory(csv), None, None, device)
    for name in ("body_mass", "body_com", "body_inertia"):
        getattr(whole.model, name).assign(getattr(result.run.model, name).numpy())
    predicted = MeasuredReplay(whole).angles()[:, 0]
    return {"fit_rms": result.rms(result.simulated_after), "predict_rms": whole.rms(predicted),
            "rollouts": result.fit.rollouts, "iterations": len(result.fit.history) - 1, "cpu": cpu, "wall": wall,
            "message": str(result.fit.message)}


def _principal_axes_modifier(mujoco, body: str):
    """A spec modifier writing a pseudo-inertia parameter (log-Cholesky theta, the same
    coordinates as ``wpsim.opt.inertia``) into ``body`` as mass, centre of mass, principal
    moments and axes. The toolbox's own modifier writes a full inertia, which MuJoCo 4.0.1's
    compiler refuses ("mass and inertia of moving bodies must be larger than mjMINVAL")."""
    from wpsim.opt.inertia import from_log_cholesky

    def modify(spec, param):
        mass, com, inertia = from_log_cholesky(param.value)
        moments, axes = np.linalg.eigh(inertia)
        axes[:, 2] *= np.sign(np.linalg.det(axes))  # a rotation
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, axes.ravel())
        target = spec.body(body)
        target.explicitinertial = True
        target.mass, target.ipos, target.inertia, target.iquat = mass, com, moments, quat
        target.fullinertia = np.full(6, np.nan)

    return modify


def fit_mujoco(mujoco, sysid, run: dict) -> dict:
    """``mujoco.sysid.optimize`` of each link's pseudo-inertia (``body_inertia_param``, 10
    parameters, the toolbox's default bounds; ``_principal_axes_modifier``) on the first
    ``FIT_S`` s; the same figures."""
    from wpsim.bench.mujoco_sysid import mujoco_fit

    spec = mujoco.MjSpec.from_string(arm6_xml(start=True))
    model = spec.compile()
    params = sysid.ParameterDict()
    for body in BODIES:
        params.add(sysid.body_inertia_param(spec, model, body, inertia_type=sysid.InertiaType.Pseudo,
                                            modifier=_principal_axes_modifier(mujoco, body)))
    steps = int(round(FIT_S / DT))
    fitted, out = mujoco_fit(mujoco, sysid, spec, params, run, "arm6_full_inertia", steps)
    fitted_model = sysid.apply_param_modifiers(fitted, spec)
    predicted = simulate_mujoco(mujoco, fitted_model, run)
    rms = lambda q: float(np.sqrt(np.mean((q - run["q"][:len(q)]) ** 2)))  # noqa: E731
    return {**out, "fit_rms": rms(predicted[:steps + 1]), "predict_rms": rms(predicted)}
