"""UsdPhysics export and import: round trips keep masses, inertias, shapes and joints; an
imported arm steps like the builder's; units and up axis are honoured; bad stages fail
cleanly."""

import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.io.usd_physics import export_physics, import_usd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_import import ASSETS, arm_from_builder_api, rollout  # noqa: E402


def mixed_scene() -> wpsim.ModelBuilder:
    """Every joint type, shape kind and dof parameter, away from their defaults."""
    import trimesh

    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e4, kd=80.0, mu=0.7)
    b.add_shape_box(pos=(2.0, 0.0, 0.1), hx=0.3, hy=0.2, hz=0.1, ke=3.0e3, kd=5.0, mu=0.2)
    base = b.add_body()
    b.add_shape_box(base, hx=0.2, hy=0.1, hz=0.05, density=500.0)
    b.add_joint_free(base, pos=(0.0, 0.0, 0.6), rot=(0.1, 0.0, 0.2, 0.97), lin_vel=(0.2, 0.0, 0.0),
                     ang_vel=(0.0, 0.3, 0.1))
    upper = b.add_body(mass=0.7, com=(0.0, 0.01, -0.1), inertia=[[0.01, 0.001, 0.0], [0.001, 0.012, 0.0],
                                                                  [0.0, 0.0, 0.003]])
    b.add_shape_capsule(upper, pos=(0.0, 0.0, -0.1), radius=0.03, half_height=0.08, density=0.0, mu=0.9)
    b.add_joint_revolute(base, upper, axis=(0.0, 0.6, 0.8), parent_pos=(0.15, 0.0, -0.05), q=0.3, qd=-0.2,
                         damping=0.1, armature=0.02, target_ke=30.0, target_kd=1.5, limit_lower=-1.0,
                         limit_upper=1.2, limit_ke=500.0, limit_kd=3.0)
    slider = b.add_body()
    b.add_shape_sphere(slider, radius=0.04, density=800.0, ke=5.0e3)
    b.add_joint_prismatic(upper, slider, axis=(0.0, 0.0, 1.0), parent_pos=(0.0, 0.0, -0.2), q=-0.02,
                          limit_lower=-0.1, limit_upper=0.1, target_ke=100.0)
    ball = b.add_body()
    block = trimesh.creation.box(extents=(0.06, 0.04, 0.1))
    b.add_shape_mesh(ball, block.vertices, block.faces, pos=(0.0, 0.0, -0.05), density=600.0)
    b.add_joint_ball(slider, ball, parent_pos=(0.0, 0.0, -0.05), q=(0.1, 0.0, 0.0, 0.995), qd=(0.0, 0.5, 0.0),
                     damping=0.02, friction=0.01)  # a ball joint's friction was dropped on import
    welded = b.add_body(mass=0.1, inertia=(1e-4, 1e-4, 1e-4))
    b.add_joint_fixed(base, welded, parent_pos=(-0.15, 0.0, 0.05), parent_rot=(0.0, 0.0, 0.38268343, 0.92387953))
    return b


COMPARED = ("body_mass", "body_com", "body_inertia", "shape_kind", "shape_body", "shape_size", "shape_ke",
            "shape_kd", "shape_mu", "shape_points", "joint_type", "joint_parent", "joint_child", "joint_q",
            "joint_qd", "joint_damping", "joint_armature", "joint_friction", "joint_target_ke", "joint_target_kd",
            "joint_limit_lower", "joint_limit_upper", "joint_limit_ke", "joint_limit_kd")


