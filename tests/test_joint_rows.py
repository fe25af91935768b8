"""The rows on one dof (joint limits, friction loss) with each joint's own soft-constraint
settings (``ModelBuilder.set_joint_softness``; MJCF's solreflimit, solimplimit, solreffriction,
solimpfriction) and MuJoCo's order of the implicit terms (``SoftContactOptions.implicit_terms``)
against MuJoCo, and their gradients."""

import numpy as np
import pytest
import warp as wp
from test_soft_contact import assert_adjoints_agree

import wpsim
from wpsim.solvers import SoftContactOptions

ARM = """<mujoco><option timestep="0.002" integrator="{integrator}"/><worldbody>
<body pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0" range="-20 20" frictionloss="0.05"
  damping="0.3" solreflimit="0.01 0.7" solimplimit="0.8 0.98 0.05 0.3 3" solreffriction="0.05 1.2"
  solimpfriction="0.7 0.9 0.01"/>
 <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" contype="0" conaffinity="0"/>
 <body pos="0.4 0 0"><joint name="elbow" type="hinge" axis="0 1 0" range="-10 60" frictionloss="0.02"
   damping="0.1"/>
  <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/></body></body>
</worldbody><equality><joint joint1="elbow" solref="0.05 1" solimp="0.5 0.6 0.1"/></equality>
<actuator><position joint="shoulder" kp="2" kv="0.4"/></actuator></mujoco>"""
"""An arm falling onto its limits: the shoulder's rows with settings of their own (a limit
impedance curve 5 cm wide), the elbow's MuJoCo's defaults; the elbow also held softly at
its reference angle by a joint equality (beyond the limit's range start); damped joints and
a position servo with kv (implicit under implicitfast), so the order of the implicit terms
around the solve matters."""


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_limits_and_friction_with_their_own_settings_move_as_in_mujoco(tmp_path, integrator):
    """500 steps with limits and friction rows on in both simulators: the joints agree to
    1e-10 rad (measured 6.1e-16 under both integrators); the shoulder goes
    beyond its limit. With the implicit terms in the solve's matrix (wpsim's order) they
    differ by more than 1e-5 rad (measured 5.7e-4 and 6.1e-4)."""
    pytest.importorskip("mujoco")
    from wpsim.bench import mujoco_reference

    path = tmp_path / "arm.xml"
    path.write_text(ARM.format(integrator=integrator))
    ours, theirs, _ = mujoco_reference.rollouts(path, steps=500, seed=2, limits=True)
    assert theirs[:, 0].max() > np.radians(20.0) + 0.01
    assert np.abs(ours - theirs).max() < 1e-10
    options = SoftContactOptions
    try:
        mujoco_reference.SoftContactOptions = lambda **settings: options(**{**settings, "implicit_terms": "in solve"})
        ours = mujoco_reference.rollouts(path, steps=500, seed=2, limits=True)[0]
    finally:
        mujoco_reference.SoftContactOptions = options
    assert np.abs(ours - theirs).max() > 1e-5


def limited_pendulum():
    """A pendulum swinging into its lower limit, with dry friction, its rows' settings its own."""
    builder = wpsim.ModelBuilder()
    link = builder.add_body(mass=1.0, com=(0.0, 0.0, -0.3), inertia=(0.001, 0.001, 0.001))
    joint = builder.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), q=0.21, qd=-1.5, limit_lower=0.2,
                                       limit_upper=2.0, limit_ke=0.0, limit_kd=0.0, friction=0.05, damping=0.2)
    builder.set_joint_softness(joint, solref_limit=(0.01, 0.8), solimp_limit=(0.8, 0.97, 0.02, 0.4, 2.5),
                               solref_friction=(0.04, 1.0), solimp_friction=(0.6, 0.9, 0.01, 0.5, 2.0))
    return builder.finalize(dtype=wp.float64, requires_grad=True)


@pytest.mark.parametrize("implicit_terms", ["in solve", "after solve"])
@pytest.mark.parametrize("param", ["joint_qd", "joint_limit_lower", "joint_friction", "joint_damping"])
def test_row_gradients_with_the_joints_settings_match_unrolled_and_central_differences(param, implicit_terms):
    assert_adjoints_agree(limited_pendulum, param, direction=np.array([1.0]), implicit_terms=implicit_terms)


def test_bad_joint_softness_is_refused_naming_the_joint():
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    joint = builder.add_joint_revolute(-1, body, axis=(0.0, 1.0, 0.0))
    with pytest.raises(ValueError, match=r"set_joint_softness: joint 0 limit: solref must be"):
        builder.set_joint_softness(joint, solref_limit=(0.02, -1.0))
    with pytest.raises(ValueError, match=r"set_joint_softness: joint 0 friction: solimp must be"):
        builder.set_joint_softness(joint, solimp_friction=(0.9, 1.2, 0.001, 0.5, 2.0))
    with pytest.raises(ValueError, match=r"set_joint_softness: joint 5 does not exist"):
        builder.set_joint_softness(5)
    model = builder.finalize()
    assert np.all(model.joint_limit_solref.numpy() == 0.0)  # the solve's own settings
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(time_constant=0.03))
    np.testing.assert_allclose(solver.soft_contact.dof_row_settings.numpy()[0, 1:3], [0.03, 1.0])
