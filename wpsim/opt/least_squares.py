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
        """r at z; a point whose values or residuals are not finite is backed off from
        (``NonFiniteLoss``, raised after it is counted)."""
        x = self.params.to_physical(z)
        r = self.residuals.values(x) if np.isfinite(x).all() else None
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged rollout: refused below
            loss = np.inf if r is None else float(r @ r)
        if not np.isfinite(loss):
            error = NonFiniteLoss(f"the {'residuals' if r is not None else 'values'} are not finite at "
                                  f"{self.params.describe(x)}")
            self.backed_off(error)
            raise error
        self.seen(x, loss)
        self.cached = (z.copy(), r)
        return r

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """d r / d z at z; each call is one Gauss-Newton iteration."""
        x = self.params.to_physical(z)
        jac = self.params.internal_gradient(x, self.residuals.jacobian(x))
        if not np.isfinite(jac).all():
            raise NonFiniteLoss(f"the residual Jacobian is not finite at {self.params.describe(x)}")
        r = self.cached[1] if self.cached is not None and np.array_equal(self.cached[0], z) else self.values(z)
        self.iteration(z, float(r @ r), float(np.linalg.norm(2.0 * jac.T @ r)))
        return jac


METHODS = ("trf", "lm")
"""``least_squares``' optimisers: scipy's trust-region reflective, or ``projected_lm``."""
TOLERANCE = {"trf": 1e-10, "lm": 1e-8}
"""``least_squares``' default tolerance by method."""
MU_FACTOR = 10.0 ** 0.1
"""``projected_lm``'s factor of one increase of its damping mu (after a rejected step)."""
MU_MIN = 1e-6
"""``projected_lm``'s smallest nonzero damping; a decrease below it returns to mu = 0. Absolute,
as ``mujoco.minimize`` has it: relative to J^T J's largest diagonal entry (1e-6, 1e-9, 1e-12
of it) the friction arm of ``vs_mujoco_sysid`` took fewer rejected steps (71 rollouts
against 122 at 1e-6) but the 60-parameter arm6 stopped 0.07 to 1.8 rad from its prediction
(2.9e-9 rad here), measured with throwaway runs."""


def projected_lm(values, jacobian, z0: np.ndarray, lower: np.ndarray, upper: np.ndarray, more, tolerance: float):
    """Levenberg-Marquardt on ``values(z) . values(z)`` within the box [lower, upper]:
    (J^T J + mu I) dz = -J^T r over the free variables (a variable on a bound whose gradient
    points out of the box stays there), the step clipped into the box, accepted where the loss
    falls. mu starts at 0 (a Gauss-Newton step), grows by ``MU_FACTOR`` per rejected step and
    shrinks ever faster over accepted ones (by MU_FACTOR, then its square, ...), the schedule
    of MuJoCo's ``mujoco.minimize``: on the 12-parameter arm with dry friction of ``wpsim bench
    --suite vs_mujoco_sysid``, started at zero friction, it reaches the truth where scipy's
    trust-region reflective method stalls in a local minimum at 99 % error. A step is taken
    where the loss falls and the linear model predicted a fall; the solve ends where the step
    is below ``tolerance`` relative to z or the projected gradient vanishes; a trial point
    where ``values`` raises ``NonFiniteLoss`` is a rejected step. ``jacobian`` is
    asked for only while ``more()`` is true. Returns (z, converged, message)."""
    z = np.clip(np.asarray(z0, dtype=np.float64), lower, upper)
    r = values(z)
    loss = float(r @ r)
    mu, reductions = 0.0, 0
    while True:
        if not more():
            return z, False, "iteration limit reached"
        jac = jacobian(z)
        hessian, gradient = jac.T @ jac, jac.T @ r
        free = np.flatnonzero(~(((z <= lower) & (gradient > 0.0)) | ((z >= upper) & (gradient < 0.0))))
        if np.abs(gradient[free]).max(initial=0.0) <= 1e-12:
            return z, True, "converged: the projected gradient vanishes"
        while True:
            step = np.zeros_like(z)
            block = hessian[np.ix_(free, free)] + mu * np.eye(len(free))
            step[free] = np.linalg.lstsq(block, -gradient[free], rcond=None)[0]  # least-norm where singular
            taken = np.clip(z + step, lower, upper) - z
            if np.linalg.norm(taken) <= tolerance * (np.linalg.norm(z) + tolerance):
                return z, True, "converged: the step is below the tolerance"
            try:
                trial = values(z + taken)
                trial_loss = float(trial @ trial)
            except NonFiniteLoss:  # a step too long for the model (a log-space value overflowing): a shorter one
                trial_loss = np.inf
            predicted = -(2.0 * gradient @ taken + taken @ hessian @ taken)
            if trial_loss < loss and predicted > 0.0:
                break
            mu, reductions = max(MU_MIN, MU_FACTOR * mu), 0
        z, r, loss = z + taken, trial, trial_loss
        shrink = MU_FACTOR ** -(2 ** reductions)
        mu, reductions = (0.0 if mu * shrink < MU_MIN else mu * shrink), reductions + 1


def least_squares(residuals, iterations: int = 30, x0=None, tolerance: float | None = None,
                  progress: bool = True, method: str = "trf") -> OptimizationResult:
    """Minimise ``r(x) . r(x)`` of ``residuals`` (see the module docstring) from ``x0``
    (physical values, default the declared ones) with a Jacobian at every iteration.

    iterations: Jacobian evaluations (Gauss-Newton iterations) at most; method: "trf" (scipy's
    trust-region reflective solver) or "lm" (``projected_lm``); tolerance: the relative change
    that ends the solve (default ``TOLERANCE`` of the method: for "trf" scipy's ftol and xtol,
    of the loss and of z; for "lm" of z, as ``mujoco.minimize``'s). Leaves the best values
    written.
    """
    from scipy.optimize import least_squares as scipy_least_squares

    if method not in METHODS:
        raise ValueError(f"unknown least-squares method {method!r}; expected one of {METHODS}")
    tolerance = TOLERANCE[method] if tolerance is None else tolerance
    params = residuals.params
    x_start = start_values(params, iterations, x0)
    start, rollouts0, gradients0 = time.perf_counter(), residuals.rollouts, residuals.gradients
    trace = _Trace(residuals, iterations, progress)

    def solve():
        if method == "lm":
            _, ok, message = projected_lm(trace.values, trace.jacobian, params.to_internal(x_start),
                                       *params.internal_bound_arrays(), lambda: len(trace.history) < iterations,
                                       tolerance)
            return ok, message if ok else f"iteration limit ({iterations}) reached"
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
