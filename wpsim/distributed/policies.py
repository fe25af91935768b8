"""Policy training over shards of worlds: evolution strategies and analytic policy gradients
spread over workers.

A shard is a ``Scene`` whose build returns a ``wpsim.opt.policies.PolicyTask`` over its own
W_s worlds (an even number) on the worker's device; every shard's task has the same
observation and action sizes, and all shards together have W = sum W_s worlds. The driver
holds the policy (an ``MLPPolicy``); each worker gets a copy of it once, when the shards
start, and afterwards only flat parameter vectors, seeds and returns cross processes.

``train_es_sharded`` is ``wpsim.opt.policies.train_es`` with its population spread over the
shards: ``es_search`` runs unchanged on the driver (noise, rank shaping, Adam), and its
fitness sends shard s the antithetic pairs it holds (W_s / 2 consecutive pairs, theta +
sigma eps and theta - sigma eps from the same initial state); the shards' returns are put
back in pair order. Each shard draws its initial states from its own generator, seeded by
(config.seed, iteration, shard), so that a run depends on the shards, not on the number of
workers; it is therefore not the very run of ``train_es``, whose one generator draws all W
worlds' states at once. A worker that dies is replaced and its call retried with the same
seeds, which gives the same returns.

``train_apg_sharded`` is the value-free ``wpsim.opt.policies.train_apg`` data-parallel over
the shards: for every window of an episode the driver sends its policy parameters, each
shard runs the window from its worlds' states and returns the gradient of its objective
(minus the mean over its worlds of the window's reward sum, per policy step); the driver
sums them weighted by W_s / W in shard order (the gradient of the objective over all W
worlds), clips and takes the Adam step, as ``train_apg`` does once per window. A worker
keeps each shard's state between the windows of an episode; a replacement that has lost it
replays the episode's earlier windows from the initial states with the parameters the
driver sends along (every window's, so far), without gradients, and gets the same state.

Imports torch when a trainer runs (``import wpsim.distributed`` does not).
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np

from wpsim.distributed.scene import check_scenes
from wpsim.distributed.transport import Closing, connect, describe_all, dispatch, placement


def stream_seed(seed: int, iteration: int, shard: int) -> int:
    """The seed of shard ``shard``'s initial states at ``iteration`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([int(seed), int(iteration), int(shard)]).generate_state(1)[0])


