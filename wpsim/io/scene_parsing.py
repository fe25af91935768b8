"""What the URDF and MJCF importers share: safe XML parsing, attribute parsing that names the
file and element on error, rotations, and the all-or-nothing hand-over to a builder.

Scene files are data: XML is parsed with ``defusedxml`` (no entity expansion, no external
entities), nothing in a file is evaluated, and mesh paths are resolved relative to the file
and must exist.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class SceneFileError(ValueError):
    """A scene file cannot be imported; the message names the file and the element."""


@dataclass
class ImportedScene:
    """What an importer added to the builder, by the names in the file.

    bodies / joints: name -> body / joint index; actuators: one dict per actuator with
    ``name``, ``joint`` (its dof in the per-dof Control arrays is
    ``model.joint_qd_start.numpy()[joint]``), ``kind`` ("motor", "position" or "velocity")
    and ``gear``; tendon_actuators: one dict per actuator on a fixed tendon with ``name``,
    ``coupling`` (its joint coupling, whose drive it is: ``Control.coupling_target``), and the
    target length (m or rad) a control gives, ``target_per_ctrl`` * ctrl + ``target_offset``;
    timestep: the file's time step (s) if it gives one (an MJCF file always does: MuJoCo's
    default where it sets none); keyframes: name -> dict
    with "q" (joint index -> its coordinates in wpsim's layout, see ``wpsim.kernels.articulation``)
    and "qd" (joint index -> its velocities), the poses a file names (MJCF ``<key>``), in file
    order; contact_settings: the file's contact softness as ``SoftContactOptions`` keywords
    (MJCF: its geoms' most common ``solref`` / ``solimp``, MuJoCo's defaults where they give
    none, and MuJoCo's row weights), empty for other formats; unhonoured: what the file asks for that the importer does not honour or
    changes (MJCF and URDF: ``wpsim.io.mjcf_compile.Unhonoured``, with file and line), also warned
    about once.
    """

    bodies: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)
    actuators: list = field(default_factory=list)
    tendon_actuators: list = field(default_factory=list)
    timestep: float | None = None
    keyframes: dict = field(default_factory=dict)
    contact_settings: dict = field(default_factory=dict)
    unhonoured: list = field(default_factory=list)


def parse_xml(path: Path, root_tag: str, lines: dict | None = None):
    """The root element of the XML file at ``path``, which must be ``<root_tag>``; when
    ``lines`` is given it receives element -> line number (1-based) of every element."""
    from defusedxml.common import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser
    from defusedxml.ElementTree import _TreeBuilder as TreeBuilder

    if not path.is_file():
        raise SceneFileError(f"{path}: no such file")

    skipped = [0]  # blank lines dropped before an XML declaration

    class LineBuilder(TreeBuilder):
        def start(self, tag, attrs):
            element = super().start(tag, attrs)
            if lines is not None:
                lines[element] = parser.parser.CurrentLineNumber + skipped[0]
            return element

    parser = DefusedXMLParser(target=LineBuilder(), forbid_dtd=False, forbid_entities=True, forbid_external=True)
    try:
        with open(path, "rb") as stream:
            chunk = stream.read(1 << 16)
            stripped = chunk.lstrip(b" \t\r\n")
            if stripped.startswith(b"<?xml"):  # blank lines before the declaration, which parsers refuse, are dropped
                skipped[0] = chunk[:len(chunk) - len(stripped)].count(b"\n")
                chunk = stripped
            while chunk:
                parser.feed(chunk)
                chunk = stream.read(1 << 16)
        root = parser.close()
    except DefusedXmlException as error:
        raise SceneFileError(f"{path}: refused unsafe XML ({type(error).__name__})") from error
    except Exception as error:  # ParseError and encoding errors
        raise SceneFileError(f"{path}: malformed XML ({error})") from error
    if root.tag != root_tag:
        raise SceneFileError(f"{path}: the root element is <{root.tag}>, expected <{root_tag}>")
    return root


def describe(element) -> str:
    """``<tag name="...">`` for messages."""
    name = element.get("name")
    return f"<{element.tag} name=\"{name}\">" if name else f"<{element.tag}>"


def floats(path: Path, element, attribute: str, count: int | tuple, default=None, text: str | None = None,
           required: bool = False):
    """Attribute ``attribute`` of ``element`` (or ``text`` when given, e.g. a default) as
    ``count`` finite floats (``count`` may be a tuple of accepted counts); ``default`` when
    absent, or with ``required`` a ``SceneFileError`` naming it."""
    text = element.get(attribute) if text is None else text
    if text is None and required:
        raise SceneFileError(f"{path}: {describe(element)} needs {attribute}")
    if text is None:
        return None if default is None else np.asarray(default, dtype=np.float64)
    try:
        values = np.array([float(v) for v in text.split()], dtype=np.float64)
    except ValueError:
        raise SceneFileError(f"{path}: {describe(element)} {attribute}=\"{text}\" is not a list of numbers") from None
    counts = count if isinstance(count, tuple) else (count,)
    if len(values) not in counts or not np.isfinite(values).all():
        want = " or ".join(str(c) for c in counts)
        raise SceneFileError(f"{path}: {describe(element)} {attribute}=\"{text}\" must be {want} finite numbers")
    return values


def quat_from_euler(angles, sequence: str) -> np.ndarray:
    """Quaternion (x, y, z, w) of Euler angles (rad); ``sequence`` in scipy's notation
    (lower case: extrinsic, fixed axes; upper case: intrinsic, moving axes)."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler(sequence, angles).as_quat()


def resolve_mesh(path: Path, element, filename: str, directories) -> Path:
    """A mesh file named in the scene, relative to the first of ``directories`` (a Path or a
    sequence, tried in order) that holds it; it must exist and must not be a URL."""
    if "://" in filename:
        raise SceneFileError(f"{path}: {describe(element)} mesh \"{filename}\" is a URL; only local files are read")
    single = isinstance(directories, (str, os.PathLike))
    tried = [(Path(d) / filename).resolve() for d in ([directories] if single else directories)]
    found = next((candidate for candidate in tried if candidate.is_file()), None)
    if found is None:
        raise SceneFileError(f"{path}: {describe(element)} mesh file \"{filename}\" not found (looked for "
                             f"{', '.join(str(t) for t in dict.fromkeys(tried))})")
    return found


def load_mesh(path: Path, element, mesh_path: Path, scale) -> tuple:
    """(vertices (V, 3) m, faces (F, 3), note) of a mesh file for a collision shape, scaled
    per axis: its surface, or its convex hull when the surface does not bound a solid (note
    then says why; None otherwise). Errors name the scene file and element."""
    from wpsim.io.mesh_files import load_collision_surface

    try:
        mesh, note = load_collision_surface(mesh_path, scale)
    except ValueError as error:
        raise SceneFileError(f"{path}: {describe(element)}: {error}") from error
    return np.asarray(mesh.vertices), np.asarray(mesh.faces), note


def add_all_or_nothing(builder, build):
    """Run ``build(builder)``; if it raises, remove everything it added."""
    with builder._all_or_nothing():
        return build(builder)


MUJOCO_SOLREF = (0.02, 1.0)
"""MuJoCo's default solref: time constant 0.02 s, damping ratio 1."""
MUJOCO_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
"""MuJoCo's default solimp: dmin, dmax, width (m), midpoint, power."""
MUJOCO_ROTATIONAL_FRICTION = (0.005, 0.0001)
"""MuJoCo's default torsional and rolling friction of a geom (m): its friction[1:3]."""
IMPEDANCE_RANGE = (1e-4, 0.9999)
"""The impedances (solimp dmin, dmax, midpoint) MuJoCo clips a file's values to."""


def clamped_solimp(solimp) -> tuple:
    """(dmin, dmax, width m, midpoint, power) of an MJCF solimp as MuJoCo uses it: dmin, dmax
    and the midpoint clipped to ``IMPEDANCE_RANGE``, width at least 1e-15 m, power at least 1
    (so a file's dmax of 1 is a contact as hard as MuJoCo makes it)."""
    low, high = IMPEDANCE_RANGE
    dmin, dmax, width, midpoint, power = (float(v) for v in solimp)
    return (min(max(dmin, low), high), min(max(dmax, low), high), max(width, 1e-15), min(max(midpoint, low), high),
            max(power, 1.0))
