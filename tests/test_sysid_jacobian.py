"""The least-squares Jacobian of system identification by differences over the worlds of one
batched rollout (``TrackingResiduals(jacobian="differences")``), the one-launch replay it runs
(``SemiImplicitSolver.replay``), and a fit from a wrong start on exact synthetic data."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from wpsim.bench.mujoco_sysid import write_run_csv
from wpsim.bench.sysid_arm3 import BODIES, JOINTS, START, TRUTH, arm_xml, start_xml, truth_vector
from wpsim.io.measurements import load_trajectory
from wpsim.io.robots import import_robot
from wpsim.opt.sysid import TrackingResiduals, identify, prepare_run
from wpsim.solvers import SemiImplicitSolver

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOT, DATA = ASSETS / "arm_2link.xml", ASSETS / "arm_2link_sysid.csv"
FAMILIES = ["masses", "damping", "armature", "initial_state"]


def write_sine_run(robot: Path, data: Path, amplitude: float):
    """Record the 3-joint arm of the file ``robot`` (float64, 1 s at 2 ms from 0.2, -0.3, 0.4 rad)
    under sine torques of ``amplitude`` N m, one frequency and phase per joint, into the CSV
    ``data`` (JOINTS' angles, rates and torques)."""
    model = import_robot(robot)[0].finalize(device="cpu", dtype=wp.float64)
    steps, dt = 500, 0.002
    time_s = np.arange(steps + 1) * dt
    torque = np.stack([amplitude * np.sin(2 * np.pi * (0.7 + 0.5 * i) * time_s + i) for i in range(3)], axis=1)
    state = model.state(requires_grad=False)
    state.joint_q.assign([0.2, -0.3, 0.4])
    q, qd = (a.numpy() for a in SemiImplicitSolver(model).replay(state, wp.array(torque[:-1], dtype=wp.float64), dt))
    write_run_csv(data, {"time": time_s, "measured": q, "qd": qd, "torque": torque}, JOINTS)


def make_run_of(robot, data, duration):
    trajectory = load_trajectory(data)

    def make_run(worlds=1):
        builder, scene = import_robot(robot)
        return prepare_run(builder, scene, trajectory, None, duration, "cpu", worlds)

    return make_run


@pytest.fixture(scope="module")
def residual_sets():
    make_run = make_run_of(ROBOT, DATA, 0.2)
    kinds = (("adjoint", "adjoint", "forward"), ("central", "differences", "central"),
             ("forward", "differences", "forward"))
    return {kind: TrackingResiduals(make_run, FAMILIES, every=5, jacobian=jacobian, differences=differences)
            for kind, jacobian, differences in kinds}


def test_batched_differences_agree_with_the_tape_jacobian(residual_sets):
    """float64, smooth swing, 14 parameters (masses, damping, armature, initial state); away
    from the file's values and from the bounds."""
    adjoint = residual_sets["adjoint"]
    x = adjoint.params.x0 * 0.9 + 0.003
    tape = adjoint.jacobian(x)
    assert tape.shape == (adjoint.count, adjoint.params.size) and np.abs(tape).min(axis=0).max() > 0
    for kind, bound in (("central", 1e-8), ("forward", 1e-5)):
        jac = residual_sets[kind].jacobian(x)
        columns = np.linalg.norm(jac - tape, axis=0) / np.linalg.norm(tape, axis=0)
        assert columns.max() < bound, (kind, columns)
    assert residual_sets["central"]._wide.run.worlds == 2 * adjoint.params.size + 1
    assert residual_sets["forward"]._wide.run.worlds == adjoint.params.size + 1
    np.testing.assert_array_equal(residual_sets["central"].values(x), adjoint.values(x))


def test_differences_step_inwards_at_a_bound(residual_sets):
    """Armature 0 on its lower bound 0: the columns are one-sided, still the tape's."""
    adjoint = residual_sets["adjoint"]
    x = adjoint.params.x0.copy()
    armature = [i for i, label in enumerate(adjoint.params.labels) if label.endswith(".armature")]
    x[armature] = 0.0
    tape = adjoint.jacobian(x)[:, armature]
    for kind, bound in (("central", 1e-7), ("forward", 1e-5)):
        jac = residual_sets[kind].jacobian(x)[:, armature]
        assert (np.linalg.norm(jac - tape, axis=0) / np.linalg.norm(tape, axis=0)).max() < bound, kind


def replayed_and_stepped(run, make_solver) -> tuple:
    """(the joint coordinates (steps + 1, coordinates) and rates of one ``replay`` of ``run``'s
    forces by a solver of ``make_solver(model)``, the state it leaves, the coordinates of the
    same steps by another such solver's ``step``, one control at a time)."""
    model = run.model
    stepped = make_solver(model)
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    a.assign(run.state0)
    expected = [a.joint_q.numpy().copy()]
    for k in range(run.steps):
        stepped.step(a, b, run.controls[k], run.dt)
        expected.append(b.joint_q.numpy().copy())
        a, b = b, a
    state = model.state(requires_grad=False)
    state.assign(run.state0)
    forces = wp.array(run.joint_f, dtype=model.dtype, device=model.device)
    q, qd = make_solver(model).replay(state, forces, run.dt)
    return q.numpy(), qd.numpy(), state, np.stack(expected)


@pytest.mark.parametrize("fused", [True, False])
def test_replay_equals_stepping_with_a_control_per_step(fused):
    run = make_run_of(ROBOT, DATA, 0.05)(2)
    model = run.model
    q, qd, state, expected = replayed_and_stepped(run, lambda m: SemiImplicitSolver(m, fused=fused))
    np.testing.assert_array_equal(q, expected)
    np.testing.assert_array_equal(state.joint_q.numpy(), expected[-1])
    assert qd.shape == (run.steps + 1, model.joint_dof_count)
    with pytest.raises(ValueError, match="joint_f_steps must be"):
        SemiImplicitSolver(model).replay(state, wp.zeros((3, 1), dtype=model.dtype), run.dt)


def test_least_squares_recovers_masses_damping_armature_from_a_wrong_start(tmp_path):
    """The planar 3-hinge arm of the vs_mujoco_sysid suite: data made by wpsim with the true
    values (1 s), the fit from masses x0.6, damping x0.3, armature 0 by the default method."""
    truth = tmp_path / "truth.xml"
    truth.write_text(arm_xml(TRUTH["mass"], TRUTH["damping"], TRUTH["armature"], sensors=False))
    write_sine_run(truth, tmp_path / "data.csv", 2.0)
    start = tmp_path / "start.xml"
    start.write_text(start_xml(sensors=False))
    result = identify(start, tmp_path / "data.csv", ["masses", "damping", "armature"], progress=False, device="cpu")
    assert result.fit.method == "least-squares" and result.verdict.ok
    values = result.fit.values()
    fitted = [values[f"{b}.mass"] for b in BODIES] + [values[f"{j}.{f}"] for f in ("damping", "armature")
                                                      for j in JOINTS]
    start_error = np.abs(np.array([*(START["mass"] * v for v in TRUTH["mass"]), *(START["damping"] * v for v in
                                   TRUTH["damping"]), 0, 0, 0]) / truth_vector() - 1).max()
    assert start_error >= 0.7
    np.testing.assert_allclose(fitted, truth_vector(), rtol=1e-6)
    assert len(result.fit.history) - 1 <= 30
