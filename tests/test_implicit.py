"""Backward-Euler solver: closed forms, dissipation, stability beyond the explicit limit,
and its implicit (IFT) adjoint against unrolled differentiation of the same iterations.

Gradients of every parameter family against central finite differences are in the audit
(``tests/test_gradients.py`` runs the "implicit Euler: ..." cases).
"""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.apps.gradient_audit import _chain_scene, _cloth_scene, _contact_scene, _soft_scene
from wpsim.core.geometry import grid_points
from wpsim.diff.diagnostics import energy_report, tet_volume_ratios
from wpsim.diff.losses import linear_state_loss


def _ping_pong(solver, state, steps, dt, observe=None):
    """Unrecorded steps alternating two states; returns the final state."""
    model = solver.model
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    a.assign(state)
    for k in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
        if observe is not None:
            observe(k + 1, a, solver)
    return a


def test_free_fall_matches_the_backward_euler_closed_form():
    """Linear dynamics: v_k = v0 + k dt g, x_k = x_{k-1} + dt v_k; Newton converges in at most
    two iterations (the first is exact up to the finite-difference Jacobian products) to the
    residual's rounding floor."""
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 10.0), (1.0, -0.5, 2.0), mass=0.3)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.ImplicitEulerSolver(model, tolerance=1e-13)
    dt, steps = 0.05, 20
    final = _ping_pong(solver, model.state(), steps, dt)
    g = np.array([0.0, 0.0, -9.81])
    v0, x0 = np.array([1.0, -0.5, 2.0]), np.array([0.0, 0.0, 10.0])
    v = v0 + steps * dt * g
    x = x0 + dt * sum(v0 + k * dt * g for k in range(1, steps + 1))
    # 10 m from the origin the rounding floor of the residual is 1000 eps |x| / dt = 4e-11 m/s
    np.testing.assert_allclose(final.particle_qd.numpy()[0], v, rtol=0, atol=1e-10)
    np.testing.assert_allclose(final.particle_q.numpy()[0], x, rtol=0, atol=1e-10)
    assert solver.last_solve.newton_iterations <= 2 and solver.last_solve.converged


def test_undamped_spring_loses_energy_monotonically():
    """Backward Euler dissipates: an undamped spring oscillator at a large step never gains
    energy, and the amplitude decays."""
    b = wpsim.ModelBuilder(gravity=0.0)
    anchor = b.add_particle((0.0, 0.0, 0.0), mass=0.0)
    tip = b.add_particle((1.2, 0.0, 0.0), mass=1.0)
    b.add_spring(anchor, tip, ke=100.0, kd=0.0, rest_length=1.0)
    model = b.finalize(dtype=wp.float64)
    energies = []

    def observe(k, state, solver):
        assert solver.last_solve.converged
        energies.append(float(energy_report(model, state)["total"][0]))

    _ping_pong(wpsim.ImplicitEulerSolver(model), model.state(), 60, 0.05, observe)
    e0 = 0.5 * 100.0 * 0.2**2
    assert energies[0] < e0
    assert np.all(np.diff(energies) <= 1e-12 * e0)
    assert energies[-1] < 0.5 * e0


def _stiff_cantilever():
    """A 3x1x1-cell block (E = 1 MPa, 2 cm cells) clamped at x = 0, sagging under gravity."""
    b = wpsim.ModelBuilder()
    clamped = np.flatnonzero(grid_points((4, 2, 2), (1.0, 1.0, 1.0))[:, 0] == 0.0)
    b.add_soft_grid(pos=(0.0, 0.0, 1.0), dim_x=3, dim_y=1, dim_z=1, cell_x=0.02, cell_y=0.02, cell_z=0.02,
                    density=1000.0, young_modulus=1.0e6, poisson_ratio=0.3, kd=2.0, fixed=clamped)
    return b.finalize(dtype=wp.float64)


