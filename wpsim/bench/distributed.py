"""Benchmark suite ``distributed``: ``value_and_grad`` of a sharded system identification on
Ray workers against the same shards in this process.

The load is the arm's measured run (``assets/arm_2link_sysid.csv``) cut into W windows of T
steps (``wpsim.distributed.window_scenes``: float64, full-tape rollouts of 1 ms steps, 6
parameters); one call is the loss and gradient summed over the windows. Three pools hold the
same shards: ``LocalPool`` (in process), a ``WorkerPool`` of 1 worker and one of 2 workers.
Their calls are interleaved (in-process, 1 worker, 2 workers, again ``repeats`` times, best
of each), so that a change in the machine's load hits all three alike; the workers reserve
no Ray CPU so that both pools live side by side (only one computes at a time). The suite
checks that the three give the same loss and gradient (bitwise, on CPU workers).

Records (``wall_s`` per call of each pool; ``time_ratio``s measured in the same run):
- ``speedup`` = 1-worker time / 2-worker time: the throughput of 2 workers over 1;
- ``overhead_per_call`` = 1-worker time - in-process time (s): what a call costs on Ray
  beyond the computation (sending x, running the actor call, returning the results);
- the same three pools on ``tiny`` shards (2 windows of 2 steps), where the computation is
  negligible: the fixed overhead of a call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from wpsim.bench.records import progress, record, timed

SUITE = "distributed"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
ROBOT, DATA = ASSETS / "arm_2link.xml", ASSETS / "arm_2link_sysid.csv"


def suite_config(quick: bool) -> dict:
    """Windows, steps per window and repeats of the main case, and of the tiny one."""
    if quick:
        return {"windows": 4, "steps": 25, "repeats": 2, "tiny_repeats": 5}
    return {"windows": 8, "steps": 100, "repeats": 10, "tiny_repeats": 30}


def time_pools(windows: int, steps: int, repeats: int) -> dict:
    """Best wall time (s) of one ``value_and_grad`` per pool ("in_process", "1_worker",
    "2_workers"), the three calls interleaved ``repeats`` times; raises if they disagree."""
    from wpsim.distributed import LocalPool, WorkerPool, window_scenes

    scenes = window_scenes(ROBOT, DATA, windows=windows, duration=windows * steps * 1e-3)
    pools = {"in_process": LocalPool(scenes, "cpu")}
    try:
        for name, workers in (("1_worker", 1), ("2_workers", 2)):
            pools[name] = WorkerPool(scenes, workers, cpus_per_worker=0)
        x = pools["in_process"].space["x0"] * 1.1
        results = {name: pool.value_and_grad(x) for name, pool in pools.items()}  # warm-up: first gradients
        reference = results["in_process"]
        for name, (loss, grad) in results.items():
            if loss != reference[0] or not np.array_equal(grad, reference[1]):
                raise FloatingPointError(f"benchmark pool {name} gives another loss or gradient than in-process")
        best = {name: np.inf for name in pools}
        for _ in range(repeats):
            for name, pool in pools.items():
                best[name] = min(best[name], timed(lambda p=pool: p.value_and_grad(x), "cpu")[0])
        return best
    finally:
        for pool in pools.values():
            pool.close()


def _records(case: str, params: dict, best: dict) -> list:
    """wall_s of each pool, the speedup and the overhead per call, with a progress line."""
    speedup = best["1_worker"] / best["2_workers"]
    overhead = best["1_worker"] - best["in_process"]
    out = [record(SUITE, case, {**params, "mode": name}, "wall_s", wall) for name, wall in best.items()]
    out.append(record(SUITE, case, {**params, "mode": "1_worker/2_workers"}, "time_ratio", speedup))
    out.append(record(SUITE, case, {**params, "mode": "overhead_per_call"}, "wall_s", max(overhead, 0.0)))
    progress(f"distributed/{case} {params['windows']} windows x {params['steps']} steps: in-process "
             f"{best['in_process'] * 1e3:.1f} ms, 1 worker {best['1_worker'] * 1e3:.1f} ms, 2 workers "
             f"{best['2_workers'] * 1e3:.1f} ms per value_and_grad; 2 workers {speedup:.2f}x the throughput of 1; "
             f"overhead {overhead * 1e3:.2f} ms per call against in-process")
    return out


def distributed_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``distributed`` (see the module docstring); starts a new local Ray on this
    machine's CPUs, listening on the loopback address only (``wpsim.distributed.transport.start_ray``;
    never joins a cluster), unless this process has one. The workers run on the CPU whatever
    ``device`` is."""
    try:
        import ray
    except ImportError as error:
        raise ImportError("benchmark suite 'distributed' needs Ray: pip install 'wpsim[distributed]'") from error
    from wpsim.distributed.transport import start_ray

    config = suite_config(quick)
    started = not ray.is_initialized()
    if started:  # bound to the loopback address, as a pool's own Ray
        start_ray(ray, "local", {"num_cpus": os.cpu_count(), "log_to_driver": False})
    try:
        base = {"device": "cpu", "precision": "float64", "cpus": os.cpu_count()}
        main = {**base, "windows": config["windows"], "steps": config["steps"], "repeats": config["repeats"]}
        tiny = {**base, "windows": 2, "steps": 2, "repeats": config["tiny_repeats"]}
        records = _records("arm_windows", main, time_pools(config["windows"], config["steps"], config["repeats"]))
        return records + _records("tiny", tiny, time_pools(2, 2, config["tiny_repeats"]))
    finally:
        if started:
            ray.shutdown()


def main(argv=None) -> int:
    """``python -m wpsim.bench.distributed [--quick]``: the suite's records as JSON on stdout."""
    parser = argparse.ArgumentParser(description="distributed (Ray) value_and_grad benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    args = parser.parse_args(argv)
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    print(json.dumps(distributed_suite(quick=args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
