"""Pools that evaluate the loss and gradient of many shards: in this process, or on Ray actors.

A pool holds S shards (``Scene``s, one ``Problem`` each, all over the same parameter vector
x (n,)). For a batch of B parameter vectors it computes every (row, shard) task, on the
workers of its transport (``wpsim.distributed.transport``: placement, restarts and retries),
and reduces them on the driver in a fixed order:

    loss[b] = sum over s = 0, 1, ..., S - 1 of weight_s * loss_s(x_b)   (left to right)

and the same for the gradient, in float64 whatever the models' precision. Each task is
computed by the same code on the same kind of device wherever it runs, and the sum does not
depend on which worker computed which task, so the result is the same for any number of
workers: bitwise so on CPU workers, in float64 and in float32 models alike (the tests check
both). Compared with one process holding every shard's worlds in one model, a float32 loss
then differs only by the rounding of that model's float32 sum over the worlds (at most
about terms x 2^-24 of the loss), which the sharded sum does not make.

A task that raises comes back as one ``ShardError`` naming the worker (host, pid, device),
the shard and the cause; ``NonFiniteShard`` (a ``NonFiniteLoss``) for a non-finite loss,
on which ``wpsim.opt.minimize`` stops as it does in process. ``LocalPool`` is the in-process
path, ``WorkerPool`` the Ray one; ``ShardPool(scenes, workers)`` is the flag between them.
"""

from __future__ import annotations

import numpy as np

from wpsim.distributed.scene import ProblemShard, check_scenes, common_space
from wpsim.distributed.transport import Closing, connect, count_option, describe_all, dispatch, placement


class ShardPool(Closing):
    """The loss and gradient of ``scenes`` (``Problem`` shards) summed in a fixed order (see the
    module docstring). ``workers`` is the flag: 0 evaluates them in this process (on
    ``device``), >= 1 on that many Ray actors (``options``: those of ``WorkerPool``)."""

    def __init__(self, scenes, workers: int = 0, device=None, **options):
        self.scenes = check_scenes(scenes)
        self.weights = np.array([scene.weight for scene in self.scenes], dtype=np.float64)
        self.shard_losses = np.zeros((0, len(self.scenes)))
        """(B, S) unweighted loss of every task of the last evaluation."""
        self.warnings: list = []
        """Warnings the shards' problems raised (at their first gradient), shard named."""
        self.transport = connect(self.scenes, ProblemShard, None, workers, device, **options)
        try:
            self.space = common_space(describe_all(self.transport, len(self.scenes)), self.scenes)
            """The shards' common parameter space (``wpsim.distributed.scene.SPACE_FIELDS``)."""
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        """Workers evaluating the shards (1 in process)."""
        return self.transport.workers

    @property
    def size(self) -> int:
        """Entries n of the parameter vector."""
        return len(self.space["x0"])

    def worker_info(self) -> list:
        """One dict per worker: pid, device; on Ray also host, busy (a call is running) and
        calls (started in its current process)."""
        return self.transport.worker_info()

    def evaluate(self, params_batch) -> np.ndarray:
        """(B,) loss of each row of ``params_batch`` (B, n) physical values (no gradient)."""
        return self._compute(params_batch, gradient=False)[0]

    def values_and_grads(self, params_batch) -> tuple:
        """((B,) loss, (B, n) d loss / d x) of each row of ``params_batch`` (B, n)."""
        return self._compute(params_batch, gradient=True)

    def value_and_grad(self, params) -> tuple:
        """(loss, (n,) d loss / d x) at physical values ``params`` (n,): summed over the shards."""
        losses, grads = self.values_and_grads(np.asarray(params, dtype=np.float64)[None, :])
        return float(losses[0]), grads[0]

    def _compute(self, params_batch, gradient: bool) -> tuple:
        x = np.asarray(params_batch, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.size or not np.isfinite(x).all():
            raise ValueError(f"params_batch must be (B, {self.size}) finite values "
                             f"({', '.join(self.space['labels'])}), got shape {x.shape}")
        rows, shards = x.shape[0], len(self.scenes)
        where = placement(rows, shards, self.workers)
        found = dispatch(self.transport, [(where[b, s], (s, "evaluate", (x[b], gradient)))
                                          for b in range(rows) for s in range(shards)])
        losses = np.array([result[0] for result in found]).reshape(rows, shards)
        grads = np.array([result[1] for result in found]).reshape(rows, shards, self.size) if gradient else None
        for index, result in enumerate(found):
            self.warnings += [f"shard {index % shards}: {message}" for message in result[2]]
        self.shard_losses = losses
        total = np.zeros(rows)
        total_grad = np.zeros((rows, self.size)) if gradient else None
        for s in range(shards):  # the fixed order: shard 0, 1, ..., whichever worker computed them
            total = total + self.weights[s] * losses[:, s]
            if gradient:
                total_grad = total_grad + self.weights[s] * grads[:, s]
        return total, total_grad



class LocalPool(ShardPool):
    """The shards evaluated in this process on ``device`` (the in-process reference)."""

    def __init__(self, scenes, device=None):
        super().__init__(scenes, 0, device)


class WorkerPool(ShardPool):
    """The shards evaluated on ``workers`` Ray actors (``wpsim.distributed.transport``).

    address: the Ray cluster to join ("auto": the one ``ray start`` runs on this node,
        "ray://host:10001": a remote client); None starts a local Ray unless one is running,
        listening on the loopback address only, without a dashboard
        (``wpsim.distributed.transport.start_ray``). An already initialised Ray is used as it is.
    gpus_per_worker: GPUs Ray reserves for each actor (1: one actor per GPU; 0: CPU workers).
    cpus_per_worker: CPUs Ray reserves for each actor.
    max_restarts: how often Ray restarts a worker that died; max_task_retries: how often a
        call to a dead worker is retried on its replacement (the result is the same).
    init_options: further arguments of ``ray.init`` when this pool starts Ray (e.g.
        num_cpus=2).
    """

    def __init__(self, scenes, workers: int = 2, address: str | None = None, gpus_per_worker: float = 0.0,
                 cpus_per_worker: float = 1.0, max_restarts: int = 3, max_task_retries: int = 3,
                 init_options: dict | None = None):
        super().__init__(scenes, count_option("workers", workers, 1), address=address, gpus_per_worker=gpus_per_worker,
                         cpus_per_worker=cpus_per_worker, max_restarts=max_restarts, max_task_retries=max_task_retries,
                         init_options=init_options)
