"""``minimize``: run an optimiser on a ``Problem`` with progress, bookkeeping and a result.

Methods:
- "lbfgsb": scipy's L-BFGS-B (bounds honoured) on the tape gradient;
- "adam": Adam steps on the optimiser's vector, projected onto the bounds;
- "nelder-mead": scipy's Nelder-Mead (bounds honoured), the zero-order baseline: losses
  only, no gradient.
Every method works on the internal vector z (scaled, or log for log-space parameters),
stops after ``iterations`` iterations or ``max_rollouts`` rollouts, keeps the best point
seen, and leaves its values written into the problem's arrays.

A NaN or Inf loss (or gradient) at a trial point after the first iteration is backed off
from: L-BFGS-B gets a finite penalty there (the last iterate's loss plus |that loss| + 1)
with a gradient pointing back to the last iterate, so its line search shortens the step;
Nelder-Mead gets +inf (the worst vertex); Adam halves its step, up to ``MAX_BACKOFFS``
times. Each iteration's history entry counts its back-offs ("backoffs") and the result's
message says how many there were and names the first point. A NaN or Inf loss at the start,
or an Adam step still non-finite after its halvings, stops the run with a message naming the
iteration and the values; the best result so far is kept. A log-space parameter that moves
more than ``LOG_RUNAWAY`` e-folds from its start towards a side without a bound is warned
about, once (also in the result's warnings).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from wpsim.opt.optimisers import Adam
from wpsim.opt.parameters import LOG_RUNAWAY
from wpsim.opt.problem import NonFiniteLoss, Problem
from wpsim.opt.result import OptimizationResult

METHODS = ("lbfgsb", "adam", "nelder-mead")
NELDER_MEAD_STEP = 0.1
"""Edge of Nelder-Mead's first simplex in optimiser units (10 % of each parameter's scale,
or of its value in log-space), like the first steps of the gradient methods."""
MAX_BACKOFFS = 20
"""Halvings of an Adam step whose trial point has a non-finite loss before the run stops."""


class _Budget(Exception):
    """Raised inside an evaluation when the rollout budget is spent."""


def start_values(params, iterations: int, x0) -> np.ndarray:
    """The physical start vector (``x0``, default the declared values), checked with the
    iteration count."""
    if int(iterations) != iterations or iterations < 1:
        raise ValueError(f"iterations must be an integer >= 1, got {iterations}")
    x_start = params.x0 if x0 is None else np.asarray(x0, dtype=np.float64)
    if x_start.shape != params.x0.shape:
        raise ValueError(f"x0 must have {params.size} entries ({', '.join(params.labels)}), got {x_start.shape}")
    return x_start.copy()


class Tracker:
    """The bookkeeping of a run over the optimiser's vector z: the best point seen, one
    history entry per iteration, the progress bar, and the final ``OptimizationResult``."""

    def __init__(self, params, name: str, total: int, progress: bool):
        from wpsim.io.progress import ProgressBar

        self.params = params
        self.best_x, self.best_loss = params.x0.copy(), np.inf
        self.history = []
        self.backoffs: list = []
        """Messages of the non-finite trial points backed off from, in order."""
        self._new_backoffs = 0  # since the last recorded iteration
        self.warnings: list = []
        """Warnings of the run: log-space parameters running away (``ParameterSet.runaways``)."""
        self._runaways: set = set()
        self.bar = ProgressBar(total, name, enabled=progress, every=max(total // 20, 1))

    def seen(self, x: np.ndarray, loss: float):
        """An evaluation at physical x."""
        if loss < self.best_loss:
            self.best_x, self.best_loss = x.copy(), loss

    def iteration(self, z: np.ndarray, loss: float, grad_norm: float | None, **extra):
        """Record one iteration ending at z with ``loss`` (and d loss / d z's norm)."""
        x = self.params.to_physical(z)
        if self._new_backoffs:
            extra["backoffs"], self._new_backoffs = self._new_backoffs, 0
        self.history.append({"iteration": len(self.history), "loss": float(loss), "grad_norm": grad_norm,
                             "x": x.copy(), **extra})
        self._warn_runaways(x)
        if len(self.history) > 1:
            shown = ", ".join(f"{v:.4g}" for v in x[:4]) + (", ..." if len(x) > 4 else "")
            self.bar.update(f"loss {loss:.4g} [{shown}]")

    def _warn_runaways(self, x: np.ndarray):
        """Warn once per log-space entry that ran ``LOG_RUNAWAY`` e-folds from the run's start
        towards a side without a bound."""
        params, x_start = self.params, self.history[0]["x"]
        for i in params.runaways(x_start, x):
            if i not in self._runaways:
                self._runaways.add(i)
                message = (f"log-space parameter {params.labels[i]} moved by more than a factor e^{LOG_RUNAWAY:g} "
                           f"from its start ({x_start[i]:.6g} -> {x[i]:.6g} {params.units[i]}".rstrip() +
                           ") with no bound on that side: give it a lower/upper bound if it should not")
                self.warnings.append(message)
                warnings.warn(message, stacklevel=4)

    def backed_off(self, error: Exception):
        """A trial point whose loss or gradient is not finite (``error`` names it) was backed
        off from; one at the start (no iteration recorded yet) raises ``error``."""
        if not self.history:
            raise error
        self.backoffs.append(str(error))
        self._new_backoffs += 1

    def guard(self, solve) -> tuple:
        """(converged, message, stopped) of ``solve()`` -> (converged, message); a non-finite
        loss after the first iteration stops the run (stopped True) with the best point kept."""
        try:
            return (*solve(), False)
        except NonFiniteLoss as error:
            if not self.history:
                raise
            return False, f"stopped at iteration {len(self.history)}: {error}", True
        finally:
            self.bar.close()

    def result(self, method: str, x_start: np.ndarray, outcome: tuple, start_time: float, **counts):
        """The ``OptimizationResult`` (``counts``: rollouts, gradients, no_gradient, warnings),
        the best values written into the parameters' arrays."""
        converged, message, stopped = outcome
        if self.backoffs:
            message += (f"; backed off from {len(self.backoffs)} trial point(s) with a non-finite loss or gradient "
                        f"(first: {self.backoffs[0]})")
        self.params.write(self.best_x)
        counts["warnings"] = [*counts.get("warnings", []), *self.warnings]
        return OptimizationResult(
            method=method, labels=list(self.params.labels), units=list(self.params.units), x0=x_start.copy(),
            x=self.best_x, loss0=self.history[0]["loss"], loss=self.best_loss, history=self.history,
            wall_s=time.perf_counter() - start_time, success=not stopped, converged=converged, message=message,
            **counts)


class _Run(Tracker):
    """Evaluations of a problem in the optimiser's vector z, within a rollout budget."""

    def __init__(self, problem: Problem, method: str, iterations: int, max_rollouts: int | None, progress: bool):
        total = iterations if max_rollouts is None else min(iterations, int(max_rollouts))
        super().__init__(problem.params, method, total, progress)
        self.problem = problem
        self.max_rollouts = None if max_rollouts is None else problem.rollouts + int(max_rollouts)
        self.last_grad_norm = None
        self._last_z = None  # the last recorded iterate
        self._cached = None  # (z, loss, grad_z) of the last gradient evaluation

    def _spend(self):
        if self.max_rollouts is not None and self.problem.rollouts >= self.max_rollouts:
            raise _Budget

    def _physical(self, z: np.ndarray) -> np.ndarray:
        """Physical values of z; ``NonFiniteLoss`` names an entry whose value overflows."""
        x = self.params.to_physical(z)
        if not np.isfinite(x).all():
            i = int(np.flatnonzero(~np.isfinite(x))[0])
            raise NonFiniteLoss(f"{self.params.labels[i]} overflows at the optimiser's value {z[i]:.6g}")
        return x

    def loss(self, z: np.ndarray) -> float:
        self._spend()
        x = self._physical(z)
        loss = self.problem.loss(x)
        self.seen(x, loss)
        return loss

    def loss_and_grad(self, z: np.ndarray) -> tuple:
        if self._cached is not None and np.array_equal(self._cached[0], z):
            return self._cached[1], self._cached[2].copy()
        self._spend()
        x = self._physical(z)
        loss, grad_x = self.problem.loss_and_grad(x)
        grad_z = self.params.internal_gradient(x, grad_x)
        self.last_grad_norm = float(np.linalg.norm(grad_z))
        self.seen(x, loss)
        self._cached = (np.array(z, copy=True), loss, grad_z)
        return loss, grad_z.copy()

    def record(self, z: np.ndarray, loss: float):
        """Record one optimiser iteration ending at z (with each world's loss where the
        last gradient evaluation was at z)."""
        extra = {}
        if self.params.worlds > 1 and self._cached is not None and np.array_equal(self._cached[0], z):
            extra["world_losses"] = self.problem.world_losses()
        self.iteration(z, loss, self.last_grad_norm, **extra)
        self._last_z = np.array(z, dtype=np.float64, copy=True)

    def backing_off(self, evaluate, penalty):
        """``evaluate(z)``, or ``penalty(z)`` at a trial point where it raises ``NonFiniteLoss``
        (``backed_off``)."""

        def evaluated(z):
            try:
                return evaluate(z)
            except NonFiniteLoss as error:
                self.backed_off(error)
                return penalty(z)

        return evaluated

    def penalty_and_grad(self, z: np.ndarray) -> tuple:
        """(loss, gradient) standing for a non-finite trial point z of a line search from the
        last iterate z0 (loss f0): f0 + |f0| + 1, and the gradient of the bowl through both
        points centred at z0, which points back to z0."""
        f0, d = self.history[-1]["loss"], z - self._last_z
        rise, size = abs(f0) + 1.0, np.abs(d).max()
        unit = d / size  # d / |d|^2 without overflow for a huge step
        return f0 + rise, 2.0 * rise * unit / (size * unit.dot(unit))


def _lbfgsb(run: _Run, z0: np.ndarray, iterations: int, tolerance: float):
    from scipy.optimize import minimize as scipy_minimize

    def callback(intermediate_result):
        run.record(intermediate_result.x, intermediate_result.fun)

    out = scipy_minimize(run.backing_off(run.loss_and_grad, run.penalty_and_grad), z0, jac=True, method="L-BFGS-B", bounds=run.params.internal_bounds(),
                         callback=callback, options={"maxiter": iterations, "ftol": tolerance, "gtol": 1e-12})
    return out.status == 0, str(out.message)


def _nelder_mead(run: _Run, z0: np.ndarray, iterations: int, tolerance: float):
    from scipy.optimize import minimize as scipy_minimize

    def callback(intermediate_result):
        run.record(intermediate_result.x, intermediate_result.fun)

    bounds = run.params.internal_bounds()
    bounded = any(a is not None or b is not None for a, b in bounds)
    # first simplex: 0.1 optimiser units along each axis (10 % of a parameter's scale or value)
    simplex = np.vstack([z0, z0 + NELDER_MEAD_STEP * np.eye(len(z0))])
    out = scipy_minimize(run.backing_off(run.loss, lambda z: math.inf), z0, method="Nelder-Mead", bounds=bounds if bounded else None, callback=callback,
                         options={"maxiter": iterations, "fatol": tolerance, "xatol": 1e-10, "initial_simplex": simplex})
    return out.status == 0, str(out.message)


def _adam(run: _Run, z0: np.ndarray, iterations: int, tolerance: float, lr: float):
    lower, upper = run.params.internal_bound_arrays()
    adam, z = Adam(lr=lr), z0.copy()
    loss, grad = run.loss_and_grad(z)
    for _ in range(iterations):
        if loss <= tolerance:
            return True, f"loss {loss:.3g} at or below the tolerance {tolerance:g}"
        trial = np.clip(adam.step(z, grad), lower, upper)
        for halvings in range(MAX_BACKOFFS + 1):
            try:
                loss, grad = run.loss_and_grad(trial)
                break
            except NonFiniteLoss as error:
                if halvings == MAX_BACKOFFS:
                    raise NonFiniteLoss(f"{error} (after {MAX_BACKOFFS} halvings of the step)") from error
                run.backed_off(error)
                trial = 0.5 * (z + trial)
        z = trial
        run.record(z, loss)
    return False, f"iteration limit ({iterations}) reached"


def minimize(problem: Problem, method: str = "lbfgsb", iterations: int = 50, max_rollouts: int | None = None,
             tolerance: float = 0.0, lr: float = 0.05, x0=None, progress: bool = True) -> OptimizationResult:
    """Minimise ``problem`` with ``method`` (see the module docstring) from ``x0`` (physical
    values, default the problem's initial ones).

    iterations: optimiser iterations at most; max_rollouts: forward rollouts at most (the
    budget a comparison between methods holds fixed); tolerance: stop once the loss change
    (L-BFGS-B, Nelder-Mead) or the loss (Adam) falls below it; lr: Adam's step in optimiser
    units (0.05: 5 % of a parameter's scale, or of its value in log-space); progress: show a
    progress bar with the loss and the first parameter values.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    params = problem.params
    x_start = start_values(params, iterations, x0)
    start, rollouts0, gradients0 = time.perf_counter(), problem.rollouts, problem.gradients
    run = _Run(problem, method, iterations, max_rollouts, progress)
    z0 = params.to_internal(x_start)

    def solve():
        try:
            loss0 = run.loss_and_grad(z0)[0] if method != "nelder-mead" else run.loss(z0)
            run.record(z0, loss0)
            if method == "lbfgsb":
                return _lbfgsb(run, z0, iterations, tolerance)
            if method == "adam":
                return _adam(run, z0, iterations, tolerance, lr)
            return _nelder_mead(run, z0, iterations, tolerance)
        except _Budget:
            return False, f"rollout budget of {max_rollouts} spent"

    outcome = run.guard(solve)
    return run.result(method, x_start, outcome, start, rollouts=problem.rollouts - rollouts0,
                      gradients=problem.gradients - gradients0, no_gradient=list(problem.no_gradient),
                      warnings=list(problem.warnings))
