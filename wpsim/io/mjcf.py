"""MJCF (MuJoCo XML) import, the common subset, into a ``ModelBuilder``.

The file is first resolved by ``wpsim.io.mjcf_compile`` (``<include>``, ``<default>``
classes with inheritance and ``childclass``, ``<frame>``), which also lists every element
and attribute that is not honoured; the import result carries that list
(``ImportedScene.unhonoured``, each with file and line) and one warning prints it.

Honoured: ``<compiler angle eulerseq meshdir autolimits inertiafromgeom settotalmass>``,
``<option timestep gravity integrator="Euler|implicitfast">`` (MuJoCo's 2 ms where the file
sets no time step; gravity in any direction;
an actuator's kv acts explicitly under Euler, MuJoCo's default, and implicitly under
implicitfast, ``ModelBuilder.set_drive_damping_explicit``; joint damping is implicit in both,
as MuJoCo's eulerdamp takes it, and explicit under Euler with ``<flag eulerdamp="disable">``,
``ModelBuilder.set_joint_damping_explicit``);
``<asset><mesh name file scale>``; nested ``<body pos>`` with any orientation (``quat``,
``axisangle``, ``euler`` with ``eulerseq``, ``xyaxes``, ``zaxis``), ``<inertial pos mass
diaginertia|fullinertia>``, any number of ``<joint type="hinge|slide|ball">`` (``axis pos
range limited damping armature ref``), composed in order as in MuJoCo (each joint but the
last moves a massless intermediate body at the body's frame; bodies between carry no shapes
and do not change which shapes collide), or one ``<joint type="free">`` / ``<freejoint>``.

Geoms ``type="sphere|capsule|box|cylinder|ellipsoid|mesh|plane"`` (``size fromto pos``
orientation ``density mass friction contype conaffinity``):

- a cylinder weighs as a cylinder and collides as a capsule of the same radius and overall
  length; an ellipsoid weighs exactly and collides as a closed mesh of its surface (642
  vertices, 128 of them contact points);
- a mesh weighs as the file's solid when its surface is closed, else as its convex hull
  (listed), and collides through its hull; planes only in the worldbody;
- ``contype`` / ``conaffinity`` filter contacts as MuJoCo's bits do
  (``ModelBuilder.set_collision_bits``); geoms with both 0 add their mass but no collision
  shape, and are drawn (``ModelBuilder.add_visual_mesh``; primitives as their surface);
- ``solref solimp solmix priority`` set each geom's soft-constraint contact as MuJoCo combines
  them per pair (``ModelBuilder.set_shape_softness``; the file's most common setting is the
  solve's own, ``scene.contact_settings``); ``condim`` 1, 3, 4 and 6 with the torsional and
  rolling ``friction`` (``ModelBuilder.set_shape_condim``); ``margin``
  (``ModelBuilder.set_shape_margin``; ``gap`` adds contacts without rows in MuJoCo, so no motion).

Actuators: ``<motor joint gear>``, ``<position joint kp kv inheritrange>``, ``<velocity joint
kv>`` and ``<general>`` ones whose fixed gain and affine bias make a motor, a position or a
velocity servo (position/velocity actuators set the joint's drive gains); ``ctrlrange``
(``ctrllimited``), ``forcerange`` and the joint's ``actuatorfrcrange`` clamp the controls
and the drive force (``ModelBuilder.set_control_range``); a position servo on a fixed tendon
drives its joint coupling (``ModelBuilder.set_coupling_drive``); other actuators on tendons,
and those on sites or bodies, are dropped (listed).

Also: joint ``stiffness springref frictionloss`` (joint springs, dry friction);
``<equality><joint joint1 joint2 polycoef solref solimp>`` (up to quartic) and
``<tendon><fixed stiffness damping springlength>`` as joint couplings
(``ModelBuilder.add_joint_coupling``); ``<equality><connect body1 body2 anchor>`` and
``<weld body1 body2 anchor relpose>`` as body connections (``ModelBuilder.add_body_connection``).
Under the soft-constraint solve (what ``wpsim run`` uses for these files) joint and connect
equalities are rows of that solve with MuJoCo's law and weights; welds, and every equality
on the penalty path, are implicit spring-dampers from solref, solimp's dmin and the
effective inertia; ``<contact><exclude body1
body2>``; ``<keyframe><key name qpos qvel>`` poses (MuJoCo's layout: the file's joints in
document order, quaternions w x y z, angles in rad whatever ``<compiler angle>`` says),
unnamed keys named ``key0``, ``key1``, ... by their place. A joint's ``ref`` is honoured by
turning its frame back, so that its coordinate equals MuJoCo's qpos (``ref`` in the drawn
pose). Joint limits are wpsim's implicit penalty limits (or soft constraints with
``SoftContactOptions``), not MuJoCo's. Sections that a file and its includes repeat
(``<worldbody>``, ``<actuator>``, ...) are read as one, in document order.

Rejected with a ``SceneFileError`` naming the file, element and line: malformed XML, missing
or cyclic includes, unknown default classes, unknown joint or geom types, a free joint with
other joints, joints in a ``<frame>``, two orientations on one element, missing mesh files,
non-positive masses or inertias (mass 0 is accepted on a body welded to its parent, as
MuJoCo accepts it), unknown joint names in actuators, keys whose qpos / qvel lack one number
per joint coordinate / dof or repeat a name. A body without a joint is welded to its parent. Without ``<inertial>`` a body's mass comes from its geoms (density
1000 kg/m^3 unless given), as in MuJoCo. Contact stiffness and damping are not in MJCF's
compliant terms; they are importer arguments.
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import (
    primitive_surface,
    quat_between,
    quat_to_matrix,
    transform_multiply,
)
from wpsim.core.mass import (
    box_mass_properties,
    capsule_mass_properties,
    cylinder_mass_properties,
    ellipsoid_mass_properties,
    sphere_mass_properties,
)
from wpsim.io.mjcf_compile import MjcfTree, load_mjcf
from wpsim.io.mjcf_constraints import IDENTITY_QUAT, ConstraintReader
from wpsim.io.mjcf_tendons import SpatialTendonReader, reference_rest_lengths
from wpsim.io.scene_parsing import (
    MUJOCO_ROTATIONAL_FRICTION,
    MUJOCO_SOLIMP,
    MUJOCO_SOLREF,
    ImportedScene,
    SceneFileError,
    add_all_or_nothing,
    clamped_solimp,
    load_mesh,
    resolve_mesh,
)
from wpsim.kernels.enums import (
    JOINT_BALL,
    JOINT_COORD_COUNT,
    JOINT_DOF_COUNT,
    JOINT_FREE,
)

MUJOCO_TIME_STEP = 2.0e-3
"""The time step (s) of a file whose ``<option>`` sets none: MuJoCo's default, as MuJoCo runs it."""


