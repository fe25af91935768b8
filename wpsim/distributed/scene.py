"""Picklable scene descriptions, and the evaluation of shards in one process.

A ``Scene`` is what crosses a process boundary instead of a model: a module-level build
function (pickled by its qualified name), its arguments, and the weight of its loss. On a
worker, ``scene.make(device)`` calls ``build(*args, device=device, **kwargs)``, which
returns a ``wpsim.opt.Problem`` over one shard of worlds or trajectories (e.g. one time
window of a measured run, ``wpsim.distributed.sysid``), or a ``PolicyTask`` over a group
of worlds (``wpsim.distributed.policies``). Every shard of a pool declares the
same parameters (same labels, units, bounds, log-space flags and scales): one physical
vector x (n,) is written into all of them.

``ShardRunner`` holds the shards one process evaluates (built on first use, wrapped in an
adapter such as ``ProblemShard``, and kept) and runs tasks ``(shard, method, args)``; a
failing task is returned as a ``Failure`` naming the worker and the shard, so that the
driver raises one clear error.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from wpsim.opt.problem import NonFiniteLoss

SPACE_FIELDS = ("labels", "units", "x0", "lower", "upper", "log", "scale")
"""What describes a shard's parameter vector: labels and units (one per entry), the initial
physical values, the bounds (physical units), log-space flags and scales."""


class ShardError(RuntimeError):
    """A shard's evaluation failed on a worker (the message names the worker, its process and
    device, the shard and the cause)."""


class NonFiniteShard(ShardError, NonFiniteLoss):
    """A shard's loss or gradient is NaN or Inf (a blow-up); ``wpsim.opt.minimize`` stops on it
    as on any ``NonFiniteLoss``, keeping the best point so far."""


class WorkerLost(ShardError):
    """A worker died and could not be replaced (its actor's restarts are spent)."""


@dataclass(frozen=True)
class Scene:
    """A picklable description of one shard.

    build: a module-level function ``build(*args, device=..., **kwargs) -> Problem`` (or
        ``-> PolicyTask`` for ``wpsim.distributed.policies``); it is pickled by name: it must
        be importable on every node, as must any file it reads.
    args, kwargs: its arguments (picklable: numbers, strings, paths, small arrays).
    weight: the factor of this shard's loss (and gradient) in the pool's sum.
    name: a label for messages (default: the build function's name and arguments).
    """

    build: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    weight: float = 1.0
    name: str = ""

    def label(self) -> str:
        """How messages name the scene."""
        if self.name:
            return self.name
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{getattr(self.build, '__qualname__', self.build)}({', '.join(shown)})"

    def make(self, device):
        """Build the shard on ``device`` (a ``Problem``, or a ``PolicyTask`` for
        ``wpsim.distributed.policies``)."""
        return self.build(*self.args, device=device, **self.kwargs)


def check_scenes(scenes) -> list:
    """The scenes as a list, checked: at least one, each a ``Scene`` with a finite weight."""
    scenes = list(scenes)
    if not scenes:
        raise ValueError("no scenes: a pool needs at least one shard")
    for index, scene in enumerate(scenes):
        if not isinstance(scene, Scene):
            raise ValueError(f"shard {index}: expected a wpsim.distributed.Scene, got {type(scene).__name__}")
        if not (callable(scene.build) and math.isfinite(scene.weight)):
            raise ValueError(f"shard {index} ({scene.label()}): build must be callable and weight finite, got "
                             f"build={scene.build!r}, weight={scene.weight!r}")
    return scenes


def describe(problem) -> dict:
    """The parameter space of a ``Problem`` (``SPACE_FIELDS`` -> values)."""
    params = problem.params
    return {"labels": list(params.labels), "units": list(params.units), "x0": params.x0.copy(),
            "lower": params.lower.copy(), "upper": params.upper.copy(), "log": params.log.copy(),
            "scale": params.scale.copy()}


def common_space(spaces: list, scenes: list) -> dict:
    """The one parameter space of all shards, or a ValueError naming the first shard (and
    field) that declares another one than shard 0."""
    first = spaces[0]
    for index, space in enumerate(spaces[1:], start=1):
        for name in SPACE_FIELDS:
            a, b = first[name], space[name]
            same = a == b if isinstance(a, list) else (np.shape(a) == np.shape(b) and np.array_equal(a, b))
            if not same:
                raise ValueError(f"shard {index} ({scenes[index].label()}) declares other parameters than shard 0 "
                                 f"({scenes[0].label()}): its {name} are {b!r}, shard 0's {a!r}; every shard must "
                                 "declare the same parameter vector")
    return first


@dataclass
class Failure:
    """A task that raised: which shard, whether the cause was a non-finite loss, the message."""

    shard: int
    non_finite: bool
    message: str

    def error(self) -> ShardError:
        """The exception the driver raises for it."""
        return (NonFiniteShard if self.non_finite else ShardError)(self.message)


class ProblemShard:
    """A shard whose scene builds a ``wpsim.opt.Problem``: what a worker runs for ``ShardPool``
    (``context``, the pool-wide object other adapters take, is not used)."""

    def __init__(self, problem, context=None):
        self.problem = problem
        self.reported = 0  # warnings of the problem already returned

    def describe(self) -> dict:
        """The problem's parameter space."""
        return describe(self.problem)

    def evaluate(self, x: np.ndarray, gradient: bool) -> tuple:
        """(loss, d loss / d x (n,) or None, warnings the problem raised since the last call)."""
        loss, grad = self.problem.loss_and_grad(x) if gradient else (self.problem.loss(x), None)
        fresh = self.problem.warnings[self.reported:]
        self.reported = len(self.problem.warnings)
        return float(loss), grad, list(fresh)


class ShardRunner:
    """The shards of one process (on ``device``): each built on first use as
    ``adapter(scene.make(device), context)`` and kept, and calls of their methods.

    worker: the name messages give this process (e.g. "worker 1", "in-process").
    """

    def __init__(self, scenes: list, device, worker: str, adapter=ProblemShard, context=None):
        self.scenes, self.device, self.worker = list(scenes), wp.get_device(device), worker
        self.adapter, self.context = adapter, context
        self.shards: dict = {}

    def where(self) -> str:
        """This process, for messages: worker name, host, pid and device."""
        return f"{self.worker} (host {socket.gethostname()}, pid {os.getpid()}, device {self.device})"

    def run(self, tasks: list) -> list:
        """Results of ``tasks`` ((shard, method, args) each: ``method(*args)`` of that shard),
        up to the first one that raises, returned as a ``Failure``."""
        results = []
        for shard, method, args in tasks:
            doing = "building"
            try:
                if shard not in self.shards:
                    self.shards[shard] = self.adapter(self.scenes[shard].make(self.device), self.context)
                doing = f"running {method} on"
                results.append(getattr(self.shards[shard], method)(*args))
            except Exception as error:  # reported to the driver, which raises it with the shard named
                results.append(self._failure(shard, doing, error))
                break
        return results

    def _failure(self, shard: int, doing: str, error: Exception) -> Failure:
        message = (f"{self.where()} failed {doing} shard {shard} ({self.scenes[shard].label()}): "
                   f"{type(error).__name__}: {error}")
        return Failure(shard, isinstance(error, NonFiniteLoss), message)


def raise_failures(results: list):
    """Raise the error of the first ``Failure`` among ``results``."""
    for result in results:
        if isinstance(result, Failure):
            raise result.error()
