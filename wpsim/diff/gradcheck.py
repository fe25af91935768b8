"""Finite-difference checks of tape gradients.

``check_gradient`` compares the directional derivative g . d of a tape gradient g with a
central difference of the loss along the same direction d:

    fd(eps) = (L(p + eps d) - L(p - eps d)) / (2 eps)

The direction is random (fixed seed) and scaled to the array's RMS magnitude, so one eps is
meaningful for stiffness in N/m and positions in m alike. With a sequence of eps values
(an eps sweep, for contact where a single eps is unreliable) every value is reported, the
result is the best-agreeing one, and ``converged`` says whether it lies on a plateau: the
central difference at a neighbouring eps agrees with it within 1%.

Whole problems: ``check_gradients`` checks a computation over several arrays that returns
its loss from one call and accumulates its gradient from another (any ``Rollout``: full,
checkpointed, with a controller), ``check_vector_gradient`` a function of a flat parameter
vector (e.g. ``wpsim.opt.Problem.loss_and_grad``); both along random directions and
coordinate directions (the entry of largest gradient and random others), each with the eps
sweep, and return a ``GradientChecks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import warp as wp


@dataclass
class GradCheckResult:
    """Outcome of one gradient check.

    tape: g . d from the tape; fd: the central difference at ``eps``; rel_error:
    |tape - fd| / max(|tape|, |fd|); sweep: (eps, fd, rel_error) for every eps tried;
    ok: rel_error <= tol and the derivative is not zero (a zero derivative proves nothing).
    """

    tape: float
    fd: float
    rel_error: float
    eps: float
    tol: float
    sweep: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.rel_error <= self.tol and max(abs(self.tape), abs(self.fd)) > 0.0)

    @property
    def converged(self) -> bool:
        """The central difference at a neighbouring eps of the sweep agrees with the chosen
        one within 1%: the chosen eps lies on a plateau (at its edge or inside). False for a
        single eps."""
        k = [row[0] for row in self.sweep].index(self.eps)
        neighbours = [self.sweep[j][1] for j in (k - 1, k + 1) if 0 <= j < len(self.sweep)]
        return any(_relative_error(self.fd, fd) <= 1e-2 for fd in neighbours)


EPS_SWEEP = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
"""Default relative steps of the whole-problem checks."""


@dataclass
class GradientChecks:
    """Directional checks of one gradient: ``rows`` are (direction label, ``GradCheckResult``);
    ok: every row agrees within ``tol`` (a coordinate whose tape and central differences are
    both zero agrees) and at least one derivative is non-zero."""

    rows: list
    tol: float

    @property
    def ok(self) -> bool:
        agree = all(result.rel_error <= self.tol for _, result in self.rows)
        return bool(agree and any(result.ok for _, result in self.rows))

    @property
    def worst(self) -> tuple:
        """The (label, result) row of largest relative error."""
        return max(self.rows, key=lambda row: row[1].rel_error)

    def __str__(self) -> str:
        lines = [f"{label}: tape {r.tape:.9g}, fd {r.fd:.9g}, rel. error {r.rel_error:.2e} at eps {r.eps:g}"
                 for label, r in self.rows]
        return "\n".join(lines)


def _read_loss(loss: wp.array) -> float:
    values = loss.numpy()
    if values.size != 1:
        raise ValueError(f"loss must be a one-element array, got shape {values.shape}")
    return float(values.reshape(-1)[0])


def tape_gradient(loss_fn: Callable[[], wp.array], params: Sequence[wp.array]) -> tuple[float, list]:
    """Loss value and gradients (NumPy copies) of ``params`` from one recorded evaluation."""
    for p in params:
        if not p.requires_grad:
            raise ValueError("check_gradient: the parameter array does not require gradients")
    tape = wp.Tape()
    with tape:
        loss = loss_fn()
    tape.backward(loss=loss)
    grads = [p.grad.numpy().copy() for p in params]
    value = _read_loss(loss)
    tape.zero()
    return value, grads


def check_gradient(
    loss_fn: Callable[[], wp.array],
    param: wp.array,
    eps: float | Sequence[float] = 1e-6,
    tol: float = 1e-4,
    seed: int = 0,
    direction: np.ndarray | None = None,
) -> GradCheckResult:
    """Compare the tape gradient of ``loss_fn()`` w.r.t. ``param`` with central differences.

    Args:
        loss_fn: runs the computation from scratch, reading ``param``, and returns a
            one-element loss array. It is called once under a tape and twice per eps.
        param: any model, state or control array with ``requires_grad``; it is perturbed in
            place and restored.
        eps: relative step, or a sequence of steps for an eps sweep.
        tol: relative-error bound for ``ok``.
        seed: seed of the random direction (ignored when ``direction`` is given).
        direction: explicit direction, same shape as ``param.numpy()``.
    """
    base = param.numpy().copy()
    if direction is None:
        direction = np.random.default_rng(seed).standard_normal(base.shape) * _rms_scale(base)
    direction = np.asarray(direction, dtype=np.float64)
    if direction.shape != base.shape:
        raise ValueError(f"direction shape {direction.shape} differs from parameter shape {base.shape}")
    _, (grad,) = tape_gradient(loss_fn, [param])

    def loss_along(t: float) -> float:
        param.assign((base + t * direction).astype(base.dtype))
        return _read_loss(loss_fn())

    try:
        return _sweep(float(np.sum(grad.astype(np.float64) * direction)), loss_along, eps, tol)
    finally:
        param.assign(base)


def _sweep(tape_value: float, loss_along: Callable[[float], float], eps, tol: float) -> GradCheckResult:
    """Central differences of ``loss_along(t)`` (the loss at p + t d) at every eps against
    the tape's g . d; the best-agreeing eps is the result."""
    sweep = []
    for e in np.atleast_1d(eps):
        fd = (loss_along(float(e)) - loss_along(-float(e))) / (2.0 * e)
        sweep.append((float(e), fd, _relative_error(tape_value, fd)))
    best = min(sweep, key=lambda row: row[2])
    return GradCheckResult(tape_value, best[1], best[2], best[0], tol, sweep)


