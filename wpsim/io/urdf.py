"""URDF import, the common subset, into a ``ModelBuilder``.

Supported: ``<link>`` with ``<inertial>`` (``origin xyz rpy``, ``mass``, ``inertia``) and
``<collision>`` geometry ``box``, ``sphere``, ``cylinder`` (imported as a capsule of the
same radius and overall length) and ``mesh`` (``filename`` relative to the file, ``scale``);
``<joint type="revolute|continuous|prismatic|fixed|floating">`` with ``origin``, ``axis``,
``limit lower upper`` and ``dynamics damping``. A link named ``world`` (no inertial) is the
world; other root links are welded to the world, or float freely with ``floating=True``.
URDF has no actuators: drive gains are importer arguments (``drive_ke``, ``drive_kd``).

Rejected with a ``SceneFileError`` naming the file and element: malformed XML, unknown
joint types, links with two parents, joints naming unknown links, cycles, missing mesh
files, non-positive mass or an inertia that is not positive definite on a moving link,
``package://`` and other URLs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import quat_to_matrix
from wpsim.io.scene_parsing import (
    ImportedScene,
    SceneFileError,
    add_all_or_nothing,
    describe,
    floats,
    load_mesh,
    parse_xml,
    quat_from_euler,
    resolve_mesh,
)

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating")


def _origin(path: Path, element) -> tuple:
    """(position (3,), quaternion (x, y, z, w)) of an element's <origin> (identity if none)."""
    origin = element.find("origin") if element is not None else None
    if origin is None:
        return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    xyz = floats(path, origin, "xyz", 3, (0.0, 0.0, 0.0))
    rpy = floats(path, origin, "rpy", 3, (0.0, 0.0, 0.0))
    return xyz, quat_from_euler(rpy, "xyz")  # URDF: roll, pitch, yaw about fixed axes


def _inertial(path: Path, link) -> tuple:
    """(mass kg, centre of mass (3,), inertia about it in link axes (3, 3)); zeros if none."""
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    mass_el = inertial.find("mass")
    inertia_el = inertial.find("inertia")
    if mass_el is None or inertia_el is None:
        raise SceneFileError(f"{path}: {describe(link)} <inertial> needs <mass> and <inertia>")
    mass = floats(path, mass_el, "value", 1)
    if mass is None:
        raise SceneFileError(f"{path}: {describe(link)} <mass> has no value")
    names = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
    xx, yy, zz, xy, xz, yz = (float(floats(path, inertia_el, n, 1, (0.0,))[0]) for n in names)
    com, rot = _origin(path, inertial)
    R = quat_to_matrix(rot)
    tensor = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    return float(mass[0]), com, R @ tensor @ R.T


def _add_collisions(path: Path, b: ModelBuilder, link, body: int, contact: dict):
    """The link's collision shapes (massless: the inertial gives the mass)."""
    for collision in link.findall("collision"):
        geometry = collision.find("geometry")
        shape = None if geometry is None or len(geometry) == 0 else geometry[0]
        if shape is None:
            raise SceneFileError(f"{path}: {describe(link)} <collision> has no geometry")
        pos, rot = _origin(path, collision)
        try:
            if shape.tag == "box":
                half = floats(path, shape, "size", 3) / 2.0
                b.add_shape_box(body, pos, rot, *half, density=0.0, **contact)
            elif shape.tag == "sphere":
                b.add_shape_sphere(body, pos, rot, radius=float(floats(path, shape, "radius", 1)[0]), density=0.0,
                                   **contact)
            elif shape.tag == "cylinder":
                radius = float(floats(path, shape, "radius", 1)[0])
                length = float(floats(path, shape, "length", 1)[0])
                b.add_shape_capsule(body, pos, rot, radius=radius, half_height=max(0.5 * length - radius, 0.0),
                                    density=0.0, **contact)
            elif shape.tag == "mesh":
                filename = shape.get("filename") or ""
                mesh_path = resolve_mesh(path, shape, filename, path.parent)
                vertices, faces = load_mesh(path, shape, mesh_path, floats(path, shape, "scale", 3, (1.0, 1.0, 1.0)))
                b.add_shape_mesh(body, vertices, faces, pos, rot, density=0.0, name=f"{path}: {filename}", **contact)
            else:
                raise SceneFileError(f"{path}: {describe(link)}: unsupported geometry <{shape.tag}>")
        except SceneFileError:
            raise
        except (ValueError, TypeError) as error:
            raise SceneFileError(f"{path}: {describe(link)} <{shape.tag}>: {error}") from error


