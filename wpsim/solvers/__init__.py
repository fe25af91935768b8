"""Time integrators. A solver owns its scratch buffers and launches kernels."""

from .implicit_euler import ImplicitEulerSolver
from .semi_implicit import SemiImplicitSolver
from .soft_contact import SoftContactOptions

__all__ = ["ImplicitEulerSolver", "SemiImplicitSolver", "SoftContactOptions"]
