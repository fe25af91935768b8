"""wpsim: a differentiable physics simulator on NVIDIA Warp.

Particles, springs, cloth, tetrahedral soft bodies and articulated rigid bodies stepped by
Warp kernels that are recorded on ``wp.Tape``, so any scalar loss of a rollout can be
differentiated with respect to initial states, controls and physical parameters.

The sub-packages are the layers (a lower one never imports a higher one): ``kernels``
(device code), ``core`` (builder, Model/State/Control), ``solvers`` (time stepping),
``diff`` (losses, gradient checks, checkpointed rollouts), ``io`` (files and pictures),
``opt`` (optimisation), ``tasks`` (the scenes, costs and success tests people optimise),
``apps`` (command line, demo, audit) and ``bench`` (benchmarks). ``io``, ``opt``, ``tasks``,
``apps`` and ``bench`` are imported on first use, so ``import wpsim`` loads neither ``pxr``,
``trimesh`` nor ``matplotlib``.
"""

import sys

if sys.argv[:1] == ["-m"]:  # ``python -m wpsim...`` loading its package: stop signals caught from here
    import wpsim_cli

    wpsim_cli.catch_stops_as_module()

from wpsim import core, diff, kernels, solvers  # noqa: E402
from wpsim.core import (
    ContactNotConverged,
    Control,
    HealthReport,
    Model,
    ModelBuilder,
    SimulationBlowUp,
    SimulationError,
    State,
)
from wpsim.core.lazy import lazy_submodules
from wpsim.diff import Rollout, check_gradient
from wpsim.solvers import ImplicitEulerSolver, SemiImplicitSolver, SoftContactOptions, eval_fk, simulate

__version__ = "0.2.0"

LAZY_PACKAGES = ("apps", "bench", "io", "opt", "tasks")

__all__ = [
    "ContactNotConverged",
    "Control",
    "HealthReport",
    "ImplicitEulerSolver",
    "Model",
    "ModelBuilder",
    "Rollout",
    "SemiImplicitSolver",
    "SimulationBlowUp",
    "SimulationError",
    "SoftContactOptions",
    "State",
    "check_gradient",
    "core",
    "diff",
    "eval_fk",
    "kernels",
    "simulate",
    "solvers",
    "apps",
    "bench",
    "io",
    "opt",
    "tasks",
]

__getattr__, __dir__ = lazy_submodules(__name__, LAZY_PACKAGES, globals())
