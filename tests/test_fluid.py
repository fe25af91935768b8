"""Fluid forces (MuJoCo's inertia-box model): each body meets viscous and quadratic drag of the
medium as the box of its principal moments does, against MuJoCo, an analytic terminal velocity,
the fused step and central differences."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp
from test_contact_dimensions import paired_runs
from test_fused_step import final_loss_gradients, robot

import wpsim
from wpsim.core.mass import principal_frames

ASSETS = Path(__file__).resolve().parents[1] / "assets"

TUMBLING = """<mujoco><option timestep="0.002" density="{density}" viscosity="{viscosity}" wind="{wind}"/>
<worldbody>
<body pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.05 0.02" density="300" quat="0.9 0.3 0.2 0.1"/>
<body pos="0.2 0 0"><joint type="hinge" axis="0 1 0" damping="0.01"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0.1" size="0.02" density="500"/></body></body>
</worldbody><keyframe><key qpos="0 0 1 1 0 0 0 0.3" qvel="0.5 -0.2 1 3 -2 4 1"/></keyframe></mujoco>"""


@pytest.mark.parametrize("density, viscosity, wind", [(0.0, 0.1, "0 0 0"), (1.2, 0.0, "0 0 0"),
                                                       (1000.0, 0.01, "1 -2 0.5")])
def test_a_tumbling_pair_moves_through_the_fluid_as_in_mujoco(tmp_path, density, viscosity, wind):
    """A tilted box with a hinged capsule (principal axes off the body axes) thrown tumbling
    through air, a viscous medium and water in a wind, 0.6 s at 2 ms: every coordinate within
    1e-9 of MuJoCo's (measured 3.1e-15), and the medium changed the path by more than 1e-3."""
    text = TUMBLING.format(density=density, viscosity=viscosity, wind=wind)
    (ours, _), (theirs, _), _ = paired_runs(tmp_path, text, 300)
    free = TUMBLING.format(density=0, viscosity=0, wind="0 0 0")
    (_, _), (vacuum, _), _ = paired_runs(tmp_path, free, 300)
    positions = [0, 1, 2, 7]  # the free joint's position and the hinge (quaternions are ordered apart)
    assert np.abs(ours[:, positions] - theirs[:, positions]).max() < 1e-9
    assert np.abs(theirs[:, positions] - vacuum[:, positions]).max() > 1e-3


def test_a_sphere_sinks_towards_its_terminal_speed_in_a_viscous_medium():
    """A ball of radius r and mass m dropped in a medium of viscosity mu: the box of its moments
    has sides d = r sqrt(2.4), the drag -3 pi d mu v tends its fall to v_t = m g / (3 pi d mu)
    with time constant tau = v_t / g, and the explicit step gives v_n = v_t (1 - (1 -
    dt / tau)^n) exactly."""
    builder = wpsim.ModelBuilder()
    body = builder.add_body()
    radius, density = 0.05, 1000.0
    builder.add_shape_sphere(body, radius=radius, density=density)
    builder.add_joint_free(body)
    builder.fluid_viscosity = 2.0
    model = builder.finalize(dtype=wp.float64)
    mass = float(model.body_mass.numpy()[0])
    terminal = mass * 9.81 / (3.0 * np.pi * radius * np.sqrt(2.4) * builder.fluid_viscosity)
    solver = wpsim.SemiImplicitSolver(model)
    final = wpsim.simulate(solver, model.state(), 2000, 1e-3)
    expected = terminal * (1.0 - (1.0 - 1e-3 * 9.81 / terminal) ** 2000)
    assert final.joint_qd.numpy()[2] == pytest.approx(-expected, rel=1e-9)
    assert expected > 0.99 * terminal


def test_principal_frames_are_right_handed_eigenvectors_or_the_identity():
    rng = np.random.default_rng(3)
    axes = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    full = axes @ np.diag([1.0, 2.0, 3.0]) @ axes.T
    frames = principal_frames(np.stack([np.diag([1.0, 2.0, 2.0]), full]))
    np.testing.assert_array_equal(frames[0], [0.0, 0.0, 0.0, 1.0])
    from scipy.spatial.transform import Rotation

    rotation = Rotation.from_quat(frames[1]).as_matrix()
    principal = rotation.T @ full @ rotation
    np.testing.assert_allclose(principal, np.diag(np.diag(principal)), atol=1e-12)


def test_a_bad_medium_is_refused_at_finalize():
    builder = wpsim.ModelBuilder()
    builder.fluid_viscosity = -1.0
    with pytest.raises(ValueError, match="fluid_viscosity \\(Pa s\\) must be finite and >= 0"):
        builder.finalize()


def fluid_arm(requires_grad: bool):
    """``test_fused_step.robot``'s arm in a medium of density 800 kg/m^3, viscosity 0.5 Pa s and
    a wind."""
    model = robot("arm_7link.xml", worlds=2, requires_grad=requires_grad)
    model.fluid.assign(np.array([[800.0, 0.5, 0.3, -0.2, 0.1]]))
    return model


def test_the_fused_step_applies_the_fluid_as_the_staged_one():
    """The arm in a medium: the fused step's tape gradients equal the staged ones to round-off."""
    model = fluid_arm(requires_grad=True)
    loss_staged, staged = final_loss_gradients(model, fused=False)
    model.fluid.grad.zero_()
    loss_fused, fused = final_loss_gradients(model, fused=True)
    assert loss_staged == loss_fused
    for a, b in zip(staged, fused):
        assert np.abs(a).max() > 0.0
        np.testing.assert_allclose(b, a, rtol=1.0e-11, atol=1.0e-14 * np.abs(a).max())
