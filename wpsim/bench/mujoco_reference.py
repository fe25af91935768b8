"""MuJoCo as the reference for MJCF import (the tests and suite ``import_corpus``): the same
file rolled out by MuJoCo (contact off; Euler, or implicitfast where the file asks for it:
both then step as wpsim's semi-implicit Euler, whose drive damping is implicit like
implicitfast's) and by wpsim with the file's soft-constraint solve (``wpsim run``'s: joint
limits, dry friction and equalities as its rows) from the same perturbed initial state, joint
coordinates in MuJoCo's qpos layout (quaternions w x y z). Needs ``mujoco``."""

import warnings
from contextlib import contextmanager

import numpy as np
import warp as wp

from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

_QPOS = {0: 7, 1: 4}  # MuJoCo joint type -> coordinates (free, ball); hinge and slide have 1
_QVEL = {0: 6, 1: 3}


def _quat_last(coords, count: int, shift: int) -> np.ndarray:
    """A joint's coordinates with its quaternion (the last 4 of a free or ball joint) rolled
    by ``shift`` (-1: w x y z -> x y z w, 1: back)."""
    coords = np.array(coords, dtype=np.float64)
    if count >= 4:
        coords[-4:] = np.roll(coords[-4:], shift)
    return coords


@contextmanager
def mujoco_warnings_kept(heard: list | None = None):
    """Inside the block MuJoCo's warnings (compiler notes, "the simulation is unstable") go to
    ``heard`` instead of MUJOCO_LOG.TXT in the working directory."""
    import mujoco

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning((heard if heard is not None else []).append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def load_mujoco(path):
    """MuJoCo's model of ``path`` (its compiler warnings kept out of the working directory)."""
    import mujoco

    with mujoco_warnings_kept():
        return mujoco.MjModel.from_xml_path(str(path))


def rollouts(path, steps: int, seed: int = 0, limits: bool = False) -> tuple:
    """(wpsim qpos (steps, nq), MuJoCo qpos (steps, nq), initial qpos) of ``path`` from qpos0
    with hinges and slides moved by up to 0.1 and every velocity up to 0.5, contact off in
    both (and joint limits unless ``limits``), MuJoCo's solver run to convergence (tolerance 1e-14,
    at least 100 iterations whatever the file caps them at)."""
    import mujoco

    mj = load_mujoco(path)
    if mj.opt.integrator != mujoco.mjtIntegrator.mjINT_IMPLICITFAST:  # RK4 and implicit -> Euler
        mj.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    mj.opt.tolerance = 1e-14  # both solves converged: what is compared is the model, not the stopping rule
    mj.opt.iterations, mj.opt.ls_iterations = max(mj.opt.iterations, 100), max(mj.opt.ls_iterations, 50)  # nor its cap
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not limits:
        mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    rng = np.random.default_rng(seed)
    qpos, qvel = mj.qpos0.copy(), 0.5 * rng.uniform(-1.0, 1.0, mj.nv)
    for j in range(mj.njnt):
        if mj.jnt_type[j] in (2, 3):
            qpos[mj.jnt_qposadr[j]] += 0.1 * rng.uniform(-1.0, 1.0)
    data = mujoco.MjData(mj)
    data.qpos[:], data.qvel[:] = qpos, qvel
    theirs = []
    with mujoco_warnings_kept():
        for _ in range(steps):
            mujoco.mj_step(mj, data)
            theirs.append(data.qpos.copy())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what is not honoured is checked by the tests themselves
        builder, scene = import_mjcf(path, ke=0.0, kd=0.0)
    builder.shapes.array("shape_collision_type")[:] = 0  # contact off: no candidate pairs
    builder.shapes.array("shape_collision_mask")[:] = 0
    if not limits:
        builder.joint_dofs.array("joint_limit_lower")[:] = -1e30
        builder.joint_dofs.array("joint_limit_upper")[:] = 1e30
    model = builder.finalize(dtype=wp.float64)
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    q0, qd0 = model.state().joint_q.numpy().copy(), np.zeros(model.joint_dof_count)
    layout = []  # (MuJoCo qpos address, count, wpsim coordinate start)
    if len(scene.joints) != mj.njnt:
        raise ValueError(f"{path}: wpsim imported {len(scene.joints)} joints, MuJoCo {mj.njnt}")
    for k, joint in enumerate(scene.joints.values()):
        nq, nv = _QPOS.get(int(mj.jnt_type[k]), 1), _QVEL.get(int(mj.jnt_type[k]), 1)
        a, v = mj.jnt_qposadr[k], mj.jnt_dofadr[k]
        q0[q_start[joint]:q_start[joint] + nq] = _quat_last(qpos[a:a + nq], nq, -1)
        qd0[qd_start[joint]:qd_start[joint] + nv] = qvel[v:v + nv]
        layout.append((a, nq, q_start[joint]))
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**{**scene.contact_settings,
                                                                           "joint_limits": limits}))
    state, spare, control = model.state(), model.state(), model.control()
    state.joint_q.assign(q0)
    state.joint_qd.assign(qd0)
    ours = np.zeros((steps, mj.nq))
    for k in range(steps):
        solver.step(state, spare, control, mj.opt.timestep)
        state, spare = spare, state
        q = state.joint_q.numpy()
        for a, nq, s in layout:
            ours[k, a:a + nq] = _quat_last(q[s:s + nq], nq, 1)
    return ours, np.array(theirs), qpos
