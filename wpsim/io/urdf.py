"""URDF import, the common subset, into a ``ModelBuilder``.

Supported: ``<link>`` with ``<inertial>`` (``origin xyz rpy``, ``mass``, ``inertia``) and
``<collision>`` geometry ``box``, ``sphere``, ``cylinder`` (imported as a capsule of the
same radius and overall length), ``mesh`` (``filename``, ``scale``) and pybullet's ``plane``
(``normal``; an infinite static plane, on a root link welded to the world);
``<joint type="revolute|continuous|prismatic|fixed|floating|spherical">`` (spherical:
pybullet's ball joint, without limits) with ``origin``, ``axis``, ``limit lower upper`` and
``dynamics damping friction``. A link named ``world`` (no inertial) is the
world; other root links are welded to the world, or float freely with ``floating=True``.
URDF has no actuators: drive gains are importer arguments (``drive_ke``, ``drive_kd``).

Conventions of real robot files:

- Mesh ``filename``: a plain path is relative to the URDF file. ``package://PKG/rest`` is
  looked up, in this order, in the folders of ``package_paths`` (an importer argument), then
  of the ``WPSIM_PACKAGE_PATH`` environment variable (``os.pathsep``-separated), then among
  the URDF file's ancestor folders: a folder named ``PKG`` in one of those places is the
  package (``<folder>/PKG`` or the folder itself when its name is ``PKG``); the first package
  folder holding ``rest`` wins. ``file:///abs/path`` is that absolute path, ``file://rel``
  is relative to the URDF file. Nothing is downloaded: ``http://`` and other URLs are refused,
  and a mesh that cannot be found raises naming the file, link, URI and the folders searched.
- ``<limit lower="a" upper="b">`` with a > b means no limit (pybullet's convention); the joint
  is listed in ``ImportedScene.unhonoured``.
- A link without ``<inertial>`` that does not move against its parent (fixed joint, or a
  root welded to the world) is massless: its shapes ride on the parent, as in Drake and as
  MuJoCo's ``fusestatic``. A moving link without ``<inertial>`` whose rigid group (itself and
  the links welded to it by fixed joints) has no ``<inertial>`` either gets mass from the
  group's collision geometry at ``default_density`` (kg/m^3, as MuJoCo's
  ``inertiafromgeom``), or, without collision geometry (e.g. the dummy link between the two
  revolute joints of a universal joint), a solid sphere of ``default_mass`` (kg) at
  ``default_density`` centred at the link origin. Each such link is listed in
  ``ImportedScene.unhonoured``.
- ``<inertial>`` with ``<mass>`` but no ``<inertia>``, or an all-zero one (a point mass,
  which pybullet accepts): the central inertia of the link's
  collision geometry (uniform density) scaled to that mass, placed at the inertial origin;
  without collision geometry a solid sphere of that mass at ``default_density``. Listed in
  ``ImportedScene.unhonoured``.
- Collision meshes that do not bound a solid (open, non-manifold, inconsistently wound: most
  exported robot meshes) collide and weigh as their convex hull, listed once per file in
  ``ImportedScene.unhonoured``.
- Principal moments that break the triangle inequality (no rigid body has them; pybullet
  accepts them): the two smaller are raised by half the deficit each, the least change about
  the same axes, and the link is listed in ``ImportedScene.unhonoured``.
- Numbers pybullet reads although they are malformed (commas between them, a trailing dot,
  ``$(optenv NAME default)``, more numbers than the attribute takes) are read as pybullet
  reads them (``wpsim.io.urdf_leniency``), each listed in ``ImportedScene.unhonoured``.
- xacro files (``.xacro`` suffix, ``<xacro:...>`` or other xacro-namespace elements, ``${...}``
  with ``xmlns:xacro``) are refused with a hint to expand them with ``xacro`` first; macros
  are never evaluated here. A bare ``xmlns:xacro`` declaration (xacro keeps it in its output)
  is accepted.

Every item in ``ImportedScene.unhonoured`` (``wpsim.io.mjcf_compile.Unhonoured``, with file
and line) is also warned about once per import.

Rejected with a ``SceneFileError`` naming the file and element: malformed XML, unknown
joint types, links with two parents, joints naming unknown links, cycles, missing mesh
files, unresolvable ``package://`` URIs, non-local URLs, non-positive mass or an inertia
that is not positive definite on a moving link.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import quat_between, quat_to_matrix, transform_multiply
from wpsim.core.mass import balanced_inertia
from wpsim.io.mjcf_compile import Unhonoured
from wpsim.io.scene_parsing import (
    ImportedScene,
    SceneFileError,
    add_all_or_nothing,
    describe,
    floats,
    load_mesh,
    parse_xml,
    quat_from_euler,
)
from wpsim.io.urdf_leniency import pybullet_numbers

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "spherical")  # spherical: pybullet's
PACKAGE_PATH_VARIABLE = "WPSIM_PACKAGE_PATH"
"""Environment variable: folders (``os.pathsep``-separated) searched for ``package://`` meshes."""


