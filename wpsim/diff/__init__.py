"""Differentiation: losses and state diagnostics recorded on the tape, finite-difference
gradient checks, checkpointed rollouts and gradient health."""

from wpsim.diff import diagnostics, losses
from wpsim.diff.checkpoint import Rollout
from wpsim.diff.grad_health import (
    GradientMonitor,
    GradientReport,
    NonFiniteGrad,
    NonFiniteGradientError,
    NonFiniteSource,
    backward_checked,
    clip_grad_norm,
    nonfinite_grads,
)
from wpsim.diff.gradcheck import GradCheckResult, check_gradient, tape_gradient

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
    "diagnostics",
    "losses",
    "nonfinite_grads",
    "tape_gradient",
]