def check_vector_gradient(
    loss_and_grad: Callable[[np.ndarray], tuple],
    x0,
    loss: Callable[[np.ndarray], float] | None = None,
    eps: float | Sequence[float] = EPS_SWEEP,
    tol: float = 1e-4,
    random_directions: int = 2,
    coordinates: int = 3,
    seed: int = 0,
    scale=None,
    names: Sequence[str] | None = None,
) -> GradientChecks:
    """Check the gradient of a function of a flat parameter vector against central differences.

    Args:
        loss_and_grad: ``loss_and_grad(x) -> (loss, gradient)`` (e.g.
            ``wpsim.opt.Problem.loss_and_grad``); called once, at ``x0``.
        x0: the parameter vector (N,) at which the gradient is checked.
        loss: ``loss(x) -> float`` for the central differences (default: the loss of
            ``loss_and_grad``, which then also runs a backward per evaluation).
        eps: relative steps (an eps sweep) or one step.
        tol: relative-error bound of every direction.
        random_directions: how many random directions (standard normal times ``scale``).
        coordinates: how many coordinate directions: the entry of largest |gradient|, then
            random other entries (at most N).
        seed: seed of the random directions and entries.
        scale: (N,) magnitude of each entry's step per unit eps (default |x0_i|, 1 where
            x0_i = 0).
        names: (N,) entry names for the row labels (default "x[i]").
    """
    x0 = np.asarray(x0, dtype=np.float64).reshape(-1)
    loss = loss if loss is not None else (lambda x: loss_and_grad(x)[0])
    scale = np.where(x0 != 0.0, np.abs(x0), 1.0) if scale is None else np.asarray(scale, dtype=np.float64)
    if scale.shape != x0.shape:
        raise ValueError(f"scale shape {scale.shape} differs from the parameter vector's {x0.shape}")
    names = [f"x[{i}]" for i in range(x0.size)] if names is None else list(names)
    _, grad = loss_and_grad(x0.copy())
    grad = np.asarray(grad, dtype=np.float64).reshape(-1)
    if grad.shape != x0.shape:
        raise ValueError(f"the gradient has shape {grad.shape}, the parameter vector {x0.shape}")
    rng = np.random.default_rng(seed)
    directions = [(f"random direction {k}", rng.standard_normal(x0.size) * scale) for k in range(random_directions)]
    first = int(np.argmax(np.abs(grad)))
    others = rng.permutation(np.delete(np.arange(x0.size), first))
    for i in [first, *others[:max(coordinates - 1, 0)]][:coordinates]:
        direction = np.zeros_like(x0)
        direction[i] = scale[i]
        directions.append((f"coordinate {names[i]}", direction))
    rows = [(label, _sweep(float(grad @ d), lambda t, d=d: float(loss(x0 + t * d)), eps, tol))
            for label, d in directions]
    return GradientChecks(rows, tol)


