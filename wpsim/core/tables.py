"""Column-oriented host storage for the builder: one table per element kind."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wpsim.core.validation import as_array, require_finite, require_nonnegative, require_positive


@dataclass(frozen=True)
class Column:
    """One column: trailing shape per row, dtype, check applied on append, unit for messages."""

    trailing: tuple = ()
    dtype: type = np.float64
    check: str | None = "finite"  # None, "finite", "nonnegative" or "positive"
    unit: str = ""


class Table:
    """Rows of one element kind (particles, springs, ...), appended in validated chunks."""

    def __init__(self, kind: str, columns: dict[str, Column]):
        self.kind = kind
        self.columns = columns
        self.chunks = {name: [] for name in columns}
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
        """Validate and store ``count`` rows; returns the index of the first new row."""
        rows = {}
        for name, col in self.columns.items():
            arr = as_array(f"{self.kind} {name}", values[name], col.trailing, count, col.dtype)
            if col.check is not None:
                require_finite(self.kind, name, arr, self.count)
            if col.check == "nonnegative":
                require_nonnegative(self.kind, name, arr, col.unit, self.count)
            elif col.check == "positive":
                require_positive(self.kind, name, arr, col.unit, self.count)
            rows[name] = arr
        for name, arr in rows.items():
            self.chunks[name].append(arr)
        first = self.count
        self.count += count
        return first

    def array(self, name: str) -> np.ndarray:
        """All rows of one column as a single array (the chunks are merged once, so repeated
        calls between appends cost nothing)."""
        col = self.columns[name]
        chunks = self.chunks[name]
        if not chunks:
            return np.zeros((0, *col.trailing), dtype=col.dtype)
        if len(chunks) > 1:
            chunks[:] = [np.concatenate(chunks, axis=0)]
        return chunks[0]

    def extend_from(self, other: Table, remap):
        """Append all rows of ``other``, passing each column through ``remap(name, array)``."""
        if other.count:
            self.append(other.count, **{name: remap(name, other.array(name)) for name in self.columns})
