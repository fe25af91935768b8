"""Suites ``forward`` and ``rigid``: steps per second, backward/forward time ratio and
kernel launches per step of standard scenes (particles, cloth, soft block, arm, box stack,
quadruped), alone and as many worlds."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import warp as wp

from wpsim.bench.records import progress, record, summary, timed
from wpsim.core.builder import ModelBuilder
from wpsim.core.model import Model, State
from wpsim.diff.losses import joint_state_loss, linear_state_loss
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.solvers.rollout import simulate
from wpsim.tasks import scene_library

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


def count_launches(fn: Callable[[], object]) -> int:
    """Number of kernel launches made while ``fn()`` runs: ``wp.launch`` calls that run a kernel
    (not those that only record a command) and re-runs of ``PreparedLaunch``es (both patched
    meanwhile; hash-grid builds and array fills/copies are not kernel launches here)."""
    from wpsim.solvers.prepared_launch import PreparedLaunch

    original, original_run = wp.launch, PreparedLaunch.run
    calls = [0]

    def counting(*args, **kwargs):
        calls[0] += 0 if kwargs.get("record_cmd") else 1
        return original(*args, **kwargs)

    def counting_run(self):
        calls[0] += 1
        return original_run(self)

    wp.launch, PreparedLaunch.run = counting, counting_run
    try:
        fn()
    finally:
        wp.launch, PreparedLaunch.run = original, original_run
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
        SceneCase("particles", lambda: scene_library.particles_on_ground(n), 1.0e-3),
        SceneCase("cloth", lambda: scene_library.cloth_on_sphere(dim), 1.0e-3),
        SceneCase("soft_block", lambda: scene_library.soft_block(cells), 2.0e-4),
        SceneCase(f"soft_block_{small}", lambda: scene_library.soft_block(small), 2.0e-4),
        SceneCase(f"soft_block_{small}_x{worlds}", _replicated(lambda: scene_library.soft_block(small), worlds, (0.2, 0.0, 0.0)),
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
        progress(f"{suite}/{case.name}: {summary(found)} ({time.perf_counter() - start:.1f} s)")
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
        SceneCase("arm_7", scene_library.arm, 1.0e-3),
        SceneCase("box_stack_5", scene_library.box_stack, 1.0e-3),
        SceneCase("box_stack_5_soft", scene_library.box_stack, 1.0e-3, soft_contact=True),
        SceneCase("quadruped_12", scene_library.quadruped, 5.0e-4),
    ]
    return scenes_ + [
        SceneCase(f"{c.name}_x{worlds}", _replicated(c.build, worlds, (2.0, 0.0, 0.0)), c.dt, worlds, c.soft_contact)
        for c in scenes_
    ]


def rigid_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``rigid``: articulated and stacked rigid bodies, alone and in many worlds."""
    return _scene_suite("rigid", rigid_cases(quick), device, quick)

