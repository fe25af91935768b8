"""Scale-out on Ray (wpsim.distributed): the pool's loss and gradient against the in-process
sum over the same shards, wpsim.opt's optimisers on a pool, a worker killed during an
optimisation, clear errors for a bad scene and a blow-up, the multi-node command line, and
``import wpsim.distributed`` without ray.

One local Ray with 2 CPUs for the module; one pool of 2 workers (1 CPU each) for most tests;
the pools a test adds reserve no CPU (cpus_per_worker=0) so that they can start beside it.
The shards are 4 windows of 25 steps of the arm's measured run (assets/).
"""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from wpsim.distributed import (
    DistributedProblem,
    LocalPool,
    NonFiniteShard,
    Scene,
    ShardError,
    WorkerPool,
    identify_windows,
    placement,
    population_fitness,
    window_problem,
    window_scenes,
)
from wpsim.distributed.cli import build_parser, main, ray_start_command
from wpsim.opt import minimize, multistart

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ROBOT, DATA = ASSETS / "arm_2link.xml", ASSETS / "arm_2link_sysid.csv"
WINDOWS, DURATION = 4, 0.1  # 4 windows of 25 steps of 1 ms
STEPS = 30  # of the float32 cart-poles, 10 ms each


def cartpoles(tilts, device=None):
    """A float32 Problem: cart-poles (one world per tilt, rad) for STEPS steps; loss: the sum of
    squared joint coordinates over the steps; parameters: joint damping and body masses."""
    import warp as wp

    from wpsim.diff import Rollout
    from wpsim.diff.losses import joint_tracking_loss
    from wpsim.io.mjcf import import_mjcf
    from wpsim.opt import Parameter, Problem
    from wpsim.solvers import SemiImplicitSolver

    model = import_mjcf(ASSETS / "cartpole.xml")[0].replicated(len(tilts)).finalize(device=device, requires_grad=True)
    state0 = model.state(requires_grad=True)
    q = state0.joint_q.numpy()
    q[1::2] = tilts  # coordinates per world: cart (m), pole (rad)
    state0.joint_q.assign(q)
    target = wp.zeros(model.joint_coord_count, dtype=model.dtype, device=model.device)
    weights = wp.ones(model.joint_coord_count, dtype=model.dtype, device=model.device)

    def loss_fn(k, state, loss):
        joint_tracking_loss(state, target, weights, loss=loss)

    rollout = Rollout(SemiImplicitSolver(model), STEPS, 0.01, loss_fn, mode="full")
    return Problem(rollout, state0, [Parameter("model.joint_damping", name="damping"),
                                     Parameter("model.body_mass", log=True, name="mass")], adjoint_growth_limit=None)


@pytest.fixture(scope="module")
def scenes():
    return window_scenes(ROBOT, DATA, windows=WINDOWS, duration=DURATION)


@pytest.fixture(scope="module")
def local(scenes):
    return LocalPool(scenes, "cpu")


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never a running cluster
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(ray_cluster, scenes):
    with WorkerPool(scenes, workers=2, max_restarts=2, max_task_retries=2) as pool:
        yield pool


@pytest.fixture(scope="module")
def policy_shards(ray_cluster):
    """Two cart-task shards (4 and 2 worlds) on 2 Ray workers, and the same in process."""
    torch = pytest.importorskip("torch")
    from wpsim.distributed.policies import PolicyShards
    from wpsim.opt.policies import MLPPolicy

    ray_cluster.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    scenes = [Scene(cart_task, (4,)), Scene(cart_task, (2,))]  # 2 + 1 antithetic pairs
    template = MLPPolicy(2, 1, (8,), dtype=torch.float64)
    with PolicyShards(scenes, template, 0) as local, PolicyShards(scenes, template, 2, cpus_per_worker=0) as remote:
        yield local, remote


