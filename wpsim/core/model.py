"""Model (topology and parameters), State (what changes each step), Control (what a
controller sets each step). Their array fields, with shapes, element types and SI units,
are declared in ``wpsim.core.fields`` and listed in the class docstrings."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.fields import (
    CONTROL_FIELDS,
    DYNAMIC_STATE_FIELDS,
    MODEL_FIELDS,
    STATE_FIELDS,
    STORED_STATE_FIELDS,
    FieldSpec,
    field_table,
    numpy_real,
    warp_dtype,
)


def _allocate(obj, specs, shapes, device, real, requires_grad):
    for spec in specs:
        dtype = warp_dtype(spec.kind, real)
        grad = requires_grad and spec.differentiable
        setattr(obj, spec.name, wp.zeros(shapes[spec.name], dtype=dtype, device=device, requires_grad=grad))


class Checked:
    """Remembers the solver entry check (``wpsim.core.validation.EntryChecks``) that accepted
    this object's arrays, so that the check runs once; assigning one of its ``field_names`` forgets it."""

    checked_by = None
    field_names = frozenset()

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name in self.field_names:
            object.__setattr__(self, "checked_by", None)


class State(Checked):
    """Time-varying simulation state; the solver writes a fresh State each step."""

    __doc__ += field_table("Fields", STATE_FIELDS)
    field_names = frozenset(spec.name for spec in STATE_FIELDS)

    def __init__(self, model: Model, requires_grad: bool, arrays: dict | None = None):
        """Allocate a state, or wrap ``arrays`` (field name -> array) from ``State.batch``."""
        if arrays is None:
            arrays = {name: batch[0] for name, batch in _state_storage(model, 1, requires_grad).items()}
        self.__dict__.update(arrays, requires_grad=requires_grad)

    @classmethod
    def batch(cls, model: Model, count: int, requires_grad: bool) -> list:
        """``count`` states backed by one allocation per field (much cheaper than ``count``
        separate States when a rollout is recorded step by step)."""
        storage = _state_storage(model, count, requires_grad)
        return [cls(model, requires_grad, {name: batch[k] for name, batch in storage.items()}) for k in range(count)]

    def assign(self, other: State):
        """Copy the fields a step reads (``STORED_STATE_FIELDS``: particle and joint positions and
        velocities, the contact solve's warm start) of ``other`` into this state (no tape record)."""
        for name in STORED_STATE_FIELDS:
            getattr(self, name).assign(getattr(other, name))


def field_shape(model: Model, spec: FieldSpec) -> tuple:
    """Array shape of a State or Control field of ``model`` (from its shape letters)."""
    sizes = {
        "P": model.particle_count, "K": model.particle_max_neighbors, "S": model.spring_count, "E": model.tet_count,
        "Q": model.joint_coord_count, "D": model.joint_dof_count, "B": model.body_count, "L": model.coupling_count,
        "O": model.tendon_count,
    }
    return tuple(sizes[letter] for letter in spec.shape.strip("(,)").replace(" ", "").split(","))


def _state_storage(model: Model, count: int, requires_grad: bool) -> dict:
    """Per state field, a list of ``count`` arrays (rows of one allocation). Without particle contact the
    (unused) neighbour arrays are shared by all states, as are empty arrays (e.g. the
    particle fields of a model without particles)."""
    storage = {}
    for spec in STATE_FIELDS:
        dtype = warp_dtype(spec.kind, model.dtype)
        grad = requires_grad and spec.differentiable
        shape = field_shape(model, spec)
        shared = spec.name.startswith("neighbor") and model.particle_max_neighbors == 0
        if count == 1 or shared or shape[0] == 0:
            storage[spec.name] = [wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad)] * count
        else:
            storage[spec.name] = row_views(wp.zeros((count, *shape), dtype=dtype, device=model.device,
                                                    requires_grad=grad))
    return storage


