"""Contact dimensions (MuJoCo's condim) of the soft-constraint contact: frictionless (1), sliding
(3), torsional (4) and rolling (6) friction as the edges of one pyramid per contact point, against
MuJoCo and through both adjoints."""

import numpy as np
import pytest
import warp as wp
from test_soft_contact import assert_adjoints_agree

import wpsim
from wpsim.apps.gradient_audit import _spinning_ball_scene
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SoftContactOptions

SCENE = """<mujoco><option timestep="0.002"/><worldbody>
<geom type="plane" size="2 2 0.1" condim="{floor_condim}" friction="0.8 0.02 0.01" {floor}/>
{extra}<body pos="0 0 0.1"><freejoint/><geom type="{shape}" size="0.1 0.08 0.1" density="800" condim="{condim}"
friction="0.8 0.02 0.01"/></body>
</worldbody><keyframe><key qpos="{qpos}" qvel="{qvel}"/></keyframe></mujoco>"""

BOX_BELOW = """<body pos="0 0 0.1"><freejoint/><geom type="box" size="0.3 0.3 0.1" density="300" condim="{condim}"
friction="0.6 0.03 0.02"/></body>
"""


def paired_runs(tmp_path, text: str, steps: int, **solver_options) -> tuple:
    """(wpsim's, MuJoCo's) ((steps, qpos), final qvel) of the MJCF ``text`` stepped from its
    first keyframe at its time step with the file's settings (solve tolerance 1e-12; more
    ``SemiImplicitSolver`` keywords in ``solver_options``), and (wpsim's, MuJoCo's) contact
    points at the end."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "paired.xml"
    path.write_text(text)
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**scene.contact_settings,
                                                                             tolerance=1e-12),
                                       **solver_options)
    key = scene.keyframes[next(iter(scene.keyframes))]
    state, nxt = model.state(), model.state()
    state.joint_q.assign(np.concatenate([np.asarray(q, np.float64) for q in key["q"].values()]))
    state.joint_qd.assign(np.concatenate([np.asarray(v, np.float64) for v in key["qd"].values()]))
    mj = mujoco.MjModel.from_xml_string(text)
    data = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, data, 0)
    ours, theirs = [], []
    for _ in range(steps):
        solver.step(state, nxt, None, mj.opt.timestep)
        state, nxt = nxt, state
        mujoco.mj_step(mj, data)
        ours.append(state.joint_q.numpy().copy())
        theirs.append(data.qpos.copy())
    assert solver.health().ok
    return ((np.array(ours), state.joint_qd.numpy()), (np.array(theirs), data.qvel.copy()),
            (solver.soft_contact.active_contacts(), data.ncon))


def both_runs(tmp_path, steps: int, **fields) -> tuple:
    """``paired_runs`` of ``SCENE`` filled with ``fields`` (the floor's condim the body's unless
    given); both find the same contact points at the end."""
    text = SCENE.format(**{"floor": "", "floor_condim": fields["condim"], "extra": "", **fields})
    ours, theirs, (contacts, mujoco_contacts) = paired_runs(tmp_path, text, steps)
    assert contacts == mujoco_contacts
    return ours, theirs


@pytest.mark.parametrize("condim", [1, 3, 4, 6])
def test_a_resting_box_sinks_as_deep_as_in_mujoco(tmp_path, condim):
    """A box settling on the floor for 0.6 s: its four corners' pyramids have 2 (condim - 1)
    edges (the normal alone for condim 1), each weighing alike, so the box sinks less the more
    edges it has; its depth is MuJoCo's to 1e-9 (measured 1e-13 m)."""
    (ours, _), (theirs, _) = both_runs(tmp_path, 300, condim=condim, shape="box", qpos="0 0 0.0999 1 0 0 0",
                                       qvel="0 0 0 0 0 0")
    assert np.abs(ours[:, :3] - theirs[:, :3]).max() < 1e-9
    depth = 0.1 - ours[-1, 2]
    expected = {1: 1.078e-4, 3: 5.713e-5, 4: 3.817e-5, 6: 2.293e-5}[condim]  # measured (MuJoCo's alike)
    assert depth == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("condim", [3, 4, 6])
