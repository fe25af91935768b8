"""Multi-start: K initial guesses fitted at once as K worlds of one model, the best kept.

The problem is a ``Problem(..., worlds=K)`` over a model of K identical worlds
(``ModelBuilder.replicate``) whose rollout has one loss entry per world: every launch steps
all K trials, and one backward gives every trial its own gradient. The optimiser runs on
the K trials' vectors side by side and minimises the sum of their losses, which, the worlds
being independent, it does by improving each; the trial with the lowest loss at the end is
the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wpsim.opt.minimize import minimize
from wpsim.opt.problem import Problem
from wpsim.opt.result import OptimizationResult


def random_starts(problem: Problem, seed: int = 0, spread: float = 0.5) -> np.ndarray:
    """(K, n) starting values for the K worlds of ``problem``: world 0 keeps the declared
    initial values; the others are drawn uniformly in the optimiser's units between the
    bounds (so log-uniformly for log-space parameters), or within ``spread`` optimiser units
    of the initial value where a bound is infinite."""
    params = problem.params
    worlds, n = params.worlds, params.per_world
    z0 = params.to_internal(params.x0)
    lower, upper = params.internal_bound_arrays()
    lo = np.where(np.isfinite(lower), lower, z0 - spread)
    hi = np.where(np.isfinite(upper), upper, z0 + spread)
    z = np.random.default_rng(seed).uniform(lo, hi)
    z[:n] = z0[:n]
    return params.to_physical(z).reshape(worlds, n)


@dataclass
class MultiStartResult:
    """What ``multistart`` found.

    labels, units: one per parameter entry of a world; starts, finals: (K, n) physical values
    each world started from and ended at; losses0, losses: (K,) loss of each world there;
    best: the world with the lowest final loss; fit: the batched run over all worlds (its
    loss is the sum over worlds, its rollouts each step every world).
    """

    labels: list
    units: list
    starts: np.ndarray
    finals: np.ndarray
    losses0: np.ndarray
    losses: np.ndarray
    best: int
    fit: OptimizationResult

    @property
    def x(self) -> np.ndarray:
        """The best world's final values."""
        return self.finals[self.best]

    @property
    def loss(self) -> float:
        return float(self.losses[self.best])

    def values(self) -> dict:
        """label -> the best world's final value."""
        return {label: float(v) for label, v in zip(self.labels, self.x)}

    def best_fit(self) -> OptimizationResult:
        """The best world's run as an ``OptimizationResult``: its values per iteration, and
        its own loss where the iteration's point was a gradient evaluation (else None)."""
        n, k, fit = len(self.labels), self.best, self.fit
        history = [{"iteration": h["iteration"], "loss": float(h["world_losses"][k]) if "world_losses" in h else None,
                    "grad_norm": None, "x": h["x"][k * n:(k + 1) * n]} for h in fit.history]
        return OptimizationResult(
            method=f"{fit.method}, best of {len(self.losses)} starts", labels=list(self.labels), units=list(self.units),
            x0=self.starts[k].copy(), x=self.x.copy(), loss0=float(self.losses0[k]), loss=self.loss, history=history,
            rollouts=fit.rollouts, gradients=fit.gradients, wall_s=fit.wall_s, success=fit.success,
            converged=fit.converged, message=fit.message, no_gradient=fit.no_gradient, warnings=fit.warnings)

    def table(self) -> str:
        """One line per world (start, end, loss), the best marked, then the cost."""
        names = ", ".join(f"{label} ({unit})" if unit else label for label, unit in zip(self.labels, self.units))
        lines = [f"world  loss start -> end    values start -> end [{names}]"]
        for k in range(len(self.losses)):
            mark = " best" if k == self.best else ""
            start = ", ".join(f"{v:.4g}" for v in self.starts[k])
            end = ", ".join(f"{v:.4g}" for v in self.finals[k])
            lines.append(f"{k:>5}  {self.losses0[k]:.4g} -> {self.losses[k]:.4g}  [{start}] -> [{end}]{mark}")
        fit = self.fit
        lines.append(f"{len(self.losses)} starts in one batch: {len(fit.history) - 1} iterations, {fit.rollouts} "
                     f"batched rollouts, {fit.wall_s:.1f} s ({fit.method}: {fit.message})")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-ready content."""
        return {"labels": list(self.labels), "units": list(self.units), "best": self.best,
                "starts": self.starts.tolist(), "finals": self.finals.tolist(),
                "losses_initial": self.losses0.tolist(), "losses": self.losses.tolist(), "fit": self.fit.to_dict()}

    def save_json(self, path):
        """Write ``to_dict()`` as JSON, atomically; returns the path."""
        from wpsim.io.files import write_json

        return write_json(path, self.to_dict())


def multistart(problem: Problem, starts=None, method: str = "lbfgsb", iterations: int = 50,
               max_rollouts: int | None = None, seed: int = 0, progress: bool = True, **options) -> MultiStartResult:
    """Fit the K worlds of ``problem`` from ``starts`` ((K, n) physical values; default
    ``random_starts(problem, seed)``) with ``minimize(method, ...)`` in one batch and keep
    the best; ``options`` go to ``minimize`` (tolerance, lr). Leaves every world's final
    values written into the problem's arrays."""
    params = problem.params
    worlds, n = params.worlds, params.per_world
    if worlds < 2:
        raise ValueError("multistart needs a Problem over several worlds (Problem(..., worlds=K) with K >= 2)")
    starts = random_starts(problem, seed) if starts is None else np.asarray(starts, dtype=np.float64)
    if starts.shape != (worlds, n):
        raise ValueError(f"starts must be ({worlds}, {n}): one row of {', '.join(params.labels[:n])} per world, "
                         f"got {starts.shape}")
    problem.loss(starts.ravel())
    losses0 = problem.world_losses()
    fit = minimize(problem, method, iterations=iterations, max_rollouts=max_rollouts, x0=starts.ravel(),
                   progress=progress, **options)
    problem.loss(fit.x)
    losses = problem.world_losses()
    finite = np.where(np.isfinite(losses), losses, np.inf)
    labels = [label.rsplit("@", 1)[0] for label in params.labels[:n]]
    return MultiStartResult(labels=labels, units=list(params.units[:n]), starts=starts, finals=fit.x.reshape(worlds, n),
                            losses0=losses0, losses=losses, best=int(np.argmin(finite)), fit=fit)
