"""Regenerate the mesh assets of this folder (run from the repository root:
``python assets/make_assets.py``). Every file is made here from trimesh primitives and
wpsim's own mesher, so the assets are this project's own work."""

from pathlib import Path

import numpy as np
import trimesh

from wpsim.core.meshing import tetrahedralize
from wpsim.io.files import atomic_write

HERE = Path(__file__).resolve().parent
FINGER_RADIUS, FINGER_LENGTH, FINGER_CELL = 0.008, 0.06, 0.004  # m


def finger_surface() -> trimesh.Trimesh:
    """A round-tipped soft finger along +x: a capsule of radius 8 mm, 60 mm long overall,
    its base end at x = 0."""
    capsule = trimesh.creation.capsule(height=FINGER_LENGTH - 2 * FINGER_RADIUS, radius=FINGER_RADIUS, count=[16, 16])
    capsule.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
    capsule.apply_translation([-capsule.bounds[0, 0], 0.0, 0.0])
    return capsule


def main():
    """Write the primitive meshes, the finger surface and its tetrahedra."""
    meshes = {
        "cube.obj": trimesh.creation.box(extents=(0.1, 0.1, 0.1)),
        "icosphere.stl": trimesh.creation.icosphere(subdivisions=2, radius=0.05),
        "cylinder.ply": trimesh.creation.cylinder(radius=0.03, height=0.1, sections=24),
        "soft_finger.obj": finger_surface(),
    }
    for name, mesh in meshes.items():
        atomic_write(HERE / name, lambda tmp, mesh=mesh: mesh.export(tmp))
    finger = meshes["soft_finger.obj"]
    tets = tetrahedralize(finger.vertices, finger.faces, FINGER_CELL, "soft_finger.obj")
    atomic_write(HERE / "soft_finger_tets.npz",
                 lambda tmp: np.savez(tmp, vertices=tets.vertices, tets=tets.tets))
    print({name: len(mesh.faces) for name, mesh in meshes.items()}, tets.quality)


if __name__ == "__main__":
    main()
