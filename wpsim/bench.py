"""Benchmark suites behind ``wpsim bench``: machine-readable records of simulator speed.

Every suite is a callable ``(device, quick) -> list[dict]`` registered in ``SUITES``. A
record is ``{"suite", "case", "params", "metric", "value"}``; ``params`` holds the scene
size, horizon, mode, device and precision, and metric names are shared across suites (see
``METRIC_UNITS``). Timings exclude kernel compilation (every case warms up first) and are
bracketed by ``wp.synchronize_device``; ratios are measured in the same run. Progress goes
to stderr, one line per case; stdout is left to the caller (JSON or ``format_table``).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import warp as wp

from . import scenes
from .builder import ModelBuilder
from .losses import joint_state_loss, linear_state_loss
from .model import Model, State
from .rollout import simulate
from .solvers import SemiImplicitSolver, SoftContactOptions

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
}
"""Metric names shared by all suites, with the unit ``format_table`` prints them in."""

WARMUP_STEPS = 3
"""Untimed steps run before any timing (kernel module load and first-launch costs)."""


@dataclass(frozen=True)
class SceneCase:
    """A benchmark scene: a builder factory, its stable time step (s), its world count and
    whether rigid contact is solved as soft constraints (``SoftContactOptions()``)."""

    name: str
    build: Callable[[], ModelBuilder]
    dt: float
    worlds: int = 1
    soft_contact: bool = False

    def solver(self, model: Model) -> SemiImplicitSolver:
        """The solver this case is measured with."""
        return SemiImplicitSolver(model, soft_contact=SoftContactOptions() if self.soft_contact else None)


@dataclass(frozen=True)
class Timing:
    """Horizon and repetition count of one suite run (repeats keep the best / median)."""

    steps: int
    repeats: int


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


def count_launches(fn: Callable[[], object]) -> int:
    """Number of ``wp.launch`` calls made while ``fn()`` runs (``wp.launch`` is patched
    meanwhile; hash-grid builds and array fills/copies are not kernel launches here)."""
    original = wp.launch
    calls = [0]

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    wp.launch = counting
    try:
        fn()
    finally:
        wp.launch = original
    return calls[0]


# ---------------------------------------------------------------------------- measurements
def _ping_pong(solver: SemiImplicitSolver, dt: float) -> Callable[[int], None]:
    """A function running n unrecorded steps that alternate between two states."""
    states = [solver.model.state(requires_grad=False), solver.model.state(requires_grad=False)]

    def run(n: int):
        for _ in range(n):
            solver.step(states[0], states[1], None, dt)
            states.reverse()

    return run


def measure_forward(solver: SemiImplicitSolver, dt: float, timing: Timing) -> dict:
    """Best-of-repeats forward speed (no tape) and launches of one unrecorded step."""
    model = solver.model
    run = _ping_pong(solver, dt)
    run(WARMUP_STEPS)
    launches = count_launches(lambda: run(1))
    best = min(timed(lambda: run(timing.steps), model.device)[0] for _ in range(timing.repeats))
    solver.check_health(raise_error=True)
    return {"steps_per_s": timing.steps / best, "launches_per_step": launches}


def _up_weights(model: Model) -> tuple:
    """Loss weights making ``_benchmark_loss`` the sum of particle heights (m) plus the sum
    of joint coordinates."""
    up = np.tile(np.asarray(model.up_vector, dtype=np.float64), (model.particle_count, 1))
    weight_q = wp.array(up, dtype=model.vec3, device=model.device)
    joint_q = wp.array(np.ones(model.joint_coord_count), dtype=model.dtype, device=model.device)
    joint_qd = wp.zeros(model.joint_dof_count, dtype=model.dtype, device=model.device)
    return weight_q, wp.zeros_like(weight_q), joint_q, joint_qd


def _benchmark_loss(state: State, weights) -> wp.array:
    loss = linear_state_loss(state, weights[0], weights[1])
    return joint_state_loss(state, weights[2], weights[3], loss)


def _recorded_rollout(solver: SemiImplicitSolver, steps: int, dt: float, weights) -> tuple[wp.Tape, wp.array, State]:
    """Record ``steps`` steps from the initial state and the height loss on a fresh tape."""
    state = solver.model.state(requires_grad=True)
    tape = wp.Tape()
    with tape:
        final = simulate(solver, state, steps, dt)
        loss = _benchmark_loss(final, weights)
    return tape, loss, state


def measure_gradient(solver: SemiImplicitSolver, dt: float, timing: Timing) -> dict:
    """Median recorded-forward and backward wall times, their ratio, and recorded launches per step."""
    model = solver.model
    weights = _up_weights(model)
    warm, warm_loss, _ = _recorded_rollout(solver, 1, dt, weights)
    recorded = len(warm.launches) - 3  # minus the loss launches
    warm.backward(loss=warm_loss)
    forward_s, backward_s = [], []
    for _ in range(timing.repeats):
        t_fwd, (tape, loss, state) = timed(lambda: _recorded_rollout(solver, timing.steps, dt, weights), model.device)
        t_bwd, _ = timed(lambda: tape.backward(loss=loss), model.device)
        forward_s.append(t_fwd)
        backward_s.append(t_bwd)
    solver.check_health(raise_error=True)
    for arr in (state.particle_q, state.joint_q):
        if not np.isfinite(arr.grad.numpy()).all():
            raise FloatingPointError("benchmark gradient of the initial state is not finite")
    ratios = [b / f for f, b in zip(forward_s, backward_s)]
    return {
        "tape_forward_s": statistics.median(forward_s),
        "tape_backward_s": statistics.median(backward_s),
        "backward_over_forward": statistics.median(ratios),
        "recorded_launches_per_step": recorded,
    }


# ---------------------------------------------------------------------------- forward suite
def _replicated(build: Callable[[], ModelBuilder], worlds: int, spacing) -> Callable[[], ModelBuilder]:
    """A builder factory placing ``worlds`` copies of ``build()`` side by side."""

    def make() -> ModelBuilder:
        b = ModelBuilder()
        b.replicate(build(), worlds, spacing)
        return b

    return make


def forward_cases(quick: bool) -> list[SceneCase]:
    """The scenes of the ``forward`` suite (small versions with ``quick``)."""
    n, dim, cells, worlds = (64, 8, 3, 4) if quick else (1000, 32, 10, 16)
    small = 2 if quick else 4
    return [
        SceneCase("particles", lambda: scenes.particles_on_ground(n), 1.0e-3),
        SceneCase("cloth", lambda: scenes.cloth_on_sphere(dim), 1.0e-3),
        SceneCase("soft_block", lambda: scenes.soft_block(cells), 2.0e-4),
        SceneCase(f"soft_block_{small}", lambda: scenes.soft_block(small), 2.0e-4),
        SceneCase(f"soft_block_{small}_x{worlds}", _replicated(lambda: scenes.soft_block(small), worlds, (0.2, 0.0, 0.0)),
                  2.0e-4, worlds),
    ]


def scene_params(model: Model, case: SceneCase, timing: Timing) -> dict:
    """The ``params`` object shared by all records of one scene."""
    return {
        "particles": model.particle_count,
        "triangles": model.tri_count,
        "tets": model.tet_count,
        "bodies": model.body_count,
        "joint_dofs": model.joint_dof_count,
        "worlds": model.num_worlds,
        "particle_contact": model.particle_max_neighbors > 0,
        "steps": timing.steps,
        "repeats": timing.repeats,
        "dt": case.dt,
        "device": str(model.device),
        "precision": "float64" if model.dtype == wp.float64 else "float32",
    }


def benchmark_scene(suite: str, case: SceneCase, device, timing: Timing) -> list[dict]:
    """Forward speed, launch counts and the backward/forward ratio of one scene, as records."""
    builder = case.build()
    fwd = measure_forward(case.solver(builder.finalize(device=device)), case.dt, timing)
    model = builder.finalize(device=device, requires_grad=True)
    grad = measure_gradient(case.solver(model), case.dt, timing)
    base = {**scene_params(model, case, timing), "contact": "soft" if case.soft_contact else "penalty"}

    def rec(metric, value, mode):
        return record(suite, case.name, {**base, "mode": mode}, metric, value)

    out = [rec("steps_per_s", fwd["steps_per_s"], "forward")]
    if model.num_worlds > 1:
        out.append(rec("world_steps_per_s", fwd["steps_per_s"] * model.num_worlds, "forward"))
    out += [
        rec("launches_per_step", fwd["launches_per_step"], "forward"),
        rec("recorded_launches_per_step", grad["recorded_launches_per_step"], "tape"),
        rec("wall_s", grad["tape_forward_s"], "tape_forward"),
        rec("wall_s", grad["tape_backward_s"], "tape_backward"),
        rec("backward_over_forward", grad["backward_over_forward"], "tape"),
    ]
    return out


def _scene_suite(suite: str, cases: list[SceneCase], device, quick: bool) -> list[dict]:
    """Records of ``benchmark_scene`` for every case, with one progress line each."""
    timing = Timing(steps=10, repeats=2) if quick else Timing(steps=100, repeats=5)
    records = []
    for case in cases:
        start = time.perf_counter()
        found = benchmark_scene(suite, case, device, timing)
        records += found
        progress(f"{suite}/{case.name}: {_summary(found)} ({time.perf_counter() - start:.1f} s)")
    return records


def forward_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``forward``: particles with contact, cloth, soft block and many worlds."""
    return _scene_suite("forward", forward_cases(quick), device, quick)


