"""Measured trajectories from CSV or NPZ files: validated, named channels on a time axis,
resampled onto a simulation's time grid.

A file holds a ``time`` column (s, strictly increasing) and channels named ``kind:name``:

    q:<joint>              joint coordinate of a 1-dof joint (rad or m)
    qd:<joint>             its velocity (rad/s or m/s)
    tau:<joint>            generalized force applied to it (N m or N)
    ctrl:<actuator>        an actuator's control input, as MuJoCo's ``ctrl`` (a motor's: N m or N
                           before its gear; a position servo's: its target, rad or m)
    marker:<name>:x|y|z    position of a marker (m), three columns
    activation:<name>      an actuation input (dimensionless)

Other columns (a name without one of these kinds, e.g. ``comment`` or ``temperature:motor``)
are not read: they are listed in ``Trajectory.ignored`` and named in a warning.

CSV: one header row of column names, then one row of numbers per sample. NPZ: one 1-D
``.npy`` array per column name, all of the same length. Errors name the file, and the column
and line (CSV; line 1 is the header) or array (NPZ): a missing or non-increasing time, a value
that is not a finite number, a row with the wrong number of values, a malformed marker column.

Limits, checked while a CSV is read row by row and, for an NPZ, from each array's zip entry
and ``.npy`` header before it is decompressed: at most ``MAX_SAMPLES`` samples and
``MAX_COLUMNS`` columns, CSV fields of at most ``csv.field_size_limit()`` characters, and the
values read within the memory budget (``wpsim.core.limits``).
"""

from __future__ import annotations

import csv
import warnings
import zipfile
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wpsim.core.limits import require_memory

KINDS = {"q": "rad or m", "qd": "rad/s or m/s", "tau": "N m or N", "ctrl": "the actuator's", "marker": "m",
         "activation": "-"}
"""Channel kinds a column may have, with their units."""

AXES = ("x", "y", "z")
MAX_SAMPLES = 1_000_000
"""The most samples (CSV rows, NPZ array lengths) a file may hold: 1,000 s at 1 kHz."""
MAX_COLUMNS = 1_000
"""The most columns a file may hold."""
_BUDGET_CHECK_ROWS = 65_536  # a CSV's values so far are checked against the memory budget this often


class MeasurementError(ValueError):
    """A measurement file cannot be used; the message names the file and where."""


def _is_read(column: str) -> bool:
    """Whether ``column`` is the time or a channel (``kind:...`` with a known kind)."""
    return column == "time" or column.partition(":")[0] in KINDS


def _check_name(path, column: str):
    if column == "time":
        return
    kind, _, rest = column.partition(":")
    if kind not in KINDS or not rest:
        raise MeasurementError(f"{path}: column {column!r} is neither 'time' nor 'kind:name' with kind one of "
                               f"{', '.join(KINDS)}")
    if kind == "marker" and rest.rpartition(":")[2] not in AXES:
        raise MeasurementError(f"{path}: marker column {column!r} must end in :x, :y or :z")


