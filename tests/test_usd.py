"""USD export: every stage is reopened in a separate Python process with ``pxr`` and checked
(metadata, prim types, one time sample per frame, values at a sample, variants)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.geometry import boundary_faces, quat_to_matrix
from wpsim.io.usd_export import UsdRecorder, write_rollouts

READER = textwrap.dedent('''
    import json, sys
    from pxr import Usd, UsdGeom, UsdPhysics
    stage = Usd.Stage.Open(sys.argv[1])
    variant = sys.argv[2] if len(sys.argv) > 2 else ""
    root = stage.GetDefaultPrim()
    if variant:
        root.GetVariantSets().GetVariantSet("iteration").SetVariantSelection(variant)
    out = {
        "meta": {"upAxis": UsdGeom.GetStageUpAxis(stage), "metersPerUnit": UsdGeom.GetStageMetersPerUnit(stage),
                 "kilogramsPerUnit": UsdPhysics.GetStageKilogramsPerUnit(stage),
                 "timeCodesPerSecond": stage.GetTimeCodesPerSecond(), "framesPerSecond": stage.GetFramesPerSecond(),
                 "start": stage.GetStartTimeCode(), "end": stage.GetEndTimeCode(), "defaultPrim": str(root.GetPath())},
        "variants": root.GetVariantSets().GetVariantSet("iteration").GetVariantNames()
                    if root.GetVariantSets().HasVariantSet("iteration") else [],
        "prims": {},
    }
    for prim in stage.Traverse():
        entry = {"type": prim.GetTypeName()}
        if prim.IsA(UsdGeom.PointBased):
            geom = UsdGeom.PointBased(prim)
            entry["times"] = geom.GetPointsAttr().GetTimeSamples()
            entry["points_at_3"] = [list(p) for p in geom.GetPointsAttr().Get(3)]
            entry["extent_at_3"] = [list(p) for p in geom.GetExtentAttr().Get(3)]
            entry["extent_times"] = geom.GetExtentAttr().GetTimeSamples()
        if prim.IsA(UsdGeom.Points):
            entry["widths"] = list(UsdGeom.Points(prim).GetWidthsAttr().Get())
        if prim.IsA(UsdGeom.Mesh):
            mesh = UsdGeom.Mesh(prim)
            entry["counts"] = list(mesh.GetFaceVertexCountsAttr().Get())
            entry["indices"] = list(mesh.GetFaceVertexIndicesAttr().Get())
        if prim.IsA(UsdGeom.Xformable):
            xformable = UsdGeom.Xformable(prim)
            entry["world_translation"] = list(xformable.ComputeLocalToWorldTransform(0).ExtractTranslation())
            at_3 = xformable.ComputeLocalToWorldTransform(3)
            entry["world_translation_at_3"] = list(at_3.ExtractTranslation())
            rotation = at_3.RemoveScaleShear().ExtractRotationQuat()
            entry["world_rotation_at_3"] = [rotation.GetReal(), *rotation.GetImaginary()]
            entry["xform_times"] = xformable.GetTimeSamples()
        out["prims"][str(prim.GetPath())] = entry
    print(json.dumps(out))
''')


def read_stage(path, variant=""):
    """What a separate Python process sees in the stage at ``path``."""
    proc = subprocess.run([sys.executable, "-c", READER, str(path), variant], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def scene(worlds=2):
    """A free particle, a 2x2 cloth, a 2x1x1 soft block and four static shapes, per world."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_sphere(pos=(0.5, 0.0, 0.0), radius=0.2)
    b.add_shape_box(pos=(1.5, 0.0, 0.0), hx=0.1, hy=0.2, hz=0.3)
    b.add_shape_capsule(pos=(2.5, 0.0, 0.0), radius=0.1, half_height=0.3)
    b.add_particle((0.0, 0.0, 1.0), (0.3, 0.0, 0.0), mass=1.0, radius=0.05)
    b.add_cloth_grid(pos=(0.0, 0.0, 0.8), dim_x=2, dim_y=2, cell_x=0.1, cell_y=0.1, tri_mu=50.0, tri_lambda=50.0)
    b.add_soft_grid(pos=(0.5, 0.5, 0.5), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=100.0, young_modulus=1e4, poisson_ratio=0.3)
    if worlds == 1:
        return b.finalize()
    many = wpsim.ModelBuilder()
    many.replicate(b, worlds, (0.0, 0.0, 0.0))
    return many.finalize()


