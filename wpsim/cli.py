"""The ``wpsim`` command line: demo, gradcheck, bench."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys


def _quiet_warp():
    """Silence Warp's start-up banner and module-load lines (warnings still show)."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    return wp


def cmd_demo(args) -> int:
    """Run the bounce-to-target optimisation and write its plots."""
    _quiet_warp()
    from .demo import DemoConfig, run_demo

    config = DemoConfig(iterations=args.iterations)
    result = run_demo(args.out, config, device=args.device)
    return 0 if result["loss_reduction"] >= 100.0 else 1


def cmd_gradcheck(args) -> int:
    """Run the gradient audit; exit status 1 if any family fails."""
    _quiet_warp()
    from .diff.audit import TOLERANCE, run_audit
    from .output import progress_line

    def progress(done, total, row):
        status = "ok" if row["ok"] else "FAIL"
        progress_line(done, total, f"{row['solver']:<14} {row['family']:<17} {row['param']:<25} "
                      f"rel. error {row['rel_error']:.2e}  {status}", stream=sys.stderr)

    # Warp prints module-load lines on stdout; keep stdout for the result.
    with contextlib.redirect_stdout(sys.stderr):
        rows = run_audit(progress)
    failed = [r for r in rows if not r["ok"]]
    if args.json:
        print(json.dumps([{k: r[k] for k in ("solver", "family", "param", "rel_error", "ok")} for r in rows], indent=2))
    else:
        print(f"{'solver':<15}{'family':<18}{'parameter':<27}{'rel. error':>11}  result   "
              "(tape vs central differences, float64)")
        for r in rows:
            print(f"{r['solver']:<15}{r['family']:<18}{r['param']:<27}{r['rel_error']:>11.2e}  "
                  f"{'ok' if r['ok'] else 'FAIL'}")
        print(f"{len(rows) - len(failed)}/{len(rows)} passed (bound {TOLERANCE:g})")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    """Run benchmark suites; a table, or JSON records with --json."""
    _quiet_warp()
    from . import bench

    records = bench.run_suites(args.suite, device=args.device, quick=args.quick)
    print(json.dumps(records, indent=2) if args.json else bench.format_table(records))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wpsim", description="wpsim: differentiable physics on NVIDIA Warp")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="throw a soft cube so that it lands on a target after a bounce (optimisation)")
    demo.add_argument("--out", default="wpsim_out", help="output folder for plots and results (default: ./wpsim_out)")
    demo.add_argument("--iterations", type=int, default=30, help="optimisation iterations (default: 30)")
    demo.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    demo.set_defaults(func=cmd_demo)

    grad = sub.add_parser("gradcheck", help="audit every differentiable parameter family against finite differences")
    grad.add_argument("--json", action="store_true", help="print a JSON list of {family, param, rel_error, ok}")
    grad.set_defaults(func=cmd_gradcheck)

    from .bench import SUITES

    bench = sub.add_parser("bench", help="benchmark suites (steps/s, backward/forward ratio, launches per step)")
    bench.add_argument("--suite", action="append", choices=sorted(SUITES), help="suite to run (repeatable; default: forward)")
    bench.add_argument("--json", action="store_true", help="print the records as JSON")
    bench.add_argument("--quick", action="store_true", help="small scenes, few steps")
    bench.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``wpsim`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
