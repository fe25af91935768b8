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


class DifferenceResiduals:
    """A residual object of a simulated path against a measured one: ``(simulate(x)[1:] -
    measured[1:]) * weight`` flattened (the first sample is the shared start), with a
    forward-difference Jacobian of one run per parameter (relative step ``STEP``).

    simulate: physical parameter values (n,) in ``params.labels`` order -> a path shaped like
    ``measured`` (e.g. (frames + 1, markers, 3) m), writing the values where it needs them;
    or a list of such functions on independent copies of the model (the first one bound to
    ``params``), over which the Jacobian's runs are spread in threads (Warp's CPU kernels
    release the GIL). Suits a few parameters of a costly model, whose tape gradient costs
    more than n + 1 runs."""

    STEP = 1e-6

    def __init__(self, params, simulate, measured: np.ndarray, weight: float):
        self.params, self.weight = params, float(weight)
        self.simulators = list(simulate) if isinstance(simulate, (list, tuple)) else [simulate]
        self.measured = np.asarray(measured, dtype=np.float64)[1:]
        self.rollouts = self.gradients = 0
        self._last = None  # (x, r) of the last run at undisplaced values

    def _residuals(self, simulate, x: np.ndarray) -> np.ndarray:
        return (np.asarray(simulate(x), dtype=np.float64)[1:] - self.measured).ravel() * self.weight

    def values(self, x: np.ndarray) -> np.ndarray:
        """Residuals (N,) at physical values ``x`` (the last ones are not run again)."""
        x = np.array(x, dtype=np.float64)
        if self._last is None or not np.array_equal(self._last[0], x):
            self.rollouts += 1
            self._last = (x, self._residuals(self.simulators[0], x))
        return self._last[1]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """d r / d x (N, n) by forward differences (a step towards the inside at an upper
        bound); leaves ``x`` written into ``params``."""
        base, x = self.values(x), np.array(x, dtype=np.float64)
        points = []
        for i in range(len(x)):
            step = self.STEP * max(abs(x[i]), 1e-3)
            points.append(x.copy())
            points[-1][i] += -step if x[i] + step > self.params.upper[i] else step
        runs = self._spread(points)
        self.rollouts += len(points)
        self.gradients += 1
        self.params.write(x)
        return np.stack([(r - base) / (p[i] - x[i]) for i, (p, r) in enumerate(zip(points, runs))], axis=1)

    def _spread(self, points: list) -> list:
        """Residuals at every point, each run on whichever simulator is free."""
        if len(self.simulators) == 1:
            return [self._residuals(self.simulators[0], p) for p in points]
        import queue
        from concurrent.futures import ThreadPoolExecutor

        free = queue.SimpleQueue()
        for simulate in self.simulators:
            free.put(simulate)

        def run(point):
            simulate = free.get()
            try:
                return self._residuals(simulate, point)
            finally:
                free.put(simulate)

        with ThreadPoolExecutor(len(self.simulators)) as pool:
            return list(pool.map(run, points))


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
