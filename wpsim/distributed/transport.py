"""Where shards run: in this process, or on Ray actors (``ray`` is imported when a
``RayTransport`` is made, never at import).

A transport owns W workers, each a ``ShardRunner`` (``wpsim.distributed.scene``) over all the
scenes, which builds a shard the first time it is sent a task for it. ``call({worker:
[(shard, method, args), ...]})`` runs every worker's list and returns {worker: results};
a failing task comes back as a ``Failure`` (the caller raises it). Only the tasks'
arguments and results cross process boundaries: parameter vectors, seeds, losses,
gradients, returns and messages.

Placement is static (``placement``): shard s goes to worker s mod W when there are at
least as many shards as workers (each worker keeps its own shards), else task (b, s) goes
to worker (b S + s) mod W (a population spread over the workers).

On Ray, each actor owns one device: the GPU Ray assigns it (``gpus_per_worker``), else the
CPU. A worker that dies is restarted by Ray (``max_restarts``: a new process, which rebuilds
its shards on first use) and the call it was running, all its tasks, is retried there
(``max_task_retries``). A worker gone for good raises ``WorkerLost`` naming it and its shards.

A Ray this module starts for itself (no cluster address given) listens on the loopback
address only and has no dashboard (``start_ray``); joining a cluster is asking for the network.
"""

from __future__ import annotations

import os

import numpy as np

from wpsim.distributed.scene import ProblemShard, ShardError, ShardRunner, WorkerLost, raise_failures

INSTALL_HINT = "Ray workers need Ray: pip install 'wpsim[distributed]' (or pip install ray)"


def placement(rows: int, shards: int, workers: int) -> np.ndarray:
    """(rows, shards) int: the worker of task (row b, shard s) (see the module docstring)."""
    b, s = np.meshgrid(np.arange(rows), np.arange(shards), indexing="ij")
    return s % workers if shards >= workers else (b * shards + s) % workers


def count_option(name: str, value, minimum: int) -> int:
    """``value`` as an int, checked to be an integer >= ``minimum``."""
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class Closing:
    """``close()`` releases the transport; usable as a context manager that closes on exit."""

    def close(self):
        """Release the workers (and Ray, if this object's transport started it)."""
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start_ray(ray, address: str | None, init_options: dict | None):
    """``ray.init(address, **init_options)``. A local Ray (address None without a
    ``RAY_ADDRESS`` in the environment, or "local") starts without a dashboard and with the
    loopback address as its node address, so that its servers bind to it alone: Ray replaces
    ``_node_ip_address="127.0.0.1"`` by a reachable address, but takes the loopback one while
    its ``ENABLE_RAY_CLUSTER`` constant is off (a Ray without that constant listens as it
    chooses). ``init_options`` override the defaults."""
    local = address == "local" or (address is None and not os.environ.get("RAY_ADDRESS"))
    if not local:
        ray.init(address=address, **(init_options or {}))
        return
    from ray._private import ray_constants

    clusters = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address=address, **{"include_dashboard": False, **(init_options or {})})
    finally:
        if clusters is None:
            del ray_constants.ENABLE_RAY_CLUSTER
        else:
            ray_constants.ENABLE_RAY_CLUSTER = clusters


class LocalTransport:
    """One in-process worker on ``device``."""

    workers = 1

    def __init__(self, scenes: list, adapter=ProblemShard, context=None, device=None):
        self.runner = ShardRunner(scenes, device, "in-process", adapter, context)

    def call(self, tasks: dict) -> dict:
        """worker -> results of its tasks."""
        return {w: self.runner.run(todo) for w, todo in tasks.items()}

    def worker_info(self) -> list:
        """This process: pid and device."""
        return [{"pid": os.getpid(), "device": str(self.runner.device)}]

    def close(self):
        """Nothing to release."""


class _Worker:
    """The body of one Ray actor: a ``ShardRunner`` on the actor's device. Made a Ray actor
    class by ``RayTransport`` (``ray.remote``), so that this module never imports ray."""

    def __init__(self, index: int, scenes: list, adapter, context):
        import ray
        import warp as wp

        wp.config.log_level = wp.LOG_WARNING
        wp.init()
        gpu = bool(ray.get_gpu_ids()) and wp.get_cuda_device_count() > 0
        self.runner = ShardRunner(scenes, "cuda:0" if gpu else "cpu", f"worker {index}", adapter, context)
        self.busy, self.calls = False, 0

    def info(self) -> dict:
        """This process: pid, host, device, whether a call is running and the calls started."""
        import socket

        return {"pid": os.getpid(), "host": socket.gethostname(), "device": str(self.runner.device),
                "busy": self.busy, "calls": self.calls}

    def run(self, tasks: list) -> list:
        """``ShardRunner.run`` of ``tasks``."""
        self.busy, self.calls = True, self.calls + 1
        try:
            return self.runner.run(tasks)
        finally:
            self.busy = False


