"""A pool seen as a ``wpsim.opt`` problem: ``minimize``, ``multistart`` and the evolution
strategies of ``wpsim.opt.policies.es_search`` run on it unchanged.

``DistributedProblem(pool)`` has what those functions use of a ``Problem``: ``params`` (the
transforms between physical values x and the optimiser's vector z, the bounds, labels and
units), ``loss(x)``, ``loss_and_grad(x)``, the rollout and gradient counters, and the
``no_gradient`` and ``warnings`` reports. With ``worlds=K`` it is the problem of K
independent fits side by side (x holds K vectors of n entries, world after world; the loss
is the sum of theirs, in world order), which is what ``wpsim.opt.multistart`` fits: the
pool evaluates the K x S tasks in one batch, spread over its workers.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from wpsim.distributed.transport import count_option
from wpsim.opt.parameters import ParameterSet
from wpsim.opt.problem import NonFiniteLoss


class RemoteParameters(ParameterSet):
    """The parameter vector of a pool's shards, K times for ``worlds`` = K, without arrays: the
    shards' problems own those, on the workers. The transforms, bounds and gradient chain
    rule are ``ParameterSet``'s; ``write`` only checks and keeps the vector (every evaluation
    sends its own values to the shards)."""

    def __init__(self, space: dict, worlds: int = 1):
        self.worlds = count_option("worlds", worlds, 1)
        suffixes = [f"@{k}" for k in range(self.worlds)] if self.worlds > 1 else [""]
        self.labels = [label + suffix for suffix in suffixes for label in space["labels"]]
        self.units = list(space["units"]) * self.worlds
        for name in ("x0", "lower", "upper", "log", "scale"):
            setattr(self, name, np.tile(np.asarray(space[name]), self.worlds))
        self.written = self.x0.copy()
        """The physical vector last written (the best one, after ``minimize``)."""

    def write(self, x: np.ndarray):
        """Check and keep physical values x."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.x0.shape or not np.isfinite(x).all():
            raise ValueError(f"parameter vector must be {self.x0.shape} finite values, got {x}")
        self.written = x.copy()


class DistributedProblem:
    """The loss summed over a pool's shards as a function of x (see the module docstring).

    Counters: ``rollouts`` and ``gradients`` count evaluations of the whole loss (each one
    runs every shard's rollout, for every world); ``no_gradient`` lists the entries whose
    summed gradient is exactly 0 at the first gradient; ``warnings`` holds the shards'
    warnings, shard named.
    """

    def __init__(self, pool, worlds: int = 1):
        self.pool = pool
        self.params = RemoteParameters(pool.space, worlds)
        self.rollouts = 0
        self.gradients = 0
        self.no_gradient: list = []
        self.warnings: list = []
        self._world_losses = np.full(self.params.worlds, np.nan)
        self._seen = len(pool.warnings)  # the pool's warnings before this problem

    @property
    def x0(self) -> np.ndarray:
        """Initial physical parameter values."""
        return self.params.x0.copy()

    def world_losses(self) -> np.ndarray:
        """(worlds,) loss of each world at the last evaluation."""
        return self._world_losses.copy()

    def _rows(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.params.x0.shape:
            raise ValueError(f"x must have {self.params.size} entries ({', '.join(self.params.labels)}), got {x.shape}")
        return x.reshape(self.params.worlds, -1)

    def _total(self, losses: np.ndarray, x) -> float:
        self.rollouts += 1
        self._world_losses = losses
        new = self.pool.warnings[self._seen:]
        self._seen = len(self.pool.warnings)
        for message in new:
            warnings.warn(message, stacklevel=3)
        self.warnings += new
        loss = 0.0
        for value in losses:  # world order
            loss += float(value)
        if not math.isfinite(loss):
            raise NonFiniteLoss(f"the loss is {loss} at {dict(zip(self.params.labels, np.asarray(x).tolist()))}")
        return loss

    def loss(self, x) -> float:
        """The loss at physical values ``x`` (every shard's rollout, no backward)."""
        return self._total(self.pool.evaluate(self._rows(x)), x)

    def loss_and_grad(self, x) -> tuple:
        """(loss, d loss / d x) at physical values ``x``."""
        losses, grads = self.pool.values_and_grads(self._rows(x))
        loss = self._total(losses, x)
        grad = grads.reshape(-1)
        if self.gradients == 0:
            self.no_gradient = [label for label, g in zip(self.params.labels, grad) if g == 0.0]
        self.gradients += 1
        return loss, grad


def population_fitness(problem: DistributedProblem):
    """``fitness(z (P, n) torch tensor) -> (P,)`` minus the loss of every row, rows being the
    optimiser's vectors z of ``problem`` (1 world): one batched pool evaluation per call, the
    fitness ``wpsim.opt.policies.es_search`` ascends (a population spread over the workers)."""
    import torch

    if problem.params.worlds != 1:
        raise ValueError(f"population_fitness needs a problem of 1 world, got {problem.params.worlds}")

    def fitness(z):
        x = problem.params.to_physical(z.detach().cpu().numpy().astype(np.float64))
        problem.rollouts += len(x)
        return torch.as_tensor(-problem.pool.evaluate(x), dtype=z.dtype, device=z.device)

    return fitness
