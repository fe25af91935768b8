"""MJCF and URDF import: the assets against MuJoCo on the same file, the same arm from
both formats and from the builder API, and clean errors for bad files (fuzzed too)."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.io.urdf import import_urdf

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOTS = ["cartpole", "arm_2link", "arm_7link", "quadruped"]


def rollout(model, steps, dt, forces=None, q0=None):
    """Joint coordinates after each step (float64 model), with per-step joint forces."""
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    if q0 is not None:
        a.joint_q.assign(q0)
    control = model.control()
    out = []
    for k in range(steps):
        if forces is not None:
            control.joint_f.assign(forces[k])
        solver.step(a, b, control, dt)
        a, b = b, a
        out.append(a.joint_q.numpy().copy())
    assert solver.health().ok
    return np.array(out)


@pytest.mark.parametrize("name, q0, steps", [("cartpole", [0.0, 0.2], 500), ("arm_2link", [0.5, -0.4], 500)])
def test_mjcf_assets_match_mujoco_on_the_same_file(name, q0, steps):
    mujoco = pytest.importorskip("mujoco")
    path = ASSETS / f"{name}.xml"
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    dt = scene.timestep
    forces = np.zeros((steps, model.joint_dof_count))
    ctrl = 2.0 * np.sin(np.arange(steps) * dt * 7.0)
    actuated = [model.joint_qd_start.numpy()[a["joint"]] for a in scene.actuators]
    forces[:, actuated[0]] = ctrl
    ours = rollout(model, steps, dt, forces, q0)

    mj = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(mj)
    data.qpos[:] = q0
    theirs = []
    for k in range(steps):
        data.ctrl[:] = 0.0
        data.ctrl[0] = ctrl[k]
        mujoco.mj_step(mj, data)
        theirs.append(data.qpos.copy())
    theirs = np.array(theirs)
    assert np.abs(theirs[-1] - q0).max() > 0.05
    assert np.abs(ours - theirs).max() < 1e-3


def arm_from_builder_api(links: int = 7) -> wpsim.ModelBuilder:
    """The 7-link arm of assets/make_robots.py, written with the builder API."""
    b = wpsim.ModelBuilder()
    length, parent, origin = 0.15, -1, (0.0, 0.0, 1.5)
    for k in range(links):
        mass = 1.0 / (k + 1)
        lateral = mass * length * length / 12.0
        body = b.add_body(mass=mass, com=(0.0, 0.0, -length / 2), inertia=(lateral, lateral, 1e-3 * mass))
        b.add_shape_capsule(body, pos=(0.0, 0.0, -length / 2), radius=0.03, half_height=length / 2, density=0.0)
        axis = (1.0, 0.0, 0.0) if k % 2 == 0 else (0.0, 1.0, 0.0)
        b.add_joint_revolute(parent, body, axis=axis, parent_pos=origin, damping=0.05, limit_lower=-2.5,
                             limit_upper=2.5)
        parent, origin = body, (0.0, 0.0, -length)
    return b


def test_arm_steps_identically_from_urdf_mjcf_and_the_builder_api():
    steps, dt = 300, 1e-3
    q0 = 0.3 * np.sin(np.arange(7) + 1.0)
    forces = 0.2 * np.cos(np.outer(np.arange(steps) * dt * 5.0, np.arange(1, 8)))
    runs = {
        "mjcf": import_mjcf(ASSETS / "arm_7link.xml")[0],
        "urdf": import_urdf(ASSETS / "arm_7link.urdf")[0],
        "api": arm_from_builder_api(),
    }
    q = {name: rollout(b.finalize(dtype=wp.float64), steps, dt, forces, q0) for name, b in runs.items()}
    assert np.abs(q["api"][-1] - q0).max() > 0.1
    assert np.abs(q["mjcf"] - q["api"]).max() < 1e-6
    assert np.abs(q["urdf"] - q["api"]).max() < 1e-6


def test_quadruped_from_either_format_stands_on_its_drives():
    for builder, scene in (import_mjcf(ASSETS / "quadruped.xml"),
                           import_urdf(ASSETS / "quadruped.urdf", floating=True, drive_ke=200.0, mu=1.0)):
        if not any(builder.shapes.array("shape_kind") == 0):
            builder.add_ground_plane(ke=1.0e4, kd=100.0, mu=1.0)
        model = builder.finalize(dtype=wp.float64)
        assert model.body_count == 13 and model.joint_dof_count == 18
        final = rollout(model, 1000, 5e-4)
        torso_height = final[-1, model.joint_q_start.numpy()[0] + 2]
        assert 0.2 < torso_height < 0.45  # standing on its legs, not fallen through the ground


# ---------------------------------------------------------------- bad files
BAD_MJCF = {
    "unknown joint type": ('<joint type="screw"/>', "unknown joint type \"screw\""),
    "free joint and another": ('<freejoint/><joint type="hinge"/>', "the only joint"),
    "unknown class": ('<joint type="hinge" class="nope"/>', "unknown default class \"nope\""),
    "two orientations": ('<joint type="hinge"/><geom type="box" size="1 1 1" quat="1 0 0 0" euler="0 0 1"/>',
                         "orientation twice"),
    "joint in frame": ('<frame><joint type="hinge"/></frame>', "cannot hold joints"),
    "missing include": ('<include file="nope.xml"/>', "included file \"nope.xml\" not found"),
    "bad number": ('<joint type="hinge" axis="1 0 x"/>', "is not a list of numbers"),
    "zero mass": ('<joint type="hinge"/><inertial pos="0 0 0" mass="0" diaginertia="1 1 1"/>', "positive"),
    "missing mesh": ('<joint type="hinge"/><geom type="mesh" mesh="nope"/>', "unknown mesh"),
    "unknown geom": ('<joint type="hinge"/><geom type="hfield" size="1 1 1"/>', "unknown geom type"),
    "impossible inertia": ('<joint type="hinge"/><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.3"/>',
                           "triangle inequality"),
}


@pytest.mark.parametrize("case", sorted(BAD_MJCF))
def test_bad_mjcf_names_file_and_element_and_adds_nothing(tmp_path, case):
    body, message = BAD_MJCF[case]
    path = tmp_path / "bad.xml"
    path.write_text(f'<mujoco><worldbody><body name="b1"><geom type="sphere" size="0.1"/></body>'
                    f'<body name="b2" pos="1 0 0">{body}<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=message) as error:
        import_mjcf(path, builder)
    assert str(path) in str(error.value)
    assert builder.bodies.count == 0 and builder.joints.count == 0 and builder.shapes.count == 0


def test_a_massless_body_welded_to_its_parent_loads_as_in_mujoco(tmp_path):
    """A welded base with ``<inertial mass="0">`` (robosuite's ur5e and panda robot files) loads
    and its arm swings, as in MuJoCo; mass 0 on a body with a joint is still refused."""
    path = tmp_path / "robot.xml"
    path.write_text('<mujoco><worldbody><body name="base"><inertial pos="0 0 0" mass="0" diaginertia="0 0 0"/>'
                    '<body name="link" pos="0 0 1"><joint name="hinge" type="hinge" axis="0 1 0"/>'
                    '<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" contype="0" conaffinity="0"/>'
                    '</body></body></worldbody></mujoco>')
    builder, _ = import_mjcf(path)
    model = builder.finalize(device="cpu", dtype=wp.float64)
    assert model.joint_dof_count == 1
    final = rollout(model, 200, 1e-3)
    assert final[-1, 0] > 0.05  # the horizontal link falls under gravity (x cross -z: about +y)


BAD_URDF = {
    "unknown joint type": ('<joint name="j" type="screw"><parent link="a"/><child link="b"/></joint>',
                           "unknown joint type"),
    "unknown link": ('<joint name="j" type="fixed"><parent link="a"/><child link="zz"/></joint>', "unknown link"),
    "missing mesh": ('<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>'
                     '<link name="c"><collision><geometry><mesh filename="missing.stl"/></geometry></collision></link>',
                     "not found"),
    "url mesh": ('<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>'
                 '<link name="c"><collision><geometry><mesh filename="package://x/y.stl"/></geometry></collision></link>',
                 "is a URL"),
    "zero inertia": ('<joint name="j" type="revolute"><parent link="a"/><child link="e"/></joint>'
                     '<link name="e"><inertial><mass value="0"/><inertia ixx="0" iyy="0" izz="0"/></inertial></link>',
                     '<link name="e">: a moving link that carries no other needs a positive mass'),  # was finalize's
    "cycle": ('<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>'
              '<joint name="k" type="fixed"><parent link="b"/><child link="a"/></joint>', "cycle"),
}


@pytest.mark.parametrize("case", sorted(BAD_URDF))
def test_bad_urdf_names_file_and_element_and_adds_nothing(tmp_path, case):
    body, message = BAD_URDF[case]
    inertial = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>'
    path = tmp_path / "bad.urdf"
    path.write_text(f'<robot name="r"><link name="a">{inertial}</link><link name="b">{inertial}</link>{body}</robot>')
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=message) as error:
        import_urdf(path, builder)
    assert str(path) in str(error.value)
    assert builder.bodies.count == 0 and builder.joints.count == 0 and builder.shapes.count == 0


@pytest.mark.parametrize("name", [f"{r}{s}" for r in ROBOTS for s in (".xml", ".urdf")])
def test_truncated_and_corrupted_files_fail_cleanly(tmp_path, name):
    """Every cut and byte corruption of each asset either imports or raises ValueError
    naming the file; the builder is left empty on error."""
    text = (ASSETS / name).read_bytes()
    rng = np.random.default_rng(len(name))
    variants = [text[: int(f * len(text))] for f in (0.0, 0.1, 0.37, 0.5, 0.81, 0.99)]
    for _ in range(12):
        corrupt = bytearray(text)
        for i in rng.integers(0, len(text), 3):
            corrupt[i] = int(rng.choice(list(b'<>"/=x9 -')))
        variants.append(bytes(corrupt))
    importer = import_mjcf if name.endswith(".xml") else import_urdf
    for k, data in enumerate(variants):
        path = tmp_path / f"v{k}_{name}"
        path.write_bytes(data)
        builder = wpsim.ModelBuilder()
        try:
            importer(path, builder)
        except ValueError as error:
            assert str(path) in str(error)
            assert builder.bodies.count == 0 and builder.shapes.count == 0


def test_mjcf_box_fromto_and_cylinder_mass_match_mujoco(tmp_path):
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "shapes.xml"
    path.write_text('<mujoco><worldbody>'
                    '<body name="a"><freejoint/><geom type="box" size="0.05" fromto="0 0 0 0 0 0.4"/></body>'
                    '<body name="b" pos="1 0 0"><freejoint/><geom type="cylinder" size="0.3 0.02"/></body>'
                    '</worldbody></mujoco>')
    model = import_mjcf(path)[0].finalize(dtype=wp.float64)
    mj = mujoco.MjModel.from_xml_path(str(path))
    assert np.allclose(model.body_mass.numpy(), mj.body_mass[1:], rtol=1e-9)
    assert np.allclose(model.shape_size.numpy()[0], (0.05, 0.05, 0.2))


def test_urdf_limit_with_one_bound_and_world_as_child(tmp_path):
    inertial = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>'
    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r"><link name="world"/><link name="a">{inertial}</link>'
                    '<joint name="j" type="revolute"><parent link="world"/><child link="a"/><limit upper="1"/></joint>'
                    '</robot>')
    model = import_urdf(path)[0].finalize(dtype=wp.float64)
    assert model.joint_limit_lower.numpy()[0] == 0.0 and model.joint_limit_upper.numpy()[0] == 1.0
    path.write_text(f'<robot name="r"><link name="world"/><link name="a">{inertial}</link>'
                    '<joint name="j" type="fixed"><parent link="a"/><child link="world"/></joint></robot>')
    with pytest.raises(ValueError, match="world link cannot be a child"):
        import_urdf(path)


# ---------------------------------------------------------------- MJCF features against MuJoCo
FEATURES_MAIN = """<mujoco model="features">
  <compiler angle="degree" eulerseq="zyx"/>
  <option timestep="0.002"/>
  <default>
    <joint damping="0.05" armature="0.01"/>
    <geom density="500"/>
    <default class="limb">
      <geom type="capsule" size="0.03"/>
      <joint axis="0 1 0"/>
      <default class="finger"><joint damping="0.02" axis="1 0 0"/></default>
    </default>
  </default>
  <worldbody><include file="parts/arm.xml"/></worldbody>
</mujoco>"""
FEATURES_ARM = """<mujoco>
  <body name="base" pos="0 0 1" euler="10 20 30" childclass="limb">
    <joint name="h1" pos="0 0 0.05"/>
    <joint name="h2" axis="0 0 1" pos="0.02 0 0"/>
    <joint name="s1" type="slide" axis="1 1 0"/>
    <geom fromto="0 0 0 0.3 0 0"/>
    <frame pos="0.3 0 0" axisangle="0 0 1 30">
      <body name="mid" xyaxes="0 1 0 -1 0 1">
        <joint name="h3" class="finger" ref="15"/>
        <geom fromto="0 0 0 0 0 -0.25"/>
        <frame pos="0.01 0 0" euler="0 0 20" childclass="finger">
          <body name="tip" pos="0 0 -0.25" zaxis="1 1 1">
            <joint name="b1" type="ball"/>
            <geom type="box" size="0.05 0.03 0.02" quat="0.9 0.1 0.2 0.3"/>
            <geom type="cylinder" size="0.04 0.01" pos="0.05 0 0" contype="0" conaffinity="0"/>
          </body>
        </frame>
      </body>
    </frame>
  </body>
</mujoco>"""


def write_features(tmp_path) -> Path:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "arm.xml").write_text(FEATURES_ARM)
    path = tmp_path / "main.xml"
    path.write_text(FEATURES_MAIN)
    return path


def test_mjcf_features_match_mujoco(tmp_path):
    """Several joints in one body, default classes (inherited, childclass of bodies and
    frames), an include, nested frames, every orientation form, joint ref and a geom that weighs but does not collide:
    the same file rolled out by MuJoCo and by wpsim agrees to round-off."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = write_features(tmp_path)
    builder, scene = import_mjcf(path)
    assert list(scene.joints) == ["h1", "h2", "s1", "h3", "b1"] and not scene.unhonoured
    assert builder.bodies.count == 5  # base, mid, tip and two massless intermediate bodies of base
    ours, theirs, q0 = rollouts(path, steps=400)
    assert np.abs(theirs[-1] - q0).max() > 0.1
    assert np.abs(ours - theirs).max() < 1e-8


def test_mjcf_include_is_relative_to_the_including_file_and_refuses_cycles(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "leg.xml").write_text('<mujoco><include file="foot.xml"/></mujoco>')
    (tmp_path / "a" / "foot.xml").write_text('<mujoco><body name="foot"><freejoint/>'
                                             '<geom type="sphere" size="0.1"/></body></mujoco>')
    path = tmp_path / "main.xml"
    path.write_text('<mujoco><worldbody><include file="a/leg.xml"/></worldbody></mujoco>')
    assert list(import_mjcf(path)[1].bodies) == ["foot"]
    (tmp_path / "a" / "foot.xml").write_text('<mujoco><include file="leg.xml"/></mujoco>')
    with pytest.raises(ValueError, match="closes an include cycle") as error:
        import_mjcf(path)
    assert str(error.value).startswith(f"{tmp_path / 'a' / 'foot.xml'}: <include>") and "(line 1)" in str(error.value)


UNHONOURED = """<mujoco>
  <option integrator="RK4" noslip_iterations="2"/>
  <default><joint springdamper="0.1 0.5"/></default>
  <worldbody>
    <body name="b">
      <joint name="j" margin="0.01"/>
      <geom type="sphere" size="0.1" fluidshape="ellipsoid"/>
      <site name="s"/><site name="s2" pos="0 0 0.1"/>
    </body>
  </worldbody>
  <tendon><spatial name="t" frictionloss="0.1"><site site="s"/><site site="s2"/></spatial></tendon>
  <equality><weld body1="b" torquescale="2"/></equality>
  <actuator><velocity joint="j" kv="1" ctrlrange="-1 1" ctrllimited="true"/></actuator>
  <sensor><jointpos joint="j"/></sensor>
</mujoco>"""


def test_mjcf_reports_every_unhonoured_feature_once_with_file_and_line(tmp_path):
    path = tmp_path / "unhonoured.xml"
    path.write_text(UNHONOURED)
    with pytest.warns(UserWarning) as record:
        _, scene = import_mjcf(path)
    ours = [w for w in record if str(path) in str(w.message)]
    assert len(ours) == 1
    found = {(u.line, u.element, u.attribute) for u in scene.unhonoured}
    assert found == {(2, "<option>", "integrator"), (2, "<option>", "noslip_iterations"), (3, "<joint>", "springdamper"),
                     (6, "<joint>", "margin"), (7, "<geom>", "fluidshape"), (11, "<spatial>", "frictionloss"),
                     (12, "<weld>", "torquescale"), (13, "<velocity>", "ctrlrange"),
                     (14, "<sensor>", None)}
    assert all(u.file == str(path) for u in scene.unhonoured)
    assert f"{path}:6: <joint> margin=\"0.01\" is not honoured" in str(ours[0].message)


def test_mjcf_gravity_in_any_direction(tmp_path):
    """A file's gravity off the up axis is kept as the vector it is (a free ball falls along
    it), along the up axis as a number."""
    path = tmp_path / "g.xml"
    body = '<worldbody><body><freejoint/><geom type="sphere" size="0.1"/></body></worldbody>'
    path.write_text(f'<mujoco><option gravity="1e-5 0 -9.81"/>{body}</mujoco>')
    builder, scene = import_mjcf(path)
    assert builder.gravity == (1e-5, 0.0, -9.81) and scene.unhonoured == []
    path.write_text(f'<mujoco><option gravity="0 -9.81 0"/>{body}</mujoco>')
    builder, _ = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    final = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 100, 1e-3)
    np.testing.assert_allclose(final.joint_q.numpy()[:3], [0.0, -0.5 * 9.81 * 0.1 * 0.101, 0.0], rtol=1e-12, atol=1e-15)
    assert import_mjcf(path, wpsim.ModelBuilder(up_axis="y"))[0].gravity == -9.81


