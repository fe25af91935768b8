"""The command line every example shares."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def check_example_out(out, inputs=()):
    """Refuse ``--out`` before any work, with the CLI's checks (``wpsim.apps.run_scene``): a
    folder that holds one of the files ``inputs`` (an example writes its files there, so it
    could replace them), one equal to an input, or one that cannot be written. ValueError."""
    from wpsim.apps.run_scene import check_outputs, check_writable

    for source in inputs:
        check_outputs("--out", out, [source], names=[Path(source).name])
    check_writable(out, "--out", folder=True)


def example_main(doc: str, name: str, test_help: str, run, check, argv=None, inputs=()) -> int:
    """The command line every example shares: --device, --out (default ./wpsim_out/NAME), --test.

    ``run(test, out, device)`` does the work and returns its result; with --test,
    ``check(result)`` returns a failure message (or None) and a failure exits with status 1.
    ``--out`` is checked first (``check_example_out``, against the example's script and the
    files ``inputs`` it reads): a bad one is one line on stderr and status 2.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    parser.add_argument("--out", default=f"wpsim_out/{name}", help="output folder (default: %(default)s)")
    parser.add_argument("--test", action="store_true", help=test_help)
    args = parser.parse_args(argv)
    script = getattr(sys.modules.get(run.__module__), "__file__", None)
    try:
        check_example_out(args.out, [*([script] if script else []), *inputs])
    except ValueError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    result = run(args.test, args.out, args.device)
    print(f"done in {time.perf_counter() - start:.1f} s")
    failure = check(result) if args.test else None
    if failure:
        raise SystemExit(f"test failed: {failure}")
    return 0
