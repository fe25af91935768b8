"""Run wpsim benchmark suites and print their records as JSON (stdout) and a table (stderr).

    python benchmarks/run_benchmarks.py [--suite NAME ...] [--out FILE] [--device cpu] [--quick]

Without ``--suite`` every registered suite runs. Progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

from wpsim import bench
from wpsim.io.files import write_json


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options of this script."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=sorted(bench.SUITES),
                        help="suite to run (repeatable; default: all)")
    parser.add_argument("--out", help="also write the JSON records to this file")
    parser.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0 (default: Warp's default)")
    parser.add_argument("--quick", action="store_true", help="small scenes and few steps (smoke test)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the requested suites; JSON to stdout (and --out), the table to stderr."""
    args = parse_args(argv)
    records = bench.run_suites(args.suite or sorted(bench.SUITES), device=args.device, quick=args.quick)
    if args.out:
        write_json(args.out, records)
    print(bench.format_table(records), file=sys.stderr)
    print(json.dumps(records, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
