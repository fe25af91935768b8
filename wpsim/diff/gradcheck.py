"""Finite-difference checks of tape gradients.

``check_gradient`` compares the directional derivative g . d of a tape gradient g with a
central difference of the loss along the same direction d:

    fd(eps) = (L(p + eps d) - L(p - eps d)) / (2 eps)

The direction is random (fixed seed) and scaled to the array's RMS magnitude, so one eps is
meaningful for stiffness in N/m and positions in m alike. With a sequence of eps values
(an eps sweep, for contact where a single eps is unreliable) every value is reported, the
result is the best-agreeing one, and ``converged`` says whether the central differences at
the neighbouring eps values agree with it within 1%.
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
        """The central differences next to the chosen eps agree with it within 1%."""
        k = [row[0] for row in self.sweep].index(self.eps)
        neighbours = [self.sweep[j][1] for j in (k - 1, k + 1) if 0 <= j < len(self.sweep)]
        return all(_relative_error(self.fd, fd) <= 1e-2 for fd in neighbours)


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
        rng = np.random.default_rng(seed)
        scale = float(np.sqrt(np.mean(base.astype(np.float64) ** 2))) if base.size else 0.0
        direction = rng.standard_normal(base.shape) * (scale if scale > 0.0 else 1.0)
    direction = np.asarray(direction, dtype=np.float64)
    if direction.shape != base.shape:
        raise ValueError(f"direction shape {direction.shape} differs from parameter shape {base.shape}")
    _, (grad,) = tape_gradient(loss_fn, [param])
    tape_value = float(np.sum(grad.astype(np.float64) * direction))

    sweep = []
    try:
        for e in np.atleast_1d(eps):
            values = []
            for sign in (1.0, -1.0):
                param.assign((base + sign * e * direction).astype(base.dtype))
                values.append(_read_loss(loss_fn()))
            fd = (values[0] - values[1]) / (2.0 * e)
            sweep.append((float(e), fd, _relative_error(tape_value, fd)))
    finally:
        param.assign(base)
    best = min(sweep, key=lambda row: row[2])
    return GradCheckResult(tape_value, best[1], best[2], best[0], tol, sweep)


def _relative_error(a: float, b: float) -> float:
    if not (np.isfinite(a) and np.isfinite(b)):
        return float("inf")
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0.0 else 0.0