class RayTransport:
    """``workers`` Ray actors (see the module docstring); the options are
    ``wpsim.distributed.WorkerPool``'s."""

    def __init__(self, scenes: list, adapter=ProblemShard, context=None, workers: int = 2, address: str | None = None,
                 gpus_per_worker: float = 0.0, cpus_per_worker: float = 1.0, max_restarts: int = 3,
                 max_task_retries: int = 3, init_options: dict | None = None):
        self.workers = count_option("workers", workers, 1)
        self.max_restarts = count_option("max_restarts", max_restarts, 0)
        self.max_task_retries = count_option("max_task_retries", max_task_retries, 0)
        for name, value in (("gpus_per_worker", gpus_per_worker), ("cpus_per_worker", cpus_per_worker)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        try:
            import ray
        except ImportError as error:
            raise ImportError(INSTALL_HINT) from error
        self.actors = []
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            start_ray(ray, address, init_options)
        actor = ray.remote(_Worker).options(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker,
                                            max_restarts=self.max_restarts, max_task_retries=self.max_task_retries,
                                            max_concurrency=2)  # info() answers while run() works
        self.actors = [actor.remote(index, list(scenes), adapter, context) for index in range(self.workers)]

    def call(self, tasks: dict) -> dict:
        """worker -> results of its tasks (all workers' calls run at once)."""
        refs = {w: self.actors[w].run.remote(todo) for w, todo in tasks.items()}
        shards = {w: sorted({task[0] for task in todo}) for w, todo in tasks.items()}
        return dict(zip(refs, self._gather(refs, shards)))

    def worker_info(self) -> list:
        """One dict per worker: pid, host, device, busy (a call is running), calls (started
        in its current process)."""
        return self._gather({w: actor.info.remote() for w, actor in enumerate(self.actors)}, {})

    def _gather(self, refs: dict, shards: dict) -> list:
        """The results of ``refs`` (worker -> object ref), in order; a worker that is gone for
        good, or an error outside the shards' code, raises one error naming it and its shards."""
        import ray

        out = []
        for w, ref in refs.items():
            held = f" holding shards {shards[w]}" if shards.get(w) else ""
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayActorError as error:
                raise WorkerLost(f"worker {w}{held} died and its call was not completed by a replacement "
                                 f"(max_restarts={self.max_restarts}, max_task_retries={self.max_task_retries}): "
                                 f"{type(error).__name__}") from None
            except ray.exceptions.RayTaskError as error:
                raise ShardError(f"worker {w}{held} failed outside its shards: {error.cause!r}") from None
        return out

    def close(self):
        """Stop the workers (and Ray, if this transport started it)."""
        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()


def connect(scenes: list, adapter, context=None, workers: int = 0, device=None, **options):
    """The flag: ``workers`` = 0 runs the shards in this process (on ``device``), >= 1 on that
    many Ray actors (``RayTransport(..., **options)``)."""
    workers = count_option("workers", workers, 0)
    if workers == 0:
        if options:
            raise ValueError(f"options {sorted(options)} are for Ray workers; they need workers >= 1")
        return LocalTransport(scenes, adapter, context, device)
    if device is not None:
        raise ValueError("device is for the in-process path (workers=0); Ray workers take the GPU Ray assigns "
                         "(gpus_per_worker) or the CPU")
    return RayTransport(scenes, adapter, context, workers, **options)


def dispatch(transport, tasks: list) -> list:
    """Results of ``tasks`` ((worker, (shard, method, args)) each), in their order: one call
    per worker with its tasks in order; the first ``Failure`` is raised."""
    by_worker = {}
    for index, (worker, task) in enumerate(tasks):
        by_worker.setdefault(int(worker), []).append((index, task))
    found = transport.call({w: [task for _, task in todo] for w, todo in by_worker.items()})
    out = [None] * len(tasks)
    for w, todo in by_worker.items():
        raise_failures(found[w])
        for (index, _), result in zip(todo, found[w]):
            out[index] = result
    return out


def describe_all(transport, count: int) -> list:
    """``describe()`` of each of ``count`` shards, built on the worker that keeps it."""
    owner = placement(1, count, transport.workers)[0]
    return dispatch(transport, [(owner[s], (s, "describe", ())) for s in range(count)])