def import_urdf(path, builder: ModelBuilder | None = None, floating: bool = False, ke: float = 1.0e4,
                kd: float = 100.0, mu: float = 0.5, drive_ke: float = 0.0, drive_kd: float = 0.0) -> tuple:
    """Add the robot in the URDF file at ``path`` to ``builder`` (a new z-up one if None);
    returns (builder, ImportedScene). floating: root links get a free joint instead of
    being welded to the world. ke (N/m), kd (N s/m), mu: contact parameters of every
    collision shape; drive_ke/drive_kd: PD gains of every revolute/prismatic joint. Nothing
    is added if the file is rejected (``SceneFileError``, a ValueError)."""
    path = Path(path)
    root = parse_xml(path, "robot")
    links = {}
    for link in root.findall("link"):
        name = link.get("name")
        if not name or name in links:
            raise SceneFileError(f"{path}: {describe(link)}: links need unique names")
        links[name] = link
    joints, parent_of = [], {}
    for joint in root.findall("joint"):
        jtype = joint.get("type")
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
        joints.append((joint, jtype, p, c))
    world = "world" if "world" in links and links["world"].find("inertial") is None else None
    if not [name for name in links if name != world]:
        raise SceneFileError(f"{path}: the robot has no links")
    contact = dict(ke=ke, kd=kd, mu=mu)
    builder = ModelBuilder() if builder is None else builder
    scene = ImportedScene()

    def add_link(b: ModelBuilder, name: str):
        link = links[name]
        mass, com, inertia = _inertial(path, link)
        try:
            scene.bodies[name] = b.add_body(mass=mass, com=com, inertia=inertia)
        except ValueError as error:
            raise SceneFileError(f"{path}: {describe(link)}: {error}") from error
        _add_collisions(path, b, link, scene.bodies[name], contact)

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
                else:
                    index = _moving_joint(path, b, joint, jtype, parent, scene.bodies[c], pos, rot, drive_ke, drive_kd)
            except SceneFileError:
                raise
            except ValueError as error:
                raise SceneFileError(f"{path}: {describe(joint)}: {error}") from error
            scene.joints[joint.get("name") or f"joint{index}"] = index

    add_all_or_nothing(builder, build)
    return builder, scene


def _moving_joint(path: Path, b: ModelBuilder, joint, jtype: str, parent: int, child: int, pos, rot,
                  drive_ke: float, drive_kd: float) -> int:
    """A revolute, continuous or prismatic joint; the child link frame is the joint frame."""
    axis_el = joint.find("axis")
    axis = (1.0, 0.0, 0.0) if axis_el is None else floats(path, axis_el, "xyz", 3, (1.0, 0.0, 0.0))
    dof = dict(target_ke=drive_ke, target_kd=drive_kd)
    dynamics = joint.find("dynamics")
    if dynamics is not None:
        dof["damping"] = float(floats(path, dynamics, "damping", 1, (0.0,))[0])
    limit = joint.find("limit")
    if limit is not None and jtype != "continuous":  # URDF: a missing bound is 0
        dof.update(limit_lower=float(floats(path, limit, "lower", 1, (0.0,))[0]),
                   limit_upper=float(floats(path, limit, "upper", 1, (0.0,))[0]))
    add = b.add_joint_prismatic if jtype == "prismatic" else b.add_joint_revolute
    return add(parent, child, axis=axis, parent_pos=pos, parent_rot=rot, **dof)
