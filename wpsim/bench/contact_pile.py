"""Suite ``contact_pile``: the broad phase of penalty rigid contact on piles of boxes
(``scene_library.box_pile``, 64, 256 and 1,024 boxes, settled for 0.3 s): candidate pairs
the narrow phase tests per step and steps per second, with the broad phase and testing
every candidate pair (the baseline), measured in the same run from the same state."""

from __future__ import annotations

import warp as wp

from wpsim.apps.scene_library import box_pile
from wpsim.bench.records import progress, record, timed
from wpsim.solvers import SemiImplicitSolver

PILES = ((8, 1), (8, 4), (16, 4))
"""(side, layers) of the piles: 64, 256 and 1,024 boxes."""
DT = 1.0e-3
"""Time step (s)."""
SETTLE_STEPS = 300
"""Steps (with the broad phase) before the timing: the layers come to rest on each other."""


def _settled(model, steps: int):
    """The pile's state after ``steps`` steps (the layers come to rest on each other)."""
    solver = SemiImplicitSolver(model, broad_phase=True)
    a, b = model.state(), model.state()
    for _ in range(steps):
        solver.step(a, b, None, DT)
        a, b = b, a
    return a


def _rate(solver, model, start, steps: int, device) -> tuple:
    """(steps/s over ``steps`` timed steps from ``start`` after 3 warm-up steps, mean pairs
    tested per timed step, read back after each step outside the timing)."""
    a, b = model.state(), model.state()
    a.assign(start)
    for _ in range(3):
        solver.step(a, b, None, DT)
        a, b = b, a
    total, tested = 0.0, 0
    phase = solver.broad_phase
    for _ in range(steps):
        seconds, _ = timed(lambda: solver.step(a, b, None, DT), device)
        total += seconds
        a, b = b, a
        tested += phase.tested if phase is not None else model.contact_pair_count
    if not solver.health().ok:
        raise RuntimeError(f"contact_pile: {solver.health()}")
    return steps / total, tested / steps


def contact_pile_suite(device=None, quick: bool = False) -> list[dict]:
    """Records per pile: pairs tested per step (``count``) and ``steps_per_s`` with and
    without the broad phase, and ``time_ratio`` = (step time with the broad phase) / (step
    time testing every pair, the baseline)."""
    device = wp.get_device(device)
    records = []
    for side, layers in PILES[:2] if quick else PILES:
        model = box_pile(side, layers).finalize(device=device)
        boxes = side * side * layers
        params = {"boxes": boxes, "candidate_pairs": model.contact_pair_count, "dt": DT, "device": str(device),
                  "precision": "float32"}
        rates = {}
        start = _settled(model, 20 if quick else SETTLE_STEPS)
        for broad in (True, False):
            steps = 50 if broad or boxes <= 64 else max(3, 50 * 64 // boxes)
            rate, tested = _rate(SemiImplicitSolver(model, broad_phase=broad), model, start, 5 if quick else steps,
                                 device)
            mode = "broad_phase" if broad else "every_pair"
            rates[mode] = rate
            case = f"pile_{boxes}_{mode}"
            records += [record("contact_pile", case, {**params, "mode": mode}, "count", tested),
                        record("contact_pile", case, {**params, "mode": mode}, "steps_per_s", rate)]
            progress(f"contact_pile {case}: {tested:.0f} pairs tested per step of {model.contact_pair_count}, "
                     f"{rate:.1f} steps/s")
        records.append(record("contact_pile", f"pile_{boxes}", params, "time_ratio",
                              rates["every_pair"] / rates["broad_phase"]))
    return records
