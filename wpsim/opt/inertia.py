"""Physically consistent rigid-body inertial parameters for identification: a body's mass,
centre of mass and rotational inertia as the ten log-Cholesky coordinates of its
pseudo-inertia matrix.

The pseudo-inertia of a body in its own frame is J = [[S, m c], [m c^T, m]] (4 x 4), with
S = integral of x x^T dm about the body origin (kg m^2), c the centre of mass (m) and m the
mass (kg). A mass distribution is physically realisable exactly when J is positive definite
(positive mass, positive principal moments, and every principal moment at most the sum of
the other two). Writing J = U U^T with U upper triangular,

    U = exp(alpha) [[exp(d1), s12, s13, t1], [0, exp(d2), s23, t2], [0, 0, exp(d3), t3], [0, 0, 0, 1]],

every real vector theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3) gives a realisable body
and every realisable body has one theta: an optimiser can move theta freely. exp(2 alpha) is
the mass and (t1, t2, t3) the centre of mass.
"""

from __future__ import annotations

import numpy as np

COORDINATES = ("alpha", "d1", "d2", "d3", "s12", "s23", "s13", "t1", "t2", "t3")
"""Names of the ten log-Cholesky coordinates, in the order of a theta vector."""
UNITS = ("log sqrt(kg)", "log m", "log m", "log m", "m", "m", "m", "m", "m", "m")
"""Units of the coordinates (d: log of a length; s, t: lengths)."""


def pseudo_inertia(mass: float, com, inertia) -> np.ndarray:
    """The (4, 4) pseudo-inertia of a body of ``mass`` (kg), centre of mass ``com`` (3,) m and
    rotational inertia ``inertia`` (3, 3) kg m^2 about its centre of mass, in its frame."""
    c = np.asarray(com, dtype=np.float64)
    about_origin = np.asarray(inertia, dtype=np.float64) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    second_moment = 0.5 * np.trace(about_origin) * np.eye(3) - about_origin
    J = np.empty((4, 4))
    J[:3, :3], J[:3, 3], J[3, :3], J[3, 3] = second_moment, mass * c, mass * c, mass
    return J


def to_log_cholesky(mass: float, com, inertia, name: str = "body") -> np.ndarray:
    """theta (10,) of a body (see ``pseudo_inertia``); ValueError naming ``name`` when the
    body is not physically realisable (its pseudo-inertia is not positive definite)."""
    J = pseudo_inertia(mass, com, inertia)
    flip = np.eye(4)[::-1]
    try:
        L = np.linalg.cholesky(flip @ J @ flip)  # flip J flip = L L^T, so J = (flip L flip)(...)^T
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}: mass {mass:g} kg, centre of mass {np.asarray(com).tolist()} m and inertia "
                         f"{np.asarray(inertia).tolist()} kg m^2 are not physically realisable (a principal "
                         "moment above the sum of the other two, or a mass or moment <= 0)") from None
    U = flip @ L @ flip
    scale = U[3, 3]
    D = U / scale
    return np.array([np.log(scale), *np.log(np.diag(D)[:3]), D[0, 1], D[1, 2], D[0, 2], *D[:3, 3]])


def from_log_cholesky(theta) -> tuple:
    """(mass kg, centre of mass (3,) m, inertia (3, 3) kg m^2 about the centre of mass) of
    log-Cholesky coordinates ``theta`` (10,); for ``theta`` (n, 10), arrays (n,), (n, 3) and
    (n, 3, 3) of n bodies."""
    theta = np.asarray(theta, dtype=np.float64)
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = np.moveaxis(theta, -1, 0)
    zero, one = np.zeros_like(alpha), np.ones_like(alpha)
    U = np.exp(alpha)[..., None, None] * np.stack([
        np.stack([np.exp(d1), s12, s13, t1], -1), np.stack([zero, np.exp(d2), s23, t2], -1),
        np.stack([zero, zero, np.exp(d3), t3], -1), np.stack([zero, zero, zero, one], -1)], -2)
    J = U @ np.swapaxes(U, -1, -2)
    mass = J[..., 3, 3]
    com = J[..., :3, 3] / mass[..., None]
    eye = np.eye(3)
    second = J[..., :3, :3]
    about_origin = np.trace(second, axis1=-2, axis2=-1)[..., None, None] * eye - second
    shift = (com * com).sum(-1)[..., None, None] * eye - com[..., :, None] * com[..., None, :]
    inertia = about_origin - mass[..., None, None] * shift
    return mass, com, 0.5 * (inertia + np.swapaxes(inertia, -1, -2))