def cart_task(worlds, device=None):
    """A PolicyTask over ``worlds`` cart-poles (float64): push the cart (5 N tanh(a)) back to
    x = 0 from a random start within +-0.5 m; reward -x^2 per policy step of 2 x 10 ms."""
    import torch

    from wpsim.io.mjcf import import_mjcf
    from wpsim.opt.policies import PolicyTask
    from wpsim.opt.torch import TorchStep
    from wpsim.solvers import SemiImplicitSolver

    class CartHome(PolicyTask):
        observation_size, action_size = 2, 1

        def initial_states(self, count, generator):
            x = torch.rand(count, generator=generator, dtype=torch.float64) - 0.5
            q = torch.stack([x, torch.zeros_like(x)], dim=1)
            return {"joint_q": q.to(self.device, self.dtype).contiguous(), "joint_qd": torch.zeros_like(q)}

        def observe(self, state, step_index):
            return torch.stack([state["joint_q"][:, 0], state["joint_qd"][:, 0]], dim=1)

        def controls(self, action, state, time_s, substep):
            force = 5.0 * torch.tanh(action[:, :1])
            return {"joint_f": torch.cat([force, torch.zeros_like(force)], dim=1).contiguous()}

        def reward(self, previous, action, current):
            return -current["joint_q"][:, 0] ** 2

        def goal_reached(self, state):
            return state["joint_q"][:, 0].abs() < 0.05

    model = import_mjcf(ASSETS / "cartpole.xml")[0].replicated(worlds).finalize(device=device, requires_grad=True,
                                                                                 dtype=wp.float64)
    return CartHome(TorchStep(SemiImplicitSolver(model), 0.01, worlds=worlds), action_repeat=2, episode_steps=5)


def off_start(pool):
    """Parameter values away from the declared ones (a non-trivial gradient)."""
    return pool.space["x0"] * np.array([1.2, 0.8, 1.5, 0.5, 1.0, 1.0]) + np.array([0, 0, 0, 0, 0.002, 0.001])


def test_import_wpsim_distributed_does_not_load_ray():
    code = ("import sys, wpsim, wpsim.distributed\n"
            "print('ray' in sys.modules, callable(wpsim.distributed.WorkerPool))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


LISTENING = """
import json, os, psutil
from wpsim.distributed.transport import RayTransport
transport = RayTransport([], workers=1, cpus_per_worker=0, init_options={"num_cpus": 1, "log_to_driver": False})
transport.worker_info()  # the worker is up
ours = {os.getpid()} | {child.pid for child in psutil.Process().children(recursive=True)}
print(json.dumps(sorted({c.laddr.ip for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.pid in ours})))
transport.close()
"""


def test_a_ray_the_pool_starts_listens_on_the_loopback_address_only():
    """A pool's local Ray listened on every interface (token-authenticated)."""
    pytest.importorskip("ray")
    pytest.importorskip("psutil")
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", LISTENING], capture_output=True, text=True, timeout=300, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    addresses = json.loads(out.stdout.strip().splitlines()[-1])
    assert addresses and set(addresses) <= {"127.0.0.1", "::ffff:127.0.0.1"}, addresses


def test_placement_keeps_shards_on_workers_and_spreads_populations():
    assert placement(3, 4, 2).tolist() == [[0, 1, 0, 1]] * 3  # shard s on worker s mod 2, every row
    assert placement(4, 1, 2).ravel().tolist() == [0, 1, 0, 1]  # one shard: the rows spread
    assert placement(2, 1, 1).ravel().tolist() == [0, 0]


def test_local_pool_is_the_weighted_sum_of_the_windows(local, scenes):
    x = off_start(local)
    expected_loss, expected_grad = 0.0, np.zeros_like(x)
    for w in range(WINDOWS):  # each window's problem built directly, summed in order
        problem = window_problem(ROBOT, DATA, ("masses", "damping", "armature"), 25 * w, 25, device="cpu")
        loss, grad = problem.loss_and_grad(x)
        expected_loss, expected_grad = expected_loss + 0.25 * loss, expected_grad + 0.25 * grad
    loss, grad = local.value_and_grad(x)
    assert loss == pytest.approx(expected_loss, rel=1e-12) and expected_loss > 0
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=0)
    assert len(set(local.shard_losses[0].tolist())) == WINDOWS  # four different trajectories


