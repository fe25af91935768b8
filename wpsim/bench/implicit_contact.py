"""Benchmark suite ``implicit_contact``: backward memory and time of the soft-constraint
contact solve differentiated implicitly (one solve at the solution) versus unrolled (every
Newton iteration on the tape).

Each case runs in its own process: ``boxes`` boxes (0.2 m, 4 kg) resting on the ground,
one per world, each touching it at its four bottom corners (``contacts`` = 4 x boxes);
``steps`` steps of 1 ms with exactly ``iterations`` Newton iterations each; a loss on the
final joint coordinates and velocities; the backward pass. The recorded peak is that of
all Warp allocations from building the model to the end of the backward pass. Mode
``none`` is the same rollout of the same boxes without the ground (no contact, no contact
solve): the baseline that shows how much of each peak the contact solve adds.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

from wpsim.bench.process import iterations_mode_count, run_worker, tracked_peak, worker_main
from wpsim.bench.records import progress, record
from wpsim.core.builder import ModelBuilder
from wpsim.diff.losses import joint_state_loss
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

MODES = ("unrolled", "implicit")
BASELINE = "none"
WORKER_MODULE = "wpsim.bench.implicit_contact"
DT, STEPS = 1e-3, 3
SINK = 1.0e-4
"""m: the boxes start this far into the ground, so all four corners touch from the start."""


def measure(iterations: int, mode: str, boxes: int, device=None) -> dict:
    """One case in this process: peak memory (bytes), forward and backward wall times (after
    a one-step warm-up that loads every kernel)."""

    def differentiate(steps: int = STEPS):
        single = ModelBuilder()
        if mode != BASELINE:
            single.add_ground_plane(mu=0.5)
        box = single.add_body()
        single.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.5)
        single.add_joint_free(box, pos=(0.0, 0.0, 0.1 - SINK), lin_vel=(0.05, 0.0, 0.0))
        builder = ModelBuilder()
        builder.replicate(single, boxes, spacing=(1.0, 0.0, 0.0))
        model = builder.finalize(device=device, requires_grad=True, dtype=wp.float64)
        options = None if mode == BASELINE else SoftContactOptions(iterations=iterations, fixed_iterations=True,
                                                                       adjoint=mode)
        solver = SemiImplicitSolver(model, soft_contact=options)
        weights_q = wp.array(np.linspace(-1.0, 1.0, model.joint_coord_count), dtype=wp.float64, device=model.device)
        weights_qd = wp.array(np.linspace(1.0, -1.0, model.joint_dof_count), dtype=wp.float64, device=model.device)
        state = model.state()
        start = time.perf_counter()
        tape = wp.Tape()
        with tape:
            current = state
            for _ in range(steps):
                following = model.state()
                solver.step(current, following, None, DT)
                current = following
            loss = joint_state_loss(current, weights_q, weights_qd)
        wp.synchronize_device(model.device)
        forward_s = time.perf_counter() - start
        start = time.perf_counter()
        tape.backward(loss)
        wp.synchronize_device(model.device)
        backward_s = time.perf_counter() - start
        grad = state.joint_qd.grad.numpy()
        return model, solver, forward_s, backward_s, float(np.linalg.norm(grad))

    differentiate(1)
    peak, (model, solver, forward_s, backward_s, grad_norm) = tracked_peak(differentiate)
    return {
        "peak_memory_bytes": peak,
        "forward_s": forward_s,
        "backward_s": backward_s,
        "iterations_run": iterations if solver.soft_contact is None else max(solver.soft_contact.last_iterations,
                                                                            solver.health().contact_iterations),
        "contacts": 0 if solver.soft_contact is None else solver.soft_contact.active_contacts(),
        "gradient_norm": grad_norm,
        "boxes": boxes,
        "device": str(model.device),
    }


def _case(iterations: int, mode: str, boxes: int, device) -> dict:
    found = run_worker(WORKER_MODULE, [str(iterations), mode, str(boxes), "--device", str(wp.get_device(device))])
    contacts = 0 if mode == BASELINE else 4 * boxes
    if found["iterations_run"] != iterations or found["contacts"] != contacts:
        raise RuntimeError(f"implicit_contact: asked for {iterations} iterations and {contacts} contacts, got "
                           f"{found['iterations_run']} and {found['contacts']}")
    return found


def implicit_contact_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``implicit_contact``: backward peak memory at 1, 10, 100 Newton iterations
    (16 contacts) and at 16 and 256 contacts (10 iterations), unrolled vs implicit, with
    the growth and ratio records and backward times; and the contact-free baseline of the
    same boxes, with the ratio of the memory each mode adds to it."""
    iteration_counts = (1, 10) if quick else (1, 10, 100)
    contact_counts = (16, 64) if quick else (16, 256)
    records, found = [], {}

    def add(iterations, mode, contacts):
        key = (iterations, mode, contacts)
        if key not in found:
            found[key] = _case(iterations, mode, contacts // 4, device)
            result = found[key]
            params = {"iterations": iterations, "contacts": result["contacts"], "boxes": result["boxes"], "mode": mode,
                      "steps": STEPS,
                      "dt": DT, "precision": "float64", "device": result["device"],
                      "gradient_norm": result["gradient_norm"]}
            records.append(record("implicit_contact", "boxes_on_ground", params, "peak_memory_bytes",
                                  result["peak_memory_bytes"]))
            records.append(record("implicit_contact", "boxes_on_ground", {**params, "phase": "backward"}, "wall_s",
                                  result["backward_s"]))
            progress(f"implicit_contact/{mode} x{iterations} boxes={contacts // 4} contacts={result['contacts']}: peak "
                     f"{result['peak_memory_bytes'] / 2**20:.3f} MiB, backward {result['backward_s']:.3f} s")
        return found[key]

    for mode in MODES:
        for iterations in iteration_counts:
            add(iterations, mode, contact_counts[0])
        for contacts in contact_counts:
            add(10, mode, contacts)
    device_name = next(iter(found.values()))["device"]
    for mode in MODES:
        first = found[iteration_counts[0], mode, contact_counts[0]]["peak_memory_bytes"]
        for iterations in iteration_counts[1:]:
            growth = found[iterations, mode, contact_counts[0]]["peak_memory_bytes"] / first
            records.append(record("implicit_contact", "boxes_on_ground",
                                  {"mode": mode, "iterations": f"{iterations}/{iteration_counts[0]}",
                                   "contacts": contact_counts[0], "precision": "float64", "device": device_name},
                                  "memory_ratio", growth))
    for contacts in contact_counts:
        unrolled, implicit = found[10, "unrolled", contacts], found[10, "implicit", contacts]
        base = {"iterations": 10, "contacts": contacts, "precision": "float64", "device": device_name}
        records.append(record("implicit_contact", "boxes_on_ground", {**base, "mode": "unrolled/implicit"},
                              "memory_ratio", unrolled["peak_memory_bytes"] / implicit["peak_memory_bytes"]))
        baseline = add(10, BASELINE, contacts)["peak_memory_bytes"]
        records.append(record("implicit_contact", "boxes_on_ground",
                              {**base, "mode": "unrolled/implicit", "share": "added to the contact-free baseline"},
                              "memory_ratio", (unrolled["peak_memory_bytes"] - baseline)
                              / (implicit["peak_memory_bytes"] - baseline)))
        records.append(record("implicit_contact", "boxes_on_ground",
                              {**base, "mode": "unrolled/implicit", "phase": "backward"}, "time_ratio",
                              unrolled["backward_s"] / implicit["backward_s"]))
    return records


def main(argv=None) -> int:
    """Command line: ``--worker ITERATIONS MODE BOXES`` measures one case and prints one JSON
    line; without ``--worker`` the whole suite runs and its records are printed as JSON."""
    return worker_main(argv, __doc__.splitlines()[0], ("ITERATIONS", "MODE", "BOXES"),
                       iterations_mode_count((*MODES, BASELINE)),
                       lambda iterations, mode, boxes, device, quick: measure(iterations, mode, boxes, device),
                       implicit_contact_suite)


if __name__ == "__main__":
    raise SystemExit(main())
