"""Detection of simulations that blow up, reported per world with the step it happened."""

from __future__ import annotations

from dataclasses import dataclass, field

NO_FAULT = 2**31 - 1
"""Value of a world's fault step while nothing has gone wrong."""


class SimulationError(RuntimeError):
    """A simulation produced results that cannot be trusted."""


class SimulationBlowUp(SimulationError):
    """A world's state became non-finite or exceeded the solver's limits."""


@dataclass
class HealthReport:
    """What the solver's per-step checks found since the last reset.

    fault_steps: world index -> first step index at which a particle of that world had a
        non-finite or out-of-range position or velocity.
    neighbor_overflow_particle: a particle whose contact neighbour list overflowed (some of
        its particle-particle contacts were dropped), or None.
    """

    fault_steps: dict = field(default_factory=dict)
    neighbor_overflow_particle: int | None = None

    @property
    def ok(self) -> bool:
        return not self.fault_steps and self.neighbor_overflow_particle is None

    def __str__(self) -> str:
        if self.ok:
            return "healthy"
        parts = [f"world {w} blew up at step {s}" for w, s in sorted(self.fault_steps.items())]
        if self.neighbor_overflow_particle is not None:
            parts.append(
                f"particle {self.neighbor_overflow_particle} had more contacts than max_neighbors "
                "(raise it with ModelBuilder.set_particle_contact)"
            )
        return "; ".join(parts)