def test_pool_gradient_equals_the_single_process_one_for_1_and_2_workers(pool, local, scenes):
    x = off_start(pool)
    reference = local.value_and_grad(x)
    assert np.abs(reference[1]).min() > 0
    with WorkerPool(scenes, workers=1, cpus_per_worker=0) as single:
        one = single.value_and_grad(x)
    two = pool.value_and_grad(x)
    for loss, grad in (one, two):  # float64 on CPU workers: bitwise, whatever the worker count
        assert loss == reference[0]
        assert np.array_equal(grad, reference[1])
    batch = np.stack([x, pool.space["x0"], 1.1 * x])
    np.testing.assert_array_equal(pool.evaluate(batch), local.evaluate(batch))


def test_float32_shards_are_worker_independent_and_sum_like_one_model(ray_cluster):
    ray_cluster.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    tilts = 0.05 + 0.3 * np.arange(4)[:, None] + 0.01 * np.arange(3)[None, :]  # 4 shards of 3 worlds
    scenes = [Scene(cartpoles, (row.tolist(),)) for row in tilts]
    local = LocalPool(scenes, "cpu")
    x = local.space["x0"] * 1.05 + 0.01
    loss, grad = local.value_and_grad(x)
    with WorkerPool(scenes, workers=2, cpus_per_worker=0) as pool:
        assert pool.value_and_grad(x)[0] == loss  # float32 shards: still bitwise, whatever the workers
        assert np.array_equal(pool.value_and_grad(x)[1], grad)
    one = cartpoles(tilts.ravel().tolist(), "cpu")  # all 12 worlds in one model: one float32 loss sum
    per_shard = sum(label.startswith("damping") for label in local.space["labels"])  # dofs of 3 worlds
    one_loss, one_grad = one.loss_and_grad(np.concatenate([np.tile(x[:per_shard], 4), np.tile(x[per_shard:], 4)]))
    summed = np.concatenate([part.reshape(4, -1).sum(0) for part in np.split(one_grad, [4 * per_shard])])
    terms = 12 * STEPS * 2  # positive terms of the float32 sum: its rounding is below terms * 2^-24 of the loss
    assert loss > 0 and abs(one_loss - loss) <= terms * 2.0**-24 * loss
    np.testing.assert_allclose(summed, grad, rtol=terms * 2.0**-24, atol=1e-6 * np.abs(grad).max())


def test_es_over_policy_shards_is_worker_independent_and_antithetic(policy_shards):
    import torch

    from wpsim.distributed.policies import train_es_sharded
    from wpsim.opt.policies import ESConfig, MLPPolicy

    local, remote = policy_shards
    assert local.pairs == 3 and local.episode_env_steps == 6 * 5 * 2
    theta = MLPPolicy(2, 1, (8,), dtype=torch.float64, seed=1).flat_parameters()
    rows = torch.stack([theta + 0.3 * k * torch.ones_like(theta) for k in range(3)] * 2)
    returns = local.es_fitness(seed=5)(rows)  # both members of every pair get the same row: equal returns in a pair
    assert torch.equal(returns[:3], returns[3:]) and len(set(returns[:3].tolist())) == 3
    config = ESConfig(iterations=2, sigma=0.1, learning_rate=0.05)
    trained = []
    for shards in (local, remote):
        policy = MLPPolicy(2, 1, (8,), dtype=torch.float64, seed=1)
        history = train_es_sharded(shards, policy, config, verbose=False)
        trained.append((policy.flat_parameters(), history.train_return))
    assert torch.equal(trained[0][0], trained[1][0]) and trained[0][1] == trained[1][1]
    assert not torch.equal(trained[0][0], theta)