def test_round_trip_keeps_bodies_shapes_and_joints(tmp_path):
    original = mixed_scene().finalize(dtype=wp.float64)
    builder, scene = import_usd(export_physics(original, tmp_path / "mixed.usda"))
    restored = builder.finalize(dtype=wp.float64)
    for name in COMPARED:
        a, b = getattr(original, name).numpy(), getattr(restored, name).numpy()
        assert a.shape == b.shape, name
        assert np.allclose(a, b, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(a).max(initial=0.0))), name
    assert restored.gravity.numpy()[0][2] == pytest.approx(-9.81, rel=1e-6)
    assert len(scene.bodies) == 5
    # joint frames may be re-expressed (the USD joint axis is X, Y or Z), the motion not
    steps, dt = 400, 5e-4
    assert np.abs(rollout(original, steps, dt) - rollout(restored, steps, dt)).max() < 1e-6


def test_arm_from_usd_steps_like_the_builder_api(tmp_path):
    path = export_physics(import_mjcf(ASSETS / "arm_7link.xml")[0].finalize(dtype=wp.float64), tmp_path / "arm.usd")
    steps, dt = 300, 1e-3
    q0 = 0.3 * np.sin(np.arange(7) + 1.0)
    forces = 0.2 * np.cos(np.outer(np.arange(steps) * dt * 5.0, np.arange(1, 8)))
    from_usd = rollout(import_usd(path)[0].finalize(dtype=wp.float64), steps, dt, forces, q0)
    from_api = rollout(arm_from_builder_api().finalize(dtype=wp.float64), steps, dt, forces, q0)
    assert np.abs(from_api[-1] - q0).max() > 0.1
    assert np.abs(from_usd - from_api).max() < 1e-6


def test_units_and_up_axis_of_the_stage_are_honoured(tmp_path):
    """A Y-up stage in centimetres and grams: a 200 g, 10 cm ball on a hinge 1 m up."""
    path = tmp_path / "cm.usda"
    path.write_text('''#usda 1.0
(
    defaultPrim = "World"
    metersPerUnit = 0.01
    kilogramsPerUnit = 0.001
    upAxis = "Y"
)
def Xform "World"
{
    def PhysicsScene "scene"
    {
        vector3f physics:gravityDirection = (0, -1, 0)
        float physics:gravityMagnitude = 981
    }
    def Xform "ball" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 100, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 200
        point3f physics:centerOfMass = (0, 0, 0)
        float3 physics:diagonalInertia = (800, 800, 800)
        def Sphere "shape" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double radius = 10
        }
    }
    def PhysicsRevoluteJoint "hinge"
    {
        rel physics:body1 = </World/ball>
        point3f physics:localPos0 = (0, 150, 0)
        point3f physics:localPos1 = (0, 50, 0)
        uniform token physics:axis = "Z"
        float physics:lowerLimit = -90
        float physics:upperLimit = 45
    }
}
''')
    builder, _ = import_usd(path)
    assert builder.up_axis == 1 and builder.gravity == pytest.approx(-9.81)
    model = builder.finalize(dtype=wp.float64)
    assert model.body_mass.numpy()[0] == pytest.approx(0.2)
    assert np.allclose(model.body_inertia.numpy()[0], np.eye(3) * 8e-5)
    assert model.shape_size.numpy()[0][0] == pytest.approx(0.1)
    assert np.allclose(model.joint_X_p.numpy()[0][:3], (0.0, 1.5, 0.0))
    assert model.joint_limit_lower.numpy()[0] == pytest.approx(-np.pi / 2)
    assert np.allclose(wpsim.eval_fk(model, model.state()).body_q.numpy()[0][:3], (0.0, 1.0, 0.0))