# ---------------------------------------------------------------------- files
def _refuse_xacro(path: Path, root=None):
    """Raise if the file is xacro (a macro language to expand before import): a ``.xacro``
    suffix, ``<xacro:...>`` elements, ``${...}`` with ``xmlns:xacro``, or (``root`` given,
    after parsing) an element in the xacro namespace. A file that only declares
    ``xmlns:xacro`` is xacro's output (it keeps the declaration) and is accepted."""
    if root is None and not path.is_file():
        return  # parse_xml names the missing file
    if root is not None:
        found = any(element.tag.startswith("{") and "xacro" in element.tag for element in root.iter())
    else:
        data = path.read_bytes()
        found = (path.name.lower().endswith(".xacro") or b"<xacro:" in data
                 or (b"xmlns:xacro" in data and b"${" in data))
    if found:
        if path.name.lower().endswith(".xacro"):
            target = path.name[:-len(".xacro")]
            target = target if target.lower().endswith(".urdf") else f"{target}.urdf"
        else:  # never suggest writing over the input
            target = f"{path.stem}_expanded.urdf"
        raise SceneFileError(f"{path}: is xacro; expand it with xacro first (e.g. `xacro {path.name} > {target}`)")


def package_search_path(package_paths=None) -> list:
    """The folders searched for ``package://`` meshes before the URDF file's ancestors:
    ``package_paths`` (a folder or a list of folders), then ``WPSIM_PACKAGE_PATH``."""
    if package_paths is None:
        package_paths = []
    elif isinstance(package_paths, (str, os.PathLike)):
        package_paths = [package_paths]
    env = os.environ.get(PACKAGE_PATH_VARIABLE, "")
    return [Path(p).expanduser() for p in list(package_paths) + env.split(os.pathsep) if str(p)]


def resolve_mesh_uri(path: Path, link, filename: str, roots: list) -> Path:
    """The local file a URDF mesh ``filename`` names (see the module docstring); it must exist."""
    where = f"{path}: {describe(link)} mesh \"{filename}\""
    scheme, sep, rest = filename.partition("://")
    if not sep:
        candidate = (path.parent / filename).resolve()
        if not candidate.is_file():
            raise SceneFileError(f"{where}: file not found (looked for {candidate})")
        return candidate
    scheme = scheme.lower()
    if scheme == "file":
        rest = unquote(rest)
        if rest.startswith("localhost/"):
            rest = rest[len("localhost"):]
        candidate = Path(rest) if rest.startswith("/") else (path.parent / rest)
        candidate = candidate.resolve()
        if not candidate.is_file():
            raise SceneFileError(f"{where}: file not found (looked for {candidate})")
        return candidate
    if scheme != "package":
        raise SceneFileError(f"{where} is a URL; only local files are read (nothing is downloaded)")
    package, _, relative = unquote(rest).partition("/")
    if not package or not relative.strip("/"):
        raise SceneFileError(f"{where} is a URL without a package and file (expected package://PKG/path)")
    searched, packages = [], []
    ancestors = [path.resolve().parent, *path.resolve().parent.parents]
    for folder in [*roots, *ancestors]:
        searched.append(str(folder))
        for candidate in ((folder,) if folder.name == package else ()) + (folder / package,):
            if candidate.is_dir() and candidate not in packages:
                packages.append(candidate)
                if (candidate / relative).is_file():
                    return (candidate / relative).resolve()
    found = (f"; package folders found without \"{relative}\": {', '.join(map(str, packages))}" if packages
             else "")
    raise SceneFileError(
        f"{where} is a URL of ROS package \"{package}\" that cannot be resolved to a local file{found}; "
        f"searched for a folder \"{package}\" in and at: {', '.join(searched)} (pass package_paths=[...] or set "
        f"{PACKAGE_PATH_VARIABLE}; nothing is downloaded)")


