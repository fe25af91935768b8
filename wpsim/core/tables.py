"""Column-oriented host storage for the builder: one table per element kind, one column
per Model field it collects (named and checked as the field's ``FieldSpec`` says)."""

from __future__ import annotations

import numpy as np

from wpsim.core.fields import FieldSpec, table_columns
from wpsim.core.validation import as_array, require_finite, require_nonnegative, require_positive


class Table:
    """Rows of one element kind (particles, springs, ...), appended in validated chunks.

    ``kind`` is the builder table name of the Model fields it collects (see
    ``wpsim.core.fields``) and the element name in error messages.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self.columns: dict[str, FieldSpec] = {spec.name: spec for spec in table_columns(kind)}
        if not self.columns:
            raise ValueError(f"no Model field is collected by a builder table {kind!r}")
        self.chunks = {name: [] for name in self.columns}
        self.count = 0

    def mark(self) -> int:
        """A restore point for ``rollback``: the current row count."""
        return self.count

    def rollback(self, mark: int):
        """Drop every row appended since ``mark`` was taken."""
        for name in self.columns:
            rows = self.array(name)[:mark]
            self.chunks[name] = [rows] if mark else []
        self.count = mark

    def append(self, count: int, **values) -> int:
        """Validate and store ``count`` rows (one keyword per column, broadcast from a single
        row); returns the index of the first new row."""
        if set(values) != set(self.columns):
            raise ValueError(f"{self.kind} table: columns {sorted(self.columns)} expected, got {sorted(values)}")
        rows = {}
        for name, spec in self.columns.items():
            dtype = np.int64 if spec.kind == "int" else np.float64
            arr = as_array(f"{self.kind} {spec.label}", values[name], spec.trailing, count, dtype)
            if spec.kind != "int" and spec.check is not None:
                unit = "" if spec.unit == "-" else spec.unit
                require_finite(self.kind, spec.label, arr, self.count)
                if spec.check == "nonnegative":
                    require_nonnegative(self.kind, spec.label, arr, unit, self.count)
                elif spec.check == "positive":
                    require_positive(self.kind, spec.label, arr, unit, self.count)
            rows[name] = arr
        for name, arr in rows.items():
            self.chunks[name].append(arr)
        first = self.count
        self.count += count
        return first

    def array(self, name: str) -> np.ndarray:
        """All rows of one column as a single array (the chunks are merged once, so repeated
        calls between appends cost nothing)."""
        spec = self.columns[name]
        chunks = self.chunks[name]
        if not chunks:
            return np.zeros((0, *spec.trailing), dtype=np.int64 if spec.kind == "int" else np.float64)
        if len(chunks) > 1:
            chunks[:] = [np.concatenate(chunks, axis=0)]
        return chunks[0]

    def arrays(self) -> dict:
        """Every column by its Model field name."""
        return {name: self.array(name) for name in self.columns}

    def extend_from(self, other: Table, remap):
        """Append all rows of ``other``, passing each column through ``remap(name, array)``."""
        if other.count:
            self.append(other.count, **{name: remap(name, other.array(name)) for name in self.columns})