def rigid_cases(quick: bool) -> list[SceneCase]:
    """The scenes of the ``rigid`` suite: a 7-link arm, a 5-box stack (penalty and soft
    contact) and a 12-joint quadruped on the ground, each alone and as 64 worlds (8 with
    ``quick``)."""
    worlds = 8 if quick else 64
    scenes_ = [
        SceneCase("arm_7", scenes.arm, 1.0e-3),
        SceneCase("box_stack_5", scenes.box_stack, 1.0e-3),
        SceneCase("box_stack_5_soft", scenes.box_stack, 1.0e-3, soft_contact=True),
        SceneCase("quadruped_12", scenes.quadruped, 5.0e-4),
    ]
    return scenes_ + [
        SceneCase(f"{c.name}_x{worlds}", _replicated(c.build, worlds, (2.0, 0.0, 0.0)), c.dt, worlds, c.soft_contact)
        for c in scenes_
    ]


def rigid_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``rigid``: articulated and stacked rigid bodies, alone and in many worlds."""
    return _scene_suite("rigid", rigid_cases(quick), device, quick)


def implicit_integration_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``implicit_integration`` (see ``wpsim.bench_implicit``)."""
    from .bench_implicit import implicit_integration_suite as suite

    return suite(device, quick)


def implicit_contact_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``implicit_contact`` (see ``wpsim.bench_contact``)."""
    from .bench_contact import implicit_contact_suite as suite

    return suite(device, quick)


def checkpoint_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``checkpoint`` (see ``wpsim.bench_checkpoint``)."""
    from .bench_checkpoint import checkpoint_suite as suite

    return suite(device, quick)