def test_stable_at_ten_times_the_explicit_stability_limit():
    """The semi-implicit solver is stable at dt = 3e-4 s and blows up at 4e-4 s on the stiff
    block; the implicit solver at 4e-3 s (10x the unstable step) settles, converges every step,
    and rests where the explicit run oscillates around."""
    model = _stiff_cantilever()
    state = model.state(requires_grad=False)
    explicit = wpsim.SemiImplicitSolver(model)
    explicit_final = _ping_pong(explicit, state, 333, 3e-4)
    assert explicit.health().ok
    unstable = wpsim.SemiImplicitSolver(model)
    _ping_pong(unstable, state, 250, 4e-4)
    assert not unstable.health().ok, "the explicit step no longer blows up: raise the step of this test"

    implicit = wpsim.ImplicitEulerSolver(model, krylov_tolerance=1e-2)
    converged = []
    final = _ping_pong(implicit, state, 25, 4e-3, lambda k, s, solver: converged.append(solver.last_solve.converged))
    assert implicit.health().ok and all(converged)
    assert np.abs(final.particle_qd.numpy()).max() < 1e-2
    assert tet_volume_ratios(model, final).min() > 0.9
    np.testing.assert_allclose(final.particle_q.numpy(), explicit_final.particle_q.numpy(), atol=1e-3)


SCENES = {"chain": _chain_scene, "cloth": _cloth_scene, "soft": lambda: _soft_scene((1.0, 0.0, 0.0)),
          "quadratic soft": lambda: _soft_scene((1.0, 0.0, 0.0), order=2), "ground": lambda: _contact_scene("ground")}
PARAMS = {"chain": ["state.particle_qd", "model.spring_ke", "model.particle_mass", "control.particle_f_ext"],
          "cloth": ["state.particle_q", "model.tri_mu", "model.bend_ke"],
          "soft": ["model.tet_mu", "model.tet_kd", "control.tet_activation"],
          "quadratic soft": ["model.tet_mu", "model.tet_kd", "control.tet_activation"],
          "ground": ["state.particle_qd", "model.shape_mu", "model.shape_ke"]}


def _gradients(scene_name, adjoint, steps=4, **options):
    """Loss and gradients of PARAMS[scene_name] after ``steps`` implicit steps."""
    scene = SCENES[scene_name]()
    scene.solver = wpsim.ImplicitEulerSolver(scene.model, adjoint=adjoint, tolerance=1e-12, krylov_tolerance=1e-12,
                                             **options)
    tape = wp.Tape()
    with tape:
        final = wpsim.simulate(scene.solver, scene.state, steps, 5.0 * scene.dt, scene.control)
        loss = linear_state_loss(final, scene.weight_q, scene.weight_qd)
    tape.backward(loss)
    grads = {p: scene.array(p).grad.numpy().copy() for p in PARAMS[scene_name]}
    custom = sum(callable(entry) for entry in tape.launches)
    return loss.numpy()[0], final.particle_q.numpy(), grads, (custom, len(tape.launches))


@pytest.mark.parametrize("scene_name", sorted(SCENES))
def test_implicit_adjoint_matches_unrolled_differentiation(scene_name):
    """Same forward bitwise; with tight Newton and Krylov tolerances, IFT gradients equal
    unrolled AD of the converged iterations to 1e-7."""
    loss_i, q_i, grads_i, records_i = _gradients(scene_name, "implicit")
    loss_u, q_u, grads_u, records_u = _gradients(scene_name, "unrolled")
    assert loss_i == loss_u and np.array_equal(q_i, q_u)
    assert records_i[0] == 4 and records_u[0] == 0  # one custom backward per step
    assert records_u[1] > 20 * records_i[1]
    for name in grads_i:
        scale = np.abs(grads_u[name]).max()
        assert scale > 0.0, name
        assert np.abs(grads_i[name] - grads_u[name]).max() <= 1e-7 * scale, name


