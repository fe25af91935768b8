"""Declared optimisation parameters and the flat vector an optimiser works on.

A ``Parameter`` is some entries of one Model, State or Control array, named by its target
("model.body_mass", "state.joint_qd", "control.joint_f"; "controller.<array>" for an
array of the rollout's controller) and optionally by rows (an index, a slice or a list of
indices), with bounds in physical units, optional log-space (for strictly positive
quantities) and a scale; ``shared=True`` makes one value for all its rows (e.g. the
damping of every tet). A ``DerivedParameter`` is a small vector
(e.g. Young's modulus and Poisson ratio) that a user function maps onto whole arrays (e.g.
the Lame parameters of every tetrahedron); its gradient is the chain rule through that
function's Jacobian (given, or by central differences of the host function, which is cheap
next to a rollout).

``ParameterSet`` binds parameters to the objects of a problem and converts between the
physical vector ``x`` (the units of the arrays) and the internal vector ``z`` an optimiser
sees: ``z = x / scale`` (scale defaults to |x0|, or 1 where x0 is 0) or ``z = log(x)``.
With ``worlds=K`` (a model of K identical worlds, ``ModelBuilder.replicate``) every
declaration is made once per world: its rows are read in one world's share of the array
(the first 1/K of its rows for world 0, the next for world 1, ...), and x holds the K
worlds' values one world after the other.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS, MODEL_FIELDS, STATE_FIELDS

OWNER_FIELDS = {"model": MODEL_FIELDS, "state": STATE_FIELDS, "control": CONTROL_FIELDS}
"""Field specs of the objects a parameter target may name."""
LOG_RUNAWAY = 10.0
"""e-folds (a factor e^10, about 22026) a log-space entry may move from its start towards a
side without a bound before ``ParameterSet.runaways`` names it."""


@dataclass
class Parameter:
    """Entries of one array of the problem's model, initial state or control.

    target: "model.<field>", "state.<field>", "control.<field>" or "controller.<array>".
    index: rows of the array: None (all), an int, a slice or a sequence of ints; every
        component of a vector row (e.g. the 3 of a centre of mass) is a parameter entry.
    shared: one value (per component) written to every selected row, whose gradient is the
        sum over them; the rows must hold equal values to start with.
    lower, upper: bounds in the field's unit (scalars or one per entry).
    log: optimise log(x) (the values must stay > 0); relative steps then have one size.
    scale: physical size of one optimiser unit (linear space only; default |x0|, 1 where 0).
    name: label in reports (default: the target; an index in brackets is appended unless
        the parameter is a single named entry).
    unit: unit in reports (default: the field's, e.g. "N m s/rad or N s/m" for joint_damping).
    """

    target: str
    index: object = None
    lower: object = -math.inf
    upper: object = math.inf
    log: bool = False
    scale: object = None
    name: str | None = None
    unit: str | None = None
    shared: bool = False


@dataclass
class DerivedParameter:
    """A small vector ``initial`` (k,) that ``build(theta)`` maps onto whole arrays.

    build: theta (k,) in physical units -> {target: values of the whole array}, e.g.
        ``{"model.tet_mu": mu, "model.tet_lambda": lam}`` (targets as for ``Parameter``).
    labels: one name per component (default name[0], name[1], ...); units: one per component.
    jacobian: optional theta -> {target: (entries of the array, k)} d values / d theta;
        without it, central differences of ``build`` with a relative step of 1e-6.
    lower, upper, log, scale: as for ``Parameter``, per component.
    """

    name: str
    initial: object
    build: Callable
    labels: tuple | None = None
    units: tuple | None = None
    jacobian: Callable | None = None
    lower: object = -math.inf
    upper: object = math.inf
    log: bool = False
    scale: object = None


def _field(owner: str, name: str, target: str):
    """The FieldSpec named by a target, or a ValueError that suggests the closest name."""
    specs = {spec.name: spec for spec in OWNER_FIELDS[owner]}
    if name not in specs:
        close = difflib.get_close_matches(name, specs, n=1)
        hint = f" (did you mean {owner}.{close[0]}?)" if close else ""
        raise ValueError(f"unknown parameter {target!r}: {owner.capitalize()} has no array field {name!r}{hint}")
    spec = specs[name]
    if not spec.differentiable:
        raise ValueError(f"parameter {target!r}: {owner}.{name} is an integer/topology field without gradients")
    return spec


def resolve_array(target: str, owners: dict):
    """(array, FieldSpec or None) of a target such as "model.body_mass" or "controller.gain"."""
    owner, _, name = target.partition(".")
    if owner not in (*OWNER_FIELDS, "controller") or not name:
        raise ValueError(f"parameter target {target!r} must be 'model.<field>', 'state.<field>', 'control.<field>' "
                         "or 'controller.<array>'")
    spec = _field(owner, name, target) if owner in OWNER_FIELDS else None
    if owners.get(owner) is None:
        raise ValueError(f"parameter {target!r}: the problem has no {owner} (give one to the Problem)")
    array = getattr(owners[owner], name, None)
    if not isinstance(array, wp.array):
        raise ValueError(f"parameter {target!r}: the {owner} has no array {name!r}")
    if array.grad is None:
        raise ValueError(f"parameter {target!r}: the array has no gradient; create the {owner} with requires_grad "
                         "(ModelBuilder.finalize(requires_grad=True))")
    return array, spec


def _rows(index, count: int, target: str) -> np.ndarray:
    """Row numbers selected by ``index`` in an array of ``count`` rows."""
    if index is None:
        rows = np.arange(count)
    elif isinstance(index, slice):
        rows = np.arange(count)[index]
    else:
        rows = np.atleast_1d(np.asarray(index))
        if rows.dtype.kind not in "iu":
            raise ValueError(f"parameter {target!r}: index must be integers, a slice or None, got {index!r}")
        bad = rows[(rows < -count) | (rows >= count)]
        if bad.size:
            raise ValueError(f"parameter {target!r}: row {int(bad[0])} out of range (the array has {count} rows)")
        rows = rows % count
    if rows.size == 0:
        raise ValueError(f"parameter {target!r}: index {index!r} selects no row")
    return rows


class _Binding:
    """One array a parameter writes, with a host copy of all its values (written whole)."""

    def __init__(self, array, spec, target: str, worlds: int):
        if array.shape[0] == 0:
            raise ValueError(f"parameter {target!r}: the array is empty (the scene has none of these elements)")
        if array.shape[0] % worlds:
            raise ValueError(f"parameter {target!r}: the array's {array.shape[0]} rows do not split into {worlds} "
                             "worlds (per-world parameters need arrays with the same rows in every world)")
        self.array, self.spec, self.target = array, spec, target
        values = array.numpy()
        self.shape, self.dtype = values.shape, values.dtype
        self.host = values.astype(np.float64).reshape(array.shape[0], -1)
        self.width = self.host.shape[1]
        self.rows_per_world = array.shape[0] // worlds

    def block(self, world: int) -> slice:
        """The rows of ``world``."""
        return slice(world * self.rows_per_world, (world + 1) * self.rows_per_world)

    def write(self):
        self.array.assign(self.host.reshape(self.shape).astype(self.dtype))

    def gradient(self) -> np.ndarray:
        return self.array.grad.numpy().astype(np.float64).reshape(self.host.shape)


class _Entries:
    """Entries of the flat vector owned by one declared parameter."""

    def __init__(self, labels: list, units: list, x0: np.ndarray, lower, upper, log: bool, scale):
        n = len(x0)
        self.labels, self.units, self.x0 = labels, units, x0
        self.lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,)).copy()
        self.upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,)).copy()
        self.log = np.full(n, bool(log))
        if log:  # log-space keeps values positive: no bound below 0 is needed
            self.lower = np.maximum(self.lower, 0.0)
        default = np.where(x0 != 0.0, np.abs(x0), 1.0)
        self.scale = default if scale is None else np.broadcast_to(np.asarray(scale, dtype=np.float64), (n,)).copy()
        for i, label in enumerate(labels):
            if not self.lower[i] <= x0[i] <= self.upper[i]:
                raise ValueError(f"parameter {label}: initial value {x0[i]:g} {units[i]} is outside its bounds "
                                 f"[{self.lower[i]:g}, {self.upper[i]:g}]")
            if log and not x0[i] > 0.0:
                raise ValueError(f"parameter {label}: log-space needs a positive value, got {x0[i]:g} {units[i]}")
            if not log and not (self.scale[i] > 0.0 and math.isfinite(self.scale[i])):
                raise ValueError(f"parameter {label}: scale must be positive and finite, got {self.scale[i]:g}")


class _ArrayParameter(_Entries):
    """A ``Parameter`` bound to its array."""

    def __init__(self, p: Parameter, binding: _Binding, world: int, suffix: str):
        self.binding, self.shared = binding, p.shared
        self.rows = _rows(p.index, binding.rows_per_world, p.target) + binding.block(world).start
        width = binding.width
        base = (p.name or p.target) + suffix
        values = binding.host[self.rows]
        if p.shared:
            if not (values == values[0]).all():
                raise ValueError(f"parameter {base}: shared=True needs equal values in the selected rows of "
                                 f"{p.target}, got {np.unique(values, axis=0)[:3].tolist()}...")
            values = values[:1]
            rows = ["shared"]
        else:
            rows = self.rows
        labels = [f"{base}[{r}]" if width == 1 else f"{base}[{r}, {c}]" for r in rows for c in range(width)]
        if p.name and width == 1 and len(rows) == 1:
            labels = [base]
        field_unit = binding.spec.unit if binding.spec is not None else ""
        unit = field_unit if p.unit is None else p.unit
        x0 = values.ravel().copy()
        super().__init__(labels, [unit] * len(x0), x0, p.lower, p.upper, p.log, p.scale)

    def write(self, x: np.ndarray):
        rows = x.reshape(-1, self.binding.width)
        self.binding.host[self.rows] = rows[0] if self.shared else rows

    def gradient(self, grads: dict) -> np.ndarray:
        selected = grads[self.binding.target][self.rows]
        return selected.sum(axis=0) if self.shared else selected.ravel()


class _DerivedValues(_Entries):
    """A ``DerivedParameter`` bound to the arrays its function fills."""

    def __init__(self, p: DerivedParameter, owners: dict, bindings: dict, world: int, worlds: int, suffix: str):
        theta = np.atleast_1d(np.asarray(p.initial, dtype=np.float64))
        self.p, self.world = p, world
        values = self._build(theta)
        self.bindings = []
        for target, array_values in values.items():
            if target not in bindings:
                bindings[target] = _Binding(*resolve_array(target, owners), target, worlds)
            binding = bindings[target]
            size = binding.rows_per_world * binding.width
            if np.asarray(array_values).size != size:
                raise ValueError(f"parameter {p.name}: build() gives {np.asarray(array_values).size} values for "
                                 f"{target}, which has {size}" + (" per world" if worlds > 1 else ""))
            self.bindings.append(binding)
        labels = list(p.labels) if p.labels else [f"{p.name}[{i}]" for i in range(len(theta))]
        labels = [label + suffix for label in labels]
        units = list(p.units) if p.units else [""] * len(theta)
        if len(labels) != len(theta) or len(units) != len(theta):
            raise ValueError(f"parameter {p.name}: {len(theta)} components but {len(labels)} labels and "
                             f"{len(units)} units")
        super().__init__(labels, units, theta, p.lower, p.upper, p.log, p.scale)

    def _build(self, theta: np.ndarray) -> dict:
        values = self.p.build(theta.copy())
        if not isinstance(values, dict) or not values:
            raise ValueError(f"parameter {self.p.name}: build() must return a non-empty dict target -> values")
        return values

    def write(self, theta: np.ndarray):
        values = self._build(theta)
        for binding in self.bindings:
            block = binding.host[binding.block(self.world)]
            block[:] = np.asarray(values[binding.target], dtype=np.float64).reshape(block.shape)

    def jacobian(self, theta: np.ndarray) -> dict:
        """target -> (entries, k) derivative of the built values w.r.t. theta."""
        if self.p.jacobian is not None:
            return {t: np.asarray(j, dtype=np.float64) for t, j in self.p.jacobian(theta.copy()).items()}
        columns = {b.target: [] for b in self.bindings}
        for i in range(len(theta)):
            h = 1e-6 * (abs(theta[i]) or 1.0)
            up, down = theta.copy(), theta.copy()
            up[i] += h
            down[i] -= h
            hi, lo = self._build(up), self._build(down)
            for target in columns:
                diff = np.asarray(hi[target], np.float64).ravel() - np.asarray(lo[target], np.float64).ravel()
                columns[target].append(diff / (2.0 * h))
        return {t: np.stack(c, axis=1) for t, c in columns.items()}

    def gradient(self, grads: dict, theta: np.ndarray) -> np.ndarray:
        jac = self.jacobian(theta)
        return sum(jac[b.target].T @ grads[b.target][b.block(self.world)].ravel() for b in self.bindings)


class ParameterSet:
    """Declared parameters bound to a problem's ``owners`` ({"model": ..., "state": ...,
    "control": ...}): the flat physical vector, its transform to the optimiser's vector,
    writing values into the arrays and reading the gradient back."""

    def __init__(self, parameters, owners: dict, worlds: int = 1):
        if not parameters:
            raise ValueError("no parameters declared")
        if int(worlds) != worlds or worlds < 1:
            raise ValueError(f"worlds must be an integer >= 1, got {worlds}")
        self.worlds = int(worlds)
        self._bindings: dict = {}
        self.parts = []
        for world in range(self.worlds):
            suffix = f"@{world}" if self.worlds > 1 else ""
            for p in parameters:
                if isinstance(p, DerivedParameter):
                    self.parts.append(_DerivedValues(p, owners, self._bindings, world, self.worlds, suffix))
                elif isinstance(p, Parameter):
                    if p.target not in self._bindings:
                        self._bindings[p.target] = _Binding(*resolve_array(p.target, owners), p.target, self.worlds)
                    self.parts.append(_ArrayParameter(p, self._bindings[p.target], world, suffix))
                else:
                    raise ValueError(f"expected Parameter or DerivedParameter, got {type(p).__name__}")
        self.labels = [label for part in self.parts for label in part.labels]
        self.writes_model = any(target.startswith("model.") for target in self._bindings) or any(
            isinstance(p, DerivedParameter) for p in parameters)
        """Whether ``write`` may change the Model (a derived parameter's targets are known only
        when it builds them: counted as the Model's)."""
        self._check_overlap()
        self.units = [unit for part in self.parts for unit in part.units]
        cat = lambda name: np.concatenate([getattr(part, name) for part in self.parts])  # noqa: E731
        self.x0, self.lower, self.upper = cat("x0"), cat("lower"), cat("upper")
        self.log, self.scale = cat("log"), cat("scale")
        self._slices = []
        start = 0
        for part in self.parts:
            self._slices.append(slice(start, start + len(part.x0)))
            start += len(part.x0)

    def _check_overlap(self):
        """No array entry may belong to two parameters."""
        claimed = {}
        for part in self.parts:
            for binding in [part.binding] if isinstance(part, _ArrayParameter) else part.bindings:
                mine = np.zeros(binding.host.shape[0], dtype=bool)
                mine[part.rows if isinstance(part, _ArrayParameter) else binding.block(part.world)] = True
                taken = claimed.setdefault(binding.target, np.zeros_like(mine))
                if (taken & mine).any():
                    row = int(np.flatnonzero(taken & mine)[0])
                    raise ValueError(f"{binding.target} row {row} is declared twice (by {part.labels[0]} and an "
                                     "earlier parameter)")
                taken |= mine

    @property
    def size(self) -> int:
        return len(self.x0)

    @property
    def per_world(self) -> int:
        """Entries of x per world."""
        return self.size // self.worlds

    def describe(self, x: np.ndarray) -> str:
        """"label = value unit" of every entry of physical values x, as one line of text."""
        return ", ".join(f"{label} = {v:.6g} {unit}".rstrip() for label, v, unit in zip(self.labels, x, self.units))

    def to_internal(self, x: np.ndarray) -> np.ndarray:
        """The optimiser's vector z of physical values x."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.where(self.log, np.log(np.where(self.log, x, 1.0)), x / self.scale)

    def to_physical(self, z: np.ndarray) -> np.ndarray:
        """Physical values x of the optimiser's vector z (inf where exp(z) overflows)."""
        z = np.asarray(z, dtype=np.float64)
        with np.errstate(over="ignore"):
            return np.where(self.log, np.exp(np.where(self.log, z, 0.0)), z * self.scale)

    def internal_bound_arrays(self) -> tuple:
        """(lower, upper) arrays of z (-inf, inf where unbounded)."""
        return self.to_internal(self.lower), self.to_internal(self.upper)

    def internal_bounds(self) -> list:
        """(lower, upper) of every entry of z (None where unbounded), as scipy takes them."""
        lo, hi = self.internal_bound_arrays()
        return [(None if not np.isfinite(a) else float(a), None if not np.isfinite(b) else float(b))
                for a, b in zip(lo, hi)]

    def write(self, x: np.ndarray):
        """Write physical values x into the arrays (host copies, then one copy per array).
        Rows of a bound array that no parameter selects keep the values they had when the
        set was made: the problem owns its bound arrays while it is used."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.x0.shape or not np.isfinite(x).all():
            raise ValueError(f"parameter vector must be {self.x0.shape} finite values, got {x}")
        for part, s in zip(self.parts, self._slices):
            part.write(x[s])
        for binding in self._bindings.values():
            binding.write()

    def zero_grad(self):
        """Zero the gradients of every bound array."""
        for binding in self._bindings.values():
            binding.array.grad.zero_()

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """d loss / d x from the arrays' gradients after a backward (physical units)."""
        grads = {target: b.gradient() for target, b in self._bindings.items()}
        out = np.empty(self.size)
        for part, s in zip(self.parts, self._slices):
            out[s] = part.gradient(grads, x[s]) if isinstance(part, _DerivedValues) else part.gradient(grads)
        return out

    def runaways(self, x_start: np.ndarray, x: np.ndarray) -> list:
        """Indices of the log-space entries of x more than ``LOG_RUNAWAY`` e-folds from
        ``x_start`` towards a side without a bound (up with no upper bound, down with none
        above 0 below)."""
        positive = lambda v: np.where(self.log, v, 1.0)  # noqa: E731
        moved = np.log(positive(np.asarray(x, dtype=np.float64))) - np.log(positive(np.asarray(x_start)))
        away = ((moved > LOG_RUNAWAY) & np.isinf(self.upper)) | ((moved < -LOG_RUNAWAY) & (self.lower <= 0.0))
        return np.flatnonzero(self.log & away).tolist()

    def internal_gradient(self, x: np.ndarray, grad_x: np.ndarray) -> np.ndarray:
        """d loss / d z from d loss / d x at x (chain rule through the transform)."""
        return grad_x * np.where(self.log, x, self.scale)
