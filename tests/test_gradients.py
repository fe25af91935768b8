"""Tape gradients against central finite differences (float64)."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.apps.gradient_audit import (
    AUDIT_CASES,
    ROLLOUT_CASES,
    TOLERANCE,
    controlled_pendulum,
    run_case,
    run_rollout_case,
)
from wpsim.diff.losses import linear_state_loss


@pytest.mark.parametrize("case", AUDIT_CASES,
                         ids=[f"{c.solver}-{c.family}-{c.param}".replace(" ", "_") for c in AUDIT_CASES])
def test_audit_case(case):
    """Every differentiable parameter family: relative error <= 1e-4 (the gradcheck audit)."""
    row = run_case(case)
    assert row["ok"], row
    assert row["rel_error"] <= TOLERANCE
    assert abs(row["tape"]) > 0.0


@pytest.mark.parametrize("case", ROLLOUT_CASES, ids=[c.family.replace(" ", "_") for c in ROLLOUT_CASES])
def test_audit_rollout_case(case):
    """Whole rollouts over several arrays at once: every direction within 1e-4."""
    row = run_rollout_case(case)
    assert row["ok"], row
    assert row["rel_error"] <= TOLERANCE
    assert abs(row["tape"]) > 0.0


def _bounce_scene():
    """A particle dropped onto the ground: the rollout crosses contact onset and release."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=1.0e3, kd=0.5, mu=0.4)
    b.add_particle((0.0, 0.0, 0.12), (0.5, 0.2, -1.0), mass=0.1, radius=0.05)
    model = b.finalize(requires_grad=True, dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model)
    state = model.state()
    weight_q = wp.array([[0.3, -0.2, 1.0]], dtype=wp.vec3d)
    weight_qd = wp.array([[0.1, 0.4, 0.2]], dtype=wp.vec3d)

    def loss():
        final = wpsim.simulate(solver, state, 200, 1e-3)
        return linear_state_loss(final, weight_q, weight_qd)

    return model, state, loss


@pytest.mark.parametrize("param", ["state.particle_qd", "model.shape_ke", "model.shape_mu"])
def test_through_contact_eps_sweep(param):
    """Across contact events single-eps FD is unreliable; the converged FD of an eps sweep
    matches the tape within 1%."""
    model, state, loss = _bounce_scene()
    array = {"state.particle_qd": state.particle_qd, "model.shape_ke": model.shape_ke,
             "model.shape_mu": model.shape_mu}[param]
    result = wpsim.check_gradient(loss, array, eps=[1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7], tol=1e-2)
    assert result.ok, result.sweep
    assert result.converged, result.sweep


def test_check_gradient_detects_a_broken_tape():
    """A loss computed through the host (not on the tape) has a zero tape gradient: the
    check must fail rather than pass."""
    model, state, loss = _bounce_scene()

    def host_copy_loss():
        detached = model.state()
        detached.particle_qd.assign(state.particle_qd.numpy())
        final = wpsim.simulate(wpsim.SemiImplicitSolver(model), detached, 20, 1e-3)
        return linear_state_loss(final, wp.array([[1.0, 1.0, 1.0]], dtype=wp.vec3d),
                                 wp.array([[0.0, 0.0, 0.0]], dtype=wp.vec3d))

    result = wpsim.check_gradient(host_copy_loss, state.particle_qd)
    assert result.tape == 0.0 and abs(result.fd) > 1e-3
    assert not result.ok


def test_check_gradient_rejects_arrays_without_grad():
    b = wpsim.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0))
    model = b.finalize(dtype=wp.float64)
    state = model.state()
    with pytest.raises(ValueError, match="does not require gradients"):
        wpsim.check_gradient(lambda: wp.zeros(1, dtype=wp.float64), state.particle_q)


