"""URDF conventions of real robot files: package:// and file:// mesh URIs resolved through
a package search path (argument, WPSIM_PACKAGE_PATH, the file's ancestors), lower > upper
limits as "no limit", links without <inertial> or without <inertia>, and xacro refused."""

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.io.urdf import PACKAGE_PATH_VARIABLE, import_urdf

INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1"/></inertial>'
CUBE_FACES = [(1, 4, 3), (1, 3, 2), (5, 6, 7), (5, 7, 8), (1, 2, 6), (1, 6, 5), (4, 8, 7), (4, 7, 3), (1, 5, 8),
              (1, 8, 4), (2, 3, 7), (2, 7, 6)]


def write_cube_obj(path: Path, half: float) -> Path:
    """A closed, outward-wound cube of half extent ``half`` (m) as OBJ."""
    path.parent.mkdir(parents=True, exist_ok=True)
    corners = [(x, y, z) for z in (-1, 1) for (x, y) in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    text = "".join(f"v {x * half} {y * half} {z * half}\n" for x, y, z in corners)
    text += "".join(f"f {a} {b} {c}\n" for a, b, c in CUBE_FACES)
    path.write_text(text)
    return path


def write_tetra_stl(path: Path, size: float) -> Path:
    """An outward-wound right tetrahedron with legs ``size`` (m) as ASCII STL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    a, b, c, d = (0, 0, 0), (size, 0, 0), (0, size, 0), (0, 0, size)
    facets = "".join("facet normal 0 0 0\nouter loop\n" + "".join(f"vertex {x} {y} {z}\n" for x, y, z in tri)
                     + "endloop\nendfacet\n" for tri in ((a, c, b), (a, b, d), (a, d, c), (b, c, d)))
    path.write_text(f"solid t\n{facets}endsolid t\n")
    return path


def mesh_robot(path: Path, filename: str) -> Path:
    """A one-link robot whose collision is the mesh ``filename``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<robot name="r"><link name="base">{INERTIAL}<collision><geometry>'
                    f'<mesh filename="{filename}"/></geometry></collision></link></robot>')
    return path


def mesh_extent(builder) -> float:
    """The largest extent (m) of the builder's only mesh shape."""
    (vertices, _), = builder.shape_meshes.values()
    return float((vertices.max(axis=0) - vertices.min(axis=0)).max())


@pytest.fixture(autouse=True)
def no_package_path(monkeypatch):
    monkeypatch.delenv(PACKAGE_PATH_VARIABLE, raising=False)


# ---------------------------------------------------------------- package:// and file://
def test_package_uri_from_the_argument_a_folder_of_packages_or_the_package_itself(tmp_path):
    write_cube_obj(tmp_path / "ws" / "src" / "my_robot" / "meshes" / "base.obj", 0.1)
    urdf = mesh_robot(tmp_path / "elsewhere" / "r.urdf", "package://my_robot/meshes/base.obj")
    with pytest.raises(ValueError, match="my_robot"):
        import_urdf(urdf)
    builder, _ = import_urdf(urdf, package_paths=[tmp_path / "ws" / "src"])
    assert mesh_extent(builder) == pytest.approx(0.2)
    builder, _ = import_urdf(urdf, package_paths=str(tmp_path / "ws" / "src" / "my_robot"))  # the package itself
    assert mesh_extent(builder) == pytest.approx(0.2)


def test_package_uri_from_the_environment_variable(tmp_path, monkeypatch):
    write_tetra_stl(tmp_path / "pkgs" / "arm" / "meshes" / "link.stl", 0.3)
    urdf = mesh_robot(tmp_path / "robots" / "r.urdf", "package://arm/meshes/link.stl")
    monkeypatch.setenv(PACKAGE_PATH_VARIABLE, os.pathsep.join([str(tmp_path / "nothing"), str(tmp_path / "pkgs")]))
    builder, _ = import_urdf(urdf)
    assert mesh_extent(builder) == pytest.approx(0.3)


def test_package_uri_from_the_files_ancestors(tmp_path):
    # the URDF inside its package: .../my_robot/urdf/r.urdf naming package://my_robot/...
    write_cube_obj(tmp_path / "my_robot" / "meshes" / "a.obj", 0.05)
    inside = mesh_robot(tmp_path / "my_robot" / "urdf" / "r.urdf", "package://my_robot/meshes/a.obj")
    assert mesh_extent(import_urdf(inside)[0]) == pytest.approx(0.1)
    # an ancestor holding the package as a subfolder: ws/robots/r.urdf, ws/other_pkg/...
    write_cube_obj(tmp_path / "ws" / "other_pkg" / "m" / "b.obj", 0.25)
    beside = mesh_robot(tmp_path / "ws" / "robots" / "r.urdf", "package://other_pkg/m/b.obj")
    assert mesh_extent(import_urdf(beside)[0]) == pytest.approx(0.5)


