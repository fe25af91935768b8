"""Gauss-Newton / Levenberg-Marquardt on residuals: scipy's trust-region reflective
``least_squares`` (bounds honoured) fed residuals from a rollout and their Jacobian from tape
vector-Jacobian products (e.g. ``wpsim.opt.sysid.TrackingResiduals``, which
batches the products over the worlds of one model).

A residual object has ``params`` (a ``ParameterSet``: labels, units, bounds and the
transform to the optimiser's vector z), ``values(x)`` -> r (N,) (one rollout) and
``jacobian(x)`` -> dr/dx (N, n), and counts ``rollouts`` and ``gradients``. The loss is
``r . r`` (the residuals carry the weights), so it is comparable with a ``Problem`` whose
loss is the same weighted sum of squares.
"""

from __future__ import annotations

import time

import numpy as np

from wpsim.opt.minimize import Tracker, start_values
from wpsim.opt.problem import NonFiniteLoss
from wpsim.opt.result import OptimizationResult


class _Trace(Tracker):
    """Evaluations of the residuals in the optimiser's vector z."""

    def __init__(self, residuals, iterations: int, progress: bool):
        super().__init__(residuals.params, "least-squares", iterations, progress)
        self.residuals = residuals
        self.cached = None  # (z, r) of the last evaluation

    def values(self, z: np.ndarray) -> np.ndarray:
        x = self.params.to_physical(z)
        r = self.residuals.values(x)
        loss = float(r @ r)
        if not np.isfinite(loss):
            raise NonFiniteLoss(f"the residuals are not finite at {dict(zip(self.params.labels, x))}")
        self.seen(x, loss)
        self.cached = (z.copy(), r)
        return r

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """d r / d z at z; each call is one Gauss-Newton iteration."""
        x = self.params.to_physical(z)
        jac = self.params.internal_gradient(x, self.residuals.jacobian(x))
        if not np.isfinite(jac).all():
            raise NonFiniteLoss(f"the residual Jacobian is not finite at {dict(zip(self.params.labels, x))}")
        r = self.cached[1] if self.cached is not None and np.array_equal(self.cached[0], z) else self.values(z)
        self.iteration(z, float(r @ r), float(np.linalg.norm(2.0 * jac.T @ r)))
        return jac


def least_squares(residuals, iterations: int = 30, x0=None, tolerance: float = 1e-10,
                  progress: bool = True) -> OptimizationResult:
    """Minimise ``r(x) . r(x)`` of ``residuals`` (see the module docstring) from ``x0``
    (physical values, default the declared ones) with a Jacobian at every iteration.

    iterations: Jacobian evaluations (Gauss-Newton iterations) at most; tolerance: scipy's
    ftol and xtol (relative change of the loss and of z). Leaves the best values written.
    """
    from scipy.optimize import least_squares as scipy_least_squares

    params = residuals.params
    x_start = start_values(params, iterations, x0)
    start, rollouts0, gradients0 = time.perf_counter(), residuals.rollouts, residuals.gradients
    trace = _Trace(residuals, iterations, progress)

    def solve():
        out = scipy_least_squares(trace.values, params.to_internal(x_start), jac=trace.jacobian,
                                  bounds=params.internal_bound_arrays(), method="trf", ftol=tolerance, xtol=tolerance,
                                  gtol=1e-12, max_nfev=5 * iterations,
                                  callback=lambda intermediate_result: _stop_after(trace, iterations))
        return out.status > 0, f"iteration limit ({iterations}) reached" if out.status == -2 else str(out.message)

    with one_blas_thread():
        outcome = trace.guard(solve)
    return trace.result("least-squares", x_start, outcome, start,
                        rollouts=residuals.rollouts - rollouts0, gradients=residuals.gradients - gradients0)


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread (``threadpoolctl``; nothing without
    it): the solver's products and SVDs of a tall, narrow Jacobian gain nothing from more, and
    idle BLAS threads spin, which doubled the CPU time of a 9-parameter fit on 2 cores."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _stop_after(trace: _Trace, iterations: int):
    """End the solve once ``iterations`` Jacobians have been used."""
    if len(trace.history) >= iterations:
        raise StopIteration
