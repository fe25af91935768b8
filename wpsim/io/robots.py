"""Robot files of any supported format, chosen by extension: URDF, MJCF or USD with
UsdPhysics."""

from __future__ import annotations

from pathlib import Path

ROBOT_SUFFIXES = (".urdf", ".xml", ".mjcf", ".usd", ".usda", ".usdc")


def is_robot_file(path) -> bool:
    """Whether ``path`` names a rigid-body scene (URDF, MJCF or USD)."""
    return Path(path).suffix.lower() in ROBOT_SUFFIXES


def import_robot(path, floating: bool = False, builder=None) -> tuple:
    """(ModelBuilder, ImportedScene) of a URDF (``floating``: free root links), MJCF or
    UsdPhysics file, added to ``builder`` (new if None)."""
    from wpsim.io.mjcf import import_mjcf
    from wpsim.io.urdf import import_urdf
    from wpsim.io.usd_physics import import_usd

    suffix = Path(path).suffix.lower()
    if suffix not in ROBOT_SUFFIXES:
        raise ValueError(f"{path}: not a robot file; expected one of {', '.join(ROBOT_SUFFIXES)}")
    if suffix == ".urdf":
        return import_urdf(path, builder, floating=floating)
    if suffix in (".usd", ".usda", ".usdc"):
        return import_usd(path, builder)
    return import_mjcf(path, builder)
