"""Robot files of any supported format, chosen by extension: URDF, MJCF or USD with
UsdPhysics."""

from __future__ import annotations

from pathlib import Path

ROBOT_SUFFIXES = (".urdf", ".xml", ".mjcf", ".usd", ".usda", ".usdc")


def is_robot_file(path) -> bool:
    """Whether ``path`` names a rigid-body scene (URDF, MJCF or USD; a ``.xacro`` file counts,
    so that importing it explains how to expand it)."""
    return Path(path).suffix.lower() in (*ROBOT_SUFFIXES, ".xacro")


def import_robot(path, floating: bool = False, builder=None, package_paths=None) -> tuple:
    """(ModelBuilder, ImportedScene) of a URDF (``floating``: free root links;
    ``package_paths``: where its ``package://`` meshes are looked up first), MJCF or
    UsdPhysics file, added to ``builder`` (new if None). A ``.xacro`` file is refused with
    the command that expands it."""
    from wpsim.io.mjcf import import_mjcf
    from wpsim.io.urdf import import_urdf
    from wpsim.io.usd_physics import import_usd

    suffix = Path(path).suffix.lower()
    if suffix == ".xacro":
        return import_urdf(path, builder, floating=floating, package_paths=package_paths)  # refuses it, explaining
    if suffix not in ROBOT_SUFFIXES:
        raise ValueError(f"{path}: not a robot file; expected one of {', '.join(ROBOT_SUFFIXES)}")
    if suffix == ".urdf":
        return import_urdf(path, builder, floating=floating, package_paths=package_paths)
    if suffix in (".usd", ".usda", ".usdc"):
        return import_usd(path, builder)
    return import_mjcf(path, builder)
