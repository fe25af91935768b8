"""Peak-memory measurement for benchmarks: Warp's allocation tracker, one process per case.

Warp's tracker reports a process-wide high-water mark, so every configuration whose peak is
compared runs in a fresh worker process (``python -m MODULE --worker ...``) that prints one
JSON object as its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from typing import Callable

import warp as wp

_UNITS = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}


def parse_peak_bytes(report: str) -> int:
    """Total peak usage (bytes, all devices) from the text of a Warp allocation report."""
    lines = report.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("Peak usage"))
    except StopIteration:
        return 0  # nothing was allocated while tracking
    total = 0.0
    for line in lines[start + 1:]:
        match = re.match(r"\s+\S+\s+([\d.]+)\s*([KMGT]?B)\s*$", line)
        if not match:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
    return int(total)


def tracked_peak(fn: Callable[[], object]) -> tuple[int, object]:
    """Run ``fn()`` with Warp's allocation tracker on; returns (peak bytes of Warp
    allocations made meanwhile, result). The tracker is cleared first, so an earlier
    measurement in the same process does not leak into this one. The report's 2-decimal
    rounding bounds the error at 0.5% of the peak."""
    reports = []
    with wp.ScopedMemoryTracker("bench", report_func=reports.append) as tracker:
        tracker.clear()  # forget the high-water mark of anything tracked before
        result = fn()
        wp.synchronize()
    return parse_peak_bytes(reports[-1] if reports else ""), result


def run_worker(module: str, args: list[str], timeout_s: float = 1800.0) -> dict:
    """Run ``python -m module --worker *args`` in a fresh process; its last stdout line, as JSON."""
    cmd = [sys.executable, "-m", module, "--worker", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark worker {' '.join(cmd[2:])} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def iterations_mode_count(modes: tuple) -> Callable[[list], tuple]:
    """The case parser of workers whose fields are (ITERATIONS, MODE, COUNT): two integers
    and a mode from ``modes`` (a ValueError otherwise)."""

    def parse(fields: list) -> tuple:
        if fields[1] not in modes:
            raise ValueError(f"MODE must be one of {modes}")
        return int(fields[0]), fields[1], int(fields[2])

    return parse


def worker_main(argv, description: str, fields: tuple, parse_case: Callable[[list], tuple],
                measure_case: Callable[..., dict], suite: Callable[..., list]) -> int:
    """Command line of a benchmark module whose cases run one per process: ``--worker FIELD...``
    parses the fields with ``parse_case`` (a ValueError is a usage error), measures that case
    with ``measure_case(*case, device=..., quick=...)`` and prints one JSON line; without
    ``--worker`` the whole ``suite(device, quick)`` runs and its records are printed as JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--worker", nargs=len(fields), metavar=fields, help="measure one case (internal)")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    if args.worker:
        try:
            case = parse_case(args.worker)
        except ValueError as error:
            parser.error(str(error))
        result = measure_case(*case, device=args.device, quick=args.quick)
    else:
        result = suite(args.device, args.quick)
    print(json.dumps(result))
    return 0