@pytest.mark.parametrize("text, match", [
    ('def Xform "b" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])\n{\ndouble3 xformOp:scale = (2, 2, 2)\n'
     'uniform token[] xformOpOrder = ["xformOp:scale"]\n}', "must not be scaled"),
    ('def Xform "b" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])\n{\n}\n'
     'def PhysicsRevoluteJoint "j"\n{\nrel physics:body0 = </World/nothing>\nrel physics:body1 = </World/b>\n}',
     "is not a rigid body"),
    ('def Xform "b" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])\n{\n}\n'
     'def PhysicsRevoluteJoint "j"\n{\nrel physics:body1 = </World/b>\nuniform token physics:axis = "W"\n}',
     "axis"),
    *[(f'def Xform "b" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])\n{{\n{attribute}\n'
       'def Sphere "s" (prepend apiSchemas = ["PhysicsCollisionAPI"])\n{\ndouble radius = 0.1\n}\n}', match)
      for attribute, match in [  # were recomputed from the density silently
          ("float physics:mass = nan", r"prim /World/b: physics:mass nan must be a finite mass >= 0"),
          ("float physics:mass = -1", r"prim /World/b: physics:mass -1.0 must be a finite mass >= 0"),
          ("float physics:mass = inf", r"prim /World/b: physics:mass inf must be"),
          ("float3 physics:diagonalInertia = (1, -1, 1)", r"physics:diagonalInertia \[1.0, -1.0, 1.0\] must be"),
          ("point3f physics:centerOfMass = (0, nan, 0)", r"physics:centerOfMass \[0.0, nan, 0.0\] is not a number")]],
])
def test_bad_stages_name_file_and_prim_and_add_nothing(tmp_path, text, match):
    path = tmp_path / "bad.usda"
    path.write_text(f'#usda 1.0\n(\n    upAxis = "Z"\n)\ndef Xform "World"\n{{\n{text}\n}}\n')
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=match) as error:
        import_usd(path, builder)
    assert str(path) in str(error.value)
    assert builder.bodies.count == 0 and builder.shapes.count == 0


@pytest.mark.parametrize("layer, kind, reason", [
    ("missing.usda", "sublayer", "no such file"), ("garbage.usda", "sublayer", "not a USD layer")])
def test_a_layer_that_cannot_be_loaded_is_named(tmp_path, layer, kind, reason):
    """USD skipped it with a warning: the stage imported as an empty scene."""
    (tmp_path / "garbage.usda").write_text("not a USD layer\n")
    export_physics(mixed_scene().finalize(dtype=wp.float64), tmp_path / "robot.usda")
    path = tmp_path / "scene.usda"
    path.write_text(f'#usda 1.0\n(\n    subLayers = [@./{layer}@, @./robot.usda@]\n)\n')
    with pytest.raises(ValueError, match=rf"scene.usda: {kind} @./{layer}@ of layer .*scene.usda cannot be loaded "
                                         rf"\({reason}: .*{layer}\)"):
        import_usd(path)
    path.write_text('#usda 1.0\ndef Xform "World" (\n    references = @./gone.usda@\n)\n{\n}\n')
    with pytest.raises(ValueError, match=r"reference or payload @./gone.usda@ of layer .* cannot be loaded"):
        import_usd(path)
    path.write_text('#usda 1.0\n(\n    subLayers = [@./robot.usda@]\n)\n')
    assert import_usd(path)[0].bodies.count == mixed_scene().bodies.count


def test_truncated_stage_fails_cleanly(tmp_path):
    original = mixed_scene().finalize(dtype=wp.float64)
    text = export_physics(original, tmp_path / "mixed.usda").read_text()
    for fraction in (0.0, 0.2, 0.5, 0.9):
        path = tmp_path / f"cut_{fraction}.usda"
        path.write_text(text[: int(fraction * len(text))])
        builder = wpsim.ModelBuilder()
        try:
            import_usd(path, builder)
        except ValueError as error:
            assert str(path) in str(error)
            assert builder.bodies.count == 0 and builder.shapes.count == 0


def test_a_usd_physics_scene_runs_like_any_scene_file(tmp_path):
    from wpsim.apps.run_scene import simulate_to_usd
    from wpsim.tasks.robot_scene import robot_scene

    builder, _ = import_mjcf(ASSETS / "quadruped.xml")
    path = export_physics(builder.finalize(dtype=wp.float64), tmp_path / "quadruped.usda")
    summary = simulate_to_usd(robot_scene(path)[0], tmp_path / "rollout.usda", 200, 5e-4, fps=100.0)
    assert summary["bodies"] == 13 and summary["frames"] == 11
    assert 0.0 < summary["final_lowest_z_m"] < 0.5


