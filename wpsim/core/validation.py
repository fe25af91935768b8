"""Input checks at build time and at solver entry points. Each raises ``ValueError`` naming the
element kind and index, or the argument and field."""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS, STATE_FIELDS, warp_dtype
from wpsim.core.model import Checked, field_shape


def as_array(name: str, values, trailing: tuple, count: int | None = None, dtype=np.float64) -> np.ndarray:
    """``values`` as an array of shape (N, *trailing); N must equal ``count`` when given.

    A single row (with or without its leading axis) is broadcast to ``count`` rows.
    """
    arr = np.asarray(values, dtype=dtype)
    if count is not None and arr.shape in (trailing, (1, *trailing)):
        arr = np.broadcast_to(arr.reshape(trailing), (count, *trailing)).copy()
    if arr.ndim != len(trailing) + 1 or arr.shape[1:] != trailing:
        expected = "(N" + "".join(f", {d}" for d in trailing) + ")"
        raise ValueError(f"{name}: mismatched array shapes, expected {expected}, got {arr.shape}")
    if count is not None and arr.shape[0] != count:
        raise ValueError(f"{name}: mismatched array shapes, expected {count} rows, got {arr.shape[0]}")
    return arr


def require_finite(kind: str, name: str, values: np.ndarray, first_index: int = 0):
    """No NaN or Inf in any row of ``values``."""
    rows = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{kind} {first_index + i}: {name} is not finite ({values[i]})")


def require_nonnegative(kind: str, name: str, values: np.ndarray, unit: str, first_index: int = 0):
    """Every entry >= 0."""
    bad = np.flatnonzero(np.asarray(values) < 0)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{kind} {first_index + i}: negative {name} {values[i]:g} {unit}")


def require_positive(kind: str, name: str, values: np.ndarray, unit: str, first_index: int = 0):
    """Every entry > 0."""
    bad = np.flatnonzero(np.asarray(values) <= 0)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{kind} {first_index + i}: {name} must be positive, got {values[i]:g} {unit}")


def require_indices(kind: str, indices: np.ndarray, particle_count: int, first_index: int = 0):
    """Particle indices of each element in range and pairwise distinct."""
    bad = np.flatnonzero(((indices < 0) | (indices >= particle_count)).any(axis=1))
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"{kind} {first_index + i}: particle index out of range in {indices[i].tolist()} "
            f"(the builder has {particle_count} particles)"
        )
    ordered = np.sort(indices, axis=1)
    bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{kind} {first_index + i}: repeated particle index in {indices[i].tolist()}")


def require_poisson_ratio(kind: str, nu: np.ndarray, first_index: int = 0):
    """Poisson ratio strictly inside (-1, 0.5)."""
    bad = np.flatnonzero((nu <= -1.0) | (nu >= 0.5))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{kind} {first_index + i}: Poisson ratio {nu[i]:g} outside (-1, 0.5)")


def lame_parameters(young_modulus, poisson_ratio, kind: str = "tetrahedron", first_index: int = 0):
    """Lame parameters (mu, lambda) in Pa from Young's modulus (Pa) and Poisson's ratio."""
    E = np.atleast_1d(np.asarray(young_modulus, dtype=np.float64))
    nu = np.atleast_1d(np.asarray(poisson_ratio, dtype=np.float64))
    require_finite(kind, "Young's modulus", E, first_index)
    require_finite(kind, "Poisson ratio", nu, first_index)
    require_positive(kind, "Young's modulus", E, "Pa", first_index)
    require_poisson_ratio(kind, nu, first_index)
    mu = E / (2.0 * (1.0 + nu))
    lam = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    return mu, lam


def require_pose(kind: str, index: int, pos, rot) -> np.ndarray:
    """(x, y, z, qx, qy, qz, qw) from a finite position and a non-zero quaternion (normalised)."""
    p = np.asarray(pos, dtype=np.float64)
    r = np.asarray(rot, dtype=np.float64)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise ValueError(f"{kind} {index}: position must be 3 finite numbers, got {pos}")
    if r.shape != (4,) or not np.isfinite(r).all() or np.linalg.norm(r) < 1e-12:
        raise ValueError(f"{kind} {index}: rotation must be a non-zero quaternion (x, y, z, w), got {rot}")
    return np.concatenate([p, r / np.linalg.norm(r)])


def require_dt(dt, name: str = "dt") -> float:
    """``dt`` as a float of seconds, finite and > 0 (a string or bool is refused, not converted)."""
    try:
        if isinstance(dt, (str, bytes, bool)):
            raise TypeError
        value = float(dt)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {dt!r}") from None
    if not 0.0 < value < math.inf:
        raise ValueError(f"{name} must be finite and > 0 s, got {dt}")
    return value


