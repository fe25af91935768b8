"""Checkpointed rollouts: bitwise the gradients of full tapes; truncation; controllers; errors."""

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim import bench
from wpsim.bench import checkpoint as bench_checkpoint
from wpsim.diff import Rollout
from wpsim.diff.losses import body_position_loss, joint_state_loss, linear_state_loss, squared_distance
from wpsim.io.mjcf import import_mjcf
from wpsim.tasks import scene_library

ASSETS = Path(__file__).resolve().parents[1] / "assets"


@dataclass
class Case:
    """A tiny scene: model, solver, initial state, control argument, loss, horizon, dt."""

    model: wpsim.Model
    solver: object
    state: wpsim.State
    control: object
    loss_fn: Callable
    steps: int
    dt: float
    extra: dict


def _target_loss(targets, steps, every):
    """Squared distance to ``targets`` at every ``every``-th state and at the final one."""

    def loss_fn(k, state, loss):
        if k % every == 0 or k == steps:
            squared_distance(state.particle_q, targets, loss=loss)

    return loss_fn


def _per_step_forces(model, steps, scale, seed=1):
    rng = np.random.default_rng(seed)
    controls = []
    for _ in range(steps):
        c = model.control()
        c.particle_f_ext.assign(rng.normal(scale=scale, size=(model.particle_count, 3)).astype(np.float32))
        controls.append(c)
    return controls


def contact_case() -> Case:
    """Two particles hitting the ground and sliding with friction, pushed by per-step forces."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.4)
    b.add_particle((0.0, 0.0, 0.06), (1.0, 0.3, -0.5), mass=0.1, radius=0.05)
    b.add_particle((0.5, 0.0, 0.1), (-0.5, 0.8, -0.2), mass=0.1, radius=0.05)
    model = b.finalize(requires_grad=True)
    steps = 30
    targets = wp.array([[0.3, 0.1, 0.05], [0.2, 0.4, 0.05]], dtype=wp.vec3)
    return Case(model, wpsim.SemiImplicitSolver(model), model.state(), _per_step_forces(model, steps, 0.2),
                _target_loss(targets, steps, 4), steps, 2e-3, {})


def cloth_case() -> Case:
    """A 3x3-cell cloth released with a small fold; one Control for every step."""
    model = scene_library.cloth_on_sphere(3).finalize(requires_grad=True)
    steps = 25
    state = model.state()
    q = state.particle_q.numpy()
    q[:, 2] += 0.01 * np.sin(7.0 * q[:, 0] + 3.0 * q[:, 1])
    state.particle_q.assign(q)
    targets = wp.array(q - np.array([0.0, 0.0, 0.1]), dtype=wp.vec3)
    control = model.control()
    control.particle_f_ext.fill_(wp.vec3(0.01, 0.0, 0.0))
    return Case(model, wpsim.SemiImplicitSolver(model), state, control, _target_loss(targets, steps, 3),
                steps, 1e-3, {})


def soft_case() -> Case:
    """A 2x1x1-cell soft block on the ground actuated by per-step tet activations."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e4, kd=1.0, mu=0.5)
    b.add_soft_grid(pos=(0.0, 0.0, 0.001), dim_x=2, dim_y=1, dim_z=1, cell_x=0.02, cell_y=0.02, cell_z=0.02,
                    density=1000.0, young_modulus=5.0e4, poisson_ratio=0.3, kd=5.0, radius=0.005)
    model = b.finalize(requires_grad=True)
    steps = 24
    controls = []
    for k in range(steps):
        c = model.control()
        c.tet_activation.assign((0.2 * np.sin(0.3 * k + np.arange(model.tet_count))).astype(np.float32))
        controls.append(c)
    rng = np.random.default_rng(3)
    wq = wp.array(rng.standard_normal((model.particle_count, 3)), dtype=wp.vec3)
    wqd = wp.array(rng.standard_normal((model.particle_count, 3)), dtype=wp.vec3)

    def loss_fn(k, state, loss):  # a running cost on every state
        linear_state_loss(state, wq, wqd, loss=loss)

    return Case(model, wpsim.SemiImplicitSolver(model), model.state(), controls, loss_fn, steps, 2e-4, {})


