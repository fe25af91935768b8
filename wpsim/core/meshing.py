"""Surface meshes (OBJ, STL, PLY via trimesh) checked for use as solids, and a voxel
tetrahedral mesher for soft bodies.

``load_surface`` reads a triangle mesh and rejects, naming the file and the problem, what
cannot bound a solid: unreadable or empty files, non-finite vertices, open or non-manifold
surfaces, inconsistent winding, inward-facing normals.

``tetrahedralize`` fills a closed surface with tetrahedra: the bounding box is cut into cubic
cells of side ``cell_size``; a cell belongs to the solid when its centre is inside the
surface (generalised winding number > 1/2, computed here from solid angles, so no spatial
index library is needed); each kept cell is split into 6 positively oriented tetrahedra in
the same conforming pattern as ``ModelBuilder.add_soft_grid``. The result is a staircase
approximation: its volume differs from the surface's by about half a cell layer over the
surface, which ``TetMesh.quality`` reports, with element-quality statistics. The inside
test costs cells x faces, so large surfaces are best decimated first. Every
tetrahedron has the same shape, so quality does not degrade near the boundary.

trimesh is imported when a file is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wpsim.core.geometry import TET_FACES, grid_points, grid_tetrahedra

WINDING_BUDGET = 25_000_000
"""Scalars per chunk of winding-number evaluation (bounds its memory at about 200 MB)."""
MAX_INSIDE_TESTS = 500_000_000
"""Largest cells x faces product tetrahedralize accepts (about 2.5-3.5 minutes on one core)."""
MAX_VERTEX_COORDINATE = 1.0e5
"""The largest coordinate (m, after scaling) of a mesh vertex in its own frame: 100 km, more
than any robot part or terrain needs; beyond it float32 positions are coarser than 8 mm, and a
file's units or scale must be wrong."""


def check_vertices(vertices: np.ndarray, name: str = "mesh"):
    """Raise ValueError (naming ``name`` and the first bad vertex) unless every coordinate of
    ``vertices`` (V, 3) m is finite and at most ``MAX_VERTEX_COORDINATE`` in magnitude."""
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    bad = np.flatnonzero(~(np.abs(v) <= MAX_VERTEX_COORDINATE).all(axis=1))
    if len(bad):
        what = ("is not finite" if not np.isfinite(v[bad[0]]).all() else
                f"lies beyond {MAX_VERTEX_COORDINATE:g} m of the mesh's origin (MAX_VERTEX_COORDINATE)")
        raise ValueError(f"{name}: vertex {int(bad[0])} {v[bad[0]].tolist()} m {what}; {len(bad):,} such vertices: "
                         "check the file's units and scale")


def check_solid(vertices: np.ndarray, faces: np.ndarray, name: str = "mesh"):
    """Raise ValueError (naming ``name``) unless the triangles form closed, manifold,
    consistently wound surfaces enclosing a positive volume."""
    faces = np.asarray(faces, dtype=np.int64)
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
        raise ValueError(f"{name}: faces must be a non-empty (F, 3) array of vertex indices")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ValueError(f"{name}: face vertex index out of range [0, {len(vertices)})")
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    undirected, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
    if (counts != 2).any():
        a, b = undirected[np.flatnonzero(counts != 2)[0]]
        kind = "open (a boundary edge)" if counts[counts != 2][0] == 1 else "non-manifold (an edge of 3+ faces)"
        raise ValueError(f"{name}: the surface is {kind}: {int((counts != 2).sum())} bad edges, e.g. between "
                         f"vertices {a} and {b}; a solid needs a closed surface")
    _, directed_counts = np.unique(directed, axis=0, return_counts=True)
    if (directed_counts != 1).any():
        raise ValueError(f"{name}: inconsistent winding: neighbouring faces traverse a shared edge in the same "
                         "direction")
    volume = signed_volume(vertices, faces)
    if not volume > 0.0:
        raise ValueError(f"{name}: the enclosed volume is {volume:.3e} m^3: the faces point inward (or the mesh is "
                         "flat); reverse their winding")


