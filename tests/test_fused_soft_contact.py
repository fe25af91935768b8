"""The fused soft-constraint contact step (one launch per step, no read-back): bitwise the
staged schedule's results, its health kept on the device per world, and a float32 stance
that converges in a few iterations."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from wpsim.bench.scene_speed import count_launches
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.solvers.fused_soft_contact import FusedSoftContactStep

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def quadruped(worlds: int, dtype) -> tuple:
    """(model, the file's time step, its contact settings) of ``worlds`` quadrupeds, each world's
    hips turned by its own angle so that the worlds differ."""
    builder, scene = import_mjcf(ASSETS / "quadruped.xml")
    model = builder.replicated(worlds).finalize(device="cpu", dtype=dtype)
    q = model.joint_q.numpy().reshape(worlds, -1)
    q[:, 7] = np.linspace(-0.2, 0.2, worlds)  # front-left hip
    model.joint_q.assign(q.reshape(-1))
    return model, float(scene.timestep), scene.contact_settings


def run(solver, model, dt: float, steps: int):
    a, b = model.state(), model.state()
    for _ in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
    return a


@pytest.mark.parametrize("dtype", [wp.float32, wp.float64])
def test_fused_step_is_bitwise_the_staged_schedule(dtype):
    model, dt, settings = quadruped(3, dtype)
    finals, records = [], []
    for fused in (False, True):
        solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings), fused=fused)
        assert isinstance(solver.fused, FusedSoftContactStep) == fused
        final = run(solver, model, dt, 500)  # the feet land after ~150 steps
        finals.append((final.joint_q.numpy(), final.joint_qd.numpy()))
        records.append((solver.health().contact_iterations, solver.soft_contact.active_contacts()))
        assert solver.health().ok
    for staged, fused in zip(*finals):
        np.testing.assert_array_equal(staged, fused)
    assert records[0] == records[1] and records[0][0] >= 2 and records[0][1] >= 8


def test_fused_step_is_one_launch_without_read_back(monkeypatch):
    model, dt, settings = quadruped(1, wp.float32)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings), threads=1)
    a, b = model.state(), model.state()
    solver.step(a, b, None, dt)
    reads = []
    original = wp.array.numpy
    monkeypatch.setattr(wp.array, "numpy", lambda self: reads.append(self) or original(self))
    assert count_launches(lambda: solver.step(b, a, None, dt)) == 1
    assert reads == []


def test_float32_stance_converges_in_few_iterations():
    """Standing on its feet in float32 (the default precision): no unconverged step in 2 s, and
    the median stance step takes at most 3 Newton iterations (2 before the tolerance was
    precision-aware: float32 rounding kept the steps above it, 14 % of steps ran the cap)."""
    model, dt, settings = quadruped(1, wp.float32)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings))
    state = model.state()
    solver.advance(state, None, dt, 4000)
    report = solver.health()
    assert report.ok and not report.unconverged_contact, str(report)
    assert solver.soft_contact.active_contacts() == 4
    per_step = []
    for _ in range(200):
        solver.reset_health()
        solver.advance(state, None, dt, 1)
        per_step.append(solver.health().contact_iterations)
    assert np.median(per_step) <= 3 and max(per_step) <= 5
    assert abs(state.joint_q.numpy()[2] - 0.43) < 0.01  # the torso stands at its height


def test_fused_step_reports_an_unconverged_world_from_the_device():
    model, dt, settings = quadruped(2, wp.float32)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings, iterations=1))
    assert solver.fused is not None
    run(solver, model, dt, 400)
    report = solver.health()
    assert not report.ok and sorted(report.unconverged_contact) == [0, 1]
    for entry in report.unconverged_contact.values():
        assert 0 < entry.first_step < 400 and 0 < entry.steps <= 400
        assert entry.worst_residual > entry.tolerance and entry.iterations == 1
    assert report.contact_iterations == 1
    solver.reset_health()
    assert solver.health().ok
