"""Files and pictures: MJCF, URDF and UsdPhysics import, USD export of scenes and rollouts,
mesh files, JSON and plots written atomically.

The modules are imported on first use (``wpsim.io.mjcf`` works after ``import wpsim``), so
that ``pxr``, ``trimesh`` and ``matplotlib`` load only when a file is read or written.
"""

import importlib

MODULES = ("files", "mesh_files", "mjcf", "plots", "scene_parsing", "urdf", "usd_export", "usd_physics")

__all__ = list(MODULES)


def __getattr__(name: str):
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(MODULES))
