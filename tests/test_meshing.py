"""Surface meshes as solids (OBJ/STL/PLY), the voxel tetrahedral mesher, the mesh assets,
and clean errors for malformed files (a fuzz-style test over truncated and corrupted files)."""

from pathlib import Path

import numpy as np
import pytest
import trimesh
import warp as wp

import wpsim
from wpsim.core.geometry import boundary_faces
from wpsim.core.meshing import check_solid, tetrahedralize, winding_numbers
from wpsim.diff.diagnostics import tet_volume_ratios
from wpsim.io.mesh_files import load_surface, tetrahedralize_file

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_primitive_assets_load_as_solids():
    cube = load_surface(ASSETS / "cube.obj")
    assert cube.volume == pytest.approx(1e-3, rel=1e-12)
    sphere = load_surface(ASSETS / "icosphere.stl", scale=2.0)
    assert np.linalg.norm(sphere.vertices, axis=1) == pytest.approx(0.1)
    cylinder = load_surface(ASSETS / "cylinder.ply")
    polygon_area = 0.5 * 24 * 0.03**2 * np.sin(2.0 * np.pi / 24)
    assert cylinder.volume == pytest.approx(polygon_area * 0.1, rel=1e-6)  # PLY stores float32


def test_winding_number_is_one_inside_and_zero_outside():
    sphere = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
    w = winding_numbers(sphere.vertices, sphere.faces, [[0.0, 0.0, 0.0], [0.5, 0.3, -0.2], [1.5, 0.0, 0.0],
                                                        [0.0, -3.0, 2.0]])
    np.testing.assert_allclose(w, [1.0, 1.0, 0.0, 0.0], atol=1e-9)


def test_voxel_mesh_of_a_sphere_converges_and_is_well_shaped():
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.05)
    errors = []
    for cell in (0.01, 0.005):
        mesh = tetrahedralize(sphere.vertices, sphere.faces, cell, "sphere")
        q = mesh.quality
        assert q["min_volume_m3"] > 0.0
        assert q["shape_min"] == pytest.approx(0.6573, abs=1e-4)  # every tet the same conforming shape
        assert 44.9 < q["dihedral_min_deg"] and q["dihedral_max_deg"] < 90.1
        assert q["volume_m3"] == pytest.approx(np.abs(np.linalg.det(
            mesh.vertices[mesh.tets[:, 1:]] - mesh.vertices[mesh.tets[:, :1]])).sum() / 6.0)
        assert np.linalg.norm(mesh.vertices, axis=1).max() < 0.05 + np.sqrt(3.0) * cell  # near the surface
        check_solid(mesh.vertices, boundary_faces(mesh.tets), "voxel boundary")  # closed, outward
        errors.append(abs(q["volume_relative_error"]))
    assert errors[1] < errors[0] < 0.15


def test_soft_finger_asset_is_the_mesher_output_and_rests_on_the_ground():
    stored = np.load(ASSETS / "soft_finger_tets.npz")
    remeshed = tetrahedralize_file(ASSETS / "soft_finger.obj", 0.004)
    np.testing.assert_allclose(stored["vertices"], remeshed.vertices, atol=1e-12)
    assert np.array_equal(stored["tets"], remeshed.tets)
    assert abs(remeshed.quality["volume_relative_error"]) < 0.05

    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=500.0, kd=0.05, mu=0.5)
    b.add_soft_mesh(stored["vertices"], stored["tets"], pos=(0.0, 0.0, 0.01), density=1100.0,
                    young_modulus=2.0e4, poisson_ratio=0.3, kd=0.5, radius=0.002)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    a, c = model.state(), model.state()
    for _ in range(2000):  # 0.2 s: a 1 cm drop and the landing
        solver.step(a, c, None, 1e-4)
        a, c = c, a
    assert solver.health().ok
    assert tet_volume_ratios(model, a).min() > 0.9
    assert np.abs(a.particle_qd.numpy()).max() < 0.05
    assert 0.0 < a.particle_q.numpy()[:, 2].min() < 0.002  # resting on its 2 mm contact radius


def _write(path: Path, mesh: trimesh.Trimesh) -> Path:
    mesh.export(str(path))
    return path