def _soft_block_speed_loss(solver, state):
    """Loss of one step of a free soft block: squared distance of the end positions to 0."""
    def loss():
        following = solver.model.state()
        solver.step(state, following, None, 5e-3)
        return wpsim.diff.losses.squared_distance(following.particle_q, wp.zeros_like(following.particle_q))

    return loss


def test_implicit_adjoint_is_exact_even_with_loose_inner_solves():
    """Newton directions from only 4 BiCGSTAB iterations still converge (more Newton
    iterations); the IFT adjoint only needs the converged state, so it matches central
    differences, while unrolled AD through those truncated Krylov solves is far off (the
    derivative of the Krylov scalars does not vanish at convergence)."""
    b = wpsim.ModelBuilder()
    b.add_soft_grid(pos=(0.0, 0.0, 0.01), vel=(0.3, 0.0, -0.5), dim_x=2, dim_y=2, dim_z=2, cell_x=0.02,
                    cell_y=0.02, cell_z=0.02, density=1000.0, young_modulus=1.0e5, poisson_ratio=0.3, kd=1.0)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    state = model.state()
    errors = {}
    for adjoint in ("implicit", "unrolled"):
        solver = wpsim.ImplicitEulerSolver(model, adjoint=adjoint, krylov_iterations=4, tolerance=1e-13)
        result = wpsim.check_gradient(_soft_block_speed_loss(solver, state), state.particle_qd, eps=[1e-4, 1e-5])
        assert solver.last_solve.converged
        errors[adjoint] = result.rel_error
    assert errors["implicit"] <= 1e-6
    assert errors["unrolled"] > 0.1


def test_tape_zero_clears_the_gradients_the_custom_backward_wrote():
    scene = _chain_scene()
    scene.solver = wpsim.ImplicitEulerSolver(scene.model)
    tape = wp.Tape()
    with tape:
        final = wpsim.simulate(scene.solver, scene.state, 3, scene.dt, scene.control)
        loss = linear_state_loss(final, scene.weight_q, scene.weight_qd)
    tape.backward(loss)
    assert np.abs(scene.model.spring_ke.grad.numpy()).max() > 0.0
    tape.zero()
    for arr in (scene.model.spring_ke, scene.model.particle_mass, scene.control.particle_f_ext, scene.state.particle_q):
        assert not arr.grad.numpy().any()


def test_unconverged_steps_are_counted_and_can_raise():
    """One Newton iteration with a loose linear solve cannot reach 1e-12 m/s on a stiff block."""
    model = _stiff_cantilever()
    solver = wpsim.ImplicitEulerSolver(model, newton_iterations=1, krylov_iterations=2, tolerance=1e-12)
    _ping_pong(solver, model.state(requires_grad=False), 2, 4e-3)
    assert solver.unconverged_steps == 2 and not solver.last_solve.converged
    strict = wpsim.ImplicitEulerSolver(model, newton_iterations=1, krylov_iterations=2, tolerance=1e-12,
                                       raise_on_blowup=True)
    with pytest.raises(wpsim.SimulationError, match="Newton did not converge"):
        _ping_pong(strict, model.state(requires_grad=False), 1, 4e-3)


def test_bad_options_are_rejected():
    b = wpsim.ModelBuilder()
    b.set_particle_contact(True)
    b.add_particle((0.0, 0.0, 0.0), mass=1.0, radius=0.1)
    with pytest.raises(ValueError, match="particle-particle contact"):
        wpsim.ImplicitEulerSolver(b.finalize())
    rigid = wpsim.ModelBuilder()
    rigid.add_joint_free(rigid.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1)))
    with pytest.raises(ValueError, match="does not step rigid bodies yet; use SemiImplicitSolver"):
        wpsim.ImplicitEulerSolver(rigid.finalize())
    model = _stiff_cantilever()
    with pytest.raises(ValueError, match="adjoint"):
        wpsim.ImplicitEulerSolver(model, adjoint="reverse")
    with pytest.raises(ValueError, match="newton_iterations"):
        wpsim.ImplicitEulerSolver(model, newton_iterations=0)