def record(recorder, model, frames, dt=1e-3):
    """Record ``frames`` frames one step apart; returns the recorded positions."""
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    positions = []
    for _ in range(frames):
        recorder.record(a)
        positions.append(a.particle_q.numpy().astype(np.float64))
        solver.step(a, b, None, dt)
        a, b = b, a
    return positions


@pytest.mark.parametrize("suffix", [".usda", ".usdc", ".usd"])
def test_rollout_stage_reopens_with_frames_metadata_and_values(tmp_path, suffix):
    model = scene()
    recorder = UsdRecorder(model, fps=1000.0, world_spacing=(0.0, 3.0, 0.0))
    positions = record(recorder, model, 6)
    path = recorder.write(tmp_path / f"rollout{suffix}")
    if suffix != ".usda":
        assert not path.read_bytes().startswith(b"#usda")  # binary crate
    stage = read_stage(path)
    assert stage["meta"] == {"upAxis": "Z", "metersPerUnit": 1.0, "kilogramsPerUnit": 1.0,
                             "timeCodesPerSecond": 1000.0, "framesPerSecond": 1000.0, "start": 0.0, "end": 5.0,
                             "defaultPrim": "/World"}
    prims = stage["prims"]
    world_of = model.particle_world.numpy()
    for w in (0, 1):
        assert prims[f"/World/world_{w}"]["world_translation"] == [0.0, 3.0 * w, 0.0]
        assert {prims[f"/World/world_{w}/{n}"]["type"] for n in ("particles", "cloth", "soft")} == \
            {"Points", "Mesh"}
        for name in ("particles", "cloth", "soft"):
            entry = prims[f"/World/world_{w}/{name}"]
            assert entry["times"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] == entry["extent_times"]
        # the free particle: position at time code 3 is frame 3, width 2 r
        free = np.flatnonzero((world_of == w) & (model.particle_radius.numpy() == 0.05))
        particles = prims[f"/World/world_{w}/particles"]
        np.testing.assert_allclose(particles["points_at_3"], positions[3][free], atol=1e-6)
        assert particles["widths"] == pytest.approx([0.1])
        np.testing.assert_allclose(particles["extent_at_3"], [positions[3][free[0]] - 0.05,
                                                              positions[3][free[0]] + 0.05], atol=1e-6)
        cloth = prims[f"/World/world_{w}/cloth"]
        assert len(cloth["counts"]) == 8 and set(cloth["counts"]) == {3}
        assert len(cloth["points_at_3"]) == 9
        soft = prims[f"/World/world_{w}/soft"]
        assert len(soft["counts"]) == 20 and len(soft["points_at_3"]) == 12  # 10 quads of boundary, all vertices
    kinds = sorted(p["type"] for path, p in prims.items() if path.startswith("/World/shapes/"))
    assert kinds == ["Capsule", "Capsule", "Cube", "Cube", "Plane", "Plane", "Sphere", "Sphere"]
    # each copy's shapes belong to its world and move with it
    assert prims["/World/shapes/shape_1"]["world_translation"] == pytest.approx([0.5, 0.0, 0.0])
    assert prims["/World/shapes/shape_5"]["world_translation"] == pytest.approx([0.5, 3.0, 0.0])


