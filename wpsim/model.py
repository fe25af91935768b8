"""Model (topology and parameters), State (what changes each step), Control (what a
controller sets each step).

Every array field is declared once in a ``FieldSpec`` table below, which gives its shape,
element type and SI unit; the tables are appended to the class docstrings, allocate the
arrays, and drive precision conversion and ``requires_grad``.

Shape letters: P particles, S springs, T triangles, H bending hinges, E tetrahedra,
C collision shapes, V mesh-shape contact points, N candidate rigid contact pairs, W worlds, K particle-contact neighbours
per particle (0 when particle-particle contact is off), B rigid bodies, J joints,
Q joint coordinates, D joint dofs, A articulations, M mass-matrix entries (sum over
articulations of dofs^2). Joint coordinates and dofs are laid out depth first, articulation
by articulation (``joint_q_start``/``joint_qd_start`` give each joint's first entry).
Spatial vectors ("spatial") are (angular, linear), see ``wpsim.kernels.articulation``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp


@dataclass(frozen=True)
class FieldSpec:
    """Declaration of one array field: name, element kind, shape, SI unit, meaning."""

    name: str
    kind: str  # "real", "vec3", "spatial", "mat22", "mat33", "transform" or "int"
    shape: str
    unit: str
    doc: str
    differentiable: bool = True


def warp_dtype(kind: str, real):
    """Warp element type of a field kind at scalar precision ``real``."""
    if kind == "int":
        return wp.int32
    if kind == "real":
        return real
    if kind == "vec3":
        return wp.types.vector(3, real)
    if kind == "spatial":
        return wp.types.vector(6, real)
    if kind == "mat22":
        return wp.types.matrix((2, 2), real)
    if kind == "mat33":
        return wp.types.matrix((3, 3), real)
    if kind == "transform":
        return wp.types.transformation(real)
    raise ValueError(f"unknown field kind {kind!r}")


def numpy_real(real):
    """NumPy scalar type matching the Warp scalar type ``real``."""
    return np.float64 if real == wp.float64 else np.float32


def field_table(title: str, specs) -> str:
    """Render field specs as a docstring section."""
    lines = [f"\n    {title}:"]
    for s in specs:
        lines.append(f"        {s.name}: {s.shape} {s.kind}, {s.unit} -- {s.doc}")
    return "\n".join(lines) + "\n"


MODEL_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "initial particle positions (copied into model.state())"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "initial particle velocities"),
    FieldSpec("particle_mass", "real", "(P,)", "kg", "particle mass; 0 marks a fixed particle"),
    FieldSpec("particle_radius", "real", "(P,)", "m", "contact radius"),
    FieldSpec("particle_drag", "real", "(P,)", "N s/m", "linear drag coefficient: force -drag * v"),
    FieldSpec("particle_world", "int", "(P,)", "-", "world index of each particle", False),
    FieldSpec("gravity", "vec3", "(1,)", "m/s^2", "gravitational acceleration"),
    FieldSpec("spring_indices", "int", "(S, 2)", "-", "particle pair of each spring", False),
    FieldSpec("spring_ke", "real", "(S,)", "N/m", "spring stiffness"),
    FieldSpec("spring_kd", "real", "(S,)", "N s/m", "spring damping"),
    FieldSpec("spring_rest_length", "real", "(S,)", "m", "spring rest length"),
    FieldSpec("tri_indices", "int", "(T, 3)", "-", "particles of each cloth triangle", False),
    FieldSpec("tri_rest_inv", "mat22", "(T,)", "1/m", "inverse rest edge matrix in the triangle's 2D frame"),
    FieldSpec("tri_rest_area", "real", "(T,)", "m^2", "rest area"),
    FieldSpec("tri_mu", "real", "(T,)", "N/m", "membrane shear modulus (first Lame-style parameter)"),
    FieldSpec("tri_lambda", "real", "(T,)", "N/m", "membrane area-stretch modulus (second Lame-style parameter)"),
    FieldSpec("tri_kd", "real", "(T,)", "N s/m", "membrane damping on the strain rate"),
    FieldSpec("bend_indices", "int", "(H, 4)", "-", "hinge particles: two opposite vertices, then the shared edge", False),
    FieldSpec("bend_rest_angle", "real", "(H,)", "rad", "rest dihedral angle"),
    FieldSpec("bend_ke", "real", "(H,)", "N m/rad^2", "bending stiffness"),
    FieldSpec("bend_kd", "real", "(H,)", "N m s/rad^2", "bending damping"),
    FieldSpec("tet_indices", "int", "(E, 4)", "-", "particles of each tetrahedron (positive orientation)", False),
    FieldSpec("tet_rest_inv", "mat33", "(E,)", "1/m", "inverse rest edge matrix (rest shape)"),
    FieldSpec("tet_rest_volume", "real", "(E,)", "m^3", "rest volume"),
    FieldSpec("tet_mu", "real", "(E,)", "Pa", "first Lame parameter mu (shear modulus)"),
    FieldSpec("tet_lambda", "real", "(E,)", "Pa", "second Lame parameter lambda"),
    FieldSpec("tet_kd", "real", "(E,)", "Pa s", "damping on the Green strain rate"),
    FieldSpec("tet_fiber", "vec3", "(E,)", "-", "unit actuation fibre direction in rest space; 0 = volumetric"),
    FieldSpec("shape_kind", "int", "(C,)", "-", "0 plane, 1 sphere, 2 box, 3 capsule, 4 mesh", False),
    FieldSpec("shape_body", "int", "(C,)", "-", "body the shape is attached to; -1 = static world geometry", False),
    FieldSpec("shape_world", "int", "(C,)", "-", "world of the shape; -1 = shared by all worlds", False),
    FieldSpec("shape_transform", "transform", "(C,)", "m, quat xyzw", "shape frame in its body's frame (world if static)"),
    FieldSpec("shape_size", "vec3", "(C,)", "m",
              "sphere (r,-,-), box half extents, capsule (r, half height, -), mesh bounding-box half extents"),
    FieldSpec("shape_ke", "real", "(C,)", "N/m", "contact stiffness"),
    FieldSpec("shape_kd", "real", "(C,)", "N s/m", "contact damping"),
    FieldSpec("shape_mu", "real", "(C,)", "-", "Coulomb friction coefficient"),
    FieldSpec("shape_point_start", "int", "(C,)", "-", "first contact point of a mesh shape in shape_points", False),
    FieldSpec("shape_point_count", "int", "(C,)", "-", "contact points of a mesh shape (its convex hull's vertices)",
              False),
    FieldSpec("shape_points", "vec3", "(V,)", "m", "contact points of mesh shapes in their shape frames"),
    FieldSpec("pair_ke", "real", "(1,)", "N/m", "particle-particle contact stiffness"),
    FieldSpec("pair_kd", "real", "(1,)", "N s/m", "particle-particle contact damping"),
    FieldSpec("pair_mu", "real", "(1,)", "-", "particle-particle friction coefficient"),
    FieldSpec("contact_pair", "int", "(N, 2)", "-", "candidate rigid shape pairs (body shape, other shape)", False),
    FieldSpec("body_mass", "real", "(B,)", "kg", "body mass"),
    FieldSpec("body_com", "vec3", "(B,)", "m", "centre of mass in the body frame"),
    FieldSpec("body_inertia", "mat33", "(B,)", "kg m^2", "inertia about the centre of mass, body axes"),
    FieldSpec("body_world", "int", "(B,)", "-", "world index of each body", False),
    FieldSpec("body_origin", "vec3", "(B,)", "m", "reference point of spatial quantities: the world position of the "
              "body's articulation root joint (a constant)", False),
    FieldSpec("body_joint", "int", "(B,)", "-", "the joint whose child the body is", False),
    FieldSpec("joint_type", "int", "(J,)", "-", "0 free, 1 ball, 2 revolute, 3 prismatic, 4 fixed", False),
    FieldSpec("joint_parent", "int", "(J,)", "-", "parent body; -1 = world", False),
    FieldSpec("joint_child", "int", "(J,)", "-", "child body", False),
    FieldSpec("joint_X_p", "transform", "(J,)", "m, quat xyzw", "joint frame in the parent body frame (link offset)"),
    FieldSpec("joint_X_c", "transform", "(J,)", "m, quat xyzw", "joint frame in the child body frame"),
    FieldSpec("joint_axis", "vec3", "(J,)", "-", "unit axis of a revolute/prismatic joint in the joint frame", False),
    FieldSpec("joint_q_start", "int", "(J,)", "-", "first coordinate of each joint in joint_q", False),
    FieldSpec("joint_qd_start", "int", "(J,)", "-", "first dof of each joint in joint_qd", False),
    FieldSpec("joint_articulation", "int", "(J,)", "-", "articulation of each joint", False),
    FieldSpec("joint_dfs_pos", "int", "(J,)", "-", "position of each joint in depth-first order", False),
    FieldSpec("joint_dfs_end", "int", "(J,)", "-", "end (exclusive) of the joint's subtree in depth-first order", False),
    FieldSpec("dfs_joint", "int", "(J,)", "-", "joint at each depth-first position", False),
    FieldSpec("articulation_start", "int", "(A+1,)", "-", "first depth-first position of each articulation", False),
    FieldSpec("articulation_dof_start", "int", "(A+1,)", "-", "first dof of each articulation", False),
    FieldSpec("articulation_H_start", "int", "(A+1,)", "-", "offset of each articulation's dense mass matrix", False),
    FieldSpec("dof_joint", "int", "(D,)", "-", "joint of each dof", False),
    FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat", "initial joint coordinates (copied into model.state())"),
    FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s", "initial joint velocities"),
    FieldSpec("joint_armature", "real", "(D,)", "kg m^2 or kg", "armature added to the mass matrix diagonal"),
    FieldSpec("joint_damping", "real", "(D,)", "N m s/rad or N s/m", "viscous joint damping (integrated implicitly)"),
    FieldSpec("joint_target_ke", "real", "(D,)", "N m/rad or N/m", "PD drive position gain (revolute, prismatic)"),
    FieldSpec("joint_target_kd", "real", "(D,)", "N m s/rad or N s/m", "PD drive velocity gain (implicit)"),
    FieldSpec("joint_limit_lower", "real", "(D,)", "rad or m", "lower joint limit (revolute, prismatic)"),
    FieldSpec("joint_limit_upper", "real", "(D,)", "rad or m", "upper joint limit"),
    FieldSpec("joint_limit_ke", "real", "(D,)", "N m/rad or N/m", "limit spring stiffness"),
    FieldSpec("joint_limit_kd", "real", "(D,)", "N m s/rad or N s/m", "limit damping"),
)

STATE_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "particle positions"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "particle velocities"),
    FieldSpec("particle_f", "vec3", "(P,)", "N", "forces of the step that starts from this state (solver output)"),
    FieldSpec("neighbor_count", "int", "(P,)", "-", "contact neighbours found for the step from this state", False),
    FieldSpec("neighbor_index", "int", "(P, K)", "-", "those neighbours' particle indices", False),
    FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat", "joint coordinates"),
    FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s", "joint velocities"),
    FieldSpec("body_q", "transform", "(B,)", "m, quat xyzw", "body poses (forward kinematics of joint_q)"),
    FieldSpec("body_qd", "spatial", "(B,)", "rad/s, m/s", "world angular velocity, world velocity of the body origin"),
    FieldSpec("body_f", "spatial", "(B,)", "N m, N",
              "applied + contact wrench about body_origin, of the step from this state"),
)

DYNAMIC_STATE_FIELDS = ("particle_q", "particle_qd", "joint_q", "joint_qd")
"""The state fields a step integrates; everything else in a State is derived from them."""

CONTROL_FIELDS = (
    FieldSpec("tet_activation", "real", "(E,)", "-", "signed actuation (see wpsim.kernels.fem), >= -0.9"),
    FieldSpec("particle_f_ext", "vec3", "(P,)", "N", "external force applied to each particle"),
    FieldSpec("joint_f", "real", "(D,)", "N m or N", "generalized force on each joint dof"),
    FieldSpec("joint_target_q", "real", "(D,)", "rad or m", "PD drive position target (revolute, prismatic dofs)"),
    FieldSpec("joint_target_qd", "real", "(D,)", "rad/s or m/s", "PD drive velocity target"),
    FieldSpec("body_f_ext", "spatial", "(B,)", "N m, N", "external (torque, force at the centre of mass), world axes"),
)


def _allocate(obj, specs, shapes, device, real, requires_grad):
    for spec in specs:
        dtype = warp_dtype(spec.kind, real)
        grad = requires_grad and spec.differentiable
        setattr(obj, spec.name, wp.zeros(shapes[spec.name], dtype=dtype, device=device, requires_grad=grad))


class State:
    """Time-varying simulation state; the solver writes a fresh State each step."""

    __doc__ += field_table("Fields", STATE_FIELDS)

    def __init__(self, model: Model, requires_grad: bool, arrays: dict | None = None):
        """Allocate a state, or wrap ``arrays`` (field name -> array) from ``State.batch``."""
        if arrays is None:
            arrays = {name: batch[0] for name, batch in _state_storage(model, 1, requires_grad).items()}
        for name, arr in arrays.items():
            setattr(self, name, arr)
        self.requires_grad = requires_grad

    @classmethod
    def batch(cls, model: Model, count: int, requires_grad: bool) -> list:
        """``count`` states backed by one allocation per field (much cheaper than ``count``
        separate States when a rollout is recorded step by step)."""
        storage = _state_storage(model, count, requires_grad)
        return [cls(model, requires_grad, {name: batch[k] for name, batch in storage.items()}) for k in range(count)]

    def assign(self, other: State):
        """Copy the integrated fields (particle and joint positions and velocities) of
        ``other`` into this state (no tape record)."""
        for name in DYNAMIC_STATE_FIELDS:
            getattr(self, name).assign(getattr(other, name))


def _field_shape(model: Model, spec: FieldSpec) -> tuple:
    """Array shape of a State or Control field of ``model`` (from its shape letters)."""
    sizes = {
        "P": model.particle_count, "K": model.particle_max_neighbors, "E": model.tet_count,
        "Q": model.joint_coord_count, "D": model.joint_dof_count, "B": model.body_count,
    }
    return tuple(sizes[letter] for letter in spec.shape.strip("(,)").replace(" ", "").split(","))


def _state_storage(model: Model, count: int, requires_grad: bool) -> dict:
    """Per state field, an indexable of ``count`` arrays. Without particle contact the
    (unused) neighbour arrays are shared by all states, as are empty arrays (e.g. the
    particle fields of a model without particles)."""
    storage = {}
    for spec in STATE_FIELDS:
        dtype = warp_dtype(spec.kind, model.dtype)
        grad = requires_grad and spec.differentiable
        shape = _field_shape(model, spec)
        shared = spec.name.startswith("neighbor") and model.particle_max_neighbors == 0
        if count == 1 or shared or shape[0] == 0:
            storage[spec.name] = [wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad)] * count
        else:
            storage[spec.name] = wp.zeros((count, *shape), dtype=dtype, device=model.device, requires_grad=grad)
    return storage


class Control:
    """Inputs a controller sets each step."""

    __doc__ += field_table("Fields", CONTROL_FIELDS)

    def __init__(self, model: Model, requires_grad: bool):
        shapes = {spec.name: _field_shape(model, spec) for spec in CONTROL_FIELDS}
        _allocate(self, CONTROL_FIELDS, shapes, model.device, model.dtype, requires_grad)


class Model:
    """Immutable topology and parameter arrays of a scene on one device (all worlds).

    Created by ``ModelBuilder.finalize``. Parameter arrays may be edited in place between
    rollouts (e.g. by an optimiser); with ``requires_grad`` their gradients are filled by
    ``wp.Tape.backward``.

    Scalar attributes: device, dtype (wp.float32 or wp.float64), requires_grad, num_worlds,
    particle_count, spring_count, tri_count, bend_count, tet_count, shape_count,
    body_count, joint_count, joint_coord_count, joint_dof_count, articulation_count,
    max_articulation_dofs, articulation_H_size (entries of all dense joint-space matrices),
    contact_pair_count, shape_meshes (shape index -> (vertices (V, 3) m, faces (F, 3)) of
    mesh shapes, host copies for export),
    up_axis (0, 1, 2), up_vector (tuple), friction_smoothing (m/s, the speed below which
    friction is smoothed), particle_max_neighbors (K), particle_max_radius (m).
    """

    __doc__ += field_table("Array fields", MODEL_FIELDS)

    def __init__(self, arrays: dict, scalars: dict, device, dtype, requires_grad: bool):
        self.device = wp.get_device(device)
        self.dtype = dtype
        self.requires_grad = requires_grad
        for key, value in scalars.items():
            setattr(self, key, value)
        for spec in MODEL_FIELDS:
            host = arrays[spec.name]
            wp_type = warp_dtype(spec.kind, dtype)
            np_type = np.int32 if spec.kind == "int" else numpy_real(dtype)
            setattr(
                self,
                spec.name,
                wp.array(
                    np.ascontiguousarray(host, dtype=np_type),
                    dtype=wp_type,
                    device=self.device,
                    requires_grad=requires_grad and spec.differentiable,
                ),
            )

    @property
    def vec3(self):
        """Warp vector type of this model's precision."""
        return wp.types.vector(3, self.dtype)

    def real(self, value: float):
        """A Warp scalar of this model's precision, for kernel arguments."""
        return self.dtype(value)

    def state(self, requires_grad: bool | None = None) -> State:
        """A new State holding the model's initial positions and velocities (body poses and
        velocities filled by forward kinematics, not recorded on a tape)."""
        state = State(self, self.requires_grad if requires_grad is None else requires_grad)
        for name in DYNAMIC_STATE_FIELDS:
            getattr(state, name).assign(getattr(self, name))
        if self.body_count:
            from .kinematics import eval_fk

            eval_fk(self, state)
        return state

    def control(self, requires_grad: bool | None = None) -> Control:
        """A new Control with zero activation, forces and drive targets."""
        return Control(self, self.requires_grad if requires_grad is None else requires_grad)

    def parameter_arrays(self) -> dict:
        """All differentiable model arrays by name."""
        return {s.name: getattr(self, s.name) for s in MODEL_FIELDS if s.differentiable}
