"""Policies trained through the simulator: analytic policy gradients against evolution strategies.

A ``PolicyTask`` turns the W worlds of one ``wpsim.opt.torch.TorchStep`` into a batch of
control episodes: random initial states per world, observations, controls from actions
(held for ``action_repeat`` simulator steps), rewards and a success test. Two trainers share
the same ``MLPPolicy`` architecture and spend the same number of environment steps per
iteration (one episode of every world):

- ``train_apg``: analytic policy gradients. The episode is cut into windows of a few policy
  steps; the sum of the window's rewards (divided by its length, so that the learning rate
  does not depend on it) is differentiated through the simulator (torch autograd through
  ``TorchStep``), and the state is detached at every window boundary
  (truncated backpropagation through time). Adam with gradient-norm clipping updates the
  policy once per window. Optionally a learned value of the window's end state closes the
  window's objective (a short-horizon actor-critic in the manner of SHAC).
- ``train_es``: antithetic evolution strategies. World i and world i + W/2 run the policy
  with parameters theta + sigma eps_i and theta - sigma eps_i from the same initial state,
  all in one batch without gradients; centred ranks of the returns weigh the perturbations
  into a search gradient for Adam.

Both log their progress per iteration (environment steps, training wall time) and evaluate
the current policy on held-out initial states every few iterations (success rate, mean
return); ``run_comparison`` trains several on one task, ``compare_methods`` and
``plot_training`` summarise the runs. Imports torch at the top: import this module
explicitly (``import wpsim.opt`` does not).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from wpsim.core.health import SimulationBlowUp
from wpsim.io.progress import progress_line


# ------------------------------------------------------------------ checks
def _require(condition: bool, name: str, requirement: str, value):
    """Raise ValueError naming ``name`` unless ``condition`` holds."""
    if not condition:
        raise ValueError(f"{name} must be {requirement}, got {value!r}")


def _positive_int(name: str, value):
    """Check that ``value`` is an int >= 1."""
    _require(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1, name,
             "an integer >= 1", value)


def _positive(name: str, value):
    """Check that ``value`` is a finite number > 0."""
    _require(isinstance(value, (int, float, np.floating)) and math.isfinite(value) and value > 0, name,
             "a finite number > 0", value)


# ------------------------------------------------------------------ task
class PolicyTask:
    """A control task over the W worlds of a ``TorchStep`` (its ``worlds`` must be set).

    Subclasses set ``observation_size`` and ``action_size`` and define ``initial_states``,
    ``observe``, ``controls``, ``reward`` and ``goal_reached``; ``episode_success`` may be
    overridden (default: the goal held at every simulator step of the last
    ``success_steps`` policy steps).

    A state dict holds the ``TorchStep`` fields and may hold task variables besides them
    (e.g. the previous action, for controls that ramp from it): ``initial_states`` sets
    them, ``remember`` updates them after each policy step; they are detached at window
    boundaries like the simulator state.

    Args:
        step: the ``TorchStep`` of a replicated model.
        action_repeat: simulator steps per policy step (the action is held meanwhile).
        episode_steps: policy steps per episode.
        success_steps: policy steps at the end of an episode during which the goal must hold.
    """

    observation_size: int = 0
    action_size: int = 0

    def __init__(self, step, action_repeat: int, episode_steps: int, success_steps: int = 1):
        _positive_int("action_repeat", action_repeat)
        _positive_int("episode_steps", episode_steps)
        _positive_int("success_steps", success_steps)
        _require(success_steps <= episode_steps, "success_steps", f"<= episode_steps ({episode_steps})",
                 success_steps)
        _require(getattr(step, "worlds", None) is not None, "step", "a TorchStep with worlds set", step)
        self.step = step
        self.worlds = int(step.worlds)
        self.action_repeat = int(action_repeat)
        self.episode_steps = int(episode_steps)
        self.success_steps = int(success_steps)
        template = step.initial_state()
        self.state_fields = tuple(template)
        first = next(iter(template.values()))
        self.dtype, self.device = first.dtype, first.device

    @property
    def policy_dt(self) -> float:
        """Duration (s) of one policy step."""
        return self.action_repeat * float(self.step.dt)

    @property
    def episode_env_steps(self) -> int:
        """Environment (simulator) steps of one episode of every world."""
        return self.worlds * self.episode_steps * self.action_repeat

    def initial_states(self, count: int, generator: torch.Generator) -> dict:
        """``count`` random initial states: field -> tensor with ``count`` rows."""
        raise NotImplementedError

    def observe(self, state: dict, step_index: int) -> torch.Tensor:
        """Observations (rows, observation_size) of the states at policy step ``step_index``."""
        raise NotImplementedError

    def controls(self, action: torch.Tensor, state: dict, time_s: float, substep: int) -> dict:
        """Control tensors (a ``TorchStep`` controls dict) of simulator step ``substep`` (0 ..
        action_repeat - 1) of a policy step, starting at episode time ``time_s`` (s) from
        ``state``, for the actions (W, action_size)."""
        raise NotImplementedError

    def remember(self, action: torch.Tensor, state: dict) -> dict:
        """The task variables (not simulator fields) of ``state`` after a policy step with
        ``action``; by default unchanged."""
        return {name: value for name, value in state.items() if name not in self.state_fields}

    def reward(self, previous: dict, action: torch.Tensor, current: dict) -> torch.Tensor:
        """Reward (W,) of one policy step from ``previous`` under ``action`` to ``current``."""
        raise NotImplementedError

    def goal_reached(self, state: dict) -> torch.Tensor:
        """Whether each world's state satisfies the goal (W,) bool."""
        raise NotImplementedError

    def episode_success(self, goal: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """Success per world (W,) bool from the per-policy-step goal flags (steps, W) and the
        episode returns (W,): the goal held during the last ``success_steps`` policy steps."""
        return goal[-self.success_steps:].all(dim=0)

    def advance(self, state: dict, action: torch.Tensor, step_index: int) -> tuple:
        """Hold ``action`` for the ``action_repeat`` simulator steps of policy step ``step_index``:
        (next state, goal held after every one of them)."""
        memory = self.remember(action, state)
        current, held = state, None
        for k in range(self.action_repeat):
            time_s = (step_index * self.action_repeat + k) * float(self.step.dt)
            simulated = self.step({name: current[name] for name in self.state_fields},
                                  self.controls(action, current, time_s, k))
            current = {**state, **simulated}
            reached = self.goal_reached(current).detach()
            held = reached if held is None else held & reached
        return {**simulated, **memory}, held


def pad_states(states: dict, rows: int) -> dict:
    """States with ``rows`` rows: the first ``rows`` of ``states``, the last row repeated where there are fewer."""
    count = next(iter(states.values())).shape[0]
    index = torch.clamp(torch.arange(rows, device=next(iter(states.values())).device), max=count - 1)
    return {name: value[index].contiguous() for name, value in states.items()}


def detach_states(states: dict) -> dict:
    """The same states cut from the autograd graph."""
    return {name: value.detach() for name, value in states.items()}


@dataclass
class EpisodeRecord:
    """What one episode of W worlds gave: returns (W,) and per-policy-step goal flags (steps, W)."""

    returns: torch.Tensor
    goal: torch.Tensor


@dataclass
class Window:
    """One window of an episode: per-step rewards (each (W,), attached to the autograd graph),
    the observations the actions were computed from (detached), the state at the window end
    (attached) and the number of policy steps done after it."""

    rewards: list
    observations: list
    end_state: dict
    steps_done: int


def run_episode(task: PolicyTask, act, state: dict, window_steps: int | None = None, on_window=None) -> EpisodeRecord:
    """Run one episode from ``state`` with ``act(observation) -> action``.

    With ``on_window``, the episode is cut into windows of ``window_steps`` policy steps:
    ``on_window(window)`` sees each finished ``Window``; the state is then detached
    (truncated backpropagation).
    """
    returns = torch.zeros(task.worlds, dtype=task.dtype, device=task.device)
    rewards, observations, goals = [], [], []
    for t in range(task.episode_steps):
        observation = task.observe(state, t)
        action = act(observation)
        current, reached = task.advance(state, action, t)
        rewards.append(task.reward(state, action, current))
        observations.append(observation.detach())
        goals.append(reached)
        state = current
        if on_window is not None and ((t + 1) % window_steps == 0 or t + 1 == task.episode_steps):
            on_window(Window(rewards, observations, state, t + 1))
            returns = returns + torch.stack(rewards).detach().sum(dim=0)
            rewards, observations = [], []
            state = detach_states(state)
    if rewards:
        returns = returns + torch.stack(rewards).detach().sum(dim=0)
    record = EpisodeRecord(returns, torch.stack(goals))
    if not torch.isfinite(record.returns).all():
        bad = torch.nonzero(~torch.isfinite(record.returns)).flatten().tolist()
        raise SimulationBlowUp(f"non-finite episode return in worlds {bad}; solver health: {task.step.health()}")
    return record


# ------------------------------------------------------------------ policy
class MLPPolicy(torch.nn.Module):
    """Multilayer perceptron observation -> action (tanh hidden layers, linear output).

    The output layer starts at a tenth of torch's default scale, so that first actions are small.
    ``batched`` evaluates one parameter vector per world (evolution strategies).
    """

    def __init__(self, observation_size: int, action_size: int, hidden: tuple = (64, 64),
                 dtype=torch.float32, seed: int = 0):
        super().__init__()
        _positive_int("observation_size", observation_size)
        _positive_int("action_size", action_size)
        _require(len(hidden) > 0 and all(isinstance(h, int) and h >= 1 for h in hidden), "hidden",
                 "a non-empty tuple of integers >= 1", hidden)
        sizes = (observation_size, *hidden, action_size)
        layers = []
        with torch.random.fork_rng(devices=[]):  # the weights depend on seed only
            torch.manual_seed(seed)
            for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
                layers.append(torch.nn.Linear(fan_in, fan_out, dtype=dtype))
                if i < len(sizes) - 2:
                    layers.append(torch.nn.Tanh())
        with torch.no_grad():
            layers[-1].weight.mul_(0.1)
            layers[-1].bias.zero_()
        self.net = torch.nn.Sequential(*layers)
        self._names = [name for name, _ in self.named_parameters()]
        self._shapes = [p.shape for p in self.parameters()]

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Actions (rows, action_size) of observations (rows, observation_size)."""
        return self.net(observation)

    @property
    def parameter_count(self) -> int:
        """Number of scalar parameters."""
        return sum(int(np.prod(s)) for s in self._shapes)

    def flat_parameters(self) -> torch.Tensor:
        """All parameters as one detached vector."""
        return torch.nn.utils.parameters_to_vector(self.parameters()).detach().clone()

    def set_flat_parameters(self, flat: torch.Tensor):
        """Overwrite the parameters from one vector."""
        torch.nn.utils.vector_to_parameters(flat.detach().to(self.net[0].weight.dtype), self.parameters())

    def _unflatten(self, flat: torch.Tensor) -> dict:
        """Parameter dict of one flat vector."""
        out, start = {}, 0
        for name, shape in zip(self._names, self._shapes):
            size = int(np.prod(shape))
            out[name] = flat[start:start + size].view(shape)
            start += size
        return out

    def batched(self, flat: torch.Tensor, observation: torch.Tensor) -> torch.Tensor:
        """Actions (W, action_size): world i's observation through the network with parameters flat[i]."""
        from torch.func import functional_call, vmap

        def one(params, obs):
            return functional_call(self, self._unflatten(params), (obs.unsqueeze(0),))[0]

        return vmap(one)(flat, observation)


# ------------------------------------------------------------------ evaluation
@dataclass
class Evaluation:
    """Held-out evaluation of one policy: success rate, mean return, and both per initial state."""

    success_rate: float
    mean_return: float
    success: list
    returns: list


def held_out_states(task: PolicyTask, count: int, seed: int) -> dict:
    """``count`` initial states drawn with their own seed (never used in training)."""
    _positive_int("count", count)
    return task.initial_states(count, torch.Generator().manual_seed(int(seed)))


def episode_path(task: PolicyTask, policy: MLPPolicy, states: dict) -> list:
    """The simulator states (dicts of the task's state fields) at the start and after every
    policy step of one episode of ``policy`` from ``states`` (at most W worlds; padded),
    without gradients: what a picture or a USD stage of the episode shows."""
    count = next(iter(states.values())).shape[0]
    _require(count <= task.worlds, "states", f"at most {task.worlds} worlds", count)
    state = pad_states(states, task.worlds)
    path = [{name: state[name].clone() for name in task.state_fields}]
    with torch.no_grad():
        for t in range(task.episode_steps):
            state, _ = task.advance(state, policy(task.observe(state, t)), t)
            path.append({name: state[name].clone() for name in task.state_fields})
    return path


def evaluate_policy(task: PolicyTask, policy: MLPPolicy, states: dict) -> Evaluation:
    """Run ``policy`` from every held-out state (in batches of W worlds, without gradients)."""
    count = next(iter(states.values())).shape[0]
    success, returns = [], []
    with torch.no_grad():
        for start in range(0, count, task.worlds):
            rows = min(task.worlds, count - start)
            chunk = pad_states({k: v[start:start + rows] for k, v in states.items()}, task.worlds)
            record = run_episode(task, policy, chunk)
            success.append(task.episode_success(record.goal, record.returns)[:rows])
            returns.append(record.returns[:rows])
    success, returns = torch.cat(success), torch.cat(returns)
    return Evaluation(float(success.double().mean()), float(returns.double().mean()),
                      success.tolist(), returns.double().tolist())


# ------------------------------------------------------------------ training history
@dataclass
class TrainingHistory:
    """Per-iteration progress of one trainer, and its held-out evaluations.

    ``env_steps`` and ``wall_s`` are cumulative after each iteration (simulator steps of all
    worlds; training time in s, evaluations excluded); ``train_return`` is the mean episode
    return of the iteration's worlds; each evaluation is a dict with iteration, env_steps,
    wall_s, success_rate and mean_return.
    """

    method: str
    env_steps: list = field(default_factory=list)
    wall_s: list = field(default_factory=list)
    train_return: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)

    def record_evaluation(self, iteration: int, evaluation: Evaluation):
        """Append an evaluation made after ``iteration`` iterations."""
        self.evaluations.append({
            "iteration": iteration, "env_steps": self.env_steps[-1] if self.env_steps else 0,
            "wall_s": self.wall_s[-1] if self.wall_s else 0.0, "success_rate": evaluation.success_rate,
            "mean_return": evaluation.mean_return,
        })

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return asdict(self)