def test_one_world_only(tmp_path):
    model = scene()
    recorder = UsdRecorder(model, fps=50.0, world=1)
    record(recorder, model, 4)
    prims = read_stage(recorder.write(tmp_path / "one.usda"))["prims"]
    assert "/World/world_1/soft" in prims and not any(p.startswith("/World/world_0") for p in prims)


def test_optimisation_iterations_as_variants_and_as_files(tmp_path):
    model = scene(worlds=1)
    recorder = UsdRecorder(model, fps=100.0)
    takes = {}
    for it, push in enumerate((0.0, 1.0, 2.0)):
        recorder.begin_take(f"iteration_{it}")
        state = model.state()
        state.particle_qd.assign(np.full((model.particle_count, 3), push))
        recorder.record(state)
        takes[f"iteration_{it}"] = record_from(recorder, model, state, 4 + it)
    path = recorder.write(tmp_path / "fit.usda")
    assert read_stage(path)["variants"] == ["iteration_0", "iteration_1", "iteration_2"]
    for name, frames in takes.items():
        stage = read_stage(path, name)
        assert stage["meta"]["end"] == 5.0  # the longest take
        np.testing.assert_allclose(stage["prims"]["/World/world_0/soft"]["points_at_3"],
                                   frames[3][np.unique(boundary_faces(model.tet_indices.numpy()))], atol=1e-6)
    files = recorder.write_takes(tmp_path / "iterations")
    assert [p.name for p in files] == ["rollout_iteration_0.usd", "rollout_iteration_1.usd", "rollout_iteration_2.usd"]
    assert read_stage(files[2])["meta"]["end"] == 5.0 and read_stage(files[0])["meta"]["end"] == 3.0


def record_from(recorder, model, state, frames, dt=1e-3):
    """Continue recording ``frames - 1`` further steps from ``state`` (already recorded)."""
    solver = wpsim.SemiImplicitSolver(model)
    a, b = state, model.state()
    positions = [a.particle_q.numpy().astype(np.float64)]
    for _ in range(frames - 1):
        solver.step(a, b, None, dt)
        a, b = b, a
        recorder.record(a)
        positions.append(a.particle_q.numpy().astype(np.float64))
    return positions


def test_tet_boundary_is_closed_and_outward():
    """Every edge of the extracted surface is shared by two faces in opposite directions, and
    the enclosed volume (divergence theorem) equals the tets' total volume."""
    x = wpsim.core.geometry.grid_points((4, 3, 3), (0.1, 0.1, 0.1))
    tets = wpsim.core.geometry.grid_tetrahedra(3, 2, 2)
    faces = boundary_faces(tets)
    edges = {}
    for f in faces:
        for a, b in ((f[0], f[1]), (f[1], f[2]), (f[2], f[0])):
            edges[a, b] = edges.get((a, b), 0) + 1
    assert all(count == 1 and edges.get((b, a)) == 1 for (a, b), count in edges.items())
    volume = np.einsum("ij,ij->i", x[faces[:, 0]], np.cross(x[faces[:, 1]], x[faces[:, 2]])).sum() / 6.0
    assert volume == pytest.approx(0.3 * 0.2 * 0.2, rel=1e-12)


def test_interrupted_write_keeps_the_previous_file(tmp_path, monkeypatch):
    model = scene(worlds=1)
    recorder = UsdRecorder(model, fps=10.0)
    record(recorder, model, 2)
    target = tmp_path / "rollout.usda"
    target.write_text("previous")
    from pxr import Sdf

    def failing_export(layer, path, *args, **kwargs):
        with open(path, "w") as f:
            f.write("#usda 1.0\n(\n")  # truncated
        raise KeyboardInterrupt

    monkeypatch.setattr(Sdf.Layer, "Export", failing_export)
    with pytest.raises(KeyboardInterrupt):
        recorder.write(target)
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["rollout.usda"]


