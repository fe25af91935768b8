"""Model (topology and parameters), State (what changes each step), Control (what a
controller sets each step).

Every array field is declared once in a ``FieldSpec`` table below, which gives its shape,
element type and SI unit; the tables are appended to the class docstrings, allocate the
arrays, and drive precision conversion and ``requires_grad``.

Shape letters: P particles, S springs, T triangles, B bending hinges, E tetrahedra,
C collision shapes, W worlds, K particle-contact neighbours per particle (0 when
particle-particle contact is off).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp


@dataclass(frozen=True)
class FieldSpec:
    """Declaration of one array field: name, element kind, shape, SI unit, meaning."""

    name: str
    kind: str  # "real", "vec3", "mat22", "mat33", "transform" or "int"
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
    FieldSpec("bend_indices", "int", "(B, 4)", "-", "hinge particles: two opposite vertices, then the shared edge", False),
    FieldSpec("bend_rest_angle", "real", "(B,)", "rad", "rest dihedral angle"),
    FieldSpec("bend_ke", "real", "(B,)", "N m/rad^2", "bending stiffness"),
    FieldSpec("bend_kd", "real", "(B,)", "N m s/rad^2", "bending damping"),
    FieldSpec("tet_indices", "int", "(E, 4)", "-", "particles of each tetrahedron (positive orientation)", False),
    FieldSpec("tet_rest_inv", "mat33", "(E,)", "1/m", "inverse rest edge matrix (rest shape)"),
    FieldSpec("tet_rest_volume", "real", "(E,)", "m^3", "rest volume"),
    FieldSpec("tet_mu", "real", "(E,)", "Pa", "first Lame parameter mu (shear modulus)"),
    FieldSpec("tet_lambda", "real", "(E,)", "Pa", "second Lame parameter lambda"),
    FieldSpec("tet_kd", "real", "(E,)", "Pa s", "damping on the Green strain rate"),
    FieldSpec("tet_fiber", "vec3", "(E,)", "-", "unit actuation fibre direction in rest space; 0 = volumetric"),
    FieldSpec("shape_kind", "int", "(C,)", "-", "0 plane, 1 sphere, 2 box, 3 capsule", False),
    FieldSpec("shape_body", "int", "(C,)", "-", "body the shape is attached to; -1 = static world geometry", False),
    FieldSpec("shape_world", "int", "(C,)", "-", "world of the shape; -1 = shared by all worlds", False),
    FieldSpec("shape_transform", "transform", "(C,)", "m, quat xyzw", "shape frame in world coordinates"),
    FieldSpec("shape_size", "vec3", "(C,)", "m", "sphere (r,-,-), box half extents, capsule (r, half height, -)"),
    FieldSpec("shape_ke", "real", "(C,)", "N/m", "contact stiffness"),
    FieldSpec("shape_kd", "real", "(C,)", "N s/m", "contact damping"),
    FieldSpec("shape_mu", "real", "(C,)", "-", "Coulomb friction coefficient"),
    FieldSpec("pair_ke", "real", "(1,)", "N/m", "particle-particle contact stiffness"),
    FieldSpec("pair_kd", "real", "(1,)", "N s/m", "particle-particle contact damping"),
    FieldSpec("pair_mu", "real", "(1,)", "-", "particle-particle friction coefficient"),
)

STATE_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "particle positions"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "particle velocities"),
    FieldSpec("particle_f", "vec3", "(P,)", "N", "forces of the step that starts from this state (solver output)"),
    FieldSpec("neighbor_count", "int", "(P,)", "-", "contact neighbours found for the step from this state", False),
    FieldSpec("neighbor_index", "int", "(P, K)", "-", "those neighbours' particle indices", False),
)

CONTROL_FIELDS = (
    FieldSpec("tet_activation", "real", "(E,)", "-", "signed actuation (see wpsim.kernels.fem), >= -0.9"),
    FieldSpec("particle_f_ext", "vec3", "(P,)", "N", "external force applied to each particle"),
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
        """Copy positions and velocities of ``other`` into this state (no tape record)."""
        self.particle_q.assign(other.particle_q)
        self.particle_qd.assign(other.particle_qd)


def _state_storage(model: Model, count: int, requires_grad: bool) -> dict:
    """Per state field, an indexable of ``count`` arrays. Without particle contact the
    (unused) neighbour arrays are shared by all states, as are the empty arrays of a model
    without particles."""
    storage = {}
    for spec in STATE_FIELDS:
        dtype = warp_dtype(spec.kind, model.dtype)
        grad = requires_grad and spec.differentiable
        shape = (model.particle_count,)
        if spec.name == "neighbor_index":
            shape = (model.particle_count, model.particle_max_neighbors)
        shared = spec.name.startswith("neighbor") and model.particle_max_neighbors == 0
        if count == 1 or shared or model.particle_count == 0:
            storage[spec.name] = [wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad)] * count
        else:
            storage[spec.name] = wp.zeros((count, *shape), dtype=dtype, device=model.device, requires_grad=grad)
    return storage


class Control:
    """Inputs a controller sets each step."""

    __doc__ += field_table("Fields", CONTROL_FIELDS)

    def __init__(self, model: Model, requires_grad: bool):
        shapes = {"tet_activation": model.tet_count, "particle_f_ext": model.particle_count}
        _allocate(self, CONTROL_FIELDS, shapes, model.device, model.dtype, requires_grad)


class Model:
    """Immutable topology and parameter arrays of a scene on one device (all worlds).

    Created by ``ModelBuilder.finalize``. Parameter arrays may be edited in place between
    rollouts (e.g. by an optimiser); with ``requires_grad`` their gradients are filled by
    ``wp.Tape.backward``.

    Scalar attributes: device, dtype (wp.float32 or wp.float64), requires_grad, num_worlds,
    particle_count, spring_count, tri_count, bend_count, tet_count, shape_count,
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
        """A new State holding the model's initial positions and velocities."""
        state = State(self, self.requires_grad if requires_grad is None else requires_grad)
        state.particle_q.assign(self.particle_q)
        state.particle_qd.assign(self.particle_qd)
        return state

    def control(self, requires_grad: bool | None = None) -> Control:
        """A new Control with zero activation and zero external force."""
        return Control(self, self.requires_grad if requires_grad is None else requires_grad)

    def parameter_arrays(self) -> dict:
        """All differentiable model arrays by name."""
        return {s.name: getattr(self, s.name) for s in MODEL_FIELDS if s.differentiable}