def test_exported_physics_stage_reopens_in_a_separate_process(tmp_path):
    from test_usd import read_stage

    path = export_physics(mixed_scene().finalize(dtype=wp.float64), tmp_path / "mixed.usda")
    stage = read_stage(path)
    types = {p: e["type"] for p, e in stage["prims"].items()}
    assert stage["meta"]["defaultPrim"] == "/World" and stage["meta"]["kilogramsPerUnit"] == 1.0
    assert types["/World/physicsScene"] == "PhysicsScene"
    assert sorted(t for p, t in types.items() if p.startswith("/World/joints/")) == [
        "PhysicsFixedJoint", "PhysicsPrismaticJoint", "PhysicsRevoluteJoint", "PhysicsSphericalJoint"]
    assert [types[f"/World/body_{b}"] for b in range(5)] == ["Xform"] * 5
    assert types["/World/body_3/shape_5"] == "Mesh" and types["/World/static/shape_0"] == "Plane"
    assert np.allclose(stage["prims"]["/World/body_0"]["world_translation"], (0.0, 0.0, 0.6))


def test_mass_only_bodies_colliders_on_body_prims_massless_links_and_zero_gravity(tmp_path):
    path = tmp_path / "s.usda"
    path.write_text('''#usda 1.0
(
    metersPerUnit = 1
    upAxis = "Z"
)
def Xform "World"
{
    def PhysicsScene "scene"
    {
        vector3f physics:gravityDirection = (0, 0, -1)
        float physics:gravityMagnitude = 0
    }
    def Cube "box" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsCollisionAPI", "PhysicsMassAPI"])
    {
        double size = 0.2
        float physics:mass = 3
    }
}
''')
    builder, scene = import_usd(path)
    model = builder.finalize(dtype=wp.float64)
    assert builder.gravity == 0.0 and scene.bodies == {"/World/box": 0}
    assert model.body_mass.numpy()[0] == pytest.approx(3.0)
    assert np.allclose(np.diag(model.body_inertia.numpy()[0]), 3.0 * 0.02 / 3.0)  # m (h^2 + h^2) / 3, h = 0.1
    b = wpsim.ModelBuilder(gravity=0.0)  # a massless welded marker survives a round trip
    arm = b.add_body(mass=1.0, inertia=(0.01, 0.01, 0.01))
    b.add_joint_revolute(-1, arm)
    marker = b.add_body()
    b.add_shape_box(marker, hx=0.1, hy=0.1, hz=0.1, density=0.0)
    b.add_joint_fixed(arm, marker)
    back = import_usd(export_physics(b.finalize(), tmp_path / "m.usda"))[0]
    assert back.gravity == 0.0 and back.bodies.array("body_mass").tolist() == [1.0, 0.0]


def test_the_time_step_and_a_tilted_gravity_survive_a_round_trip(tmp_path):
    """export_physics(timestep=...) writes wpsim:timestep and PhysX's timeStepsPerSecond;
    import_usd reads it into ImportedScene.timestep (what wpsim run steps at), PhysX's alone
    as well; gravity keeps its direction."""
    from pxr import Usd

    builder = wpsim.ModelBuilder(gravity=(1.0, 0.0, -9.81))
    body = builder.add_body()
    builder.add_shape_sphere(body, radius=0.1)
    builder.add_joint_free(body, pos=(0.0, 0.0, 1.0))
    path = export_physics(builder.finalize(dtype=wp.float64), tmp_path / "ball.usda", timestep=0.004)
    back, scene = import_usd(path)
    assert scene.timestep == 0.004
    assert np.allclose(back.finalize(dtype=wp.float64).gravity.numpy()[0], [1.0, 0.0, -9.81])
    stage = Usd.Stage.Open(str(path))
    physics = stage.GetPrimAtPath("/World/physicsScene")
    assert physics.GetAttribute("physxScene:timeStepsPerSecond").Get() == 250
    physics.RemoveProperty("wpsim:timestep")
    stage.GetRootLayer().Export(str(tmp_path / "physx.usda"))
    assert import_usd(tmp_path / "physx.usda")[1].timestep == pytest.approx(0.004)
    assert import_usd(export_physics(back.finalize(), tmp_path / "none.usda"))[1].timestep is None
    with pytest.raises(ValueError, match="timestep"):
        export_physics(back.finalize(), tmp_path / "bad.usda", timestep=-1.0)


