"""What every solver shares: its model, step counter and per-world blow-up detection."""

from __future__ import annotations

from typing import NamedTuple

import warp as wp

from wpsim.core.health import NO_FAULT, HealthReport, SimulationBlowUp, SimulationError
from wpsim.core.model import Model
from wpsim.core.tape import active_tape
from wpsim.core.validation import EntryChecks, require_count
from wpsim.solvers.prepared_launch import PreparedLaunchCache, launch_unrecorded


def start_rollout(solver):
    """Start a rollout's health record: ``solver.reset_health()`` where the solver has one,
    and the step counter at 0, so that reported step numbers count from the rollout's start
    and its report shows nothing of earlier rollouts."""
    if hasattr(solver, "reset_health"):
        solver.reset_health()
    solver.step_count = 0


class SolverBase:
    """Step counter, zero control and health flags of a solver.

    Args:
        model: the Model to step.
        raise_on_blowup: raise ``SimulationBlowUp`` as soon as a health check fails.
        health_check_interval: with ``raise_on_blowup``, read the health flags back every
            this many steps (each read synchronises with the device).
        max_coordinate: positions beyond this distance from the origin (m) count as a blow-up.
        max_speed: speeds beyond this (m/s) count as a blow-up.
    """

    def __init__(
        self,
        model: Model,
        raise_on_blowup: bool = False,
        health_check_interval: int = 1,
        max_coordinate: float = 1.0e5,
        max_speed: float = 1.0e5,
    ):
        if health_check_interval < 1:
            raise ValueError("health_check_interval must be >= 1")
        self.model = model
        self.raise_on_blowup = raise_on_blowup
        self.health_check_interval = health_check_interval
        self.max_coordinate = model.real(max_coordinate)
        self.max_speed = model.real(max_speed)
        self._friction_smoothing = model.real(model.friction_smoothing)
        self.step_count = 0
        """Steps taken by this solver; the step index reported by health checks."""
        self.world_fault_step = wp.full(model.num_worlds, NO_FAULT, dtype=wp.int32, device=model.device)
        self.neighbor_overflow = wp.zeros(1, dtype=wp.int32, device=model.device)
        self._zero_control = model.control(requires_grad=False)
        self._launches = PreparedLaunchCache()
        """The unrecorded CPU launches of this solver's steps, prepared once (``caching_launches``)."""
        self._entry = EntryChecks(model)
        """Checks of the step arguments, before anything is launched (once per State and Control)."""

    def _step_done(self):
        """Count the step; with ``raise_on_blowup``, check health every interval."""
        self._steps_done(1)

    def _steps_done(self, steps: int):
        """Count ``steps`` steps; with ``raise_on_blowup``, check health if an interval ended."""
        interval = self.health_check_interval
        before = self.step_count
        self.step_count += steps
        if self.raise_on_blowup and self.step_count // interval > before // interval:
            self.check_health(raise_error=True)

    def check_step(self, state_in, state_out, control, dt: float):
        """Raise ``ValueError`` naming the argument and field if ``step`` would refuse these
        arguments (``EntryChecks``: dt, and each State and Control field's size, dtype, device)."""
        self._entry.step(state_in, state_out, control, dt)

    def _check_advance(self, state, control, dt: float, steps: int):
        """Refuse ``advance`` arguments that ``step`` refuses, and those of ``_check_unrecorded``."""
        self._entry.step(state, state, control, dt)
        self._check_unrecorded(state, steps)

    def _check_unrecorded(self, state, steps: int):
        """Refuse ``advance`` on a recorded state or a step count that is not an integer >= 1."""
        require_count("advance: steps", steps, 1)
        if active_tape() is not None and state.requires_grad:
            raise RuntimeError("advance runs unrecorded steps in place; while a wp.Tape records, use step or simulate")

    def advance(self, state, control, dt: float, steps: int):
        """``steps`` unrecorded steps of ``dt`` s in place on ``state`` under one ``control``;
        returns ``state``. Here: ``step`` into a second state and back, so memory does not
        grow with ``steps``."""
        self._check_advance(state, control, dt, steps)
        other = self.model.state(requires_grad=False)
        states = (state, other)
        for k in range(steps):
            self.step(states[k % 2], states[(k + 1) % 2], control, dt)
        if steps % 2:
            state.assign(other)
        return state

    def health(self) -> HealthReport:
        """Read the per-world blow-up flags and the neighbour overflow flag (synchronises)."""
        steps = self.world_fault_step.numpy()
        overflow = int(self.neighbor_overflow.numpy()[0])
        faults = {int(w): int(s) for w, s in enumerate(steps) if s != NO_FAULT}
        return HealthReport(faults, overflow - 1 if overflow > 0 else None)

    def check_health(self, raise_error: bool = True) -> HealthReport:
        """The health report. With ``raise_error``: ``SimulationBlowUp`` if a world blew up,
        ``SimulationError`` if particle contacts were dropped."""
        report = self.health()
        if raise_error and report.fault_steps:
            raise SimulationBlowUp(str(report))
        if raise_error and not report.ok:
            raise SimulationError(str(report))
        return report

    def reset_health(self):
        """Clear the blow-up and overflow flags and restart the step counter at 0."""
        self.world_fault_step.fill_(NO_FAULT)
        self.neighbor_overflow.zero_()
        self.step_count = 0


class KernelLaunch(NamedTuple):
    """One launch of a concrete kernel: what ``wp.launch`` takes, kept so that it can be run
    now or prepared for re-runs (``PreparedLaunch``)."""

    kernel: object
    dim: int | tuple
    inputs: list
    outputs: list

    def run(self, device):
        """Launch it: recorded on an active tape like any launch; without one, through
        ``launch_unrecorded`` (in a solver's step on the CPU: its cache of prepared launches)."""
        if active_tape() is None:
            launch_unrecorded(self.kernel, self.dim, self.inputs, self.outputs, device)
            return
        wp.launch(self.kernel, dim=self.dim, inputs=self.inputs, outputs=self.outputs, device=device)

