"""Fuzzing the file readers (issue 45 item 7): small valid files of assets/ (MJCF, URDF, a
UsdPhysics stage, measured CSV and NPZ data) with one attribute, cell or member mutated
(non-numeric, NaN, inf, negative, huge, missing, duplicated, truncated, garbage) are either
read, or refused by a ValueError that names the file; never another exception, never a NaN
accepted into the model or the data, never a change to the file read.

``WPSIM_FUZZ_EXAMPLES`` sets the examples per test (see tests/fuzz_support.py)."""

from __future__ import annotations

import copy
import hashlib
import re
import warnings
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pytest
from fuzz_support import BAD_NUMBERS, Table, fuzz_settings, names_file
from hypothesis import given
from hypothesis import strategies as st

ASSETS = Path(__file__).resolve().parents[1] / "assets"
XML_SCENES = {"MJCF": ("arm_2link.xml", "cartpole.xml", "box_toss.xml"),
              "URDF": ("arm_2link.urdf", "cartpole.urdf", "quadruped.urdf")}
TABLE = Table("test_fuzz_files")
KNOWN: dict = {}
"""target -> patterns of failures counted as "known (xfail)" (in files another engineer owns, each
with an xfail test naming it); none now: those found in the UsdPhysics and measurement readers
are fixed and their tests below pass (issue 45 item 4)."""
ELEMENT_WORDS = re.compile(r"\b(body|bodies|joint|shape|link|geom|particle|actuator|dof|mass|inertia)\b")


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    TABLE.emit()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def _has_nan(model) -> str | None:
    """The name of a float array of ``model`` holding a NaN, or None."""
    import warp as wp

    for name, value in vars(model).items():
        if isinstance(value, wp.array) and value.size:
            values = value.numpy()
            if values.dtype.kind == "f" and np.isnan(values).any():
                return name
    return None


