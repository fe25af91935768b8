"""Surface mesh files (OBJ, STL, PLY via trimesh) for solids, collision shapes and drawing.

``load_triangles`` reads a triangle mesh and rejects, naming the file and the problem,
unreadable or empty files and vertices that are not finite or absurdly far (``check_vertices``). ``load_surface`` also rejects what cannot
bound a solid (open or non-manifold surfaces, inconsistent winding, inward-facing normals);
``load_collision_surface`` replaces such a surface by its convex hull and says so, as robot
files' meshes are often open. trimesh is imported when a file is loaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.core.meshing import TetMesh, check_solid, check_vertices, tetrahedralize

SURFACE_SUFFIXES = (".obj", ".stl", ".ply")



def load_triangles(path, scale=1.0):
    """The triangles of an OBJ, STL or PLY file as a ``trimesh.Trimesh`` (vertices in m after
    ``scale``, a number or one per axis; a mirroring scale reverses the winding), checked
    for readable, finite, in-range data but not for closure. Positions repeated across
    texture seams are merged; duplicate and zero-area faces dropped. ValueError names the
    file and what is wrong."""
    import trimesh

    path = Path(path)
    if path.suffix.lower() not in SURFACE_SUFFIXES:
        raise ValueError(f"{path}: unsupported mesh format {path.suffix!r}; expected one of {SURFACE_SUFFIXES}")
    if not path.is_file():
        raise ValueError(f"{path}: no such mesh file")
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,))
    if not (np.isfinite(scale).all() and (scale != 0.0).all()):
        raise ValueError(f"{path}: scale must be finite and non-zero, got {scale.tolist()}")
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as error:  # trimesh raises many kinds on malformed files
        raise ValueError(f"{path}: cannot be read as a {path.suffix[1:].upper()} mesh ({type(error).__name__}: "
                         f"{error})") from error
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise ValueError(f"{path}: contains no triangles")
    vertices, faces = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces)
    with np.errstate(over="ignore", invalid="ignore"):
        check_vertices(vertices * scale, str(path))  # vertices as the file numbers them
    if faces.min() < 0 or faces.max() >= len(vertices):
        bad = int(np.flatnonzero((faces < 0).any(axis=1) | (faces >= len(vertices)).any(axis=1))[0])
        raise ValueError(f"{path}: face {bad} refers to a vertex outside [0, {len(vertices)})")
    # one vertex per position, even where texture coordinates or normals split it (OBJ seams);
    # exact duplicate and zero-area faces dropped
    mesh.merge_vertices(merge_tex=True, merge_norm=True)
    mesh.update_faces(mesh.unique_faces() & mesh.nondegenerate_faces())
    mesh.remove_unreferenced_vertices()
    faces = np.asarray(mesh.faces)
    if np.prod(np.sign(scale)) < 0.0:
        faces = faces[:, ::-1]
    return trimesh.Trimesh(np.asarray(mesh.vertices, dtype=np.float64) * scale, faces, process=False)


def load_surface(path, scale=1.0):
    """``load_triangles``, which must bound a solid: closed, consistently wound,
    outward-facing (ValueError naming the file and the problem otherwise)."""
    mesh = load_triangles(path, scale)
    check_solid(np.asarray(mesh.vertices), np.asarray(mesh.faces), str(path))
    return mesh


def load_collision_surface(path, scale=1.0) -> tuple:
    """(mesh, note) for a collision shape: the file's surface when it bounds a solid (note
    None), otherwise its convex hull, with a note saying why (open, non-manifold, inward).
    ValueError when the file cannot be read or even its hull has no volume (flat)."""
    mesh = load_triangles(path, scale)
    try:
        check_solid(np.asarray(mesh.vertices), np.asarray(mesh.faces), str(path))
        return mesh, None
    except ValueError as error:
        why = str(error).removeprefix(f"{path}: ")
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # a flat hull's mass properties divide by 0
            hull = mesh.convex_hull
            volume = hull.volume
    except Exception as error:  # qhull refuses flat or degenerate point sets
        raise ValueError(f"{path}: {why}; and its convex hull cannot be built ({error})") from error
    if not volume > 1e-15:
        raise ValueError(f"{path}: {why}; and its convex hull is flat (no volume)")
    return hull, f"not a closed solid ({why.split(';')[0]}): it collides and weighs as its convex hull"


def tetrahedralize_file(path, cell_size: float, scale: float = 1.0) -> TetMesh:
    """``load_surface`` then ``tetrahedralize``: a soft-body mesh (in m) from a surface file."""
    surface = load_surface(path, scale)
    return tetrahedralize(surface.vertices, surface.faces, cell_size, str(path))
