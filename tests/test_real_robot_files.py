"""What real robot files need beyond the MJCF/URDF subset: open collision meshes (convex
hulls, reported), drawn-only meshes that never block an import, MuJoCo's contype /
conaffinity bits, sections repeated across includes, actuators on transmissions wpsim does
not have, pybullet's URDF liberties (spherical joints, impossible inertias). Closed loops
(couplings, connections, welds) are in test_closed_loops."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.io.mesh_files import load_collision_surface, load_triangles
from wpsim.io.mjcf import import_mjcf
from wpsim.io.urdf import import_urdf

OPEN_BOX_FACES = [(1, 3, 2), (1, 4, 3), (1, 2, 6), (1, 6, 5), (4, 8, 7), (4, 7, 3), (1, 5, 8), (1, 8, 4),
                  (2, 3, 7), (2, 7, 6)]  # a unit cube without its top: an open surface


def write_open_box(path: Path, half: float = 0.1) -> Path:
    """A cube of half extent ``half`` (m) missing its top face, as OBJ."""
    corners = [(x, y, z) for z in (-1, 1) for (x, y) in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    path.write_text("".join(f"v {x * half} {y * half} {z * half}\n" for x, y, z in corners)
                    + "".join(f"f {a} {b} {c}\n" for a, b, c in OPEN_BOX_FACES))
    return path


def quiet(fn, *args, **kwargs):
    """``fn(*args)`` with the importers' one warning recorded: (result, warning texts)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, [str(w.message) for w in caught]


# ---------------------------------------------------------------- mesh files
def test_an_open_surface_collides_and_weighs_as_its_convex_hull_and_says_so(tmp_path):
    mesh, note = load_collision_surface(write_open_box(tmp_path / "open.obj"))
    assert "open" in note and "convex hull" in note
    assert len(mesh.vertices) == 8 and mesh.volume == pytest.approx(0.008, rel=1e-9)
    closed, none = load_collision_surface(Path(__file__).resolve().parents[1] / "assets" / "cube.obj")
    assert none is None and len(closed.faces) == 12  # a closed file is kept as it is


def test_a_flat_surface_has_no_hull_and_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "flat.obj"
    path.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 3\nf 2 4 3\n")
    with pytest.raises(ValueError, match="flat.obj.*(hull|flat)"):
        load_collision_surface(path)


def test_a_mirroring_scale_keeps_the_surface_outward(tmp_path):
    from wpsim.core.meshing import signed_volume

    path = write_open_box(tmp_path / "open.obj")
    mirrored = load_triangles(path, (-1.0, 1.0, 1.0))
    plain = load_triangles(path)
    assert np.allclose(mirrored.vertices[:, 0], -plain.vertices[:, 0])
    hull, _ = load_collision_surface(path, (-2.0, 1.0, 1.0))
    assert signed_volume(np.asarray(hull.vertices), np.asarray(hull.faces)) == pytest.approx(0.016, rel=1e-9)
    with pytest.raises(ValueError, match="scale"):
        load_triangles(path, (0.0, 1.0, 1.0))


# ---------------------------------------------------------------- MJCF
def mjcf(tmp_path: Path, body: str, assets: str = "", extra: str = "", name: str = "robot.xml") -> Path:
    path = tmp_path / name
    path.write_text(f'<mujoco><asset>{assets}</asset><worldbody>{body}</worldbody>{extra}</mujoco>')
    return path


def test_mjcf_open_collision_mesh_imports_as_hull_and_visual_meshes_are_drawn_only(tmp_path):
    write_open_box(tmp_path / "shell.obj")
    path = mjcf(tmp_path, '<body name="b"><freejoint/>'
                          '<geom type="mesh" mesh="shell"/>'
                          '<geom type="mesh" mesh="look" contype="0" conaffinity="0" density="0"/>'
                          '<geom type="mesh" mesh="gone" contype="0" conaffinity="0" density="0"/></body>',
                '<mesh name="shell" file="shell.obj"/><mesh name="look" file="shell.obj" scale="2 2 2"/>'
                '<mesh name="gone" file="missing.obj"/>')
    (builder, scene), texts = quiet(import_mjcf, path)
    assert builder.shapes.count == 1  # only the colliding geom
    assert builder.bodies.array("body_mass")[0] == pytest.approx(8.0, rel=1e-9)  # the 0.2 m hull at 1000 kg/m^3
    notes = [str(u) for u in scene.unhonoured]
    assert any("shell.obj" in n and "convex hull" in n for n in notes)
    assert any("gone" in n and "is not drawn" in n for n in notes)  # a missing drawn-only mesh never blocks
    (body, pose, vertices, faces), = builder.visual_meshes
    assert body == 0 and np.ptp(vertices, axis=0) == pytest.approx([0.4, 0.4, 0.4])
    assert len(texts) == 1
    model = builder.finalize()
    assert len(model.visual_meshes) == 1