def require_count(name: str, value, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``; a float or bool is refused, not rounded."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


_INF = math.inf
_SIZE_NOUNS = {"P": "particles", "S": "springs", "E": "tetrahedra", "Q": "joint coordinates", "D": "joint dofs",
               "B": "bodies"}


class EntryChecks:
    """A solver's checks of its step arguments against its model: ``dt`` finite and > 0, every
    State and Control field of the model's shape, dtype and device (a State or Control of
    another model fails). A State or Control that passed is marked (``Checked``), so each is
    checked once, until one of its arrays is replaced."""

    def __init__(self, model):
        self.device = model.device

        def expected(specs):
            return [(s.name, field_shape(model, s), warp_dtype(s.kind, model.dtype), s.shape) for s in specs]

        self._state = expected(STATE_FIELDS)
        self._control = expected(CONTROL_FIELDS)

    def step(self, state_in, state_out, control, dt):
        """Refuse a bad ``dt``, ``state_in``, ``state_out`` or ``control`` (None: the solver's zero control)."""
        try:  # the per-step cost: a few comparisons
            if 0.0 < dt < _INF and state_in.checked_by is self and state_out.checked_by is self and (
                    control is None or control.checked_by is self):
                return
        except (TypeError, AttributeError):
            pass
        require_dt(dt)
        arguments = [("state_in", state_in, self._state), ("state_out", state_out, self._state)]
        if control is not None:
            arguments.append(("control", control, self._control))
        for argument, obj, fields in arguments:
            if getattr(obj, "checked_by", None) is not self:
                self._accept(argument, obj, fields)

    def _accept(self, argument: str, obj, fields):
        """Check every field of ``obj``; mark it when it can be marked."""
        for name, shape, dtype, letters in fields:
            arr = getattr(obj, name, None)
            where = f"{argument}.{name}"
            if not isinstance(arr, wp.array):
                raise ValueError(f"{where} is {type(arr).__name__}, not a Warp array (is {argument} a "
                                 f"{'Control' if fields is self._control else 'State'}?)")
            if arr.shape != shape:
                noun = _SIZE_NOUNS.get(letters.strip("(,)"))
                if noun is not None and arr.ndim == 1:
                    raise ValueError(f"{where} has {arr.shape[0]} entries, the model has {shape[0]} {noun}")
                raise ValueError(f"{where} has shape {arr.shape}, the model's is {shape}")
            if arr.dtype != dtype:
                raise ValueError(f"{where} has dtype {wp.types.type_repr(arr.dtype)}, the model's is "
                                 f"{wp.types.type_repr(dtype)}")
            if arr.device != self.device:
                raise ValueError(f"{where} is on device {arr.device}, the model is on {self.device}")
        if isinstance(obj, Checked):
            obj.checked_by = self


def checked_solimp(where: str, solimp) -> tuple:
    """MuJoCo's solimp (dmin, dmax in (0, 1), width >= 0, midpoint in (0, 1), power >= 1) as a
    5-tuple; a single number d stands for (d, d, 0, 0.5, 2), d at every violation. A
    ValueError naming ``where`` otherwise."""
    if np.ndim(solimp) == 0:
        solimp = (solimp, solimp, 0.0, 0.5, 2.0)
    imp = as_array(f"{where} solimp", solimp, (5,), 1, np.float64)[0]
    dmin, dmax, width, midpoint, power = imp
    if not (np.isfinite(imp).all() and 0.0 < dmin < 1.0 and 0.0 < dmax < 1.0 and width >= 0.0
            and 0.0 < midpoint < 1.0 and power >= 1.0):
        raise ValueError(f"{where}: solimp must be (dmin, dmax in (0, 1), width >= 0, midpoint in (0, 1), "
                         f"power >= 1), or one impedance in (0, 1), got {imp.tolist()}")
    return tuple(float(v) for v in imp)


def checked_solref(where: str, solref) -> np.ndarray:
    """MuJoCo's solref, (time constant s, damping ratio) both > 0 or the direct form
    (-stiffness, -damping) both <= 0 and not both 0, as a 2-array; a ValueError naming
    ``where`` otherwise."""
    ref = as_array(f"{where} solref", solref, (2,), 1, np.float64)[0]
    if not np.isfinite(ref).all() or not ((ref > 0.0).all() or ((ref <= 0.0).all() and (ref < 0.0).any())):
        raise ValueError(f"{where}: solref must be (time constant s, damping ratio), both > 0, or "
                         f"(-stiffness, -damping), both <= 0 and not both 0, got {ref.tolist()}")
    return ref
