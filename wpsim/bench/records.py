"""Benchmark records and their presentation.

A record is ``{"suite", "case", "params", "metric", "value"}``; ``params`` holds the scene
size, horizon, mode, device and precision, and metric names are shared across suites (see
``METRIC_UNITS``). Progress goes to stderr, one line per case; stdout is left to the caller
(JSON or ``format_table``).
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable

import warp as wp

METRIC_UNITS = {
    "steps_per_s": "steps/s",
    "world_steps_per_s": "world-steps/s",
    "backward_over_forward": "x",
    "memory_ratio": "x",
    "time_ratio": "x",
    "wall_s": "s",
    "peak_memory_bytes": "MiB",
    "launches_per_step": "launches",
    "recorded_launches_per_step": "launches",
    "rate_percent": "%",
    "max_abs_dq": "rad|m",
    "flag": "0/1",
    "count": "",
    "deflection_m": "mm",
    "height_error_m": "mm",
    "error_percent": "%",
    "fine_error_percent": "%",
    "twist_rate_rad_per_m": "rad/m",
    "stable_dt_s": "us",
    "step_s": "us",
    "rms_mm": "mm",
    "rms_rad": "rad",
}
"""Metric names shared by all suites, with the unit ``format_table`` prints them in."""


def record(suite: str, case: str, params: dict, metric: str, value: float) -> dict:
    """One benchmark record; ``metric`` must be a name from ``METRIC_UNITS``."""
    if metric not in METRIC_UNITS:
        raise ValueError(f"unknown benchmark metric {metric!r}; known: {sorted(METRIC_UNITS)}")
    return {"suite": suite, "case": case, "params": dict(params), "metric": metric, "value": float(value)}


def timed(fn: Callable[[], object], device) -> tuple[float, object]:
    """Wall time (s) of ``fn()`` between two device synchronisations, and its result."""
    wp.synchronize_device(device)
    start = time.perf_counter()
    result = fn()
    wp.synchronize_device(device)
    return time.perf_counter() - start, result


def best_times(runs: list, repeats: int, device=None) -> tuple[list, list]:
    """(best wall time (s) of each callable of ``runs``, the results of their untimed warm-up
    runs (kernel loading, thread pools)): ``repeats`` rounds time each once in turn, so that
    the machine's speed changes during a comparison reach every side alike."""
    results = [fn() for fn in runs]
    best = [math.inf] * len(runs)
    for _ in range(repeats):
        for k, fn in enumerate(runs):
            best[k] = min(best[k], timed(fn, device)[0])
    return best, results


def skipped_record(suite: str, device, reason: str) -> list[dict]:
    """The one record of a suite that could not run (``value`` 0), saying why."""
    params = {"skipped": True, "reason": reason, "cores": os.cpu_count(), "device": str(device),
              "precision": "float32"}
    return [record(suite, "skipped", params, "wall_s", 0.0)]


def progress(line: str):
    """One progress line on stderr."""
    print(f"[wpsim bench] {line}", file=sys.stderr, flush=True)


def format_value(metric: str, value: float) -> str:
    """``value`` of ``metric`` as short text (no unit)."""
    if not math.isfinite(value):
        return str(value)
    if metric == "peak_memory_bytes":
        return f"{value / 2**20:.2f}"
    if metric.endswith("launches_per_step"):
        return f"{value:.0f}"
    if metric in ("backward_over_forward", "memory_ratio", "time_ratio"):
        return f"{value:.2f}"
    if metric == "wall_s":
        return f"{value:.4f}"
    if metric == "max_abs_dq":
        return f"{value:.2e}"
    if metric in ("flag", "count"):
        return f"{value:.0f}"
    if metric == "rms_mm":
        return f"{value:.4f}"
    if metric == "rms_rad":
        return f"{value:.3g}"
    if metric in ("deflection_m", "height_error_m"):
        return f"{value * 1e3:.3f}"
    if metric in ("stable_dt_s", "step_s"):
        return f"{value * 1e6:.1f}"
    if metric == "twist_rate_rad_per_m":
        return f"{value:.5f}"
    return f"{value:.1f}"


def _params_text(params: dict) -> str:
    keys = ("mode", "particles", "triangles", "tets", "bodies", "joint_dofs", "worlds", "steps", "dt")
    shown = [f"{k}={params[k]}" for k in keys if k in params]
    rest = [f"{k}={v}" for k, v in params.items()  # lists (e.g. an import's warnings) only in the JSON
            if k not in keys and k not in ("device", "precision", "repeats") and not isinstance(v, (list, dict))]
    return " ".join(shown + rest)


def format_table(records: list[dict]) -> str:
    """A human-readable, column-aligned table of records, with units."""
    header = ("suite", "case", "metric", "value", "unit", "params")
    rows = [
        (r["suite"], r["case"], r["metric"], format_value(r["metric"], r["value"]), METRIC_UNITS.get(r["metric"], ""),
         _params_text(r["params"]))
        for r in records
    ]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [str(c).rjust(w) if i == 3 else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    if records:
        devices = sorted({str(r["params"].get("device", "?")) for r in records})
        precisions = sorted({str(r["params"].get("precision", "?")) for r in records})
        lines.append(f"(device {', '.join(devices)}; precision {', '.join(precisions)})")
    return "\n".join(lines)


def summary(records: list[dict]) -> str:
    """The headline metrics of some records on one line (for progress output)."""
    parts = []
    for r in records:
        if r["metric"] in ("steps_per_s", "world_steps_per_s", "backward_over_forward", "launches_per_step"):
            parts.append(f"{r['metric']}={format_value(r['metric'], r['value'])}")
    return ", ".join(parts)