def test_fixed_step_fd_finds_a_wrong_derivative():
    """Sanity of the FD itself: d/dp sum(p^2) at p = (1, 2) along (1, 0) is 2."""
    p = wp.array([1.0, 2.0], dtype=wp.float64, requires_grad=True)

    @wp.kernel
    def sum_sq(p: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
        i = wp.tid()
        wp.atomic_add(out, 0, p[i] * p[i])

    def loss():
        out = wp.zeros(1, dtype=wp.float64, requires_grad=True)
        wp.launch(sum_sq, dim=2, inputs=[p], outputs=[out])
        return out

    result = wpsim.check_gradient(loss, p, direction=np.array([1.0, 0.0]))
    assert result.tape == pytest.approx(2.0, rel=1e-12)
    assert result.fd == pytest.approx(2.0, rel=1e-6)
    assert result.ok


def _result(fds, best):
    """A GradCheckResult of tape value 1.0 over an eps sweep with central differences ``fds``."""
    sweep = [(10.0 ** -(k + 2), fd, abs(fd - 1.0) / max(abs(fd), 1.0)) for k, fd in enumerate(fds)]
    return wpsim.diff.GradCheckResult(1.0, fds[best], sweep[best][2], sweep[best][0], 1e-4, sweep)


def test_converged_on_the_edge_of_an_agreeing_plateau():
    """The best eps next to a truncation-error value but on a plateau that agrees within 1%
    is converged; an isolated best value or a single eps is not."""
    assert _result([1.3, 1.00001, 1.0002, 1.0004], best=1).converged  # left edge of the plateau
    assert _result([1.0004, 1.0002, 1.00001, 0.7], best=2).converged  # right edge
    assert not _result([1.3, 1.00001, 0.7], best=1).converged
    assert not _result([1.00001], best=0).converged


@pytest.mark.parametrize("mode", ["full", "checkpoint"])
def test_whole_rollout_gradient_check_with_a_controller(mode):
    """check_gradients over a controller's gains, a model parameter and the initial state of
    a rollout: random and coordinate directions agree within 1e-4 over the eps sweep."""
    model, state, controller, rollout = controlled_pendulum(mode)
    arrays = {"controller.kp": controller.kp, "model.body_mass": model.body_mass, "state.joint_qd": state.joint_qd}
    checks = wpsim.diff.check_gradients(lambda: rollout.forward(state), rollout.backward, arrays)
    assert checks.ok, str(checks)
    assert len(checks.rows) == 5 and checks.worst[1].rel_error <= 1e-4
    assert np.array_equal(state.joint_qd.numpy(), model.state().joint_qd.numpy())  # restored


def test_whole_rollout_gradient_check_finds_a_missing_gradient():
    """A backward that loses the gradient of one array fails the check."""
    _, state, controller, rollout = controlled_pendulum("checkpoint")

    def lossy_backward():
        rollout.backward()
        controller.kd.grad.zero_()

    arrays = {"controller.kp": controller.kp, "controller.kd": controller.kd}
    checks = wpsim.diff.check_gradients(lambda: rollout.forward(state), lossy_backward, arrays, coordinates=0)
    assert not checks.ok
    assert checks.worst[1].rel_error > 1e-2


def test_vector_gradient_check_of_a_flat_function():
    """check_vector_gradient on f(x) = sum x^3 / 3 (gradient x^2): passes; a gradient with
    one wrong entry fails on that coordinate."""
    x0 = np.array([0.5, -1.0, 2.0, 0.0])

    def loss(x):
        return float(np.sum(x ** 3) / 3.0)

    assert wpsim.diff.check_vector_gradient(lambda x: (loss(x), x ** 2), x0, coordinates=4).ok
    wrong = wpsim.diff.check_vector_gradient(lambda x: (loss(x), x ** 2 * np.array([1.0, 1.0, 1.1, 1.0])), x0,
                                             random_directions=0, coordinates=4)
    assert not wrong.ok and wrong.worst[0] == "coordinate x[2]"
