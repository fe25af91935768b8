"""Differentiation helpers: finite-difference gradient checks and the gradient audit."""

from .gradcheck import GradCheckResult, check_gradient, tape_gradient

__all__ = ["GradCheckResult", "check_gradient", "tape_gradient"]
