"""System identification of joint dry friction (the "friction" family): a run with dry
friction steps with the soft-constraint solve's friction-loss rows (MuJoCo's frictionloss),
its replays follow the parameters the fit writes (the rows' reference weights included), and a
fit from a wrong start recovers MuJoCo's values; and of joint springs (the "stiffness" family)."""

import numpy as np
import pytest
import warp as wp
from test_sysid_jacobian import replayed_and_stepped

from wpsim.bench import sysid_arm3 as arm
from wpsim.bench.mujoco_sysid import write_run_csv
from wpsim.io.measurements import load_trajectory
from wpsim.io.robots import import_robot
from wpsim.opt.parameters import ParameterSet
from wpsim.opt.replays import MeasuredReplay
from wpsim.opt.sysid import identify, prepare_run, replay, robot_parameters
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

mujoco = pytest.importorskip("mujoco")
FAMILIES = ["masses", "damping", "armature", "friction"]


@pytest.fixture(scope="module")
def friction_run(tmp_path_factory):
    """MuJoCo's run of the true arm with dry friction (``vs_mujoco_sysid``'s ``FRICTION``),
    and the files of the wrong start (friction 0) and of the truth."""
    folder = tmp_path_factory.mktemp("friction")
    data = arm.make_data(mujoco, noisy=False, friction=True)
    files = {"start": folder / "start.xml", "truth": folder / "truth.xml", "data": folder / "data.csv"}
    files["start"].write_text(arm.start_xml(sensors=False, friction=True))
    files["truth"].write_text(arm.arm_xml(arm.TRUTH["mass"], arm.TRUTH["damping"], arm.TRUTH["armature"],
                                          sensors=False, friction=arm.FRICTION))
    write_run_csv(files["data"], data, arm.JOINTS)
    return data, files


def make_run(robot, data_file, duration=None, worlds=1, soft_constraints=False):
    builder, scene = import_robot(robot)
    return prepare_run(builder, scene, load_trajectory(data_file), None, duration, "cpu", worlds, soft_constraints)


def test_a_run_with_dry_friction_replays_mujocos_path(friction_run):
    """The truth file steps with friction-loss rows and follows MuJoCo's angles to round-off
    over 2.5 s; without dry friction (and not asked) a run keeps the penalty step."""
    data, files = friction_run
    run = make_run(files["truth"], files["data"])
    assert run.soft_contact is not None and run.soft_contact.joint_friction
    simulated, _ = replay(run)
    assert np.abs(simulated - data["q"]).max() < 1e-11
    assert make_run(files["start"], files["data"], 0.1, soft_constraints=True).soft_contact is not None  # friction 0
    assert make_run(files["start"], files["data"], 0.1).soft_contact is None


@pytest.mark.parametrize("rows", [False, True])
def test_replay_equals_stepping_with_dry_friction(friction_run, rows):
    """``SemiImplicitSolver.replay`` of a solver with soft-constraint rows steps them (the
    one-launch replay is the penalty step's: taken, it would apply the smooth friction law)."""
    _, files = friction_run
    run = make_run(files["truth"], files["data"], 0.1, 2)
    options = SoftContactOptions(regularisation="mujoco") if rows else None
    q, _, _, expected = replayed_and_stepped(run, lambda model: SemiImplicitSolver(model, soft_contact=options))
    np.testing.assert_array_equal(q, expected)


def test_replays_follow_the_masses_and_armature_the_fit_writes(friction_run):
    """Replays built at the wrong start, then given the true values: the fit's replay
    (``MeasuredReplay``) derives the friction rows' reference weights again (MuJoCo's, from the
    masses and the armature at the reference pose) and follows MuJoCo's path; a solver that
    keeps the weights it was built with leaves the path 1e-5 rad or more away."""
    data, files = friction_run
    run = make_run(files["start"], files["data"], 1.0, soft_constraints=True)
    fitted, kept = MeasuredReplay(run, threads=1), run.solver(threads=1)
    ParameterSet(robot_parameters(run, FAMILIES), {"model": run.model, "state": run.state0}).write(
        arm.truth_vector(friction=True))
    steps = run.steps + 1
    np.testing.assert_allclose(fitted.angles()[:, 0], data["q"][:steps], rtol=0, atol=1e-11)
    state = run.model.state(requires_grad=False)
    state.assign(run.state0)
    forces = wp.array(run.joint_f, dtype=run.model.dtype, device=run.model.device)
    stale = kept.replay(state, forces, run.dt)[0].numpy()[:, run.coords]
    assert np.abs(stale - data["q"][:steps]).max() > 1e-5


