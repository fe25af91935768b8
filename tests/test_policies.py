"""Policy training through the simulator (wpsim.opt.policies): the APG window gradient against
finite differences in float64 (value-free and with a value at the window end, first and
truncated later windows), ES on a quadratic, batched policies, held-out success counting on
hand-made cases, and bad arguments named."""

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import warp as wp  # noqa: E402

import wpsim  # noqa: E402
from wpsim.io.mjcf import import_mjcf  # noqa: E402
from wpsim.opt import policies  # noqa: E402
from wpsim.opt.policies import (  # noqa: E402
    APGConfig,
    ESConfig,
    MLPPolicy,
    PolicyTask,
    TrainingHistory,
    apg_window_objective,
    compare_methods,
    es_search,
    evaluate_policy,
    lambda_returns,
    run_episode,
    train_apg,
    train_es,
)
from wpsim.opt.torch import TorchStep  # noqa: E402

CARTPOLE = Path(__file__).resolve().parents[1] / "assets" / "cartpole.xml"


class PoleUp(PolicyTask):
    """Cart-pole: reward cos(angle) (0 upright), goal within 0.1 rad of upright; force 5 N tanh(a)."""

    observation_size, action_size = 4, 1

    def __init__(self, step, episode_steps=6, success_steps=2):
        super().__init__(step, action_repeat=2, episode_steps=episode_steps, success_steps=success_steps)

    def initial_states(self, count, generator):
        angle = (torch.rand(count, generator=generator, dtype=torch.float64) - 0.5) * 2.0
        q = torch.stack([torch.zeros_like(angle), angle], dim=1)
        return {"joint_q": q.to(self.dtype).contiguous(), "joint_qd": torch.zeros_like(q, dtype=self.dtype)}

    def observe(self, state, step_index):
        angle = state["joint_q"][:, 1]
        return torch.stack([torch.cos(angle), torch.sin(angle), state["joint_qd"][:, 0], state["joint_qd"][:, 1]], 1)

    def controls(self, action, state, time_s, substep):
        force = 5.0 * torch.tanh(action[:, :1])
        return {"joint_f": torch.cat([force, torch.zeros_like(force)], dim=1).contiguous()}

    def reward(self, previous, action, current):
        return torch.cos(current["joint_q"][:, 1]) - 0.01 * current["joint_q"][:, 0] ** 2

    def goal_reached(self, state):
        return wrap_angle(state["joint_q"][:, 1]).abs() < 0.1


def wrap_angle(angle):
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


def make_task(worlds, dtype=wp.float64, **kwargs):
    builder, _ = import_mjcf(CARTPOLE)
    model = builder.replicated(worlds).finalize(device="cpu", requires_grad=True, dtype=dtype)
    return PoleUp(TorchStep(wpsim.SemiImplicitSolver(model), 0.01, worlds=worlds), **kwargs)


def lively_policy(task, seed=3):
    """A small policy with outputs large enough to move the cart."""
    policy = MLPPolicy(task.observation_size, task.action_size, (8,), dtype=task.dtype, seed=seed)
    with torch.no_grad():
        policy.net[-1].weight.mul_(20.0)
        policy.net[-1].bias.fill_(0.3)
    return policy


# ------------------------------------------------------------------ APG gradient
@pytest.mark.parametrize("with_value", [False, True], ids=["value_free", "value_at_window_end"])
def test_apg_window_gradients_match_finite_differences(with_value):
    """Each window's gradient (what train_apg steps along) equals a central difference of
    that window's objective, rolled out from the window's start state held fixed (truncation)."""
    task = make_task(2)
    policy = lively_policy(task)
    config = APGConfig(window_steps=3, value_hidden=(6,) if with_value else None)
    critic = policies.ValueCritic(task, config) if with_value else None
    discount = config.discount if with_value else 1.0
    start = task.initial_states(2, torch.Generator().manual_seed(4))
    starts, grads = [start], []

    def record(window):
        policy.zero_grad()
        apg_window_objective(window, task, discount, critic).backward()
        grads.append(torch.nn.utils.parameters_to_vector([p.grad for p in policy.parameters()]).clone())
        starts.append(policies.detach_states(window.end_state))

    run_episode(task, policy, start, config.window_steps, record)
    assert len(grads) == 2
    theta = policy.flat_parameters()

    def window_objective(flat, window_index):
        probe = MLPPolicy(task.observation_size, task.action_size, (8,), dtype=task.dtype)
        probe.set_flat_parameters(flat)
        state, rewards = starts[window_index], []
        first = window_index * config.window_steps
        with torch.no_grad():
            for t in range(first, first + config.window_steps):
                action = probe(task.observe(state, t))
                current, _ = task.advance(state, action, t)
                rewards.append(task.reward(state, action, current))
                state = current
            window = policies.Window(rewards, [], state, first + config.window_steps)
            return float(apg_window_objective(window, task, discount, critic))

    rng = np.random.default_rng(0)
    for window_index, grad in enumerate(grads):
        assert grad.norm() > 1e-3  # a gradient that is not trivially zero
        for i in rng.choice(theta.numel(), 6, replace=False):
            eps = 1e-6
            plus, minus = theta.clone(), theta.clone()
            plus[i] += eps
            minus[i] -= eps
            fd = (window_objective(plus, window_index) - window_objective(minus, window_index)) / (2 * eps)
            assert abs(float(grad[i]) - fd) <= 1e-5 * max(1.0, abs(fd)), (window_index, int(i), float(grad[i]), fd)