def implicit_cloth_case() -> Case:
    """The cloth stepped by the backward-Euler solver, whose steps record a custom backward
    function (``tape.record_func``) instead of kernel launches."""
    case = cloth_case()
    with pytest.warns(UserWarning, match="float32 with contact"):
        case.solver = wpsim.solvers.ImplicitEulerSolver(case.model)
    case.steps = 12
    return case


@wp.kernel
def pd_controller(gain: wp.array(dtype=float), target: wp.vec3, q: wp.array(dtype=wp.vec3),
                  qd: wp.array(dtype=wp.vec3), f_ext: wp.array(dtype=wp.vec3)):
    """f = gain[0] (target - x) - gain[1] v (N)."""
    i = wp.tid()
    f_ext[i] = gain[0] * (target - q[i]) - gain[1] * qd[i]


def controller_case() -> Case:
    """Particles on the ground steered by a PD controller whose gains get gradients."""
    case = contact_case()
    gain = wp.array([2.0, 0.3], dtype=float, requires_grad=True)

    def controller(k, state, control):
        wp.launch(pd_controller, dim=case.model.particle_count,
                  inputs=[gain, wp.vec3(0.4, 0.2, 0.0), state.particle_q, state.particle_qd],
                  outputs=[control.particle_f_ext])

    case.control = controller
    case.extra["gain"] = gain
    return case


