"""The fused articulation step (one launch per step, ``wpsim.solvers.fused_articulation``)
against the staged launches: bitwise the same states, the same tape gradients to round-off
(and central finite differences in float64), the threaded backward the one-thread one,
``advance`` equal to stepping, results independent of the thread split, refusals named,
prepared launches (forward and adjoint) re-run on swapped arrays, unrecorded runs built
without the adjoint's module."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from wpsim.core.model import row_views
from wpsim.diff.losses import joint_tracking_loss
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions, fused_articulation
from wpsim.solvers.fused_articulation import PREPARED_LAUNCHES, thread_chunks
from wpsim.solvers.fused_soft_contact import FusedSoftContactStep
from wpsim.solvers.kinematics import eval_fk
from wpsim.solvers.prepared_launch import PreparedLaunch
from wpsim.solvers.rollout import simulate
from wpsim.solvers.soft_contact import articulation_worlds

ASSETS = Path(__file__).resolve().parents[1] / "assets"
DT = 1.0e-3


def robot(name: str, worlds: int = 3, requires_grad: bool = False):
    """A replicated robot file in float64, its hinges (after any free joint) turned by 0.2 rad
    per world index so that the worlds differ."""
    builder, _ = import_mjcf(ASSETS / name)
    model = builder.replicated(worlds).finalize(device="cpu", dtype=wp.float64, requires_grad=requires_grad)
    q = model.joint_q.numpy().reshape(worlds, -1)
    first_hinge = 7 if name == "quadruped.xml" else 0
    q[:, first_hinge:] += 0.2 * np.arange(1, worlds + 1)[:, None] / worlds
    model.joint_q.assign(q.reshape(-1))
    return model


def drive(model, seed: int):
    """A Control with random joint torques and position targets."""
    control = model.control(requires_grad=False)
    rng = np.random.default_rng(seed)
    control.joint_f.assign(rng.uniform(-0.05, 0.05, model.joint_dof_count))
    control.joint_target_q.assign(rng.uniform(-0.3, 0.3, model.joint_dof_count))
    return control


def stepped(model, solver, control, steps: int):
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    for _ in range(steps):
        solver.step(a, b, control, DT)
        a, b = b, a
    return a


@pytest.mark.parametrize("name", ["arm_7link.xml", "quadruped.xml"])
def test_fused_step_is_bitwise_the_staged_step(name):
    model = robot(name)
    control = drive(model, 1)
    staged = SemiImplicitSolver(model, fused=False)
    fused = SemiImplicitSolver(model, fused=True)
    assert staged.fused is None and fused.fused is not None
    steps = 400 if name == "quadruped.xml" else 200  # the quadruped's feet reach the ground
    a = stepped(model, staged, control, steps)
    b = stepped(model, fused, control, steps)
    for field in ("joint_q", "joint_qd", "body_q", "body_qd", "body_f"):
        np.testing.assert_array_equal(getattr(a, field).numpy(), getattr(b, field).numpy(), err_msg=field)
    if name == "quadruped.xml":
        assert model.contact_pair_count > 0
        assert np.abs(b.body_f.numpy()).max() > 1.0  # contact wrenches were in the step


@pytest.mark.parametrize("name", ["arm_7link.xml", "quadruped.xml"])
def test_advance_is_bitwise_stepping_whatever_the_thread_split(name):
    model = robot(name, worlds=40)
    control = drive(model, 2)
    reference = stepped(model, SemiImplicitSolver(model, fused=False), control, 60)
    for threads in (1, 2, 3):
        solver = SemiImplicitSolver(model, fused=True, threads=threads)
        assert len(solver.fused._chunks) == threads
        state = model.state(requires_grad=False)
        solver.advance(state, control, DT, 25)
        solver.advance(state, control, DT, 35)
        assert solver.step_count == 60
        np.testing.assert_array_equal(state.joint_q.numpy(), reference.joint_q.numpy())
        np.testing.assert_array_equal(state.joint_qd.numpy(), reference.joint_qd.numpy())
        fk = model.state(requires_grad=False)
        fk.assign(state)
        np.testing.assert_array_equal(state.body_q.numpy(), eval_fk(model, fk).body_q.numpy())
        threaded = stepped(model, solver, control, 60)
        np.testing.assert_array_equal(threaded.joint_q.numpy(), reference.joint_q.numpy())


def test_fresh_states_every_step_reuse_the_prepared_launches():
    """Stepping into a new state every step (as the torch bridge does) keeps at most
    PREPARED_LAUNCHES launch sets, retargeted, and gives the ping-pong states bitwise."""
    model = robot("arm_7link.xml", worlds=40)
    control = drive(model, 3)
    steps = 3 * PREPARED_LAUNCHES
    reference = stepped(model, SemiImplicitSolver(model, fused=True, threads=2), control, steps)
    solver = SemiImplicitSolver(model, fused=True, threads=2)
    state = model.state(requires_grad=False)
    for _ in range(steps):
        following = model.state(requires_grad=False)
        solver.step(state, following, control, DT)
        state = following
        assert len(solver.fused._prepared) <= PREPARED_LAUNCHES
    for field in ("joint_q", "joint_qd"):
        np.testing.assert_array_equal(getattr(state, field).numpy(), getattr(reference, field).numpy(), err_msg=field)


def test_thread_chunks_cut_between_worlds_and_cover_every_articulation():
    model = robot("arm_7link.xml", worlds=40)
    worlds = articulation_worlds(model)
    assert thread_chunks(worlds, 3) == [(0, 13), (13, 14), (27, 13)]
    assert thread_chunks(worlds, 64) == thread_chunks(worlds, 5)  # at least 8 articulations per thread
    assert thread_chunks(articulation_worlds(robot("arm_7link.xml", worlds=4)), 2) == [(0, 4)]


def final_loss_gradients(model, fused: bool, steps: int = 60):
    """Loss sum (q - 0.1)^2 of the final state and its tape gradients w.r.t. the initial joint
    velocities, every step's joint torques and the body masses."""
    solver = SemiImplicitSolver(model, fused=fused)
    state = model.state(requires_grad=True)
    state.joint_qd.assign(np.linspace(-0.5, 0.5, model.joint_dof_count))
    forces = wp.array(np.tile(np.linspace(-0.02, 0.03, model.joint_dof_count), (steps, 1)), dtype=wp.float64,
                      device="cpu", requires_grad=True)
    controls = []
    for k in range(steps):
        control = model.control(requires_grad=False)
        control.joint_f = forces[k]
        controls.append(control)
    target = wp.full(model.joint_coord_count, 0.1, dtype=wp.float64, device="cpu")
    weight = wp.ones(model.joint_coord_count, dtype=wp.float64, device="cpu")
    tape = wp.Tape()
    with tape:
        final = simulate(solver, state, steps, DT, control=lambda k: controls[k])
        loss = joint_tracking_loss(final, target, weight)
    tape.backward(loss=loss)
    grads = [state.joint_qd.grad.numpy().copy(), forces.grad.numpy().copy(), model.body_mass.grad.numpy().copy()]
    tape.zero()
    return float(loss.numpy()[0]), grads


