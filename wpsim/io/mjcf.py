"""MJCF (MuJoCo XML) import, the common subset, into a ``ModelBuilder``.

Supported: ``<compiler angle eulerseq meshdir autolimits>``, ``<option timestep gravity>``
(gravity along the builder's up axis), class-less ``<default>`` attributes of ``joint``,
``geom``, ``motor`` and ``position``; ``<asset><mesh name file scale>``; nested
``<body pos quat|euler|axisangle>`` with ``<inertial pos quat mass diaginertia|
fullinertia>``, at most one ``<joint type="hinge|slide|ball|free">`` (``axis pos range
limited damping armature``) or ``<freejoint>``, and ``<geom type="sphere|capsule|box|
cylinder|mesh|plane">`` (``size fromto pos quat|euler|axisangle density mass friction``;
a cylinder becomes a capsule of the same radius, overall length and mass; planes only in
the worldbody; geoms with contype and conaffinity 0 are visual and skipped); ``<actuator>`` ``<motor joint gear>``, ``<position joint kp>`` and
``<velocity joint kv>`` (position/velocity actuators set the joint's drive gains);
``<keyframe><key name qpos qvel>`` poses (MuJoCo's layout: the file's joints in document
order, quaternions w x y z, angles in rad whatever ``<compiler angle>`` says; a key's
``ctrl``, ``act``, ``mpos``, ``mquat`` and ``time`` are not used), unnamed keys named
``key0``, ``key1``, ... by their place.

Rejected with a ``SceneFileError`` naming the file and element: malformed XML, unknown
joint or geom types, several joints in one body, default classes, ``<frame>``, missing mesh files,
non-positive masses or inertias, unknown joint names in actuators, keys whose qpos / qvel
lack one number per joint coordinate / dof or repeat a name. A body without a joint
is welded to its parent. Without ``<inertial>`` a body's mass comes from its geoms
(density 1000 kg/m^3 unless given), as in MuJoCo. Contact stiffness and damping are not
in MJCF's compliant terms; they are importer arguments.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import quat_between
from wpsim.core.mass import box_mass_properties, capsule_mass_properties, sphere_mass_properties
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
from wpsim.kernels.enums import (
    JOINT_BALL,
    JOINT_COORD_COUNT,
    JOINT_DOF_COUNT,
    JOINT_FREE,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
)

_IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])


class _Reader:
    """State of one import: the file, compiler settings, defaults, meshes, names."""

    def __init__(self, path: Path, root, ke: float, kd: float):
        self.path, self.ke, self.kd = path, ke, kd
        compiler = root.find("compiler")
        compiler = {} if compiler is None else compiler.attrib
        self.degrees = compiler.get("angle", "degree") == "degree"
        self.eulerseq = compiler.get("eulerseq", "xyz")
        self.autolimits = compiler.get("autolimits", "true") == "true"
        self.mesh_dir = path.parent / compiler.get("meshdir", "")
        self.defaults = {"joint": {}, "geom": {}, "motor": {}, "position": {}, "velocity": {}}
        for default in root.iter("default"):
            if default.get("class") not in (None, "main") or default.find("default") is not None:
                raise SceneFileError(f"{path}: {describe(default)}: default classes are not supported")
            for child in default:
                if child.tag in self.defaults:
                    self.defaults[child.tag].update(child.attrib)
        self.meshes = {}
        for mesh in root.iter("mesh"):
            if mesh.get("file") is not None:
                name = mesh.get("name") or Path(mesh.get("file")).stem
                scale = floats(path, mesh, "scale", 3, (1.0, 1.0, 1.0))
                self.meshes[name] = load_mesh(path, mesh, resolve_mesh(path, mesh, mesh.get("file"), self.mesh_dir),
                                              scale)
        self.scene = ImportedScene()

    # -------------------------------------------------------------- attributes
    def attr(self, element, name: str, default=None):
        """An attribute of ``element``, else the class-less default of its tag."""
        return element.get(name, self.defaults.get(element.tag, {}).get(name, default))

    def vector(self, element, name: str, count, default=None) -> np.ndarray | None:
        """A numeric attribute of ``element`` or its tag's default (see ``floats``)."""
        return floats(self.path, element, name, count, default, text=self.attr(element, name))

    def angle(self, value: float) -> float:
        return math.radians(value) if self.degrees else value

    def rotation(self, element) -> np.ndarray:
        """Quaternion (x, y, z, w) of an element's quat / euler / axisangle (identity if none)."""
        for unsupported in ("xyaxes", "zaxis"):
            if element.get(unsupported) is not None:
                raise SceneFileError(f"{self.path}: {describe(element)}: orientation by {unsupported} is not supported")
        quat = floats(self.path, element, "quat", 4)
        if quat is not None:
            if np.linalg.norm(quat) < 1e-12:
                raise SceneFileError(f"{self.path}: {describe(element)} quat is zero")
            w, x, y, z = quat / np.linalg.norm(quat)
            return np.array([x, y, z, w])
        euler = floats(self.path, element, "euler", 3)
        if euler is not None:
            sequence = "".join(c.upper() if c.islower() else c.lower() for c in self.eulerseq)
            return quat_from_euler([self.angle(a) for a in euler], sequence)
        axisangle = floats(self.path, element, "axisangle", 4)
        if axisangle is not None:
            axis = axisangle[:3] / max(np.linalg.norm(axisangle[:3]), 1e-300)
            half = 0.5 * self.angle(axisangle[3])
            return np.concatenate([axis * math.sin(half), [math.cos(half)]])
        return _IDENTITY.copy()

    def fail(self, element, message: str):
        raise SceneFileError(f"{self.path}: {describe(element)}: {message}")

    # -------------------------------------------------------------- bodies
    def add_body(self, b: ModelBuilder, element, parent: int):
        """Add ``element`` (a <body>) under body ``parent``, then its children."""
        pos = floats(self.path, element, "pos", 3, (0.0, 0.0, 0.0))
        rot = self.rotation(element)
        inertial = element.find("inertial")
        try:
            if inertial is not None:
                mass = floats(self.path, inertial, "mass", 1)
                if mass is None or not mass[0] > 0.0:
                    self.fail(inertial, "mass must be given and positive")
                body = b.add_body(mass=float(mass[0]), com=floats(self.path, inertial, "pos", 3, (0, 0, 0)),
                                  inertia=self.inertia(inertial))
            else:
                body = b.add_body()
        except ValueError as error:
            if isinstance(error, SceneFileError):
                raise
            self.fail(inertial if inertial is not None else element, str(error))
        name = element.get("name") or f"body{body}"
        self.scene.bodies[name] = body
        self.add_joint(b, element, body, parent, pos, rot)
        for geom in self.children(element, "geom"):
            self.add_geom(b, geom, body, use_density=inertial is None)
        for child in self.children(element, "body"):
            self.add_body(b, child, body)

    def children(self, element, tag: str) -> list:
        """``tag`` children of ``element``; <frame> elements are rejected (not supported)."""
        frame = element.find("frame")
        if frame is not None:
            self.fail(frame, "<frame> is not supported; place its bodies and geoms directly")
        return element.findall(tag)

    def inertia(self, inertial) -> np.ndarray:
        """Inertia tensor (kg m^2) about the centre of mass in body axes."""
        diag = floats(self.path, inertial, "diaginertia", 3)
        full = floats(self.path, inertial, "fullinertia", 6)
        if diag is None and full is None:
            self.fail(inertial, "give diaginertia or fullinertia")
        if full is not None:
            xx, yy, zz, xy, xz, yz = full
            return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        from wpsim.core.geometry import quat_to_matrix

        R = quat_to_matrix(self.rotation(inertial))
        return R @ np.diag(diag) @ R.T

    def add_joint(self, b: ModelBuilder, element, body: int, parent: int, pos: np.ndarray, rot: np.ndarray):
        joints = element.findall("joint") + element.findall("freejoint")
        if len(joints) > 1:
            self.fail(element, f"has {len(joints)} joints; wpsim needs one joint per body (add intermediate bodies)")
        if not joints:
            b.add_joint_fixed(parent, body, parent_pos=pos, parent_rot=rot)
            return
        joint = joints[0]
        jtype = "free" if joint.tag == "freejoint" else self.attr(joint, "type", "hinge")
        name = joint.get("name") or f"joint{b.joints.count}"
        try:
            if jtype == "free":
                if parent != -1:
                    self.fail(joint, "a free joint must belong to a child of the worldbody")
                index = b.add_joint_free(body, pos=pos, rot=rot, damping=float(self.attr(joint, "damping", 0.0)))
            else:
                index = self.add_moving_joint(b, joint, jtype, body, parent, pos, rot)
        except SceneFileError:
            raise
        except ValueError as error:
            self.fail(joint, str(error))
        self.scene.joints[name] = index

    def add_moving_joint(self, b: ModelBuilder, joint, jtype: str, body: int, parent: int, pos, rot) -> int:
        from wpsim.core.geometry import quat_to_matrix

        anchor = self.vector(joint, "pos", 3, (0.0, 0.0, 0.0))
        frames = dict(parent_pos=pos + quat_to_matrix(rot) @ anchor, parent_rot=rot, child_pos=anchor)
        dof = dict(armature=float(self.attr(joint, "armature", 0.0)), damping=float(self.attr(joint, "damping", 0.0)))
        if jtype == "ball":
            return b.add_joint_ball(parent, body, **frames, **dof)
        if jtype not in ("hinge", "slide"):
            self.fail(joint, f"unknown joint type \"{jtype}\" (supported: hinge, slide, ball, free)")
        axis = self.vector(joint, "axis", 3, (0.0, 0.0, 1.0))
        value_range = self.vector(joint, "range", 2)
        limited = self.attr(joint, "limited", "auto")
        if value_range is not None and (limited == "true" or (limited == "auto" and self.autolimits)):
            scale = self.angle(1.0) if jtype == "hinge" else 1.0
            dof.update(limit_lower=value_range[0] * scale, limit_upper=value_range[1] * scale)
        add = b.add_joint_revolute if jtype == "hinge" else b.add_joint_prismatic
        return add(parent, body, axis=axis, **frames, **dof)

    # -------------------------------------------------------------- geoms
    def add_geom(self, b: ModelBuilder, geom, body: int, use_density: bool):
        gtype = self.attr(geom, "type", "sphere")
        if self.attr(geom, "contype", "1") == "0" and self.attr(geom, "conaffinity", "1") == "0":
            return None  # visual only
        friction = self.vector(geom, "friction", (1, 2, 3), (1.0,))
        contact = dict(ke=self.ke, kd=self.kd, mu=float(friction[0]))
        pos = floats(self.path, geom, "pos", 3, (0.0, 0.0, 0.0))
        rot = self.rotation(geom)
        size = self.vector(geom, "size", (1, 2, 3), (0.0,))
        fromto = floats(self.path, geom, "fromto", 6)
        if fromto is not None:
            if gtype not in ("capsule", "cylinder", "box"):
                self.fail(geom, f"fromto is not supported for {gtype} geoms")
            a, c = fromto[:3], fromto[3:]
            length = np.linalg.norm(c - a)
            if length < 1e-12:
                self.fail(geom, "fromto has zero length")
            pos, rot = 0.5 * (a + c), quat_between((0.0, 0.0, 1.0), (c - a) / length)
            # capsules and cylinders: radius and half length; boxes: square cross-section
            size = np.array([size[0], 0.5 * length, size[0]]) if gtype != "box" else \
                np.array([size[0], size[0], 0.5 * length])
        density = float(self.attr(geom, "density", 1000.0)) if use_density else 0.0
        try:
            if gtype == "plane":
                if body != -1:
                    self.fail(geom, "planes must be static (in the worldbody)")
                return b.add_shape_plane(pos=pos, rot=rot, **contact)
            shape_volume, add = self.primitive(b, geom, gtype, size)
            mass = self.attr(geom, "mass")
            if use_density and mass is not None:
                density = float(mass) / shape_volume
            return add(body, pos, rot, density, contact)
        except SceneFileError:
            raise
        except ValueError as error:
            self.fail(geom, str(error))

    def primitive(self, b: ModelBuilder, geom, gtype: str, size: np.ndarray) -> tuple:
        """(volume m^3, adder(body, pos, rot, density, contact)) of a non-plane geom."""
        def need(count):
            if len(size) < count or (size[:count] <= 0).any():
                self.fail(geom, f"a {gtype} needs {count} positive size values")

        if gtype == "sphere":
            need(1)
            r = size[0]
            return sphere_mass_properties(r, 1.0)[0], lambda body, p, q, rho, c: b.add_shape_sphere(
                body, p, q, radius=r, density=rho, **c)
        if gtype == "capsule":
            need(2)
            r, half = size[0], size[1]
            return capsule_mass_properties(r, half, 1.0)[0], lambda body, p, q, rho, c: b.add_shape_capsule(
                body, p, q, radius=r, half_height=half, density=rho, **c)
        if gtype == "cylinder":  # a capsule of the same radius, overall length and mass
            need(2)
            r, half = size[0], size[1]
            core = max(half - r, 0.0)
            volume = math.pi * r * r * 2 * half
            capsule = capsule_mass_properties(r, core, 1.0)[0]
            return volume, lambda body, p, q, rho, c: b.add_shape_capsule(
                body, p, q, radius=r, half_height=core, density=rho * volume / capsule, **c)
        if gtype == "box":
            need(3)
            return box_mass_properties(size[:3], 1.0)[0], lambda body, p, q, rho, c: b.add_shape_box(
                body, p, q, *size[:3], density=rho, **c)
        if gtype == "mesh":
            name = geom.get("mesh")
            if name not in self.meshes:
                self.fail(geom, f"unknown mesh \"{name}\"")
            vertices, faces = self.meshes[name]
            from wpsim.core.meshing import signed_volume

            return signed_volume(vertices, faces), lambda body, p, q, rho, c: b.add_shape_mesh(
                body, vertices, faces, p, q, density=rho, name=f"{self.path}: mesh {name}", **c)
        self.fail(geom, f"unknown geom type \"{gtype}\" (supported: sphere, capsule, cylinder, box, mesh, plane)")

    # -------------------------------------------------------------- actuators
    def add_actuators(self, b: ModelBuilder, root):
        actuators = root.find("actuator")
        if actuators is None:
            return
        for actuator in actuators:
            if actuator.tag not in ("motor", "position", "velocity"):
                self.fail(actuator, "unsupported actuator (supported: motor, position, velocity)")
            joint_name = actuator.get("joint")
            if joint_name not in self.scene.joints:
                self.fail(actuator, f"unknown joint \"{joint_name}\"")
            joint = self.scene.joints[joint_name]
            if b.joints.array("joint_type")[joint] not in (JOINT_REVOLUTE, JOINT_PRISMATIC):
                self.fail(actuator, "only hinge and slide joints can be actuated")
            gear = float(self.vector(actuator, "gear", (1, 6), (1.0,))[0])
            if actuator.tag == "position":
                self.set_gain(b, joint, "joint_target_ke", float(self.attr(actuator, "kp", 1.0)))
            elif actuator.tag == "velocity":
                self.set_gain(b, joint, "joint_target_kd", float(self.attr(actuator, "kv", 1.0)))
            self.scene.actuators.append({"name": actuator.get("name") or f"actuator{len(self.scene.actuators)}",
                                         "joint": joint, "kind": actuator.tag, "gear": gear})

    # -------------------------------------------------------------- keyframes
    def add_keyframes(self, b: ModelBuilder, root):
        """The ``<keyframe><key>`` poses into ``scene.keyframes`` (see ``ImportedScene``)."""
        types = b.joints.array("joint_type")
        joints = [(j, int(types[j])) for j in self.scene.joints.values()]
        nq = sum(JOINT_COORD_COUNT[t] for _, t in joints)
        nv = sum(JOINT_DOF_COUNT[t] for _, t in joints)
        keys = [key for keyframe in root.findall("keyframe") for key in keyframe.findall("key")]
        for index, key in enumerate(keys):
            name = key.get("name") or f"key{index}"
            if name in self.scene.keyframes:
                self.fail(key, f"a second key named \"{name}\"")
            qpos = floats(self.path, key, "qpos", nq)
            qvel = floats(self.path, key, "qvel", nv)
            entry, qi, vi = {"q": {}, "qd": {}}, 0, 0
            for j, t in joints:
                if qpos is not None:
                    coords = qpos[qi:qi + JOINT_COORD_COUNT[t]].copy()
                    if t in (JOINT_FREE, JOINT_BALL):  # (w, x, y, z) -> (x, y, z, w), unit length
                        w_xyz = coords[-4:]
                        if np.linalg.norm(w_xyz) < 1e-12:
                            self.fail(key, f"qpos holds a zero quaternion at coordinates {qi}..{qi + len(coords) - 1}")
                        coords[-4:] = np.roll(w_xyz / np.linalg.norm(w_xyz), -1)
                    entry["q"][j] = coords
                if qvel is not None:
                    entry["qd"][j] = qvel[vi:vi + JOINT_DOF_COUNT[t]].copy()
                qi, vi = qi + JOINT_COORD_COUNT[t], vi + JOINT_DOF_COUNT[t]
            self.scene.keyframes[name] = entry

    @staticmethod
    def set_gain(b: ModelBuilder, joint: int, column: str, value: float):
        """Set a drive gain of a 1-dof joint (its row in the builder's dof table)."""
        types = b.joints.array("joint_type")
        row = int(sum(JOINT_DOF_COUNT[int(t)] for t in types[:joint]))
        b.joint_dofs.array(column)[row] = value


