"""Gradient health: non-finite gradient tracing, clipping, per-step adjoint norms, plots."""

import json

import numpy as np
import pytest
import warp as wp
from test_opt import falling_pendulum

import wpsim
from wpsim.apps.gradient_audit import double_pendulum
from wpsim.diff import (
    NonFiniteGradientError,
    Rollout,
    adjoint_growth,
    backward_checked,
    clip_grad_norm,
    nonfinite_grads,
)
from wpsim.diff.grad_health import ADJOINT_GROWTH_LIMIT
from wpsim.diff.losses import joint_state_loss, joint_tracking_loss, linear_state_loss, squared_distance
from wpsim.io.plots import plot_gradient_norms


@wp.kernel
def sqrt_drive(gain: wp.array(dtype=float), phase: wp.array(dtype=float), step: int,
               f_ext: wp.array(dtype=wp.vec3)):
    """f = gain sqrt(phase[step]) along x (N): d f / d phase is infinite where phase is 0."""
    i = wp.tid()
    f_ext[i] = wp.vec3(gain[0] * wp.sqrt(phase[step]), 0.0, 0.0)


def _nan_rollout(mode):
    """Particles on the ground driven by ``sqrt_drive``; phase[17] = 0 makes the adjoint
    of step 17's controller launch non-finite (the forward stays finite)."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.4)
    b.add_particle((0.0, 0.0, 0.05), mass=0.1, radius=0.05)
    b.add_particle((0.3, 0.0, 0.05), mass=0.1, radius=0.05)
    model = b.finalize(requires_grad=True)
    steps = 24
    gain = wp.array([0.5], dtype=float, requires_grad=True)
    phase_values = np.linspace(1.0, 2.0, steps).astype(np.float32)
    phase_values[17] = 0.0
    phase = wp.array(phase_values, dtype=float, requires_grad=True)
    targets = wp.array([[0.2, 0.0, 0.05], [0.5, 0.0, 0.05]], dtype=wp.vec3)

    def controller(k, state, control):
        wp.launch(sqrt_drive, dim=2, inputs=[gain, phase, k], outputs=[control.particle_f_ext])

    def loss_fn(k, state, loss):
        if k == steps:
            squared_distance(state.particle_q, targets, loss=loss)

    rollout = Rollout(wpsim.SemiImplicitSolver(model), steps, 1e-3, loss_fn, control=controller, mode=mode,
                      segment_length=5)
    state = model.state(requires_grad=True)
    return rollout, state, {"controller.phase": phase, "controller.gain": gain}


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_check_finite_names_array_kernel_and_step(mode):
    rollout, state, named = _nan_rollout(mode)
    rollout.forward(state)
    with pytest.raises(NonFiniteGradientError) as info:
        rollout.backward(check_finite=True, track=named)
    err = info.value
    assert err.source.kernel == "sqrt_drive"
    assert err.source.step == 17 and not err.source.loss_term
    assert err.source.arguments == ["phase (controller.phase)"]
    assert [(g.name, g.count, g.first_index) for g in err.grads] == [("controller.phase", 1, 17)]
    assert "non-finite gradient: controller.phase (1 of 24 entries" in str(err)
    assert "at step 17 by kernel sqrt_drive, argument phase (controller.phase)" in str(err)


def test_diagnostics_report_lists_nonfinite_gradients():
    """Without the per-launch check the backward completes; the report names the damage."""
    rollout, state, named = _nan_rollout("checkpoint")
    rollout.forward(state)
    report = rollout.backward(diagnostics=True, track=named)
    bad = {g.name: g for g in report.nonfinite}
    assert bad["controller.phase"].count == 1 and bad["controller.phase"].first_index == 17
    assert "controller.gain" not in bad and "state[0].particle_q" not in bad
    assert np.isfinite(report.adjoint_q_norm).all()  # only the phase gradient is hit


@wp.kernel
def sqrt_terms(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sqrt(x[i])


@wp.kernel
def double_terms(x: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = 2.0 * x[i]


@wp.kernel
def sum_terms(y: wp.array(dtype=float), z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] + z[i])


def test_backward_checked_finds_the_producer_not_a_bystander():
    """x[2] = 0: sqrt's adjoint is infinite. ``double_terms`` also reads x (later in forward
    order, so earlier in the backward) but is innocent; a post-hoc replay blames sqrt_terms."""
    x = wp.array([1.0, 4.0, 0.0], dtype=float, requires_grad=True)
    y, z = wp.zeros_like(x), wp.zeros_like(x)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sqrt_terms, dim=3, inputs=[x], outputs=[y])
        wp.launch(double_terms, dim=3, inputs=[x], outputs=[z])
        wp.launch(sum_terms, dim=3, inputs=[y, z], outputs=[loss])
    tape.backward(loss)
    assert [g.first_index for g in nonfinite_grads({"x": x})] == [2]
    with pytest.raises(ValueError, match="already non-finite"):
        backward_checked(tape, names={"inputs.x": x})
    tape.zero()
    source = backward_checked(tape, loss, names={"inputs.x": x})
    assert (source.kernel, source.launch_index, source.arguments) == ("sqrt_terms", 0, ["x (inputs.x)"])
    assert "by kernel sqrt_terms, argument x (inputs.x)" in str(source)


def test_backward_checked_names_a_custom_backward_function():
    """A ``record_func`` entry that writes NaN is named by its qualified name."""
    x = wp.array([1.0, 4.0], dtype=float, requires_grad=True)
    y = wp.zeros_like(x)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    def broken_adjoint():
        x.grad.assign(np.array([0.5, np.nan], dtype=np.float32))

    tape = wp.Tape()
    with tape:
        wp.launch(double_terms, dim=2, inputs=[x], outputs=[y])
        tape.record_func(backward=broken_adjoint, arrays=[x])
        wp.launch(sum_terms, dim=2, inputs=[y, y], outputs=[loss])
    source = backward_checked(tape, loss, names={"inputs.x": x})
    assert source.kernel.endswith("broken_adjoint") and source.launch_index == 1
    assert source.arguments == ["array (inputs.x)"] and source.custom
    assert "by custom backward function" in str(source)


def test_backward_checked_gives_the_tape_gradients_when_finite():
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.4)
    b.add_particle((0.0, 0.0, 0.06), (1.0, 0.3, -0.5), mass=0.1, radius=0.05)
    model = b.finalize(requires_grad=True)
    solver = wpsim.SemiImplicitSolver(model)
    grads = []
    for checked in (False, True):
        state = model.state(requires_grad=True)
        tape = wp.Tape()
        with tape:
            final = wpsim.simulate(solver, state, 20, 2e-3)
            loss = squared_distance(final.particle_q, state.particle_q)
        if checked:
            assert backward_checked(tape, loss) is None
        else:
            tape.backward(loss)
        grads.append((state.particle_qd.grad.numpy().copy(), model.shape_mu.grad.numpy().copy()))
        tape.zero()
    assert np.abs(grads[0][1]).max() > 0.0
    assert all(np.array_equal(a, b) for a, b in zip(*grads))


def test_nonfinite_grads_counts_vector_elements():
    a = wp.zeros(6, dtype=wp.vec3d, requires_grad=True)
    g = np.zeros((6, 3))
    g[3, 1], g[3, 2], g[5, 0] = np.nan, np.inf, -np.inf
    a.grad.assign(g)
    (bad,) = nonfinite_grads({"a": a, "b": wp.zeros(2, dtype=float, requires_grad=True)})
    assert (bad.name, bad.count, bad.size, bad.first_index) == ("a", 2, 6, 3)
    with pytest.raises(ValueError, match="no gradient array"):
        nonfinite_grads({"c": wp.zeros(2, dtype=float)})


def test_clip_grad_norm_scales_to_the_requested_norm():
    v = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
    s = wp.zeros(3, dtype=wp.float64, requires_grad=True)
    rng = np.random.default_rng(0)
    gv, gs = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3)
    v.grad.assign(gv)
    s.grad.assign(gs)
    norm = np.sqrt(np.sum(gv.astype(np.float64) ** 2) + np.sum(gs**2))
    assert clip_grad_norm({"v": v, "s": s}, 0.5) == pytest.approx(norm, rel=1e-12)
    after = np.sqrt(np.sum(v.grad.numpy().astype(np.float64) ** 2) + np.sum(s.grad.numpy() ** 2))
    assert after == pytest.approx(0.5, rel=1e-6)
    assert np.allclose(s.grad.numpy(), gs * 0.5 / norm, rtol=1e-12)  # direction kept
    # below the bound: unchanged, the norm is still returned
    assert clip_grad_norm([v, s], 10.0) == pytest.approx(0.5, rel=1e-6)
    assert np.allclose(s.grad.numpy(), gs * 0.5 / norm, rtol=1e-12)
    # a non-finite norm leaves the gradients alone
    s.grad.assign(np.array([np.inf, 1.0, 2.0]))
    assert clip_grad_norm([s], 1.0) == np.inf
    assert np.array_equal(s.grad.numpy()[1:], [1.0, 2.0])
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm([v], 0.0)
    with pytest.raises(ValueError, match="no gradient array"):
        clip_grad_norm([wp.zeros(2, dtype=float)], 1.0)


def _free_particle_rollout(mode, steps=10, dt=0.01, **kwargs):
    """One free particle under gravity, loss = final height (m)."""
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.3, 0.0, 0.0), mass=1.0)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    wq, wqd = wp.array([[0.0, 0.0, 1.0]], dtype=wp.vec3d), wp.zeros(1, dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == steps:
            linear_state_loss(state, wq, wqd, loss=loss)

    rollout = Rollout(wpsim.SemiImplicitSolver(model), steps, dt, loss_fn, mode=mode, **kwargs)
    rollout.forward(model.state(requires_grad=True))
    return model, rollout


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_adjoint_norms_of_a_linear_system(mode, tmp_path):
    """Symplectic Euler: x' = x + dt v', v' = v + dt g. For L = z_T: dL/dx_k = e_z and
    dL/dv_k = (T - k) dt e_z; step k adds dt^2 (T - k) to dL/dg_z."""
    steps, dt = 10, 0.01
    model, rollout = _free_particle_rollout(mode, steps, dt, segment_length=3)
    report = rollout.backward(diagnostics=True, track={"model.gravity": model.gravity})
    k = np.arange(steps + 1)
    assert np.allclose(report.adjoint_q_norm, 1.0, rtol=1e-12)
    assert np.allclose(report.adjoint_qd_norm, (steps - k) * dt, rtol=1e-12, atol=1e-15)
    assert np.allclose(report.step_contributions["model.gravity"], dt * dt * (steps - k[:-1]), rtol=1e-10)
    assert report.nonfinite == []
    data = json.loads(json.dumps(report.to_dict()))
    assert len(data["adjoint_norms"]["particle_qd"]) == steps + 1 and data["num_steps"] == steps
    path = plot_gradient_norms(report, tmp_path / "plots" / "norms.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["norms.png"]  # no temporary file left


def test_adjoint_clip_bounds_the_propagated_adjoint():
    """With adjoint_clip = 0.5 the adjoint (norm >= 1 unclipped) of states 0 < k < T is
    clipped to 0.5, identically in both modes."""
    reports = [_free_particle_rollout(mode, adjoint_clip=0.5)[1].backward(diagnostics=True)
               for mode in ("full", "checkpoint")]
    for report in reports:
        norm = np.hypot(report.adjoint_q_norm, report.adjoint_qd_norm)
        assert norm[-1] == pytest.approx(1.0)
        assert np.allclose(norm[1:-1], 0.5, rtol=1e-12)
        assert report.adjoint_clip == 0.5
    assert np.array_equal(reports[0].adjoint_q_norm, reports[1].adjoint_q_norm)


def test_clip_counts_a_repeated_array_once_and_checks_strided_views():
    s = wp.zeros(2, dtype=wp.float64, requires_grad=True)
    s.grad.assign(np.array([3.0, 4.0]))
    assert clip_grad_norm([s, s], 1.0) == pytest.approx(5.0, rel=1e-12)
    assert np.allclose(s.grad.numpy(), [0.6, 0.8], rtol=1e-12)
    # a strided view: read-only checks work on a copy, in-place clipping refuses
    a = wp.zeros(6, dtype=wp.float64, requires_grad=True)
    a.grad.assign(np.array([0.0, 1.0, np.nan, 1.0, 0.0, 1.0]))
    every_other = a[::2]
    (bad,) = nonfinite_grads({"even": every_other})
    assert (bad.count, bad.size, bad.first_index) == (1, 3, 1)
    with pytest.raises(ValueError, match="not contiguous"):
        clip_grad_norm([every_other], 1.0)


def _pendulum(steps=12, dt=0.01):
    """The double pendulum; loss: a linear probe of the final joint coordinates and velocities."""
    model = double_pendulum()
    wq = wp.array([1.0, -0.5], dtype=wp.float64)
    wqd = wp.array([0.3, 0.2], dtype=wp.float64)

    def rollout(num_steps, **kwargs):
        def loss_fn(k, state, loss):
            if k == num_steps:
                joint_state_loss(state, wq, wqd, loss)

        return Rollout(wpsim.SemiImplicitSolver(model), num_steps, dt, loss_fn, **kwargs)

    return model, rollout


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_adjoint_norms_of_a_rigid_model_are_its_joint_gradients(mode):
    """The joint adjoint norms of state k equal the norms of d L / d (q_k, qd_k) computed by
    a separate rollout of the remaining T - k steps from state k (the particle norms, all
    that the report held before, are 0 here)."""
    steps = 12
    model, rollout = _pendulum(steps)
    main = rollout(steps, mode=mode, segment_length=5)
    main.forward(model.state(requires_grad=True))
    report = main.backward(diagnostics=True)
    solver = wpsim.SemiImplicitSolver(model)
    for k in (0, 5, 11, 12):
        start = wpsim.simulate(solver, model.state(), k, 0.01) if k else model.state()
        state_k = model.state(requires_grad=True)
        state_k.assign(start)
        if k < steps:
            rest = rollout(steps - k, mode="full")
            rest.forward(state_k)
            rest.backward()
            q_grad, qd_grad = state_k.joint_q.grad.numpy(), state_k.joint_qd.grad.numpy()
        else:
            q_grad, qd_grad = np.array([1.0, -0.5]), np.array([0.3, 0.2])
        assert report.adjoint_norms["joint_q"][k] == pytest.approx(np.linalg.norm(q_grad), rel=1e-9)
        assert report.adjoint_norms["joint_qd"][k] == pytest.approx(np.linalg.norm(qd_grad), rel=1e-9)
    assert np.all(report.adjoint_norms["joint_q"] > 0.0)
    assert np.all(report.adjoint_q_norm == 0.0) and np.all(report.adjoint_qd_norm == 0.0)  # no particles
    joints = np.hypot(report.adjoint_norms["joint_q"], report.adjoint_norms["joint_qd"])
    assert np.allclose(report.state_norm, joints, rtol=1e-14)


def test_adjoint_norms_do_not_accumulate_across_backward_calls():
    """Gradients accumulate into state0 across calls (by design); its reported adjoint norm
    is this backward's alone, the same in every call (to rounding: it is measured as the
    change of the accumulated gradient)."""
    model, rollout = _pendulum()
    main = rollout(12, mode="checkpoint")
    state = model.state(requires_grad=True)
    reports = []
    for _ in range(3):
        main.forward(state)
        reports.append(main.backward(diagnostics=True))
    first = reports[0].adjoint_norms
    assert np.linalg.norm(state.joint_q.grad.numpy()) == pytest.approx(3.0 * first["joint_q"][0], rel=1e-12)
    for report in reports[1:]:
        for name, norms in report.adjoint_norms.items():
            assert np.allclose(norms, first[name], rtol=1e-12, atol=0.0), name


def test_adjoint_growth_warns_once_with_the_state_range():
    """The falling pendulum of test_opt: the adjoint of the early states grows back from the
    last one; the rollout says so once."""
    steps = 650
    model, rollout = falling_pendulum(steps, adjoint_growth_limit=10.0)
    state = model.state(requires_grad=True)
    rollout.forward(state)
    with pytest.warns(UserWarning, match=r"the adjoint of states 0-\d+ is more than 10x what the loss terms of those and the later "
                                         r"states \(up to state 650\) put in directly"):
        report = rollout.backward(diagnostics=True)
    growth = adjoint_growth(report, 10.0)
    assert growth["first"] == 0 and 0 < growth["last"] < steps and growth["growth"] > 10.0
    rollout.forward(state)
    rollout.backward(diagnostics=True)
    assert len(rollout.warnings) == 1
    quiet = falling_pendulum(steps, adjoint_growth_limit=1.0e6)[1]
    quiet.forward(state)
    quiet.backward(diagnostics=True)
    assert quiet.warnings == []


def _swinging_tracking(steps: int, dt: float):
    """(rollout maker, model) of a double pendulum swinging over the top (chaotic), its loss
    a joint tracking term at every state; the maker takes ``Rollout`` options."""
    b = wpsim.ModelBuilder()
    upper = b.add_body(mass=1.0, com=(0.0, 0.0, -0.2), inertia=(0.01, 0.01, 0.002))
    b.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=2.5, qd=3.0)
    lower = b.add_body(mass=0.5, com=(0.0, 0.0, -0.15), inertia=(0.004, 0.004, 0.001))
    b.add_joint_revolute(upper, lower, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.4), q=-0.3)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    target, weights = wp.array([0.1, -0.2], dtype=wp.float64), wp.array([1.0, 0.5], dtype=wp.float64)

    def loss_fn(k, state, loss):
        joint_tracking_loss(state, target, weights, loss)

    def make(**options):
        return Rollout(wpsim.SemiImplicitSolver(model), steps, dt, loss_fn, **options)

    return make, model


def _growth_and_fd_error(steps: int, dt: float) -> tuple:
    """(report, warnings, relative error of the tape derivative w.r.t. the upper joint's
    initial velocity against central differences, eps 1e-6) of ``_swinging_tracking``."""
    make, model = _swinging_tracking(steps, dt)
    state = model.state(requires_grad=True)
    rollout = make(adjoint_growth_limit=ADJOINT_GROWTH_LIMIT)
    rollout.forward(state)
    report = rollout.backward(diagnostics=True)
    tape = state.joint_qd.grad.numpy()[0]
    values = []
    for eps in (1.0e-6, -1.0e-6):
        shifted = model.state()
        shifted.joint_qd.assign(shifted.joint_qd.numpy() + np.array([eps, 0.0]))
        values.append(make().forward(shifted))
    central = (values[0] - values[1]) / 2.0e-6
    return report, rollout.warnings, abs(tape - central) / abs(central)


def test_a_loss_summed_over_every_state_is_not_taken_for_adjoint_growth():
    """1 s of the swinging pendulum, tracked at every state: the gradient agrees with central
    differences to 1e-6 and the adjoint of state 0 is 1e4 times that of the last state (the
    old criterion warned), but only about 16 times what the loss terms put in directly."""
    report, warned, error = _growth_and_fd_error(1000, 1.0e-3)
    assert error < 1.0e-6 and report.state_norm[0] > 1.0e3 * report.state_norm[-1]
    assert warned == []
    assert report.loss_adjoint_norms[-1] == pytest.approx(report.state_norm[-1], rel=1e-12)
    assert adjoint_growth(report, 1.0)["growth"] < 100.0


def test_adjoint_growth_of_a_chaotic_rollout_is_warned_about():
    """8 s of the swinging pendulum (chaotic), tracked at every state: the gradient disagrees
    with central differences, and the adjoint grows far beyond what the loss terms put in."""
    with pytest.warns(UserWarning, match="may be unreliable"):
        report, warned, error = _growth_and_fd_error(2000, 4.0e-3)
    assert error > 0.5
    assert adjoint_growth(report)["growth"] > 1.0e5
    assert len(warned) == 1 and "may be unreliable" in warned[0]