def _outcome(read, path: Path, check=None) -> tuple:
    """(category, description) of ``read(path)``; ``check(result)`` returns the name of a NaN
    the result accepted, or None."""
    before = _sha(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = read(path)
            nan = check(result) if check else None
    except ValueError as error:
        message = str(error)
        if _sha(path) != before:
            return "input changed", message
        if names_file(message, path) or ELEMENT_WORDS.search(message):
            return "named error", message
        return "unnamed error", f"{type(error).__name__}: {message}"
    except Exception as error:  # noqa: BLE001 - the category this suite is looking for
        return "crash/traceback", f"{type(error).__name__}: {error}"
    if _sha(path) != before:
        return "input changed", ""
    return ("NaN accepted", f"model array {nan}") if nan else ("passed", "")


def _record(target: str, category: str, described: str):
    """Count the outcome; fail on an undesigned one unless ``KNOWN`` lists it."""
    line = f"{category}: {described}"
    if category not in ("named error", "passed") and any(re.search(k, line) for k in KNOWN.get(target, ())):
        category = "known (xfail)"
    TABLE.add(target, category, line)
    assert category in ("named error", "passed", "known (xfail)"), line


def _xml_mutation(data, text: str) -> tuple:
    """(mutated bytes, description) of an XML file: an attribute set to a bad value or removed,
    an element duplicated or removed, the file truncated, or garbage."""
    kind = data.draw(st.sampled_from(("value", "value", "value", "value", "drop attribute", "duplicate element",
                                      "drop element", "truncate", "garbage")), label="mutation")
    if kind == "truncate":
        cut = data.draw(st.integers(0, len(text) - 1), label="cut")
        return text[:cut].encode(), f"truncated at {cut}"
    if kind == "garbage":
        return data.draw(st.binary(max_size=64), label="bytes"), "garbage bytes"
    root = ET.fromstring(text)
    parents = {child: parent for parent in root.iter() for child in parent}
    elements = list(root.iter())
    if kind in ("value", "drop attribute"):
        pairs = [(e, a) for e in elements for a in e.attrib]
        element, attribute = data.draw(st.sampled_from(pairs), label="attribute")
        if kind == "value":
            value = data.draw(st.sampled_from(BAD_NUMBERS), label="value")
            element.set(attribute, value)
            described = f"<{element.tag} {attribute}={value[:20]!r}>"
        else:
            del element.attrib[attribute]
            described = f"<{element.tag}> without {attribute}"
    else:
        element = data.draw(st.sampled_from([e for e in elements if e in parents]), label="element")
        parent = parents[element]
        if kind == "duplicate element":
            parent.insert(list(parent).index(element) + 1, copy.deepcopy(element))
            described = f"<{element.tag} name={element.get('name')!r}> twice"
        else:
            parent.remove(element)
            described = f"<{element.tag}> removed"
    return ET.tostring(root), described


def _import_and_finalize(path: Path):
    from wpsim.io.robots import import_robot

    builder, _ = import_robot(path)
    return builder.finalize(device="cpu")


@pytest.mark.parametrize("fmt", sorted(XML_SCENES))
@fuzz_settings()
@given(data=st.data())
def test_fuzzed_robot_xml_is_read_or_refused_naming_the_file(tmp_path_factory, fmt, data):
    name = data.draw(st.sampled_from(XML_SCENES[fmt]), label="file")
    mutated, described = _xml_mutation(data, (ASSETS / name).read_text())
    path = tmp_path_factory.mktemp("scene") / name
    path.write_bytes(mutated)
    category, detail = _outcome(_import_and_finalize, path, _has_nan)
    _record(fmt, category, f"{name} {described}: {detail}")


@pytest.fixture(scope="module")
def usd_robot_text(tmp_path_factory) -> str:
    """arm_2link.xml as a UsdPhysics stage (text)."""
    from wpsim.io.mjcf import import_mjcf
    from wpsim.io.usd_physics import export_physics

    path = tmp_path_factory.mktemp("usd") / "robot.usda"
    export_physics(import_mjcf(ASSETS / "arm_2link.xml")[0].finalize(device="cpu"), path, timestep=1e-3)
    return path.read_text()


NUMBER = re.compile(r"(?<=[\s=(,\[])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?=[\s,)\]])")


@fuzz_settings()
@given(data=st.data())
def test_fuzzed_usd_physics_stage_is_read_or_refused_naming_the_file(tmp_path_factory, usd_robot_text, data):
    text = usd_robot_text
    kind = data.draw(st.sampled_from(("number", "number", "number", "drop line", "truncate")), label="mutation")
    if kind == "number":
        spans = [m.span() for m in NUMBER.finditer(text)]
        start, end = data.draw(st.sampled_from(spans), label="number")
        value = data.draw(st.sampled_from(BAD_NUMBERS), label="value")
        line = text.count("\n", 0, start) + 1
        text, described = text[:start] + value + text[end:], f"line {line}: {text[start:end]} -> {value[:20]!r}"
    elif kind == "drop line":
        lines = text.splitlines(keepends=True)
        k = data.draw(st.integers(1, len(lines) - 1), label="line")
        text, described = "".join(lines[:k] + lines[k + 1:]), f"line {k + 1} ({lines[k].strip()[:40]}) removed"
    else:
        cut = data.draw(st.integers(0, len(text) - 1), label="cut")
        text, described = text[:cut], f"truncated at {cut}"
    path = tmp_path_factory.mktemp("usd") / "robot.usda"
    path.write_text(text)
    category, detail = _outcome(_import_and_finalize, path, _has_nan)
    _record("UsdPhysics", category, f"{described}: {detail}")


def _csv_base() -> list:
    """Header and first 21 rows of arm_2link_sysid.csv, as lists of cells."""
    lines = (ASSETS / "arm_2link_sysid.csv").read_text().splitlines()[:22]
    return [line.split(",") for line in lines]


def _trajectory_nan(trajectory) -> str | None:
    bad = [name for name, v in trajectory.columns.items() if not np.isfinite(v).all()]
    if bad:
        return bad[0]
    return None if np.isfinite(trajectory.time).all() else "time"


def _load(path: Path):
    from wpsim.io.measurements import load_trajectory

    return load_trajectory(path)


@fuzz_settings()
@given(data=st.data())
def test_fuzzed_csv_data_is_read_or_refused_naming_the_file(tmp_path_factory, data):
    rows = _csv_base()
    kind = data.draw(st.sampled_from(("cell", "cell", "cell", "header", "duplicate column", "drop cell", "huge field",
                                      "truncate", "bytes")), label="mutation")
    r = data.draw(st.integers(1, len(rows) - 1), label="row")
    c = data.draw(st.integers(0, len(rows[0]) - 1), label="column")
    if kind == "cell":
        rows[r][c] = data.draw(st.sampled_from(BAD_NUMBERS), label="value")
        described = f"row {r} column {c} = {rows[r][c][:20]!r}"
    elif kind == "header":
        rows[0][c] = data.draw(st.sampled_from(("", "time", "q:", "q:link1_joint", "marker:m:w", "tau:x:y", "é:1",
                                                "q:nope", "x" * 1000)), label="name")
        described = f"header {c} = {rows[0][c][:20]!r}"
    elif kind == "duplicate column":
        rows = [row + [row[c]] for row in rows]
        described = f"column {c} twice"
    elif kind == "drop cell":
        del rows[r][c]
        described = f"row {r} cell {c} removed"
    elif kind == "huge field":
        rows[r][c] = "1" * 200_000
        described = f"row {r} column {c}: 200,000 digits"
    text = "\n".join(",".join(row) for row in rows) + "\n"
    raw = text.encode()
    if kind == "truncate":
        cut = data.draw(st.integers(0, len(raw) - 1), label="cut")
        raw, described = raw[:cut], f"truncated at {cut}"
    elif kind == "bytes":
        at = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw, described = raw[:at] + b"\xff\xfe\x00" + raw[at:], f"bytes ff fe 00 at {at}"
    path = tmp_path_factory.mktemp("data") / "run.csv"
    path.write_bytes(raw)
    category, detail = _outcome(_load, path, _trajectory_nan)
    _record("CSV", category, f"{described}: {detail}")


@fuzz_settings()
@given(data=st.data())
def test_fuzzed_npz_data_is_read_or_refused_naming_the_file(tmp_path_factory, data):
    rows = _csv_base()
    arrays = {name: np.array([float(row[k]) for row in rows[1:]]) for k, name in enumerate(rows[0])}
    names = list(arrays)
    name = data.draw(st.sampled_from(names), label="array")
    kind = data.draw(st.sampled_from(("value", "value", "shape", "dtype", "drop", "not npy", "truncate")),
                     label="mutation")
    extra = None
    if kind == "value":
        value = data.draw(st.sampled_from((np.nan, np.inf, -np.inf, -1.0, 0.0, 1e308, -1e308)), label="value")
        arrays[name] = arrays[name].copy()
        arrays[name][data.draw(st.integers(0, len(arrays[name]) - 1), label="index")] = value
        described = f"{name}[k] = {value}"
    elif kind == "shape":
        arrays[name] = data.draw(st.sampled_from((arrays[name][:3], arrays[name].reshape(-1, 1), np.zeros(0),
                                                  np.float64(1.0))), label="shape")
        described = f"{name} of shape {np.shape(arrays[name])}"
    elif kind == "dtype":
        arrays[name] = data.draw(st.sampled_from((arrays[name].astype(str), arrays[name].astype(np.complex128),
                                                  arrays[name] > 0, arrays[name].astype(np.float16))), label="dtype")
        described = f"{name} of dtype {arrays[name].dtype}"
    elif kind == "drop":
        del arrays[name]
        described = f"{name} removed"
    elif kind == "not npy":
        extra = (f"{name}.npy", data.draw(st.binary(max_size=64), label="member"))
        del arrays[name]
        described = f"{name}.npy is not an .npy file"
    path = tmp_path_factory.mktemp("data") / "run.npz"
    np.savez(path, **arrays)
    if extra is not None:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(*extra)
    if kind == "truncate":
        raw = path.read_bytes()
        cut = data.draw(st.integers(0, len(raw) - 1), label="cut")
        path.write_bytes(raw[:cut])
        described = f"truncated at {cut}"
    category, detail = _outcome(_load, path, _trajectory_nan)
    _record("NPZ", category, f"{described}: {detail}")


USD_CASES = {  # were: an unnamed ValueError, an IndexError, a NaN in the model, an OverflowError
    "infinite gravity direction": (("vector3f physics:gravityDirection = (-0, -0, -1)",
                                     "vector3f physics:gravityDirection = (inf, 0, -1)"),
                                   r"prim /World/physicsScene: physics:gravityDirection \[inf, 0.0, -1.0\] "
                                   r"must be finite"),
    "empty joint array": (("double[] wpsim:damping = [0.05000000074505806]", "double[] wpsim:damping = []"),
                          r"prim /World/joints/joint_0: wpsim:damping has 0 values, 1 expected"),
    "NaN joint spring reference": (("double[] wpsim:spring_ref = [0]", "double[] wpsim:spring_ref = [nan]"),
                                   r"prim /World/joints/joint_0: wpsim:spring_ref nan is not a number"),
    "huge metersPerUnit": (("metersPerUnit = 1", "metersPerUnit = 1e308"),
                           r"metersPerUnit 1e\+308 must be a unit in SI"),
}


@pytest.mark.parametrize("case", sorted(USD_CASES))
def test_usd_failures_found_by_fuzzing_are_refused_naming_the_file(tmp_path, usd_robot_text, case):
    (old, new), match = USD_CASES[case]
    assert old in usd_robot_text
    path = tmp_path / "robot.usda"
    path.write_text(usd_robot_text.replace(old, new, 1))
    category, detail = _outcome(_import_and_finalize, path, _has_nan)
    assert category == "named error", detail
    assert str(path) in detail and re.search(match, detail), detail


def test_csv_field_over_the_csv_limit_is_refused_naming_the_file(tmp_path):
    """Was a csv.Error traceback."""
    path = tmp_path / "run.csv"
    path.write_text("time,q:j\n0," + "1" * 200_000 + "\n0.1,2\n")
    category, detail = _outcome(_load, path, _trajectory_nan)
    assert category == "named error" and names_file(detail, path), detail


def test_npz_member_that_is_not_npy_is_refused_naming_the_file(tmp_path):
    """Was an AttributeError traceback."""
    path = tmp_path / "run.npz"
    np.savez(path, time=np.arange(3.0))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("q:j.npy", b"not an array")
    category, detail = _outcome(_load, path, _trajectory_nan)
    assert category == "named error" and names_file(detail, path), detail
