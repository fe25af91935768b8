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
    adjoint_growth,
    backward_checked,
    clip_grad_norm,
    nonfinite_grads,
)
from wpsim.diff.gradcheck import (
    GradCheckResult,
    GradientChecks,
    check_gradient,
    check_gradients,
    check_vector_gradient,
    tape_gradient,
)

__all__ = [
    "GradCheckResult",
    "GradientChecks",
    "GradientMonitor",
    "GradientReport",
    "NonFiniteGrad",
    "NonFiniteGradientError",
    "NonFiniteSource",
    "Rollout",
    "adjoint_growth",
    "backward_checked",
    "check_gradient",
    "check_gradients",
    "check_vector_gradient",
    "clip_grad_norm",
    "diagnostics",
    "losses",
    "nonfinite_grads",
    "tape_gradient",
]
