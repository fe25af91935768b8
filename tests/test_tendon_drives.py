"""Actuators on fixed tendons as drives of joint couplings (``ModelBuilder.set_coupling_drive``,
``Control.coupling_target``): against MuJoCo, refused settings, gradients."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.gradcheck import check_gradient
from wpsim.io.mjcf import import_mjcf

GRIPPER = """<mujoco><option integrator="{integrator}"/><worldbody>
<body name="palm" pos="0 0 0.5"><geom type="box" size="0.05 0.05 0.02" mass="0.7"/>
 <body name="left" pos="0 0.02 -0.05"><joint name="f1" type="slide" axis="0 1 0" armature="0.1" damping="1"/>
  <geom type="box" size="0.01 0.005 0.03" mass="0.015"/></body>
 <body name="right" pos="0 -0.02 -0.05"><joint name="f2" type="slide" axis="0 -1 0" armature="0.1" damping="1"/>
  <geom type="box" size="0.01 0.005 0.03" mass="0.015"/></body></body></worldbody>
<tendon><fixed name="split"><joint joint="f1" coef="0.5"/><joint joint="f2" coef="0.5"/></fixed></tendon>
<equality><joint joint1="f1" joint2="f2" solimp="0.95 0.99 0.001" solref="0.005 1"/></equality>
<actuator><general name="grip" tendon="split" forcerange="-100 100" gainprm="0.0157" biastype="affine"
 biasprm="0 -100 -10"/></actuator></mujoco>"""
"""Two fingers on slides, a fixed tendon averaging them with a position servo on it (Franka's
hand: force 0.0157 ctrl - 100 L - 10 dL/dt), and a joint equality holding them alike."""


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_a_servo_on_a_fixed_tendon_moves_as_in_mujoco(tmp_path, integrator):
    """The gripper from a perturbed state with contact and limits off follows MuJoCo to 1e-12
    over 500 steps (measured 6.8e-17 under Euler, 4.6e-17 under implicitfast): the servo's kv
    acts implicitly under implicitfast only on the dofs of one branch, as MuJoCo's sparse
    implicit step keeps it (with the fingers' cross term, the Menagerie Panda hand was 2.2e-6
    apart after one step)."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = tmp_path / "gripper.xml"
    path.write_text(GRIPPER.format(integrator=integrator))
    builder, scene = import_mjcf(path)
    assert scene.unhonoured == [] and scene.actuators == []
    (actuator,) = scene.tendon_actuators
    assert actuator["target_per_ctrl"] == pytest.approx(0.0157 / 100.0) and actuator["target_offset"] == 0.0
    ours, theirs, q0 = rollouts(path, steps=500, seed=4)
    assert np.abs(theirs[-1] - q0).max() > 0.05
    assert np.abs(ours - theirs).max() < 1e-12


def test_a_tendon_drive_holds_its_target_length():
    """A drive of ke 100 N/m on a coupling of two free slides, target 0.02 m: the coupling's
    length settles there (within 1e-6 m after 2 s), the force clamped at its limit while far."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    palm = builder.add_body(mass=1.0, inertia=np.eye(3) * 1e-3)
    builder.add_joint_fixed(-1, palm)
    joints = []
    for side in (1.0, -1.0):
        body = builder.add_body(mass=0.1, inertia=np.eye(3) * 1e-4)
        joints.append(builder.add_joint_prismatic(palm, body, axis=(0.0, side, 0.0), damping=0.5))
    coupling = builder.add_joint_coupling(joints, (0.5, 0.5))
    builder.set_coupling_drive(coupling, ke=100.0, kd=5.0, force_limit=1.5)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    control = model.control()
    control.coupling_target.assign([0.02])
    state, spare = model.state(), model.state()
    for _ in range(2000):
        solver.step(state, spare, control, 1e-3)
        state, spare = spare, state
    assert 0.5 * state.joint_q.numpy().sum() == pytest.approx(0.02, abs=1e-6)


def test_bad_tendon_drives_are_refused_and_listed(tmp_path):
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    joint = builder.add_joint_prismatic(-1, body, axis=(0.0, 1.0, 0.0))
    coupling = builder.add_joint_coupling([joint], [1.0])
    with pytest.raises(ValueError, match=r"set_coupling_drive: coupling 3 does not exist"):
        builder.set_coupling_drive(3, ke=1.0)
    with pytest.raises(ValueError, match=r"set_coupling_drive: coupling 0: ke and kd must be"):
        builder.set_coupling_drive(coupling, ke=-1.0)
    path = tmp_path / "motor.xml"
    path.write_text(GRIPPER.format(integrator="Euler").replace('biastype="affine"\n biasprm="0 -100 -10"', ""))
    with pytest.warns(UserWarning):
        _, scene = import_mjcf(path)
    assert scene.tendon_actuators == [] and any("only a position servo" in u.note for u in scene.unhonoured)


@pytest.mark.parametrize("implicit_terms", ["in solve", "after solve"])
def test_tendon_drive_gradients_match_central_differences(tmp_path, implicit_terms):
    """d(final finger state)/d(coupling_target) and d/d(initial velocities) through the drive,
    the joint equality (a row of the soft-constraint solve) and both orders of the implicit
    terms, against central differences (float64, eps 1e-6)."""
    path = tmp_path / "gripper.xml"
    path.write_text(GRIPPER.format(integrator="implicitfast"))
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64, requires_grad=True)
    options = wpsim.SoftContactOptions(**{**scene.contact_settings, "implicit_terms": implicit_terms,
                                          "tolerance": 1e-13})
    solver = wpsim.SemiImplicitSolver(model, soft_contact=options)
    state, control = model.state(), model.control()
    state.joint_qd.assign([0.3, -0.2])
    control.coupling_target.assign([0.015])
    weights = wp.array([1.0, -0.7], dtype=wp.float64)

    def loss():
        final = wpsim.simulate(solver, state, 30, 2e-3, control)
        return wpsim.diff.losses.joint_state_loss(final, weights, weights)

    for array in (control.coupling_target, state.joint_qd):
        result = check_gradient(loss, array, eps=1e-6, direction=np.ones(array.shape), tol=1e-5)
        assert result.ok and abs(result.tape) > 1e-3, (result.tape, result.fd)
