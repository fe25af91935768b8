"""What the fuzz suites (tests/test_fuzz_*.py) share: their hypothesis settings, the values
they try, the outcome of one input by category, and the table of outcomes.

Hypothesis draws the inputs (derandomized: the same inputs on every run; no example database).
``WPSIM_FUZZ_EXAMPLES`` sets the examples per test (default ``EXAMPLES``), for a longer run.
Each module prints its table when it ends (seen with ``pytest -s``); with ``WPSIM_FUZZ_TABLE``
set to a file, the rows are also appended there as JSON lines, which
``benchmarks/fuzz_table.py`` adds up into one table.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

EXAMPLES = 25
"""Examples per fuzz test by default (the suite's budget)."""

CATEGORIES = ("named error", "exit 2", "passed", "NaN accepted", "unnamed error", "crash/traceback",
              "file outside --out", "input changed", "known (xfail)")
"""Outcomes of one input. The first three are the designed ones; "known (xfail)" is a failure
listed for another owner (its xfail test names it)."""

BAD_NUMBERS = ("abc", "nan", "NaN", "inf", "-inf", "-1", "0", "-0", "1e308", "-1e308", "1e-320", "", " ",
               "1 2 3 4 5 6 7 8 9 10", "0x10", "1,5", "9" * 400, "1e999", "\u0661", "1/2", "None", "[1]")
"""Values tried where a file or an option expects a number."""


def examples() -> int:
    """Examples per fuzz test: ``WPSIM_FUZZ_EXAMPLES`` or ``EXAMPLES``."""
    return int(os.environ.get("WPSIM_FUZZ_EXAMPLES", EXAMPLES))


def fuzz_settings(**overrides):
    """Hypothesis settings of the fuzz tests: derandomized, no database, no deadline."""
    base = dict(max_examples=examples(), derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=list(HealthCheck),
                phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
    base.update(overrides)
    return settings(**base)


class Table:
    """Outcome counts of a fuzz module, by target (e.g. "MJCF") and category."""

    def __init__(self, module: str):
        self.module = module
        self.counts: dict = {}
        self.samples: dict = {}  # (target, category) -> the first input's description

    def add(self, target: str, category: str, described: str = ""):
        """Count one input of ``target`` in ``category`` (one of ``CATEGORIES``)."""
        assert category in CATEGORIES, category
        self.counts.setdefault(target, Counter())[category] += 1
        self.samples.setdefault((target, category), described[:300])

    def rows(self) -> list:
        """[{"target", "inputs", category: count, ...}] in target order."""
        return [{"target": t, "inputs": sum(c.values()), **{k: c[k] for k in CATEGORIES}}
                for t, c in self.counts.items()]

    def emit(self):
        """Print the table (and append its rows to ``WPSIM_FUZZ_TABLE`` when set)."""
        rows = self.rows()
        print(f"\n{self.module}: fuzz outcomes ({examples()} examples per test)\n" + format_table(rows))
        for (target, category), described in self.samples.items():
            if category not in ("named error", "exit 2", "passed"):
                print(f"  first {category} of {target}: {described}")
        path = os.environ.get("WPSIM_FUZZ_TABLE")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")


def format_table(rows: list) -> str:
    """A text table of ``Table.rows`` (columns: target, inputs, the categories)."""
    head = ["target", "inputs", *CATEGORIES]
    lines = [head] + [[str(r[h]) for h in head] for r in rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(line, widths)))
                     for line in lines)


def digests(root: Path) -> dict:
    """Relative path -> sha256 of every file under ``root`` (symlinks not followed)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def changes(before: dict, after: dict) -> list:
    """Relative paths added, removed or changed between two ``digests``."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


@contextlib.contextmanager
def captured():
    """(stdout, stderr) StringIOs that receive what the block prints."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def names_file(message: str, path: Path) -> bool:
    """Whether an error message names the file ``path`` (by its full path or its name)."""
    return str(path) in message or re.search(re.escape(path.name), message) is not None