def import_mjcf(path, builder: ModelBuilder | None = None, ke: float = 1.0e4, kd: float = 100.0) -> tuple:
    """Add the MJCF scene at ``path`` to ``builder`` (a new z-up one if None); returns
    (builder, ImportedScene). ke (N/m) and kd (N s/m) are the contact stiffness and damping
    of every geom. The file's gravity replaces the builder's. Nothing is added if the file
    is rejected (``SceneFileError``, a ValueError, names the file and element)."""
    path = Path(path)
    root = parse_xml(path, "mujoco")
    builder = ModelBuilder() if builder is None else builder
    reader = _Reader(path, root, ke, kd)
    option = root.find("option")
    gravity = None
    if option is not None:
        step = floats(path, option, "timestep", 1)
        reader.scene.timestep = None if step is None else float(step[0])
        gravity = floats(path, option, "gravity", 3)
        if gravity is not None and np.abs(np.delete(gravity, builder.up_axis)).max() > 0.0:
            raise SceneFileError(f"{path}: {describe(option)} gravity must lie along the up axis")
    world = root.find("worldbody")
    if world is None:
        raise SceneFileError(f"{path}: no <worldbody>")

    def build(b):
        for geom in reader.children(world, "geom"):
            reader.add_geom(b, geom, -1, use_density=False)
        for body in reader.children(world, "body"):
            reader.add_body(b, body, -1)
        reader.add_actuators(b, root)
        reader.add_keyframes(b, root)

    add_all_or_nothing(builder, build)
    if gravity is not None:
        builder.gravity = float(gravity[builder.up_axis])
    return builder, reader.scene