def test_body_and_joint_names_round_trip(tmp_path):
    """Names given to the export (any text, two that sanitise alike, a free joint's, a body
    named like a stage scope) come back from the import as given; unnamed ones by prim path."""
    from pxr import Usd

    original = mixed_scene().finalize(dtype=wp.float64)
    bodies = {0: "base link", 1: "upper/arm", 2: "upper_arm", 3: "joints", 4: "welded"}
    joints = {0: "floating base", 1: "shoulder", 2: "slide", 3: "wrist ball"}  # the fixed joint 4 unnamed
    path = export_physics(original, tmp_path / "named.usda", body_names=bodies, joint_names=joints)
    builder, scene = import_usd(path)
    assert scene.bodies == {name: b for b, name in bodies.items()}
    assert {name: j for name, j in scene.joints.items() if j != 4} == {name: j for j, name in joints.items()}
    stage = Usd.Stage.Open(str(path))
    (fixed,) = [p for p in stage.Traverse() if p.GetTypeName() == "PhysicsFixedJoint"]
    assert scene.joints[str(fixed.GetPath())] == 4 and str(fixed.GetPath()) == "/World/joints/joint_4"
    assert stage.GetPrimAtPath("/World/base_link") and stage.GetPrimAtPath("/World/upper_arm_2")
    assert stage.GetPrimAtPath("/World/joints").GetTypeName() == "Scope"
    restored = builder.finalize(dtype=wp.float64)
    assert np.allclose(restored.joint_q.numpy(), original.joint_q.numpy(), atol=1e-6)


@pytest.fixture(scope="module")
def mixed_text(tmp_path_factory) -> str:
    """mixed_scene() as a UsdPhysics stage (text)."""
    path = tmp_path_factory.mktemp("usd") / "m.usda"
    return export_physics(mixed_scene().finalize(dtype=wp.float64), path).read_text()