class _Trainer:
    """What both trainers share: the clock, the log line and the periodic evaluation."""

    def __init__(self, method: str, task: PolicyTask, policy: MLPPolicy, iterations: int, evaluation_states,
                 evaluate_every: int, verbose: bool):
        _positive_int("iterations", iterations)
        _positive_int("evaluate_every", evaluate_every)
        _require(policy.net[0].in_features == task.observation_size and policy.net[-1].out_features
                 == task.action_size, "policy", f"an MLPPolicy of {task.observation_size} observations and "
                 f"{task.action_size} actions", policy)
        self.method, self.task, self.policy, self.iterations = method, task, policy, iterations
        self.evaluation_states, self.evaluate_every, self.verbose = evaluation_states, evaluate_every, verbose
        self.history = TrainingHistory(method)
        self.elapsed = 0.0

    def evaluate(self, iteration: int):
        """Evaluate on the held-out states when due (not counted in the training time)."""
        due = iteration % self.evaluate_every == 0 or iteration == self.iterations
        if self.evaluation_states is None or not due:
            return
        result = evaluate_policy(self.task, self.policy, self.evaluation_states)
        self.history.record_evaluation(iteration, result)
        if self.verbose:
            progress_line(iteration, self.iterations, f"{self.method}: held-out success {result.success_rate:.0%}, "
                          f"mean return {result.mean_return:+.2f}, {self.history.wall_s[-1] if iteration else 0:.0f} s")

    def log_iteration(self, started: float, mean_return: float):
        """Record one finished iteration that began at ``started`` (perf_counter)."""
        self.elapsed += time.perf_counter() - started
        previous = self.history.env_steps[-1] if self.history.env_steps else 0
        self.history.env_steps.append(previous + self.task.episode_env_steps)
        self.history.wall_s.append(self.elapsed)
        self.history.train_return.append(mean_return)


