"""Benchmark suite ``implicit_integration``: memory of differentiating the backward-Euler
solver implicitly (IFT adjoint) versus unrolling its Newton-Krylov iterations on the tape.

Each (iterations, mode) case runs in its own process: a soft block dropped on the ground,
a few backward-Euler steps with exactly ``iterations`` Newton iterations per step
(tolerance 0, a loose inner solve so that every iteration still changes the iterate), a
loss on the final positions, and the backward pass. The recorded peak is that of all Warp
allocations made from building the model to the end of the backward pass.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

from wpsim.bench.process import run_worker, tracked_peak, worker_main
from wpsim.bench.records import progress, record
from wpsim.core.builder import ModelBuilder
from wpsim.diff.losses import squared_distance
from wpsim.solvers import ImplicitEulerSolver

ITERATIONS = (1, 5, 20)
MODES = ("unrolled", "implicit")
WORKER_MODULE = "wpsim.bench.implicit_integration"
"""Run as ``python -m`` by the suite (``__name__`` is ``__main__`` when run that way)."""
DT = 5.0e-3
"""Time step (s): 10-17x the semi-implicit stability limit of the full-size block (the
semi-implicit solver is stable on it at 0.3 ms and blows up at 0.5 ms)."""


def _case_size(quick: bool) -> tuple[int, int]:
    """(cells per block edge, steps)."""
    return (2, 2) if quick else (4, 3)


def measure(iterations: int, mode: str, quick: bool, device=None) -> dict:
    """Run one case in this process; returns its peak memory, wall time and solve details."""
    cells, steps = _case_size(quick)

    def differentiate():
        b = ModelBuilder()
        b.add_ground_plane(ke=1.0e4, kd=1.0, mu=0.5)
        b.add_soft_grid(pos=(0.0, 0.0, 0.01), vel=(0.3, 0.0, -0.5), dim_x=cells, dim_y=cells, dim_z=cells,
                        cell_x=0.02, cell_y=0.02, cell_z=0.02, density=1000.0, young_modulus=1.0e5,
                        poisson_ratio=0.3, kd=1.0)
        model = b.finalize(device=device, requires_grad=True, dtype=wp.float64)
        solver = ImplicitEulerSolver(model, adjoint=mode, newton_iterations=iterations, tolerance=0.0,
                                     krylov_iterations=4)
        state = model.state()
        newton = []
        tape = wp.Tape()
        with tape:
            current = state
            for _ in range(steps):
                following = model.state()
                solver.step(current, following, None, DT)
                newton.append(solver.last_solve.newton_iterations)
                current = following
            loss = squared_distance(current.particle_q, wp.zeros_like(current.particle_q))
        tape.backward(loss)
        grad = state.particle_qd.grad.numpy()
        return model, newton, float(np.linalg.norm(grad)), solver.last_solve.residual

    start = time.perf_counter()
    peak, (model, newton, grad_norm, residual) = tracked_peak(differentiate)
    return {
        "peak_memory_bytes": peak,
        "wall_s": time.perf_counter() - start,
        "newton_iterations_run": newton,
        "gradient_norm": grad_norm,
        "final_residual_m_per_s": residual,
        "particles": model.particle_count,
        "tets": model.tet_count,
        "steps": steps,
        "device": str(model.device),
    }


def implicit_integration_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``implicit_integration``: backward peak memory at 1, 5, 20 Newton iterations,
    unrolled vs implicit adjoint, plus each mode's growth from 1 to 20 iterations."""
    records, peaks = [], {}
    for mode in MODES:
        for iterations in ITERATIONS:
            args = [str(iterations), mode, "--device", str(wp.get_device(device))] + (["--quick"] if quick else [])
            found = run_worker(WORKER_MODULE, args)
            if found["newton_iterations_run"] != [iterations] * found["steps"]:
                raise RuntimeError(f"implicit_integration: asked for {iterations} Newton iterations per step, "
                                   f"ran {found['newton_iterations_run']}")
            params = {"iterations": iterations, "mode": mode, "precision": "float64", "dt": DT,
                      **{k: found[k] for k in ("particles", "tets", "steps", "device", "gradient_norm",
                                               "final_residual_m_per_s")}}
            records.append(record("implicit_integration", "soft_block", params, "peak_memory_bytes",
                                  found["peak_memory_bytes"]))
            records.append(record("implicit_integration", "soft_block", params, "wall_s", found["wall_s"]))
            peaks[mode, iterations] = found["peak_memory_bytes"]
            progress(f"implicit_integration/{mode} x{iterations}: peak {found['peak_memory_bytes'] / 2**20:.3f} MiB")
    for mode in MODES:
        growth = peaks[mode, ITERATIONS[-1]] / peaks[mode, ITERATIONS[0]]
        records.append(record("implicit_integration", "soft_block",
                              {"mode": mode, "iterations": f"{ITERATIONS[-1]}/{ITERATIONS[0]}", "precision": "float64",
                               "device": found["device"]}, "memory_ratio", growth))
    return records


def _parse_case(fields: list) -> tuple:
    """(iterations, mode) from the worker's command-line fields."""
    if fields[1] not in MODES:
        raise ValueError(f"MODE must be one of {MODES}")
    return int(fields[0]), fields[1]


def main(argv=None) -> int:
    """Command line: ``--worker ITERATIONS MODE`` measures one case and prints one JSON line;
    without ``--worker`` the whole suite runs and its records are printed as JSON."""
    return worker_main(argv, __doc__.splitlines()[0], ("ITERATIONS", "MODE"), _parse_case, measure,
                       implicit_integration_suite)


if __name__ == "__main__":
    raise SystemExit(main())
