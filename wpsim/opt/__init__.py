"""Optimisation as a library: declared parameters (bounds, log-space, scaling, derived
parameters), problems over differentiable rollouts, optimisers with progress and results,
multi-start fits as worlds of one model."""

from wpsim.opt.minimize import METHODS, minimize
from wpsim.opt.multistart import MultiStartResult, multistart, random_starts
from wpsim.opt.optimisers import Adam, adaptive_gradient_descent
from wpsim.opt.parameters import DerivedParameter, Parameter, ParameterSet
from wpsim.opt.problem import NonFiniteLoss, Problem
from wpsim.opt.result import OptimizationResult

__all__ = [
    "METHODS",
    "Adam",
    "MultiStartResult",
    "DerivedParameter",
    "NonFiniteLoss",
    "OptimizationResult",
    "Parameter",
    "ParameterSet",
    "Problem",
    "adaptive_gradient_descent",
    "minimize",
    "multistart",
    "random_starts",
]
