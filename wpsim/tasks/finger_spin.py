"""The finger-spin task: a two-joint finger turns a hinged spinner to a target angle through
soft-constraint contact (a dm_control-style finger, built in code).

The scene, in the horizontal plane (every hinge about z, so gravity does no work): a finger
of two capsule links (0.2 m and 0.16 m, radius 15 mm, 500 kg/m^3, joint damping 0.02 N m
s/rad, armature 1e-3 kg m^2) on a base at the origin, and a spinner, one capsule bar of
0.24 m (radius 20 mm, 300 kg/m^3) on a hinge at (0.22, 0.12) m with damping 0.005 N m
s/rad. The finger touches the bar only through soft-constraint contact
(``SoftContactOptions``, time constant 0.05 s, its gradient by the implicit adjoint),
float64, 10 ms steps, the torques held for 2 steps (T = 30 plan steps, 0.6 s) and bounded
by +-0.1 N m. State (nx = 6): joint_q = finger angles (2, rad), spinner angle (rad);
joint_qd = their rates.

Each initial state puts the fingertip on the bar (at 6-10 cm from its hinge, the bar turned
by +-0.3 rad about its mean pose, the finger at rest) and asks for the bar turned onward by
0.6-1.0 rad. Cost: 50 rad^-2 (theta_T - target)^2 + 0.5 (spinner rate_T)^2 + 0.01 (finger
rates_T)^2, while moving 0.1 (theta - target)^2 + 1e-3 |rates|^2 per step, torque effort
1 (N m)^-2 u^2 and smoothness 5 (N m)^-2 (u_t - u_t-1)^2. Success: the bar within 0.1 rad
of its target at t = T.
"""

from __future__ import annotations

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

LINKS = (0.2, 0.16)  # m, finger links
FINGER_RADIUS, BAR_RADIUS, BAR_HALF = 0.015, 0.02, 0.12  # m
HINGE = np.array([0.22, 0.12])  # m, the spinner's axis in the plane
ALONG_X = (0.0, np.sin(np.pi / 4), 0.0, np.cos(np.pi / 4))  # turns a capsule's z axis onto x
DT, SUBSTEPS, STEPS = 0.01, 2, 30  # s, steps per plan step, plan steps
MAX_TORQUE = 0.1  # N m
SPINNER = 2  # index of the spinner's angle in the state (joint_q of finger, finger, spinner)
SUCCESS_RAD = 0.1


def scene() -> ModelBuilder:
    """One finger and spinner (see the module docstring)."""
    b = ModelBuilder()
    parent, offset = -1, 0.0
    for length in LINKS:
        link = b.add_body()
        b.add_shape_capsule(link, pos=(length / 2, 0.0, 0.0), rot=ALONG_X, radius=FINGER_RADIUS,
                            half_height=length / 2, density=500.0)
        b.add_joint_revolute(parent, link, axis=(0.0, 0.0, 1.0), parent_pos=(offset, 0.0, 0.0), damping=0.02,
                             armature=1e-3)
        parent, offset = link, length
    bar = b.add_body()
    b.add_shape_capsule(bar, rot=ALONG_X, radius=BAR_RADIUS, half_height=BAR_HALF, density=300.0)
    b.add_joint_revolute(-1, bar, axis=(0.0, 0.0, 1.0), parent_pos=(*HINGE, 0.0), damping=0.005, armature=1e-4)
    return b


def initial_states(count: int, seed: int) -> tuple:
    """(x0 (count, 6), targets (count,) rad): the fingertip on the bar, the finger at rest
    (elbow solved by two-link inverse kinematics), the target 0.6-1.0 rad onward in the
    direction the finger pushes."""
    rng = np.random.default_rng(seed)
    x0, targets = np.zeros((count, 6)), np.zeros(count)
    for i in range(count):
        theta = np.arctan2(HINGE[1], HINGE[0]) + np.pi / 2 + rng.uniform(-0.3, 0.3)
        along = np.array([np.cos(theta), np.sin(theta)])
        normal = np.array([-along[1], along[0]])
        side = np.sign(normal @ -HINGE)  # the finger's side of the bar
        tip = HINGE + rng.uniform(0.06, 0.10) * along + side * (FINGER_RADIUS + BAR_RADIUS - 5e-4) * normal
        l1, l2 = LINKS
        elbow = np.arccos(np.clip((tip @ tip - l1 * l1 - l2 * l2) / (2 * l1 * l2), -1.0, 1.0))
        shoulder = np.arctan2(tip[1], tip[0]) - np.arctan2(l2 * np.sin(elbow), l1 + l2 * np.cos(elbow))
        x0[i, :3] = shoulder, elbow, theta
        targets[i] = theta - side * rng.uniform(0.6, 1.0)  # pushing the bar away turns it by -side
    return x0, targets


def make_problem(x0: np.ndarray, targets: np.ndarray, steps: int = STEPS, device=None) -> TrajectoryProblem:
    """The planning problem (``steps`` plan steps) of the initial states ``x0`` and their
    spinner ``targets``."""
    goal = np.zeros((len(x0), 1, 6))
    goal[:, 0, SPINNER] = targets
    cost = TrajectoryCost(target=goal, running=np.array([0.0, 0.0, 0.1, 1e-3, 1e-3, 1e-3]),
                          terminal=np.array([0.0, 0.0, 50.0, 0.01, 0.01, 0.5]), effort=np.full(2, 1.0),
                          smoothness=np.full(2, 5.0))
    options = SoftContactOptions(time_constant=0.05)
    return TrajectoryProblem(scene(), x0, steps, SUBSTEPS, DT, actuated=[0, 1], lower=-MAX_TORQUE,
                             upper=MAX_TORQUE, cost=cost, device=device,
                             make_solver=lambda model: SemiImplicitSolver(model, soft_contact=options))


def succeeded(states: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(W,) bool: the spinner within 0.1 rad of its target in states (W, nx)."""
    return np.abs(states[:, SPINNER] - targets) < SUCCESS_RAD