def test_lambda_returns_limits():
    """lambda = 1: discounted rewards plus the discounted end value; lambda = 0: one-step targets."""
    rewards = torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], dtype=torch.float64)
    values = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], dtype=torch.float64)
    g = 0.9
    monte_carlo = lambda_returns(rewards, values, g, 1.0)
    expected0 = rewards[0] + g * rewards[1] + g * g * rewards[2] + g ** 3 * values[3]
    assert torch.allclose(monte_carlo[0], expected0)
    one_step = lambda_returns(rewards, values, g, 0.0)
    assert torch.allclose(one_step, rewards + g * values[1:])


# ------------------------------------------------------------------ ES
def test_antithetic_es_moves_toward_the_optimum_of_a_quadratic():
    """Rank-shaped antithetic ES on -|x - x*|^2 shrinks the distance to x* by 10x."""
    optimum = torch.linspace(-1.0, 1.0, 10, dtype=torch.float64)
    start = torch.zeros(10, dtype=torch.float64)

    def fitness(params):
        return -((params - optimum) ** 2).sum(dim=1)

    distances = []
    es_search(fitness, start, ESConfig(iterations=150, sigma=0.1, learning_rate=0.05, weight_decay=0.0), pairs=16,
              callback=lambda it, theta, values: distances.append(float((theta - optimum).norm())))
    assert distances[-1] < 0.1 * float((start - optimum).norm())


def test_antithetic_gradient_points_along_a_linear_fitness():
    """For f(x) = c . x, the search gradient is aligned with c."""
    generator = torch.Generator().manual_seed(0)
    c = torch.randn(20, generator=generator, dtype=torch.float64)
    noise = torch.randn(64, 20, generator=generator, dtype=torch.float64)
    grad = policies.antithetic_gradient(noise, noise @ c, -(noise @ c), 0.1)
    assert float(torch.nn.functional.cosine_similarity(grad, c, dim=0)) > 0.8


def test_batched_policy_equals_each_world_loaded_alone():
    policy = MLPPolicy(3, 2, (5, 4), dtype=torch.float64, seed=1)
    generator = torch.Generator().manual_seed(2)
    flat = policy.flat_parameters() + 0.3 * torch.randn(4, policy.parameter_count, generator=generator,
                                                        dtype=torch.float64)
    obs = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    batched = policy.batched(flat, obs)
    for w in range(4):
        policy.set_flat_parameters(flat[w])
        assert torch.allclose(batched[w], policy(obs[w:w + 1])[0])
    assert not torch.allclose(batched[0], batched[1])


# ------------------------------------------------------------------ evaluation
def test_episode_success_needs_the_goal_through_the_whole_final_span():
    task = make_task(2, episode_steps=4, success_steps=2)
    goal = torch.tensor([[True, False, True, False], [False, True, True, True],
                         [True, True, True, True], [True, True, False, True]]).T  # (steps, worlds)
    success = task.episode_success(goal, torch.zeros(4))
    assert success.tolist() == [False, True, True, False]


def test_held_out_evaluation_counts_success_on_a_hand_made_case():
    """With zero force: a pole balanced exactly upright stays (success), a hanging one stays
    down, a pole 0.05 rad off falls over (it starts inside the goal, then leaves it). Three
    states on two worlds: the second batch is padded."""
    task = make_task(2, episode_steps=50, success_steps=10)
    policy = MLPPolicy(task.observation_size, task.action_size, (4,), dtype=task.dtype)
    with torch.no_grad():
        policy.net[-1].weight.zero_()
    q = torch.tensor([[0.0, 0.0], [0.0, math.pi], [0.0, 0.05]], dtype=torch.float64)
    states = {"joint_q": q, "joint_qd": torch.zeros_like(q)}
    result = evaluate_policy(task, policy, states)
    assert result.success == [True, False, False]
    assert result.success_rate == pytest.approx(1.0 / 3.0)
    assert result.returns[0] == pytest.approx(50.0)  # cos(0) at every policy step
    assert result.returns[1] == pytest.approx(-50.0)