@pytest.mark.parametrize("old, new, match", [  # each was accepted, or a traceback or an error naming no attribute
    ("wpsim:q = [0.3]", "wpsim:q = [0.3, 1]", r"prim /World/joints/joint_1: wpsim:q has 2 values, 1 expected"),
    ("wpsim:damping = [0.1]", "wpsim:damping = [-0.1]", r"prim /World/joints/joint_1: wpsim:damping -0.1 must be >= 0"),
    ("wpsim:spring_ref = [0]", "wpsim:spring_ref = [inf]", r"joint_1: wpsim:spring_ref inf must be finite"),
    ("wpsim:qd = [0.2, 0, 0, 0, 0.3, 0.1]", "wpsim:qd = [0.2, 0, 0]", r"prim /World/body_0: wpsim:qd has 3 values, 6"),
    ("wpsim:q = [0.09999875002343701, 0, 0, 0.9949875627331982]", "wpsim:q = [nan, 0, 0, 1]",
     r"joint_3: wpsim:q \[nan, 0.0, 0.0, 1.0\] is not a number"),
    ("wpsim:damping = [0.02, 0.02, 0.02]", "wpsim:damping = []",
     r"joint_3: wpsim:damping has 0 values, 1 or 3 expected"),
    ("wpsim:contact_ke = 20000", "wpsim:contact_ke = 1e39",
     r"wpsim:contact_ke 1e\+39 must be finite, of magnitude at most"),
    ("custom int wpsim:joint_index = 4", "custom double wpsim:joint_index = nan",
     r"joint_4: wpsim:joint_index nan is not a"),
    ("custom double[] wpsim:q = [-0.02]", 'custom string wpsim:q = "-0.02"',
     r"joint_2: wpsim:q '-0.02' is not a number"),
    ("drive:linear:physics:stiffness = 100", "drive:linear:physics:stiffness = -100",
     r"joint_2: drive:linear:physics:stiffness -100.0 must be >= 0"),
    ("drive:angular:physics:damping = 0.02617994", "drive:angular:physics:damping = nan",
     r"joint_1: drive:angular:physics:damping nan is not a number"),
    ("physics:lowerLimit = -57.29578", "physics:lowerLimit = nan", r"joint_1: physics:lowerLimit nan is not a number"),
    ("physics:gravityMagnitude = 9.81", "physics:gravityMagnitude = inf",
     r"prim /World/physicsScene: physics:gravityMagnitude inf must be finite"),
    ("physics:centerOfMass = (0, 0.01, -0.1)", "physics:centerOfMass = (0, inf, -0.1)",
     r"prim /World/body_1: physics:centerOfMass \[0.0, inf, -0.1\d*\] must be finite"),
    ("xformOp:orient = (0.9744438523975747,", "xformOp:orient = (nan,", r"prim /World/body_0: xformOp:orient \[nan, "),
    ("xformOp:orient = (0.9744438523975747, 0.10045812911315204, 0, 0.20091625822630407)",
     "xformOp:orient = (0, 0, 0, 0)",
     r"prim /World/body_0: xformOp:orient \[0.0, 0.0, 0.0, 0.0\] is not a rotation"),
    ("double radius = 0.04", "double radius = 1e39", r"radius 1e\+39 must be finite"),
    ("quatd xformOp:orient = (0.9744438523975747,", "quatd xformOp:unused = (0.9744438523975747,",
     r"prim /World/body_0: xformOpOrder names xformOp:orient, which the prim does not have"),  # was skipped
    ("kilogramsPerUnit = 1", "kilogramsPerUnit = 0",
     r"m.usda: kilogramsPerUnit 0.0 must be a unit in SI between 1e-06"),
    ("metersPerUnit = 1", "metersPerUnit = 1e7", r"m.usda: metersPerUnit 10000000.0 must be a unit in SI between"),
])
def test_bad_attribute_values_name_file_prim_and_attribute(tmp_path, mixed_text, old, new, match):
    """Every number the importer reads goes through one check (_StageReader.values)."""
    assert old in mixed_text
    path = tmp_path / "m.usda"
    path.write_text(mixed_text.replace(old, new, 1))
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=match) as error:
        import_usd(path, builder)
    assert str(path) in str(error.value)
    assert builder.bodies.count == 0 and builder.joints.count == 0


@pytest.mark.parametrize("direction, magnitude, gravity", [
    ("(0, 0, 0)", "5", -5.0),  # a zero direction is down the up axis (the magnitude was dropped)
    ("(1, 0, 0)", "-1", (9.81, 0.0, 0.0)),  # a negative magnitude is Earth's (the direction was dropped)
    ("(0, 0, 0)", "-inf", -9.81),  # neither: the builder's own
    ("(0, 0, -2)", "0", 0.0),
])
def test_gravity_as_usd_physics_defines_it(tmp_path, mixed_text, direction, magnitude, gravity):
    text = mixed_text.replace("physics:gravityDirection = (-0, -0, -1)", f"physics:gravityDirection = {direction}")
    path = tmp_path / "g.usda"
    path.write_text(text.replace("physics:gravityMagnitude = 9.81", f"physics:gravityMagnitude = {magnitude}"))
    assert import_usd(path)[0].gravity == pytest.approx(gravity)
