"""Run the fuzz suites (tests/test_fuzz_*.py) and print one table of their outcomes: inputs
tried by target and by category (issue 45 item 7).

    python benchmarks/fuzz_table.py [--examples N]

``--examples`` is the hypothesis examples per test (``WPSIM_FUZZ_EXAMPLES``; default: the
suite's 25). The suites run in one process (no pytest-xdist); pytest's exit status is returned.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzz_support import CATEGORIES, EXAMPLES, format_table  # noqa: E402


def main(argv=None) -> int:
    """Run the fuzz suites, then print the table of all their outcomes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="examples per test (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        rows_file = Path(folder) / "rows.jsonl"
        env = {**os.environ, "WPSIM_FUZZ_EXAMPLES": str(args.examples), "WPSIM_FUZZ_TABLE": str(rows_file)}
        tests = sorted(str(p) for p in (ROOT / "tests").glob("test_fuzz_*.py"))
        status = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                                  *tests], cwd=ROOT, env=env, stdout=sys.stderr)
        totals: dict = {}
        for line in rows_file.read_text().splitlines() if rows_file.exists() else []:
            row = json.loads(line)
            totals.setdefault(row["target"], Counter()).update({k: row[k] for k in ("inputs", *CATEGORIES)})
    rows = [{"target": t, **c} for t, c in totals.items()]
    rows.append({"target": "all", **sum(totals.values(), Counter())})
    print(f"fuzz outcomes, {args.examples} examples per test (pytest exit status {status})")
    print(format_table([{k: row.get(k, 0) for k in ("target", "inputs", *CATEGORIES)} for row in rows]))
    return status


if __name__ == "__main__":
    sys.exit(main())
