"""Detection of simulations that blow up, reported per world with the step it happened."""

from __future__ import annotations

from dataclasses import dataclass, field

NO_FAULT = 2**31 - 1
"""Value of a world's fault step while nothing has gone wrong."""


class SimulationError(RuntimeError):
    """A simulation produced results that cannot be trusted."""


class SimulationBlowUp(SimulationError):
    """A world's state became non-finite or exceeded the solver's limits."""


class ContactNotConverged(SimulationError):
    """An iterative contact solve stopped at its iteration cap above its tolerance."""


@dataclass
class UnconvergedContact:
    """Steps of one world whose soft-contact solve stopped at the iteration cap.

    first_step: the first such step; steps: how many; worst_residual: the largest final
    residual (Newton step relative to 1 + max |a|) against ``tolerance``; iterations: the cap.
    """

    first_step: int
    steps: int
    worst_residual: float
    tolerance: float
    iterations: int

    def __str__(self) -> str:
        return (f"the soft-contact solve did not converge in {self.steps} step(s) (first at step {self.first_step}; "
                f"worst residual {self.worst_residual:.3g} > tolerance {self.tolerance:.3g} after {self.iterations} "
                "iterations; raise SoftContactOptions.iterations)")


@dataclass
class HealthReport:
    """What the solver's per-step checks found since the last reset.

    fault_steps: world index -> first step index at which a particle of that world had a
        non-finite or out-of-range position or velocity.
    neighbor_overflow_particle: a particle whose contact neighbour list overflowed (some of
        its particle-particle contacts were dropped), or None.
    unconverged_contact: world index -> ``UnconvergedContact`` (soft-contact solves that
        stopped at their iteration cap).
    contact_iterations: the most Newton iterations a soft-contact step used (0 without).
    dropped_contact_pairs: the most near pairs a step's broad phase found beyond its
        capacity (those pairs had no contact that step).
    """

    fault_steps: dict = field(default_factory=dict)
    neighbor_overflow_particle: int | None = None
    unconverged_contact: dict = field(default_factory=dict)
    contact_iterations: int = 0
    dropped_contact_pairs: int = 0

    @property
    def ok(self) -> bool:
        return (not self.fault_steps and self.neighbor_overflow_particle is None and not self.unconverged_contact
                and not self.dropped_contact_pairs)

    def __str__(self) -> str:
        if self.ok:
            return "healthy"
        parts = [f"world {w} blew up at step {s}" for w, s in sorted(self.fault_steps.items())]
        if self.neighbor_overflow_particle is not None:
            parts.append(
                f"particle {self.neighbor_overflow_particle} had more contacts than max_neighbors "
                "(raise it with ModelBuilder.set_particle_contact)"
            )
        parts += [f"world {w}: {failure}" for w, failure in sorted(self.unconverged_contact.items())]
        if self.dropped_contact_pairs:
            parts.append(f"a step's broad phase found {self.dropped_contact_pairs} contact pairs more than it keeps "
                         "(raise SemiImplicitSolver(contact_pair_capacity=...))")
        return "; ".join(parts)
