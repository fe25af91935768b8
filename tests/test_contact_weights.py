"""The soft-constraint rows weighed as MuJoCo weighs them (``regularisation="mujoco"``): the
bodies' and dofs' inverse weights at the reference pose against MuJoCo's body_invweight0 and
dof_invweight0, resting depths and a sliding box against MuJoCo, gradients."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp
from test_contact_dimensions import paired_runs
from test_contact_softness import SETTINGS, resting_depths, sliding_sphere
from test_soft_contact import PUSH, assert_adjoints_agree

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.kernels.enums import JOINT_DOF_COUNT
from wpsim.solvers import SoftContactOptions

ASSETS = Path(__file__).resolve().parent.parent / "assets"


@pytest.mark.parametrize("name", ["quadruped.xml", "arm_7link.xml", "box_toss.xml"])
def test_inverse_weights_are_mujocos(name):
    mujoco = pytest.importorskip("mujoco")
    path = ASSETS / name
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(regularisation="mujoco"))
    bodies, dofs = (a.numpy() for a in solver.soft_contact.inverse_weights)
    mj = mujoco.MjModel.from_xml_path(str(path))
    named = {n: i for n, i in scene.bodies.items() if mj.body(n).id > 0}
    assert named
    for name_, body in named.items():
        np.testing.assert_allclose(bodies[body], mj.body_invweight0[mj.body(name_).id], rtol=1e-9, atol=1e-12)
    starts, types = model.joint_qd_start.numpy(), model.joint_type.numpy()
    for name_, joint in scene.joints.items():
        count = JOINT_DOF_COUNT[types[joint]]
        first = mj.jnt_dofadr[mj.joint(name_).id]
        np.testing.assert_allclose(dofs[starts[joint]:starts[joint] + count], mj.dof_invweight0[first:first + count],
                                   rtol=1e-9, atol=1e-12)


SLIDERS = """<mujoco><worldbody><geom type="plane" size="2 2 0.1"/>
<body name="puck" pos="0 0 0.05"><joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 0 1"/>
<geom type="sphere" size="0.05" mass="1.3"/></body>
<body name="offset" pos="1 0 0.05"><joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 0 1"/>
<geom type="sphere" size="0.05" pos="0.02 0 0" mass="0.7"/></body>
<body name="carriage" pos="0 1 0.3"><joint type="slide" axis="1 0 0"/><geom type="box" size="0.1 0.1 0.02" mass="2"/>
<body name="slider" pos="0 0 -0.1"><joint type="slide" axis="0 0 1"/><geom type="sphere" size="0.04" mass="0.5"/></body>
</body>
<body name="turning" pos="-1 0 0.05"><joint type="slide" axis="1 0 0"/><joint type="hinge" axis="0 1 0"/>
<geom type="sphere" size="0.05" mass="0.9"/></body>
<body name="wheel" pos="0 -1 0.1"><joint type="hinge" axis="0 1 0"/><geom type="sphere" size="0.1" mass="2"/></body>
</worldbody></mujoco>"""


def test_sliding_bodies_weigh_as_in_mujoco(tmp_path):
    """MuJoCo gives a body that only slides along world axes from its own joints (a "simple"
    body: centre of mass at its origin, nothing hanging from it) the inverse weights 1 / mass
    and 0, every other body the means of J M^-1 J^T: the puck sliding in x and z (1 / m, where
    the means would give 2 / (3 m)), the same with its centre of mass off its origin, a slider
    on a moving carriage and a body that slides and turns take the means; a mean that is zero
    stays zero (the sliders' rotation, a wheel turning about its centre of mass)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "sliders.xml"
    path.write_text(SLIDERS)
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(regularisation="mujoco"))
    bodies = solver.soft_contact.inverse_weights[0].numpy()
    mj = mujoco.MjModel.from_xml_path(str(path))
    assert mj.body_simple[mj.body("puck").id] == 2 and mj.body_simple[mj.body("slider").id] == 0
    for name in ("puck", "offset", "carriage", "slider", "turning", "wheel"):
        np.testing.assert_allclose(bodies[scene.bodies[name]], mj.body_invweight0[mj.body(name).id], rtol=1e-9,
                                   atol=1e-12)


@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_a_resting_sphere_sinks_as_deep_as_in_mujoco(tmp_path, setting):
    ball, floor = SETTINGS[setting]
    ours, theirs = resting_depths(tmp_path, floor, ball)  # the file's settings: MuJoCo's weights
    assert ours == pytest.approx(theirs, rel=1e-6)


SLIDING = """<mujoco><option timestep="0.002" impratio="{impratio}"/><worldbody>
<geom type="plane" size="2 2 0.1" friction="{floor_mu}"/>
<body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.08 0.1" density="800" friction="{mu}"/></body>
</worldbody><keyframe><key qpos="0 0 0.0999 1 0 0 0" qvel="1.5 0.4 0 0 0 0.5"/></keyframe></mujoco>"""


@pytest.mark.parametrize("mu, floor_mu, impratio, steps, tolerance", [
    (0.3, 0.3, 1.0, 300, 1e-3), (1.0, 1.0, 1.0, 20, 1e-5), (0.3, 0.15, 1.0, 100, 1e-5), (0.3, 0.3, 10.0, 100, 1e-5)])
def test_a_sliding_box_moves_as_in_mujoco(tmp_path, mu, floor_mu, impratio, steps, tolerance):
    """A box started 0.1 mm in the floor hops, slides and turns at 2 ms steps (condim 3,
    pyramidal cone, MuJoCo's default solref and solimp: the file sets none): its centre
    follows MuJoCo's within ``tolerance`` m. Measured: mu 0.3, 0.6 s (until it stops):
    3.1e-4 m, 2.5e-6 m over the first 0.2 s; mu 1.0, 0.04 s: 6.9e-7 m (at the next step a
    corner of the hopping box grazes the floor, one simulator finds it in contact a step before
    the other, and the two part by up to 3 mm); over 0.2 s, the floor's mu 0.15 under the
    box's 0.3 (MuJoCo takes the larger: ``friction_mixing="mujoco"``) 2.5e-6 m (1.5e-2 m with
    the mean), and impratio 10 (``SoftContactOptions.impratio``) 3.5e-7 m (6.4e-4 m without)."""
    text = SLIDING.format(mu=mu, floor_mu=floor_mu, impratio=impratio)
    (ours, _), (theirs, _), _ = paired_runs(tmp_path, text, steps)
    ours, theirs = ours[:, :3], theirs[:, :3]
    assert np.abs(theirs[-1, :2] - theirs[0, :2]).max() > 0.02  # it slid
    assert np.abs(ours - theirs).max() < tolerance


@pytest.mark.parametrize("param", ["shape_mu", "joint_qd", "shape_solref"])
def test_gradients_with_mujocos_weights_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_sphere, param, wrench=PUSH, regularisation="mujoco")