@pytest.mark.parametrize("name", ["arm_7link.xml", "quadruped.xml"])
def test_fused_tape_gradients_are_the_staged_ones(name):
    """The fused step's backward (one generated adjoint per articulation) sums the staged
    kernels' adjoint terms in another order: equal to round-off in float64."""
    model = robot(name, worlds=2, requires_grad=True)
    loss_staged, staged = final_loss_gradients(model, fused=False)
    loss_fused, fused = final_loss_gradients(model, fused=True)
    assert loss_staged == loss_fused
    for a, b in zip(staged, fused):
        assert np.abs(a).max() > 0.0
        np.testing.assert_allclose(b, a, rtol=1.0e-11, atol=1.0e-14 * np.abs(a).max())


def test_threaded_backward_equals_one_thread_with_shared_parameters():
    """The backward split over threads (chunks of worlds) gives the one-thread gradients,
    also of the parameters every chunk reads: gravity and the ground's contact stiffness and
    friction (collected per thread, then added)."""
    model = robot("quadruped.xml", worlds=40, requires_grad=True)
    ground = int(np.flatnonzero(model.shape_body.numpy() < 0)[0])
    results = []
    for threads in (1, 3):
        solver = SemiImplicitSolver(model, fused=True, threads=threads)
        assert len(solver.fused._chunks) == threads
        state = model.state(requires_grad=True)
        tape = wp.Tape()
        with tape:
            final = simulate(solver, state, 250, DT)  # the feet touch down after ~150 steps
            loss = joint_tracking_loss(final, wp.zeros(model.joint_coord_count, dtype=wp.float64, device="cpu"),
                                       wp.ones(model.joint_coord_count, dtype=wp.float64, device="cpu"))
        tape.backward(loss=loss)
        results.append([model.gravity.grad.numpy().copy(), model.shape_ke.grad.numpy()[ground],
                        model.shape_mu.grad.numpy()[ground], model.body_mass.grad.numpy().copy(),
                        state.joint_q.grad.numpy().copy()])
        tape.zero()
    for one, split in zip(*results):
        assert np.abs(one).max() > 0.0
        np.testing.assert_allclose(split, one, rtol=1.0e-10, atol=1.0e-14 * np.abs(one).max())