def test_least_squares_recovers_dry_friction_from_zero(friction_run):
    """The 12 parameters (masses, damping, armature, dry friction) from masses x0.6, damping
    x0.3, armature 0 and friction 0, to MuJoCo's data of 2.5 s, by ``wpsim sysid``'s default
    (Levenberg-Marquardt with a forward-difference Jacobian over worlds)."""
    _, files = friction_run
    result = identify(files["start"], files["data"], FAMILIES, progress=False, device="cpu")
    values = result.fit.values()
    fitted = [values[f"{b}.mass"] for b in arm.BODIES] + [values[f"{j}.{family}"] for family in FAMILIES[1:]
                                                          for j in arm.JOINTS]
    assert arm.worst_error_percent(fitted, arm.truth_vector(friction=True)) < 1e-5
    assert result.verdict.ok
    assert [f"{j}.friction" for j in arm.JOINTS] == result.fit.labels[-3:]


def test_least_squares_recovers_joint_springs(tmp_path):
    """The "stiffness" family: the arm with joint springs (MuJoCo's stiffness about 0 rad) in
    MuJoCo's data, fitted with the masses and damping from springs at half their value."""
    stiffness = (4.0, 2.0, 1.0)
    xml = arm.arm_xml(arm.TRUTH["mass"], arm.TRUTH["damping"], arm.TRUTH["armature"], sensors=False,
                      stiffness=stiffness)
    data = arm.make_data(mujoco, noisy=False, xml=xml)
    robot, data_file = tmp_path / "start.xml", tmp_path / "data.csv"
    robot.write_text(arm.arm_xml(np.array(arm.TRUTH["mass"]) * 0.8, np.array(arm.TRUTH["damping"]) * 0.5,
                                 arm.TRUTH["armature"], sensors=False, stiffness=np.array(stiffness) * 0.5))
    write_run_csv(data_file, data, arm.JOINTS)
    families = ["masses", "damping", "stiffness"]
    result = identify(robot, data_file, families, duration=1.0, progress=False, device="cpu")
    values = result.fit.values()
    fitted = [values[f"{b}.mass"] for b in arm.BODIES] + [values[f"{j}.{f}"] for f in families[1:] for j in arm.JOINTS]
    truth = [*arm.TRUTH["mass"], *arm.TRUTH["damping"], *stiffness]
    assert arm.worst_error_percent(fitted, np.array(truth)) < 1e-5
    assert result.fit.units[-1] == "N m/rad" and result.verdict.ok


def test_a_sliding_puck_follows_mujoco_and_its_friction_is_fitted(tmp_path):
    """The "contact_friction" family on ``vs_mujoco_sysid``'s puck (two slides, a sphere on the
    floor, pushed back and forth): the run steps with soft-constraint contact and replays
    MuJoCo's path to round-off (MuJoCo weighs a body that only slides by 1 / mass:
    ``inverse_weights.slides_only``), and the puck's friction comes back from half its value."""
    from wpsim.bench import sysid_contact as puck

    data = puck.make_puck_data(mujoco, noisy=False, noise=0.0, seed=0)
    robot, data_file = tmp_path / "puck.xml", tmp_path / "data.csv"
    write_run_csv(data_file, data, (puck.JOINT,))
    robot.write_text(puck.puck_xml(*puck.truth_vector(), sensors=False))
    run = make_run(robot, data_file)
    assert run.soft_contact is not None  # the puck and the floor are a contact pair
    simulated, _ = replay(run)
    assert np.abs(simulated[:, 0] - data["q"][:, 0]).max() < 1e-12
    mass, damping, mu = puck.truth_vector()
    robot.write_text(puck.puck_xml(mass, damping, 0.5 * mu, sensors=False))
    result = identify(robot, data_file, ["contact_friction"], progress=False, device="cpu")
    assert result.fit.labels == ["puck.mu"] and result.fit.values()["puck.mu"] == pytest.approx(mu, rel=1e-7)