def signed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Volume (m^3) enclosed by a closed triangle surface, positive when faces point outward
    (summed about the centroid of the vertices, so that far from the origin nothing cancels)."""
    vertices = np.asarray(vertices, dtype=np.float64)
    v = (vertices - vertices.mean(axis=0))[np.asarray(faces)]
    return float(np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum() / 6.0)


def winding_numbers(vertices: np.ndarray, faces: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Generalised winding number of a closed surface at each point (N,): 1 inside, 0
    outside, from the sum of the triangles' signed solid angles (Van Oosterom-Strackee).
    Cost: points x faces, 0.3-0.4 us each on one core of the 2-core development machine
    (1,280- and 20,480-face spheres); memory about 200 MB."""
    tri = np.asarray(vertices, dtype=np.float64)[np.asarray(faces)]  # (F, 3, 3)
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    chunk = max(1, WINDING_BUDGET // (9 * len(tri)))
    out = np.empty(len(points))
    for start in range(0, len(points), chunk):
        p = points[start:start + chunk, None, None, :]
        r = tri[None] - p  # (n, F, 3, 3)
        length = np.linalg.norm(r, axis=-1)
        a, b, c = r[..., 0, :], r[..., 1, :], r[..., 2, :]
        la, lb, lc = length[..., 0], length[..., 1], length[..., 2]
        numerator = np.einsum("nfi,nfi->nf", a, np.cross(b, c))
        denominator = (la * lb * lc + np.einsum("nfi,nfi->nf", a, b) * lc + np.einsum("nfi,nfi->nf", b, c) * la
                       + np.einsum("nfi,nfi->nf", c, a) * lb)
        out[start:start + chunk] = np.arctan2(numerator, denominator).sum(axis=1) / (2.0 * np.pi)
    return out


def tet_quality(vertices: np.ndarray, tets: np.ndarray) -> dict:
    """Element statistics: volumes (m^3), the shape measure 6 sqrt(2) V / l_rms^3 (1 for a
    regular tetrahedron, 0 for a flat one), dihedral angles (degrees) and the cells through
    the thinnest section (``cells_through_thinnest``; bending accuracy depends on it, see
    ``wpsim bench --suite fem_convergence``)."""
    x = np.asarray(vertices, dtype=np.float64)[np.asarray(tets)]
    e1, e2, e3 = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]
    volume = np.einsum("ij,ij->i", e1, np.cross(e2, e3)) / 6.0
    edges = np.stack([e1, e2, e3, x[:, 2] - x[:, 1], x[:, 3] - x[:, 1], x[:, 3] - x[:, 2]], axis=1)
    l_rms = np.sqrt((edges**2).sum(axis=2).mean(axis=1))
    shape = 6.0 * np.sqrt(2.0) * volume / l_rms**3
    normals = np.stack([np.cross(x[:, b] - x[:, a], x[:, c] - x[:, a]) for a, b, c in TET_FACES], axis=1)
    normals /= np.linalg.norm(normals, axis=2, keepdims=True)
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    cosines = np.stack([np.einsum("ij,ij->i", normals[:, i], normals[:, j]) for i, j in pairs], axis=1)
    dihedral = np.degrees(np.pi - np.arccos(np.clip(cosines, -1.0, 1.0)))
    return {
        "tets": int(len(tets)),
        "volume_m3": float(volume.sum()),
        "min_volume_m3": float(volume.min()),
        "shape_min": float(shape.min()),
        "shape_mean": float(shape.mean()),
        "dihedral_min_deg": float(dihedral.min()),
        "dihedral_max_deg": float(dihedral.max()),
        "cells_through_thinnest": cells_through_thinnest(vertices, tets),
    }


def cells_through_thinnest(vertices, tets) -> float:
    """How many mesh cells span the thinnest section of a tet mesh: its smallest extent along
    its principal axes over the cell size (6 x the mean tet volume)^(1/3) of six-tet cells."""
    x = np.asarray(vertices, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)[:, :4]
    centred = x - x.mean(axis=0)
    axes = np.linalg.svd(centred, full_matrices=False)[2]
    thickness = np.ptp(centred @ axes.T, axis=0).min()
    edges = x[tets[:, 1:]] - x[tets[:, :1]]
    cell = np.abs(np.linalg.det(edges)).mean() ** (1.0 / 3.0)  # det = 6 x the tet's volume
    return float(thickness / cell)


