"""MJCF front end: the steps MuJoCo's compiler takes before a model is built, done on the
XML tree so that ``wpsim.io.mjcf`` reads plain, explicit elements.

``load_mjcf`` parses a file (``defusedxml``) and its ``<include file>`` elements (paths
relative to the including file, which must exist; cycles are refused), merges ``<default>``
classes into the elements that use them (``class``, inherited through nested defaults,
and ``childclass`` of bodies and frames), flattens ``<frame>`` elements into their
children's poses and records, for every element, the file and line it came from; elements
nested deeper than ``MAX_NESTING`` (includes too) are refused, naming the element. Before
the merge it lists each element and attribute that the importer does not honour
(``Unhonoured``), so that nothing a file asks for is lost silently. Rendering-only
elements and attributes (lights, cameras, textures, materials, colours, sites, groups),
``<custom>`` data and empty elements change no simulated quantity and are not listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wpsim.core.geometry import quat_between, quat_to_matrix
from wpsim.io.scene_parsing import SceneFileError, describe, floats, parse_xml, quat_from_euler

ANY = None
_POSE = {"pos": ANY, "quat": ANY, "euler": ANY, "axisangle": ANY, "xyaxes": ANY, "zaxis": ANY}
_CONTROL_RANGE = {"ctrllimited": ANY, "ctrlrange": ANY, "forcelimited": ANY, "forcerange": ANY}
HONOURED = {
    "mujoco": {"model": ANY},
    "compiler": {"angle": ANY, "eulerseq": ANY, "meshdir": ANY, "autolimits": ANY, "coordinate": ANY,
                 "inertiafromgeom": ANY, "settotalmass": ANY},
    "option": {"timestep": ANY, "gravity": ANY, "integrator": ("Euler", "implicitfast"), "cone": ("pyramidal",),
               "impratio": ANY, "density": ANY, "viscosity": ANY, "wind": ANY},
    "option/flag": {"eulerdamp": ANY},
    "default": {"class": ANY},
    "asset": {},
    "mesh": {"name": ANY, "file": ANY, "scale": ANY, "class": ANY},
    "worldbody": {},
    "body": {"name": ANY, "childclass": ANY, **_POSE},
    "frame": {"name": ANY, "childclass": ANY, **_POSE},
    "inertial": {"mass": ANY, "diaginertia": ANY, "fullinertia": ANY, **_POSE},
    "joint": {"name": ANY, "class": ANY, "type": ANY, "pos": ANY, "axis": ANY, "range": ANY, "limited": ANY,
              "damping": ANY, "armature": ANY, "stiffness": ANY, "ref": ANY, "springref": ANY,
              "frictionloss": ANY, "actuatorfrcrange": ANY, "actuatorfrclimited": ANY, "solreflimit": ANY,
              "solimplimit": ANY, "solreffriction": ANY, "solimpfriction": ANY},
    "freejoint": {"name": ANY},
    "geom": {"name": ANY, "class": ANY, "type": ANY, "size": ANY, "fromto": ANY, "density": ANY, "mass": ANY,
             "solref": ANY, "solimp": ANY, "solmix": ANY, "priority": ANY,
             "friction": ANY, "contype": ANY, "conaffinity": ANY, "mesh": ANY, "condim": ANY, "margin": ANY, "gap": ANY,
             **_POSE},
    "actuator": {},
    "motor": {"name": ANY, "class": ANY, "joint": ANY, "tendon": ANY, "gear": ANY, **_CONTROL_RANGE},
    "position": {"name": ANY, "class": ANY, "joint": ANY, "tendon": ANY, "gear": ANY, "kp": ANY, "kv": ANY,
                 "inheritrange": ANY,
                 **_CONTROL_RANGE},
    "general": {"name": ANY, "class": ANY, "joint": ANY, "tendon": ANY, "gear": ANY, "gaintype": ANY, "biastype": ANY,
                "dyntype": ANY, "gainprm": ANY, "biasprm": ANY, **_CONTROL_RANGE},
    "contact": {},
    "exclude": {"name": ANY, "body1": ANY, "body2": ANY},
    "velocity": {"name": ANY, "class": ANY, "joint": ANY, "tendon": ANY, "gear": ANY, "kv": ANY, **_CONTROL_RANGE},
    "equality": {},
    "equality/joint": {"name": ANY, "class": ANY, "joint1": ANY, "joint2": ANY, "polycoef": ANY, "solref": ANY,
                       "solimp": ANY, "active": ("true",)},
    "equality/connect": {"name": ANY, "class": ANY, "body1": ANY, "body2": ANY, "anchor": ANY, "solref": ANY,
                         "solimp": ANY, "active": ("true",)},
    "equality/weld": {"name": ANY, "class": ANY, "body1": ANY, "body2": ANY, "anchor": ANY, "relpose": ANY,
                      "torquescale": ANY, "solref": ANY, "solimp": ANY, "active": ("true",)},
    "tendon": {},
    "fixed": {"name": ANY, "class": ANY, "stiffness": ANY, "damping": ANY, "springlength": ANY},
    "fixed/joint": {"joint": ANY, "coef": ANY},
    "spatial": {"name": ANY, "class": ANY, "stiffness": ANY, "damping": ANY, "springlength": ANY, "limited": ANY,
                "range": ANY, "frictionloss": ANY, "armature": ANY, "width": ANY},
    "default/tendon": {"stiffness": ANY, "damping": ANY, "springlength": ANY, "width": ANY},
    "spatial/site": {"site": ANY},
    "spatial/geom": {"geom": ANY, "sidesite": ANY},
    "spatial/pulley": {"divisor": ANY},
    "keyframe": {},
    "key": {"name": ANY, "qpos": ANY, "qvel": ANY},
}
"""Element (or "parent/element" where the parent changes its meaning) -> attribute -> the
values the importer honours (ANY: every value)."""
RENDERING_TAGS = {"light", "camera", "texture", "material", "visual", "site", "statistic", "size", "skin", "custom"}
RENDERING_ATTRIBUTES = {"rgba", "material", "group", "user", "texture", "hfield_rgba"}
DEFAULTABLE = {"joint", "geom", "mesh", "motor", "position", "velocity", "site", "camera", "light", "general"}
MAX_NESTING = 500
"""The deepest element nesting read, includes resolved (``<mujoco><worldbody>``, then 497
nested bodies with their geoms): the passes that resolve defaults and frames and add bodies
recurse once per level, and stay well within Python's recursion limit (1,000) at this depth."""
_BODY_ITEMS = ("body", "geom", "site", "camera", "light", "frame")