def test_visual_meshes_are_drawn_and_exported(tmp_path):
    from pxr import Usd

    from wpsim.io.render import SceneRenderer
    from wpsim.io.usd_export import UsdRecorder

    write_open_box(tmp_path / "shell.obj", half=0.3)
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    builder.add_joint_free(body, pos=(0.0, 0.0, 1.0))
    builder.add_shape_sphere(body, radius=0.05)
    mesh = load_triangles(tmp_path / "shell.obj")
    builder.add_visual_mesh(body, mesh.vertices, mesh.faces, pos=(0.5, 0.0, 0.0))
    with pytest.raises(ValueError, match="visual mesh 1: a face refers"):
        builder.add_visual_mesh(body, mesh.vertices, [[0, 1, 99]])
    model = builder.finalize()
    renderer = SceneRenderer(model, 32, 24)
    lower, upper = renderer.bounds(model.state())
    assert upper[0] == pytest.approx(0.8, abs=1e-6) and upper[2] == pytest.approx(1.3, abs=1e-6)
    recorder = UsdRecorder(model, fps=30)
    recorder.record(model.state())
    out = recorder.write(tmp_path / "run.usda")
    stage = Usd.Stage.Open(str(out))
    prims = [p for p in stage.Traverse() if p.GetName() == "visual_0"]
    assert len(prims) == 1 and prims[0].GetAttribute("purpose").Get() == "render"


def test_mjcf_contype_conaffinity_bits_filter_contacts_as_mujoco(tmp_path):
    mujoco = pytest.importorskip("mujoco")
    body = ('<geom name="floor" type="plane" size="5 5 .1" contype="{f0}" conaffinity="{f1}"/>'
            '<body pos="0 0 0.05"><freejoint/><geom type="sphere" size="0.1" contype="{a0}" conaffinity="{a1}"/></body>'
            '<body pos="0.05 0 0.05"><freejoint/><geom type="sphere" size="0.1" contype="{b0}" conaffinity="{b1}"/>'
            '</body>')
    for bits in ((1, 1, 1, 1, 1, 1), (0, 1, 0, 1, 0, 1), (1, 0, 2, 1, 2, 2), (1, 1, 2, 2, 4, 2)):
        path = mjcf(tmp_path, body.format(**dict(zip(("f0", "f1", "a0", "a1", "b0", "b1"), map(str, bits)))))
        (builder, _), _ = quiet(import_mjcf, path)
        theirs = mujoco.MjModel.from_xml_path(str(path))
        data = mujoco.MjData(theirs)
        mujoco.mj_forward(theirs, data)
        assert builder.finalize().contact_pair_count == data.ncon, bits


def test_mjcf_sections_repeated_by_includes_are_all_read(tmp_path):
    (tmp_path / "robot.xml").write_text(
        '<mujoco><worldbody><body name="b" pos="0 0 1"><joint name="j" type="hinge"/>'
        '<geom type="capsule" size="0.05 0.2"/></body></worldbody>'
        '<actuator><motor joint="j" gear="2"/></actuator></mujoco>')
    path = tmp_path / "scene.xml"
    path.write_text('<mujoco><include file="robot.xml"/><worldbody><geom name="floor" type="plane" size="5 5 .1"/>'
                    '</worldbody><actuator><motor name="second" joint="j"/></actuator></mujoco>')
    (builder, scene), _ = quiet(import_mjcf, path)
    assert builder.shapes.count == 2  # the capsule and the scene's floor
    assert [a["name"] for a in scene.actuators] == ["actuator0", "second"]


def test_mjcf_quaternion_w_zero_is_a_half_turn(tmp_path):
    path = mjcf(tmp_path, '<body quat="0 0 0 1" pos="0 0 1"><joint type="hinge"/>'
                          '<geom type="box" size="0.1 0.2 0.3" pos="1 0 0"/></body>')
    (builder, _), _ = quiet(import_mjcf, path)
    model = builder.finalize(dtype=wp.float64)
    from wpsim.solvers.kinematics import eval_fk

    body_q = eval_fk(model, model.state()).body_q.numpy()[0]
    assert np.allclose(body_q[3:], [0.0, 0.0, 1.0, 0.0], atol=1e-12)


