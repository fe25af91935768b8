"""Benchmark suite ``ilqr_memory``: the largest batch of box-push worlds whose iLQR iteration
fits a memory cap, with the soft-contact linearisations by the implicit adjoint versus the
unrolled one.

A case is one iLQR iteration's simulation work for W worlds of ``wpsim.tasks.box_push``
(float64): the problem and its models built, the plans' rollout, and the linearisation of
every plan step with all W x nx Jacobian rows in one batch (one copy of the scene per row,
each plan step recorded and differentiated), with exactly ``iterations`` Newton iterations
per contact solve. Its peak is that of all Warp allocations from building the problem to the
last backward, in a fresh process. Two small batches give the slope and an affine
prediction of the largest W under the cap; a process runs it, and where its peak is above
the cap (a part of the peak that grows faster than W: building the models' candidate pairs
once did), bisection on measured peaks finds the largest batch that fits.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.bench.process import iterations_mode_count, run_worker, tracked_peak, worker_main
from wpsim.bench.records import progress, record

MODES = ("implicit", "unrolled")
WORKER_MODULE = "wpsim.bench.ilqr_memory"
PLAN_STEPS = 2
"""Plan steps linearised: the tape holds one plan step at a time, so the peak does not grow with them."""


def measure(iterations: int, mode: str, worlds: int, device=None) -> dict:
    """One case in this process: its peak Warp memory (bytes) and the copies it stepped."""
    from wpsim.solvers import SoftContactOptions
    from wpsim.tasks.box_push import NX, initial_states, make_problem

    x0, goals = initial_states(worlds, seed=1)
    contact = SoftContactOptions(time_constant=0.02, iterations=iterations, fixed_iterations=True, adjoint=mode)

    def iteration():
        problem = make_problem(x0, goals, PLAN_STEPS, device=device, jacobian_worlds=worlds * NX, contact=contact)
        U = problem.initial_controls()
        _, X = problem.evaluate(U)
        A, _ = problem.linearise(X, U)
        return problem, A

    iteration()  # loads every kernel
    peak, (problem, A) = tracked_peak(iteration)
    return {"peak_memory_bytes": peak, "copies": worlds * NX + worlds, "finite": bool(np.isfinite(A).all()),
            "device": str(problem.plans.model.device)}


def _case(iterations: int, mode: str, worlds: int, device) -> dict:
    return run_worker(WORKER_MODULE, [str(iterations), mode, str(worlds), "--device", str(wp.get_device(device))])


def largest_batch(iterations: int, mode: str, cap: int, device=None) -> tuple:
    """(largest W whose measured peak is within ``cap`` bytes, {W: case} of every process
    run): the affine prediction from 1 and 2 worlds, then, where the predicted batch does
    not fit, bisection on measured peaks down to 1/32 of the batch."""
    cases = {w: _case(iterations, mode, w, device) for w in (1, 2)}
    slope = cases[2]["peak_memory_bytes"] - cases[1]["peak_memory_bytes"]
    fits, fails = 2, int((cap - (cases[1]["peak_memory_bytes"] - slope)) // slope)
    while fails - fits > max(1, fits // 32):
        worlds = fails if fails not in cases else (fits + fails) // 2
        cases[worlds] = _case(iterations, mode, worlds, device)
        if cases[worlds]["peak_memory_bytes"] <= cap:
            fits = worlds
            if worlds == fails:  # the prediction fits: peaks are affine up to it
                break
        else:
            fails = worlds
    return fits, cases


def ilqr_memory_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``ilqr_memory``: for 10 and 50 Newton iterations (quick: 10) and both adjoints,
    the largest batch under the cap (1 GiB; quick: 64 MiB) and the peak of every batch
    measured on the way, and the implicit/unrolled ratio of the batches."""
    cap = (64 if quick else 1024) * 2**20
    iteration_counts = (10,) if quick else (10, 50)
    records, largest = [], {}
    for iterations in iteration_counts:
        for mode in MODES:
            worlds, cases = largest[iterations, mode] = largest_batch(iterations, mode, cap, device)
            base = {"iterations": iterations, "mode": mode, "scene": "box_push", "precision": "float64",
                    "cap_bytes": cap, "device": cases[1]["device"]}
            for w, found in sorted(cases.items()):
                records.append(record("ilqr_memory", "box_push_iteration",
                                      {**base, "worlds": w, "finite": found["finite"]}, "peak_memory_bytes",
                                      found["peak_memory_bytes"]))
            slope = cases[2]["peak_memory_bytes"] - cases[1]["peak_memory_bytes"]
            records.append(record("ilqr_memory", "box_push_iteration",
                                  {**base, "per_world_bytes_1_to_2": slope, "processes": len(cases)}, "count",
                                  worlds))
            progress(f"ilqr_memory/{mode} x{iterations}: {worlds} worlds under {cap / 2**20:.0f} MiB (measured "
                     f"{cases[worlds]['peak_memory_bytes'] / 2**20:.1f} MiB; {slope / 2**20:.2f} MiB per world "
                     f"from 1 to 2; {len(cases)} processes)")
        records.append(record("ilqr_memory", "box_push_iteration",
                              {"iterations": iterations, "mode": "implicit/unrolled", "cap_bytes": cap},
                              "memory_ratio", largest[iterations, "implicit"][0] / largest[iterations, "unrolled"][0]))
    return records


def main(argv=None) -> int:
    """Command line: ``--worker ITERATIONS MODE WORLDS`` measures one case and prints one JSON
    line; without ``--worker`` the whole suite runs and its records are printed as JSON."""
    return worker_main(argv, __doc__.splitlines()[0], ("ITERATIONS", "MODE", "WORLDS"),
                       iterations_mode_count(MODES),
                       lambda iterations, mode, worlds, device, quick: measure(iterations, mode, worlds, device),
                       ilqr_memory_suite)


if __name__ == "__main__":
    raise SystemExit(main())
