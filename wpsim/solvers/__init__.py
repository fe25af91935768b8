"""Time stepping: the solvers own their scratch buffers and launch kernels; forward
kinematics and multi-step rollouts."""

from wpsim.solvers.implicit_euler import ImplicitEulerSolver
from wpsim.solvers.kinematics import eval_fk
from wpsim.solvers.rollout import simulate
from wpsim.solvers.semi_implicit import SemiImplicitSolver
from wpsim.solvers.soft_contact_options import SoftContactOptions

__all__ = ["ImplicitEulerSolver", "SemiImplicitSolver", "SoftContactOptions", "eval_fk", "simulate"]