def test_fused_gradients_match_central_differences():
    model = robot("arm_7link.xml", worlds=1, requires_grad=True)
    _, (grad_qd, grad_f, grad_mass) = final_loss_gradients(model, fused=True, steps=40)
    masses = model.body_mass.numpy().copy()
    eps = 1.0e-6
    for body in (0, 3, 6):
        values = []
        for sign in (1, -1):
            changed = masses.copy()
            changed[body] += sign * eps
            model.body_mass.assign(changed)
            values.append(final_loss_gradients(model, fused=True, steps=40)[0])
        model.body_mass.assign(masses)
        fd = (values[0] - values[1]) / (2 * eps)
        assert abs(fd - grad_mass[body]) <= 1.0e-6 * max(1.0, abs(fd)), (body, fd, grad_mass[body])


def test_fused_refusals_name_the_reason():
    builder, _ = import_mjcf(ASSETS / "quadruped.xml")
    model = builder.finalize(device="cpu")
    strict = SoftContactOptions(raise_on_nonconvergence=True)
    with pytest.raises(ValueError, match="raise_on_nonconvergence reads the convergence back at every step"):
        SemiImplicitSolver(model, soft_contact=strict, fused=True)
    assert SemiImplicitSolver(model, soft_contact=strict).fused is None
    assert isinstance(SemiImplicitSolver(model, soft_contact=SoftContactOptions()).fused, FusedSoftContactStep)
    solver = SemiImplicitSolver(model)
    state = model.state(requires_grad=True)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        solver.advance(state, None, DT, 0)
    with wp.Tape(), pytest.raises(RuntimeError, match="unrecorded"):
        solver.advance(state, None, DT, 3)