def rigid_case() -> Case:
    """A driven two-link arm and a box sliding on the ground; per-step joint torques; a
    loss on joint coordinates and velocities every third state."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e4, kd=50.0, mu=0.5)
    upper = b.add_body()
    b.add_shape_capsule(upper, pos=(0.0, 0.0, -0.2), radius=0.04, half_height=0.15)
    b.add_joint_revolute(-1, upper, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.3, target_ke=5.0,
                         target_kd=0.5)
    lower = b.add_body()
    b.add_shape_box(lower, pos=(0.0, 0.0, -0.15), hx=0.03, hy=0.03, hz=0.15)
    b.add_joint_revolute(upper, lower, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, -0.4), q=-0.2, damping=0.1)
    box = b.add_body()
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, ke=2.0e4, kd=50.0, mu=0.5, density=300.0)
    b.add_joint_free(box, pos=(1.0, 0.0, 0.099), lin_vel=(0.5, 0.2, 0.0))
    model = b.finalize(requires_grad=True)
    steps = 24
    rng = np.random.default_rng(2)
    controls = []
    for _ in range(steps):
        c = model.control()
        c.joint_f.assign(rng.normal(scale=0.5, size=model.joint_dof_count).astype(np.float32))
        controls.append(c)
    w_q = wp.array(rng.normal(size=model.joint_coord_count).astype(np.float32), dtype=float)
    w_qd = wp.array(rng.normal(size=model.joint_dof_count).astype(np.float32), dtype=float)

    def loss_fn(k, state, loss):
        if k % 3 == 0 or k == steps:
            joint_state_loss(state, w_q, w_qd, loss)

    return Case(model, wpsim.SemiImplicitSolver(model), model.state(), controls, loss_fn, steps, 2e-3, {})


def _run(make: Callable[[], Case], **kwargs) -> dict:
    """Loss, final state and every gradient of one rollout on a fresh scene."""
    case = make()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control, **kwargs)
    out = {"loss": rollout.forward(case.state)}
    rollout.backward()
    out["final_q"] = rollout.final_state.particle_q.numpy().copy()
    out["final_joint_q"] = rollout.final_state.joint_q.numpy().copy()
    out["step_count"] = case.solver.step_count
    grads = {f"model.{n}": a.grad.numpy().copy() for n, a in case.model.parameter_arrays().items()}
    grads["state.q"] = case.state.particle_q.grad.numpy().copy()
    grads["state.qd"] = case.state.particle_qd.grad.numpy().copy()
    grads["state.joint_q"] = case.state.joint_q.grad.numpy().copy()
    grads["state.joint_qd"] = case.state.joint_qd.grad.numpy().copy()
    controls = case.control if isinstance(case.control, list) else [case.control]
    for k, c in enumerate(controls):
        if isinstance(c, wpsim.Control):
            grads[f"control[{k}].f_ext"] = c.particle_f_ext.grad.numpy().copy()
            grads[f"control[{k}].act"] = c.tet_activation.grad.numpy().copy()
            grads[f"control[{k}].joint_f"] = c.joint_f.grad.numpy().copy()
    for name, arr in case.extra.items():
        grads[name] = arr.grad.numpy().copy()
    out["grads"] = grads
    return out


def _assert_bitwise(ref: dict, out: dict):
    assert out["loss"] == ref["loss"]
    assert np.array_equal(out["final_q"], ref["final_q"])
    assert np.array_equal(out["final_joint_q"], ref["final_joint_q"])
    assert out["step_count"] == ref["step_count"]
    assert ref["grads"].keys() == out["grads"].keys()
    differ = [n for n in ref["grads"] if not np.array_equal(ref["grads"][n], out["grads"][n])]
    assert not differ, differ


@pytest.mark.parametrize(
    "make, kwargs, nonzero",
    [
        (contact_case, {}, ["model.shape_mu", "model.shape_ke", "state.qd", "control[3].f_ext"]),
        (cloth_case, {"segment_length": 7}, ["model.tri_mu", "model.bend_ke", "state.q", "control[0].f_ext"]),
        (soft_case, {"segment_length": 5}, ["model.tet_mu", "model.shape_ke", "state.q", "control[7].act"]),
        (soft_case, {"levels": 2}, ["model.tet_lambda", "state.qd", "control[20].act"]),
        (cloth_case, {"levels": 2, "segment_length": 11}, ["model.tri_lambda", "state.qd"]),
        (contact_case, {"segment_length": 1}, ["model.shape_kd", "state.q"]),
        (contact_case, {"segment_length": 100}, ["model.shape_kd", "state.q"]),
        (implicit_cloth_case, {"segment_length": 5}, ["model.tri_lambda", "state.q", "control[0].f_ext"]),
        (rigid_case, {"segment_length": 5}, ["model.body_mass", "model.shape_mu", "model.joint_X_p",
                                             "state.joint_q", "state.joint_qd", "control[4].joint_f"]),
        (rigid_case, {"levels": 2}, ["model.body_inertia", "state.joint_qd"]),
    ],
    ids=["contact-default", "cloth-seg7", "soft-seg5", "soft-levels2", "cloth-levels2-seg11", "contact-seg1",
         "contact-seg-longer-than-T", "implicit-cloth-seg5", "rigid-seg5", "rigid-levels2"],
)
def test_checkpoint_matches_full_bitwise(make, kwargs, nonzero):
    """Loss, final state and every gradient are bitwise those of the full tape."""
    ref = _run(make, mode="full")
    for name in nonzero:  # the comparison is not between zeros
        assert np.abs(ref["grads"][name]).max() > 0.0, name
    _assert_bitwise(ref, _run(make, mode="checkpoint", **kwargs))


def test_controller_parameters_get_the_same_gradient():
    """A controller callback: its gain gradient is bitwise equal in both modes."""
    ref = _run(controller_case, mode="full")
    assert np.all(np.abs(ref["grads"]["gain"]) > 0.0)
    _assert_bitwise(ref, _run(controller_case, mode="checkpoint", segment_length=4))
    _assert_bitwise(ref, _run(controller_case, mode="checkpoint", levels=2))


@pytest.mark.parametrize("kwargs", [{"mode": "full"}, {"mode": "checkpoint", "segment_length": 4},
                                    {"mode": "checkpoint", "levels": 2}])
def test_solver_step_count_is_the_step_index_in_reruns(kwargs):
    """Health reports name steps by ``solver.step_count``, which each rollout restarts at 0
    (whatever it was before): every (re-)run of step k sees k, and the backward leaves T."""
    case = contact_case()
    seen = []

    def controller(k, state, control):
        seen.append((k, case.solver.step_count))

    case.solver.step_count = 100
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=controller, **kwargs)
    rollout.forward(case.state)
    rollout.backward()
    assert all(count == k for k, count in seen)
    assert len(seen) >= (case.steps if kwargs["mode"] == "full" else 2 * case.steps)
    assert case.solver.step_count == case.steps


@pytest.mark.parametrize("window", [1, 4, 7])
def test_truncation_agrees_between_modes(window):
    ref = _run(contact_case, mode="full", truncation_window=window)
    _assert_bitwise(ref, _run(contact_case, mode="checkpoint", truncation_window=window, segment_length=6))
    untruncated = _run(contact_case, mode="full")
    assert not np.array_equal(ref["grads"]["state.q"], untruncated["grads"]["state.q"])


def _free_particle(dtype=wp.float32):
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.3, 0.0, 0.0), mass=1.0)
    model = b.finalize(requires_grad=True, dtype=dtype)
    vec = model.vec3
    weight_q, weight_qd = wp.array([[0.0, 0.0, 1.0]], dtype=vec), wp.zeros(1, dtype=vec)
    return model, weight_q, weight_qd


def test_truncation_cuts_exactly_the_window():
    """Loss z_T of a free particle, T = 10, W = 4: the adjoint of state 8 from steps 8, 9 is
    cut, so dL/dx_0 = 0 and dL/dg_z = dt^2 (2 + 1) (steps 8 and 9 only)."""
    model, wq, wqd = _free_particle(wp.float64)
    steps, dt = 10, 0.01

    def loss_fn(k, state, loss):
        if k == steps:
            linear_state_loss(state, wq, wqd, loss=loss)

    for mode in ("full", "checkpoint"):
        model.gravity.grad.zero_()
        state = model.state(requires_grad=True)
        rollout = Rollout(wpsim.SemiImplicitSolver(model), steps, dt, loss_fn, mode=mode, truncation_window=4)
        rollout.forward(state)
        with pytest.warns(UserWarning, match="cuts every path to the loss from state0: "):
            rollout.backward()
        assert np.array_equal(state.particle_q.grad.numpy(), np.zeros((1, 3)))
        assert model.gravity.grad.numpy()[0, 2] == pytest.approx(3.0 * dt * dt, rel=1e-12)


def test_full_mode_gradient_matches_finite_differences():
    """float64 spring chain: the full-mode Rollout gradient of the spring stiffness along a
    direction matches central differences (``check_gradient`` on the same rollout as one tape),
    and equals that one-tape gradient bitwise (same launches, same order)."""
    b = wpsim.ModelBuilder()
    ids = [b.add_particle((0.0, 0.0, 1.0), mass=0.0)]
    for k in range(3):
        ids.append(b.add_particle((0.25 * (k + 1), 0.05 * k, 1.0 - 0.1 * k), (0.1 * k, 0.3, -0.2), mass=0.2))
    b.add_springs([(ids[k], ids[k + 1]) for k in range(3)], ke=[200.0, 150.0, 100.0], kd=0.3)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    steps, dt = 30, 2e-3
    rng = np.random.default_rng(5)
    wq = wp.array(rng.standard_normal((4, 3)), dtype=wp.vec3d)
    wqd = wp.array(rng.standard_normal((4, 3)), dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == steps:
            linear_state_loss(state, wq, wqd, loss=loss)

    direction = rng.standard_normal(3) * 100.0
    state = model.state()
    result = wpsim.check_gradient(
        lambda: linear_state_loss(wpsim.simulate(solver, state, steps, dt), wq, wqd), model.spring_ke,
        direction=direction, eps=1e-6, tol=1e-6,
    )
    assert result.ok, result
    _, (one_tape,) = wpsim.diff.tape_gradient(
        lambda: linear_state_loss(wpsim.simulate(solver, state, steps, dt), wq, wqd), [model.spring_ke])

    model.spring_ke.grad.zero_()
    rollout = Rollout(solver, steps, dt, loss_fn, mode="full")
    rollout.forward(model.state(requires_grad=True))
    rollout.backward()
    grad = model.spring_ke.grad.numpy()
    assert np.array_equal(grad, one_tape)
    assert float(grad @ direction) == pytest.approx(result.fd, rel=1e-6)


def _free_particle_rollout(**kwargs):
    model, wq, wqd = _free_particle()

    def loss_fn(k, state, loss):
        if k == 5:
            linear_state_loss(state, wq, wqd, loss=loss)

    args = {"solver": wpsim.SemiImplicitSolver(model), "num_steps": 5, "dt": 0.01, "loss_fn": loss_fn}
    args.update(kwargs)
    return model, Rollout(**args)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_steps": 0}, "num_steps"),
        ({"num_steps": 2.5}, "num_steps"),
        ({"segment_length": 0}, "segment_length"),
        ({"levels": 3}, "levels"),
        ({"mode": "tape"}, "unknown mode"),
        ({"truncation_window": 0}, "truncation_window"),
        ({"adjoint_clip": -1.0}, "adjoint_clip"),
        ({"dt": 0.0}, "dt"),
        ({"loss_fn": None}, "loss_fn"),
        ({"control": "forces"}, "control must be"),
        ({"control": [None] * 3}, "3 controls for 5 steps"),
        ({"control": [1] * 5}, "not a Control"),
        ({"solver": object()}, "solver has no attribute"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _free_particle_rollout(**kwargs)


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_usage_errors(mode):
    model, rollout = _free_particle_rollout(mode=mode)
    with pytest.raises(ValueError, match="needs a forward"):
        rollout.backward()
    with pytest.raises(ValueError, match="no forward"):
        rollout.final_state
    with pytest.raises(ValueError, match="must be a State"):
        rollout.forward(model.particle_q)
    rollout.forward(model.state(requires_grad=False))
    assert not rollout.final_state.particle_q.requires_grad
    with pytest.raises(ValueError, match="without requires_grad"):
        rollout.backward()
    rollout.forward(model.state(requires_grad=True))
    with pytest.raises(ValueError, match="track needs"):
        rollout.backward(track={"gravity": model.gravity})
    rollout.backward()
    with pytest.raises(ValueError, match="one backward per forward"):
        rollout.backward()


def test_forward_value_and_final_state_match_simulate():
    """The loss is the sum of the loss terms; the final state is the simulated one."""
    model, rollout = _free_particle_rollout(mode="checkpoint", segment_length=2)
    value = rollout.forward(model.state(requires_grad=True))
    final = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 5, 0.01)
    assert np.array_equal(rollout.final_state.particle_q.numpy(), final.particle_q.numpy())
    assert value == final.particle_q.numpy()[0, 2] == rollout.loss.numpy()[0]


def test_modified_parameter_is_detected_in_checkpoint_mode():
    """Changing a model parameter between forward and backward breaks the re-run."""
    case = contact_case()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control, mode="checkpoint")
    rollout.forward(case.state)
    case.model.shape_mu.fill_(0.1)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        rollout.backward()


def test_zero_grad_clears_accumulated_gradients():
    """Gradients accumulate across backward passes like wp.Tape; zero_grad resets them."""
    case = contact_case()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control)
    rollout.forward(case.state)
    rollout.backward()
    once = case.model.shape_mu.grad.numpy().copy()
    rollout.forward(case.state)
    rollout.backward()
    assert np.allclose(case.model.shape_mu.grad.numpy(), 2.0 * once, rtol=1e-6)
    rollout.zero_grad()
    rollout.forward(case.state)
    rollout.backward()
    assert np.array_equal(case.model.shape_mu.grad.numpy(), once)
    assert np.array_equal(case.control[0].particle_f_ext.grad.numpy(), _run(contact_case)["grads"]["control[0].f_ext"])


def test_quick_checkpoint_suite():
    """Each (T, mode, levels) in its own process: records in the shared format; checkpointing
    needs less peak memory than the full tape (memory, not time)."""
    records = bench_checkpoint.checkpoint_suite("cpu", quick=True)
    _, horizons = bench_checkpoint.suite_config(True)
    assert len(records) == 7 * len(horizons)
    memory, ratios = {}, {}
    for r in records:
        assert r["suite"] == "checkpoint" and r["metric"] in bench.METRIC_UNITS and r["value"] > 0.0
        p = r["params"]
        assert p["T"] in horizons and p["device"] == "cpu" and p["precision"] == "float32" and p["particles"] == 25
        if r["metric"] == "memory_ratio":
            ratios[p["T"]] = r["value"]
            continue
        assert (p["mode"], p["levels"]) in (("full", None), ("checkpoint", 1), ("checkpoint", 2))
        assert p["max_rss_bytes"] > 0
        if r["metric"] == "peak_memory_bytes":
            memory[p["T"], p["mode"], p["levels"]] = r["value"]
    for steps in horizons:
        assert ratios[steps] == pytest.approx(memory[steps, "full", None] / memory[steps, "checkpoint", 1])
        assert memory[steps, "checkpoint", 1] < memory[steps, "full", None]
        assert memory[steps, "checkpoint", 2] < memory[steps, "full", None]


@pytest.mark.parametrize("change", ["state0", "first control", "middle control"])
def test_changes_in_any_segment_are_detected(change):
    """Every re-run segment must end where the forward went, and state0 must be unchanged."""
    case = contact_case()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control, mode="checkpoint",
                      segment_length=5)
    rollout.forward(case.state)
    if change == "state0":
        case.state.particle_q.assign(case.state.particle_q.numpy() + 1e-3)
    else:
        control = case.control[0 if change == "first control" else 12]
        control.particle_f_ext.assign(control.particle_f_ext.numpy() * 2.0)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        rollout.backward()


def test_failed_forward_cannot_be_backpropagated():
    case = contact_case()
    calls = []

    def loss_fn(k, state, loss):
        calls.append(k)
        if len(calls) > case.steps + 5:
            raise RuntimeError("loss failed")
        case.loss_fn(k, state, loss)

    rollout = Rollout(case.solver, case.steps, case.dt, loss_fn, control=case.control, mode="checkpoint")
    rollout.forward(case.state)
    with pytest.raises(RuntimeError, match="loss failed"):
        rollout.forward(case.state)
    with pytest.raises(ValueError, match="needs a forward"):
        rollout.backward()


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_model_without_particles(mode):
    model = wpsim.ModelBuilder().finalize(requires_grad=True)
    rollout = Rollout(wpsim.SemiImplicitSolver(model), 4, 1e-3, lambda k, state, loss: None, mode=mode)
    assert rollout.forward(model.state()) == 0.0
    rollout.backward()


@pytest.mark.parametrize("window", [3, 7])
def test_truncation_warns_exactly_of_the_paths_it_cuts(window):
    """Loss terms at every 4th state (and T = 30), one Control per step: the warning names
    state0 and exactly the steps whose control gradient the truncation made exactly 0."""
    case = contact_case()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control, mode="checkpoint",
                      truncation_window=window, segment_length=6)
    state = case.state
    rollout.forward(state)
    with pytest.warns(UserWarning, match=f"truncation_window={window} cuts every path") as record:
        rollout.backward()
    message = str(record[0].message)
    zero = [k for k, c in enumerate(case.control) if not np.any(c.particle_f_ext.grad.numpy())]
    named = message.split("the controls of steps ")[1].split(":")[0]
    steps = [k for part in named.split(", ") for k in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)]
    assert zero and steps == zero
    assert ("state0" in message) == (not np.any(state.particle_q.grad.numpy()))
    rollout.forward(state)
    rollout.backward()  # no second warning
    assert len(rollout.warnings) == 1


def test_truncation_that_cuts_nothing_does_not_warn():
    """A running cost on every state: every parameter keeps a path to the loss."""
    case = soft_case()
    rollout = Rollout(case.solver, case.steps, case.dt, case.loss_fn, control=case.control, truncation_window=5)
    rollout.forward(case.state)
    rollout.backward()
    assert rollout.warnings == []


def _arm_tip_loss(model, tip, target, fk_first):
    def loss_fn(k, state, loss):
        if fk_first:  # the formerly documented way: a no-op on the poses the rollout computes
            wpsim.eval_fk(model, state)
        body_position_loss(state, [tip], target, loss)

    return loss_fn


def _arm_tip_truth(model, solver, qd0, target, steps, dt) -> float:
    """sum_k |tip(k) - target|^2 over states 0..T from poses of ``wpsim.eval_fk``."""
    state = model.state()
    state.joint_qd.assign(qd0)
    tips = [wpsim.eval_fk(model, s).body_q.numpy()[-1, :3] for s in wpsim.simulate(solver, state, steps, dt,
                                                                                     keep_states=True)]
    return float(((np.array(tips) - target.numpy()) ** 2).sum())


@pytest.mark.parametrize("fk_first", [False, True])
@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_a_loss_on_body_poses_sees_the_poses_of_the_joint_state(mode, fk_first):
    """Body poses a loss reads in a Rollout were those of whatever filled the state's arrays
    last (loss 0 gradient exactly 0); now its value is that of eval_fk poses and its gradient
    matches central differences."""
    model = import_mjcf(ASSETS / "arm_2link.xml")[0].finalize(device="cpu", dtype=wp.float64, requires_grad=True)
    solver, tip, steps, dt = wpsim.SemiImplicitSolver(model), model.body_count - 1, 12, 1.0e-2
    target = wp.array([[0.1, 0.2, 1.0]], dtype=wp.vec3d)
    qd0 = np.array([1.5, -2.0])
    state0 = model.state(requires_grad=True)
    state0.joint_qd.assign(qd0)
    rollout = Rollout(solver, steps, dt, _arm_tip_loss(model, tip, target, fk_first), mode=mode, segment_length=5)
    loss = rollout.forward(state0)
    rollout.backward()
    assert loss == pytest.approx(_arm_tip_truth(model, solver, qd0, target, steps, dt), rel=1e-12)
    eps, fd = 1.0e-6, []
    for i in range(2):
        step = np.eye(2)[i] * eps
        fd.append((_arm_tip_truth(model, solver, qd0 + step, target, steps, dt)
                   - _arm_tip_truth(model, solver, qd0 - step, target, steps, dt)) / (2 * eps))
    np.testing.assert_allclose(state0.joint_qd.grad.numpy(), fd, rtol=1e-6)


def test_a_controller_sees_the_poses_of_the_joint_state():
    model = import_mjcf(ASSETS / "arm_2link.xml")[0].finalize(device="cpu", dtype=wp.float64, requires_grad=True)
    seen = []
    rollout = Rollout(wpsim.SemiImplicitSolver(model), 3, 1.0e-2, lambda k, state, loss: None,
                      control=lambda k, state, control: seen.append(state.body_q.numpy().copy()), mode="full")
    state0 = model.state(requires_grad=True)
    state0.joint_qd.assign([1.5, -2.0])
    rollout.forward(state0)
    states = wpsim.simulate(wpsim.SemiImplicitSolver(model), state0, 3, 1.0e-2, keep_states=True)
    np.testing.assert_array_equal(seen, [wpsim.eval_fk(model, s).body_q.numpy() for s in states[:3]])