def test_a_spinning_rolling_sphere_moves_as_in_mujoco(tmp_path, condim):
    """A sphere thrown along x while spinning about the vertical at 3 rad/s, for 0.4 s: torsional
    friction (condim 4) stops the spin, rolling friction (6) slows the roll; its centre follows
    MuJoCo's within 1e-9 m (measured 1.4e-16 and below) and its final velocities within 1e-9 m/s
    and rad/s (measured 4.4e-15 and below)."""
    (ours, ours_qd), (theirs, theirs_qd) = both_runs(tmp_path, 200, condim=condim, shape="sphere",
                                                     qpos="0 0 0.0999 1 0 0 0", qvel="0.5 0 0 0 0 3")
    assert np.abs(ours[:, :3] - theirs[:, :3]).max() < 1e-9
    np.testing.assert_allclose(ours_qd, theirs_qd, atol=1e-9)
    spin, roll = theirs_qd[5], theirs_qd[0]
    assert (spin < 0.5) == (condim >= 4)  # torsional friction stopped the spin (condim 3: 3.0 rad/s)
    assert (roll < 0.2) == (condim == 6)  # rolling friction slowed the roll (condim 3: 0.357 m/s)


def test_the_higher_priority_geoms_condim_wins_as_in_mujoco(tmp_path):
    """A frictionless floor of priority 1 under a sphere of condim 6: the pair is frictionless,
    the sphere keeps sliding and spinning, as in MuJoCo."""
    (ours, ours_qd), (theirs, theirs_qd) = both_runs(tmp_path, 100, condim=6, floor_condim=1, floor='priority="1"',
                                                     shape="sphere", qpos="0 0 0.0999 1 0 0 0", qvel="0.5 0 0 0 0 3")
    assert np.abs(ours[:, :3] - theirs[:, :3]).max() < 1e-9
    assert ours_qd[0] == pytest.approx(0.5, abs=1e-9) and ours_qd[5] == pytest.approx(3.0, abs=1e-9)


def test_a_sphere_rolling_on_a_free_box_moves_as_in_mujoco(tmp_path):
    """Body-body rows: a sphere (condim 6) rolling and spinning on a free box lying on the floor
    (condim 4), 0.3 s: both bodies follow MuJoCo's within 1e-9 m (measured 3e-16)."""
    (ours, _), (theirs, _) = both_runs(
        tmp_path, 150, condim=6, floor_condim=4, extra=BOX_BELOW.format(condim=4), shape="sphere",
        qpos="0 0 0.0999 1 0 0 0 0.05 0 0.2998 1 0 0 0", qvel="0 0 0 0 0 0 0.5 0 0 0 0 3")
    centres = [0, 1, 2, 7, 8, 9]  # both free joints' positions (their quaternions are ordered apart)
    assert np.abs(ours[:, centres] - theirs[:, centres]).max() < 1e-9
    assert np.abs(theirs[-1, 7:9] - theirs[0, 7:9]).max() > 0.05  # the sphere rolled


@pytest.mark.parametrize("spin, param", [(6.0, "shape_rotational_mu"), (0.5, "shape_rotational_mu"),
                                         (0.5, "shape_mu"), (6.0, "joint_qd"), (0.5, "joint_qd")])
def test_rolling_and_torsional_gradients_match_unrolled_and_central_differences(spin, param):
    """The audit's ball rolling and spinning on condim-6 ground (``_spinning_ball_scene``) under
    MuJoCo's row weights: at 6 rad/s a torsion edge carries it, at 0.5 rad/s a rolling edge."""
    assert_adjoints_agree(lambda: _spinning_ball_scene(spin).model, param, regularisation="mujoco")


def test_a_bad_condim_is_refused_naming_the_shape():
    builder = wpsim.ModelBuilder()
    plane = builder.add_ground_plane()
    with pytest.raises(ValueError, match="shape 0: condim must be 1, 3, 4 or 6, got 2"):
        builder.set_shape_condim(plane, 2)
    with pytest.raises(ValueError, match="rolling friction must be finite and >= 0 m"):
        builder.set_shape_condim(plane, 6, rolling=-1.0)