def row_views(batch: wp.array) -> list:
    """The rows ``batch[0]``, ``batch[1]``, ... of a contiguous array as arrays (their gradients:
    the rows of ``batch.grad``), made from pointers, which costs about half of indexing per row.
    Each row keeps ``batch`` alive (its ``block``)."""
    grads = row_views(batch.grad) if batch.grad is not None else [None] * batch.shape[0]
    rows = []
    for k, grad in enumerate(grads):
        row = wp.array(ptr=batch.ptr + k * batch.strides[0], dtype=batch.dtype, shape=batch.shape[1:],
                       device=batch.device, grad=grad)
        row.block = batch
        rows.append(row)
    return rows


class Control(Checked):
    """Inputs a controller sets each step."""

    __doc__ += field_table("Fields", CONTROL_FIELDS)
    field_names = frozenset(spec.name for spec in CONTROL_FIELDS)

    def __init__(self, model: Model, requires_grad: bool):
        shapes = {spec.name: field_shape(model, spec) for spec in CONTROL_FIELDS}
        _allocate(self, CONTROL_FIELDS, shapes, model.device, model.dtype, requires_grad)


class Model:
    """Immutable topology and parameter arrays of a scene on one device (all worlds).

    Created by ``ModelBuilder.finalize``. Parameter arrays may be edited in place between
    rollouts (e.g. by an optimiser); with ``requires_grad`` their gradients are filled by
    ``wp.Tape.backward``.

    Scalar attributes: device, dtype (wp.float32 or wp.float64), requires_grad, num_worlds,
    particle_count, spring_count, tri_count, bend_count, tet_count, domain_count (strain-smoothing
    domains of smoothed tets), shape_count,
    body_count, joint_count, joint_coord_count, joint_dof_count, articulation_count,
    max_articulation_dofs, articulation_H_size (entries of all dense joint-space matrices),
    coupling_count (joint couplings, ``ModelBuilder.add_joint_coupling``), connection_count
    (body connections, ``ModelBuilder.add_body_connection``), tendon_count (spatial tendons,
    ``ModelBuilder.add_spatial_tendon``),
    contact_pair_count, shape_meshes (shape index -> (vertices (V, 3) m, faces (F, 3)) of
    mesh shapes, host copies for export), visual_meshes (drawn-only meshes, see
    ``ModelBuilder.visual_meshes``),
    up_axis (0, 1, 2), up_vector (tuple), friction_smoothing (m/s, the speed below which
    friction is smoothed), contact_damping_depth (m, the penetration over which penalty
    damping ramps in), particle_impacts (bool, impacts resolved at their time of impact),
    particle_max_neighbors (K), particle_max_radius (m).
    """

    __doc__ += field_table("Array fields", MODEL_FIELDS)

    def __init__(self, arrays: dict, scalars: dict, device, dtype, requires_grad: bool):
        self.device = wp.get_device(device)
        self.dtype = dtype
        self.requires_grad = requires_grad
        for key, value in scalars.items():
            setattr(self, key, value)
        declared = {spec.name for spec in MODEL_FIELDS}
        if set(arrays) != declared:
            raise ValueError(f"Model arrays do not match the field specs: missing {sorted(declared - set(arrays))}, "
                             f"undeclared {sorted(set(arrays) - declared)}")
        for spec in MODEL_FIELDS:
            host = arrays[spec.name]
            wp_type = warp_dtype(spec.kind, dtype)
            np_type = {"int": np.int32, "int64": np.int64}.get(spec.kind, numpy_real(dtype))
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
        """A new State holding the model's initial particle and joint positions and velocities.

        Body poses and velocities (``body_q``, ``body_qd``) are derived from the joint
        coordinates by forward kinematics: the first step from the state fills them, or
        ``wpsim.eval_fk(model, state)`` before reading them.
        """
        state = State(self, self.requires_grad if requires_grad is None else requires_grad)
        for name in DYNAMIC_STATE_FIELDS:
            getattr(state, name).assign(getattr(self, name))
        return state

    def control(self, requires_grad: bool | None = None) -> Control:
        """A new Control with zero activation, forces and drive targets."""
        return Control(self, self.requires_grad if requires_grad is None else requires_grad)

    def parameter_arrays(self) -> dict:
        """All differentiable model arrays by name."""
        return {s.name: getattr(self, s.name) for s in MODEL_FIELDS if s.differentiable}