def test_package_search_order_argument_then_environment_then_ancestors(tmp_path, monkeypatch):
    for folder, half in (("arg", 0.1), ("env", 0.2), ("ws", 0.3)):
        write_cube_obj(tmp_path / folder / "p" / "m.obj", half)
    urdf = mesh_robot(tmp_path / "ws" / "r.urdf", "package://p/m.obj")
    assert mesh_extent(import_urdf(urdf)[0]) == pytest.approx(0.6)
    monkeypatch.setenv(PACKAGE_PATH_VARIABLE, str(tmp_path / "env"))
    assert mesh_extent(import_urdf(urdf)[0]) == pytest.approx(0.4)
    assert mesh_extent(import_urdf(urdf, package_paths=[tmp_path / "arg"])[0]) == pytest.approx(0.2)
    # a package folder without the file does not stop the search
    (tmp_path / "arg" / "p" / "m.obj").unlink()
    assert mesh_extent(import_urdf(urdf, package_paths=[tmp_path / "arg"])[0]) == pytest.approx(0.4)


def test_file_uris_absolute_and_relative(tmp_path):
    mesh = write_cube_obj(tmp_path / "meshes" / "c.obj", 0.15)
    absolute = mesh_robot(tmp_path / "a" / "r.urdf", f"file://{mesh}")
    assert mesh_extent(import_urdf(absolute)[0]) == pytest.approx(0.3)
    relative = mesh_robot(tmp_path / "r.urdf", "file://meshes/c.obj")
    assert mesh_extent(import_urdf(relative)[0]) == pytest.approx(0.3)
    missing = mesh_robot(tmp_path / "m.urdf", f"file://{tmp_path / 'meshes' / 'none.obj'}")
    with pytest.raises(ValueError, match="not found") as error:
        import_urdf(missing)
    assert str(missing) in str(error.value) and 'link name="base"' in str(error.value)


def test_unresolvable_package_names_file_link_uri_and_folders_and_adds_nothing(tmp_path):
    urdf = mesh_robot(tmp_path / "robots" / "r.urdf", "package://ghost/meshes/x.stl")
    extra = tmp_path / "extra"
    extra.mkdir()
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError) as error:
        import_urdf(urdf, builder, package_paths=[extra])
    message = str(error.value)
    for part in (str(urdf), '<link name="base">', "package://ghost/meshes/x.stl", str(extra),
                 str(tmp_path / "robots"), "nothing is downloaded", PACKAGE_PATH_VARIABLE):
        assert part in message, part
    assert builder.bodies.count == 0 and builder.shapes.count == 0
    # the package exists but lacks the file: that folder is named too
    (tmp_path / "robots" / "ghost").mkdir()
    with pytest.raises(ValueError, match="package folders found without") as error:
        import_urdf(urdf)
    assert str(tmp_path / "robots" / "ghost") in str(error.value)


@pytest.mark.parametrize("uri", ["https://example.com/m.stl", "package://", "package://only_a_package"])
def test_urls_and_malformed_package_uris_are_refused(tmp_path, uri):
    urdf = mesh_robot(tmp_path / "r.urdf", uri)
    with pytest.raises(ValueError, match="is a URL") as error:
        import_urdf(urdf)
    assert str(urdf) in str(error.value) and uri in str(error.value)


# ---------------------------------------------------------------- limits
def limit_robot(path: Path, lower: str, upper: str) -> Path:
    path.write_text(f'<robot name="r">\n<link name="world"/>\n<link name="a">{INERTIAL}</link>\n'
                    '<joint name="hinge" type="revolute"><parent link="world"/><child link="a"/>\n'
                    f'<limit lower="{lower}" upper="{upper}" effort="1" velocity="1"/></joint>\n</robot>')
    return path


def test_lower_above_upper_means_no_limit_and_is_reported_once(tmp_path):
    path = limit_robot(tmp_path / "r.urdf", "1", "-1")
    with pytest.warns(UserWarning) as record:
        builder, scene = import_urdf(path)
    ours = [w for w in record if str(path) in str(w.message)]
    assert len(ours) == 1
    model = builder.finalize(dtype=wp.float64)
    assert model.joint_limit_lower.numpy()[0] < -1e20 and model.joint_limit_upper.numpy()[0] > 1e20
    (item,) = scene.unhonoured
    assert (item.file, item.line, item.element, item.attribute, item.value) == (str(path), 5, "<limit>", "lower", "1")
    assert "no limit" in item.note and 'upper="-1"' in item.note and 'name="hinge"' in item.note
    assert f'{path}:5: <limit> lower="1"' in str(ours[0].message)


