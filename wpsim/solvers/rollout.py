"""Multi-step rollouts."""

from __future__ import annotations

from typing import Callable

from wpsim.core.model import Control, State


def simulate(
    solver,
    state: State,
    num_steps: int,
    dt: float,
    control: Control | Callable[[int], Control] | None = None,
    keep_states: bool = False,
):
    """Advance ``state`` by ``num_steps`` steps of ``dt`` seconds, a fresh State per step.

    Fresh states make the rollout safe to record on a ``wp.Tape`` (no array read by an
    earlier launch is overwritten). ``control`` is one Control for every step or a function
    of the step index. Returns the final state, or all ``num_steps + 1`` states with
    ``keep_states``. ``state`` itself is only read (and its step scratch written).
    Memory grows with ``num_steps`` (that is what a tape needs); an unrecorded long run
    should alternate two states with ``solver.step`` instead.
    """
    states = [state] + State.batch(solver.model, num_steps, state.requires_grad)
    for k in range(num_steps):
        solver.step(states[k], states[k + 1], control(k) if callable(control) else control, dt)
    return states if keep_states else states[-1]
