"""Regenerate the "measured" robot trajectories of this folder with MuJoCo (run from the
repository root: ``python assets/make_sysid_data.py``; needs ``pip install mujoco``).

The 2-link arm of ``arm_2link.xml`` is given other link masses (inertias scaled with them,
as a change of density would), joint damping and armature than its file says, driven by
a sum-of-sines excitation torque on both joints from rest at q0, and stepped by MuJoCo at
the file's time step. Every row holds the time, both joint angles and rates at that time
and the torques applied over the following step. ``arm_2link_sysid.csv`` is exact;
``arm_2link_sysid_noisy.csv`` adds Gaussian noise of 1 % of each channel's standard
deviation to the angles and rates (the torques are the commanded ones). The true values
go to ``arm_2link_sysid_truth.json``. ``arm_model`` and ``run_arm`` (the MuJoCo arm and its
stepping) are shared with ``make_friction_data.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from wpsim.io.files import write_json
from wpsim.io.measurements import save_trajectory

HERE = Path(__file__).resolve().parent
DURATION = 2.0  # s
Q0 = (0.3, -0.2)  # rad
TRUTH = {
    "link1.mass": 1.3, "link2.mass": 0.4,  # kg (the file: 1.0 and 0.5)
    "link1_joint.damping": 0.12, "link2_joint.damping": 0.08,  # N m s/rad (the file: 0.05)
    "link1_joint.armature": 0.02, "link2_joint.armature": 0.01,  # kg m^2 (the file: 0)
}
EXCITATION = {  # joint -> [(amplitude N m, frequency Hz, phase rad)]
    "link1_joint": [(2.0, 1.3, 0.0), (1.0, 3.1, 0.5)],
    "link2_joint": [(0.8, 1.9, 1.0), (0.4, 4.3, 0.0)],
}
NOISE = 0.01  # of each channel's standard deviation
JOINTS = tuple(EXCITATION)


def excitation(joint: str, t: np.ndarray) -> np.ndarray:
    """Torque (N m) on ``joint`` at times ``t`` (s)."""
    return sum(a * np.sin(2.0 * np.pi * f * t + p) for a, f, p in EXCITATION[joint])


def arm_model(truth: dict, frictionloss: dict | None = None):
    """MuJoCo model of ``arm_2link.xml`` with the link masses of ``truth`` (inertias scaled
    with them), its joint damping (N m s/rad) and armature (kg m^2), and optionally a
    Coulomb friction torque (N m, MuJoCo's ``dof_frictionloss``) per joint name."""
    import mujoco

    mj = mujoco.MjModel.from_xml_path(str(HERE / "arm_2link.xml"))
    for body in ("link1", "link2"):
        b = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, body)
        scale = truth[f"{body}.mass"] / mj.body_mass[b]
        mj.body_mass[b] *= scale
        mj.body_inertia[b] *= scale
    for joint in JOINTS:
        dof = mj.jnt_dofadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, joint)]
        mj.dof_damping[dof] = truth[f"{joint}.damping"]
        mj.dof_armature[dof] = truth[f"{joint}.armature"]
        if frictionloss is not None:
            mj.dof_frictionloss[dof] = frictionloss[joint]
    return mj


def run_arm(mj, q0, qd0, torques: np.ndarray, every: int = 1) -> tuple:
    """Step the MuJoCo arm ``mj`` from angles ``q0`` (rad) and rates ``qd0`` (rad/s) with
    row k of ``torques`` (steps + 1, joints) N m applied over step k; (time (N,) s, columns
    in the ``wpsim.io.measurements`` names) at every ``every``-th step."""
    import mujoco

    data = mujoco.MjData(mj)
    data.qpos[:] = q0
    data.qvel[:] = qd0
    q, qd = [], []
    for k in range(len(torques)):
        q.append(data.qpos.copy())
        qd.append(data.qvel.copy())
        data.ctrl[:] = torques[k]
        mujoco.mj_step(mj, data)
    rows = slice(None, None, every)
    time = (np.arange(len(torques)) * mj.opt.timestep)[rows]
    q, qd, torques = np.array(q)[rows], np.array(qd)[rows], np.asarray(torques)[rows]
    columns = {}
    for j, joint in enumerate(JOINTS):
        columns[f"q:{joint}"] = q[:, j]
        columns[f"qd:{joint}"] = qd[:, j]
        columns[f"tau:{joint}"] = torques[:, j]
    return time, columns


def simulate():
    """(time (N,), columns) of the arm with the true parameters under the excitation."""
    mj = arm_model(TRUTH)
    steps = int(round(DURATION / mj.opt.timestep))
    time = np.arange(steps + 1) * mj.opt.timestep
    torques = np.stack([excitation(joint, time) for joint in JOINTS], axis=1)
    return run_arm(mj, Q0, (0.0, 0.0), torques)


def main():
    time, columns = simulate()
    save_trajectory(HERE / "arm_2link_sysid.csv", time, columns)
    rng = np.random.default_rng(7)
    noisy = {name: values + (rng.normal(0.0, NOISE * values.std(), values.shape) if not name.startswith("tau") else 0.0)
             for name, values in columns.items()}
    save_trajectory(HERE / "arm_2link_sysid_noisy.csv", time, noisy)
    write_json(HERE / "arm_2link_sysid_truth.json", {"robot": "arm_2link.xml", "parameters": TRUTH,
                                                    "noise": {"arm_2link_sysid_noisy.csv": NOISE}})
    print(f"wrote {len(time)} samples ({time[-1]:g} s) to arm_2link_sysid.csv and arm_2link_sysid_noisy.csv; "
          f"truth: {json.dumps(TRUTH)}")


if __name__ == "__main__":
    main()