@dataclass(frozen=True)
class Unhonoured:
    """An element or attribute of a scene file that the importer does not honour."""

    file: str
    line: int
    element: str
    attribute: str | None = None
    value: str | None = None
    note: str = "is not honoured"

    def __str__(self) -> str:
        what = f"{self.element} {self.attribute}=\"{self.value}\"" if self.attribute else f"{self.element} element"
        return f"{self.file}:{self.line}: {what} {self.note}"


class MjcfTree:
    """A parsed MJCF file after includes, defaults and frames: ``root``, ``lines`` (element ->
    (file, line)) and ``unhonoured`` (list of ``Unhonoured``)."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: dict = {}
        self.root = self._parse(path, ())
        self._refuse_deep_nesting()
        self._merge_sections()
        self.unhonoured: list = []
        self._report(self.root, inside_default=False)
        compiler = self.root.find("compiler")
        compiler = {} if compiler is None else compiler.attrib
        if compiler.get("coordinate", "local") != "local":
            self.fail(self.root.find("compiler"), "only coordinate=\"local\" is supported (as in MuJoCo 2.3 and later)")
        self.degrees = compiler.get("angle", "degree") == "degree"
        self.eulerseq = compiler.get("eulerseq", "xyz")
        self._merge_defaults()
        for world in self.root.findall("worldbody"):
            self._flatten_frames(world)

    # -------------------------------------------------------------- includes
    def _parse(self, path: Path, chain: tuple):
        lines: dict = {}
        if len(chain) >= MAX_NESTING:
            raise SceneFileError(f"{chain[-1]}: includes nested more than {MAX_NESTING} files deep (at {path.name})")
        root = parse_xml(path, "mujoco", lines)
        self.lines.update({element: (path, line) for element, line in lines.items()})
        for parent in list(root.iter()):
            for index, include in reversed(list(enumerate(parent))):
                if include.tag != "include":
                    continue
                name = include.get("file")
                if not name or "://" in name:
                    self.fail(include, "needs a local file")
                target = (path.parent / name).resolve()
                if target in chain + (path.resolve(),):
                    self.fail(include, f"file \"{name}\" closes an include cycle")
                if not target.is_file():
                    self.fail(include, f"included file \"{name}\" not found ({target})")
                parent.remove(include)
                for k, child in enumerate(self._parse(target, chain + (path.resolve(),))):
                    parent.insert(index + k, child)
        return root

    def _refuse_deep_nesting(self):
        """Refuse elements nested deeper than ``MAX_NESTING`` (walked without recursion)."""
        stack = [(self.root, 1)]
        while stack:
            element, depth = stack.pop()
            if depth > MAX_NESTING:
                self.fail(element, f"nested {depth} elements deep; at most {MAX_NESTING} are read (MAX_NESTING)")
            stack.extend((child, depth + 1) for child in element)

    def _merge_sections(self):
        """Fold repeated top-level sections (a file and its includes may each give a
        <worldbody>, <asset>, <actuator>, ...) into the first of each kind, as MuJoCo reads
        them: children in document order, later attributes over earlier ones."""
        first: dict = {}
        for section in list(self.root):
            if section.tag not in first:
                first[section.tag] = section
                continue
            kept = first[section.tag]
            kept.attrib.update(section.attrib)
            kept.extend(list(section))
            self.root.remove(section)

    def numbers(self, element, attribute: str, count, default=None):
        """``floats`` of an element's attribute; errors name its file, element and line."""
        path, line = self.lines.get(element, (self.path, 0))
        try:
            return floats(path, element, attribute, count, default)
        except SceneFileError as error:
            raise SceneFileError(f"{error} (line {line})") from None

    def unhonoured_here(self, element, attribute=None, value=None, note: str = "is not honoured") -> Unhonoured:
        """An ``Unhonoured`` record at ``element``'s file and line."""
        path, line = self.lines.get(element, (self.path, 0))
        return Unhonoured(str(path), line, f"<{element.tag}>", attribute, value, note)

    def fail(self, element, message: str):
        """Raise a ``SceneFileError`` naming the element's file, the element and its line."""
        path, line = self.lines.get(element, (self.path, 0))
        raise SceneFileError(f"{path}: {describe(element)}: {message} (line {line})")

    # -------------------------------------------------------------- reporting
    def _report(self, element, inside_default: bool, parent: str = ""):
        if element.tag in RENDERING_TAGS or (not element.attrib and len(element) == 0):
            return
        honoured = HONOURED.get(f"{parent}/{element.tag}", HONOURED.get(element.tag))
        if honoured is None and not (inside_default and element.tag in DEFAULTABLE):
            self.unhonoured.append(self.unhonoured_here(element))
            return
        honoured = honoured or {}
        for name, value in element.attrib.items():
            if name in RENDERING_ATTRIBUTES or (name in honoured and _accepts(value, honoured[name])):
                continue
            self.unhonoured.append(self.unhonoured_here(element, name, value))
        for child in element:
            self._report(child, inside_default or element.tag == "default", element.tag)

    # -------------------------------------------------------------- defaults
    def _merge_defaults(self):
        classes: dict = {}

        def collect(default, inherited: dict, top: bool):
            name = default.get("class", "main" if top else None)
            if name is None:
                self.fail(default, "a nested <default> needs a class")
            if name in classes and not top:
                self.fail(default, f"a second default class \"{name}\"")
            own = {tag: dict(attrs) for tag, attrs in inherited.items()}
            for child in default:
                if child.tag != "default":
                    own.setdefault(child.tag, {}).update(child.attrib)
            classes[name] = own
            for child in default.findall("default"):
                collect(child, own, top=False)

        for default in self.root.findall("default"):
            collect(default, classes.get("main", {}), top=True)
        classes.setdefault("main", {})

        def apply(element, active: str, tag: str | None = None):
            name = element.get("class", active)
            if name not in classes:
                self.fail(element, f"unknown default class \"{name}\"")
            merged = dict(classes[name].get(tag or element.tag, {}))
            merged.update(element.attrib)
            element.attrib.clear()
            element.attrib.update(merged)

        def walk(element, active: str):
            for child in element:
                if child.tag in ("body", "frame"):
                    walk(child, child.get("childclass", active))
                elif child.tag in DEFAULTABLE:
                    apply(child, active)

        for world in self.root.findall("worldbody"):
            walk(world, "main")
        for section in ("actuator", "asset"):
            for group in self.root.findall(section):
                for child in group:
                    if child.tag in DEFAULTABLE:
                        apply(child, "main")
        for group in self.root.findall("tendon"):  # <default><tendon> sets both kinds of tendon
            for child in group:
                if child.tag in ("spatial", "fixed"):
                    apply(child, "main", "tendon")

    # -------------------------------------------------------------- orientation and frames
    def angle(self, value: float) -> float:
        """An angle of the file in rad (``<compiler angle>``)."""
        return math.radians(value) if self.degrees else value

    def rotation(self, element) -> np.ndarray:
        """Quaternion (x, y, z, w) of an element's quat / axisangle / euler / xyaxes / zaxis
        (identity if none); more than one is an error, as in MuJoCo."""
        given = [name for name in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if element.get(name) is not None]
        if len(given) > 1:
            self.fail(element, f"gives its orientation twice ({', '.join(given)})")
        if not given:
            return np.array([0.0, 0.0, 0.0, 1.0])
        kind = given[0]
        values = self.numbers(element, kind, {"quat": 4, "axisangle": 4, "euler": 3, "xyaxes": 6, "zaxis": 3}[kind])
        if kind == "euler":
            sequence = "".join(c.upper() if c.islower() else c.lower() for c in self.eulerseq)
            return quat_from_euler([self.angle(a) for a in values], sequence)
        # the part that must not vanish: a quaternion, an axis, the z axis, the x-y normal
        vector = values if kind == "quat" else np.cross(values[:3], values[3:]) if kind == "xyaxes" else values[:3]
        if np.linalg.norm(vector) < 1e-12:
            self.fail(element, f"{kind}=\"{element.get(kind)}\" is degenerate")
        if kind == "quat":
            w, x, y, z = values / np.linalg.norm(values)
            return np.array([x, y, z, w])
        if kind == "axisangle":
            half = 0.5 * self.angle(values[3])
            return np.concatenate([values[:3] / np.linalg.norm(values[:3]) * math.sin(half), [math.cos(half)]])
        if kind == "zaxis":
            return quat_between((0.0, 0.0, 1.0), vector / np.linalg.norm(vector))
        from scipy.spatial.transform import Rotation

        x = values[:3] / np.linalg.norm(values[:3])
        y = values[3:] - x * (x @ values[3:])
        y /= np.linalg.norm(y)
        return Rotation.from_matrix(np.stack([x, y, np.cross(x, y)], axis=1)).as_quat()

    def _flatten_frames(self, element):
        """Replace each <frame> below ``element`` by its children, moved by the frame's pose."""
        for child in list(element):
            if child.tag != "frame":
                self._flatten_frames(child)
                continue
            self._flatten_frames(child)
            if child.find("joint") is not None or child.find("freejoint") is not None:
                self.fail(child, "a <frame> cannot hold joints")
            pos = self.numbers(child, "pos", 3, (0.0, 0.0, 0.0))
            rot = self.rotation(child)
            index = list(element).index(child)
            element.remove(child)
            for k, item in enumerate(child):
                if item.tag in _BODY_ITEMS:
                    self._move(item, pos, rot)
                element.insert(index + k, item)

    def _move(self, element, pos: np.ndarray, rot: np.ndarray):
        """Pre-multiply an element's pose (pos, orientation, fromto) by (pos, rot)."""
        from scipy.spatial.transform import Rotation

        R = quat_to_matrix(rot)
        fromto = self.numbers(element, "fromto", 6)
        if fromto is not None:
            moved = np.concatenate([pos + R @ fromto[:3], pos + R @ fromto[3:]])
            element.set("fromto", " ".join(repr(float(v)) for v in moved))
            return
        own = self.rotation(element)
        x, y, z, w = (Rotation.from_quat(rot) * Rotation.from_quat(own)).as_quat()
        for name in ("quat", "axisangle", "euler", "xyaxes", "zaxis"):
            element.attrib.pop(name, None)
        element.set("quat", " ".join(repr(float(v)) for v in (w, x, y, z)))
        element.set("pos", " ".join(repr(float(v)) for v in pos + R @ self.numbers(element, "pos", 3, (0, 0, 0))))


def _accepts(value: str, accepted) -> bool:
    """Whether ``value`` is among ``accepted`` (ANY: every value), numerically for numbers."""
    if accepted is ANY or value.strip() in accepted:
        return True
    try:
        return any(float(value) == float(a) for a in accepted if a[0].isdigit())
    except ValueError:
        return False


def load_mjcf(path) -> MjcfTree:
    """The MJCF file at ``path`` with includes, defaults and frames resolved (``MjcfTree``)."""
    return MjcfTree(Path(path))
