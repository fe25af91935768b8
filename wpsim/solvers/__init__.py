"""Time integrators. A solver owns its scratch buffers and launches kernels."""

from .semi_implicit import SemiImplicitSolver

__all__ = ["SemiImplicitSolver"]