def ellipsoid_surface(radii):
    """A closed triangle mesh (trimesh) of the ellipsoid with semi-axes ``radii`` (m): an
    icosphere of 642 vertices scaled per axis, every vertex on the surface."""
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=3)
    return trimesh.Trimesh(np.asarray(sphere.vertices) * np.asarray(radii, dtype=np.float64), sphere.faces,
                           process=False)


class _Reader(ConstraintReader, SpatialTendonReader):
    """State of one import: the resolved tree, compiler settings, meshes, names."""

    def __init__(self, tree: MjcfTree, ke: float, kd: float):
        self.tree, self.path, self.ke, self.kd = tree, tree.path, ke, kd
        self.softness = []  # (geom, shape, solref, solimp, solmix, priority) of every colliding geom
        root = tree.root
        compiler = root.find("compiler")
        compiler = {} if compiler is None else compiler.attrib
        self.autolimits = compiler.get("autolimits", "true") == "true"
        self.inertia_from_geoms = compiler.get("inertiafromgeom", "auto") == "true"
        self.mesh_dirs = (self.path.parent / compiler.get("meshdir", ""), self.path.parent)
        """Where a mesh file is looked for: the meshdir, then the model's folder (MuJoCo finds
        a mesh of an included file there too: Menagerie's MJX Panda names "assets/x.obj" under
        meshdir "assets")."""
        option = root.find("option")
        integrator = "Euler" if option is None else option.get("integrator", "Euler")
        self.drive_damping_explicit = integrator in ("Euler", "RK4")  # RK4 is listed and stepped as Euler
        flag = None if option is None else option.find("flag")
        self.joint_damping_explicit = (integrator == "Euler" and flag is not None
                                       and flag.get("eulerdamp", "enable") == "disable")
        """MuJoCo's Euler without ``eulerdamp`` takes joint damping explicitly."""
        self.impratio = 1.0 if option is None else float(option.get("impratio", "1"))
        if not (np.isfinite(self.impratio) and self.impratio > 0.0):
            self.fail(option, f"impratio=\"{option.get('impratio')}\" must be a number > 0")
        self.rotation, self.angle, self.fail, self.numbers = tree.rotation, tree.angle, tree.fail, tree.numbers
        self.mesh_assets = {}
        for mesh in root.iter("mesh"):
            if mesh.get("file") is not None:
                name = mesh.get("name") or Path(mesh.get("file")).stem
                if name in self.mesh_assets:
                    self.fail(mesh, f"a second mesh named \"{name}\"")
                self.mesh_assets[name] = mesh
        self.meshes = {}  # name -> (vertices, faces) of the collision surface, loaded on first use
        self.scene = ImportedScene(unhonoured=list(tree.unhonoured))
        self.world_pose = {}  # body -> (7,) world pose of its frame in the file's reference pose
        self.joint_elements = {}  # joint name -> its <joint> element
        self.tendon_couplings = {}  # fixed tendon name -> its joint coupling
        self.spatial_tendons = {}  # spatial tendon name -> its index
        self.sites = {}  # site name -> (body, position in its frame)
        self.wrap_geoms = {}  # geom name -> (body, type, position, rotation, size) for tendons to wrap
        self.drawn_meshes = {}  # mesh name -> trimesh of a drawn-only mesh, or the error that kept it from loading

    # -------------------------------------------------------------- bodies
    def add_body(self, b: ModelBuilder, element, parent: int):
        """Add ``element`` (a <body>) under body ``parent``, then its children."""
        pos = self.numbers(element, "pos", 3, (0.0, 0.0, 0.0))
        rot = self.rotation(element)
        inertial = None if self.inertia_from_geoms else element.find("inertial")
        try:
            if inertial is not None:
                mass = self.numbers(inertial, "mass", 1)
                welded = element.find("joint") is None and element.find("freejoint") is None
                if mass is None or not (mass[0] > 0.0 or (welded and mass[0] == 0.0)):
                    self.fail(inertial, "mass must be given and positive (or 0 on a body welded to its parent)")
                body = b.add_body(mass=float(mass[0]), com=self.numbers(inertial, "pos", 3, (0, 0, 0)),
                                  inertia=self.inertia(inertial))
            else:
                body = b.add_body()
        except ValueError as error:
            if isinstance(error, SceneFileError):
                raise
            self.fail(inertial if inertial is not None else element, str(error))
        if element.get("name") in self.scene.bodies:
            self.fail(element, f"a second body named \"{element.get('name')}\"")
        name = element.get("name") or f"body{body}"
        self.scene.bodies[name] = body
        parent_pose = self.world_pose.get(parent, np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
        self.world_pose[body] = transform_multiply(parent_pose, np.concatenate([pos, rot]))  # the drawn pose
        self.add_joints(b, element, body, parent, pos, rot)
        for geom in element.findall("geom"):
            self.add_geom(b, geom, body, use_density=inertial is None)
        self.add_sites(element, body)
        for child in element.findall("body"):
            self.add_body(b, child, body)

    def add_sites(self, element, body: int):
        """Record the named ``<site>`` children of a body (or the worldbody, -1): their body and
        position in its frame (m), where tendon paths pass."""
        for site in element.findall("site"):
            name = site.get("name")
            if name is not None:
                if name in self.sites:
                    self.fail(site, f"a second site named \"{name}\"")
                self.sites[name] = (body, tuple(float(v) for v in self.numbers(site, "pos", 3, (0.0, 0.0, 0.0))))

    def inertia(self, inertial) -> np.ndarray:
        """Inertia tensor (kg m^2) about the centre of mass in body axes."""
        diag = self.numbers(inertial, "diaginertia", 3)
        full = self.numbers(inertial, "fullinertia", 6)
        if diag is None and full is None:
            self.fail(inertial, "give diaginertia or fullinertia")
        if full is not None:
            xx, yy, zz, xy, xz, yz = full
            return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        R = quat_to_matrix(self.rotation(inertial))
        return R @ np.diag(diag) @ R.T

    def add_joints(self, b: ModelBuilder, element, body: int, parent: int, pos: np.ndarray, rot: np.ndarray):
        """Join ``body`` to ``parent`` by the body's joints in file order, composed as in MuJoCo:
        each joint but the last moves a massless intermediate body at the body's frame, which
        carries the next (a body without joints is welded)."""
        joints = [child for child in element if child.tag in ("joint", "freejoint")]
        if not joints:
            b.add_joint_fixed(parent, body, parent_pos=pos, parent_rot=rot)
            return
        for k, joint in enumerate(joints):
            jtype = "free" if joint.tag == "freejoint" else joint.get("type", "hinge")
            name = joint.get("name") or f"joint{b.joints.count}"
            child = body if k == len(joints) - 1 else b.add_body()
            try:
                if jtype == "free":
                    if parent != -1 or len(joints) > 1:
                        self.fail(joint, "a free joint must be the only joint of a child of the worldbody")
                    index = b.add_joint_free(body, pos=pos, rot=rot, damping=float(joint.get("damping", 0.0)))
                else:
                    index = self.add_moving_joint(b, joint, jtype, child, parent, pos, rot)
            except SceneFileError:
                raise
            except ValueError as error:
                self.fail(joint, str(error))
            if name in self.scene.joints:
                self.fail(joint, f"a second joint named \"{name}\"")
            self.set_joint_softness(b, joint, index)
            if self.joint_damping_explicit:
                b.set_joint_damping_explicit(index)
            self.scene.joints[name] = index
            self.joint_elements[name] = joint
            parent, pos, rot = child, np.zeros(3), IDENTITY_QUAT

    def set_joint_softness(self, b: ModelBuilder, joint, index: int):
        """A joint's ``solreflimit solimplimit solreffriction solimpfriction`` (MuJoCo's defaults
        where the file gives none; solimp as ``solimp_of`` reads it) for its limit and
        friction-loss rows (``ModelBuilder.set_joint_softness``)."""
        settings = {}
        for kind in ("limit", "friction"):
            settings[f"solref_{kind}"] = self.numbers(joint, f"solref{kind}", 2, MUJOCO_SOLREF)
            settings[f"solimp_{kind}"] = self.solimp_of(joint, f"solimp{kind}")
        try:
            b.set_joint_softness(index, **settings)
        except ValueError as error:
            self.fail(joint, str(error))

    def add_moving_joint(self, b: ModelBuilder, joint, jtype: str, body: int, parent: int, pos, rot) -> int:
        """A hinge, slide or ball joint of ``body`` on ``parent``, whose frame sits at pos / rot
        in the parent's frame."""
        anchor = self.numbers(joint, "pos", 3, (0.0, 0.0, 0.0))
        frames = dict(parent_pos=pos + quat_to_matrix(rot) @ anchor, parent_rot=rot, child_pos=anchor)
        dof = dict(armature=float(joint.get("armature", 0.0)), damping=float(joint.get("damping", 0.0)),
                   friction=float(joint.get("frictionloss", 0.0)))
        spring = dict(stiffness=float(joint.get("stiffness", 0.0)),
                      spring_ref=float(joint.get("springref", 0.0)) * (self.angle(1.0) if jtype == "hinge" else 1.0))
        if jtype == "ball":
            if spring["stiffness"] != 0.0:
                self.scene.unhonoured.append(self.tree.unhonoured_here(
                    joint, "stiffness", joint.get("stiffness"), "is dropped: wpsim's ball joints have no spring"))
            return b.add_joint_ball(parent, body, **frames, **dof)
        if jtype not in ("hinge", "slide"):
            self.fail(joint, f"unknown joint type \"{jtype}\" (supported: hinge, slide, ball, free)")
        axis = self.numbers(joint, "axis", 3, (0.0, 0.0, 1.0))
        value_range = self.numbers(joint, "range", 2)
        limited = joint.get("limited", "auto")
        if value_range is not None and (limited == "true" or (limited == "auto" and self.autolimits)):
            scale = self.angle(1.0) if jtype == "hinge" else 1.0
            dof.update(limit_lower=value_range[0] * scale, limit_upper=value_range[1] * scale)
        # MuJoCo's coordinate is ``ref`` in the pose the file draws: turn the joint frame back by ref
        ref = float(joint.get("ref", 0.0)) * (self.angle(1.0) if jtype == "hinge" else 1.0)
        if jtype == "hinge":
            from scipy.spatial.transform import Rotation

            back = Rotation.from_rotvec(-ref * axis / max(np.linalg.norm(axis), 1e-300))
            frames["parent_rot"] = (Rotation.from_quat(rot) * back).as_quat()
            return b.add_joint_revolute(parent, body, axis=axis, q=ref, **frames, **dof, **spring)
        frames["parent_pos"] = frames["parent_pos"] - quat_to_matrix(rot) @ axis / max(np.linalg.norm(axis), 1e-300) * ref
        return b.add_joint_prismatic(parent, body, axis=axis, q=ref, **frames, **dof, **spring)

    # -------------------------------------------------------------- geoms
    def add_geom(self, b: ModelBuilder, geom, body: int, use_density: bool):
        """Add a geom to ``body`` (-1: static): a collision shape with its mass, or, with
        contype and conaffinity 0, its mass (as MuJoCo, such geoms still weigh) and a drawn surface."""
        gtype = geom.get("type", "sphere")
        bits = tuple(self.integer(geom, key) for key in ("contype", "conaffinity"))
        collides = bits != (0, 0)
        given_density = float(self.numbers(geom, "density", 1, (1000.0,))[0])
        mass = self.numbers(geom, "mass", 1)
        if given_density < 0.0:
            self.fail(geom, f"density {given_density:g} kg/m^3 must be >= 0")
        if mass is not None and mass[0] < 0.0:
            self.fail(geom, f"mass {mass[0]:g} kg must be >= 0")
        weighs = body >= 0 and use_density and given_density > 0.0
        if not collides and gtype == "mesh":
            self.add_visual_mesh(b, geom, body)
        if not collides and not weighs and gtype in ("mesh", "plane"):
            return
        friction = self.numbers(geom, "friction", (1, 2, 3), (1.0,)) if collides else (1.0,)
        contact = dict(ke=self.ke, kd=self.kd, mu=float(friction[0]))
        pos = self.numbers(geom, "pos", 3, (0.0, 0.0, 0.0))
        rot = self.rotation(geom)
        size = self.numbers(geom, "size", (1, 2, 3), (0.0,))
        fromto = self.numbers(geom, "fromto", 6)
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
        if geom.get("name") is not None:
            self.wrap_geoms[geom.get("name")] = (body, gtype, pos, rot, size)
        density = given_density if use_density else 0.0
        try:
            if gtype == "plane":
                if body != -1:
                    self.fail(geom, "planes must be static (in the worldbody)")
                shape = b.add_shape_plane(pos=pos, rot=rot, **contact)
                b.set_collision_bits(shape, *bits)
                self.note_softness(geom, shape)
                self.set_contact_options(b, geom, shape, friction)
                return
            shape_volume, properties, add = self.primitive(b, geom, gtype, size)
            if not collides:  # drawn, as the mesh geoms that do not collide
                b.add_visual_mesh(body, *primitive_surface(gtype, size), pos, rot)
                if not weighs:
                    return
            if use_density and mass is not None:
                density = float(mass[0]) / shape_volume
            if collides:
                shape = add(body, pos, rot, density, contact)
                b.set_collision_bits(shape, *bits)
                self.note_softness(geom, shape)
                self.set_contact_options(b, geom, shape, friction)
            elif density > 0.0:
                b.add_body_mass(body, *properties(density), pos=pos, rot=rot)
        except SceneFileError:
            raise
        except ValueError as error:
            self.fail(geom, str(error))

    def medium(self, option) -> tuple:
        """(density kg/m^3, viscosity Pa s, wind m/s) of ``<option>`` (MuJoCo's defaults 0), for
        the fluid forces of MuJoCo's inertia-box model (``ModelBuilder.fluid_density``). Under
        implicitfast MuJoCo also takes their velocity derivative into its implicit step; wpsim
        applies them explicitly, which is listed."""
        density, viscosity = (float(self.numbers(option, key, 1, (0.0,))[0]) for key in ("density", "viscosity"))
        wind = tuple(float(w) for w in self.numbers(option, "wind", 3, (0.0, 0.0, 0.0)))
        for key, value in (("density", density), ("viscosity", viscosity)):
            if not (np.isfinite(value) and value >= 0.0):
                self.fail(option, f"{key}=\"{option.get(key)}\" must be a number >= 0")
        if option.get("integrator") in ("implicitfast", "implicit") and (density > 0.0 or viscosity > 0.0):
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                option, "viscosity" if viscosity > 0.0 else "density", option.get("viscosity" if viscosity > 0.0
                                                                                 else "density"),
                "acts explicitly (MuJoCo's implicitfast takes the fluid forces' velocity derivative implicitly)"))
        return density, viscosity, wind

    def set_contact_options(self, b: ModelBuilder, geom, shape: int, friction):
        """A colliding geom's ``condim`` and its torsional and rolling ``friction`` (MuJoCo's
        defaults, 3 and 0.005 0.0001 m, where the file gives none;
        ``ModelBuilder.set_shape_condim``) and its ``margin`` (default 0 m;
        ``ModelBuilder.set_shape_margin``). Its ``gap`` only lists more contacts in MuJoCo (those
        within margin + gap, without rows), so it changes no motion."""
        condim = self.integer(geom, "condim", 3)
        rotational = [*friction[1:3], *MUJOCO_ROTATIONAL_FRICTION[len(friction) - 1:]]
        margin = float(self.numbers(geom, "margin", 1, (0.0,))[0])
        try:
            b.set_shape_condim(shape, condim, *rotational)
            b.set_shape_margin(shape, margin)
        except ValueError as error:
            self.fail(geom, str(error).split(": ", 2)[-1])

    def note_softness(self, geom, shape: int):
        """Keep a colliding geom's solref, solimp (clipped as MuJoCo clips it), solmix and
        priority, MuJoCo's defaults where the file gives none, for ``set_contact_settings``."""
        solref = tuple(float(v) for v in self.numbers(geom, "solref", 2, MUJOCO_SOLREF))
        solmix = float(self.numbers(geom, "solmix", 1, (1.0,))[0])
        priority = float(self.numbers(geom, "priority", 1, (0.0,))[0])
        if priority != round(priority) or abs(priority) >= 2**31:
            self.fail(geom, f"priority=\"{geom.get('priority')}\" must be an integer")
        self.softness.append((geom, shape, solref, self.solimp_of(geom), solmix, int(priority)))

    def solimp_of(self, element, key: str = "solimp") -> tuple:
        """An element's solimp (attribute ``key``) as MuJoCo uses it (``clamped_solimp``),
        MuJoCo's defaults for the values the file leaves out."""
        solimp = list(MUJOCO_SOLIMP)
        given = self.numbers(element, key, (3, 4, 5), MUJOCO_SOLIMP[:3])
        solimp[:len(given)] = given
        return clamped_solimp(solimp)

    def integer(self, geom, key: str, default: int = 1) -> int:
        """A non-negative integer attribute (collision bits)."""
        text = geom.get(key, str(default))
        if not text.isdigit():
            self.fail(geom, f"{key}=\"{text}\" must be a non-negative integer")
        return int(text)

    def primitive(self, b: ModelBuilder, geom, gtype: str, size: np.ndarray) -> tuple:
        """(volume m^3, density -> (mass, com, inertia), adder(body, pos, rot, density,
        contact)) of a non-plane geom."""
        def need(count):
            if len(size) < count or (size[:count] <= 0).any():
                self.fail(geom, f"a {gtype} needs {count} positive size values")

        if gtype == "sphere":
            need(1)
            r = size[0]
            return sphere_mass_properties(r, 1.0)[0], lambda rho: sphere_mass_properties(r, rho), \
                lambda body, p, q, rho, c: b.add_shape_sphere(body, p, q, radius=r, density=rho, **c)
        if gtype == "capsule":
            need(2)
            r, half = size[0], size[1]
            return capsule_mass_properties(r, half, 1.0)[0], lambda rho: capsule_mass_properties(r, half, rho), \
                lambda body, p, q, rho, c: b.add_shape_capsule(body, p, q, radius=r, half_height=half, density=rho, **c)
        if gtype == "cylinder":  # collides as a capsule of the same radius and overall length; weighs as a cylinder
            need(2)
            r, half = size[0], size[1]
            properties = partial(cylinder_mass_properties, r, half)

            def add_cylinder(body, p, q, rho, c):
                shape = b.add_shape_capsule(body, p, q, radius=r, half_height=max(half - r, 0.0), density=0.0, **c)
                if body >= 0 and rho > 0.0:
                    b.add_body_mass(body, *properties(rho), pos=p, rot=q)
                return shape

            return properties(1.0)[0], properties, add_cylinder
        if gtype == "ellipsoid":  # weighs exactly; collides as a closed mesh of its surface
            need(3)
            properties = partial(ellipsoid_mass_properties, size[:3])
            surface = ellipsoid_surface(size[:3])

            def add_ellipsoid(body, p, q, rho, c):
                shape = b.add_shape_mesh(body, surface.vertices, surface.faces, p, q, density=0.0,
                                         name=f"{self.path}: ellipsoid", **c)
                if body >= 0 and rho > 0.0:
                    b.add_body_mass(body, *properties(rho), pos=p, rot=q)
                return shape

            return properties(1.0)[0], properties, add_ellipsoid
        if gtype == "box":
            need(3)
            return box_mass_properties(size[:3], 1.0)[0], lambda rho: box_mass_properties(size[:3], rho), \
                lambda body, p, q, rho, c: b.add_shape_box(body, p, q, *size[:3], density=rho, **c)
        if gtype == "mesh":
            name = geom.get("mesh")
            vertices, faces = self.collision_mesh(geom)
            from wpsim.core.mass import mesh_hull_and_mass
            from wpsim.core.meshing import signed_volume

            return signed_volume(vertices, faces), mesh_hull_and_mass(vertices, faces)[1], \
                lambda body, p, q, rho, c: b.add_shape_mesh(body, vertices, faces, p, q, density=rho,
                                                            name=f"{self.path}: mesh {name}", **c)
        self.fail(geom, f"unknown geom type \"{gtype}\" (supported: sphere, capsule, cylinder, ellipsoid, box, mesh, "
                        "plane)")

    def mesh_asset(self, geom):
        """The <mesh> asset a mesh geom names (a SceneFileError if none)."""
        name = geom.get("mesh")
        if name not in self.mesh_assets:
            self.fail(geom, f"unknown mesh \"{name}\"")
        return self.mesh_assets[name]

    def collision_mesh(self, geom) -> tuple:
        """(vertices (V, 3) m, faces (F, 3)) that a mesh geom collides and weighs with: the
        file's surface, or its convex hull (recorded once per asset) when it is not a solid;
        MuJoCo collides with the convex hull of every mesh."""
        name = geom.get("mesh")
        if name not in self.meshes:
            mesh = self.mesh_asset(geom)
            scale = self.numbers(mesh, "scale", 3, (1.0, 1.0, 1.0))
            vertices, faces, note = load_mesh(self.path, mesh, resolve_mesh(self.path, mesh, mesh.get("file"),
                                                                            self.mesh_dirs), scale)
            if note is not None:
                self.scene.unhonoured.append(self.tree.unhonoured_here(mesh, "file", mesh.get("file"), note))
            self.meshes[name] = vertices, faces
        return self.meshes[name]

    def add_visual_mesh(self, b: ModelBuilder, geom, body: int):
        """Draw a non-colliding mesh geom (``ModelBuilder.add_visual_mesh``); a file that
        cannot be read is recorded, not raised: drawing never blocks an import."""
        from wpsim.io.mesh_files import load_triangles

        mesh = self.mesh_asset(geom)
        if geom.get("mesh") not in self.drawn_meshes:  # each file read once, however many geoms draw it
            try:
                path = resolve_mesh(self.path, mesh, mesh.get("file"), self.mesh_dirs)
                scale = self.numbers(mesh, "scale", 3, (1.0, 1.0, 1.0))
                self.drawn_meshes[geom.get("mesh")] = load_triangles(path, scale)
            except ValueError as error:
                self.drawn_meshes[geom.get("mesh")] = error
        surface = self.drawn_meshes[geom.get("mesh")]
        if isinstance(surface, ValueError):
            self.scene.unhonoured.append(self.tree.unhonoured_here(geom, "mesh", geom.get("mesh"),
                                                                   f"is not drawn: {surface}"))
            return
        b.add_visual_mesh(body, surface.vertices, surface.faces, self.numbers(geom, "pos", 3, (0.0, 0.0, 0.0)),
                          self.rotation(geom))

    # -------------------------------------------------------------- actuators
    def add_actuators(self, b: ModelBuilder, root):
        actuators = root.find("actuator")
        if actuators is None:
            return
        names = set()
        for actuator in actuators:
            if actuator.tag not in ("motor", "position", "velocity", "general"):
                self.fail(actuator, "unsupported actuator (supported: motor, position, velocity, general)")
            name = actuator.get("name")
            if name is not None and name in names:
                self.fail(actuator, f"a second actuator named \"{name}\"")
            names.add(name)
            joint_name = actuator.get("joint")
            if joint_name is None and actuator.get("tendon") is not None:
                self.add_tendon_actuator(b, actuator, *self.gain_and_bias(actuator))
                continue
            others = [key for key in ("site", "body", "jointinparent") if actuator.get(key) is not None]
            if joint_name is None and others:  # listed as not honoured by the compile step: dropped
                continue
            joint = self.one_dof_joint(b, actuator, "joint")
            gear = float(self.numbers(actuator, "gear", (1, 6), (1.0,))[0])
            kind, kp, kv, gain = self.actuator_law(actuator)
            if kp < 0.0 or kv < 0.0:
                self.fail(actuator, f"negative gain (kp {kp:g}, kv {kv:g}): a {kind} actuator's gains must be >= 0")
            if kind == "position":
                self.set_gain(b, joint, "joint_target_ke", kp)
            if kind in ("position", "velocity") and (kv > 0.0 or kind == "velocity"):
                self.set_gain(b, joint, "joint_target_kd", kv)
            if kind in ("position", "velocity"):  # a kv fitted later acts as the integrator takes it
                b.set_drive_damping_explicit(joint, self.drive_damping_explicit)
            self.apply_ranges(b, actuator, kind, joint, gear, gain)
            self.scene.actuators.append({"name": actuator.get("name") or f"actuator{len(self.scene.actuators)}",
                                         "joint": joint, "kind": kind, "gear": gear * gain})

    def apply_ranges(self, b: ModelBuilder, actuator, kind: str, joint: int, gear: float, gain: float):
        """An actuator's control range and force range (``forcerange``, times the gear, and its
        joint's ``actuatorfrcrange``) onto the joint: a motor's joint_f bounds, a position
        servo's target bounds and symmetric drive force limit. What cannot be mapped is listed."""
        controls = self.control_range(actuator, b, joint)
        forces = self.bounded(actuator, "force")
        forces = None if forces is None else np.sort(gear * forces)
        on_joint = self.bounded(self.joint_elements[actuator.get("joint")], "actuatorfrc")
        if on_joint is not None:
            forces = on_joint if forces is None else np.array([max(forces[0], on_joint[0]),
                                                                min(forces[1], on_joint[1])])
        if kind == "motor":
            bounds = None if controls is None else np.sort(gear * gain * controls)
            if forces is not None:
                bounds = forces if bounds is None else np.array([max(bounds[0], forces[0]), min(bounds[1], forces[1])])
            if bounds is not None:
                b.set_control_range(joint, force=bounds)
            return
        if controls is not None and kind == "position":
            b.set_control_range(joint, target=controls)
        elif controls is not None:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                actuator, "ctrlrange", actuator.get("ctrlrange"), "is not honoured: velocity targets are not clamped"))
        if forces is not None and np.isclose(-forces[0], forces[1]):
            b.set_control_range(joint, drive_force=float(forces[1]))
        elif forces is not None:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                actuator, "forcerange", actuator.get("forcerange"),
                f"is not honoured: the servo's force range {forces.tolist()} is not symmetric"))

    def bounded(self, element, prefix: str):
        """(lower, upper) of an element's ``<prefix>range`` when ``<prefix>limited`` is true, or
        "auto" (the default) under ``autolimits``; None when unlimited."""
        limited = element.get(f"{prefix}limited", "auto")
        bounds = self.numbers(element, f"{prefix}range", 2)
        if limited == "true" and bounds is None:
            self.fail(element, f"{prefix}limited=\"true\" needs a {prefix}range")
        if limited == "false" or bounds is None or (limited == "auto" and not self.autolimits):
            return None
        if not bounds[0] <= bounds[1]:
            self.fail(element, f"{prefix}range=\"{element.get(prefix + 'range')}\" is empty (lower > upper)")
        return bounds

    def control_range(self, actuator, b: ModelBuilder, joint: int):
        """The (lower, upper) control range of an actuator, or None when unlimited (see
        ``bounded``); a position actuator's ``inheritrange`` r > 0 takes the joint's range,
        scaled by r about its middle."""
        inherit = self.numbers(actuator, "inheritrange", 1, (0.0,))[0]
        if inherit > 0.0:
            dof = b.first_dof(joint)
            lower = b.joint_dofs.array("joint_limit_lower")[dof]
            upper = b.joint_dofs.array("joint_limit_upper")[dof]
            if upper - lower > 1e20:
                self.fail(actuator, "inheritrange needs a joint with a range")
            middle, half = 0.5 * (lower + upper), 0.5 * inherit * (upper - lower)
            return np.array([middle - half, middle + half])
        return self.bounded(actuator, "ctrl")

    _PARAMETER_COUNTS = tuple(range(1, 11))  # gainprm / biasprm may give up to 10 numbers

    def actuator_law(self, actuator) -> tuple:
        """(kind "motor" / "position" / "velocity", kp, kv, gain on the control) of an actuator.
        A ``<general>`` one with fixed gain and no or affine bias maps onto these: force
        g ctrl (a motor of gear g), or kp ctrl - kp q - kv qd (a position servo, biasprm
        0 -kp -kv), or kv ctrl - kv qd (a velocity servo, biasprm 0 0 -kv); other laws are refused."""
        if actuator.tag == "position":
            return ("position", float(self.numbers(actuator, "kp", 1, (1.0,))[0]),
                    float(self.numbers(actuator, "kv", 1, (0.0,))[0]), 1.0)
        if actuator.tag == "velocity":
            return "velocity", 0.0, float(self.numbers(actuator, "kv", 1, (1.0,))[0]), 1.0
        if actuator.tag == "motor":
            return "motor", 0.0, 0.0, 1.0
        g, bias = self.gain_and_bias(actuator)
        if bias[0] == 0.0 and bias[1] == 0.0 and bias[2] == 0.0:
            return "motor", 0.0, 0.0, g
        if bias[0] == 0.0 and bias[1] == -g and bias[2] <= 0.0:
            return "position", g, -float(bias[2]), 1.0
        if bias[0] == 0.0 and bias[1] == 0.0 and bias[2] == -g:
            return "velocity", 0.0, g, 1.0
        self.fail(actuator, f"a general actuator with gainprm {g:g} and biasprm {bias.tolist()} is not a motor, "
                            f"position or velocity servo (biasprm 0 -kp -kv with gainprm kp, or 0 0 -kv with kv)")

    def gain_and_bias(self, actuator) -> tuple:
        """(gain g, bias (b0, b1, b2)) of an actuator's force g ctrl + b0 + b1 length + b2 rate:
        a ``<general>`` one's fixed gainprm and affine biasprm (other gain, bias and dynamics
        types are refused), a position servo's kp and (0, -kp, -kv), a motor's 1 and zeros."""
        if actuator.tag == "position":
            kp = float(self.numbers(actuator, "kp", 1, (1.0,))[0])
            return kp, np.array([0.0, -kp, -float(self.numbers(actuator, "kv", 1, (0.0,))[0])])
        if actuator.tag != "general":
            return 1.0, np.zeros(3)
        gain = self.numbers(actuator, "gainprm", self._PARAMETER_COUNTS, (1.0,))
        bias = np.zeros(3)
        if actuator.get("biastype", "none") == "affine":
            given = self.numbers(actuator, "biasprm", self._PARAMETER_COUNTS, (0.0,))
            bias[:min(3, len(given))] = given[:3]
        for name, allowed in (("gaintype", "fixed"), ("biastype", ("none", "affine")), ("dyntype", "none")):
            if actuator.get(name, allowed if isinstance(allowed, str) else allowed[0]) not in allowed:
                self.fail(actuator, f"{name}=\"{actuator.get(name)}\" is not supported (supported: {allowed})")
        return float(gain[0]), bias

    def set_contact_settings(self, b: ModelBuilder):
        """The geoms' soft-contact settings as MuJoCo reads them: ``scene.contact_settings``, the
        solve's own settings (which joint limits and dry friction use too), are the most common
        (solref, solimp) of the colliding geoms (in its time-constant form, dmin <= dmax;
        MuJoCo's defaults where none is), with MuJoCo's row weights (regularisation "mujoco");
        every colliding geom that differs from them (MuJoCo's defaults where it gives none) gets
        its own (``ModelBuilder.set_shape_softness``), so each pair mixes them as MuJoCo does.
        A setting the builder refuses is listed as not honoured. A file without colliding geoms
        gets MuJoCo's defaults (its joint limits, dry friction and equalities are rows too)."""
        usable = [(ref, imp) for _, _, ref, imp, _, _ in self.softness if min(ref) > 0.0 and imp[0] <= imp[1]]
        common = (max(set(usable), key=usable.count) if usable
                  else (MUJOCO_SOLREF, clamped_solimp(MUJOCO_SOLIMP)))
        (time_constant, damping_ratio), (dmin, dmax, width, midpoint, power) = common
        self.scene.contact_settings = {
            "time_constant": time_constant, "damping_ratio": damping_ratio, "impedance": dmax, "impedance_min": dmin,
            "impedance_width": width, "impedance_midpoint": midpoint, "impedance_power": power,
            "regularisation": "mujoco", "implicit_terms": "after solve", "impratio": self.impratio,
            "friction_mixing": "mujoco"}
        for geom, shape, ref, imp, solmix, priority in self.softness:
            if (ref, imp, solmix, priority) == (*common, 1.0, 0):
                continue
            try:
                b.set_shape_softness(shape, ref, imp, solmix, priority)
            except ValueError as error:
                self.scene.unhonoured.append(self.tree.unhonoured_here(
                    geom, "solref", geom.get("solref"), f"is not honoured ({error}); the file's common setting is used"))

    def add_contact_excludes(self, b: ModelBuilder, root):
        """``<contact><exclude body1 body2>``: those bodies' shapes never collide ("world": the static ones)."""
        for exclude in (e for contact in root.findall("contact") for e in contact.findall("exclude")):
            pair = []
            for key in ("body1", "body2"):
                name = exclude.get(key)
                if name == "world":
                    pair.append(-1)
                elif name in self.scene.bodies:
                    pair.append(self.scene.bodies[name])
                else:
                    self.fail(exclude, f"{key}: unknown body \"{name}\"")
            try:
                b.exclude_contact(*pair)
            except ValueError as error:
                self.fail(exclude, str(error))

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
            qpos = self.numbers(key, "qpos", nq)
            qvel = self.numbers(key, "qvel", nv)
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
        b.joint_dofs.array(column)[b.first_dof(joint)] = value


