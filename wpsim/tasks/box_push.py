"""The box-push task: a three-link arm pushes a box over the ground to a goal pose.

The scene, built in code: a planar arm of three capsule links (0.25, 0.2 and 0.12 m, radius
15 mm, 500 kg/m^3, hinges about z at 5 cm above the ground, joint damping 0.05 N m s/rad,
armature 2e-3 kg m^2) and a 10 cm cube of 300 kg/m^3 (0.3 kg) on a free joint resting on
the ground; friction 0.3 everywhere. The arm touches the box, and the box the ground, only
through soft-constraint contact (time constant 0.02 s; gradients by the implicit adjoint).
float64, 10 ms steps, torques within +-1 N m held for 2 steps (plan steps of 20 ms).

State layout of one world (nx = 19): joint_q = arm angles (3, rad), box position (3, m),
box orientation quaternion (4, x y z w); joint_qd = arm rates (3, rad/s), box linear
velocity (3, m/s) and angular velocity (3, rad/s). The goal is a pose of the box on the
ground, (x, y, yaw); its cost weighs the position and the quaternion against the goal's
(for a flat box a quaternion error of e in z and w is a yaw error of about 2 e).
Success: the box's centre within 2 cm and its yaw within 0.1 rad of the goal.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.builder import ModelBuilder
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

LINKS = (0.25, 0.2, 0.12)  # m
LINK_RADIUS, BOX_HALF = 0.015, 0.05  # m
BOX_START = 0.4  # m, the box's nominal x
ALONG_X = (0.0, np.sin(np.pi / 4), 0.0, np.cos(np.pi / 4))  # turns a capsule's z axis onto x
DT, SUBSTEPS = 0.01, 2  # s, simulator steps per plan step
MAX_TORQUE = 1.0  # N m
NQ, NX, NU = 10, 19, 3
BOX_XY, BOX_QUAT, BOX_VEL = slice(3, 5), slice(6, 10), slice(13, 19)
SUCCESS_M, SUCCESS_RAD = 0.02, 0.1


def scene() -> ModelBuilder:
    """One arm and box (see the module docstring)."""
    b = ModelBuilder()
    b.add_ground_plane(mu=0.3)
    parent, offset = -1, (0.0, 0.0, BOX_HALF)
    for length in LINKS:
        link = b.add_body()
        b.add_shape_capsule(link, pos=(length / 2, 0.0, 0.0), rot=ALONG_X, radius=LINK_RADIUS,
                            half_height=length / 2, density=500.0, mu=0.3)
        b.add_joint_revolute(parent, link, axis=(0.0, 0.0, 1.0), parent_pos=offset, damping=0.05, armature=2e-3)
        parent, offset = link, (length, 0.0, 0.0)
    box = b.add_body()
    b.add_shape_box(box, hx=BOX_HALF, hy=BOX_HALF, hz=BOX_HALF, density=300.0, mu=0.3)
    b.add_joint_free(box, pos=(BOX_START, 0.0, BOX_HALF))
    return b


def arm_angles(tip: np.ndarray) -> np.ndarray:
    """Joint angles (3,) rad that put the fingertip at ``tip`` (2,) m with the last link along +x."""
    l1, l2, l3 = LINKS
    wrist = np.asarray(tip, dtype=np.float64) - np.array([l3, 0.0])
    elbow = np.arccos(np.clip((wrist @ wrist - l1 * l1 - l2 * l2) / (2 * l1 * l2), -1.0, 1.0))
    shoulder = np.arctan2(wrist[1], wrist[0]) - np.arctan2(l2 * np.sin(elbow), l1 + l2 * np.cos(elbow))
    return np.array([shoulder, elbow, -shoulder - elbow])


def yaw_of(quaternions: np.ndarray) -> np.ndarray:
    """Yaw (rad) about z of (..., 4) quaternions (x, y, z, w)."""
    x, y, z, w = np.moveaxis(np.asarray(quaternions), -1, 0)
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def goal_pose_state(goals: np.ndarray) -> np.ndarray:
    """(W, nx) target states of goal poses (W, 3) = (x m, y m, yaw rad): the box resting there."""
    target = np.zeros((len(goals), NX))
    target[:, BOX_XY] = goals[:, :2]
    target[:, 5] = BOX_HALF
    target[:, 8], target[:, 9] = np.sin(goals[:, 2] / 2), np.cos(goals[:, 2] / 2)
    return target


def initial_states(count: int, seed: int) -> tuple:
    """(x0 (count, nx), goals (count, 3)): the box at rest near x = 0.4 m (y within +-3 cm),
    the fingertip on the middle of its -x face (+-2 cm), the arm at rest; the goal 5-10 cm
    onward in x, +-3 cm in y, turned by +-0.25 rad."""
    rng = np.random.default_rng(seed)
    x0, goals = np.zeros((count, NX)), np.zeros((count, 3))
    for i in range(count):
        y = rng.uniform(-0.03, 0.03)
        tip = np.array([BOX_START - BOX_HALF - LINK_RADIUS + 5e-4, y + rng.uniform(-0.02, 0.02)])
        x0[i, :3] = arm_angles(tip)
        x0[i, 3:6] = BOX_START, y, BOX_HALF - 1e-4
        x0[i, 9] = 1.0
        goals[i] = BOX_START + rng.uniform(0.05, 0.10), y + rng.uniform(-0.03, 0.03), rng.uniform(-0.25, 0.25)
    return x0, goals


def planar_pose_errors(xy: np.ndarray, quaternions: np.ndarray, goals: np.ndarray) -> tuple:
    """(position error m, yaw error rad) of bodies at xy (W, 2) m with orientations (W, 4)
    against goal poses (W, 3) = (x m, y m, yaw rad)."""
    turn = yaw_of(quaternions) - goals[:, 2]
    return np.linalg.norm(xy - goals[:, :2], axis=1), np.abs(np.arctan2(np.sin(turn), np.cos(turn)))


def box_errors(states: np.ndarray, goals: np.ndarray) -> tuple:
    """(position error m, yaw error rad) of the box in states (W, nx) against goals (W, 3)."""
    return planar_pose_errors(states[:, BOX_XY], states[:, BOX_QUAT], goals)


def succeeded(states: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """(W,) bool: the box within 2 cm and 0.1 rad of its goal in states (W, nx)."""
    position, yaw = box_errors(states, goals)
    return (position < SUCCESS_M) & (yaw < SUCCESS_RAD)


def push_cost(goals: np.ndarray) -> TrajectoryCost:
    """Running: 1 m^-2 on the box's position, 0.5 on its quaternion, 1e-3 on every rate;
    terminal: 2000 m^-2 on the position, 400 on the quaternion, 1 on the box's velocities;
    effort 0.1 (N m)^-2, smoothness 1 (N m)^-2."""
    running, terminal = np.zeros(NX), np.zeros(NX)
    running[BOX_XY], running[BOX_QUAT], running[NQ:] = 1.0, 0.5, 1e-3
    terminal[BOX_XY], terminal[BOX_QUAT], terminal[BOX_VEL] = 2000.0, 400.0, 1.0
    return TrajectoryCost(target=goal_pose_state(goals)[:, None, :], running=running, terminal=terminal,
                          effort=np.full(NU, 0.1), smoothness=np.full(NU, 1.0))


def make_problem(x0: np.ndarray, goals: np.ndarray, steps: int, device=None, jacobian_worlds: int = 256,
                 contact: SoftContactOptions | None = None):
    """The plans of ``steps`` plan steps from x0 (W, nx) to the goal poses (W, 3); ``contact``:
    the soft-contact settings (default: time constant 0.02 s)."""
    options = SoftContactOptions(time_constant=0.02) if contact is None else contact
    return TrajectoryProblem(scene(), x0, steps, SUBSTEPS, DT, actuated=[0, 1, 2], lower=-MAX_TORQUE,
                             upper=MAX_TORQUE, cost=push_cost(goals), device=device, dtype=wp.float64,
                             jacobian_worlds=jacobian_worlds,
                             make_solver=lambda model: SemiImplicitSolver(model, soft_contact=options))
