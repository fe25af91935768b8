"""Rigid-body scenes as USD with the UsdPhysics schema: export a model's bodies, shapes and
joints, and import such a stage into a ``ModelBuilder``.

Export (``export_physics``): the physics scene (gravity, the time step when given), one Xform per body at its initial
pose with RigidBodyAPI and MassAPI (mass, centre of mass, principal inertia and axes),
its shapes as child prims with CollisionAPI, static shapes under /World/static, and one
joint prim per joint (Revolute, Prismatic, Spherical, Fixed; a free joint is a body without
joint) with body0/body1, local frames, axis, limits and a DriveAPI for PD gains. What
UsdPhysics has no attribute for is written as ``wpsim:`` attributes: contact stiffness,
damping and friction of shapes, joint damping, armature, limit stiffness and damping, and
the initial joint coordinates and velocities. The stage is written atomically.

Import (``import_usd``): the same, from any stage using that subset (bodies and joints are
named by their ``wpsim:name`` where an export kept one, else by prim path, in the returned
``ImportedScene``; a MassAPI with only a mass scales
the colliders' mass properties to it, an authored mass of 0 makes a body massless). Lengths are scaled by
``metersPerUnit``, masses by ``kilogramsPerUnit``; the stage's up axis (Y or Z) becomes the
builder's; revolute limits and angular drive gains are converted from degrees. Bodies
without a joint are free; without ``wpsim:q`` a joint starts at coordinate 0. Rejected
with a ``SceneFileError`` naming the file and prim: unreadable stages, scaled bodies,
joints whose body0 is not the parent side of a tree, unknown joint axes, shapes that
cannot be read, a mass, centre of mass or inertia that is NaN or negative, a sublayer,
reference or payload that cannot be loaded (named), a ``metersPerUnit`` or ``kilogramsPerUnit``
outside ``SCALE_RANGE``, and (naming the attribute too) a ``wpsim:`` attribute, gravity, drive
gain or centre of mass that is not numbers, NaN, infinite or beyond float32's range in SI units,
negative where the Model field must be >= 0, or of the wrong length for its joint (an empty
array), and a NaN joint limit. Nothing is added to the builder on error.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.fields import MODEL_FIELDS
from wpsim.core.geometry import quat_between, quat_to_matrix
from wpsim.core.rigid_builder import NO_LIMIT
from wpsim.io.files import atomic_write
from wpsim.io.scene_parsing import ImportedScene, SceneFileError, add_all_or_nothing
from wpsim.io.usd_export import define_shape
from wpsim.kernels.enums import (
    JOINT_BALL,
    JOINT_COORD_COUNT,
    JOINT_DOF_COUNT,
    JOINT_FIXED,
    JOINT_FREE,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    SHAPE_MESH,
)

_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
_DOF_ATTRS = {"damping": "joint_damping", "armature": "joint_armature", "friction": "joint_friction", "stiffness": "joint_stiffness",
              "spring_ref": "joint_spring_ref", "limit_ke": "joint_limit_ke", "limit_kd": "joint_limit_kd"}
"""Per-dof settings kept as ``wpsim:`` attributes: joint keyword argument -> Model field."""
_CHECKS = {spec.name: spec.check for spec in MODEL_FIELDS}
"""Model field -> what the builder requires of its values ("nonnegative", ...), which the
importer checks too, naming the attribute."""
_REAL_MAX = float(np.finfo(np.float32).max)
"""The largest magnitude a number read from a stage may have in SI units (float32's, the
Model's default precision: a larger one would be infinite there)."""
SCALE_RANGE = (1.0e-6, 1.0e6)
"""The ``metersPerUnit`` and ``kilogramsPerUnit`` a stage may give (micrometres to a thousand
kilometres, milligrams to a thousand tonnes); others are refused naming the file."""
EARTH_GRAVITY = 9.81
"""m/s^2: UsdPhysics' gravity when a scene's magnitude is negative (unauthored: -inf)."""
TIMESTEP = "timestep"
"""The physics scene's ``wpsim:`` attribute holding the time step (s)."""
PHYSX_STEPS_PER_SECOND = "physxScene:timeStepsPerSecond"
"""PhysX's scene attribute for the step rate (1/s), read when ``wpsim:timestep`` is absent."""


def _quat_wxyz(q) -> tuple:
    x, y, z, w = (float(v) for v in q)
    return w, x, y, z


def _axis_token(axis: np.ndarray) -> tuple:
    """(token, alignment quaternion turning the token's axis onto ``axis``)."""
    for token, unit in _AXES.items():
        if np.allclose(axis, unit, atol=1e-12):
            return token, np.array([0.0, 0.0, 0.0, 1.0])
    return "X", np.asarray(quat_between((1.0, 0.0, 0.0), axis), dtype=np.float64)


def _quat_mul(a, b) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


# ------------------------------------------------------------------ export
def _prim_names(names: dict | None, count: int, stem: str, taken: set) -> list:
    """Prim name of each of ``count`` elements: its name in ``names`` (index -> name) made a
    valid identifier, unique among ``taken`` (updated), else ``<stem>_<index>``."""
    from pxr import Tf

    out = []
    for i in range(count):
        name = Tf.MakeValidIdentifier(str(names[i])) if names and i in names else f"{stem}_{i}"
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}_{n}"
        taken.add(unique)
        out.append(unique)
    return out


