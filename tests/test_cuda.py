"""CUDA paths (skipped without a CUDA device): CPU/GPU agreement and CUDA-graph capture."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.apps import scene_library

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