def import_mjcf(path, builder: ModelBuilder | None = None, ke: float = 1.0e4, kd: float = 100.0) -> tuple:
    """Add the MJCF scene at ``path`` to ``builder`` (a new z-up one if None); returns
    (builder, ImportedScene). ke (N/m) and kd (N s/m) are the contact stiffness and damping
    of every geom. The file's gravity replaces the builder's. What the file asks for and is
    not honoured is listed in ``ImportedScene.unhonoured`` and warned about once. Nothing is
    added if the file is rejected (``SceneFileError``, a ValueError, names the file, element
    and line)."""
    path = Path(path)
    tree = load_mjcf(path)
    root = tree.root
    builder = ModelBuilder() if builder is None else builder
    reader = _Reader(tree, ke, kd)
    option = root.find("option")
    gravity = medium = None
    reader.scene.timestep = MUJOCO_TIME_STEP
    if option is not None:
        step = tree.numbers(option, "timestep", 1)
        if step is not None and not step[0] > 0.0:
            tree.fail(option, f"timestep=\"{option.get('timestep')}\" must be > 0 s")
        reader.scene.timestep = MUJOCO_TIME_STEP if step is None else float(step[0])
        gravity = tree.numbers(option, "gravity", 3)
        medium = reader.medium(option)
    world = root.find("worldbody")
    if world is None:
        raise SceneFileError(f"{path}: no <worldbody>")

    compiler = root.find("compiler")
    total_mass = None if compiler is None else tree.numbers(compiler, "settotalmass", 1)

    at_reference = []  # spatial tendons whose springs rest at their reference length

    def build(b):
        first = b.bodies.count
        for geom in world.findall("geom"):
            reader.add_geom(b, geom, -1, use_density=False)
        reader.add_sites(world, -1)
        for body in world.findall("body"):
            reader.add_body(b, body, -1)
        reader.add_fixed_tendons(b, root)
        at_reference.extend(reader.add_spatial_tendons(b, root))
        reader.add_actuators(b, root)
        reader.add_contact_excludes(b, root)
        reader.add_equalities(b, root)
        reader.add_connections(b, root)
        reader.set_contact_settings(b)
        reader.add_keyframes(b, root)
        if total_mass is not None and total_mass[0] > 0.0:  # as MuJoCo: every body's mass and inertia scaled alike
            scale = total_mass[0] / b.bodies.array("body_mass")[first:].sum()
            b.bodies.array("body_mass")[first:] *= scale
            b.bodies.array("body_inertia")[first:] *= scale

    add_all_or_nothing(builder, build)
    if at_reference:
        reference_rest_lengths(builder, at_reference)
    if medium is not None:
        builder.fluid_density, builder.fluid_viscosity, builder.wind = medium
    if gravity is not None:  # along the up axis a number, else the vector (any direction)
        off_axis = np.delete(gravity, builder.up_axis)
        builder.gravity = float(gravity[builder.up_axis]) if not off_axis.any() else tuple(gravity.tolist())
    if reader.scene.unhonoured:
        listed = "\n".join(f"  {item}" for item in reader.scene.unhonoured)
        warnings.warn(f"{path}: {len(reader.scene.unhonoured)} features of the file are not honoured "
                      f"(ImportedScene.unhonoured):\n{listed}", stacklevel=2)
    return builder, reader.scene