# ---------------------------------------------------------------------- links
def _origin(path: Path, element) -> tuple:
    """(position (3,), quaternion (x, y, z, w)) of an element's <origin> (identity if none)."""
    origin = element.find("origin") if element is not None else None
    if origin is None:
        return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    xyz = floats(path, origin, "xyz", 3, (0.0, 0.0, 0.0))
    rpy = floats(path, origin, "rpy", 3, (0.0, 0.0, 0.0))
    return xyz, quat_from_euler(rpy, "xyz")  # URDF: roll, pitch, yaw about fixed axes


def _inertial(path: Path, link) -> tuple:
    """(mass kg, centre of mass (3,), inertia about it in link axes (3, 3) or None when the
    <inertial> gives a mass only); zeros if the link has no <inertial>."""
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    mass_el = inertial.find("mass")
    inertia_el = inertial.find("inertia")
    if mass_el is None:
        raise SceneFileError(f"{path}: {describe(link)} <inertial> needs <mass>")
    mass = floats(path, mass_el, "value", 1)
    if mass is None:
        raise SceneFileError(f"{path}: {describe(link)} <mass> has no value")
    com, rot = _origin(path, inertial)
    if inertia_el is None:
        return float(mass[0]), com, None
    names = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
    xx, yy, zz, xy, xz, yz = (float(floats(path, inertia_el, n, 1, (0.0,))[0]) for n in names)
    if mass[0] > 0.0 and xx == yy == zz == xy == xz == yz == 0.0:  # a point mass: as if no <inertia>
        return float(mass[0]), com, None
    R = quat_to_matrix(rot)
    tensor = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    return float(mass[0]), com, R @ tensor @ R.T


def _sphere(mass: float, density: float) -> tuple:
    """(radius m, central inertia (3, 3)) of a solid sphere of ``mass`` at ``density``."""
    radius = (3.0 * mass / (4.0 * np.pi * density)) ** (1.0 / 3.0)
    return radius, np.eye(3) * 0.4 * mass * radius**2


def _add_collisions(path: Path, b: ModelBuilder, link, body: int, contact: dict, roots: list, meshes: dict,
                    density: float = 0.0, welded_root: bool = False):
    """The link's collision shapes, massless unless ``density`` > 0 (kg/m^3); ``meshes``
    caches loaded mesh files: (filename, scale) -> (vertices, faces, note, first element)."""
    for collision in link.findall("collision"):
        geometry = collision.find("geometry")
        shape = None if geometry is None or len(geometry) == 0 else geometry[0]
        if shape is None:
            raise SceneFileError(f"{path}: {describe(link)} <collision> has no geometry")
        pos, rot = _origin(path, collision)
        try:
            if shape.tag == "box":
                half = floats(path, shape, "size", 3, required=True) / 2.0
                b.add_shape_box(body, pos, rot, *half, density=density, **contact)
            elif shape.tag == "sphere":
                radius = float(floats(path, shape, "radius", 1, required=True)[0])
                b.add_shape_sphere(body, pos, rot, radius=radius, density=density, **contact)
            elif shape.tag == "cylinder":
                radius = float(floats(path, shape, "radius", 1, required=True)[0])
                length = float(floats(path, shape, "length", 1, required=True)[0])
                if not length > 0.0:
                    raise ValueError(f"length must be positive, got {length:g} m")
                b.add_shape_capsule(body, pos, rot, radius=radius, half_height=max(0.5 * length - radius, 0.0),
                                    density=density, **contact)
            elif shape.tag == "mesh":
                filename = shape.get("filename") or ""
                scale = floats(path, shape, "scale", 3, (1.0, 1.0, 1.0))
                key = (filename, tuple(scale))
                if key not in meshes:
                    mesh_path = resolve_mesh_uri(path, link, filename, roots)
                    meshes[key] = (*load_mesh(path, shape, mesh_path, scale), shape)
                vertices, faces = meshes[key][:2]
                b.add_shape_mesh(body, vertices, faces, pos, rot, density=density, name=f"{path}: {filename}",
                                 **contact)
            elif shape.tag == "plane" and welded_root:  # pybullet's: an infinite static plane
                normal = floats(path, shape, "normal", 3, (0.0, 0.0, 1.0))
                turn = quat_between((0.0, 0.0, 1.0), normal / np.linalg.norm(normal))  # the plane's z to the normal
                facing = transform_multiply(np.concatenate([pos, rot]), np.concatenate([np.zeros(3), turn]))[3:]
                b.add_shape_plane(pos, facing, **contact)
            elif shape.tag == "plane":
                raise SceneFileError(f"{path}: {describe(link)}: a <plane> only on a root link welded to the world")
            else:
                raise SceneFileError(f"{path}: {describe(link)}: unsupported geometry <{shape.tag}>")
        except SceneFileError:
            raise
        except (ValueError, TypeError) as error:
            raise SceneFileError(f"{path}: {describe(link)} <{shape.tag}>: {error}") from error