def test_apg_over_policy_shards_matches_one_task_and_replays_lost_state(policy_shards):
    import torch

    from wpsim.distributed.policies import PolicyShards, stream_seed, train_apg_sharded
    from wpsim.opt.policies import APGConfig, MLPPolicy, apg_window_objective, run_episode

    local, remote = policy_shards
    policy = MLPPolicy(2, 1, (8,), dtype=torch.float64, seed=2)
    theta, other = policy.flat_parameters().numpy(), policy.flat_parameters().numpy() * 0.9
    one = cart_task(6)  # the same 6 worlds in one task, the shards' initial states side by side
    starts = [one.initial_states(n, torch.Generator().manual_seed(stream_seed(7, 1, s))) for s, n in enumerate((4, 2))]
    expected = []

    def window_gradient(window):
        policy.zero_grad(set_to_none=True)
        apg_window_objective(window, one).backward()
        expected.append(torch.nn.utils.parameters_to_vector([p.grad for p in policy.parameters()]).numpy().copy())

    run_episode(one, policy, {k: torch.cat([s[k] for s in starts]) for k in starts[0]}, 2, window_gradient)
    for k in range(3):  # windows of 2, 2 and 1 policy steps, all with theta
        np.testing.assert_allclose(local.apg_gradient(np.stack([theta] * (k + 1)), 2, 7, 1)[0], expected[k],
                                   rtol=1e-12, atol=1e-15)
    local.apg_gradient(np.stack([theta]), 2, 7, 2)  # window 0 of episode 2, then window 1 from the kept state
    kept = local.apg_gradient(np.stack([theta, other]), 2, 7, 2)
    with PolicyShards(local.scenes, policy, 0) as fresh:  # a replacement: window 0 replayed without gradients
        replayed = fresh.apg_gradient(np.stack([theta, other]), 2, 7, 2)
    np.testing.assert_array_equal(replayed[0], kept[0])
    config = APGConfig(iterations=2, window_steps=2, learning_rate=0.01)
    trained = []
    for shards in (local, remote):
        policy = MLPPolicy(2, 1, (8,), dtype=torch.float64, seed=2)
        history = train_apg_sharded(shards, policy, config, verbose=False)
        trained.append((policy.flat_parameters(), history.train_return))
    assert torch.equal(trained[0][0], trained[1][0]) and trained[0][1] == trained[1][1]
    assert not np.array_equal(trained[0][0].numpy(), theta)


def test_sysid_over_windows_runs_distributed_by_a_flag(ray_cluster):
    options = {"windows": WINDOWS, "duration": DURATION, "iterations": 4, "progress": False}
    in_process = identify_windows(ROBOT, DATA, ["damping"], workers=0, **options)
    distributed = identify_windows(ROBOT, DATA, ["damping"], workers=2, cpus_per_worker=0, **options)
    assert in_process.loss < 0.5 * in_process.loss0
    np.testing.assert_array_equal(distributed.x, in_process.x)
    assert distributed.loss == in_process.loss and distributed.rollouts == in_process.rollouts


def test_multistart_worlds_on_the_pool_match_separate_fits(pool, local):
    starts = np.stack([pool.space["x0"], off_start(pool)])
    problem = DistributedProblem(pool, worlds=2)
    grad = problem.loss_and_grad(starts.ravel())[1]
    for k in range(2):  # world k's share is that start's own loss and gradient
        own_loss, own_grad = local.value_and_grad(starts[k])
        assert problem.world_losses()[k] == own_loss
        np.testing.assert_array_equal(grad[6 * k:6 * (k + 1)], own_grad)
    fits = [multistart(DistributedProblem(p, worlds=2), starts, iterations=3, progress=False) for p in (pool, local)]
    np.testing.assert_array_equal(fits[0].finals, fits[1].finals)
    assert fits[0].losses[fits[0].best] < fits[0].losses0.min()


def test_es_population_spreads_over_the_workers(pool, local):
    torch = pytest.importorskip("torch")
    from wpsim.opt.policies import ESConfig, es_search

    config = ESConfig(iterations=2, sigma=0.1, learning_rate=0.1, weight_decay=0.0)
    thetas = []
    for p in (pool, local):
        problem = DistributedProblem(p)
        start = torch.tensor(problem.params.to_internal(problem.x0))
        thetas.append(es_search(population_fitness(problem), start, config, pairs=2))
        assert problem.rollouts == 2 * 4  # two iterations of four rows
    assert torch.equal(thetas[0], thetas[1]) and not torch.equal(thetas[0], start)


