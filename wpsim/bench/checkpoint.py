"""Benchmark suite ``checkpoint``: peak memory and wall time of full-tape versus
checkpointed rollouts (``wpsim.diff.Rollout``) of a falling cloth.

Warp's allocation tracker reports a process-wide peak, so every (T, mode) configuration
runs in its own worker process (``wpsim.bench.process``). A worker first runs a 2-step
rollout (kernel loading), then tracks the Warp allocations from building the model to the
end of the backward pass; ``wall_s`` covers forward + backward only, and
``params["max_rss_bytes"]`` is the worker's peak resident set size (whole process: Python,
tapes, Warp's CPU arrays). ``memory_ratio`` is full-mode peak / checkpoint-mode peak.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np
import warp as wp

from wpsim.bench.process import run_worker, tracked_peak
from wpsim.bench.records import progress, record, timed
from wpsim.diff import Rollout
from wpsim.diff.losses import squared_distance
from wpsim.solvers import SemiImplicitSolver
from wpsim.tasks import scene_library

SUITE = "checkpoint"
WORKER_MODULE = "wpsim.bench.checkpoint"
"""Run as ``python -m`` by the suite (``__name__`` is ``__main__`` when run that way)."""
DT = 1.0e-3
"""Time step (s); the cloth scene is stable at it."""


def suite_config(quick: bool) -> tuple[int, tuple]:
    """(cloth cells per side, horizons T in steps) of a suite run."""
    return (4, (20, 80)) if quick else (16, (1000, 10000))


def _rollout(device, dim: int, steps: int, mode: str, levels: int = 1):
    """The benchmark rollout: a dim x dim cloth falling onto a sphere for ``steps`` steps,
    loss = squared distance (m^2) of the final positions to the initial ones 0.3 m lower."""
    model = scene_library.cloth_on_sphere(dim).finalize(device=device, requires_grad=True)
    solver = SemiImplicitSolver(model)
    targets = wp.array(model.particle_q.numpy() - np.array([0.0, 0.0, 0.3]), dtype=model.vec3, device=model.device)

    def loss_fn(k, state, loss):
        if k == steps:
            squared_distance(state.particle_q, targets, loss=loss)

    rollout = Rollout(solver, steps, DT, loss_fn, mode=mode, levels=levels)
    return model, rollout, model.state(requires_grad=True)


def measure(device, dim: int, steps: int, mode: str, levels: int = 1) -> dict:
    """Measure one configuration in this process (call it in a fresh process)."""
    device = wp.get_device(device)
    _, warm, warm_state = _rollout(device, dim, 2, mode, levels)
    warm.forward(warm_state)
    warm.backward()

    def differentiate():
        model, rollout, state = _rollout(device, dim, steps, mode, levels)

        def forward_backward():
            value = rollout.forward(state)
            rollout.backward()
            return value

        wall, loss = timed(forward_backward, device)
        return model, rollout, state, wall, loss

    peak, (model, rollout, state, wall, loss) = tracked_peak(differentiate)
    if not np.isfinite(state.particle_q.grad.numpy()).all():
        raise FloatingPointError("benchmark gradient of the initial positions is not finite")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "peak_memory_bytes": peak,
        "wall_s": wall,
        "max_rss_bytes": rss * (1 if sys.platform == "darwin" else 1024),
        "particles": model.particle_count,
        "segment_length": rollout.segment_lengths if mode == "checkpoint" else None,
        "precision": "float64" if model.dtype == wp.float64 else "float32",
        "loss": loss,
    }


def checkpoint_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``checkpoint``: for T in (1,000, 10,000) steps (quick: 20, 80 on a tiny cloth),
    ``peak_memory_bytes`` and ``wall_s`` (forward + backward) of full mode and of checkpoint
    mode with one and two levels (``params["levels"]``), and the full/one-level
    ``memory_ratio``."""
    device = wp.get_device(device)
    dim, horizons = suite_config(quick)
    records = []
    for steps in horizons:
        peaks = {}
        for mode, levels in (("full", None), ("checkpoint", 1), ("checkpoint", 2)):
            start = time.perf_counter()
            found = run_worker(WORKER_MODULE, ["--device", str(device), "--dim", str(dim), "--steps", str(steps),
                                               "--mode", mode, "--levels", str(levels or 1)])
            params = {"T": steps, "mode": mode, "levels": levels, "device": str(device),
                      "precision": found["precision"], "particles": found["particles"],
                      "segment_length": found["segment_length"], "dt": DT, "max_rss_bytes": found["max_rss_bytes"]}
            records.append(record(SUITE, "cloth", params, "peak_memory_bytes", found["peak_memory_bytes"]))
            records.append(record(SUITE, "cloth", params, "wall_s", found["wall_s"]))
            peaks[mode, levels] = found["peak_memory_bytes"]
            progress(f"checkpoint/cloth T={steps} {mode}{'' if levels is None else f' ({levels} level)'}: peak "
                     f"{found['peak_memory_bytes'] / 2**20:.2f} MiB, {found['wall_s']:.2f} s "
                     f"({time.perf_counter() - start:.1f} s)")
        params = {"T": steps, "mode": "full/checkpoint", "device": str(device), "precision": found["precision"],
                  "particles": found["particles"], "dt": DT}
        records.append(record(SUITE, "cloth", params, "memory_ratio", peaks["full", None] / peaks["checkpoint", 1]))
    return records


def main(argv=None) -> int:
    """Command line: ``--worker`` measures one configuration and prints one JSON line;
    without it the whole suite runs and its records are printed as JSON."""
    parser = argparse.ArgumentParser(description="checkpointed-rollout memory/time benchmark")
    parser.add_argument("--worker", action="store_true", help="measure one configuration (internal)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dim", type=int, default=16, help="cloth cells per side (worker)")
    parser.add_argument("--steps", type=int, default=1000, help="horizon T in steps (worker)")
    parser.add_argument("--mode", choices=("full", "checkpoint"), default="checkpoint", help="rollout mode (worker)")
    parser.add_argument("--levels", type=int, choices=(1, 2), default=1, help="checkpoint levels (worker)")
    parser.add_argument("--quick", action="store_true", help="small suite (seconds)")
    args = parser.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    if args.worker:
        result = measure(args.device, args.dim, args.steps, args.mode, args.levels)
    else:
        result = checkpoint_suite(args.device, args.quick)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