def test_bad_input_is_rejected(tmp_path):
    model = scene(worlds=1)
    with pytest.raises(ValueError, match="X-up"):
        UsdRecorder(wpsim.ModelBuilder(up_axis="x").finalize(), fps=10.0)
    with pytest.raises(ValueError, match="fps"):
        UsdRecorder(model, fps=0.0)
    with pytest.raises(ValueError, match="world 3 does not exist"):
        UsdRecorder(model, fps=10.0, world=3)
    recorder = UsdRecorder(model, fps=10.0)
    with pytest.raises(ValueError, match="nothing recorded"):
        recorder.write(tmp_path / "empty.usd")
    with pytest.raises(ValueError, match="particles"):
        recorder.record(scene(worlds=2).state())
    state = model.state()
    q = state.particle_q.numpy()
    q[4, 1] = np.nan
    state.particle_q.assign(q)
    with pytest.raises(ValueError, match="particle 4 has a non-finite position"):
        recorder.record(state)
    with pytest.raises(ValueError, match="identifier"):
        recorder.begin_take("iteration 1")
    recorder.record(model.state())
    with pytest.raises(ValueError, match=r"\.usd, \.usda or \.usdc"):
        recorder.write(tmp_path / "rollout.json")
    assert not list(tmp_path.iterdir())


def test_rigid_bodies_are_time_sampled_xforms_holding_their_shapes(tmp_path):
    """A two-link pendulum in two worlds: each body an Xform with one translate/orient
    sample per frame, its shapes as children placed by the body pose."""
    single = wpsim.ModelBuilder()
    upper = single.add_body()
    single.add_shape_capsule(upper, pos=(0.0, 0.0, -0.2), radius=0.03, half_height=0.15)
    single.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.8)
    lower = single.add_body()
    single.add_shape_box(lower, pos=(0.0, 0.0, -0.1), rot=(0.0, 0.0, 0.3826834, 0.9238795), hx=0.02, hy=0.03,
                         hz=0.1)
    single.add_joint_revolute(upper, lower, axis=(0.0, 1.0, 0.0), parent_pos=(0.0, 0.0, -0.4), q=-0.5)
    builder = wpsim.ModelBuilder()
    builder.replicate(single, 2, spacing=(1.0, 0.0, 0.0))
    model = builder.finalize(dtype=wp.float64)
    recorder = UsdRecorder(model, fps=100.0)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    poses = []
    for _ in range(5):
        recorder.record(a)
        poses.append(a.body_q.numpy().copy())
        for _ in range(10):
            solver.step(a, b, None, 1e-3)
            a, b = b, a
    path = recorder.write(tmp_path / "pendulum.usda")
    stage = read_stage(path)
    for w in range(2):
        for k in range(2):
            body = 2 * w + k
            prim = stage["prims"][f"/World/world_{w}/body_{body}"]
            assert prim["type"] == "Xform" and prim["xform_times"] == [0.0, 1.0, 2.0, 3.0, 4.0]
            assert np.allclose(prim["world_translation_at_3"], poses[3][body, :3], atol=1e-6)
            x, y, z, qw = poses[3][body, 3:]
            assert np.allclose(np.abs(np.dot(prim["world_rotation_at_3"], [qw, x, y, z])), 1.0, atol=1e-6)
        capsule = stage["prims"][f"/World/world_{w}/body_{2 * w}/shape_{2 * w}"]
        cube = stage["prims"][f"/World/world_{w}/body_{2 * w + 1}/shape_{2 * w + 1}"]
        assert capsule["type"] == "Capsule" and cube["type"] == "Cube"
        pose = poses[3][2 * w + 1]
        centre = pose[:3] + quat_to_matrix(pose[3:]) @ np.array([0.0, 0.0, -0.1])
        assert np.allclose(cube["world_translation_at_3"], centre, atol=1e-6)
    assert poses[3][0, 3] != poses[0][0, 3]  # the pendulum swung between frames


