"""Matrix-free BiCGSTAB over particle vectors, written so it can run two ways.

A ``Workspace`` decides where every intermediate vector and scalar lives:

- ``reuse=True``: one array per name, allocated once and overwritten. Memory does not
  depend on the iteration count; a recorded tape may only hold a computation whose
  arrays are not overwritten before its backward (one evaluation per tape).
- ``reuse=False``: every request returns a new zeroed array with gradients, so the whole
  solve is a sequence of recorded launches on fresh arrays that ``wp.Tape`` can
  differentiate (unrolled differentiation; memory grows with the iterations).

The algorithm is written out of place; in reuse mode an output may alias an input only in
elementwise kernels, which is safe. Krylov scalars stay on the device; the host reads norms
only to decide when to stop.
"""

from __future__ import annotations

import math
from typing import Callable

import warp as wp

from wpsim.kernels import implicit
from wpsim.kernels.generic import for_precision


class Workspace:
    """Vectors (shape (n,), vec3) and one-element scalars of a Newton-Krylov solve.

    Args:
        n: vector length (particles).
        real: scalar type (wp.float32 or wp.float64).
        device: Warp device.
        reuse: keep one array per name (True) or return a fresh array per request (False).
        requires_grad: give reused arrays gradient buffers (fresh arrays always have them).
    """

    def __init__(self, n: int, real, device, reuse: bool, requires_grad: bool = False):
        self.n, self.real, self.device = n, real, device
        self.vec = wp.types.vector(3, real)
        self.reuse = reuse
        self.requires_grad = requires_grad or not reuse
        self._pool: dict = {}
        self._norm_scratch = wp.zeros(1, dtype=real, device=device)

    def _get(self, key: str, shape: int, dtype, zero: bool) -> wp.array:
        if not self.reuse:
            return wp.zeros(shape, dtype=dtype, device=self.device, requires_grad=True)
        arr = self._pool.get(key)
        if arr is None:
            arr = self._pool[key] = wp.zeros(shape, dtype=dtype, device=self.device, requires_grad=self.requires_grad)
        elif zero:
            arr.zero_()
        return arr

    def vector(self, key: str) -> wp.array:
        """The vector named ``key`` (contents undefined: the caller overwrites it)."""
        return self._get(key, self.n, self.vec, zero=False)

    def zeros(self, key: str) -> wp.array:
        """The vector named ``key``, zeroed."""
        return self._get(key, self.n, self.vec, zero=True)

    def scalar(self, key: str) -> wp.array:
        """The one-element scalar named ``key``, zeroed (dot products accumulate into it)."""
        return self._get(key, 1, self.real, zero=True)

    def zero_grads(self):
        """Zero the gradients of every pooled array."""
        for arr in self._pool.values():
            if arr.grad is not None:
                arr.grad.zero_()

    def launch(self, kernel, inputs: list, out: wp.array) -> wp.array:
        """Launch an elementwise wpsim kernel over ``out`` (its last argument); returns ``out``."""
        wp.launch(for_precision(kernel, self.real), dim=out.shape[0], inputs=inputs, outputs=[out], device=self.device)
        return out

    def dot(self, a: wp.array, b: wp.array, key: str) -> wp.array:
        """Device scalar a . b."""
        out = self.scalar(key)
        wp.launch(for_precision(implicit.dot, self.real), dim=self.n, inputs=[a, b], outputs=[out], device=self.device)
        return out

    def norm(self, a: wp.array) -> float:
        """Host value of the 2-norm of ``a`` (not recorded; synchronises)."""
        self._norm_scratch.zero_()
        wp.launch(for_precision(implicit.dot, self.real), dim=self.n, inputs=[a, a], outputs=[self._norm_scratch],
                  device=self.device, record_tape=False)
        return math.sqrt(max(float(self._norm_scratch.numpy()[0]), 0.0))

    def axpy(self, x: wp.array, y: wp.array, a: float, key: str) -> wp.array:
        """x + a y with a host scalar a."""
        return self.launch(implicit.axpy, [x, y, self.real(a)], self.vector(key))

    def axpy_device(self, x: wp.array, y: wp.array, a: wp.array, sign: float, key: str) -> wp.array:
        """x + sign a y with a device scalar a."""
        return self.launch(implicit.axpy_device, [x, y, a, self.real(sign)], self.vector(key))

    def scaled_difference(self, a: wp.array, b: wp.array, c: float, key: str) -> wp.array:
        """c (a - b)."""
        return self.launch(implicit.scaled_difference, [a, b, self.real(c)], self.vector(key))

    def ratio(self, num: wp.array, den: wp.array, key: str) -> wp.array:
        """Device scalar num / den (0 when den is 0)."""
        return self.launch(implicit.ratio, [num, den], self.scalar(key))


def bicgstab(
    apply: Callable[[wp.array, wp.array], wp.array],
    b: wp.array,
    ws: Workspace,
    rtol: float,
    atol: float,
    max_iterations: int,
) -> tuple[wp.array, int, float]:
    """Solve A x = b from x = 0 by BiCGSTAB, with ``apply(p, out)`` writing A p into ``out``.

    Stops when the residual norm is at most max(rtol |b|, atol), after ``max_iterations``,
    or when it becomes NaN/Inf (the iterate, then non-finite too, is returned so that the
    caller sees it). Returns (x, iterations, final residual norm). ``b`` is only read; it
    must not be one of the workspace's own vectors ("x", "p", "v", "s", "t", "r").
    """
    target = max(rtol * ws.norm(b), atol)
    x = ws.zeros("x")
    residual_norm = ws.norm(b)
    if residual_norm <= target:
        return x, 0, residual_norm
    r, p, v = b, b, None
    rho_prev = alpha = omega = None
    for it in range(max_iterations):
        rho = ws.dot(b, r, f"rho{it % 2}")  # shadow residual = b
        if it > 0:
            p = ws.launch(implicit.bicgstab_direction, [r, p, v, rho, rho_prev, alpha, omega], ws.vector("p"))
        v = apply(p, ws.vector("v"))
        alpha = ws.ratio(rho, ws.dot(b, v, "b_dot_v"), "alpha")
        s = ws.axpy_device(r, v, alpha, -1.0, "s")
        residual_norm = ws.norm(s)
        if not math.isfinite(residual_norm):
            return ws.axpy_device(x, p, alpha, 1.0, "x"), it + 1, residual_norm  # non-finite: stop, pass it on
        if residual_norm <= target:
            return ws.axpy_device(x, p, alpha, 1.0, "x"), it + 1, residual_norm
        t = apply(s, ws.vector("t"))
        omega = ws.ratio(ws.dot(t, s, "t_dot_s"), ws.dot(t, t, "t_dot_t"), "omega")
        x = ws.launch(implicit.bicgstab_update, [x, p, s, alpha, omega], ws.vector("x"))
        r = ws.axpy_device(s, t, omega, -1.0, "r")
        residual_norm = ws.norm(r)
        if not math.isfinite(residual_norm):
            return x, it + 1, residual_norm
        if residual_norm <= target:
            return x, it + 1, residual_norm
        rho_prev = rho
    return x, max_iterations, residual_norm
