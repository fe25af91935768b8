"""CUDA paths (skipped without a CUDA device): CPU/GPU agreement and CUDA-graph capture."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.tasks import scene_library

pytestmark = pytest.mark.skipif(not wp.is_cuda_available(), reason="no CUDA device")


def _run(device, steps=200, dt=1e-3):
    model = scene_library.bouncing_cube().finalize(device=device, dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    for _ in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
    assert solver.health().ok
    return a.particle_q.numpy()


def test_cpu_and_cuda_agree():
    assert np.allclose(_run("cpu"), _run("cuda:0"), rtol=0.0, atol=1e-9)


def test_graph_capture_replays_the_same_steps():
    """A step allocates nothing and does not synchronise, so it can be captured and replayed."""
    model = scene_library.bouncing_cube().finalize(device="cuda:0")
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    solver.step(a, b, None, 1e-3)  # load the kernel modules before capture
    a.particle_q.assign(model.particle_q)
    a.particle_qd.assign(model.particle_qd)
    with wp.ScopedCapture(device="cuda:0") as capture:
        solver.step(a, b, None, 1e-3)
        solver.step(b, a, None, 1e-3)
    for _ in range(50):
        wp.capture_launch(capture.graph)
    captured = a.particle_q.numpy()

    reference = wpsim.SemiImplicitSolver(model)
    c, d = model.state(), model.state()
    for _ in range(50):
        reference.step(c, d, None, 1e-3)
        reference.step(d, c, None, 1e-3)
    assert np.array_equal(captured, c.particle_q.numpy())


def test_torch_bridge_gradients_agree_on_cpu_and_cuda():
    """The torch bridge on CUDA tensors (zero-copy views of device memory) gives the CPU's
    trajectory and gradients."""
    torch = pytest.importorskip("torch")
    from wpsim.opt.torch import TorchStep

    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    results = []
    for device in ("cpu", "cuda:0"):
        model = scene_library.bouncing_cube().finalize(device=device, dtype=wp.float64, requires_grad=True)
        step = TorchStep(wpsim.SemiImplicitSolver(model), 1e-3)
        state = step.initial_state()
        qd = state["particle_qd"].clone().requires_grad_(True)
        state = {"particle_q": state["particle_q"], "particle_qd": qd}
        for _ in range(50):
            state = step(state)
        (grad,) = torch.autograd.grad(state["particle_q"][:, 2].sum(), qd)
        results.append((state["particle_q"].detach().cpu().numpy(), grad.cpu().numpy()))
    assert np.allclose(results[0][0], results[1][0], rtol=0.0, atol=1e-9)
    assert np.allclose(results[0][1], results[1][1], rtol=1e-9, atol=1e-9)


def _arm(worlds: int, requires_grad: bool = False, device: str = "cuda:0"):
    from pathlib import Path

    from wpsim.io.mjcf import import_mjcf

    builder, _ = import_mjcf(Path(__file__).resolve().parents[1] / "assets" / "arm_7link.xml")
    model = builder.replicated(worlds).finalize(device=device, dtype=wp.float64, requires_grad=requires_grad)
    model.joint_q.assign(np.full(model.joint_coord_count, 0.3))
    return model


def test_fused_step_and_advance_capture_and_replay():
    """The fused articulation step (prepared launches) and ``advance`` replay from a CUDA graph
    to the states of the same steps run directly, and agree with the CPU."""
    model = _arm(64)
    solver = wpsim.SemiImplicitSolver(model)
    assert solver.fused is not None
    a, b = model.state(), model.state()
    solver.step(a, b, None, 1e-3)
    solver.advance(b, None, 1e-3, 2)
    a, b = model.state(), model.state()
    with wp.ScopedCapture(device="cuda:0") as capture:
        solver.step(a, b, None, 1e-3)
        solver.step(b, a, None, 1e-3)
        solver.advance(a, None, 1e-3, 8)
    for _ in range(20):
        wp.capture_launch(capture.graph)
    direct = model.state()
    reference = wpsim.SemiImplicitSolver(model)
    reference.advance(direct, None, 1e-3, 200)
    assert np.array_equal(a.joint_q.numpy(), direct.joint_q.numpy())
    cpu = _arm(64, device="cpu")
    on_cpu = wpsim.SemiImplicitSolver(cpu).advance(cpu.state(), None, 1e-3, 200)
    assert np.allclose(on_cpu.joint_q.numpy(), direct.joint_q.numpy(), rtol=0.0, atol=1e-9)


def test_recorded_fused_rollout_captures_forward_and_backward():
    """A recorded rollout (fresh states and scratch per step) and its tape backward replay
    from one CUDA graph to the gradients of an uncaptured run."""
    from wpsim.diff.losses import joint_tracking_loss
    from wpsim.solvers.rollout import simulate

    model = _arm(4, requires_grad=True)
    solver = wpsim.SemiImplicitSolver(model)
    target = wp.zeros(model.joint_coord_count, dtype=wp.float64, device="cuda:0")
    weight = wp.ones(model.joint_coord_count, dtype=wp.float64, device="cuda:0")
    state = model.state(requires_grad=True)

    def gradient():
        tape = wp.Tape()
        with tape:
            final = simulate(solver, state, 20, 1e-3)
            loss = joint_tracking_loss(final, target, weight)
        tape.backward(loss=loss)
        return tape

    gradient().zero()  # load every module before capture
    uncaptured_tape = gradient()
    expected = state.joint_q.grad.numpy().copy()
    uncaptured_tape.zero()
    with wp.ScopedCapture(device="cuda:0") as capture:
        captured_tape = gradient()
    captured_tape.zero()
    wp.capture_launch(capture.graph)
    assert np.abs(expected).max() > 0.0
    assert np.allclose(state.joint_q.grad.numpy(), expected, rtol=1e-12, atol=0.0)
