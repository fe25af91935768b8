"""Benchmark suite ``torch``: the cost of the PyTorch bridge against the same rollout driven
from Warp directly, and the memory of a long checkpointed torch rollout.

Time (one process, ratios measured in the same run, best of ``REPEATS``): the gradient of
the loss sum_k sum(joint_q of state k) of T steps of W cart-poles (float32) with respect to
every control (``joint_f`` of every step and world), computed four ways:
- ``warp_checkpoint``: ``wpsim.diff.Rollout`` (checkpoint mode) on a (T, dofs) control array;
- ``torch_rollout``: ``TorchRollout`` (checkpoint mode) on a ``[T, W, dofs]`` tensor, same loss;
- ``warp_full``: ``wpsim.diff.Rollout`` in full mode (one tape per step, every state kept);
- ``torch_step_loop``: a torch loop of ``TorchStep`` (one tape per step, as with a policy in
  the loop), the loss summed by torch.
``time_ratio`` records: torch_rollout / warp_checkpoint and torch_step_loop / warp_full.

Memory (one worker process per case, since Warp's tracker peak is per process): peak Warp
allocations of a 1,000-step ``TorchRollout`` forward + backward, checkpoint against full
mode; ``memory_ratio`` = full / checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.bench.process import run_worker, tracked_peak, worker_main
from wpsim.bench.records import progress, record, timed

SUITE = "torch"
WORKER_MODULE = "wpsim.bench.torch_bridge"
DT = 0.01  # s
REPEATS = 3
CARTPOLE = "cartpole.xml"


def suite_config(quick: bool) -> dict:
    """Worlds and horizons of a suite run."""
    if quick:
        return {"worlds": 8, "steps": 20, "memory_steps": 100}
    return {"worlds": 64, "steps": 200, "memory_steps": 1000}


def _cartpoles(device, worlds: int):
    """(model, solver) of ``worlds`` cart-poles of the assets' MJCF, poles tilted 0.3 rad."""
    from wpsim.io.mjcf import import_mjcf
    from wpsim.solvers import SemiImplicitSolver

    asset = Path(__file__).resolve().parents[2] / "assets" / CARTPOLE
    builder, _ = import_mjcf(asset)
    model = builder.replicated(worlds).finalize(device=device, requires_grad=True)
    q = model.joint_q.numpy()
    q[1::2] = 0.3  # coordinates per world: cart position (m), pole angle (rad)
    model.joint_q.assign(q)
    return model, SemiImplicitSolver(model)


class _JointSum:
    """The Warp loss: loss += sum(joint_q) of every state."""

    def __init__(self, model):
        from wpsim.kernels import losses
        from wpsim.kernels.generic import for_precision

        self.kernel = for_precision(losses.weighted_sum_loss, model.dtype)
        self.weights = wp.ones(model.joint_coord_count, dtype=model.dtype, device=model.device)
        self.slots = wp.zeros(model.joint_coord_count, dtype=wp.int32, device=model.device)
        self.device = model.device

    def __call__(self, k, state, loss):
        wp.launch(self.kernel, dim=self.slots.shape[0], inputs=[state.joint_q, self.weights, self.slots],
                  outputs=[loss], device=self.device)


def _gradient_runs(device, worlds: int, steps: int) -> dict:
    """name -> a function computing the loss gradient w.r.t. every control once; all four
    give the same gradient (checked by the suite)."""
    import torch

    from wpsim.diff import Rollout
    from wpsim.opt.torch import TorchRollout, TorchStep

    model, solver = _cartpoles(device, worlds)
    loss_fn = _JointSum(model)
    forces = np.random.default_rng(0).normal(size=(steps, model.joint_dof_count)).astype(np.float32)
    state0 = model.state(requires_grad=True)
    control_array = wp.array(forces, dtype=model.dtype, device=model.device, requires_grad=True)
    controls = []
    for k in range(steps):
        control = model.control(requires_grad=False)
        control.joint_f = control_array[k]
        controls.append(control)
    rollouts = {mode: Rollout(solver, steps, DT, loss_fn, control=controls, mode=mode) for mode in ("checkpoint", "full")}

    def warp(mode):
        def run():
            control_array.grad.zero_()
            rollouts[mode].forward(state0)
            rollouts[mode].backward()
            return control_array.grad.numpy().reshape(steps, worlds, -1)
        return run

    step = TorchStep(solver, DT, worlds=worlds, check_finite=False)
    torch_rollout = TorchRollout(solver, steps, DT, loss_fn=loss_fn, worlds=worlds, check_finite=False)
    s0 = step.initial_state()
    tensor = torch.tensor(forces, device=step.torch_device).reshape(steps, worlds, -1)

    def rollout_run():
        controls = tensor.clone().requires_grad_(True)
        torch_rollout(s0, {"joint_f": controls}).sum().backward()
        return controls.grad.cpu().numpy()

    def loop_run():
        controls = tensor.clone().requires_grad_(True)
        state, total = s0, s0["joint_q"].sum()
        for k in range(steps):
            state = step(state, {"joint_f": controls[k]})
            total = total + state["joint_q"].sum()
        total.backward()
        return controls.grad.cpu().numpy()

    return {"warp_checkpoint": warp("checkpoint"), "torch_rollout": rollout_run, "warp_full": warp("full"),
            "torch_step_loop": loop_run}