def test_a_body_with_several_joints_does_not_touch_its_parent(tmp_path):
    """The massless intermediate bodies that compose a body's joints keep MuJoCo's rule that
    a body and its parent do not collide, even with articulation self-contact on."""
    path = tmp_path / "two.xml"
    path.write_text('<mujoco><worldbody><body name="a"><freejoint/><geom type="sphere" size="0.2"/>'
                    '<body name="b" pos="0.1 0 0"><joint type="hinge"/><joint type="hinge" axis="0 1 0"/>'
                    '<geom type="sphere" size="0.2"/><body name="c" pos="0.1 0 0"><joint/>'
                    '<geom type="sphere" size="0.2"/></body></body></body></worldbody></mujoco>')
    builder, scene = import_mjcf(path)
    builder.articulation_self_contact = True
    shape_body = builder.shapes.array("shape_body")
    pairs = {tuple(sorted(shape_body[p])) for p in builder.finalize().contact_pair.numpy()}
    a, b, c = (scene.bodies[n] for n in "abc")
    assert pairs == {tuple(sorted((a, c)))}


def test_mjcf_general_actuators_position_kv_and_contact_excludes(tmp_path):
    """<general> servos map onto motors and drives (gain, kp, kv), a position actuator's kv
    becomes the drive's velocity gain, an unmappable general law is refused naming it, and
    <contact><exclude> removes the bodies' shape pairs."""
    path = tmp_path / "a.xml"
    path.write_text("""<mujoco><worldbody><geom type="plane" size="1 1 0.1"/>
      <body name="a" pos="0 0 1"><joint name="j1" type="hinge"/><geom type="sphere" size="0.1"/>
        <body name="b" pos="0 0 -0.3"><joint name="j2" type="hinge"/><geom type="sphere" size="0.1"/>
          <body name="c" pos="0 0 -0.3"><joint name="j3" type="hinge"/><geom type="sphere" size="0.1"/>
            <body name="d" pos="0 0 -0.3"><joint name="j4" type="slide"/><geom type="sphere" size="0.1"/></body>
          </body></body></body></worldbody>
      <contact><exclude body1="world" body2="d"/></contact>
      <actuator><general joint="j1" gainprm="30" biastype="affine" biasprm="0 -30 -2"/>
        <general joint="j2" gear="2" gainprm="5"/><general joint="j3" gainprm="4" biastype="affine" biasprm="0 0 -4"/>
        <position joint="j4" kp="50" kv="3"/></actuator></mujoco>""")
    builder, scene = import_mjcf(path)
    model = builder.finalize()
    assert [a["kind"] for a in scene.actuators] == ["position", "motor", "velocity", "position"]
    assert scene.actuators[1]["gear"] == 10.0
    np.testing.assert_allclose(model.joint_target_ke.numpy(), [30.0, 0.0, 0.0, 50.0])
    np.testing.assert_allclose(model.joint_target_kd.numpy(), [2.0, 0.0, 4.0, 3.0])
    shape_body = model.shape_body.numpy()
    plane, c_shape, d_shape = (int(np.flatnonzero(shape_body == body)[0]) for body in (-1, scene.bodies["c"],
                                                                                        scene.bodies["d"]))
    pairs = {tuple(sorted(p)) for p in model.contact_pair.numpy().tolist()}
    assert tuple(sorted((d_shape, plane))) not in pairs  # excluded
    assert tuple(sorted((c_shape, plane))) in pairs  # kept
    path.write_text(path.read_text().replace('biasprm="0 0 -4"', 'biasprm="1 0 -4"'))
    with pytest.raises(ValueError, match="not a motor, position or velocity servo"):
        import_mjcf(path)


