"""The command line every example shares."""

from __future__ import annotations

import argparse
import time


def example_main(doc: str, name: str, test_help: str, run, check, argv=None) -> int:
    """The command line every example shares: --device, --out (default ./wpsim_out/NAME), --test.

    ``run(test, out, device)`` does the work and returns its result; with --test,
    ``check(result)`` returns a failure message (or None) and a failure exits with status 1.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    parser.add_argument("--out", default=f"wpsim_out/{name}", help="output folder (default: %(default)s)")
    parser.add_argument("--test", action="store_true", help=test_help)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = run(args.test, args.out, args.device)
    print(f"done in {time.perf_counter() - start:.1f} s")
    failure = check(result) if args.test else None
    if failure:
        raise SystemExit(f"test failed: {failure}")
    return 0
