"""Files and pictures: MJCF, URDF and UsdPhysics import, USD export of scenes and rollouts,
mesh files, JSON and plots written atomically, and where the installed packages of robot
files are (``packages``).

The modules are imported on first use (``wpsim.io.mjcf`` works after ``import wpsim``), so
that ``pxr``, ``trimesh`` and ``matplotlib`` load only when a file is read or written.
"""

from wpsim.core.lazy import lazy_submodules

__all__ = [
    "files", "measurements", "mesh_files", "mjcf", "packages", "plots", "progress", "robots", "scene_parsing", "urdf", "usd_export",
    "usd_physics",
]
__getattr__, __dir__ = lazy_submodules(__name__, tuple(__all__), globals())