MUJOCO_CONTACT = {"time_constant": 0.02, "damping_ratio": 1.0, "impedance": 0.95, "impedance_min": 0.9,
                  "impedance_width": 0.001, "impedance_midpoint": 0.5, "impedance_power": 2.0,
                  "regularisation": "mujoco", "implicit_terms": "after solve", "impratio": 1.0,
                  "friction_mixing": "mujoco"}
"""The soft-contact settings of an MJCF file whose geoms set none: MuJoCo's defaults."""


def test_mjcf_solref_and_solimp_set_the_soft_contact(tmp_path):
    """The geoms' common solref / solimp become the scene's soft-contact settings (time
    constant, damping ratio, impedance curve: solimp's dmax, dmin, width, midpoint and power,
    MuJoCo's defaults 0.5 and 2 for the last two); a geom that differs, here in the direct
    (negative) solref form, keeps its own on its shape."""
    path = tmp_path / "s.xml"
    geoms = ('<geom type="plane" size="1 1 0.1"/>'
             '<body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>'
             '<body pos="1 0 1"><freejoint/><geom type="sphere" size="0.1" solref="-1000 -10"/></body>')
    path.write_text('<mujoco><default><geom solref="0.01 0.8" solimp="0.8 0.9 0.002"/></default>'
                    f'<worldbody>{geoms}</worldbody></mujoco>')
    builder, scene = import_mjcf(path)
    assert scene.contact_settings == {"time_constant": 0.01, "damping_ratio": 0.8, "impedance": 0.9,
                                      "impedance_min": 0.8, "impedance_width": 0.002, "impedance_midpoint": 0.5,
                                      "impedance_power": 2.0, "regularisation": "mujoco", "implicit_terms": "after solve", "impratio": 1.0,
                  "friction_mixing": "mujoco"}
    assert scene.unhonoured == []
    wpsim.SoftContactOptions(**scene.contact_settings)  # usable as given
    model = builder.finalize()
    np.testing.assert_array_equal(model.shape_solref.numpy(), [[0.0, 0.0], [0.0, 0.0], [-1000.0, -10.0]])
    np.testing.assert_allclose(model.shape_solimp.numpy()[2], [0.8, 0.9, 0.002, 0.5, 2.0])
    plain = geoms.replace(' solref="-1000 -10"', "")
    path.write_text(f"<mujoco><worldbody>{plain}</worldbody></mujoco>")
    builder, scene = import_mjcf(path)  # MuJoCo's defaults
    assert scene.contact_settings == MUJOCO_CONTACT
    assert not builder.finalize().shape_solref.numpy().any()


