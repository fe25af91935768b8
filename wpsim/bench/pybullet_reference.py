"""pybullet as the reference for URDF import (suite ``import_corpus``): the same file rolled
out by pybullet and by wpsim (semi-implicit Euler, both) from the same perturbed initial
state, with contact, joint limits, damping and pybullet's joint-speed clamp off, the base
fixed. Needs ``pybullet``.

Both sides read one copy of the file (``comparable_copy``, in a temporary folder): limits
moved out of reach (+-1e6; pybullet refuses a prismatic joint without limits), floating
joints welded (pybullet welds them), mesh paths made absolute. pybullet's defaults that would otherwise differ are
switched off: link damping (0.04), the velocity motors every joint starts with, and the
100 rad/s joint-speed clamp. A joint's ``<dynamics friction>``, which pybullet reads but does not
apply (pendulum5.urdf: 0.95 rad apart with it on wpsim's side, 6.6e-14 without), is off on
wpsim's side too.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import warp as wp

DT = 1.0 / 240.0
"""s, pybullet's default time step, used on both sides."""
FAR_LIMIT = 1.0e6
"""rad or m: the joint limits of the compared copy, never reached."""


def comparable_copy(path: Path, folder: Path) -> Path:
    """A copy of the URDF at ``path`` in ``folder`` that both simulators read alike: joint
    limits at +-``FAR_LIMIT`` (added where missing), floating joints welded, every mesh file
    name (relative, ``package://``, ``file://``) resolved to an absolute path as wpsim
    resolves it."""
    import xml.etree.ElementTree as ET

    from wpsim.io.scene_parsing import parse_xml
    from wpsim.io.urdf import package_search_path, resolve_mesh_uri

    root = parse_xml(path, "robot")
    for joint in root.iter("joint"):  # far bounds: pybullet refuses a prismatic joint without limits
        if joint.get("type") == "floating":  # pybullet welds these, and the base is fixed on both sides
            joint.set("type", "fixed")
        if joint.get("type") in ("revolute", "prismatic") and joint.find("limit") is None:
            ET.SubElement(joint, "limit", effort="0", velocity="0")
    for limit in root.iter("limit"):
        limit.set("lower", f"{-FAR_LIMIT:g}")
        limit.set("upper", f"{FAR_LIMIT:g}")
    for link in root.iter("link"):
        for mesh in link.iter("mesh"):
            if mesh.get("filename"):
                mesh.set("filename", str(resolve_mesh_uri(path, link, mesh.get("filename"), package_search_path())))

    copy = folder / path.name
    ET.ElementTree(root).write(copy)
    return copy


def _pybullet_rollout(path: Path, steps: int, q0: np.ndarray, qd0: np.ndarray) -> tuple:
    """(joint names, (steps, n) joint positions) of pybullet's rollout of ``path``."""
    import pybullet

    client = pybullet.connect(pybullet.DIRECT)
    try:
        p = {"physicsClientId": client}
        pybullet.setGravity(0.0, 0.0, -9.81, **p)
        pybullet.setTimeStep(DT, **p)
        robot = pybullet.loadURDF(str(path), useFixedBase=True, flags=pybullet.URDF_USE_INERTIA_FROM_FILE, **p)
        count = pybullet.getNumJoints(robot, **p)
        infos = [pybullet.getJointInfo(robot, j, **p) for j in range(count)]
        moving = [j for j in range(count) if infos[j][2] in (pybullet.JOINT_REVOLUTE, pybullet.JOINT_PRISMATIC)]
        for link in range(-1, count):
            pybullet.changeDynamics(robot, link, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0, **p)
            pybullet.setCollisionFilterGroupMask(robot, link, 0, 0, **p)
        for j in moving:
            pybullet.changeDynamics(robot, j, maxJointVelocity=1.0e6, **p)
        pybullet.setJointMotorControlArray(robot, moving, pybullet.VELOCITY_CONTROL, forces=[0.0] * len(moving), **p)
        for j, q, qd in zip(moving, q0[: len(moving)], qd0[: len(moving)]):
            pybullet.resetJointState(robot, j, float(q), float(qd), **p)
        out = np.zeros((steps, len(moving)))
        for k in range(steps):
            pybullet.stepSimulation(**p)
            out[k] = [pybullet.getJointState(robot, j, **p)[0] for j in moving]
        return [infos[j][1].decode() for j in moving], out
    finally:
        pybullet.disconnect(client)


def urdf_rollouts(path, steps: int, seed: int = 0) -> tuple:
    """(wpsim (steps, n), pybullet (steps, n), initial positions (n,)) of the revolute and
    prismatic joints of the URDF at ``path`` (fixed base) from positions moved by up to 0.3
    and velocities up to 0.5, contact, limits and damping off (see the module docstring)."""
    from wpsim.io.urdf import import_urdf
    from wpsim.solvers import SemiImplicitSolver

    path = Path(path)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="wpsim_pybullet_") as folder:
        copy = comparable_copy(path, Path(folder))
        q0, qd0 = 0.3 * rng.uniform(-1.0, 1.0, 256), 0.5 * rng.uniform(-1.0, 1.0, 256)
        names, theirs = _pybullet_rollout(copy, steps, q0, qd0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # what is not honoured is reported by the caller
            builder, scene = import_urdf(copy, ke=0.0, kd=0.0, drive_ke=0.0, drive_kd=0.0)
    builder.joint_dofs.array("joint_damping")[:] = 0.0
    builder.joint_dofs.array("joint_friction")[:] = 0.0  # pybullet reads a URDF's joint friction, applies none
    missing = [name for name in names if name not in scene.joints]
    if missing:
        raise ValueError(f"{path}: pybullet's joints {missing} are not wpsim joints")
    model = builder.finalize(dtype=wp.float64)
    coords = np.array([model.joint_q_start.numpy()[scene.joints[n]] for n in names], dtype=np.int64)
    dofs = np.array([model.joint_qd_start.numpy()[scene.joints[n]] for n in names], dtype=np.int64)
    state, spare = model.state(), model.state()
    q, qd = state.joint_q.numpy(), state.joint_qd.numpy()
    q[coords], qd[dofs] = q0[: len(names)], qd0[: len(names)]
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    solver = SemiImplicitSolver(model)
    ours = np.zeros_like(theirs)
    for k in range(steps):
        solver.step(state, spare, None, DT)
        state, spare = spare, state
        ours[k] = state.joint_q.numpy()[coords]
    return ours, theirs, q0[: len(names)]
