"""Suite ``contact_pile``: the broad phase of rigid contact on piles of boxes
(``scene_library.box_pile``, settled for 0.3 s): candidate pairs the narrow phase tests per
step and steps per second, with the broad phase and testing every candidate pair (the
baseline), measured in the same run from the same state; penalty contact on 64, 256 and
1,024 boxes, soft-constraint contact on 64 and 256 (every pair of 1,024 boxes would need
some 15 million constraint rows), with its islands (the boxes resting on each other)."""

from __future__ import annotations

import warp as wp

from wpsim.bench.records import progress, record, timed
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.tasks.scene_library import box_pile

PILES = ((8, 1), (8, 4), (16, 4))
"""(side, layers) of the piles: 64, 256 and 1,024 boxes."""
SOFT_PILES = PILES[:2]
"""The piles stepped with soft-constraint contact."""
DT = 1.0e-3
"""Time step (s)."""
SETTLE_STEPS = 300
"""Steps (with the broad phase) before the timing: the layers come to rest on each other."""


def _solver(model, contact: str, broad: bool):
    """A ``SemiImplicitSolver`` with ``contact`` "penalty" or "soft" and the broad phase on or off."""
    soft = SoftContactOptions() if contact == "soft" else None
    return SemiImplicitSolver(model, broad_phase=broad, soft_contact=soft)


def _settled(model, contact: str, steps: int):
    """The pile's state after ``steps`` steps (the layers come to rest on each other)."""
    solver = _solver(model, contact, True)
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
    """Records per contact model and pile: pairs tested per step (``count``) and
    ``steps_per_s`` with and without the broad phase, and ``time_ratio`` = (step time with
    the broad phase) / (step time testing every pair, the baseline); for soft-constraint
    contact also the islands of the last step and the dofs of the largest (``count``)."""
    device = wp.get_device(device)
    records = []
    for contact, piles in (("penalty", PILES), ("soft", SOFT_PILES)):
        for side, layers in piles[: (2 if contact == "penalty" else 1)] if quick else piles:
            records += _pile_records(contact, side, layers, device, quick)
    return records


def _pile_records(contact: str, side: int, layers: int, device, quick: bool) -> list[dict]:
    """The records of one pile with one contact model (case names start with "soft_" for
    soft-constraint contact)."""
    model = box_pile(side, layers).finalize(device=device)
    boxes = side * side * layers
    params = {"boxes": boxes, "candidate_pairs": model.contact_pair_count, "dt": DT, "device": str(device),
              "precision": "float32", "contact": contact}
    name = f"{'soft_' if contact == 'soft' else ''}pile_{boxes}"
    records, rates = [], {}
    start = _settled(model, contact, 20 if quick else SETTLE_STEPS)
    for broad in (True, False):
        steps = 50 if broad or boxes <= 64 else max(3, 50 * 64 // boxes)
        solver = _solver(model, contact, broad)
        rate, tested = _rate(solver, model, start, 5 if quick else steps, device)
        mode = "broad_phase" if broad else "every_pair"
        rates[mode] = rate
        case = f"{name}_{mode}"
        records += [record("contact_pile", case, {**params, "mode": mode}, "count", tested),
                    record("contact_pile", case, {**params, "mode": mode}, "steps_per_s", rate)]
        line = (f"contact_pile {case}: {tested:.0f} pairs tested per step of {model.contact_pair_count}, "
                f"{rate:.1f} steps/s")
        if contact == "soft":
            islands = solver.soft_contact.islands
            records += [record("contact_pile", f"{case}_islands", params, "count", islands.count),
                        record("contact_pile", f"{case}_largest_island_dofs", params, "count", islands.largest)]
            line += f", {islands.count} islands, the largest of {islands.largest} dofs"
        progress(line)
    records.append(record("contact_pile", name, params, "time_ratio", rates["every_pair"] / rates["broad_phase"]))
    return records