def check_gradients(
    forward: Callable[[], float],
    backward: Callable[[], object],
    arrays,
    eps: float | Sequence[float] = EPS_SWEEP,
    tol: float = 1e-4,
    random_directions: int = 2,
    coordinates: int = 3,
    seed: int = 0,
) -> GradientChecks:
    """Check the gradient of a computation w.r.t. several arrays against central differences.

    Args:
        forward: runs the computation from the arrays' current values and returns its loss
            (e.g. ``lambda: rollout.forward(state0)``).
        backward: accumulates the gradient of the last ``forward`` into the arrays' ``.grad``
            (e.g. ``rollout.backward``); the check zeroes those gradients first.
        arrays: name -> array (or a sequence of arrays) with ``requires_grad``: model, state,
            control or controller arrays; perturbed in place and restored.
        eps, tol, random_directions, coordinates, seed: as for ``check_vector_gradient``;
            each array's entries are stepped in units of its RMS magnitude (1 if all zero).
    """
    items = list(arrays.items()) if isinstance(arrays, dict) else [(f"arrays[{i}]", a) for i, a in enumerate(arrays)]
    if not items:
        raise ValueError("check_gradients: no arrays given")
    for name, arr in items:
        if arr.grad is None:
            raise ValueError(f"check_gradients: {name} does not require gradients")
    bases = [arr.numpy().copy() for _, arr in items]
    sizes = np.cumsum([0] + [b.size for b in bases])
    names, scale = [], []
    for (name, _), base in zip(items, bases):
        names += [f"{name}[{', '.join(map(str, np.unravel_index(i, base.shape)))}]" for i in range(base.size)]
        scale += [_rms_scale(base)] * base.size

    def write(x: np.ndarray):
        for (_, arr), base, a, b in zip(items, bases, sizes[:-1], sizes[1:]):
            arr.assign(x[a:b].reshape(base.shape).astype(base.dtype))

    def loss(x: np.ndarray) -> float:
        write(x)
        return float(forward())

    def loss_and_grad(x: np.ndarray) -> tuple:
        write(x)
        for _, arr in items:
            arr.grad.zero_()
        value = float(forward())
        backward()
        return value, np.concatenate([arr.grad.numpy().astype(np.float64).reshape(-1) for _, arr in items])

    x0 = np.concatenate([base.astype(np.float64).reshape(-1) for base in bases])
    try:
        return check_vector_gradient(loss_and_grad, x0, loss, eps, tol, random_directions, coordinates, seed,
                                     np.asarray(scale), names)
    finally:
        write(x0)


def _rms_scale(values: np.ndarray) -> float:
    """RMS magnitude of an array's entries, 1 when they are all zero (or there are none)."""
    rms = float(np.sqrt(np.mean(values.astype(np.float64) ** 2))) if values.size else 0.0
    return rms if rms > 0.0 else 1.0


def _relative_error(a: float, b: float) -> float:
    if not (np.isfinite(a) and np.isfinite(b)):
        return float("inf")
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0.0 else 0.0
