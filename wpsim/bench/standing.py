"""Standing robots against MuJoCo, the ``import_corpus`` suite's contact-on check: a robot file
with a free-floating base, a ground plane, a ``home`` keyframe and position servos on its
joints is started from that keyframe and held at its pose by the servos for ``HOLD_S`` s in
both simulators; the base height and the joint angles are compared at the end. MuJoCo runs
with the pyramidal friction cone wpsim's rows have and the file's other options
(``vs_mujoco.MujocoSide``); wpsim with the file's soft-constraint solve in float64
(``vs_mujoco.WpsimSide``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import warp as wp

HOLD_S = 2.0
"""s each side holds the keyframe's pose."""
HEIGHT_BOUND = 1.0e-3
"""m: the base heights agree within this (the issue's target)."""
JOINT_BOUND = 0.01
"""rad: the joint angles agree within this."""
KEYFRAME = "home"


def standing_robot(model) -> bool:
    """Whether a MuJoCo ``model`` is a standing robot: a plane on the world body, a ``home``
    keyframe, and position servos on joints, every one in the subtree of a body with a free
    joint (the robot's floating base, not a free object beside a fixed arm)."""
    import mujoco

    free_roots = {int(model.body_rootid[model.jnt_bodyid[j]]) for j in range(model.njnt)
                  if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE}
    servos = [a for a in range(model.nu) if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
              and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE]
    return (any(model.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE and model.geom_bodyid[g] == 0
                for g in range(model.ngeom))
            and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, KEYFRAME) >= 0
            and model.nu > 0 and len(servos) == model.nu
            and all(int(model.body_rootid[model.jnt_bodyid[model.actuator_trnid[a, 0]]]) in free_roots
                    for a in servos))


def standing_comparison(path: Path, device=None, seconds: float = HOLD_S) -> dict:
    """Both simulators' base height (m) and the largest joint-angle difference (rad) after
    ``seconds`` s held at the keyframe (see the module docstring), with their contact counts
    at the end and whether the two agree within ``HEIGHT_BOUND`` and ``JOINT_BOUND``."""
    from wpsim.bench.vs_mujoco import MujocoSide, WpsimSide

    path = Path(path)
    mjs = MujocoSide(path, keyframe=KEYFRAME)
    steps = int(round(seconds / mjs.dt))
    data = mjs.step_loop(steps)
    ws = WpsimSide(path, mjs)
    model, solver = ws.model(device, 1, dtype=wp.float64)
    state = model.state(requires_grad=False)
    solver.advance(state, ws.control(model), ws.dt, steps)
    q = state.joint_q.numpy()
    height = mjs.free_qpos[0] + 2
    ours, theirs = float(q[height]), float(data.qpos[height])
    joint_error = float(np.abs(q[mjs.hinge_qpos] - data.qpos[mjs.hinge_qpos]).max(initial=0.0))
    finite = bool(np.isfinite(q).all())
    return {"seconds": steps * mjs.dt, "base_height_m": ours, "mujoco_base_height_m": theirs,
            "mujoco_start_height_m": float(mjs.start_qpos[height]), "height_error_m": abs(ours - theirs),
            "joint_error_rad": joint_error, "contacts": solver.soft_contact.active_contacts(),
            "mujoco_contacts": int(data.ncon), "finite": finite,
            "agrees": finite and abs(ours - theirs) <= HEIGHT_BOUND and joint_error <= JOINT_BOUND}