def _geometry_inertia(path: Path, link, mass: float, roots: list, meshes: dict):
    """Central inertia (3, 3) of the link's collision geometry at uniform density, scaled to
    ``mass``; None without collision geometry."""
    scratch = ModelBuilder()
    body = scratch.add_body()
    _add_collisions(path, scratch, link, body, {}, roots, meshes, density=1.0)
    volume = float(scratch.bodies.array("body_mass")[body])
    if volume <= 0.0:
        return None
    return scratch.bodies.array("body_inertia")[body] * (mass / volume)


def import_urdf(path, builder: ModelBuilder | None = None, floating: bool = False, ke: float = 1.0e4,
                kd: float = 100.0, mu: float = 0.5, drive_ke: float = 0.0, drive_kd: float = 0.0,
                package_paths=None, default_density: float = 1000.0, default_mass: float = 0.01) -> tuple:
    """Add the robot in the URDF file at ``path`` to ``builder`` (a new z-up one if None);
    returns (builder, ImportedScene). floating: root links get a free joint instead of
    being welded to the world. ke (N/m), kd (N s/m), mu: contact parameters of every
    collision shape; drive_ke/drive_kd: PD gains of every revolute/prismatic joint.
    package_paths: folders searched first for ``package://`` meshes (then
    ``WPSIM_PACKAGE_PATH``, then the file's ancestor folders). default_density (kg/m^3) and
    default_mass (kg): for moving links without ``<inertial>`` and ``<inertial>`` without
    ``<inertia>`` (see the module docstring). What the importer changes is listed in
    ``ImportedScene.unhonoured`` and warned about once. Nothing is added if the file is
    rejected (``SceneFileError``, a ValueError)."""
    path = Path(path)
    if not (np.isfinite(default_density) and default_density > 0.0):
        raise ValueError(f"{path}: default_density must be > 0 kg/m^3, got {default_density}")
    if not (np.isfinite(default_mass) and default_mass > 0.0):
        raise ValueError(f"{path}: default_mass must be > 0 kg, got {default_mass}")
    _refuse_xacro(path)
    lines: dict = {}
    root = parse_xml(path, "robot", lines)
    _refuse_xacro(path, root)
    leniencies = pybullet_numbers(root, path, lines)
    roots = package_search_path(package_paths)
    links = {}
    for link in root.findall("link"):
        name = link.get("name")
        if not name or name in links:
            raise SceneFileError(f"{path}: {describe(link)}: links need unique names")
        links[name] = link
    joints, parent_of, joint_of, joint_names = [], {}, {}, set()
    for joint in root.findall("joint"):
        jtype = joint.get("type")
        if joint.get("name") is not None and joint.get("name") in joint_names:
            raise SceneFileError(f"{path}: {describe(joint)}: a second joint named \"{joint.get('name')}\"")
        joint_names.add(joint.get("name"))
        if jtype not in JOINT_TYPES:
            raise SceneFileError(f"{path}: {describe(joint)}: unknown joint type \"{jtype}\" (supported: "
                                 f"{', '.join(JOINT_TYPES)})")
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            raise SceneFileError(f"{path}: {describe(joint)}: needs <parent link> and <child link>")
        p, c = parent.get("link"), child.get("link")
        for name in (p, c):
            if name not in links:
                raise SceneFileError(f"{path}: {describe(joint)}: unknown link \"{name}\"")
        if c in parent_of:
            raise SceneFileError(f"{path}: {describe(joint)}: link \"{c}\" already has a parent joint")
        if c == "world" and links["world"].find("inertial") is None:
            raise SceneFileError(f"{path}: {describe(joint)}: the world link cannot be a child")
        parent_of[c] = p
        joint_of[c] = jtype
        joints.append((joint, jtype, p, c))
    world = "world" if "world" in links and links["world"].find("inertial") is None else None
    if not [name for name in links if name != world]:
        raise SceneFileError(f"{path}: the robot has no links")
    contact = {"ke": ke, "kd": kd, "mu": mu}
    builder = ModelBuilder() if builder is None else builder
    scene = ImportedScene(unhonoured=leniencies)
    meshes: dict = {}

    def note(element, note, attribute=None, value=None, label=None):
        scene.unhonoured.append(Unhonoured(str(path), lines.get(element, 0), label or describe(element), attribute,
                                           value, note))

    def moves(name: str) -> bool:
        """Whether the link moves against its parent (a root: when it floats)."""
        return joint_of.get(name, "floating" if floating else "fixed") != "fixed"

    welded = {}  # link -> links welded to it by fixed joints
    for joint, jtype, p, c in joints:
        if jtype == "fixed":
            welded.setdefault(p, []).append(c)

    def group(name: str) -> list:
        """The link and every link welded to it (fixed joints, transitively)."""
        members, stack = [], [name]
        while stack:
            member = stack.pop()
            if member in members:
                continue  # a cycle; refused when the joints are added
            members.append(member)
            stack.extend(welded.get(member, []))
        return members

    # links whose collision geometry gives them mass; links given a small sphere
    by_density, by_sphere = set(), set()
    for name, link in links.items():
        if name == world or link.find("inertial") is not None or not moves(name):
            continue
        members = group(name)
        if any(links[m].find("inertial") is not None for m in members):
            continue
        with_geometry = [m for m in members if links[m].find("collision") is not None]
        by_density.update(with_geometry)
        if not with_geometry:
            by_sphere.add(name)

    def add_link(b: ModelBuilder, name: str):
        link = links[name]
        mass, com, inertia = _inertial(path, link)
        if inertia is None:  # <inertial> with a mass only
            inertia = _geometry_inertia(path, link, mass, roots, meshes) if mass > 0.0 else np.zeros((3, 3))
            how = "the central inertia of its collision geometry scaled to that mass"
            if inertia is None:
                inertia = _sphere(mass, default_density)[1]
                how = f"the inertia of a solid sphere of that mass at {default_density:g} kg/m^3"
            missing = "a zero <inertia>" if link.find("inertial").find("inertia") is not None else "no <inertia>"
            note(link.find("inertial"), f"of {describe(link)} has a mass ({mass:g} kg) but {missing}: given {how}",
                 label="<inertial>")
        elif name in by_sphere:
            mass = default_mass
            radius, inertia = _sphere(mass, default_density)
        inertia, raised = balanced_inertia(inertia)
        if raised:
            note(link.find("inertial"), f"of {describe(link)}: principal moments break the triangle inequality (no "
                 f"rigid body has them): the two smaller raised by {raised:.3g} kg m^2 each", label="<inertial>")
        try:
            body = scene.bodies[name] = b.add_body(mass=mass, com=com, inertia=inertia)
        except ValueError as error:
            raise SceneFileError(f"{path}: {describe(link)}: {error}") from error
        density = default_density if name in by_density else 0.0
        _add_collisions(path, b, link, body, contact, roots, meshes, density=density,
                        welded_root=name not in parent_of and not moves(name))
        if moves(name) and name not in parent_of.values() and not mass > 0.0:  # a leaf, weighed by its shapes?
            weight = float(b.bodies.array("body_mass")[body])
            if not (weight > 0.0 and np.linalg.eigvalsh(b.bodies.array("body_inertia")[body]).min() > 0.0):
                raise SceneFileError(f"{path}: {describe(link)}: a moving link that carries no other needs a positive "
                                     f"mass and inertia, got {weight:g} kg")  # finalize named a body index only
        if name in by_sphere:
            note(link, f"has no <inertial> and moves: given {mass:g} kg, a solid sphere of radius {radius:.3g} m "
                       f"({default_density:g} kg/m^3) at its origin")
        elif density > 0.0:
            given = float(b.bodies.array("body_mass")[body])
            note(link, f"has no <inertial> and moves with its welded links: given {given:.6g} kg from its collision "
                       f"geometry at {default_density:g} kg/m^3")

    def build(b: ModelBuilder):
        for name in links:
            if name != world:
                add_link(b, name)
        for name in links:  # roots
            if name != world and name not in parent_of:
                body = scene.bodies[name]
                scene.joints[f"{name}_root"] = b.add_joint_free(body) if floating else b.add_joint_fixed(-1, body)
        for joint, jtype, p, c in joints:
            parent = -1 if p == world else scene.bodies[p]
            pos, rot = _origin(path, joint)
            try:
                if jtype == "floating":
                    if parent != -1:
                        raise SceneFileError(f"{path}: {describe(joint)}: a floating joint must have the world as parent")
                    index = b.add_joint_free(scene.bodies[c], pos=pos, rot=rot)
                elif jtype == "fixed":
                    index = b.add_joint_fixed(parent, scene.bodies[c], parent_pos=pos, parent_rot=rot)
                elif jtype == "spherical":
                    index = b.add_joint_ball(parent, scene.bodies[c], parent_pos=pos, parent_rot=rot)
                    if joint.find("limit") is not None:
                        note(joint.find("limit"), f"of {describe(joint)} is not honoured: ball joints have no limits",
                             label="<limit>")
                else:
                    index = _moving_joint(path, b, joint, jtype, parent, scene.bodies[c], pos, rot, drive_ke, drive_kd,
                                          note)
            except SceneFileError:
                raise
            except ValueError as error:
                raise SceneFileError(f"{path}: {describe(joint)}: {error}") from error
            scene.joints[joint.get("name") or f"joint{index}"] = index

    add_all_or_nothing(builder, build)
    for (filename, _), (_, _, mesh_note, shape) in meshes.items():
        if mesh_note is not None:
            note(shape, f"mesh \"{filename}\" is {mesh_note}", label="<mesh>")
    if scene.unhonoured:
        count = len(scene.unhonoured)
        listed = "\n".join(f"  {item}" for item in scene.unhonoured)
        warnings.warn(f"{path}: {count} item{'s' if count != 1 else ''} of the file not honoured as written "
                      f"(ImportedScene.unhonoured):\n{listed}", stacklevel=2)
    return builder, scene