class PolicyShard:
    """A shard whose scene builds a ``PolicyTask``, with the worker's copy of the policy."""

    def __init__(self, task, policy):
        self.task = task
        self.policy = copy.deepcopy(policy).to(task.device)
        self.cursor = None  # ((seed, next window), states at its start) within an APG episode

    def describe(self) -> dict:
        """worlds, observation_size, action_size, episode_steps and episode_env_steps of the
        shard's task."""
        task = self.task
        return {"worlds": task.worlds, "observation_size": task.observation_size, "action_size": task.action_size,
                "episode_env_steps": task.episode_env_steps, "episode_steps": task.episode_steps}

    def es_returns(self, params: np.ndarray, seed: int) -> np.ndarray:
        """(W_s,) episode returns of the shard's worlds run with parameter rows ``params``
        (W_s, P): rows i and i + W_s / 2 start from the same initial state (drawn with ``seed``)."""
        import torch

        from wpsim.opt.policies import run_episode

        task = self.task
        if params.shape[0] != task.worlds:
            raise ValueError(f"the shard has {task.worlds} worlds but was sent {params.shape[0]} parameter rows")
        half = task.initial_states(task.worlds // 2, torch.Generator().manual_seed(seed))
        state = {name: torch.cat([value, value]).contiguous() for name, value in half.items()}
        rows = self._tensor(params)
        with torch.no_grad():
            record = run_episode(task, lambda observation: self.policy.batched(rows, observation), state)
        return record.returns.double().cpu().numpy()

    def _window(self, state: dict, window: int, window_steps: int, theta: np.ndarray) -> tuple:
        """(state at the end, per-step rewards (W_s,) each) of policy steps window * window_steps
        onwards (at most window_steps) from ``state`` with parameters ``theta``."""
        task = self.task
        self.policy.set_flat_parameters(self._tensor(theta))
        rewards = []
        for t in range(window * window_steps, min((window + 1) * window_steps, task.episode_steps)):
            action = self.policy(task.observe(state, t))
            current, _ = task.advance(state, action, t)
            rewards.append(task.reward(state, action, current))
            state = current
        return state, rewards

    def _tensor(self, values: np.ndarray):
        """``values`` as a tensor of the task's dtype on its device."""
        import torch

        return torch.as_tensor(values, dtype=self.task.dtype, device=self.task.device)

    def apg_window(self, thetas: np.ndarray, window_steps: int, seed: int) -> tuple:
        """(d objective / d theta (P,), sum of the window's rewards over steps and worlds) of
        window k = len(thetas) - 1 of the episode whose initial states ``seed`` draws, the
        earlier windows having run with thetas[0..k-1] (replayed if this process lacks their
        end state) and this one with thetas[k]; the objective is ``apg_window_objective``'s."""
        import torch

        from wpsim.opt.policies import Window, apg_window_objective, detach_states

        window = len(thetas) - 1
        if self.cursor is not None and self.cursor[0] == (seed, window):
            state = self.cursor[1]
        else:
            state = self.task.initial_states(self.task.worlds, torch.Generator().manual_seed(seed))
            with torch.no_grad():
                for j in range(window):
                    state = self._window(state, j, window_steps, thetas[j])[0]
        self.policy.zero_grad(set_to_none=True)
        end, rewards = self._window(state, window, window_steps, thetas[window])
        steps_done = min((window + 1) * window_steps, self.task.episode_steps)
        apg_window_objective(Window(rewards, [], end, steps_done), self.task).backward()
        grad = torch.nn.utils.parameters_to_vector([p.grad for p in self.policy.parameters()])
        self.cursor = ((seed, window + 1), detach_states(end))
        return grad.double().cpu().numpy(), float(torch.stack(rewards).detach().sum())


class PolicyShards(Closing):
    """The shards of a policy task on a transport (``workers`` = 0: in this process on
    ``device``; >= 1: Ray actors, ``options`` as for ``wpsim.distributed.WorkerPool``).

    policy: the ``MLPPolicy`` whose copy each worker keeps (its parameters are sent per call).
    """

    def __init__(self, scenes, policy, workers: int = 0, device=None, **options):
        self.scenes = check_scenes(scenes)
        self.transport = connect(self.scenes, PolicyShard, policy, workers, device, **options)
        try:
            self.tasks = describe_all(self.transport, len(self.scenes))
            """What each shard's task is (``PolicyShard.describe``)."""
            self._check(policy)
        except BaseException:
            self.close()
            raise
        self.worlds = np.array([t["worlds"] for t in self.tasks])
        """(S,) worlds of each shard."""
        self.episode_env_steps = sum(t["episode_env_steps"] for t in self.tasks)
        """Simulator steps of one episode of every world of every shard."""

    def _check(self, policy):
        sizes = (policy.net[0].in_features, policy.net[-1].out_features)
        for index, task in enumerate(self.tasks):
            if (task["observation_size"], task["action_size"]) != sizes:
                raise ValueError(f"shard {index} ({self.scenes[index].label()}): its task has "
                                 f"{task['observation_size']} observations and {task['action_size']} actions, the "
                                 f"policy {sizes[0]} and {sizes[1]}")
            if task["worlds"] % 2:
                raise ValueError(f"shard {index} ({self.scenes[index].label()}): antithetic pairs need an even "
                                 f"number of worlds, got {task['worlds']}")

    @property
    def pairs(self) -> int:
        """Antithetic pairs over all shards (W / 2)."""
        return int(self.worlds.sum()) // 2

    def es_fitness(self, seed: int):
        """``fitness(params (2 pairs, P) tensor) -> (2 pairs,)`` for ``es_search``: pair i's rows
        i and pairs + i go to the shard holding pair i; call k draws initial states with
        ``stream_seed(seed, k, shard)``."""
        import torch

        owner = placement(1, len(self.scenes), self.transport.workers)[0]
        starts = np.concatenate([[0], np.cumsum(self.worlds // 2)])
        calls = {"count": 0}

        def fitness(params):
            rows = params.detach().cpu().double().numpy()
            pairs = self.pairs
            calls["count"] += 1
            tasks = []
            for s in range(len(self.scenes)):
                mine = np.r_[starts[s]:starts[s + 1], pairs + starts[s]:pairs + starts[s + 1]]
                tasks.append((owner[s], (s, "es_returns", (rows[mine], stream_seed(seed, calls["count"], s)))))
            found = dispatch(self.transport, tasks)
            plus = np.concatenate([returns[:len(returns) // 2] for returns in found])
            minus = np.concatenate([returns[len(returns) // 2:] for returns in found])
            return torch.as_tensor(np.concatenate([plus, minus]), dtype=params.dtype, device=params.device)

        return fitness

    def apg_gradient(self, thetas: np.ndarray, window_steps: int, seed: int, iteration: int) -> tuple:
        """(d objective / d theta (P,) over all W worlds, mean over the worlds of the window's
        reward sum) of window len(thetas) - 1 of episode ``iteration`` (``PolicyShard.apg_window``
        on every shard, initial states from ``stream_seed(seed, iteration, shard)``): the
        shards' gradients weighted by W_s / W and summed in shard order."""
        owner = placement(1, len(self.scenes), self.transport.workers)[0]
        thetas = np.asarray(thetas, dtype=np.float64)
        found = dispatch(self.transport, [(owner[s], (s, "apg_window", (thetas, window_steps,
                                                                          stream_seed(seed, iteration, s))))
                                          for s in range(len(self.scenes))])
        total = float(self.worlds.sum())
        grad = np.zeros(thetas.shape[1])
        for s, (shard_grad, _) in enumerate(found):  # the fixed order: shard 0, 1, ...
            grad = grad + (self.worlds[s] / total) * shard_grad
        return grad, sum(reward_sum for _, reward_sum in found) / total

    def worker_info(self) -> list:
        """One dict per worker (see ``wpsim.distributed.ShardPool.worker_info``)."""
        return self.transport.worker_info()



def _log_iteration(history, shards: PolicyShards, elapsed: float, mean_return: float, iteration: int, iterations: int,
                   verbose: bool):
    """Append one iteration (every world's episode, ``elapsed`` s of training so far, the mean
    return) to ``history``, and show it when ``verbose``."""
    from wpsim.io.progress import progress_line

    history.env_steps.append((history.env_steps[-1] if history.env_steps else 0) + shards.episode_env_steps)
    history.wall_s.append(elapsed)
    history.train_return.append(mean_return)
    if verbose:
        progress_line(iteration, iterations, f"{history.method}: mean return {mean_return:+.3f}")


def train_es_sharded(shards: PolicyShards, policy, config, verbose: bool = True, label: str = "ES (sharded)"):
    """Train ``policy`` by antithetic evolution strategies over ``shards`` (see the module
    docstring) with ``config`` (a ``wpsim.opt.policies.ESConfig``); returns the
    ``TrainingHistory`` (environment steps, training time and mean return per iteration;
    no held-out evaluations: run ``evaluate_policy`` on the trained policy)."""
    from wpsim.opt.policies import TrainingHistory, es_search

    config.check()
    history = TrainingHistory(label)
    clock = {"started": time.perf_counter(), "elapsed": 0.0}

    def after_iteration(iteration, theta, values):
        policy.set_flat_parameters(theta)
        clock["elapsed"] += time.perf_counter() - clock["started"]
        _log_iteration(history, shards, clock["elapsed"], float(values.mean()), iteration, config.iterations, verbose)
        clock["started"] = time.perf_counter()

    es_search(shards.es_fitness(config.seed), policy.flat_parameters(), config, shards.pairs, after_iteration)
    return history


def train_apg_sharded(shards: PolicyShards, policy, config, verbose: bool = True, label: str = "APG (sharded)"):
    """Train ``policy`` by value-free analytic policy gradients over ``shards`` (see the module
    docstring) with ``config`` (a ``wpsim.opt.policies.APGConfig`` without ``value_hidden``);
    returns the ``TrainingHistory`` (no held-out evaluations, as ``train_es_sharded``)."""
    import torch

    from wpsim.opt.policies import TrainingHistory

    config.check()
    if config.value_hidden is not None:
        raise ValueError(f"value_hidden must be None for train_apg_sharded (value-free), got {config.value_hidden!r}")
    steps = {t["episode_steps"] for t in shards.tasks}
    if len(steps) != 1:
        raise ValueError(f"every shard's task must have the same episode_steps, got {sorted(steps)}")
    windows = math.ceil(steps.pop() / config.window_steps)
    optimiser = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    final = config.learning_rate if config.final_learning_rate is None else config.final_learning_rate
    history, elapsed = TrainingHistory(label), 0.0
    for iteration in range(1, config.iterations + 1):
        started = time.perf_counter()
        progress = (iteration - 1) / max(config.iterations - 1, 1)
        for group in optimiser.param_groups:
            group["lr"] = config.learning_rate + progress * (final - config.learning_rate)
        thetas, episode_return = [], 0.0
        for _ in range(windows):
            thetas.append(policy.flat_parameters().double().cpu().numpy())
            grad, window_return = shards.apg_gradient(np.stack(thetas), config.window_steps, config.seed, iteration)
            episode_return += window_return
            optimiser.zero_grad(set_to_none=True)
            start = 0
            for p in policy.parameters():
                p.grad = torch.as_tensor(grad[start:start + p.numel()], dtype=p.dtype, device=p.device).view_as(p)
                start += p.numel()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimiser.step()
        elapsed += time.perf_counter() - started
        _log_iteration(history, shards, elapsed, episode_return, iteration, config.iterations, verbose)
    return history
