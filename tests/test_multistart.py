"""Multi-start fits as K worlds of one model (wpsim.opt.multistart): each world's gradient
in the batch is the single-world gradient, the best world is kept, bad input is named."""

import json
from pathlib import Path

import numpy as np
import pytest

from wpsim.io.measurements import load_trajectory
from wpsim.io.robots import import_robot
from wpsim.opt import Parameter, Problem, multistart, random_starts
from wpsim.opt.sysid import prepare_run, robot_problem, tracking_rollout

ASSETS = Path(__file__).resolve().parents[1] / "assets"
FAMILIES = ["masses", "damping", "armature"]


def arm_problem(worlds: int, duration: float = 0.2):
    builder, scene = import_robot(ASSETS / "arm_2link.xml")
    run = prepare_run(builder, scene, load_trajectory(ASSETS / "arm_2link_sysid.csv"), duration=duration,
                      worlds=worlds)
    return run, robot_problem(run, FAMILIES, mode="full")


@pytest.fixture(scope="module")
def batch():
    return arm_problem(3)


def test_each_world_of_a_batch_has_its_single_world_loss_and_gradient(batch):
    _, problem = batch
    single = arm_problem(1)[1]
    starts = random_starts(problem, seed=3)
    n = problem.params.per_world
    assert problem.params.size == 3 * n and problem.params.labels[n] == "link1.mass@1"
    total, grad = problem.loss_and_grad(starts.ravel())
    losses = problem.world_losses()
    assert total == pytest.approx(losses.sum(), rel=1e-12)
    for k in range(3):
        loss, g = single.loss_and_grad(starts[k])
        assert losses[k] == pytest.approx(loss, rel=1e-12)
        assert np.allclose(grad[k * n:(k + 1) * n], g, rtol=1e-10, atol=0.0)
    assert len(set(np.round(losses, 12))) == 3  # the worlds really differ


def test_random_starts_keep_the_declared_guess_and_the_bounds(batch):
    _, problem = batch
    starts = random_starts(problem, seed=0)
    params, n = problem.params, problem.params.per_world
    assert np.array_equal(starts[0], params.x0[:n])
    assert (starts >= params.lower[:n]).all() and (starts <= params.upper[:n]).all()
    assert not np.allclose(starts[1], starts[2])
    assert np.array_equal(starts, random_starts(problem, seed=0))


def test_multistart_keeps_the_best_world(batch, tmp_path):
    _, problem = batch
    result = multistart(problem, iterations=12, seed=5, progress=False)
    assert result.best == int(np.argmin(result.losses))
    assert result.loss < 0.01 * result.losses0.min()
    assert result.values().keys() == {"link1.mass", "link2.mass", "link1_joint.damping", "link2_joint.damping",
                                      "link1_joint.armature", "link2_joint.armature"}
    assert "best" in result.table() and "3 starts in one batch" in result.table()
    saved = json.loads(Path(result.save_json(tmp_path / "starts.json")).read_text())
    assert saved["best"] == result.best and len(saved["losses"]) == 3
    # the best world's values are in its rows of the model
    run = batch[0]
    rows = run.world_rows(run.dofs, run.model.joint_dof_count)
    damping = run.model.joint_damping.numpy()[rows].reshape(3, -1)
    assert damping[result.best] == pytest.approx(result.x[2:4])


def test_bad_batches_are_named(batch):
    run, problem = batch
    with pytest.raises(ValueError, match=r"starts must be \(3, 6\)"):
        multistart(problem, starts=np.ones((2, 6)), progress=False)
    with pytest.raises(ValueError, match="needs a Problem over several worlds"):
        multistart(arm_problem(1)[1], progress=False)
    single_loss = tracking_rollout(run)
    single_loss.loss_size = 1
    with pytest.raises(ValueError, match=r"one loss entry per world \(Rollout\(loss_size=3\)\)"):
        Problem(single_loss, run.state0, [Parameter("model.joint_damping")], worlds=3)
    with pytest.raises(ValueError, match="model.gravity.*1 rows do not split into 3 worlds"):
        Problem(tracking_rollout(run), run.state0, [Parameter("model.gravity")], worlds=3)