def test_ordered_limits_are_kept_without_a_warning(tmp_path):
    path = limit_robot(tmp_path / "r.urdf", "-0.5", "0.5")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        builder, scene = import_urdf(path)
    model = builder.finalize(dtype=wp.float64)
    assert model.joint_limit_lower.numpy()[0] == -0.5 and model.joint_limit_upper.numpy()[0] == 0.5
    assert scene.unhonoured == []


# ---------------------------------------------------------------- missing <inertial> / <inertia>
def test_links_without_inertial(tmp_path):
    """Welded: massless. Moving with collision geometry: mass from it at default_density.
    Moving without geometry (a universal joint's dummy link): a small sphere. Moving but
    welded to a link with an <inertial>: massless, not reported."""
    path = tmp_path / "r.urdf"
    path.write_text(
        '<robot name="r"><link name="world"/>'
        f'<link name="base">{INERTIAL}</link>'
        '<link name="sensor"><collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>'
        '<link name="paddle"><collision><geometry><box size="0.2 0.1 0.05"/></geometry></collision></link>'
        '<link name="dummy"/>'
        f'<link name="hand">{INERTIAL}</link>'
        '<link name="mount"/>'
        f'<link name="tool">{INERTIAL}</link>'
        '<joint name="j0" type="fixed"><parent link="world"/><child link="base"/></joint>'
        '<joint name="j1" type="fixed"><parent link="base"/><child link="sensor"/></joint>'
        '<joint name="j2" type="revolute"><parent link="base"/><child link="paddle"/><axis xyz="0 0 1"/></joint>'
        '<joint name="j3" type="revolute"><parent link="base"/><child link="dummy"/><axis xyz="1 0 0"/></joint>'
        '<joint name="j4" type="revolute"><parent link="dummy"/><child link="hand"/><axis xyz="0 1 0"/></joint>'
        '<joint name="j5" type="prismatic"><parent link="base"/><child link="mount"/></joint>'
        '<joint name="j6" type="fixed"><parent link="mount"/><child link="tool"/></joint>'
        '</robot>')
    with pytest.warns(UserWarning, match="has no <inertial>"):
        builder, scene = import_urdf(path, default_density=500.0, default_mass=0.02)
    mass = builder.bodies.array("body_mass")
    b = scene.bodies
    assert mass[b["sensor"]] == 0.0 and mass[b["mount"]] == 0.0
    assert mass[b["paddle"]] == pytest.approx(500.0 * 0.2 * 0.1 * 0.05)
    assert mass[b["dummy"]] == pytest.approx(0.02)
    radius = (3 * 0.02 / (4 * np.pi * 500.0)) ** (1 / 3)
    assert np.allclose(builder.bodies.array("body_inertia")[b["dummy"]], np.eye(3) * 0.4 * 0.02 * radius**2)
    assert sorted(u.element for u in scene.unhonoured) == ['<link name="dummy">', '<link name="paddle">']
    model = builder.finalize(dtype=wp.float64)  # every moving link has mass: accepted
    assert model.body_mass.numpy()[b["paddle"]] == pytest.approx(0.5)