def time_cases(device, worlds: int, steps: int) -> tuple[dict, dict]:
    """(best wall time in s, gradient) per way of computing the gradient."""
    runs = _gradient_runs(device, worlds, steps)
    best, grads = {}, {}
    for name, run in runs.items():
        grads[name] = run()  # warm-up: kernel loading
        best[name] = min(timed(run, device)[0] for _ in range(REPEATS))
    return best, grads


def measure_memory(mode: str, device=None, quick: bool = False) -> dict:
    """Peak Warp memory of one ``TorchRollout`` forward + backward (run in a fresh process)."""
    import torch

    from wpsim.opt.torch import TorchRollout, TorchStep

    config = suite_config(quick)
    device = wp.get_device(device)
    model, solver = _cartpoles(device, config["worlds"])
    loss_fn = _JointSum(model)
    steps = config["memory_steps"]
    warm = TorchRollout(solver, 2, DT, loss_fn=loss_fn, worlds=config["worlds"], mode=mode)
    s0 = TorchStep(solver, DT, worlds=config["worlds"]).initial_state()
    forces = torch.zeros(2, config["worlds"], model.joint_dof_count // config["worlds"], device=warm.torch_device)
    warm(s0, {"joint_f": forces.requires_grad_(True)}).sum().backward()

    def differentiate():
        rollout = TorchRollout(solver, steps, DT, loss_fn=loss_fn, worlds=config["worlds"], mode=mode)
        controls = torch.zeros(steps, *forces.shape[1:], device=rollout.torch_device, requires_grad=True)
        start = time.perf_counter()
        rollout(s0, {"joint_f": controls}).sum().backward()
        wp.synchronize_device(device)
        return time.perf_counter() - start, float(controls.grad.abs().sum())

    peak, (wall, grad_norm) = tracked_peak(differentiate)
    return {"peak_memory_bytes": peak, "wall_s": wall, "gradient_l1": grad_norm}


def torch_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``torch``: ``wall_s`` of the four gradient computations, the two bridge
    ``time_ratio``s, and the checkpoint/full ``peak_memory_bytes`` and ``memory_ratio`` of a
    long ``TorchRollout``."""
    device = wp.get_device(device)
    config = suite_config(quick)
    worlds, steps = config["worlds"], config["steps"]
    base = {"worlds": worlds, "steps": steps, "dt": DT, "device": str(device), "precision": "float32"}
    best, grads = time_cases(device, worlds, steps)
    reference = grads["warp_full"]
    for name, grad in grads.items():
        if not np.allclose(grad, reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max()):
            raise FloatingPointError(f"benchmark case {name} gives another gradient than warp_full")
    records = [record(SUITE, "cartpole", {**base, "mode": name}, "wall_s", wall) for name, wall in best.items()]
    for bridge, direct in (("torch_rollout", "warp_checkpoint"), ("torch_step_loop", "warp_full")):
        ratio = best[bridge] / best[direct]
        records.append(record(SUITE, "cartpole", {**base, "mode": f"{bridge}/{direct}"}, "time_ratio", ratio))
        progress(f"torch/cartpole {bridge}: {best[bridge] * 1e3:.1f} ms against {direct} "
                 f"{best[direct] * 1e3:.1f} ms ({ratio:.2f}x)")
    peaks = {}
    for mode in ("checkpoint", "full"):
        found = run_worker(WORKER_MODULE, [mode, "--device", str(device), *(["--quick"] if quick else [])])
        params = {**base, "steps": config["memory_steps"], "mode": mode, "gradient_l1": found["gradient_l1"]}
        records.append(record(SUITE, "cartpole_rollout", params, "peak_memory_bytes", found["peak_memory_bytes"]))
        peaks[mode] = found["peak_memory_bytes"]
        progress(f"torch/cartpole_rollout T={config['memory_steps']} {mode}: peak "
                 f"{found['peak_memory_bytes'] / 2**20:.2f} MiB")
    params = {**base, "steps": config["memory_steps"], "mode": "full/checkpoint"}
    records.append(record(SUITE, "cartpole_rollout", params, "memory_ratio", peaks["full"] / peaks["checkpoint"]))
    return records


def _parse_case(fields: list) -> tuple:
    if fields[0] not in ("checkpoint", "full"):
        raise ValueError(f"unknown mode {fields[0]!r}")
    return (fields[0],)


def main(argv=None) -> int:
    """``python -m wpsim.bench.torch_bridge [--quick] [--device D]``: the suite as JSON."""
    return worker_main(argv, "PyTorch bridge benchmark", ("MODE",), _parse_case, measure_memory, torch_suite)


if __name__ == "__main__":
    raise SystemExit(main())