def test_mjcf_actuator_on_a_tendon_is_dropped_and_listed(tmp_path):
    path = mjcf(tmp_path, '<body><joint name="j" type="hinge"/><geom type="sphere" size="0.1"/></body>',
                extra='<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
                      '<actuator><motor tendon="t"/><motor joint="j"/></actuator>')
    (builder, scene), _ = quiet(import_mjcf, path)
    assert len(scene.actuators) == 1
    notes = [str(u) for u in scene.unhonoured]
    assert any('tendon="t"' in n for n in notes)
    bad = mjcf(tmp_path, '<body><joint name="j" type="hinge"/><geom type="sphere" size="0.1"/></body>',
               extra='<actuator><motor/></actuator>', name="bad.xml")
    with pytest.raises(ValueError, match="unknown joint"):
        quiet(import_mjcf, bad)


# ---------------------------------------------------------------- URDF
INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1"/></inertial>'


def test_urdf_open_mesh_is_its_hull_and_reported_once(tmp_path):
    write_open_box(tmp_path / "open.obj")
    path = tmp_path / "r.urdf"
    collision = '<collision><geometry><mesh filename="open.obj"/></geometry></collision>'
    path.write_text(f'<robot name="r"><link name="a">{INERTIAL}{collision}{collision}</link></robot>')
    (builder, scene), _ = quiet(import_urdf, path)
    assert builder.shapes.count == 2
    notes = [str(u) for u in scene.unhonoured if "open.obj" in str(u)]
    assert len(notes) == 1 and "convex hull" in notes[0]


def test_urdf_spherical_joint_is_a_ball_joint_without_limits(tmp_path):
    from wpsim.kernels.enums import JOINT_BALL

    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r"><link name="a">{INERTIAL}</link><link name="b">{INERTIAL}</link>'
                    '<joint name="neck" type="spherical"><parent link="a"/><child link="b"/>'
                    '<limit lower="0.2" upper="0.8"/></joint></robot>')
    (builder, scene), _ = quiet(import_urdf, path)
    assert builder.joints.array("joint_type")[scene.joints["neck"]] == JOINT_BALL
    assert any("no limits" in str(u) for u in scene.unhonoured)


def test_urdf_impossible_inertia_is_raised_to_the_nearest_physical_one_and_listed(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text('<robot name="r"><link name="a"><inertial><mass value="1"/>'
                    '<inertia ixx="1" iyy="1" izz="3" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>')
    (builder, scene), _ = quiet(import_urdf, path, floating=True)
    moments = np.linalg.eigvalsh(builder.bodies.array("body_inertia")[0])
    assert moments == pytest.approx([1.5, 1.5, 3.0], rel=1e-9)
    assert any("triangle inequality" in str(u) and "0.5" in str(u) for u in scene.unhonoured)
    builder.finalize()


# ---------------------------------------------------------------- actuator ranges and limits
SERVO_ARM = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="{integrator}"/>
  <default><joint damping="0.5" armature="0.01"/></default>
  <worldbody>
    <body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0" range="-2 2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <body name="lower" pos="0.3 0 0"><joint name="elbow" type="hinge" axis="0 1 0" range="0.5 2.5"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="wrist" pos="0.3 0 0"><joint name="twist" type="hinge" axis="1 0 0"
            actuatorfrcrange="-0.2 0.2"/><geom type="box" size="0.05 0.02 0.02"/></body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position joint="shoulder" kp="50" kv="{kv}" forcerange="-4 4"/>
    <position joint="elbow" kp="80" inheritrange="0.5"/>
    <motor joint="twist" gear="2" ctrlrange="-1 1"/>
  </actuator>
</mujoco>"""


@pytest.mark.parametrize("integrator, kv", [("Euler", 0.0), ("Euler", 2.0), ("implicitfast", 2.0)])
def test_mjcf_control_and_force_ranges_step_like_mujoco(tmp_path, integrator, kv):
    """Zero controls outside the elbow's inherited range (its target is clamped to 1.0 ...
    2.0 rad), a shoulder servo saturating at 4 N m, and the twist's joint force range: wpsim
    follows MuJoCo to 1e-9 over 500 steps (contact and limits off in both). A servo's kv is
    explicit under Euler and implicit under implicitfast, in both simulators."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = tmp_path / "arm.xml"
    path.write_text(SERVO_ARM.format(integrator=integrator, kv=kv))
    (builder, scene), _ = quiet(import_mjcf, path)
    dofs = builder.joint_dofs
    assert dofs.array("joint_target_lower")[1] == pytest.approx(1.0) and dofs.array("joint_target_upper")[1] == 2.0
    assert dofs.array("joint_drive_force_limit")[0] == 4.0
    assert (dofs.array("joint_f_lower")[2], dofs.array("joint_f_upper")[2]) == (-0.2, 0.2)  # 2 x [-1, 1] meets +-0.2
    ours, theirs, q0 = rollouts(path, steps=500, seed=3)
    assert np.abs(theirs[-1] - q0).max() > 0.3
    assert np.abs(ours - theirs).max() < 1e-9