# ------------------------------------------------------------------ analytic policy gradients
@dataclass
class APGConfig:
    """Settings of ``train_apg``: iterations (episodes of all worlds), window length (policy
    steps), Adam learning rate (decayed linearly to ``final_learning_rate`` over the
    iterations; None: constant), gradient-norm clip, seed of the initial states; with
    ``value_hidden`` (hidden sizes), a learned value ends each window's objective: discount
    per policy step, TD(lambda) weight, critic learning rate and Adam steps per window."""

    iterations: int = 100
    window_steps: int = 25
    learning_rate: float = 1e-3
    final_learning_rate: float | None = None
    max_grad_norm: float = 1.0
    seed: int = 0
    value_hidden: tuple | None = None
    discount: float = 0.99
    td_lambda: float = 0.95
    value_learning_rate: float = 1e-3
    value_fit_steps: int = 8

    def check(self):
        """Raise ValueError naming the first bad setting."""
        _positive_int("iterations", self.iterations)
        _positive_int("window_steps", self.window_steps)
        _positive("learning_rate", self.learning_rate)
        if self.final_learning_rate is not None:
            _positive("final_learning_rate", self.final_learning_rate)
        _positive("max_grad_norm", self.max_grad_norm)
        _require(0.0 < self.discount <= 1.0, "discount", "in (0, 1]", self.discount)
        _require(0.0 <= self.td_lambda <= 1.0, "td_lambda", "in [0, 1]", self.td_lambda)
        _positive("value_learning_rate", self.value_learning_rate)
        _positive_int("value_fit_steps", self.value_fit_steps)


