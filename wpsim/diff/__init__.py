"""Differentiation helpers: finite-difference gradient checks, the gradient audit,
checkpointed rollouts and gradient health."""

from .checkpoint import Rollout
from .grad_health import (
    GradientMonitor,
    GradientReport,
    NonFiniteGrad,
    NonFiniteGradientError,
    NonFiniteSource,
    backward_checked,
    clip_grad_norm,
    nonfinite_grads,
    plot_gradient_norms,
)
from .gradcheck import GradCheckResult, check_gradient, tape_gradient

__all__ = [
    "GradCheckResult",
    "GradientMonitor",
    "GradientReport",
    "NonFiniteGrad",
    "NonFiniteGradientError",
    "NonFiniteSource",
    "Rollout",
    "backward_checked",
    "check_gradient",
    "clip_grad_norm",
    "nonfinite_grads",
    "plot_gradient_norms",
    "tape_gradient",
]
