"""Mass properties of solid primitives and their combination into a body (host side, SI)."""

from __future__ import annotations

import math

import numpy as np

from wpsim.core.geometry import quat_between, quat_to_matrix

ORIGIN = np.zeros(3)


def sphere_mass_properties(radius: float, density: float):
    """Mass (kg), centre of mass (m) and inertia about it (kg m^2, 3x3) of a solid sphere
    centred at the origin (so are the other primitives')."""
    m = density * 4.0 / 3.0 * math.pi * radius**3
    return m, ORIGIN, np.eye(3) * (0.4 * m * radius**2)


def box_mass_properties(half_extents, density: float):
    """Mass, centre of mass and central inertia of a solid box with half extents (hx, hy, hz) (m)."""
    hx, hy, hz = (float(h) for h in half_extents)
    m = density * 8.0 * hx * hy * hz
    return m, ORIGIN, np.diag([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy]) * (m / 3.0)


def cylinder_mass_properties(radius: float, half_height: float, density: float) -> tuple:
    """Mass (kg), centre of mass (m) and central inertia (kg m^2) of a solid cylinder along z."""
    m = density * math.pi * radius * radius * 2.0 * half_height
    lateral = m * (3.0 * radius * radius + 4.0 * half_height * half_height) / 12.0
    return m, ORIGIN, np.diag([lateral, lateral, 0.5 * m * radius * radius])


def ellipsoid_mass_properties(radii, density: float) -> tuple:
    """Mass (kg), centre of mass (m) and central inertia (kg m^2) of a solid ellipsoid with
    semi-axes (a, b, c) along x, y, z (m)."""
    a, b, c = (float(r) for r in radii)
    m = density * 4.0 / 3.0 * math.pi * a * b * c
    return m, ORIGIN, np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * (m / 5.0)


def capsule_mass_properties(radius: float, half_height: float, density: float):
    """Mass, centre of mass and central inertia of a solid capsule along z (core segment
    2 * half_height)."""
    r, length = radius, 2.0 * half_height
    m_cyl = density * math.pi * r * r * length
    m_caps = density * 4.0 / 3.0 * math.pi * r**3
    axial = m_cyl * r * r / 2.0 + m_caps * 0.4 * r * r
    lateral = m_cyl * (length * length / 12.0 + r * r / 4.0) + m_caps * (
        0.4 * r * r + length * length / 4.0 + 3.0 * length * r / 8.0
    )
    return m_cyl + m_caps, ORIGIN, np.diag([lateral, lateral, axial])


def mesh_hull_and_mass(vertices: np.ndarray, faces: np.ndarray):
    """Convex-hull vertices (H, 3) of a closed mesh and a function density -> (mass (kg),
    centre of mass (m), inertia about it (kg m^2)) from trimesh's volume integrals."""
    import trimesh

    mesh = trimesh.Trimesh(vertices, faces, process=False)
    hull = np.asarray(mesh.convex_hull.vertices, dtype=np.float64)

    def properties(density: float):
        mesh.density = float(density)
        return float(mesh.mass), np.asarray(mesh.center_mass, np.float64), np.asarray(mesh.moment_inertia, np.float64)

    return hull, properties


def spread_subset(points: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``points`` (P, 3), spread out by farthest-point sampling from the
    point farthest from their centroid (deterministic); all of them when P <= count."""
    points = np.asarray(points, dtype=np.float64)
    if len(points) <= count:
        return points
    chosen = [int(np.argmax(np.linalg.norm(points - points.mean(axis=0), axis=1)))]
    distance = np.linalg.norm(points - points[chosen[0]], axis=1)
    for _ in range(count - 1):
        chosen.append(int(np.argmax(distance)))
        distance = np.minimum(distance, np.linalg.norm(points - points[chosen[-1]], axis=1))
    return points[chosen]


def shifted_inertia(mass: float, inertia: np.ndarray, rot, offset) -> np.ndarray:
    """Inertia (kg m^2) of a part about a point ``offset`` (m) from its centre of mass,
    after rotating the part by quaternion ``rot`` (x, y, z, w)."""
    R = quat_to_matrix(rot)
    d = np.asarray(offset, dtype=np.float64)
    return R @ inertia @ R.T + mass * (np.dot(d, d) * np.eye(3) - np.outer(d, d))


def combine(mass_a: float, com_a, inertia_a, mass_b: float, com_b, inertia_b):
    """Mass, centre of mass and inertia about it of two parts (inertias about own COMs,
    same axes)."""
    total = mass_a + mass_b
    if total <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    com = (mass_a * np.asarray(com_a) + mass_b * np.asarray(com_b)) / total
    inertia = shifted_inertia(mass_a, inertia_a, (0, 0, 0, 1), np.asarray(com_a) - com)
    inertia += shifted_inertia(mass_b, inertia_b, (0, 0, 0, 1), np.asarray(com_b) - com)
    return total, com, inertia


def balanced_inertia(inertia: np.ndarray) -> tuple:
    """(inertia (3, 3) kg m^2, raised by (kg m^2) or 0.0): a symmetric positive inertia whose
    principal moments break the triangle inequality (the largest above the sum of the other
    two, which no mass distribution has) with the two smaller moments raised by half the
    deficit each, the least change about the same axes that makes it physical."""
    moments, axes = np.linalg.eigh(np.asarray(inertia, dtype=np.float64))
    deficit = moments[2] - moments[0] - moments[1]
    if deficit <= 1e-9 * moments[2] + 1e-15:
        return inertia, 0.0
    raise_by = 0.5 * deficit + 1e-12 * moments[2]  # a hair over, so the sum is not below by rounding
    moments[:2] += raise_by
    return axes @ np.diag(moments) @ axes.T, float(raise_by)


def principal_frames(inertia: np.ndarray) -> np.ndarray:
    """(B, 4) quaternions xyzw of the principal axes of the (B, 3, 3) inertias (body axes), as
    MuJoCo's compiler would frame them: the identity where an inertia is diagonal (to 1e-12) or
    isotropic; where two moments are equal (an axisymmetric body), the shortest rotation of the
    z axis onto the third one's axis (turned to z >= 0), the frame of a geom given by ``fromto``;
    else the eigenvectors made right-handed."""
    from scipy.spatial.transform import Rotation  # scipy loads on first use

    frames = np.tile([0.0, 0.0, 0.0, 1.0], (len(inertia), 1))
    for b, matrix in enumerate(np.asarray(inertia, dtype=np.float64).reshape(-1, 3, 3)):
        scale = np.abs(matrix).max(initial=0.0)
        if np.abs(matrix - np.diag(np.diag(matrix))).max() <= 1e-12 * scale:
            continue
        moments, axes = np.linalg.eigh(0.5 * (matrix + matrix.T))
        equal = np.abs(np.diff(moments)) <= 1e-9 * scale
        if equal.all():
            continue
        if equal.any():
            axis = axes[:, 2] if equal[0] else axes[:, 0]
            frames[b] = quat_between((0.0, 0.0, 1.0), axis * (1.0 if axis[2] >= 0.0 else -1.0))
        else:
            axes[:, 2] *= np.sign(np.linalg.det(axes))
            frames[b] = Rotation.from_matrix(axes).as_quat()
    return frames
