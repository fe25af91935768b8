"""Time integrators. A solver owns its scratch buffers and launches kernels."""

from .implicit_euler import ImplicitEulerSolver
from .semi_implicit import SemiImplicitSolver

__all__ = ["ImplicitEulerSolver", "SemiImplicitSolver"]
