"""Numbers in URDF files that pybullet reads although they are malformed: a comma after a number
("0.07, 0, -0.69"), a trailing dot ("-1.57."), ROS's ``$(optenv NAME default)`` (whose pieces
pybullet reads as 0, 0 and the default's first numbers), more numbers than the attribute takes
(the first ones). ``pybullet_numbers`` rewrites them as pybullet reads them before the importer
parses the file, and lists each in ``ImportedScene.unhonoured``."""

from __future__ import annotations

import math
import re
from pathlib import Path

from wpsim.io.mjcf_compile import Unhonoured
from wpsim.io.scene_parsing import describe

NUMBERS = {
    "origin": {"xyz": 3, "rpy": 3}, "axis": {"xyz": 3}, "mesh": {"scale": 3}, "box": {"size": 3},
    "sphere": {"radius": 1}, "cylinder": {"radius": 1, "length": 1}, "capsule": {"radius": 1, "length": 1},
    "plane": {"normal": 3}, "mass": {"value": 1}, "limit": {"lower": 1, "upper": 1, "effort": 1, "velocity": 1},
    "dynamics": {"damping": 1, "friction": 1},
    "inertia": {name: 1 for name in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")},
}
"""Element -> numeric attribute -> how many numbers it takes."""

NUMBER_PREFIX = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def pybullet_numbers(root, path: Path, lines: dict) -> list:
    """Rewrite every numeric attribute of the URDF tree ``root`` that a strict reading refuses
    but pybullet reads, as pybullet reads it; returns an ``Unhonoured`` record of each (file,
    line, element, attribute, the text as written, how it was read). What pybullet would
    refuse too is left for the importer to refuse."""
    found = []
    for element in root.iter():
        for attribute, count in NUMBERS.get(element.tag, {}).items():
            text = element.get(attribute)
            if text is None or strict(text, count):
                continue
            values, how = lenient(text, count)
            if values is None:
                continue
            element.set(attribute, " ".join(repr(v) for v in values))
            found.append(Unhonoured(str(path), lines.get(element, 0), describe(element), attribute, text,
                                    f"is read as pybullet reads it: {how}, {' '.join(f'{v:g}' for v in values)}"))
    return found


def strict(text: str, count: int) -> bool:
    """Whether ``text`` is exactly ``count`` finite numbers separated by white space."""
    try:
        values = [float(token) for token in text.split()]
    except ValueError:
        return False
    return len(values) == count and all(math.isfinite(v) for v in values)


def lenient(text: str, count: int) -> tuple:
    """(the ``count`` numbers pybullet reads in ``text``, how), or (None, None) where it reads
    fewer or one that is not finite: pybullet splits at white space, reads each piece's leading
    number as C's atof does (0 where there is none) and takes the first ``count``."""
    hows, values = [], []
    pieces = text.split()
    for piece in pieces[:count]:
        if piece.lower().lstrip("+-").startswith(("inf", "nan")):  # atof reads them: not finite, refused
            return None, None
        prefix = NUMBER_PREFIX.match(piece)
        number = prefix.group(0) if prefix else "0"
        if number != piece:
            hows.append(f"\"{piece}\" as {number}")
        values.append(float(number))
    if len(pieces) > count:
        hows.append(f"the first {count} of its {len(pieces)} numbers")
    if len(values) != count or not all(math.isfinite(v) for v in values):
        return None, None
    return values, ", ".join(hows)