def test_mjcf_solimp_is_clipped_as_mujoco_clips_it(tmp_path):
    """solimp's impedances are clipped to MuJoCo's range [1e-4, 0.9999], so a file's dmax of 1
    (the Menagerie Go1's feet: "0.015 1 0.023") is a contact as hard as MuJoCo makes it, not
    a setting dropped for wpsim's defaults; an impedance falling with depth (dmin > dmax)
    is the geoms' own."""
    path = tmp_path / "s.xml"
    ball = '<body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>'
    path.write_text('<mujoco><default><geom solimp="0.015 1 0.023"/></default>'
                    f'<worldbody><geom type="plane" size="1 1 0.1"/>{ball}</worldbody></mujoco>')
    _, scene = import_mjcf(path)
    assert scene.contact_settings == {"time_constant": 0.02, "damping_ratio": 1.0, "impedance": 0.9999,
                                      "impedance_min": 0.015, "impedance_width": 0.023, "impedance_midpoint": 0.5,
                                      "impedance_power": 2.0, "regularisation": "mujoco", "implicit_terms": "after solve", "impratio": 1.0,
                  "friction_mixing": "mujoco"}
    assert scene.unhonoured == []
    wpsim.SoftContactOptions(**scene.contact_settings)
    path.write_text('<mujoco><default><geom solimp="0 0 0.001 2 0.5"/></default>'
                    f'<worldbody><geom type="plane" size="1 1 0.1"/>{ball}</worldbody></mujoco>')
    _, scene = import_mjcf(path)
    assert scene.contact_settings == {"time_constant": 0.02, "damping_ratio": 1.0, "impedance": 1e-4,
                                      "impedance_min": 1e-4, "impedance_width": 0.001, "impedance_midpoint": 0.9999,
                                      "impedance_power": 1.0, "regularisation": "mujoco", "implicit_terms": "after solve", "impratio": 1.0,
                  "friction_mixing": "mujoco"}
    path.write_text('<mujoco><default><geom solimp="0.95 0.5 0.001"/></default>'
                    f'<worldbody><geom type="plane" size="1 1 0.1"/>{ball}</worldbody></mujoco>')
    builder, scene = import_mjcf(path)  # the solve's settings cannot fall with depth; a shape's can
    assert scene.contact_settings == MUJOCO_CONTACT and scene.unhonoured == []
    np.testing.assert_allclose(builder.finalize().shape_solimp.numpy(), [[0.95, 0.5, 0.001, 0.5, 2.0]] * 2)