def test_end_forces_are_differentiable():
    """``state_in.particle_f`` (forces at the end state) is recorded on the tape: a loss on it
    has the central-difference gradient."""
    scene = _chain_scene()
    solver = wpsim.ImplicitEulerSolver(scene.model)
    weights = wp.array(np.random.default_rng(1).standard_normal((4, 3)), dtype=wp.vec3d)

    def loss():
        solver.step(scene.state, scene.model.state(), scene.control, 0.01)
        return wpsim.diff.losses.squared_distance(scene.state.particle_f, weights)

    result = wpsim.check_gradient(loss, scene.state.particle_qd, eps=[1e-4, 1e-5])
    assert result.ok and result.rel_error < 1e-6, result


def test_backward_consumes_its_output_adjoints_and_propagates_nan():
    """Like Warp's kernel adjoints, a step's backward consumes the adjoint of its output
    (a second backward without tape.zero() doubles the gradients exactly), and a NaN
    incoming gradient comes out as NaN instead of a silent zero."""
    scene = _chain_scene()
    solver = wpsim.ImplicitEulerSolver(scene.model)
    end = scene.model.state()
    tape = wp.Tape()
    with tape:
        solver.step(scene.state, end, scene.control, 5e-3)
        loss = linear_state_loss(end, scene.weight_q, scene.weight_qd)
    tape.backward(loss)
    once = scene.model.spring_ke.grad.numpy().copy()
    assert not end.particle_qd.grad.numpy().any()
    tape.backward(loss)
    np.testing.assert_allclose(scene.model.spring_ke.grad.numpy(), 2.0 * once, rtol=1e-12)

    tape.zero()
    seed = np.zeros((4, 3))
    seed[2, 1] = np.nan
    tape.launches = tape.launches[:-1]  # without the loss launch
    tape.backward(grads={end.particle_qd: wp.array(seed, dtype=wp.vec3d)})
    assert np.isnan(scene.model.spring_ke.grad.numpy()).all()


def test_static_friction_creep_does_not_grow_with_the_step():
    """A particle on a 10 degree slope with mu = 0.5 only creeps at the smoothing speed of
    the friction model; without the explicit solver's dt/m bound the creep is the same at
    1 ms and at 20 ms."""
    speeds = []
    for dt in (1e-3, 2e-2):
        b = wpsim.ModelBuilder()
        b.add_ground_plane(ke=1.0e3, kd=0.0, mu=0.5)
        b.add_particle((0.0, 0.0, 0.05 - 0.1 * 9.81 / 1.0e3), mass=0.1, radius=0.05)
        model = b.finalize(dtype=wp.float64)
        slope = np.radians(10.0)
        model.gravity.assign(np.array([[9.81 * np.sin(slope), 0.0, -9.81 * np.cos(slope)]]))
        solver = wpsim.ImplicitEulerSolver(model)
        final = _ping_pong(solver, model.state(requires_grad=False), int(round(1.0 / dt)), dt)
        assert solver.unconverged_steps == 0
        speeds.append(final.particle_qd.numpy()[0, 0])
    assert 0.0 < speeds[0] < 0.005  # m/s: below the 0.01 m/s smoothing speed
    assert speeds[1] == pytest.approx(speeds[0], rel=0.05)


def test_converges_far_from_the_origin():
    """The tolerance includes the rounding floor of positions 100 m from the origin."""
    b = wpsim.ModelBuilder()
    b.add_soft_grid(pos=(100.0, 0.0, 1.0), vel=(0.3, 0.0, -0.5), dim_x=2, dim_y=2, dim_z=2, cell_x=0.02,
                    cell_y=0.02, cell_z=0.02, density=1000.0, young_modulus=1.0e6, poisson_ratio=0.3, kd=1.0)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.ImplicitEulerSolver(model, raise_on_blowup=True)
    _ping_pong(solver, model.state(requires_grad=False), 10, 5e-3)
    assert solver.unconverged_steps == 0 and solver.last_solve.newton_iterations > 0
