"""Scale-out on Ray (the optional ``distributed`` extra): a pool of workers, each owning one
device and the models of its shards, built from picklable ``Scene`` descriptions; losses and
gradients summed over the shards in a fixed order, so that the result does not depend on
the number of workers; a ``DistributedProblem`` that ``wpsim.opt.minimize`` /
``multistart`` / ``es_search`` run on unchanged; policy training (ES and value-free APG)
over shards of worlds. Ray is imported only when a
``WorkerPool`` is made (``import wpsim.distributed`` does not load it)."""

from wpsim.distributed.policies import PolicyShards, train_apg_sharded, train_es_sharded
from wpsim.distributed.pool import LocalPool, ShardPool, WorkerPool
from wpsim.distributed.problem import DistributedProblem, RemoteParameters, population_fitness
from wpsim.distributed.scene import NonFiniteShard, Scene, ShardError, WorkerLost
from wpsim.distributed.sysid import identify_windows, window_problem, window_scenes
from wpsim.distributed.transport import placement

__all__ = [
    "DistributedProblem",
    "LocalPool",
    "NonFiniteShard",
    "PolicyShards",
    "RemoteParameters",
    "Scene",
    "ShardError",
    "ShardPool",
    "WorkerLost",
    "WorkerPool",
    "identify_windows",
    "placement",
    "population_fitness",
    "train_apg_sharded",
    "train_es_sharded",
    "window_problem",
    "window_scenes",
]
