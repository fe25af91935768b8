"""The PyTorch bridge: gradcheck of steps and rollouts (particles, soft body in contact,
articulation, rigid body in soft contact) in float64, agreement of the step loop with the
rollout and of the world layout with the flat one, memory release, bad input."""

import gc
import weakref

import numpy as np
import pytest
import warp as wp

torch = pytest.importorskip("torch")

import wpsim  # noqa: E402
from wpsim.io.mjcf import import_mjcf  # noqa: E402
from wpsim.kernels import losses  # noqa: E402
from wpsim.kernels.generic import for_precision  # noqa: E402
from wpsim.opt.torch import TorchRollout, TorchStep  # noqa: E402
from wpsim.solvers import SoftContactOptions  # noqa: E402

F64 = torch.float64
CHECK = dict(eps=1e-6, atol=1e-8, rtol=1e-4)


def spring_pair(dtype=wp.float64, requires_grad=True):
    b = wpsim.ModelBuilder()
    i = b.add_particle((0.0, 0.0, 1.0), (0.1, 0.0, 0.2), mass=1.0)
    j = b.add_particle((0.5, 0.1, 1.0), (0.0, 0.0, 0.0), mass=2.0)
    b.add_spring(i, j, ke=50.0, kd=0.5)
    return b.finalize(requires_grad=requires_grad, dtype=dtype)