@pytest.mark.parametrize("problem, match", [
    ("open", "open"),
    ("non-manifold", "non-manifold"),
    ("flipped face", "inconsistent winding"),
    ("inward", "point inward"),
])
def test_surfaces_that_cannot_bound_a_solid(problem, match):
    box = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    vertices, faces = np.asarray(box.vertices), np.asarray(box.faces)
    if problem == "open":
        faces = faces[1:]
    elif problem == "non-manifold":  # a second closed box touching the first along one edge
        edge = faces[0, :2]
        other = vertices + 2.0 * (vertices[edge].mean(axis=0) - vertices.mean(axis=0))
        shared = {int(edge[0]): int(edge[0]), int(edge[1]): int(edge[1])}
        remap = np.array([shared.get(i, len(vertices) + i) for i in range(len(vertices))])
        vertices = np.vstack([vertices, other])
        faces = np.vstack([faces, remap[faces]])
    elif problem == "flipped face":
        faces = faces.copy()
        faces[3] = faces[3, ::-1]
    else:
        faces = faces[:, ::-1]
    with pytest.raises(ValueError, match=match):
        check_solid(vertices, faces, "box")


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="missing.obj: no such mesh file"):
        load_surface(tmp_path / "missing.obj")
    with pytest.raises(ValueError, match="unsupported mesh format '.dae'"):
        load_surface(tmp_path / "model.dae")
    open_box = trimesh.Trimesh(*(lambda m: (m.vertices, m.faces[1:]))(trimesh.creation.box()), process=False)
    path = _write(tmp_path / "open_box.stl", open_box)
    with pytest.raises(ValueError, match="open_box.stl: the surface is open"):
        load_surface(path)
    (tmp_path / "empty.ply").write_bytes(b"")
    with pytest.raises(ValueError, match="empty.ply"):
        load_surface(tmp_path / "empty.ply")
    (tmp_path / "nan.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 nan 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    with pytest.raises(ValueError, match=r"nan\.obj: vertex 2 \[0\.0, nan, 0\.0\] m is not finite"):
        load_surface(tmp_path / "nan.obj")
    ring = trimesh.creation.annulus(r_min=0.8, r_max=1.0, height=0.1)  # one big cell: its centre is in the hole
    with pytest.raises(ValueError, match="no cell"):
        tetrahedralize(ring.vertices, ring.faces, 5.0, "ring")


FAR = r"lies beyond 100000 m of the mesh's origin \(MAX_VERTEX_COORDINATE\)"


def test_mesh_vertices_far_or_not_finite_are_refused_naming_the_file(tmp_path):
    """Mesh colliders' vertices are checked for NaN/inf and absurd magnitudes (after the scale)
    wherever they come from: OBJ/STL files, MJCF and URDF meshes, UsdPhysics mesh points, the
    builder; the error names the file (was: accepted, or "faces point inward" after a scale)."""
    from wpsim.io.mesh_files import load_collision_surface, load_triangles
    from wpsim.io.mjcf import import_mjcf
    from wpsim.io.scene_parsing import SceneFileError
    from wpsim.io.urdf import import_urdf

    box = trimesh.creation.box()
    far = box.vertices.copy()
    far[3] *= 1e9
    _write(tmp_path / "far.stl", trimesh.Trimesh(far, box.faces, process=False))
    with pytest.raises(ValueError, match=r"far\.stl: vertex \d+ \[.*\] m " + FAR):
        load_collision_surface(tmp_path / "far.stl")
    (tmp_path / "inf.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 inf 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    with pytest.raises(ValueError, match=r"inf\.obj: vertex 2 \[0\.0, inf, 0\.0\] m is not finite"):
        load_collision_surface(tmp_path / "inf.obj")
    with pytest.raises(ValueError, match=r"cube\.obj: vertex 0 .* m " + FAR):
        load_surface(ASSETS / "cube.obj", 1e300)  # was: "the faces point inward"
    assert np.abs(load_triangles(ASSETS / "cube.obj", 1e3).vertices).max() <= 1e5  # a mm file read as m is fine
    scene = tmp_path / "scene.xml"
    scene.write_text(f'<mujoco><asset><mesh name="m" file="{ASSETS / "cube.obj"}" scale="1e7 1 1"/></asset>'
                     '<worldbody><body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>')
    with pytest.raises(SceneFileError, match=r"scene\.xml: <mesh name=\"m\">.*cube\.obj: vertex 0 .* " + FAR):
        import_mjcf(scene)
    robot = tmp_path / "robot.urdf"
    robot.write_text(f'<robot name="r"><link name="a"><collision><geometry><mesh filename="{ASSETS / "cube.obj"}" '
                     'scale="1 1 1e7"/></geometry></collision></link></robot>')
    with pytest.raises(SceneFileError, match=r"robot\.urdf: .*cube\.obj: vertex 0 .* " + FAR):
        import_urdf(robot)
    with pytest.raises(ValueError, match=r"the box: vertex 3 .* " + FAR):
        wpsim.ModelBuilder().add_shape_mesh(-1, far, box.faces, name="the box")


def test_usd_mesh_points_far_or_not_finite_are_refused_naming_file_and_prim(tmp_path):
    from pxr import Usd
    from test_usd_physics import mixed_scene

    from wpsim.io.scene_parsing import SceneFileError
    from wpsim.io.usd_physics import export_physics, import_usd

    path = export_physics(mixed_scene().finalize(device="cpu"), tmp_path / "mixed.usda")
    stage = Usd.Stage.Open(str(path))
    points = stage.GetPrimAtPath("/World/body_3/shape_5").GetAttribute("points")
    far = np.array(points.Get(), dtype=np.float64)
    far[0] *= 1e9
    points.Set([tuple(p) for p in far])
    stage.GetRootLayer().Save()
    with pytest.raises(SceneFileError, match=r"mixed\.usda.*/World/body_3/shape_5.*vertex 0 .* " + FAR):
        import_usd(path)


@pytest.mark.parametrize("asset", ["cube.obj", "icosphere.stl", "cylinder.ply", "soft_finger.obj"])
def test_truncated_and_corrupted_files_fail_cleanly(asset, tmp_path):
    """Every damaged copy either loads as a valid solid or raises ValueError naming the file."""
    data = (ASSETS / asset).read_bytes()
    rng = np.random.default_rng(sum(asset.encode()))
    damaged = [data[:n] for n in sorted({1, 7, len(data) // 3, len(data) // 2, len(data) - 5})]
    for _ in range(12):
        corrupted = bytearray(data)
        for i in rng.integers(0, len(data), size=8):
            corrupted[i] = int(rng.integers(0, 256))
        damaged.append(bytes(corrupted))
    failures = 0
    for k, blob in enumerate(damaged):
        path = tmp_path / f"damaged_{k}{Path(asset).suffix}"
        path.write_bytes(blob)
        try:
            mesh = load_surface(path)
        except ValueError as error:
            assert path.name in str(error)
            failures += 1
        else:
            check_solid(mesh.vertices, mesh.faces, path.name)
    assert failures >= 5  # at least the truncations are caught


def test_seams_duplicates_and_distance_from_the_origin(tmp_path):
    """OBJ texture/normal seams split vertices: they are merged; duplicate faces are dropped;
    volumes of small parts far from the origin stay exact."""
    box = trimesh.creation.box(extents=(0.1, 0.1, 0.1))
    lines = [f"v {x} {y} {z}" for x, y, z in box.vertices[box.faces].reshape(-1, 3)]  # 3 own vertices per face
    lines += [f"vt {u} {v}" for u, v in np.random.default_rng(0).random((3 * len(box.faces), 2))]
    lines += [f"vn {x} {y} {z}" for x, y, z in np.repeat(box.face_normals, 3, axis=0)]
    lines += [f"f {3 * i + 1}/{3 * i + 1}/{3 * i + 1} {3 * i + 2}/{3 * i + 2}/{3 * i + 2} {3 * i + 3}/{3 * i + 3}/{3 * i + 3}"
              for i in range(len(box.faces))]
    (tmp_path / "seams.obj").write_text("\n".join(lines) + "\n")
    merged = load_surface(tmp_path / "seams.obj")
    assert len(merged.vertices) == 8 and merged.volume == pytest.approx(1e-3)
    doubled = trimesh.Trimesh(box.vertices, np.vstack([box.faces, box.faces[:1]]), process=False)
    assert len(load_surface(_write(tmp_path / "doubled.stl", doubled)).faces) == 12
    far = trimesh.creation.icosphere(subdivisions=2, radius=0.005)
    from wpsim.core.meshing import signed_volume
    assert signed_volume(far.vertices + 1e6, far.faces) == pytest.approx(far.volume, rel=1e-9)


def test_quality_counts_the_cells_through_the_thinnest_section():
    """A 0.2 x 0.05 x 0.02 m slab meshed with 5 mm cells: 4 cells through its 2 cm."""
    slab = trimesh.creation.box(extents=(0.2, 0.05, 0.02))
    quality = tetrahedralize(slab.vertices, slab.faces, 0.005).quality
    assert quality["cells_through_thinnest"] == pytest.approx(4.0, rel=1e-6)