def test_mesh_shape_on_a_body_is_written_as_a_mesh(tmp_path):
    from wpsim.io.mesh_files import load_surface

    cube = load_surface(Path(__file__).resolve().parents[1] / "assets" / "cube.obj")
    builder = wpsim.ModelBuilder()
    body = builder.add_body()
    builder.add_shape_mesh(body, cube.vertices, cube.faces, pos=(0.0, 0.0, 0.02))
    builder.add_joint_free(body, pos=(0.0, 0.0, 1.0))
    model = builder.finalize()
    recorder = UsdRecorder(model, fps=60.0)
    state = model.state()
    for _ in range(4):
        recorder.record(state)
    stage = read_stage(recorder.write(tmp_path / "mesh.usda"))
    prim = stage["prims"]["/World/world_0/body_0/shape_0"]
    assert prim["type"] == "Mesh" and prim["counts"] == [3] * len(cube.faces)
    assert np.allclose(prim["world_translation_at_3"], (0.0, 0.0, 1.02), atol=1e-6)


def test_body_prims_are_named_after_the_bodies_valid_and_unique(tmp_path):
    from pxr import Usd

    builder = wpsim.ModelBuilder()
    for _ in range(4):
        body = builder.add_body()
        builder.add_shape_sphere(body, radius=0.1)
        builder.add_joint_free(body)
    model = builder.finalize()
    names = {0: "upper arm", 1: "upper-arm", 2: "3rd link"}  # body 3 has no name
    path = write_rollouts(tmp_path / "named.usda", model, {"only": [model.state()]}, 10.0, body_names=names)
    stage = Usd.Stage.Open(str(path))
    bodies = {p.GetName(): p.GetAttribute("wpsim:body").Get() for p in stage.Traverse() if p.HasAttribute("wpsim:body")}
    assert bodies == {"upper_arm": 0, "upper_arm_2": 1, "_rd_link": 2, "body_3": 3}


def test_markers_are_points_prims_per_take(tmp_path):
    from pxr import Usd

    builder = wpsim.ModelBuilder()
    builder.add_particle((0.0, 0.0, 1.0), mass=1.0)
    model = builder.finalize()
    recorder = UsdRecorder(model, 10.0)
    for take, offset in (("first", 0.0), ("second", 1.0)):
        recorder.begin_take(take)
        for _ in range(3):
            recorder.record(model.state())
        recorder.add_markers("target", [[0.5, 0.0, 0.0]], radius=0.02, color=(1.0, 0.0, 0.0))
        recorder.add_markers("path", np.arange(9.0).reshape(3, 1, 3) + offset)
    stage = Usd.Stage.Open(str(recorder.write(tmp_path / "markers.usda")))
    variants = stage.GetPrimAtPath("/World").GetVariantSets().GetVariantSet("iteration")
    variants.SetVariantSelection("second")
    path = stage.GetPrimAtPath("/World/markers/path").GetAttribute("points")
    assert path.GetNumTimeSamples() == 3 and list(path.Get(2)[0]) == [7.0, 8.0, 9.0]
    target = stage.GetPrimAtPath("/World/markers/target")
    assert list(target.GetAttribute("points").Get()[0]) == [0.5, 0.0, 0.0]
    assert list(target.GetAttribute("primvars:displayColor").Get()[0]) == [1.0, 0.0, 0.0]
    assert list(target.GetAttribute("widths").Get()) == pytest.approx([0.04])
    recorder.begin_take("third")
    recorder.record(model.state())
    recorder.add_markers("path", np.zeros((2, 1, 3)))
    with pytest.raises(ValueError, match="markers 'path' of take 'third' have 2 frames, the take 1"):
        recorder.write(tmp_path / "bad.usda")
    with pytest.raises(ValueError, match="marker set name 'my path' must be an identifier"):
        recorder.add_markers("my path", [[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"positions must be finite \(M, 3\)"):
        recorder.add_markers("nan", [[np.nan, 0.0, 0.0]])