def test_killed_worker_is_replaced_and_the_fit_is_unchanged(pool, local):
    reference = minimize(DistributedProblem(local), "lbfgsb", iterations=4, progress=False)
    before = pool.worker_info()[1]
    killed = {}
    with ThreadPoolExecutor(1) as executor:
        running = executor.submit(minimize, DistributedProblem(pool), "lbfgsb", iterations=4, progress=False)
        deadline = time.monotonic() + 120.0  # a guard against a hang, not a timing check
        while not killed and not running.done() and time.monotonic() < deadline:
            info = pool.worker_info()[1]
            if info["busy"] and info["calls"] >= before["calls"] + 2:  # inside its second evaluation of the fit
                os.kill(info["pid"], signal.SIGKILL)
                killed = info
        fit = running.result()
    assert killed, "the fit ended before worker 1 could be killed during an evaluation"
    after = pool.worker_info()[1]
    assert after["pid"] != killed["pid"] and after["calls"] >= 1  # a new process recomputed the shards
    np.testing.assert_array_equal(fit.x, reference.x)
    assert fit.loss == reference.loss and len(fit.history) == len(reference.history)


def test_bad_scene_and_blow_up_raise_one_error_naming_worker_and_shard(pool, scenes, ray_cluster):
    bad = list(scenes)
    bad[1] = Scene(window_problem, (str(ASSETS / "missing.xml"), *scenes[1].args[1:]), weight=0.25)
    with pytest.raises(ShardError, match=r"worker 1 \(host .*pid \d+, device cpu\) failed building shard 1 "
                                         r"\(window_problem\(.*missing\.xml.*no such file"):
        WorkerPool(bad, workers=2, cpus_per_worker=0)
    x = pool.space["x0"].copy()
    x[3] = -1000.0  # link2 damping: the rollout blows up
    blow_up = r"worker 0 .* failed running evaluate on shard 0 \(window 0 .*the loss is nan"
    with pytest.raises(NonFiniteShard, match=blow_up):
        pool.value_and_grad(x)
    other = window_scenes(ROBOT, DATA, ["damping"], windows=2, duration=DURATION)
    with pytest.raises(ValueError, match=r"shard 1 \(window 0 .*declares other parameters than shard 0"):
        LocalPool([scenes[0], other[0]], "cpu")


def test_command_line_builds_ray_commands_and_checks_arguments(capsys):
    parser = build_parser()
    head = parser.parse_args(["head", "--port", "6380", "--num-gpus", "4"])
    assert ray_start_command(head) == ["ray", "start", "--head", "--port=6380", "--num-gpus=4"]
    join = parser.parse_args(["join", "10.0.0.5:6380", "--num-cpus", "16"])
    assert ray_start_command(join) == ["ray", "start", "--address=10.0.0.5:6380", "--num-cpus=16"]
    assert main(["join", "head-node:6379", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == "ray start --address=head-node:6379"
    check = parser.parse_args(["check", "--address", "ray://head:10001", "--workers", "8", "--gpus-per-worker", "1"])
    assert (check.address, check.workers, check.gpus_per_worker) == ("ray://head:10001", 8, 1.0)
    bad = ((["join", "head-node"], "not 'auto', host:port"), (["join", "h:70000"], "port 1-65535"),
           (["check", "--workers", "0"], "0 is below 1"), (["head", "--num-gpus", "x"], "not an integer"),
           (["check", "--gpus-per-worker", "-1"], "below 0"), (["join"], "address"),
           (["head", "--port", "0"], "below 1"), (["head", "--port", "65536"], "above 65535"))
    for argv, message in bad:
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_command_line_check_runs_workers_on_the_cluster(ray_cluster, capsys):
    assert main(["check", "--workers", "2", "--cpus-per-worker", "0", "--windows", "2", "--duration", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.count("device cpu") == 2 and "largest relative gradient difference 0" in out