@dataclass
class TetMesh:
    """A tetrahedral mesh: vertices (V, 3) in m, positively oriented tets (E, 4), the cell
    size (m) it was made with, and quality statistics (``tet_quality`` plus the volume of
    the surface it fills and the relative volume error)."""

    vertices: np.ndarray
    tets: np.ndarray
    cell_size: float
    quality: dict = field(default_factory=dict)


def tetrahedralize(vertices: np.ndarray, faces: np.ndarray, cell_size: float, name: str = "mesh") -> TetMesh:
    """Fill the closed surface (vertices (V, 3) m, faces (F, 3)) with voxel tetrahedra of
    cell side ``cell_size`` (m); see the module docstring."""
    vertices = np.asarray(vertices, dtype=np.float64)
    check_solid(vertices, faces, name)
    if not cell_size > 0.0:
        raise ValueError(f"{name}: cell_size must be > 0, got {cell_size}")
    lower, upper = vertices.min(axis=0), vertices.max(axis=0)
    counts = np.maximum(np.ceil((upper - lower) / cell_size - 1e-9).astype(int), 1)
    cells = int(np.prod(counts))
    if cells > 2_000_000 or cells * len(faces) > MAX_INSIDE_TESTS:
        raise ValueError(f"{name}: cell_size {cell_size} m gives {cells} cells x {len(faces)} faces inside tests; "
                         "use a larger cell_size or a surface with fewer faces")
    origin = 0.5 * (lower + upper) - 0.5 * counts * cell_size  # centre the grid on the surface
    centres = origin + grid_points(counts, (cell_size,) * 3) + 0.5 * cell_size
    inside = winding_numbers(vertices, faces, centres) > 0.5
    if not inside.any():
        raise ValueError(f"{name}: no cell of side {cell_size} m has its centre inside the surface; "
                         "use a smaller cell_size")
    tets = grid_tetrahedra(*counts).reshape(-1, 6, 4)[inside].reshape(-1, 4)
    used, tets = np.unique(tets, return_inverse=True)
    points = origin + grid_points(counts + 1, (cell_size,) * 3)[used]
    quality = tet_quality(points, tets.reshape(-1, 4))
    surface_volume = signed_volume(vertices, faces)
    quality.update(surface_volume_m3=surface_volume,
                   volume_relative_error=quality["volume_m3"] / surface_volume - 1.0)
    return TetMesh(points, tets.reshape(-1, 4), float(cell_size), quality)


def refine_tets(vertices: np.ndarray, tets: np.ndarray) -> tuple:
    """A tet mesh split 1 -> 8 at its edge midpoints: the same solid at half the edge length
    (vertices (V, 3) m, positively oriented tets (E, 4) -> (V + edges, 3), (8 E, 4)). Each
    tet gives four corner tets and four around the diagonal of its inner octahedron that
    joins the midpoints of the edges 01 and 23; all keep the parent's orientation."""
    vertices = np.asarray(vertices, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    edges = np.sort(np.concatenate([tets[:, [i, j]] for i, j in pairs]), axis=1)
    unique, inverse = np.unique(edges, axis=0, return_inverse=True)
    mid = len(vertices) + inverse.reshape(len(pairs), len(tets)).T  # (E, 6) midpoint vertex per edge
    points = np.concatenate([vertices, 0.5 * (vertices[unique[:, 0]] + vertices[unique[:, 1]])])
    a, b, c, d = tets.T
    ab, ac, ad, bc, bd, cd = mid.T
    children = np.stack([
        (a, ab, ac, ad), (ab, b, bc, bd), (ac, bc, c, cd), (ad, bd, cd, d),
        (ab, cd, ac, bc), (ab, cd, bc, bd), (ab, cd, bd, ad), (ab, cd, ad, ac),
    ])  # (8, 4, E)
    children = np.transpose(children, (2, 0, 1)).reshape(-1, 4)
    x = points[children]
    volume = np.einsum("ij,ij->i", x[:, 1] - x[:, 0], np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]))
    flip = volume < 0.0
    children[flip, 2], children[flip, 3] = children[flip, 3], children[flip, 2].copy()
    return points, children