def _moving_joint(path: Path, b: ModelBuilder, joint, jtype: str, parent: int, child: int, pos, rot,
                  drive_ke: float, drive_kd: float, note) -> int:
    """A revolute, continuous or prismatic joint; the child link frame is the joint frame.
    ``lower > upper`` means no limit (pybullet's convention), reported through ``note``."""
    axis_el = joint.find("axis")
    axis = (1.0, 0.0, 0.0) if axis_el is None else floats(path, axis_el, "xyz", 3, (1.0, 0.0, 0.0))
    dof = {"target_ke": drive_ke, "target_kd": drive_kd}
    dynamics = joint.find("dynamics")
    if dynamics is not None:
        dof["damping"] = float(floats(path, dynamics, "damping", 1, (0.0,))[0])
        dof["friction"] = float(floats(path, dynamics, "friction", 1, (0.0,))[0])
    limit = joint.find("limit")
    if limit is not None and jtype != "continuous":  # URDF: a missing bound is 0
        lower = float(floats(path, limit, "lower", 1, (0.0,))[0])
        upper = float(floats(path, limit, "upper", 1, (0.0,))[0])
        if lower > upper:
            note(limit, f"exceeds upper=\"{limit.get('upper', '0')}\" in {describe(joint)}: imported as no limit "
                        "(pybullet's convention)", "lower", limit.get("lower", "0"), label="<limit>")
        else:
            dof.update(limit_lower=lower, limit_upper=upper)
    add = b.add_joint_prismatic if jtype == "prismatic" else b.add_joint_revolute
    return add(parent, child, axis=axis, parent_pos=pos, parent_rot=rot, **dof)