def resting_soft_cube():
    """A 1-cell soft cube (6 tets) whose bottom vertices press into a frictional ground."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=1.0, mu=0.5)
    b.add_soft_grid((0.0, 0.0, 0.0), dim_x=1, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=0.5, fiber=(1.0, 0.0, 0.0),
                    radius=0.005)
    return b.finalize(requires_grad=True, dtype=wp.float64)


def cartpole(worlds=1, requires_grad=True):
    builder, _ = import_mjcf("assets/cartpole.xml")
    if worlds > 1:
        builder = builder.replicated(worlds)
    return builder.finalize(requires_grad=requires_grad, dtype=wp.float64)


def sliding_box():
    """A 0.2 m box settled into the ground and sliding along x (soft-constraint contact)."""
    b = wpsim.ModelBuilder()
    b.add_shape_plane(mu=0.4)
    box = b.add_body()
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.4)
    b.add_joint_free(box, pos=(0.0, 0.0, 0.1 - 4.0e-4), lin_vel=(0.5, 0.0, 0.0))
    return b.finalize(requires_grad=True, dtype=wp.float64)


def contact_solver(model):
    return wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(tolerance=1e-13))


def leaf(values):
    return torch.as_tensor(np.asarray(values), dtype=F64).clone().requires_grad_(True)


def run_steps(step, state, steps, control=None, parameters=None):
    for _ in range(steps):
        state = step(state, control, parameters)
    return state


# ---------------------------------------------------------------------- gradcheck of a step
def test_step_gradcheck_particles_with_spring():
    model = spring_pair()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    s0 = step.initial_state()
    q, qd = leaf(s0["particle_q"]), leaf(s0["particle_qd"])
    force = leaf(np.full((2, 3), 0.3))
    scale = leaf([1.0])
    ke = torch.tensor(model.spring_ke.numpy(), dtype=F64)

    def final(q, qd, force, scale):
        s = run_steps(step, {"particle_q": q, "particle_qd": qd}, 3, {"particle_f_ext": force},
                      {"spring_ke": ke * scale})
        return s["particle_q"], s["particle_qd"]

    assert torch.autograd.gradcheck(final, (q, qd, force, scale), **CHECK)


def test_a_negative_spring_stiffness_is_refused_naming_the_parameter():
    model = spring_pair()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    with pytest.raises(ValueError, match=r"parameters\['spring_ke'\] is negative at index \(0,\)"):  # was stepped
        step(step.initial_state(), None, {"spring_ke": -torch.tensor(model.spring_ke.numpy(), dtype=F64)})


def test_step_gradcheck_soft_body_in_contact():
    model = resting_soft_cube()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 1e-3)
    s0 = step.initial_state()
    q = leaf(s0["particle_q"])
    activation = leaf(np.linspace(-0.1, 0.2, model.tet_count))
    scale = leaf([1.0])
    mu = torch.tensor(model.tet_mu.numpy(), dtype=F64)

    def final(q, activation, scale):
        s = run_steps(step, {"particle_q": q, "particle_qd": s0["particle_qd"]}, 3,
                      {"tet_activation": activation}, {"tet_mu": mu * scale})
        return s["particle_q"], s["particle_qd"]

    assert torch.autograd.gradcheck(final, (q, activation, scale), **CHECK)


def test_step_gradcheck_articulation_in_worlds():
    model = cartpole(worlds=2)
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01, worlds=2)
    s0 = step.initial_state()
    q = s0["joint_q"].clone()
    q[:, 1] = torch.tensor([0.3, -2.0], dtype=F64)
    q.requires_grad_(True)
    force = leaf([[1.0, 0.0], [-0.5, 0.1]])
    mass = leaf(model.body_mass.numpy())

    def final(q, force, mass):
        s = run_steps(step, {"joint_q": q, "joint_qd": s0["joint_qd"]}, 4, {"joint_f": force}, {"body_mass": mass})
        return s["joint_q"], s["joint_qd"]

    assert torch.autograd.gradcheck(final, (q, force, mass), **CHECK)


def test_step_gradcheck_rigid_body_in_soft_contact():
    model = sliding_box()
    step = TorchStep(contact_solver(model), 1e-3)
    s0 = step.initial_state()
    qd = leaf(s0["joint_qd"])
    wrench = leaf([[0.0, 0.0, 0.1, 0.5, -0.2, 0.0]])
    scale = leaf([1.0])
    mass = torch.tensor(model.body_mass.numpy(), dtype=F64)

    def final(qd, wrench, scale):
        s = run_steps(step, {"joint_q": s0["joint_q"], "joint_qd": qd}, 3, {"body_f_ext": wrench},
                      {"body_mass": mass * scale})
        return s["joint_q"], s["joint_qd"]

    assert torch.autograd.gradcheck(final, (qd, wrench, scale), **CHECK)


# ---------------------------------------------------------------------- gradcheck of a rollout
@pytest.mark.parametrize("mode", ["checkpoint", "full"])
def test_rollout_gradcheck_particle_trajectory(mode):
    model = spring_pair()
    steps = 6
    rollout = TorchRollout(wpsim.SemiImplicitSolver(model), steps, 0.01, mode=mode, segment_length=2)
    s0 = TorchStep(rollout.solver, 0.01).initial_state()
    qd = leaf(s0["particle_qd"])
    forces = leaf(np.random.default_rng(0).normal(size=(steps, 2, 3)))
    scale = leaf([1.0])
    ke = torch.tensor(model.spring_ke.numpy(), dtype=F64)

    def trajectory(qd, forces, scale):
        path = rollout({"particle_q": s0["particle_q"], "particle_qd": qd}, {"particle_f_ext": forces},
                       {"spring_ke": ke * scale})
        return path["particle_q"], path["particle_qd"]

    assert torch.autograd.gradcheck(trajectory, (qd, forces, scale), **CHECK)


def test_rollout_gradcheck_rigid_body_in_soft_contact():
    model = sliding_box()
    steps = 6
    rollout = TorchRollout(contact_solver(model), steps, 1e-3, segment_length=3)
    s0 = TorchStep(rollout.solver, 1e-3).initial_state()
    qd = leaf(s0["joint_qd"])
    wrenches = leaf(np.tile([0.0, 0.0, 0.1, 0.5, -0.2, 0.0], (steps, 1, 1)))

    def trajectory(qd, wrenches):
        path = rollout({"joint_q": s0["joint_q"], "joint_qd": qd}, {"body_f_ext": wrenches})
        return path["joint_q"][-1], path["joint_qd"][-1]

    assert torch.autograd.gradcheck(trajectory, (qd, wrenches), **CHECK)


def height_loss(k, state, loss):
    """Sum over particles of the height weighted by (k + 1): a Warp loss of every state."""
    count = state.particle_q.shape[0]
    weights = wp.full(count, wp.vec3d(0.0, 0.0, float(k + 1)), dtype=wp.vec3d, device=state.particle_q.device)
    zeros = wp.zeros(count, dtype=wp.vec3d, device=state.particle_q.device)
    wp.launch(for_precision(losses.linear_state_loss, wp.float64), dim=count,
              inputs=[state.particle_q, state.particle_qd, weights, zeros], outputs=[loss],
              device=state.particle_q.device)


def test_rollout_gradcheck_soft_body_with_a_warp_loss():
    model = resting_soft_cube()
    steps = 8
    rollout = TorchRollout(wpsim.SemiImplicitSolver(model), steps, 1e-3, loss_fn=height_loss)
    s0 = TorchStep(rollout.solver, 1e-3).initial_state()
    activations = leaf(np.full((steps, model.tet_count), 0.1))
    scale = leaf([1.0])
    mu = torch.tensor(model.tet_mu.numpy(), dtype=F64)

    def loss(activations, scale):
        return rollout(s0, {"tet_activation": activations}, {"tet_mu": mu * scale})

    assert torch.autograd.gradcheck(loss, (activations, scale), **CHECK)
    reference = wpsim.Rollout(rollout.solver, steps, 1e-3, height_loss, control=None)
    with torch.no_grad():
        assert float(rollout(s0)[0]) == pytest.approx(reference.forward(model.state()), rel=1e-12)


# ---------------------------------------------------------------------- consistency
def test_step_loop_reproduces_the_rollout_bitwise():
    model = cartpole(worlds=3)
    solver = wpsim.SemiImplicitSolver(model)
    step, steps = TorchStep(solver, 0.01, worlds=3), 20
    rollout = TorchRollout(solver, steps, 0.01, worlds=3)
    s0 = step.initial_state()
    s0["joint_q"][:, 1] = torch.tensor([0.5, 1.5, -3.0], dtype=F64)
    forces = torch.as_tensor(np.random.default_rng(1).normal(size=(steps, 3, 2)), dtype=F64)
    path = rollout(s0, {"joint_f": forces})
    state = s0
    for k in range(steps):
        state = step(state, {"joint_f": forces[k]})
        assert torch.equal(state["joint_q"], path["joint_q"][k + 1])
        assert torch.equal(state["joint_qd"], path["joint_qd"][k + 1])


def test_world_layout_equals_flat_and_worlds_do_not_mix():
    model = cartpole(worlds=2)
    solver = wpsim.SemiImplicitSolver(model)
    by_world, flat = TorchStep(solver, 0.01, worlds=2), TorchStep(solver, 0.01)
    s0 = by_world.initial_state()
    s0["joint_q"][:, 1] = torch.tensor([0.4, -0.7], dtype=F64)
    force = leaf([[0.5, 0.0], [-1.0, 0.2]])
    a = run_steps(by_world, s0, 5, {"joint_f": force})
    flat_state = {name: t.reshape(-1) for name, t in s0.items()}
    b = run_steps(flat, flat_state, 5, {"joint_f": force.reshape(-1)})
    assert torch.equal(a["joint_q"].reshape(-1), b["joint_q"])
    (grad,) = torch.autograd.grad(a["joint_q"][0].sum(), force)
    assert torch.count_nonzero(grad[0]) > 0
    assert torch.count_nonzero(grad[1]) == 0  # world 1's forces do not reach world 0


def test_parameters_are_written_into_the_model():
    model = cartpole()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    mass = torch.tensor([2.0, 0.5], dtype=F64)
    with torch.no_grad():
        step(step.initial_state(), None, {"body_mass": mass})
    np.testing.assert_array_equal(model.body_mass.numpy(), mass.numpy())


def test_parameters_changed_between_steps_keep_each_steps_gradient():
    """A parameter that takes other values in later steps of one graph: each step's
    backward uses its own values, as a loop of plain torch operations would."""
    model = spring_pair()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    s0 = step.initial_state()
    scale = leaf([1.0])
    ke = torch.tensor(model.spring_ke.numpy(), dtype=F64)

    def final(scale):
        s = s0
        for k in range(4):
            s = step(s, None, {"spring_ke": ke * scale * (1.0 + k)})
        return s["particle_q"]

    assert torch.autograd.gradcheck(final, (scale,), **CHECK)


def test_a_released_graph_frees_its_tapes():
    model = cartpole()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    force = leaf([0.5, 0.0])
    state = run_steps(step, step.initial_state(), 3, {"joint_f": force})
    probe = weakref.ref(state["joint_q"].grad_fn)
    tape = weakref.ref(state["joint_q"].grad_fn.tape)
    state["joint_q"].sum().backward()
    del state
    gc.collect()
    assert probe() is None and tape() is None


def test_an_input_changed_in_place_after_the_forward_is_refused():
    model = cartpole()
    step = TorchStep(wpsim.SemiImplicitSolver(model), 0.01)
    force = leaf([0.5, 0.0])
    control = force * 1.0
    out = step(step.initial_state(), {"joint_f": control})
    control.add_(1.0)
    with pytest.raises(RuntimeError, match="inplace"):
        out["joint_q"].sum().backward()


# ---------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def cart_step():
    model = cartpole(worlds=2)
    return TorchStep(wpsim.SemiImplicitSolver(model), 0.01, worlds=2)


@pytest.mark.parametrize("change, message", [
    (lambda s: {**s, "joint_q": s["joint_q"].float()}, "dtype torch.float32"),
    (lambda s: {**s, "joint_q": torch.zeros(2, 2, dtype=F64, device="meta")}, "on device meta"),
    (lambda s: {**s, "joint_q": s["joint_q"].reshape(-1)}, r"shape \(4,\), expected \(2, 2\)"),
    (lambda s: {**s, "joint_q": s["joint_q"].t().contiguous().t()}, "not contiguous"),
    (lambda s: {"joint_q": s["joint_q"]}, "missing the field 'joint_qd'"),
    (lambda s: {**s, "body_q": s["joint_q"]}, "unknown state field 'body_q'"),
    (lambda s: {**s, "joint_qd": s["joint_qd"].index_fill(1, torch.tensor([1]), float("nan"))},
     r"state\['joint_qd'\] is not finite at index \(0, 1\) \(world 0\)"),
    (lambda s: [s], "state must be a dict"),
])
def test_bad_states_are_named(cart_step, change, message):
    with pytest.raises(ValueError, match=message):
        cart_step(change(cart_step.initial_state()))


def test_bad_controls_and_parameters_are_named(cart_step):
    s0 = cart_step.initial_state()
    with pytest.raises(ValueError, match="unknown control field 'joint_force'"):
        cart_step(s0, {"joint_force": torch.zeros(2, 2, dtype=F64)})
    with pytest.raises(ValueError, match=r"control\['joint_f'\] is not finite at index \(1, 0\) \(world 1\)"):
        cart_step(s0, {"joint_f": torch.tensor([[0.0, 0.0], [float("inf"), 0.0]], dtype=F64)})
    with pytest.raises(ValueError, match="unknown differentiable Model field 'joint_type'"):
        cart_step(s0, None, {"joint_type": torch.zeros(4, dtype=F64)})
    with pytest.raises(ValueError, match=r"parameters\['body_mass'\] has shape \(3,\)"):
        cart_step(s0, None, {"body_mass": torch.ones(3, dtype=F64)})
    with pytest.raises(ValueError, match=r"parameters\['body_mass'\] is negative at index \(0,\): -1\.0"):
        cart_step(s0, None, {"body_mass": torch.tensor([-1.0, 0.2, 1.0, 0.2], dtype=F64)})  # was stepped
    frozen = TorchStep(wpsim.SemiImplicitSolver(cartpole(requires_grad=False)), 0.01)
    with pytest.raises(ValueError, match="finalized without gradients"):
        frozen(frozen.initial_state(), None, {"body_mass": leaf([1.0, 0.2])})
    with pytest.raises(ValueError, match="do not split into 3 worlds"):
        TorchStep(cart_step.solver, 0.01, worlds=3)
    with pytest.raises(ValueError, match="dt must be a positive"):
        TorchStep(cart_step.solver, 0.0)
    with pytest.raises(ValueError, match=r"controls\['joint_f'\] has shape \(2, 2\), expected \(4, 2, 2\)"):
        TorchRollout(cart_step.solver, 4, 0.01, worlds=2)(s0, {"joint_f": torch.zeros(2, 2, dtype=F64)})


def test_a_blown_up_world_is_reported_and_its_state_refused():
    model = cartpole(worlds=2)
    solver = wpsim.SemiImplicitSolver(model)
    step = TorchStep(solver, 0.01, worlds=2)
    force = torch.tensor([[0.0, 0.0], [1e30, 0.0]], dtype=F64)
    with torch.no_grad():
        state = step(step.initial_state(), {"joint_f": force})
        report = step.health()
        assert list(report.fault_steps) == [1]
        with pytest.raises(ValueError, match=r"\(world 1\)"):
            run_steps(step, state, 3)