def export_physics(model, path, timestep: float | None = None, body_names: dict | None = None,
                   joint_names: dict | None = None) -> Path:
    """Write the rigid bodies, shapes and joints of ``model`` (its initial state) as a
    UsdPhysics stage at ``path`` (.usd, .usda, .usdc); ``timestep`` (s), when given, goes on
    the physics scene as ``wpsim:timestep`` and PhysX's ``physxScene:timeStepsPerSecond``.
    ``body_names`` / ``joint_names`` (index -> name, e.g. from an importer's ``ImportedScene``)
    name the prims (made valid identifiers) and are kept as ``wpsim:name``, which
    ``import_usd`` names them by. Returns the path."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, Vt

    from wpsim.solvers.kinematics import eval_fk

    path = Path(path)
    if path.suffix not in (".usd", ".usda", ".usdc"):
        raise ValueError(f"{path}: a USD stage must end in .usd, .usda or .usdc")
    if model.up_axis == 0:
        raise ValueError("USD stages are Y-up or Z-up; this model is X-up")
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z if model.up_axis == 2 else UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(root.GetPrim())
    scene = UsdPhysics.Scene.Define(stage, "/World/physicsScene")
    g = model.gravity.numpy()[0].astype(np.float64)
    down = -np.asarray(model.up_vector, dtype=np.float64)
    scene.CreateGravityMagnitudeAttr(float(np.linalg.norm(g)))
    scene.CreateGravityDirectionAttr(Gf.Vec3f(*(g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else down)))
    if timestep is not None:
        if not (np.isfinite(timestep) and timestep > 0.0):
            raise ValueError(f"timestep must be a positive number of seconds, got {timestep}")
        scene.GetPrim().CreateAttribute(f"wpsim:{TIMESTEP}", Sdf.ValueTypeNames.Double).Set(float(timestep))
        scene.GetPrim().CreateAttribute(PHYSX_STEPS_PER_SECOND, Sdf.ValueTypeNames.UInt).Set(
            max(1, int(round(1.0 / timestep))))
    state = model.state(requires_grad=False)
    eval_fk(model, state)
    poses = state.body_q.numpy().astype(np.float64)
    q0, qd0 = state.joint_q.numpy().astype(np.float64), state.joint_qd.numpy().astype(np.float64)

    def double_attr(prim, name, values):
        prim.CreateAttribute(f"wpsim:{name}", Sdf.ValueTypeNames.DoubleArray).Set(Vt.DoubleArray([float(v) for v in values]))

    def int_attr(prim, name, value):
        prim.CreateAttribute(f"wpsim:{name}", Sdf.ValueTypeNames.Int).Set(int(value))

    kinds, bodies = model.shape_kind.numpy(), model.shape_body.numpy()
    if (bodies < 0).any():  # defined first, so an importer meets static shapes in model order
        UsdGeom.Scope.Define(stage, "/World/static")
    masses, coms, inertias = model.body_mass.numpy(), model.body_com.numpy(), model.body_inertia.numpy()
    body_prims = _prim_names(body_names, model.body_count, "body", {"physicsScene", "static", "joints"})
    joint_prims = _prim_names(joint_names, model.joint_count, "joint", set())

    def name_attr(prim, names, index, attribute="name"):
        if names and index in names:
            prim.CreateAttribute(f"wpsim:{attribute}", Sdf.ValueTypeNames.String).Set(str(names[index]))

    body_paths = []
    for b in range(model.body_count):
        xform = UsdGeom.Xform.Define(stage, f"/World/{body_prims[b]}")
        xform.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*poses[b, :3]))
        xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(*_quat_wxyz(poses[b, 3:])))
        prim = xform.GetPrim()
        name_attr(prim, body_names, b)
        UsdPhysics.RigidBodyAPI.Apply(prim)
        mass = UsdPhysics.MassAPI.Apply(prim)
        moments, axes = np.linalg.eigh(inertias[b].astype(np.float64))
        if np.linalg.det(axes) < 0:
            axes[:, 0] = -axes[:, 0]
        from scipy.spatial.transform import Rotation

        mass.CreateMassAttr(float(masses[b]))
        mass.CreateCenterOfMassAttr(Gf.Vec3f(*coms[b].astype(float)))
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*moments))
        mass.CreatePrincipalAxesAttr(Gf.Quatf(*_quat_wxyz(Rotation.from_matrix(axes).as_quat())))
        body_paths.append(prim.GetPath())
    rows = zip(kinds, bodies, model.shape_transform.numpy(), model.shape_size.numpy(), model.shape_ke.numpy(),
               model.shape_kd.numpy(), model.shape_mu.numpy())
    for s, (kind, body, transform, size, ke, kd, mu) in enumerate(rows):
        parent = f"/World/{body_prims[body]}" if body >= 0 else "/World/static"
        prim = define_shape(stage, f"{parent}/shape_{s}", int(kind), transform.astype(np.float64),
                            size.astype(np.float64), model.shape_meshes.get(s)).GetPrim()
        UsdPhysics.CollisionAPI.Apply(prim)
        if kind == SHAPE_MESH:
            UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(UsdPhysics.Tokens.convexHull)
        for name, value in (("contact_ke", ke), ("contact_kd", kd), ("contact_mu", mu)):
            prim.CreateAttribute(f"wpsim:{name}", Sdf.ValueTypeNames.Double).Set(float(value))
    if model.joint_count:
        UsdGeom.Scope.Define(stage, "/World/joints")
    types, parents, children = model.joint_type.numpy(), model.joint_parent.numpy(), model.joint_child.numpy()
    X_p, X_c, axes_ = model.joint_X_p.numpy(), model.joint_X_c.numpy(), model.joint_axis.numpy()
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    dof_arrays = {name: getattr(model, field).numpy() for name, field in _DOF_ATTRS.items()}
    lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    ke, kd = model.joint_target_ke.numpy(), model.joint_target_kd.numpy()
    for j in range(model.joint_count):
        jtype, child = int(types[j]), int(children[j])
        qs, ds = int(q_start[j]), int(qd_start[j])
        if jtype == JOINT_FREE:
            prim = stage.GetPrimAtPath(body_paths[child])
            double_attr(prim, "qd", qd0[ds:ds + 6])
            int_attr(prim, "joint_index", j)
            name_attr(prim, joint_names, j, "joint_name")
            continue
        token, align = _axis_token(axes_[j].astype(np.float64))
        define = {JOINT_REVOLUTE: UsdPhysics.RevoluteJoint, JOINT_PRISMATIC: UsdPhysics.PrismaticJoint,
                  JOINT_BALL: UsdPhysics.SphericalJoint, JOINT_FIXED: UsdPhysics.FixedJoint}[jtype]
        joint = define.Define(stage, f"/World/joints/{joint_prims[j]}")
        if parents[j] >= 0:
            joint.CreateBody0Rel().SetTargets([body_paths[parents[j]]])
        joint.CreateBody1Rel().SetTargets([body_paths[child]])
        joint.CreateLocalPos0Attr(Gf.Vec3f(*X_p[j, :3].astype(float)))
        joint.CreateLocalRot0Attr(Gf.Quatf(*_quat_wxyz(_quat_mul(X_p[j, 3:], align))))
        joint.CreateLocalPos1Attr(Gf.Vec3f(*X_c[j, :3].astype(float)))
        joint.CreateLocalRot1Attr(Gf.Quatf(*_quat_wxyz(_quat_mul(X_c[j, 3:], align))))
        prim = joint.GetPrim()
        int_attr(prim, "joint_index", j)
        name_attr(prim, joint_names, j)
        n_q, n_d = JOINT_COORD_COUNT[jtype], JOINT_DOF_COUNT[jtype]
        if n_d:
            double_attr(prim, "q", q0[qs:qs + n_q])
            double_attr(prim, "qd", qd0[ds:ds + n_d])
            for name in _DOF_ATTRS:
                double_attr(prim, name, dof_arrays[name][ds:ds + n_d])
        if jtype in (JOINT_REVOLUTE, JOINT_PRISMATIC):
            joint.CreateAxisAttr(token)
            scale = 180.0 / math.pi if jtype == JOINT_REVOLUTE else 1.0
            if lower[ds] > -NO_LIMIT:
                joint.CreateLowerLimitAttr(float(lower[ds] * scale))
            if upper[ds] < NO_LIMIT:
                joint.CreateUpperLimitAttr(float(upper[ds] * scale))
            if ke[ds] > 0 or kd[ds] > 0:
                drive = UsdPhysics.DriveAPI.Apply(prim, "angular" if jtype == JOINT_REVOLUTE else "linear")
                per_unit = math.pi / 180.0 if jtype == JOINT_REVOLUTE else 1.0
                drive.CreateStiffnessAttr(float(ke[ds] * per_unit))
                drive.CreateDampingAttr(float(kd[ds] * per_unit))

    def export(tmp):
        if not stage.GetRootLayer().Export(str(tmp)):
            raise OSError(f"{path}: USD could not write the stage")

    return atomic_write(path, export)


# ------------------------------------------------------------------ import
class _StageReader:
    """Reads one stage into a builder (see the module docstring)."""

    def __init__(self, path: Path, stage, builder: ModelBuilder):
        from pxr import UsdGeom, UsdPhysics

        self.path, self.stage, self.builder = path, stage, builder
        self.mpu = UsdGeom.GetStageMetersPerUnit(stage)
        self.kpu = UsdPhysics.GetStageKilogramsPerUnit(stage)
        for name, scale in (("metersPerUnit", self.mpu), ("kilogramsPerUnit", self.kpu)):
            if not (math.isfinite(scale) and SCALE_RANGE[0] <= scale <= SCALE_RANGE[1]):
                raise SceneFileError(f"{path}: {name} {scale} must be a unit in SI between {SCALE_RANGE[0]:g} and "
                                     f"{SCALE_RANGE[1]:g}")
        self.scene = ImportedScene()
        self.body_of_path = {}

    def fail(self, prim, message: str):
        raise SceneFileError(f"{self.path}: prim {prim.GetPath()}: {message}")

    def world_pose(self, prim) -> tuple:
        """(position m, quaternion xyzw, scale (3,)) of a prim in the world. The transform
        operations of the prim and its ancestors are read by ``values`` first (USD turns a NaN
        or zero quaternion into no rotation), and each operation ``xformOpOrder`` names must
        exist (USD skips a missing one)."""
        from pxr import Gf, Usd, UsdGeom

        owner = prim
        while owner and not owner.IsPseudoRoot():
            xformable = UsdGeom.Xformable(owner) if owner.IsA(UsdGeom.Xformable) else None
            ops = xformable.GetOrderedXformOps() if xformable else ()
            named = [str(t) for t in (xformable.GetXformOpOrderAttr().Get() or ()) if str(t) != "!resetXformStack!"] \
                if xformable else []
            missing = sorted(set(named) - {op.GetOpName() for op in ops})
            if missing:  # USD skips it with a warning
                self.fail(owner, f"xformOpOrder names {', '.join(missing)}, which the prim does not have (or not as a "
                                 "transform operation)")
            for op in ops:
                value = op.Get()
                if isinstance(value, (Gf.Quatd, Gf.Quatf, Gf.Quath)):
                    value = [value.GetReal(), *value.GetImaginary()]
                    if not any(value):
                        self.fail(owner, f"{op.GetName()} {value} is not a rotation")
                if value is not None:
                    flat = np.ravel(value)
                    length = op.GetOpType() == UsdGeom.XformOp.TypeTranslate  # in stage units
                    self.values(owner, op.GetName(), flat, flat.size, scale=self.mpu if length else 1.0)
            owner = owner.GetParent()
        matrix = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
        transform = Gf.Transform(matrix)
        rot = transform.GetRotation().GetQuat()
        imag = rot.GetImaginary()
        return (np.array(transform.GetTranslation(), dtype=np.float64) * self.mpu,
                np.array([imag[0], imag[1], imag[2], rot.GetReal()]), np.array(transform.GetScale(), dtype=np.float64))

    def values(self, prim, name: str, value, count=None, check: str | None = "finite", scale: float = 1.0):
        """``value`` of the attribute ``name`` of ``prim`` times ``scale`` (to SI units): a float
        when ``count`` is None, else an array of ``count`` floats (an int, or a tuple of the
        counts allowed; a single number counts as one). Refused with a ``SceneFileError``
        naming the file, prim and attribute: what is not numbers, the wrong count (an empty
        array), NaN, infinite or beyond float32's range in SI units, and, as ``check`` says
        (a Model field's check), negative ("nonnegative") or not positive ("positive")."""
        raw = np.asarray(value) if not isinstance(value, str) else np.asarray(None)
        if raw.dtype.kind not in "biuf" or raw.ndim > 1:
            self.fail(prim, f"{name} {value!r} is not a number or a list of numbers")
        array = np.atleast_1d(raw.astype(np.float64))
        allowed = (1,) if count is None else (count,) if isinstance(count, int) else tuple(count)
        if array.size not in allowed:
            self.fail(prim, f"{name} has {array.size} values, {' or '.join(map(str, allowed))} expected")
        shown = array.tolist() if count is not None else array[0]
        if np.isnan(array).any():
            self.fail(prim, f"{name} {shown} is not a number")
        with np.errstate(over="ignore"):
            array = array * scale
        if not (np.abs(array) <= _REAL_MAX).all():
            self.fail(prim, f"{name} {shown} must be finite, of magnitude at most {_REAL_MAX:.3g} (float32) "
                            "in SI units")
        if check == "nonnegative" and (array < 0.0).any():
            self.fail(prim, f"{name} {shown} must be >= 0")
        if check == "positive" and (array <= 0.0).any():
            self.fail(prim, f"{name} {shown} must be > 0")
        return float(array[0]) if count is None else array

    def custom(self, prim, name: str, default=None, count=None, check: str | None = "finite"):
        """The ``wpsim:<name>`` attribute of ``prim`` read by ``values`` (SI units already),
        ``default`` when it is absent."""
        attr = prim.GetAttribute(f"wpsim:{name}")
        value = attr.Get() if attr else None
        return default if value is None else self.values(prim, f"wpsim:{name}", value, count, check)

    def gravity(self, prim):
        """The gravity of a physics scene prim as the builder takes it (m/s^2: a number along
        the up axis or a 3-vector), or None where it gives neither a magnitude nor a direction
        (the builder's own stays). As UsdPhysics says, a negative magnitude (unauthored: -inf)
        is Earth's gravity and a zero direction is down the up axis."""
        from pxr import UsdPhysics

        scene = UsdPhysics.Scene(prim)
        direction_attr, magnitude_attr = scene.GetGravityDirectionAttr(), scene.GetGravityMagnitudeAttr()
        direction, magnitude = (a.Get() if a else None for a in (direction_attr, magnitude_attr))
        direction = np.zeros(3) if direction is None else self.values(prim, direction_attr.GetName(), direction, 3)
        if magnitude is not None and magnitude != -math.inf:
            magnitude = self.values(prim, magnitude_attr.GetName(), magnitude, scale=self.mpu)
        given = magnitude is not None and magnitude >= 0.0
        length = float(np.linalg.norm(direction))
        if not given and length == 0.0:
            return None
        if given and magnitude == 0.0:
            return 0.0
        up = np.asarray(self.builder.up_vector)
        vector = (direction / length if length > 0.0 else -up) * (magnitude if given else EARTH_GRAVITY)
        along = float(vector @ up)  # a number when it is along the up axis
        return along if np.allclose(vector, along * up) else tuple(vector.tolist())

    # ---------------------------------------------------------- bodies and shapes
    def add_body(self, prim):
        from pxr import UsdPhysics

        pos, rot, scale = self.world_pose(prim)
        if not np.allclose(scale, 1.0, atol=1e-6):
            self.fail(prim, f"rigid bodies must not be scaled (scale {scale.tolist()})")
        mass_api = UsdPhysics.MassAPI(prim)
        mass_attr = mass_api.GetMassAttr() if mass_api else None
        mass = mass_attr.Get() if mass_attr and mass_attr.HasAuthoredValue() else None
        b = self.builder
        com_attr = mass_api.GetCenterOfMassAttr() if mass_api else None
        com = com_attr.Get() if com_attr else None
        if com is None or np.all(np.asarray(com) == -math.inf):  # unauthored: (-inf, -inf, -inf)
            com = np.zeros(3)
        else:
            com = self.values(prim, com_attr.GetName(), com, 3, scale=self.mpu)
        moments = np.array(mass_api.GetDiagonalInertiaAttr().Get() or (0.0, 0.0, 0.0), dtype=np.float64) if mass_api \
            else np.zeros(3)
        if mass is not None and not (math.isfinite(mass) and mass >= 0.0):
            self.fail(prim, f"physics:mass {mass} must be a finite mass >= 0 (0: derived from the colliders)")
        if not (np.isfinite(moments).all() and (moments >= 0.0).all()):
            self.fail(prim, f"physics:diagonalInertia {moments.tolist()} must be finite moments >= 0 "
                            "((0, 0, 0): derived from the colliders)")
        self.target_mass = None  # set: scale the colliders' mass properties to this mass (kg)
        density = 1000.0
        if mass is not None and mass == 0.0:
            density = 0.0  # an authored zero: massless (e.g. a welded marker)
        if mass is not None and mass > 0.0 and (moments > 0.0).all():
            axes = mass_api.GetPrincipalAxesAttr().Get()
            axes = None if axes is None else np.array([*axes.GetImaginary(), axes.GetReal()], dtype=np.float64)
            R = np.eye(3) if axes is None or np.linalg.norm(axes) < 1e-12 else quat_to_matrix(axes)
            inertia = R @ np.diag(moments) @ R.T * self.kpu * self.mpu**2
            try:
                body = b.add_body(mass=float(mass) * self.kpu, com=com, inertia=inertia)
            except ValueError as error:
                self.fail(prim, str(error))
            density = 0.0
        else:
            body = b.add_body()
            if mass is not None and mass > 0.0:
                self.target_mass = float(mass) * self.kpu
        self.body_of_path[prim.GetPath()] = body
        self.scene.bodies[self.name(prim, "name", self.scene.bodies)] = body
        return body, pos, rot, density

    def scale_body_mass(self, prim, body: int):
        """A body whose MassAPI gives only its mass: scale the colliders' mass properties to it."""
        if self.target_mass is None:
            return
        masses, inertias = self.builder.bodies.array("body_mass"), self.builder.bodies.array("body_inertia")
        if not masses[body] > 0.0:
            self.fail(prim, "MassAPI gives a mass but no inertia, and the body has no colliders to derive it from")
        inertias[body] *= self.target_mass / masses[body]
        masses[body] = self.target_mass

    def add_shapes(self, owner, body: int, body_pose: tuple | None, density: float):
        """Collision shapes on ``owner`` (a body prim may be its own collider) and among its
        descendants, stopping at other bodies."""
        from pxr import UsdPhysics

        if owner.HasAPI(UsdPhysics.RigidBodyAPI) and owner.HasAPI(UsdPhysics.CollisionAPI):
            self.add_shape(owner, body, body_pose, density)
        for prim in owner.GetChildren():
            if prim.HasAPI(UsdPhysics.RigidBodyAPI):
                continue
            if prim.HasAPI(UsdPhysics.CollisionAPI):
                self.add_shape(prim, body, body_pose, density)
            self.add_shapes(prim, body, body_pose, density)

    def add_shape(self, prim, body: int, body_pose: tuple | None, density: float):
        from pxr import UsdGeom

        pos, rot, scale = self.world_pose(prim)
        if body_pose is not None:  # relative to the body
            R = quat_to_matrix(body_pose[1])
            pos = R.T @ (pos - body_pose[0])
            rot = _quat_mul(np.array([-body_pose[1][0], -body_pose[1][1], -body_pose[1][2], body_pose[1][3]]), rot)
        contact = {key: self.custom(prim, f"contact_{key}", default, check=_CHECKS[f"shape_{key}"])
                   for key, default in (("ke", 1.0e4), ("kd", 100.0), ("mu", 0.5))}
        b = self.builder

        def size(attr, factor: float) -> float:  # a dimension (m) of the shape, scaled by ``factor``
            return self.values(prim, attr.GetName(), attr.Get(), scale=factor * self.mpu)

        try:
            if prim.IsA(UsdGeom.Plane):
                normal = _AXES[str(UsdGeom.Plane(prim).GetAxisAttr().Get())]
                rot = _quat_mul(rot, quat_between((0.0, 0.0, 1.0), normal))
                if body >= 0:
                    self.fail(prim, "planes must be static")
                return b.add_shape_plane(pos, rot, **contact)
            if prim.IsA(UsdGeom.Sphere):
                radius = size(UsdGeom.Sphere(prim).GetRadiusAttr(), scale.max())
                return b.add_shape_sphere(body, pos, rot, radius=radius, density=density, **contact)
            if prim.IsA(UsdGeom.Cube):
                half = 0.5 * np.array([size(UsdGeom.Cube(prim).GetSizeAttr(), k) for k in scale])
                return b.add_shape_box(body, pos, rot, *half, density=density, **contact)
            if prim.IsA(UsdGeom.Capsule):
                capsule = UsdGeom.Capsule(prim)
                token = str(capsule.GetAxisAttr().Get())
                axis = _AXES[token]
                rot = _quat_mul(rot, quat_between((0.0, 0.0, 1.0), axis))
                along = "XYZ".index(token)
                radius = size(capsule.GetRadiusAttr(), np.delete(scale, along).max())
                half = 0.5 * size(capsule.GetHeightAttr(), scale[along])
                return b.add_shape_capsule(body, pos, rot, radius=radius, half_height=half, density=density,
                                           **contact)
            if prim.IsA(UsdGeom.Mesh):
                mesh = UsdGeom.Mesh(prim)
                points = np.array(mesh.GetPointsAttr().Get(), dtype=np.float64) * scale * self.mpu
                counts = np.array(mesh.GetFaceVertexCountsAttr().Get())
                if (counts != 3).any():
                    self.fail(prim, "mesh colliders must be triangle meshes")
                faces = np.array(mesh.GetFaceVertexIndicesAttr().Get()).reshape(-1, 3)
                return b.add_shape_mesh(body, points, faces, pos, rot, density=density, name=f"{self.path}: "
                                        f"{prim.GetPath()}", **contact)
        except SceneFileError:
            raise
        except (ValueError, TypeError) as error:
            self.fail(prim, str(error))
        self.fail(prim, f"unsupported collision prim type {prim.GetTypeName()}")

    # ---------------------------------------------------------- joints
    def add_joint(self, prim):
        from pxr import UsdPhysics

        joint = UsdPhysics.Joint(prim)
        targets0, targets1 = joint.GetBody0Rel().GetTargets(), joint.GetBody1Rel().GetTargets()
        if len(targets1) != 1 or targets1[0] not in self.body_of_path:
            self.fail(prim, "body1 must name one rigid body (the child)")
        parent = self.body_of_path.get(targets0[0], None) if targets0 else -1
        if parent is None:
            self.fail(prim, f"body0 {targets0[0]} is not a rigid body")
        child = self.body_of_path[targets1[0]]
        pos0 = np.array(joint.GetLocalPos0Attr().Get() or (0, 0, 0), dtype=np.float64) * self.mpu
        pos1 = np.array(joint.GetLocalPos1Attr().Get() or (0, 0, 0), dtype=np.float64) * self.mpu
        rot0, rot1 = (np.array([*r.GetImaginary(), r.GetReal()]) if r is not None else np.array([0, 0, 0, 1.0])
                      for r in (joint.GetLocalRot0Attr().Get(), joint.GetLocalRot1Attr().Get()))
        frames = dict(parent_pos=pos0, parent_rot=rot0, child_pos=pos1, child_rot=rot1)
        b = self.builder
        try:
            if prim.IsA(UsdPhysics.FixedJoint):
                index = b.add_joint_fixed(parent, child, **frames)
            elif prim.IsA(UsdPhysics.SphericalJoint):
                dof = {k: self.custom(prim, k, 0.0, (1, 3), _CHECKS[_DOF_ATTRS[k]])  # one for all 3 dofs, or each
                       for k in ("damping", "armature", "friction")}
                index = b.add_joint_ball(parent, child, **frames, q=self.custom(prim, "q", (0.0, 0.0, 0.0, 1.0), 4),
                                         qd=self.custom(prim, "qd", (0.0, 0.0, 0.0), 3), **dof)
            elif prim.IsA(UsdPhysics.RevoluteJoint) or prim.IsA(UsdPhysics.PrismaticJoint):
                index = self.add_single_dof(prim, parent, child, frames)
            else:
                self.fail(prim, f"unsupported joint type {prim.GetTypeName()}")
        except SceneFileError:
            raise
        except ValueError as error:
            self.fail(prim, str(error))
        self.scene.joints[self.name(prim, "name", self.scene.joints)] = index

    def name(self, prim, attribute: str, taken: dict, suffix: str = "") -> str:
        """The name an exporter kept in ``wpsim:<attribute>`` (a string not in ``taken``),
        else the prim's path followed by ``suffix``."""
        attr = prim.GetAttribute(f"wpsim:{attribute}")
        kept = attr.Get() if attr else None
        return kept if isinstance(kept, str) and kept and kept not in taken else f"{prim.GetPath()}{suffix}"

    def add_single_dof(self, prim, parent: int, child: int, frames: dict) -> int:
        from pxr import UsdPhysics

        revolute = prim.IsA(UsdPhysics.RevoluteJoint)
        schema = UsdPhysics.RevoluteJoint(prim) if revolute else UsdPhysics.PrismaticJoint(prim)
        token = str(schema.GetAxisAttr().Get() or "X")
        if token not in _AXES:
            self.fail(prim, f"unknown joint axis {token!r}")
        to_si = math.pi / 180.0 if revolute else self.mpu
        dof = {k: self.custom(prim, k, check=_CHECKS[field]) for k, field in _DOF_ATTRS.items()}
        dof = {k: v for k, v in dof.items() if v is not None}
        for name, attr, no_limit in (("limit_lower", schema.GetLowerLimitAttr(), -math.inf),
                                     ("limit_upper", schema.GetUpperLimitAttr(), math.inf)):
            value = attr.Get() if attr else None
            if value is not None and value != no_limit:  # -inf / inf: not limited
                dof[name] = self.values(prim, attr.GetName(), value, scale=to_si, check=None)
        drive = UsdPhysics.DriveAPI(prim, "angular" if revolute else "linear")
        if drive:  # stage units: torque per degree (mass * length^2 / time^2) or force per length
            per_si = 180.0 / math.pi * self.kpu * self.mpu**2 if revolute else self.kpu
            for key, attr in (("target_ke", drive.GetStiffnessAttr()), ("target_kd", drive.GetDampingAttr())):
                value = attr.Get() if attr else None
                dof[key] = 0.0 if value is None else self.values(prim, attr.GetName(), value, scale=per_si,
                                                                 check=_CHECKS[f"joint_{key}"])
        q, qd = self.custom(prim, "q", 0.0), self.custom(prim, "qd", 0.0)
        add = self.builder.add_joint_revolute if revolute else self.builder.add_joint_prismatic
        return add(parent, child, axis=_AXES[token], q=q, qd=qd, **frames, **dof)


def import_usd(path, builder: ModelBuilder | None = None) -> tuple:
    """Add the rigid bodies, shapes and joints of the UsdPhysics stage at ``path`` to
    ``builder`` (a new one with the stage's up axis if None); returns (builder,
    ImportedScene). The stage's physics scene gravity (any direction) replaces the builder's;
    its time step (see ``export_physics``) becomes ``ImportedScene.timestep``."""
    from pxr import Usd, UsdGeom, UsdPhysics

    path = Path(path)
    if not path.is_file():
        raise SceneFileError(f"{path}: no such file")
    try:
        stage = Usd.Stage.Open(str(path))
    except Exception as error:  # pxr raises Tf errors whose text is USD's internal source location
        raise SceneFileError(f"{path}: cannot be read as a USD stage (not a USD file, or a damaged one)") from error
    if stage is None:
        raise SceneFileError(f"{path}: cannot be read as a USD stage")
    _check_layers(path, stage)
    up = str(UsdGeom.GetStageUpAxis(stage)).lower()
    builder = ModelBuilder(up_axis=up) if builder is None else builder
    if builder.up_axis != {"x": 0, "y": 1, "z": 2}[up]:
        raise SceneFileError(f"{path}: the stage is {up.upper()}-up, the builder is not")
    reader = _StageReader(path, stage, builder)
    prims = list(stage.Traverse())
    gravity = None
    for prim in prims:
        if prim.IsA(UsdPhysics.Scene):
            found = reader.gravity(prim)
            gravity = gravity if found is None else found
            reader.scene.timestep = _scene_timestep(path, prim)

    def build(b):
        poses = {}
        for prim in prims:  # bodies and static shapes in stage order
            if prim.HasAPI(UsdPhysics.RigidBodyAPI):
                body, pos, rot, density = reader.add_body(prim)
                poses[body] = (pos, rot)
                reader.add_shapes(prim, body, (pos, rot), density)
                reader.scale_body_mass(prim, body)
            elif prim.HasAPI(UsdPhysics.CollisionAPI) and not _in_body(prim):
                reader.add_shape(prim, -1, None, 0.0)
        joint_prims = [p for p in prims if p.IsA(UsdPhysics.Joint)]
        jointed = {reader.body_of_path.get(t) for p in joint_prims for t in UsdPhysics.Joint(p).GetBody1Rel().GetTargets()}
        free = [p for p in prims if p.GetPath() in reader.body_of_path and reader.body_of_path[p.GetPath()] not in jointed]
        # joints (and free bodies) in the order an exporter numbered them, else stage order
        order = sorted(joint_prims + free, key=lambda p: reader.custom(p, "joint_index", math.inf, check="nonnegative"))
        for prim in order:
            if prim.IsA(UsdPhysics.Joint):
                reader.add_joint(prim)
            else:
                body = reader.body_of_path[prim.GetPath()]
                velocity = reader.custom(prim, "qd", np.zeros(6), 6)
                reader.scene.joints[reader.name(prim, "joint_name", reader.scene.joints, ":free")] = b.add_joint_free(
                    body, pos=poses[body][0], rot=poses[body][1], lin_vel=velocity[:3], ang_vel=velocity[3:])

    add_all_or_nothing(builder, build)
    if gravity is not None:
        builder.gravity = gravity
    return builder, reader.scene


def _check_layers(path: Path, stage):
    """A ``SceneFileError`` naming the first sublayer, reference or payload of the stage's
    layers that cannot be loaded (USD skips it with a warning, leaving a stage without its
    prims)."""
    from pxr import Sdf

    for layer in stage.GetUsedLayers():
        for asset in layer.GetCompositionAssetDependencies():
            target = layer.ComputeAbsolutePath(asset)
            try:
                loaded = Sdf.Layer.FindOrOpen(target)
            except Exception:  # pxr raises Tf errors for a file that is not a layer
                loaded = None
            if loaded is None:
                kind = "sublayer" if asset in layer.subLayerPaths else "reference or payload"
                reason = "not a USD layer" if Path(target).is_file() else "no such file"
                raise SceneFileError(f"{path}: {kind} @{asset}@ of layer {layer.realPath or layer.identifier} "
                                     f"cannot be loaded ({reason}: {target})")


def _scene_timestep(path: Path, prim) -> float | None:
    """The time step (s) a physics scene prim gives (``wpsim:timestep``, else PhysX's
    ``physxScene:timeStepsPerSecond``), or None."""
    ours, physx = prim.GetAttribute(f"wpsim:{TIMESTEP}"), prim.GetAttribute(PHYSX_STEPS_PER_SECOND)
    value = ours.Get() if ours and ours.HasAuthoredValue() else None
    if value is None and physx and physx.HasAuthoredValue():
        value = 1.0 / physx.Get() if physx.Get() else float("nan")
    if value is not None and not (np.isfinite(value) and value > 0.0):
        raise SceneFileError(f"{path}: {prim.GetPath()}: the time step must be a positive number of seconds")
    return None if value is None else float(value)


def _in_body(prim) -> bool:
    """Whether a prim lies inside a rigid body."""
    from pxr import UsdPhysics

    parent = prim.GetParent()
    while parent and not parent.IsPseudoRoot():
        if parent.HasAPI(UsdPhysics.RigidBodyAPI):
            return True
        parent = parent.GetParent()
    return False
