"""The files a scene reads besides itself (MJCF includes and meshes, URDF meshes, USD
sublayers, references, payloads and assets), so that the command line counts them as inputs
that no output may replace (``wpsim.apps.run_scene.check_outputs``).

XML scenes are read by Python code, so the files are those opened while the importer runs
(``files_read``, through an audit hook: the importers need not report them); USD layers are
opened by ``pxr``'s C++ code, so a USD scene's are USD's own list of its dependencies.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
from pathlib import Path

from wpsim.io.robots import is_robot_file

USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")
_MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes()) + (".zip", ".pth")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

_recorders: list = []  # the lists that ``files_read`` blocks are filling, innermost last
_hooked: list = []


def _audit(event: str, args: tuple):
    """Audit hook: add a file opened for reading to the open ``files_read`` recorders."""
    if event != "open" or not _recorders:
        return
    path, mode, flags = args
    if isinstance(path, int) or path is None:
        return
    if isinstance(mode, str) and any(c in mode for c in "wax+") or not isinstance(mode, str) and flags & _WRITE_FLAGS:
        return
    path = os.fsdecode(path)
    if path.endswith(_MODULE_SUFFIXES) or ".dist-info" in path:  # Python loading its modules
        return
    for recorder in _recorders:
        recorder.append(path)


@contextlib.contextmanager
def files_read():
    """A list filled with the paths of the files that Python code opens for reading inside the
    block (modules excluded), in order, without repeats once the block ends."""
    if not _hooked:  # an audit hook cannot be removed: one for the process, idle outside the blocks
        sys.addaudithook(_audit)
        _hooked.append(True)
    found: list = []
    _recorders.append(found)
    try:
        yield found
    finally:
        _recorders.remove(found)
        unique = list(dict.fromkeys(str(Path(p).absolute()) for p in found))
        found[:] = [Path(p) for p in unique if os.path.isfile(p)]


def usd_dependencies(path) -> list:
    """The files a USD stage reads: its layers (sublayers, references, payloads, recursively)
    and the assets they name, as USD resolves them; [] if ``path`` is not a USD file or USD
    cannot read it."""
    if Path(path).suffix.lower() not in USD_SUFFIXES:
        return []
    from pxr import UsdUtils

    try:
        layers, assets, _ = UsdUtils.ComputeAllDependencies(str(path))
    except Exception:  # pxr raises Tf errors for a file that is not a stage
        return []
    found = [layer.realPath for layer in layers if layer.realPath] + [str(asset) for asset in assets]
    return [Path(p) for p in dict.fromkeys(found) if os.path.isfile(p)]


def scene_inputs(path, floating: bool = False) -> list:
    """Every file the robot or USD scene ``path`` reads (absolute), ``path`` first: a robot file is
    imported to find them (its errors raise here, as ``wpsim.io.robots.import_robot``'s), a
    USD stage asks USD; any other file is its only input."""
    from wpsim.io.robots import import_robot

    path = Path(path)
    found = [path, *usd_dependencies(path)]
    if is_robot_file(path) and path.suffix.lower() not in USD_SUFFIXES:
        with files_read() as read:
            import_robot(path, floating=floating)
        found += read
    return [Path(p) for p in dict.fromkeys(str(Path(p).absolute()) for p in found)]
