"""Multi-step rollouts."""

from __future__ import annotations

from typing import Callable

from wpsim.core.model import Control, State
from wpsim.core.validation import require_count, require_dt
from wpsim.solvers.base import start_rollout


def simulate(
    solver,
    state: State,
    num_steps: int,
    dt: float,
    control: Control | Callable[[int], Control] | None = None,
    keep_states: bool = False,
    controller: Callable[[int, State, Control], None] | None = None,
):
    """Advance ``state`` by ``num_steps`` steps of ``dt`` seconds, a fresh State per step.

    Fresh states make the rollout safe to record on a ``wp.Tape`` (no array read by an
    earlier launch is overwritten). ``control`` is one Control for every step or a function
    of the step index. ``controller(k, state_k, control)`` instead fills a fresh zeroed
    Control for step k from the state it starts from, with Warp launches (recorded, so
    gradients reach the controller's parameters and, through the state, earlier steps).
    Returns the final state, or all ``num_steps + 1`` states with ``keep_states``.
    ``state`` itself is only read (and its step scratch written). The solver's health
    record restarts with the rollout (``start_rollout``): reported steps count from 0.
    Memory grows with ``num_steps`` (that is what a tape needs); an unrecorded long run
    should alternate two states with ``solver.step`` instead.
    """
    if controller is not None and control is not None:
        raise ValueError("simulate: give either control or controller, not both")
    num_steps = require_count("simulate: num_steps", num_steps)
    require_dt(dt, "simulate: dt")
    if hasattr(solver, "check_step"):  # before a controller's launches read the state
        solver.check_step(state, state, None if callable(control) else control, dt)
    start_rollout(solver)
    states = [state] + State.batch(solver.model, num_steps, state.requires_grad)
    for k in range(num_steps):
        if controller is not None:
            step_control = solver.model.control(state.requires_grad)
            controller(k, states[k], step_control)
        else:
            step_control = control(k) if callable(control) else control
        solver.step(states[k], states[k + 1], step_control, dt)
    return states if keep_states else states[-1]