@pytest.mark.parametrize("name", ["m/tet.obj", "tet.obj"])
def test_a_mesh_of_an_included_file_is_found_under_meshdir_or_the_model_folder(tmp_path, name):
    """An included file with ``<compiler meshdir="m">`` naming its mesh "m/tet.obj" (as
    Menagerie's MJX Panda does) or "tet.obj": MuJoCo loads both through the include, and so
    does the importer (the mesh collides, with the tetrahedron's volume); a file found in
    neither folder is named with both."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "tet.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    (tmp_path / "sub.xml").write_text(f'<mujoco><compiler meshdir="m"/><asset><mesh name="tet" file="{name}"/></asset>'
                                      '<worldbody><body><freejoint/><geom type="mesh" mesh="tet" density="600"/>'
                                      '</body></worldbody></mujoco>')
    (tmp_path / "main.xml").write_text('<mujoco><include file="sub.xml"/></mujoco>')
    builder, _ = import_mjcf(tmp_path / "main.xml")
    assert builder.body_count == 1
    assert builder.finalize().body_mass.numpy()[0] == pytest.approx(600.0 / 6.0, rel=1e-6)
    (tmp_path / "sub.xml").write_text((tmp_path / "sub.xml").read_text().replace(name, "gone.obj"))
    with pytest.raises(wpsim.io.scene_parsing.SceneFileError, match=r"gone.obj.*not found.*m/gone.obj, .*gone.obj"):
        import_mjcf(tmp_path / "main.xml")
