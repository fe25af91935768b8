"""Surface mesh files (OBJ, STL, PLY via trimesh) checked for use as solids.

``load_surface`` reads a triangle mesh and rejects, naming the file and the problem, what
cannot bound a solid: unreadable or empty files, non-finite vertices, open or non-manifold
surfaces, inconsistent winding, inward-facing normals. trimesh is imported when a file is
loaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.core.meshing import TetMesh, check_solid, tetrahedralize

SURFACE_SUFFIXES = (".obj", ".stl", ".ply")



def load_surface(path, scale: float = 1.0):
    """A closed, consistently wound, outward-facing triangle mesh (``trimesh.Trimesh``) read
    from an OBJ, STL or PLY file, vertices multiplied by ``scale`` (to m). ValueError names
    the file and what is wrong."""
    import trimesh

    path = Path(path)
    if path.suffix.lower() not in SURFACE_SUFFIXES:
        raise ValueError(f"{path}: unsupported mesh format {path.suffix!r}; expected one of {SURFACE_SUFFIXES}")
    if not path.is_file():
        raise ValueError(f"{path}: no such mesh file")
    if not scale > 0.0:
        raise ValueError(f"{path}: scale must be > 0, got {scale}")
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as error:  # trimesh raises many kinds on malformed files
        raise ValueError(f"{path}: cannot be read as a {path.suffix[1:].upper()} mesh ({type(error).__name__}: "
                         f"{error})") from error
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise ValueError(f"{path}: contains no triangles")
    vertices, faces = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces)
    if not np.isfinite(vertices).all():
        bad = int(np.flatnonzero(~np.isfinite(vertices).all(axis=1))[0])
        raise ValueError(f"{path}: vertex {bad} is not finite")
    if faces.min() < 0 or faces.max() >= len(vertices):
        bad = int(np.flatnonzero((faces < 0).any(axis=1) | (faces >= len(vertices)).any(axis=1))[0])
        raise ValueError(f"{path}: face {bad} refers to a vertex outside [0, {len(vertices)})")
    # one vertex per position, even where texture coordinates or normals split it (OBJ seams);
    # exact duplicate and zero-area faces dropped
    mesh.merge_vertices(merge_tex=True, merge_norm=True)
    mesh.update_faces(mesh.unique_faces() & mesh.nondegenerate_faces())
    mesh.remove_unreferenced_vertices()
    check_solid(np.asarray(mesh.vertices), np.asarray(mesh.faces), str(path))
    return trimesh.Trimesh(np.asarray(mesh.vertices, dtype=np.float64) * scale, mesh.faces, process=False)



def tetrahedralize_file(path, cell_size: float, scale: float = 1.0) -> TetMesh:
    """``load_surface`` then ``tetrahedralize``: a soft-body mesh (in m) from a surface file."""
    surface = load_surface(path, scale)
    return tetrahedralize(surface.vertices, surface.faces, cell_size, str(path))