def test_advance_flags_a_blow_up_at_its_step():
    model = robot("arm_7link.xml", worlds=2)
    solver = SemiImplicitSolver(model, max_speed=50.0)
    state = model.state(requires_grad=False)
    qd = state.joint_qd.numpy()
    qd[model.joint_dof_count // 2:] = 49.0  # world 1 spins past 50 rad/s within a few steps
    state.joint_qd.assign(qd)
    solver.advance(state, None, DT, 30)
    faults = solver.health().fault_steps
    assert list(faults) == [1] and 0 <= faults[1] < 30


@wp.kernel
def count_into(values: wp.array(dtype=int), counter: int):
    values[wp.tid()] += counter


def test_prepared_launch_reruns_with_its_counter_like_a_fresh_launch():
    values = wp.zeros(4, dtype=int, device="cpu")
    launch = PreparedLaunch(count_into, 4, [values, 0], [], "cpu")
    for counter in (1, 2, 3):
        launch.set(1, counter)
        launch.run()
    assert launch._blocks is not None  # the CPU fast path was taken after the first run
    np.testing.assert_array_equal(values.numpy(), [6, 6, 6, 6])
    other = wp.zeros(4, dtype=int, device="cpu")
    launch.retarget([other, 3], [])  # a swapped array goes into the prepared block
    launch.run()
    np.testing.assert_array_equal(other.numpy(), [3, 3, 3, 3])
    np.testing.assert_array_equal(values.numpy(), [6, 6, 6, 6])
    assert PREPARED_LAUNCHES >= 2


@wp.kernel
def square_into(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_prepared_adjoint_launch_retargeted_gives_each_arrays_adjoint():
    """An adjoint PreparedLaunch re-run on other arrays accumulates into their gradients."""
    pairs = [(wp.array([1.0, 2.0], dtype=float, device="cpu", requires_grad=True),
              wp.zeros(2, dtype=float, device="cpu", requires_grad=True)) for _ in range(3)]
    launch = PreparedLaunch(square_into, 2, [pairs[0][0]], [pairs[0][1]], "cpu", adjoint=True)
    for k, (x, y) in enumerate(pairs):
        y.grad.fill_(float(k + 1))
        launch.retarget([x], [y])
        launch.run()
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * (k + 1) * np.array([1.0, 2.0]))
    assert launch._blocks is not None


def test_prepared_adjoint_launch_copies_another_ones_arguments():
    """copy_arguments takes another launch's arrays and adjoints (block copy once both ran,
    argument by argument before); a later set changes only the copy."""
    x, y = wp.array([1.0, 2.0], dtype=float, device="cpu", requires_grad=True), wp.zeros(2, dtype=float, device="cpu",
                                                                                     requires_grad=True)
    spare = [wp.zeros(2, dtype=float, device="cpu", requires_grad=True) for _ in range(2)]
    source = PreparedLaunch(square_into, 2, [x], [y], "cpu", adjoint=True)
    copy = PreparedLaunch(square_into, 2, [spare[0]], [spare[1]], "cpu", adjoint=True)
    for ran in (False, True):
        copy.copy_arguments(source)
        assert (copy._blocks is not None) == ran
        for launch in (copy, source):  # the copy runs into x.grad, as the source does
            y.grad.fill_(1.0)
            launch.run()
    np.testing.assert_allclose(x.grad.numpy(), 4 * 2.0 * np.array([1.0, 2.0]))
    other = wp.array([3.0, 4.0], dtype=float, device="cpu", requires_grad=True)
    copy.set(0, other)
    y.grad.fill_(1.0)
    copy.run()
    np.testing.assert_allclose(other.grad.numpy(), 2.0 * np.array([3.0, 4.0]))
    np.testing.assert_allclose(x.grad.numpy(), 4 * 2.0 * np.array([1.0, 2.0]))


def test_recorded_systems_from_several_blocks_give_the_same_gradients(monkeypatch):
    """Recorded steps take their joint-space systems from blocks of rows; blocks of 7 steps (9
    blocks over 60 steps) give the gradients of one block bitwise."""
    model = robot("arm_7link.xml", worlds=2, requires_grad=True)
    loss_one, one_block = final_loss_gradients(model, fused=True)
    monkeypatch.setattr(fused_articulation, "SYSTEM_BLOCK_STEPS", 7)
    loss_many, many_blocks = final_loss_gradients(model, fused=True)
    assert loss_one == loss_many
    for a, b in zip(one_block, many_blocks):
        assert np.array_equal(a, b)


def test_row_views_share_the_block_and_its_gradient():
    block = wp.zeros((3, 4), dtype=wp.vec3d, device="cpu", requires_grad=True)
    rows = row_views(block)
    rows[1].assign(np.ones((4, 3)))
    rows[2].grad.fill_(2.0)
    assert np.array_equal(block.numpy()[1], np.ones((4, 3))) and not block.numpy()[[0, 2]].any()
    assert np.array_equal(block.grad.numpy()[2], np.full((4, 3), 2.0)) and not block.grad.numpy()[:2].any()
    del block
    assert rows[0].block.shape == (3, 4) and rows[2].shape == (4,) and rows[2].requires_grad


def test_prepared_adjoint_launch_retargeted_to_another_layout_reads_it_right():
    """Retargeting writes only the pointers of an array with the previous one's layout, and the
    whole descriptor otherwise: a strided view and a view without gradient read their own elements."""
    x, y = wp.array([1.0, 2.0], dtype=float, device="cpu", requires_grad=True), wp.zeros(2, dtype=float, device="cpu",
                                                                                     requires_grad=True)
    launch = PreparedLaunch(square_into, 2, [x], [y], "cpu", adjoint=True)
    launch.run()
    wide = wp.array([3.0, -9.0, 4.0, -9.0], dtype=float, device="cpu", requires_grad=True)
    strided = wide[::2]
    y.grad.fill_(1.0)
    launch.retarget([strided], [y])
    launch.run()
    np.testing.assert_allclose(wide.grad.numpy(), [6.0, 0.0, 8.0, 0.0])
    forward = PreparedLaunch(square_into, 2, [strided], [y], "cpu")
    forward.run()
    plain = wp.array([5.0, 6.0], dtype=float, device="cpu")
    forward.retarget([plain], [y])
    forward.run()
    np.testing.assert_allclose(y.numpy(), [25.0, 36.0])


def test_unrecorded_runs_never_build_the_adjoint_module():
    """The forward kernel and the adjoint of recorded steps are Warp modules of their own, so a
    program that only steps unrecorded builds (and loads) the forward alone: NVRTC takes minutes
    over the adjoint. Checked in a fresh process, as other tests load both."""
    import subprocess
    import sys

    script = f"""
import warp as wp
wp.config.log_level = wp.LOG_WARNING
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SemiImplicitSolver
builder, _ = import_mjcf({str(ASSETS / "arm_7link.xml")!r})
model = builder.finalize(device="cpu")
solver = SemiImplicitSolver(model)
assert solver.fused is not None
solver.advance(model.state(), None, 1e-3, 5)
a, b = model.state(), model.state()
solver.step(a, b, None, 1e-3)
print(sorted(name for name in ("steps", "system")
             if wp.get_module("wpsim.kernels.articulation_step." + name).execs))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "['steps']"
