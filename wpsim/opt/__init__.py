"""Optimisation as a library: optimisers over flat parameter vectors (more to come:
declared parameters, system identification, trajectory optimisation, policies)."""

from wpsim.opt.optimisers import Adam, adaptive_gradient_descent

__all__ = ["Adam", "adaptive_gradient_descent"]