SUITES: dict[str, Callable[..., list]] = {
    "forward": forward_suite,
    "checkpoint": checkpoint_suite,
    "implicit_integration": implicit_integration_suite,
    "implicit_contact": implicit_contact_suite,
    "rigid": rigid_suite,
}
"""Registered suites by name; each is ``(device, quick: bool) -> list[dict]`` of records."""

DEFAULT_SUITES = ("forward",)


# ---------------------------------------------------------------------------- running & output
def progress(line: str):
    """One progress line on stderr."""
    print(f"[wpsim bench] {line}", file=sys.stderr, flush=True)


def _summary(records: list[dict]) -> str:
    parts = []
    for r in records:
        if r["metric"] in ("steps_per_s", "world_steps_per_s", "backward_over_forward", "launches_per_step"):
            parts.append(f"{r['metric']}={format_value(r['metric'], r['value'])}")
    return ", ".join(parts)


def run_suites(names: list[str] | None = None, device=None, quick: bool = False) -> list[dict]:
    """Run the named suites (default: ``forward``) on ``device`` and return all their records."""
    names = list(DEFAULT_SUITES) if not names else list(names)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown benchmark suite(s) {unknown}; available: {sorted(SUITES)}")
    records = []
    # Warp prints its start-up banner and module loads on stdout; keep stdout for the caller.
    with contextlib.redirect_stdout(sys.stderr):
        device = wp.get_device(device)
        for name in names:
            progress(f"suite {name} on {device} ({'quick' if quick else 'full'})")
            records += SUITES[name](device, quick)
    return records


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
    return f"{value:.1f}"


def _params_text(params: dict) -> str:
    keys = ("mode", "particles", "triangles", "tets", "bodies", "joint_dofs", "worlds", "steps", "dt")
    shown = [f"{k}={params[k]}" for k in keys if k in params]
    rest = [f"{k}={v}" for k, v in params.items() if k not in keys and k not in ("device", "precision", "repeats")]
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
