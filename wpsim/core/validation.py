"""Build-time input checks. Each raises ``ValueError`` naming the element kind and index."""

from __future__ import annotations

import numpy as np


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