DAMPED_CHAIN = """<mujoco><option timestep="0.004"><flag eulerdamp="{eulerdamp}"/></option><worldbody>
<body pos="0 0 1"><joint type="hinge" axis="0 1 0" damping="0.8" frictionloss="0.02"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
<body pos="0.3 0 0"><joint type="hinge" axis="0 1 0" damping="0.3"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body></body></worldbody></mujoco>"""


@pytest.mark.parametrize("eulerdamp", ["enable", "disable"])
def test_joint_damping_follows_mujocos_eulerdamp(tmp_path, eulerdamp):
    """Joint damping is implicit under Euler, explicit with ``eulerdamp="disable"``
    (``set_joint_damping_explicit``), as in MuJoCo: a damped chain with dry friction follows
    MuJoCo to 1e-12 rad over 500 steps either way (measured 2.2e-16 both), and the
    flag is honoured (not listed)."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import rollouts

    path = tmp_path / "chain.xml"
    path.write_text(DAMPED_CHAIN.format(eulerdamp=eulerdamp))
    (builder, scene), _ = quiet(import_mjcf, path)
    assert scene.unhonoured == []
    implicit = builder.joint_dofs.array("joint_damping_implicit")
    assert np.all(implicit == (0.0 if eulerdamp == "disable" else 1.0))
    ours, theirs, q0 = rollouts(path, steps=500, seed=3)
    assert np.abs(theirs[-1] - q0).max() > 0.1
    assert np.abs(ours - theirs).max() < 1e-12


def test_control_ranges_clamp_what_a_controller_writes():
    builder = wpsim.ModelBuilder(gravity=0.0)
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.1)
    joint = builder.add_joint_revolute(-1, body, axis=(0.0, 0.0, 1.0))
    builder.set_control_range(joint, force=(-0.5, 0.25))
    with pytest.raises(ValueError, match="is empty"):
        builder.set_control_range(joint, target=(1.0, 0.0))
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    for command, applied in ((3.0, 0.25), (-3.0, -0.5), (0.1, 0.1)):
        state, spare, control = model.state(), model.state(), model.control()
        control.joint_f.assign([command])
        solver.step(state, spare, control, 0.01)
        assert spare.joint_qd.numpy()[0] == pytest.approx(applied * 0.01 / 0.1, rel=1e-9)


@pytest.mark.parametrize("inertia", [1e-6, 1e-2, 10.0])
def test_penalty_limits_are_stable_whatever_the_link_inertia(inertia):
    """A link of any inertia driven at 5 rad/s into 1e4 N m/rad penalty limits at 0.02 s steps
    (the explicit spring blew up below ~1e-1 kg m^2): it stays between its limits, overshooting
    by at most the impact's v/omega, and gains no energy."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * inertia)
    builder.add_joint_revolute(-1, body, axis=(0.0, 0.0, 1.0), qd=5.0, limit_lower=-0.5, limit_upper=0.5,
                               limit_ke=1.0e4, limit_kd=10.0)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    state, spare = model.state(), model.state()
    overshoot = 5.0 * np.sqrt(inertia / 1.0e4) + 5.0 * 0.02  # v / omega, plus one step of travel
    for _ in range(500):
        solver.step(state, spare, None, 0.02)
        state, spare = spare, state
        q, qd = state.joint_q.numpy()[0], state.joint_qd.numpy()[0]
        assert np.isfinite(q) and abs(q) <= 0.5 + overshoot and abs(qd) <= 5.0 + 1e-9


def test_mjcf_ellipsoid_weighs_as_mujoco_and_rests_on_its_shortest_axis(tmp_path):
    mujoco = pytest.importorskip("mujoco")
    from wpsim.solvers import SemiImplicitSolver
    from wpsim.solvers.kinematics import eval_fk

    path = mjcf(tmp_path, '<geom type="plane" size="5 5 .1"/><body pos="0 0 0.3"><freejoint/>'
                          '<geom type="ellipsoid" size="0.2 0.1 0.05" density="500"/></body>')
    (builder, _), _ = quiet(import_mjcf, path)
    theirs = mujoco.MjModel.from_xml_path(str(path))
    assert builder.bodies.array("body_mass")[0] == pytest.approx(theirs.body_mass[1], rel=1e-12)
    assert np.diag(builder.bodies.array("body_inertia")[0]) == pytest.approx(theirs.body_inertia[1], rel=1e-12)
    model = builder.finalize(dtype=wp.float64)
    solver = SemiImplicitSolver(model)
    state, spare = model.state(), model.state()
    for _ in range(1500):
        solver.step(state, spare, None, 1e-3)
        state, spare = spare, state
    height = eval_fk(model, state).body_q.numpy()[0, 2]
    assert height == pytest.approx(0.05, abs=0.01)  # resting on its 0.05 m semi-axis (penalty sink included)