def test_a_floating_root_without_inertial_gets_mass_from_its_geometry(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text('<robot name="r"><link name="ball"><collision><geometry><sphere radius="0.1"/></geometry>'
                    '</collision></link></robot>')
    assert import_urdf(path)[0].bodies.array("body_mass")[0] == 0.0  # welded to the world
    with pytest.warns(UserWarning):
        builder, _ = import_urdf(path, floating=True)
    assert builder.bodies.array("body_mass")[0] == pytest.approx(1000.0 * 4 / 3 * np.pi * 0.1**3)


def test_mass_only_inertial_uses_the_collision_geometry_or_a_sphere(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text(
        '<robot name="r"><link name="world"/>'
        '<link name="bar"><inertial><origin xyz="0 0 0.3" rpy="0 1 0"/><mass value="2"/></inertial>'
        '<collision><origin xyz="0 0 0.5"/><geometry><box size="0.1 0.2 0.6"/></geometry></collision></link>'
        '<link name="blob"><inertial><mass value="3"/></inertial></link>'
        '<joint name="j1" type="revolute"><parent link="world"/><child link="bar"/></joint>'
        '<joint name="j2" type="revolute"><parent link="bar"/><child link="blob"/></joint></robot>')
    with pytest.warns(UserWarning, match="no <inertia>"):
        builder, scene = import_urdf(path)
    b, inertia = scene.bodies, builder.bodies.array("body_inertia")
    assert builder.bodies.array("body_mass")[b["bar"]] == pytest.approx(2.0)
    assert np.allclose(builder.bodies.array("body_com")[b["bar"]], (0.0, 0.0, 0.3))  # the file's centre of mass
    box = 2.0 / 12.0 * np.array([0.2**2 + 0.6**2, 0.1**2 + 0.6**2, 0.1**2 + 0.2**2])
    assert np.allclose(inertia[b["bar"]], np.diag(box))  # box axes = link axes; the rpy is ignored
    radius = (3 * 3.0 / (4 * np.pi * 1000.0)) ** (1 / 3)
    assert np.allclose(inertia[b["blob"]], np.eye(3) * 0.4 * 3.0 * radius**2)
    assert [u.element for u in scene.unhonoured] == ["<inertial>", "<inertial>"]
    assert all("no <inertia>" in u.note for u in scene.unhonoured)
    builder.finalize(dtype=wp.float64)


def test_bad_defaults_and_inertial_without_mass_are_refused(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text('<robot name="r"><link name="a"><inertial><inertia ixx="1" iyy="1" izz="1"/></inertial>'
                    '</link></robot>')
    with pytest.raises(ValueError, match=r'r.urdf: <link name="a"> <inertial> needs <mass>'):
        import_urdf(path)
    for bad in ({"default_density": 0.0}, {"default_mass": -1.0}, {"default_density": float("nan")}):
        with pytest.raises(ValueError, match="must be > 0"):
            import_urdf(path, **bad)


# ---------------------------------------------------------------- xacro
@pytest.mark.parametrize("name, text", [
    ("robot.urdf.xacro", '<robot name="r"><link name="a"/></robot>'),
    ("robot.urdf", '<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="${prefix}a"/></robot>'),
    ("robot.urdf", '<robot name="r"><xacro:include filename="x.xacro"/><link name="a"/></robot>'),
    ("robot.urdf", ('<robot name="r" xmlns:x="http://www.ros.org/wiki/xacro"><x:property name="p" value="1"/>'
                    '<link name="a"/></robot>')),
])
def test_xacro_is_refused_with_how_to_expand_it(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError) as error:
        import_urdf(path, builder)
    target = "robot.urdf" if name.endswith(".xacro") else "robot_expanded.urdf"
    assert str(error.value) == f"{path}: is xacro; expand it with xacro first (e.g. `xacro {name} > {target}`)"
    assert builder.bodies.count == 0


def test_expanded_xacro_output_keeping_the_namespace_declaration_is_accepted(tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(f'<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="a">{INERTIAL}</link>'
                    '</robot>')
    builder, scene = import_urdf(path)
    assert builder.bodies.count == 1 and list(scene.bodies) == ["a"]


def test_import_robot_passes_package_paths_and_explains_xacro(tmp_path):
    """import_robot (wpsim run's loader) looks up package:// meshes in its package_paths and
    refuses a .xacro file with the command that expands it."""
    from wpsim.io.robots import import_robot, is_robot_file

    package = tmp_path / "pkgs" / "my_robot" / "meshes"
    package.mkdir(parents=True)
    (package / "cube.obj").write_text(
        "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
        "f 1 3 2\nf 1 4 3\nf 5 6 7\nf 5 7 8\nf 1 2 6\nf 1 6 5\nf 2 3 7\nf 2 7 6\nf 3 4 8\nf 3 8 7\nf 4 1 5\nf 4 5 8\n")
    robot = tmp_path / "robot" / "r.urdf"
    robot.parent.mkdir()
    robot.write_text('<robot name="r"><link name="base"><inertial><mass value="1"/>'
                     '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
                     '<collision><geometry><mesh filename="package://my_robot/meshes/cube.obj"/></geometry>'
                     '</collision></link></robot>')
    builder, _ = import_robot(robot, package_paths=[tmp_path / "pkgs"])
    assert builder.shapes.count == 1
    xacro = tmp_path / "r.urdf.xacro"
    xacro.write_text('<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="base"/></robot>')
    assert is_robot_file(xacro)
    with pytest.raises(ValueError, match="expand it with xacro first"):
        import_robot(xacro)
