"""Host-side first-order optimisers for small parameter vectors."""

from __future__ import annotations

import numpy as np


class Adam:
    """Adam (Kingma & Ba) on a NumPy parameter array; ``step`` returns the updated copy."""

    def __init__(self, lr: float = 1e-2, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = self.v = None
        self.t = 0

    def step(self, params: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """One update of ``params`` along ``-grad``."""
        grad = np.asarray(grad, dtype=np.float64)
        if not np.all(np.isfinite(grad)):
            raise FloatingPointError("Adam.step: the gradient contains NaN or Inf")
        if self.m is None:
            self.m = np.zeros_like(grad)
            self.v = np.zeros_like(grad)
        self.t += 1
        self.m = self.beta1 * self.m + (1.0 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1.0 - self.beta2) * grad * grad
        m_hat = self.m / (1.0 - self.beta1**self.t)
        v_hat = self.v / (1.0 - self.beta2**self.t)
        return params - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def adaptive_gradient_descent(loss_and_grad, x0, iterations: int, lr: float, grow: float = 1.5, shrink: float = 0.5,
                              tolerance: float = 0.0, callback=None):
    """Gradient descent that keeps a step only if it lowers the loss.

    After an accepted step the step size grows by ``grow``, after a rejected one it shrinks
    by ``shrink`` and the step is retried from the last accepted point. Each iteration costs
    one ``loss_and_grad(x) -> (loss, grad)`` evaluation; the loop stops early once the loss
    is below ``tolerance``. ``callback(iteration, x, loss, accepted)`` is called after each.
    Returns (best x, list of the accepted losses per iteration).
    """
    x = np.asarray(x0, dtype=np.float64)
    loss, grad = loss_and_grad(x)
    history = [loss]
    if callback is not None:
        callback(0, x, loss, True)
    for it in range(1, iterations + 1):
        if loss < tolerance:
            break
        trial = x - lr * grad
        trial_loss, trial_grad = loss_and_grad(trial)
        accepted = trial_loss < loss
        if accepted:
            x, loss, grad = trial, trial_loss, trial_grad
            lr *= grow
        else:
            lr *= shrink
        history.append(loss)
        if callback is not None:
            callback(it, trial, trial_loss, accepted)
    return x, history
