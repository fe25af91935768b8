"""wpsim: a differentiable physics simulator on NVIDIA Warp.

Particles, springs, cloth, tetrahedral soft bodies and articulated rigid bodies stepped by
Warp kernels that are recorded on ``wp.Tape``, so any scalar loss of a rollout can be
differentiated with respect to initial states, controls and physical parameters.
"""

from . import diagnostics, losses
from .builder import ModelBuilder
from .diff import check_gradient
from .health import HealthReport, SimulationBlowUp, SimulationError
from .kinematics import eval_fk
from .model import Control, Model, State
from .rollout import simulate
from .solvers import ImplicitEulerSolver, SemiImplicitSolver, SoftContactOptions

__version__ = "0.1.0"

__all__ = [
    "Control",
    "HealthReport",
    "ImplicitEulerSolver",
    "Model",
    "ModelBuilder",
    "SemiImplicitSolver",
    "SimulationBlowUp",
    "SimulationError",
    "SoftContactOptions",
    "State",
    "check_gradient",
    "diagnostics",
    "eval_fk",
    "losses",
    "simulate",
]