def test_compare_methods_reports_steps_to_threshold_and_equal_budget():
    a, b = TrainingHistory("A"), TrainingHistory("B")
    for h, rates in ((a, [0.0, 0.6, 0.9]), (b, [0.0, 0.2, 0.4, 0.7])):
        for k, rate in enumerate(rates):
            if k:
                h.env_steps.append(100 * k)
                h.wall_s.append(2.0 * k)
                h.train_return.append(rate)
            h.evaluations.append({"iteration": k, "env_steps": 100 * k, "wall_s": 2.0 * k, "success_rate": rate,
                                  "mean_return": rate})
    summary = compare_methods([a, b], 0.5)
    assert summary["equal_budget_env_steps"] == 200
    assert summary["methods"]["A"]["env_steps_to_threshold"] == 100
    assert summary["methods"]["A"]["wall_s_to_threshold"] == 2.0
    assert summary["methods"]["B"]["env_steps_to_threshold"] == 300
    assert summary["methods"]["B"]["best_success_rate_at_budget"] == 0.4  # 0.7 comes after the budget
    assert summary["methods"]["A"]["best_success_rate_at_budget"] == 0.9
    assert summary["equal_budget_wall_s"] == 4.0
    assert summary["methods"]["B"]["best_success_rate_at_equal_wall_s"] == 0.4


# ------------------------------------------------------------------ trainers
def test_apg_and_es_runs_log_equal_environment_steps_and_apg_improves():
    """15 APG iterations raise the held-out return (at most 20) of a balance task by more than 1
    and its success rate above 0; ES logs the same environment steps per iteration."""
    task = make_task(8, dtype=wp.float32, episode_steps=20, success_steps=5)
    held_out = policies.held_out_states(task, 8, seed=99)
    apg = train_apg(task, MLPPolicy(4, 1, (16,), dtype=task.dtype),
                    APGConfig(iterations=15, window_steps=10, learning_rate=3e-2), held_out, evaluate_every=15,
                    verbose=False)
    es = train_es(task, MLPPolicy(4, 1, (16,), dtype=task.dtype), ESConfig(iterations=3), held_out,
                  evaluate_every=3, verbose=False)
    assert apg.env_steps[:3] == es.env_steps == [8 * 20 * 2 * k for k in range(1, 4)]
    first, last = apg.evaluations[0], apg.evaluations[-1]
    assert first["success_rate"] == 0.0 and last["success_rate"] > 0.0
    assert last["mean_return"] > first["mean_return"] + 1.0


# ------------------------------------------------------------------ bad arguments
@pytest.mark.parametrize("make, name", [
    (lambda: APGConfig(window_steps=0).check(), "window_steps"),
    (lambda: APGConfig(learning_rate=-1.0).check(), "learning_rate"),
    (lambda: APGConfig(td_lambda=1.5).check(), "td_lambda"),
    (lambda: ESConfig(sigma=0.0).check(), "sigma"),
    (lambda: ESConfig(iterations=2.5).check(), "iterations"),
    (lambda: MLPPolicy(3, 1, ()), "hidden"),
    (lambda: MLPPolicy(0, 1), "observation_size"),
    (lambda: make_task(2, episode_steps=0), "episode_steps"),
    (lambda: make_task(2, episode_steps=3, success_steps=4), "success_steps"),
    (lambda: compare_methods([], 0.0), "success_threshold"),
    (lambda: compare_methods([TrainingHistory("A")], 0.5), "histories"),
])
def test_bad_arguments_raise_value_error_naming_them(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_trainers_refuse_mismatched_policies_and_odd_worlds():
    task = make_task(3)
    with pytest.raises(ValueError, match="task.worlds"):
        train_es(task, MLPPolicy(4, 1), ESConfig(iterations=1), verbose=False)
    with pytest.raises(ValueError, match="policy"):
        train_apg(task, MLPPolicy(5, 1), APGConfig(iterations=1), verbose=False)
    with pytest.raises(ValueError, match="step"):
        PoleUp(TorchStep(task.step.solver, 0.01, worlds=None))