def discounted_sum(rewards: torch.Tensor, discount: float) -> torch.Tensor:
    """sum_t discount^t rewards[t] over the first axis of ``rewards`` (steps, W)."""
    weights = discount ** torch.arange(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    return weights @ rewards


def lambda_returns(rewards: torch.Tensor, values: torch.Tensor, discount: float, td_lambda: float) -> torch.Tensor:
    """TD(lambda) targets (steps, W) of the window's rewards (steps, W) and the values
    (steps + 1, W) of its observations and of its end state."""
    targets = torch.empty_like(rewards)
    following = values[-1]
    for t in range(rewards.shape[0] - 1, -1, -1):
        following = rewards[t] + discount * ((1.0 - td_lambda) * values[t + 1] + td_lambda * following)
        targets[t] = following
    return targets


class ValueCritic:
    """The learned value V(observation) (discounted return to come) that closes the windows
    of ``train_apg``: fitted after every window to TD(lambda) targets computed with a slowly
    following target copy (Polyak factor 0.2)."""

    def __init__(self, task: PolicyTask, config: APGConfig):
        self.task, self.config = task, config
        self.net = MLPPolicy(task.observation_size, 1, tuple(config.value_hidden), task.dtype, config.seed + 1)
        self.target = copy.deepcopy(self.net)
        self.optimiser = torch.optim.Adam(self.net.parameters(), lr=config.value_learning_rate)

    def __call__(self, observation: torch.Tensor) -> torch.Tensor:
        """Values (W,) of the observations (differentiable w.r.t. the observations)."""
        return self.net(observation)[:, 0]

    def fit(self, observations: torch.Tensor, rewards: torch.Tensor):
        """A few Adam steps on the squared error to the TD(lambda) targets of one window:
        observations (steps + 1, W, obs) including the end, rewards (steps, W)."""
        with torch.no_grad():
            values = self.target(observations)[..., 0]
            targets = lambda_returns(rewards, values, self.config.discount, self.config.td_lambda)
        for _ in range(self.config.value_fit_steps):
            self.optimiser.zero_grad(set_to_none=True)
            loss = ((self.net(observations[:-1])[..., 0] - targets) ** 2).mean()
            loss.backward()
            self.optimiser.step()
        with torch.no_grad():
            for kept, learned in zip(self.target.parameters(), self.net.parameters()):
                kept.mul_(0.8).add_(0.2 * learned)


def apg_window_objective(window: Window, task: PolicyTask, discount: float = 1.0, critic=None) -> torch.Tensor:
    """Loss of one window: minus the mean over worlds of its discounted reward sum, plus the
    discounted value of the end state when a critic is given (also at the episode's time limit),
    per policy step."""
    rewards = torch.stack(window.rewards)
    total = discounted_sum(rewards, discount)
    if critic is not None:
        end = task.observe(window.end_state, window.steps_done)
        total = total + discount ** len(window.rewards) * critic(end)
    return -total.mean() / len(window.rewards)


def train_apg(task: PolicyTask, policy: MLPPolicy, config: APGConfig, evaluation_states: dict | None = None,
              evaluate_every: int = 5, verbose: bool = True, label: str = "APG") -> TrainingHistory:
    """Train ``policy`` by backpropagating each window's return through the simulator (see the
    module doc); evaluate on ``evaluation_states`` every ``evaluate_every`` iterations."""
    config.check()
    trainer = _Trainer(label, task, policy, config.iterations, evaluation_states, evaluate_every, verbose)
    optimiser = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(int(config.seed))
    critic = None if config.value_hidden is None else ValueCritic(task, config)
    discount = 1.0 if critic is None else config.discount

    def update(window: Window):
        optimiser.zero_grad(set_to_none=True)
        apg_window_objective(window, task, discount, critic).backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
        optimiser.step()
        if critic is not None:
            end = task.observe(detach_states(window.end_state), window.steps_done)
            critic.fit(torch.stack(window.observations + [end]), torch.stack(window.rewards).detach())

    final = config.learning_rate if config.final_learning_rate is None else config.final_learning_rate
    trainer.evaluate(0)
    for iteration in range(1, config.iterations + 1):
        started = time.perf_counter()
        progress = (iteration - 1) / max(config.iterations - 1, 1)
        for group in optimiser.param_groups:
            group["lr"] = config.learning_rate + progress * (final - config.learning_rate)
        state = task.initial_states(task.worlds, generator)
        record = run_episode(task, policy, state, config.window_steps, update)
        trainer.log_iteration(started, float(record.returns.mean()))
        trainer.evaluate(iteration)
    return trainer.history


# ------------------------------------------------------------------ evolution strategies
@dataclass
class ESConfig:
    """Settings of ``train_es``: iterations (episodes of all worlds), perturbation scale
    sigma (parameter units), Adam learning rate, L2 weight decay, seed of the initial states
    and perturbations."""

    iterations: int = 100
    sigma: float = 0.05
    learning_rate: float = 0.02
    weight_decay: float = 0.005
    seed: int = 0

    def check(self):
        """Raise ValueError naming the first bad setting."""
        _positive_int("iterations", self.iterations)
        _positive("sigma", self.sigma)
        _positive("learning_rate", self.learning_rate)
        _require(self.weight_decay >= 0.0, "weight_decay", ">= 0", self.weight_decay)


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks of ``values`` scaled to [-0.5, 0.5] (ties broken by position)."""
    ranks = torch.empty_like(values)
    ranks[torch.argsort(values)] = torch.arange(len(values), dtype=values.dtype, device=values.device)
    return ranks / max(len(values) - 1, 1) - 0.5


def antithetic_gradient(noise: torch.Tensor, plus: torch.Tensor, minus: torch.Tensor, sigma: float) -> torch.Tensor:
    """Search gradient (P,) of antithetic pairs: noise (pairs, P), fitness of theta + sigma eps (plus)
    and theta - sigma eps (minus), both (pairs,), each pair weighted by its centred-rank difference."""
    shaped = centred_ranks(torch.cat([plus, minus]))
    pairs = noise.shape[0]
    return (shaped[:pairs] - shaped[pairs:]) @ noise / (2.0 * pairs * sigma)


class _AdamAscent:
    """Adam on a flat vector, ascending a given gradient."""

    def __init__(self, learning_rate: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        self.learning_rate, self.beta1, self.beta2, self.eps = learning_rate, beta1, beta2, eps
        self.m = self.v = None
        self.t = 0

    def step(self, theta: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
        """theta moved up ``gradient``."""
        if self.m is None:
            self.m, self.v = torch.zeros_like(theta), torch.zeros_like(theta)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient * gradient
        m_hat = self.m / (1 - self.beta1 ** self.t)
        v_hat = self.v / (1 - self.beta2 ** self.t)
        return theta + self.learning_rate * m_hat / (torch.sqrt(v_hat) + self.eps)


def es_search(fitness, theta: torch.Tensor, config: ESConfig, pairs: int, callback=None) -> torch.Tensor:
    """Antithetic ES on ``fitness(params (2 pairs, P)) -> (2 pairs,)`` from ``theta``: ``config.iterations``
    Adam steps up the rank-shaped search gradient (minus weight decay); returns the final theta.
    ``callback(iteration, theta, fitness values)`` sees every iteration."""
    config.check()
    _positive_int("pairs", pairs)
    generator = torch.Generator().manual_seed(int(config.seed))
    adam = _AdamAscent(config.learning_rate)
    for iteration in range(1, config.iterations + 1):
        noise = torch.randn(pairs, theta.numel(), generator=generator, dtype=theta.dtype).to(theta.device)
        params = torch.cat([theta + config.sigma * noise, theta - config.sigma * noise])
        values = fitness(params)
        gradient = antithetic_gradient(noise, values[:pairs], values[pairs:], config.sigma)
        theta = adam.step(theta, gradient - config.weight_decay * theta)
        if callback is not None:
            callback(iteration, theta, values)
    return theta


def train_es(task: PolicyTask, policy: MLPPolicy, config: ESConfig, evaluation_states: dict | None = None,
             evaluate_every: int = 5, verbose: bool = True, label: str = "ES") -> TrainingHistory:
    """Train ``policy`` by antithetic evolution strategies, one perturbation per world (see the
    module doc); evaluate on ``evaluation_states`` every ``evaluate_every`` iterations."""
    config.check()
    _require(task.worlds % 2 == 0 and task.worlds >= 2, "task.worlds", "even (antithetic pairs)", task.worlds)
    trainer = _Trainer(label, task, policy, config.iterations, evaluation_states, evaluate_every, verbose)
    pairs = task.worlds // 2
    generator = torch.Generator().manual_seed(int(config.seed) + 7919)  # initial states: not the noise stream
    trainer.evaluate(0)
    clock = {"started": time.perf_counter()}

    def fitness(params):
        half = task.initial_states(pairs, generator)
        state = {name: torch.cat([value, value]).contiguous() for name, value in half.items()}
        with torch.no_grad():
            record = run_episode(task, lambda observation: policy.batched(params, observation), state)
        return record.returns.to(params.dtype)

    def after_iteration(iteration, theta, values):
        policy.set_flat_parameters(theta)
        trainer.log_iteration(clock["started"], float(values.mean()))
        trainer.evaluate(iteration)
        clock["started"] = time.perf_counter()

    theta = policy.flat_parameters()
    es_search(fitness, theta, config, pairs, after_iteration)
    return trainer.history


# ------------------------------------------------------------------ summaries
def compare_methods(histories: list, success_threshold: float) -> dict:
    """Per method: environment steps and training wall time (s) at the first held-out evaluation
    reaching ``success_threshold`` (None if never); the best success rate and mean return
    within the budget every method reached, counted in environment steps (the smallest final
    step count) and in training wall time (the shortest total time); the final scores."""
    _require(0.0 < success_threshold <= 1.0, "success_threshold", "in (0, 1]", success_threshold)
    _require(len(histories) > 0 and all(h.evaluations and h.env_steps for h in histories), "histories",
             "a non-empty list of trained runs with held-out evaluations", histories)
    budget = min(h.env_steps[-1] for h in histories)
    wall_budget = min(h.wall_s[-1] for h in histories)
    summary = {"success_threshold": success_threshold, "equal_budget_env_steps": budget,
               "equal_budget_wall_s": wall_budget, "methods": {}}
    for h in histories:
        reached = next((e for e in h.evaluations if e["success_rate"] >= success_threshold), None)
        within = [e for e in h.evaluations if e["env_steps"] <= budget]
        within_time = [e for e in h.evaluations if e["wall_s"] <= wall_budget]
        summary["methods"][h.method] = {
            "env_steps_to_threshold": None if reached is None else reached["env_steps"],
            "wall_s_to_threshold": None if reached is None else reached["wall_s"],
            "best_success_rate_at_budget": max(e["success_rate"] for e in within),
            "best_mean_return_at_budget": max(e["mean_return"] for e in within),
            "best_success_rate_at_equal_wall_s": max(e["success_rate"] for e in within_time),
            "best_mean_return_at_equal_wall_s": max(e["mean_return"] for e in within_time),
            "final_success_rate": h.evaluations[-1]["success_rate"],
            "final_mean_return": h.evaluations[-1]["mean_return"],
            "total_env_steps": h.env_steps[-1],
            "total_wall_s": h.wall_s[-1],
        }
    return summary


def run_comparison(task: PolicyTask, trainers: list, evaluation_states: dict, hidden: tuple = (64, 64),
                   evaluate_every: int = 10, success_threshold: float = 0.5, policy_seed: int = 0) -> dict:
    """Train one fresh ``MLPPolicy`` (same architecture and initial weights) per entry
    (label, train_apg or train_es, its config) of ``trainers`` and compare them: a dict with
    "histories" (TrainingHistory), "final" (label -> Evaluation of the final policy),
    "comparison" (``compare_methods``) and "policies" (label -> trained policy)."""
    histories, final, trained = [], {}, {}
    for label, train, config in trainers:
        print(f"--- {label}: {config.iterations} iterations x {task.episode_env_steps:,} environment steps")
        policy = MLPPolicy(task.observation_size, task.action_size, hidden, dtype=task.dtype, seed=policy_seed)
        histories.append(train(task, policy, config, evaluation_states, evaluate_every, label=label))
        final[label], trained[label] = evaluate_policy(task, policy, evaluation_states), policy
    return {"histories": histories, "final": final, "comparison": compare_methods(histories, success_threshold),
            "policies": trained}


def plot_training(histories: list, path, title: str = "policy training", success_threshold: float | None = None):
    """Write a PNG of held-out success rate and mean return against environment steps and
    wall time, plus the training return, for each method; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wpsim.io.plots import save_figure

    fig, axes = plt.subplots(1, 4, figsize=(19, 4), layout="constrained")
    for h in histories:
        steps = [e["env_steps"] for e in h.evaluations]
        axes[0].plot(steps, [100 * e["success_rate"] for e in h.evaluations], marker=".", label=h.method)
        axes[1].plot([e["wall_s"] for e in h.evaluations], [100 * e["success_rate"] for e in h.evaluations],
                     marker=".", label=h.method)
        axes[2].plot(steps, [e["mean_return"] for e in h.evaluations], marker=".", label=h.method)
        axes[3].plot(h.env_steps, h.train_return, label=h.method)
    returns = np.concatenate([np.asarray(h.train_return, dtype=float) for h in histories])
    if returns.size > 10:  # the first episodes of a perturbed population can be far off: keep the scale readable
        axes[3].set_ylim(bottom=float(np.percentile(returns, 2)))
    if success_threshold is not None:
        for ax in axes[:2]:
            ax.axhline(100 * success_threshold, color="grey", linestyle="--", linewidth=1, label="threshold")
    axes[0].set(xlabel="environment steps", ylabel="held-out success (%)", title="Success vs steps")
    axes[1].set(xlabel="training wall time (s)", ylabel="held-out success (%)", title="Success vs time")
    axes[2].set(xlabel="environment steps", ylabel="held-out mean return", title="Held-out return")
    axes[3].set(xlabel="environment steps", ylabel="mean training return", title="Training episodes")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    save_figure(fig, path)
    plt.close(fig)
    return path