@dataclass
class Trajectory:
    """Samples of named channels: ``time`` (N,) s and ``columns`` name -> (N,) values;
    ``ignored``: the file's columns that are not channels (not read)."""

    path: str
    time: np.ndarray
    columns: dict
    ignored: tuple = ()

    def names(self, kind: str) -> list:
        """The names of the channels of one kind, in file order (marker names once each)."""
        names = []
        for column in self.columns:
            k, _, rest = column.partition(":")
            name = rest.rpartition(":")[0] if k == "marker" else rest
            if k == kind and name not in names:
                names.append(name)
        return names

    def channel(self, kind: str, name: str) -> np.ndarray:
        """(N,) values of ``kind:name``, or (N, 3) positions of a marker."""
        if kind == "marker":
            return np.stack([self._column(f"marker:{name}:{axis}") for axis in AXES], axis=1)
        return self._column(f"{kind}:{name}")

    def _column(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise MeasurementError(f"{self.path}: no column {column!r} (columns: {', '.join(self.columns)})")
        return self.columns[column]

    def require(self, kind: str, known, what: str):
        """Check that every channel of ``kind`` names one of ``known`` (e.g. the robot's 1-dof
        joints); ``what`` names them in the message."""
        known = list(known)
        for name in self.names(kind):
            if name not in known:
                raise MeasurementError(f"{self.path}: column '{kind}:{name}' names an unknown {what} {name!r} "
                                       f"(known: {', '.join(known) or 'none'})")

    def resample(self, times, hold=("tau", "ctrl", "activation")) -> Trajectory:
        """The channels at ``times`` (s): linear interpolation, or for the kinds in ``hold``
        the latest sample at or before each time (inputs held over a step). The times must
        lie within the file's time span."""
        times = np.asarray(times, dtype=np.float64)
        span = (self.time[0], self.time[-1])
        slack = 1e-9 * max(1.0, abs(span[1]))
        if times.min() < span[0] - slack or times.max() > span[1] + slack:
            raise MeasurementError(f"{self.path}: the data covers {span[0]:g}-{span[1]:g} s, but "
                                   f"{times.min():g}-{times.max():g} s are needed")
        latest = np.clip(np.searchsorted(self.time, times + slack, side="right") - 1, 0, len(self.time) - 1)
        out = {}
        for column, values in self.columns.items():
            held = column.partition(":")[0] in hold
            out[column] = values[latest] if held else np.interp(times, self.time, values)
        return Trajectory(self.path, times, out, self.ignored)


def _check_size(path, samples: int, columns: int, where: str = ""):
    """Refuse more than ``MAX_SAMPLES`` samples or values beyond the memory budget."""
    if samples > MAX_SAMPLES:
        raise MeasurementError(f"{path}{where}: more than {MAX_SAMPLES:,} samples (MAX_SAMPLES in "
                               "wpsim.io.measurements); resample or split the file")
    try:
        require_memory(f"{path}: {samples:,} samples of {columns:,} columns", 16.0 * samples * columns,
                       "resample the data or keep fewer columns")
    except ValueError as error:
        raise MeasurementError(str(error)) from None


def _from_csv(path: Path) -> tuple:
    with open(path, encoding="utf-8-sig", errors="strict", newline="") as stream:
        reader = csv.reader(stream)
        header, values, samples = None, {}, 0
        try:
            for row in reader:
                if not row or not any(cell.strip() for cell in row):
                    continue
                line = reader.line_num
                if header is None:
                    header = [cell.strip() for cell in row]
                    if len(header) > MAX_COLUMNS:
                        raise MeasurementError(f"{path}, line {line}: {len(header):,} columns; at most {MAX_COLUMNS:,} "
                                               "(MAX_COLUMNS in wpsim.io.measurements)")
                    values = {name: array("d") for name in header if _is_read(name)}
                    continue
                if len(row) != len(header):
                    raise MeasurementError(f"{path}, line {line}: {len(row)} values for {len(header)} columns")
                samples += 1
                if samples > MAX_SAMPLES or samples % _BUDGET_CHECK_ROWS == 0:
                    _check_size(path, samples, len(values), f", line {line}")
                for name, cell in zip(header, row):
                    if name not in values:
                        continue
                    try:
                        values[name].append(float(cell))
                    except ValueError:
                        raise MeasurementError(f"{path}, line {line}, column {name!r}: {cell.strip()!r} is not a "
                                               "number") from None
        except csv.Error as error:  # a field over csv.field_size_limit(), a NUL byte, ...
            raise MeasurementError(f"{path}, line {reader.line_num}: not a CSV row of numbers ({error})") from None
        except UnicodeDecodeError as error:  # decoded ahead of the rows, in blocks
            raise MeasurementError(f"{path}: not a UTF-8 text file ({error.reason}, met after line "
                                   f"{reader.line_num})") from None
    if header is None:
        raise MeasurementError(f"{path}: the file is empty (a header row and samples are needed)")
    return header, {name: np.frombuffer(column, dtype=np.float64) for name, column in values.items()}, "line", 2


def _npy_header(path, archive, info) -> tuple:
    """(shape, dtype) of an NPZ member from its ``.npy`` header, nothing decompressed beyond it."""
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        with archive.open(info) as stream:
            version = np.lib.format.read_magic(stream)
            if version not in readers:
                raise ValueError(f".npy format version {version} is not read")
            shape, _, dtype = readers[version](stream)
    except Exception as error:  # a damaged member or header
        raise MeasurementError(f"{path}: array {info.filename!r} is not a readable .npy array ({error})") from None
    return shape, dtype


def _from_npz(path: Path) -> tuple:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise MeasurementError(f"{path}: cannot be read as an NPZ archive ({type(error).__name__})") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_COLUMNS:
            raise MeasurementError(f"{path}: {len(members):,} arrays; at most {MAX_COLUMNS:,} (MAX_COLUMNS in "
                                   "wpsim.io.measurements)")
        for info in members:
            if not info.filename.endswith(".npy"):
                raise MeasurementError(f"{path}: member {info.filename!r} is not a .npy array (an NPZ holds one .npy "
                                       "array per column)")
        header = [info.filename[:-4] for info in members]
        read = [(info, name) for info, name in zip(members, header) if _is_read(name)]
        for info, name in read:  # every array's size from the zip entry and .npy header first
            shape, dtype = _npy_header(path, archive, info)
            if len(shape) != 1 or dtype.kind not in "fiu":
                raise MeasurementError(f"{path}: array {name!r} must be 1-D numbers, got shape {shape} {dtype}")
            _check_size(path, shape[0], len(read), f", array {name!r}")
            if shape[0] * dtype.itemsize > info.file_size:
                raise MeasurementError(f"{path}: array {name!r} is truncated ({shape[0]:,} values of {dtype} in "
                                       f"{info.file_size:,} bytes)")
        arrays = {}
        for info, name in read:
            try:
                with archive.open(info) as stream:
                    arrays[name] = np.lib.format.read_array(stream, allow_pickle=False).astype(np.float64)
            except Exception as error:  # a damaged member (CRC, truncated data)
                raise MeasurementError(f"{path}: array {name!r} cannot be read ({type(error).__name__})") from None
    return header, arrays, "sample", 0


def load_trajectory(path) -> Trajectory:
    """A validated ``Trajectory`` from a ``.csv`` or ``.npz`` file (see the module docstring);
    warns naming the columns it ignores."""
    path = Path(path)
    if path.suffix.lower() not in (".csv", ".npz"):
        raise MeasurementError(f"{path}: unsupported data format {path.suffix!r}; expected .csv or .npz")
    if not path.is_file():
        raise MeasurementError(f"{path}: no such data file")
    try:
        header, values, where, first = _from_csv(path) if path.suffix.lower() == ".csv" else _from_npz(path)
    except UnicodeDecodeError as error:
        raise MeasurementError(f"{path}: not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    ignored = tuple(column for column in header if not _is_read(column))
    read = [column for column in header if _is_read(column)]
    if len(set(read)) != len(read):
        raise MeasurementError(f"{path}: column {next(h for h in read if read.count(h) > 1)!r} appears twice")
    for column in read:
        _check_name(path, column)
    if "time" not in header:
        raise MeasurementError(f"{path}: no 'time' column (columns: {', '.join(header)})")
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise MeasurementError(f"{path}: columns of different lengths {sorted(lengths)}")
    columns = {name: np.asarray(values[name], dtype=np.float64) for name in read}
    for name, arr in columns.items():
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise MeasurementError(f"{path}, {where} {first + int(bad[0])}, column {name!r}: value {arr[bad[0]]} is "
                                   "not finite")
    time = columns.pop("time")
    if len(time) < 2:
        raise MeasurementError(f"{path}: {len(time)} sample(s); at least 2 are needed")
    step = np.flatnonzero(np.diff(time) <= 0.0)
    if step.size:
        k = int(step[0]) + 1
        raise MeasurementError(f"{path}, {where} {first + k}: time {time[k]:g} s is not after the previous sample's "
                               f"{time[k - 1]:g} s")
    if not columns:
        raise MeasurementError(f"{path}: only a time column, no channels" +
                               (f" (ignored: {', '.join(ignored)})" if ignored else ""))
    if ignored:
        warnings.warn(f"{path}: ignoring column(s) {', '.join(map(repr, ignored))}: not 'time' nor 'kind:name' with "
                      f"kind one of {', '.join(KINDS)}", stacklevel=2)
    return Trajectory(str(path), time, columns, ignored)


def save_trajectory(path, time, columns: dict):
    """Write ``time`` (N,) s and ``columns`` (name -> (N,) values, names as in the module
    docstring) as a CSV file, atomically, full float precision; returns the path."""
    from wpsim.io.files import atomic_write

    time = np.asarray(time, dtype=np.float64)
    for name in columns:
        _check_name(path, name)
    table = np.column_stack([time] + [np.asarray(v, dtype=np.float64) for v in columns.values()])
    if not np.isfinite(table).all():
        raise MeasurementError(f"{path}: refusing to write non-finite values")

    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["time", *columns])
            writer.writerows([[repr(float(v)) for v in row] for row in table])

    return atomic_write(path, write)