# ---------------------------------------------------------------- contact pairs
def test_a_link_welded_to_the_world_on_the_ground_has_no_contact_pair():
    """pybullet_data's cloth_z_up: one link welded to the world, its box on the ground. The
    pair could never move; the soft-constraint solve crashed on its empty island."""
    from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

    builder = wpsim.ModelBuilder()
    link = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.1)
    builder.add_joint_fixed(-1, link)
    builder.add_shape_box(link, hx=0.5, hy=0.5, hz=0.05, density=0.0)
    box = builder.add_body()
    builder.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05)
    builder.add_joint_free(box, pos=(0.0, 0.0, 0.1))
    builder.add_ground_plane()
    model = builder.finalize(dtype=wp.float64)
    assert sorted(map(tuple, model.contact_pair.numpy().tolist())) == [(0, 1), (1, 2)]  # box-link, box-ground
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    state, spare = model.state(), model.state()
    for _ in range(200):
        solver.step(state, spare, None, 2e-3)
        state, spare = spare, state
    assert state.joint_q.numpy()[2] == pytest.approx(0.1, abs=2e-3)  # resting on the welded link


def test_urdf_point_mass_link_gets_its_collision_inertia_and_is_listed(tmp_path):
    """pybullet_data's laikago: a moving link with a mass and an all-zero <inertia> (pybullet
    keeps it as a point mass) gets the inertia of its collision shapes scaled to its mass."""
    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r"><link name="a">{INERTIAL}</link><link name="b"><inertial><mass value="2"/>'
                    '<inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial><collision><geometry>'
                    '<box size="0.2 0.2 0.2"/></geometry></collision></link><joint name="j" type="revolute">'
                    '<parent link="a"/><child link="b"/><axis xyz="0 0 1"/><limit lower="-1" upper="1"/></joint>'
                    '</robot>')
    (builder, scene), _ = quiet(import_urdf, path)
    body = scene.bodies["b"]
    assert builder.bodies.array("body_mass")[body] == 2.0
    assert np.diag(builder.bodies.array("body_inertia")[body]) == pytest.approx([2 * 0.08 / 12] * 3, rel=1e-9)
    assert any("zero <inertia>" in str(u) for u in scene.unhonoured)
    builder.finalize()


def test_blank_lines_before_the_xml_declaration_are_accepted_and_lines_still_count(tmp_path):
    """pybullet_data's biped2d and diff_ring start with blank lines before <?xml ...?>."""
    path = tmp_path / "r.urdf"
    path.write_text(f'\n\n\n<?xml version="1.0"?>\n<robot name="r">\n<link name="a">{INERTIAL}</link>\n'
                    '<link name="b"/>\n<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
                    '<limit lower="1" upper="0"/></joint>\n</robot>\n')
    (builder, scene), _ = quiet(import_urdf, path)
    assert builder.bodies.count == 2
    (limit,) = [u for u in scene.unhonoured if u.element == "<limit>"]
    assert limit.line == 8  # the file's own line, blank lines included


def test_urdf_plane_on_a_welded_root_is_a_static_plane(tmp_path):
    from wpsim.kernels.enums import SHAPE_PLANE

    collision = '<collision><origin xyz="0 0 0.5"/><geometry><plane normal="0 1 0"/></geometry></collision>'
    path = tmp_path / "plane.urdf"
    path.write_text(f'<robot name="p"><link name="ground">{collision}</link></robot>')
    (builder, _), _ = quiet(import_urdf, path)
    model = builder.finalize(dtype=wp.float64)
    assert model.shape_kind.numpy().tolist() == [SHAPE_PLANE] and model.shape_body.numpy().tolist() == [-1]
    from wpsim.core.geometry import quat_to_matrix

    pose = model.shape_transform.numpy()[0]
    assert np.allclose(pose[:3], [0.0, 0.0, 0.5]) and np.allclose(quat_to_matrix(pose[3:]) @ [0, 0, 1], [0, 1, 0])
    with pytest.raises(ValueError, match="root link welded"):
        quiet(import_urdf, path, floating=True)
