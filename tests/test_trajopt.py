"""Trajectory optimisation (``wpsim.opt.trajopt``, ``wpsim.opt.ilqr``): iLQR's linearisations
against central differences through soft contact, its LQ model against the tape gradient, its
Riccati gains and optimum against the analytic LQR solution of a double integrator, bounds,
and non-finite costs and linearisations reported with the iteration and the world. (The
finger-spinner comparison is asserted by ``examples/finger_spin.py --test``, run by
test_examples.)"""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.opt.ilqr import augmented_dynamics, backward_pass, cost_expansion, ilqr
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem, cem, shoot_adam, shoot_lbfgsb

wp.config.log_level = wp.LOG_WARNING

MASS, DT, SUBSTEPS = 2.0, 0.05, 2  # kg, s


@pytest.fixture(scope="module")
def finger():
    """The finger-spin task's module: its scene, initial states and problem."""
    from wpsim.tasks import finger_spin

    return finger_spin


def slider_problem(x0, steps=10, lower=-100.0, upper=100.0, smoothness=0.0) -> TrajectoryProblem:
    """A 2 kg body on a frictionless slider pushed by a force (a double integrator, exactly
    linear under semi-implicit Euler), driven to x = 1 m at rest."""
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=MASS, inertia=(0.1, 0.1, 0.1))
    builder.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0))
    cost = TrajectoryCost(target=np.array([1.0, 0.0]), running=np.array([0.5, 0.1]), terminal=np.array([50.0, 5.0]),
                          effort=np.array([0.01]), smoothness=np.array([smoothness]))
    return TrajectoryProblem(builder, np.atleast_2d(x0), steps, SUBSTEPS, DT, [0], lower, upper, cost)


def slider_dynamics() -> tuple:
    """Exact (A, B) of one plan step of the slider: SUBSTEPS semi-implicit steps of DT."""
    step_A, step_B = np.array([[1.0, DT], [0.0, 1.0]]) @ np.eye(2), np.array([[DT * DT], [DT]]) / MASS
    A, B = np.eye(2), np.zeros((2, 1))
    for _ in range(SUBSTEPS):
        A, B = step_A @ A, step_A @ B + step_B
    return A, B


def slider_optimum(problem: TrajectoryProblem) -> tuple:
    """(controls (W, T), costs (W,)) minimising the slider problem's cost without bounds: with
    x_t = A^t x0 + sum_s A^(t-1-s) B u_s the cost is a linear least-squares problem in U."""
    A, B = slider_dynamics()
    T, c = problem.steps, problem.cost
    gamma = np.zeros((T + 1, 2, T))
    for t in range(1, T + 1):
        for s in range(t):
            gamma[t, :, s] = (np.linalg.matrix_power(A, t - 1 - s) @ B)[:, 0]
    weights = np.sqrt(c.state_weights(T))  # (T + 1, 2)
    rows = np.concatenate([(weights[:, :, None] * gamma).reshape(-1, T), np.sqrt(c.effort[0]) * np.eye(T)])
    controls, costs = [], []
    for w in range(problem.worlds):
        free = np.stack([np.linalg.matrix_power(A, t) @ problem.x0[w] for t in range(T + 1)])
        rhs = np.concatenate([(weights * (c.target[w] - free)).ravel(), np.zeros(T)])
        controls.append(np.linalg.lstsq(rows, rhs, rcond=None)[0])
        costs.append(np.sum((rows @ controls[-1] - rhs) ** 2))
    return np.array(controls), np.array(costs)


def test_linearisation_matches_central_differences_through_contact(finger):
    """A_t and B_t of steps in which the fingertip presses on the spinner (implicit soft-contact
    adjoint) equal central differences of the step in float64 (best of an eps sweep)."""
    x0, targets = finger.initial_states(1, seed=1)
    problem = finger.make_problem(x0, targets, steps=4)
    U = np.tile([0.0, -0.05], (1, 4, 1))  # the elbow presses the tip into the bar
    _, X = problem.evaluate(U)
    A, B = problem.linearise(X, U)
    t, n = 2, problem.nx + problem.nu
    assert np.abs(A[0, t, finger.SPINNER, :2]).max() > 1e-3 and np.abs(B[0, t, 5]).max() > 0.1, "not in contact"
    errors = {}
    for eps in (1e-4, 1e-5, 1e-6):
        delta = eps * np.concatenate([np.eye(n), -np.eye(n)])  # rows: +eps e_i, then -eps e_i
        probe = finger.make_problem(X[0, t] + delta[:, :problem.nx], np.zeros(2 * n), steps=1)
        _, Y = probe.evaluate(U[0, t] + delta[:, None, problem.nx:])
        jacobian = (Y[:n, 1] - Y[n:, 1]).T / (2 * eps)  # (nx, nx + nu)
        errors[eps] = (np.abs(jacobian[:, :problem.nx] - A[0, t]).max() / np.abs(A[0, t]).max(),
                       np.abs(jacobian[:, problem.nx:] - B[0, t]).max() / np.abs(B[0, t]).max())
    best = min(errors.values(), key=max)
    assert max(best) < 1e-6, errors


def test_lq_model_gradient_equals_the_tape_gradient(finger):
    """The adjoint recursion of iLQR's model (A_t, B_t and the cost expansion, with the
    smoothness state) gives the tape gradient of the Warp cost."""
    x0, targets = finger.initial_states(2, seed=3)
    problem = finger.make_problem(x0, targets, steps=6)
    U = problem.clip(np.random.default_rng(0).normal(0.0, 0.05, (2, 6, 2)))
    _, X, gradient = problem.cost_and_gradient(U)
    Az, Bz = augmented_dynamics(*problem.linearise(X, U))
    lx, lu, _, _, _ = cost_expansion(problem, X, U)
    adjoint, model_gradient = lx[:, -1], np.zeros_like(U)
    for t in range(U.shape[1] - 1, -1, -1):
        model_gradient[:, t] = lu[:, t] + np.einsum("wji,wj->wi", Bz[:, t], adjoint)
        adjoint = lx[:, t] + np.einsum("wji,wj->wi", Az[:, t], adjoint)
    assert np.abs(model_gradient - gradient).max() < 1e-9 * np.abs(gradient).max()


def lqr_gains(A, B, Q, R, Qf, steps):
    """(steps, m, n) gains of the finite-horizon discrete LQR (u = -K x): the textbook
    Riccati recursion P = Q + A'P(A - BK), K = (R + B'PB)^-1 B'PA."""
    P, gains = Qf, []
    for _ in range(steps):
        K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        gains.append(K)
        P = Q + A.T @ P @ (A - B @ K)
    return np.array(gains[::-1])


def test_riccati_gains_equal_the_analytic_lqr_solution():
    """backward_pass on a random time-invariant LQ problem (no bounds active) gives the LQR
    gains and no feedforward step at the optimum x = u = 0."""
    rng = np.random.default_rng(0)
    n, m, T = 3, 2, 12
    A, B = np.eye(n) + 0.1 * rng.normal(size=(n, n)), rng.normal(size=(n, m))
    Q, R, Qf = np.diag([1.0, 0.5, 2.0]), np.diag([0.3, 0.1]), 10.0 * np.eye(n)
    lxx = np.broadcast_to(2.0 * Q, (1, T + 1, n, n)).copy()
    lxx[:, T] = 2.0 * Qf
    k, K, expected, failed = backward_pass(
        np.broadcast_to(A, (1, T, n, n)), np.broadcast_to(B, (1, T, n, m)), np.zeros((1, T + 1, n)),
        np.zeros((1, T, m)), lxx, np.broadcast_to(2.0 * R, (1, T, m, m)), np.zeros((1, T, m, n)), np.zeros(1),
        np.zeros((1, T, m)), np.full(m, -1e9), np.full(m, 1e9))
    assert not failed[0] and np.abs(k).max() == 0.0 and np.abs(expected).max() == 0.0
    np.testing.assert_allclose(K[0], -lqr_gains(A, B, Q, R, Qf, T), rtol=1e-10, atol=1e-12)


def test_ilqr_reaches_the_lq_optimum_of_a_double_integrator():
    """On the (linear) slider, the tape's A_t, B_t are exact, iLQR's plan is the least-squares
    optimum of the quadratic cost, and its gains on x are the LQR gains."""
    x0 = np.array([[0.0, 0.0], [0.4, -0.5]])
    problem = slider_problem(x0)
    A, B = slider_dynamics()
    _, X = problem.evaluate(problem.initial_controls())
    A_tape, B_tape = problem.linearise(X, problem.initial_controls())
    np.testing.assert_allclose(A_tape, np.broadcast_to(A, A_tape.shape), atol=1e-12)
    np.testing.assert_allclose(B_tape, np.broadcast_to(B, B_tape.shape), atol=1e-12)
    result = ilqr(problem, budget=12, mu0=1e-12, min_mu=1e-12)
    optimum, best = slider_optimum(problem)
    np.testing.assert_allclose(result.controls[..., 0], optimum, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(result.costs, best, rtol=1e-9)
    T, c = problem.steps, problem.cost
    Q = np.diag(c.running)
    lqr = lqr_gains(A, B, Q, np.diag(c.effort), np.diag(c.terminal), T)
    np.testing.assert_allclose(result.gains[..., :2], -np.broadcast_to(lqr, (2, T, 1, 2)), rtol=1e-7, atol=1e-9)


def test_bounds_are_honoured():
    """Every planner keeps the controls within tight bounds that the unbounded optimum
    exceeds (so the gradient-based plans reach a bound); a start plan outside them is
    refused, naming it."""
    problem = slider_problem([[0.0, 0.0], [0.3, 0.2]], smoothness=0.05, lower=-0.5, upper=0.8)
    plans = {"adam": shoot_adam(problem, 8, lr=0.3), "lbfgsb": shoot_lbfgsb(problem, 8), "ilqr": ilqr(problem, 12),
             "cem": cem(problem, 17, samples=8)}
    for name, result in plans.items():
        assert result.controls.min() >= -0.5 and result.controls.max() <= 0.8, name
        assert name == "cem" or np.isclose(result.controls, 0.8).any(), f"{name}: the bound 0.8 N is never reached"
        assert np.all(result.costs < result.initial_costs), name
    start = np.zeros((2, problem.steps, 1))
    start[1, 3, 0] = 0.9
    with pytest.raises(ValueError, match=r"control 0 of step 3 in world 1 is 0.9, outside its bounds \[-0.5, 0.8\]"):
        shoot_adam(problem, 8, controls=start)


@pytest.mark.parametrize("method", [shoot_adam, shoot_lbfgsb, ilqr, cem])
def test_nonfinite_cost_is_reported_with_iteration_and_world(method):
    """A world whose simulation turns NaN (a NaN armature) stops with an event naming the
    iteration, the world and the simulator step; its best plan (the start) is kept, and the
    other world is still optimised."""
    problem = slider_problem([[0.0, 0.0], [0.2, 0.0]], lower=-5.0, upper=5.0)
    armature = problem.plans.model.joint_armature.numpy()
    armature[1] = np.nan  # world 1's only dof
    problem.plans.model.joint_armature.assign(armature)
    result = method(problem, 17) if method is not cem else method(problem, 17, samples=8, initial_std=0.2)
    assert result.events == ["iteration 0, world 1: the cost is nan (the simulation blew up at simulator step 0); "
                             "the best plan is kept"]
    np.testing.assert_array_equal(result.controls[1], problem.initial_controls()[1])
    assert result.costs[0] < result.initial_costs[0]


def test_nan_linearisation_is_reported_with_step_and_world():
    """iLQR stops a world whose A_t has NaN (a NaN armature in its Jacobian copies), naming
    the step and the world; the other world is still optimised."""
    problem = slider_problem([[0.0, 0.0], [0.2, 0.0]])
    U = problem.initial_controls()
    problem.linearise(problem.evaluate(U)[1], U)  # makes the Jacobian copies: rows 2 and 3 play world 1
    jacobian = problem.batch("jacobian0", None).model
    armature = jacobian.joint_armature.numpy()
    armature[2:] = np.nan
    jacobian.joint_armature.assign(armature)
    result = ilqr(problem, 12)
    assert result.events == ["iteration 1, world 1: the linearisation of step 0 has NaN or Inf; the best plan is kept"]
    assert result.costs[0] < 0.5 * result.initial_costs[0]


def test_particle_states_linearise_a_free_particle_exactly():
    """With ``state="particles"`` the plan's state is particle_q, particle_qd flattened and the
    controls are entries of particle_f_ext: for a free 0.5 kg particle without gravity (a
    double integrator per axis) A_t and B_t are exact, the cost gradient matches central
    differences, and a control index past the forces is refused."""
    builder = wpsim.ModelBuilder(gravity=0.0)
    builder.add_particle((0.1, -0.2, 0.3), mass=0.5)
    x0 = np.array([[0.1, -0.2, 0.3, 0.0, 0.5, 0.0]])
    cost = TrajectoryCost(target=np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), running=np.full(6, 0.2),
                          terminal=np.full(6, 10.0), effort=np.array([0.01, 0.02]))
    problem = TrajectoryProblem(builder, x0, 5, SUBSTEPS, DT, [0, 2], -10.0, 10.0, cost, state="particles")
    U = np.random.default_rng(1).uniform(-1.0, 1.0, (1, 5, 2))
    _, X, gradient = problem.cost_and_gradient(U)
    A, B = problem.linearise(X, U)
    step_A, step_B = np.block([[np.eye(3), DT * np.eye(3)], [np.zeros((3, 3)), np.eye(3)]]), np.zeros((6, 3))
    step_B[:3], step_B[3:] = DT * DT / 0.5 * np.eye(3), DT / 0.5 * np.eye(3)
    exact_A, exact_B = np.eye(6), np.zeros((6, 3))
    for _ in range(SUBSTEPS):
        exact_A, exact_B = step_A @ exact_A, step_A @ exact_B + step_B
    np.testing.assert_allclose(A, np.broadcast_to(exact_A, A.shape), atol=1e-12)
    np.testing.assert_allclose(B, np.broadcast_to(exact_B[:, [0, 2]], B.shape), atol=1e-12)
    eps, central = 1e-6, np.zeros_like(U)
    for t, j in np.ndindex(5, 2):
        step = np.zeros_like(U)
        step[0, t, j] = eps
        central[0, t, j] = (problem.evaluate(U + step)[0][0] - problem.evaluate(U - step)[0][0]) / (2 * eps)
    np.testing.assert_allclose(gradient, central, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match=r"distinct indices of particle_f_ext entries in 0..2, got \[3\]"):
        TrajectoryProblem(builder, x0, 5, SUBSTEPS, DT, [3], -1.0, 1.0, cost, state="particles")


def driven_slider_problem(x0, ke=40.0, kd=4.0) -> TrajectoryProblem:
    """The 2 kg slider on a PD drive (``ke`` N/m, ``kd`` N s/m) whose position target is the
    control (``control="targets"``), driven to x = 1 m at rest; effort weighs the targets'
    departure from 0.3 m."""
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=MASS, inertia=(0.1, 0.1, 0.1))
    builder.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0), target_ke=ke, target_kd=kd)
    cost = TrajectoryCost(target=np.array([1.0, 0.0]), running=np.array([0.5, 0.1]), terminal=np.array([50.0, 5.0]),
                          effort=np.array([0.2]), smoothness=np.array([0.1]), nominal=np.array([0.3]))
    return TrajectoryProblem(builder, np.atleast_2d(x0), 6, SUBSTEPS, DT, [0], -2.0, 2.0, cost, control="targets")


def test_position_targets_are_planned_through_the_drive():
    """With ``control="targets"`` the plan sets the drive's joint_target_q: a plan starts by
    holding the start pose, B_t matches central differences of the step, the LQ model's
    gradient (effort about the nominal target) equals the tape gradient, iLQR lowers the
    cost, and a dof without a drive is refused, naming it."""
    problem = driven_slider_problem([[0.2, 0.0], [-0.1, 0.3]])
    U0 = problem.initial_controls()
    np.testing.assert_array_equal(U0[:, :, 0], [[0.2] * 6, [-0.1] * 6])
    U = U0 + np.random.default_rng(2).uniform(-0.3, 0.3, U0.shape)
    _, X, gradient = problem.cost_and_gradient(U)
    A, B = problem.linearise(X, U)
    eps = 1e-6
    probe = driven_slider_problem(np.repeat(X[:1, 2], 2, axis=0))
    _, Y = probe.evaluate(np.stack([U[0, 2:3] + eps, U[0, 2:3] - eps]).repeat(6, axis=1))
    np.testing.assert_allclose(B[0, 2], (Y[0, 1] - Y[1, 1])[:, None] / (2 * eps), rtol=1e-7, atol=1e-10)
    assert np.abs(B[0, 2]).min() > 1e-4  # the target moves the slider
    Az, Bz = augmented_dynamics(A, B)
    lx, lu, _, _, _ = cost_expansion(problem, X, U)
    adjoint, model_gradient = lx[:, -1], np.zeros_like(U)
    for t in range(U.shape[1] - 1, -1, -1):
        model_gradient[:, t] = lu[:, t] + np.einsum("wji,wj->wi", Bz[:, t], adjoint)
        adjoint = lx[:, t] + np.einsum("wji,wj->wi", Az[:, t], adjoint)
    np.testing.assert_allclose(model_gradient, gradient, rtol=1e-9, atol=1e-12)
    result = ilqr(problem, 20)
    assert np.all(result.costs < 0.5 * result.initial_costs)
    builder = wpsim.ModelBuilder()
    builder.add_joint_prismatic(-1, builder.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1)))
    with pytest.raises(ValueError, match=r"dof 0 \(joint 0\) is not a hinge or slider with a drive"):
        TrajectoryProblem(builder, [[0.0, 0.0]], 3, 1, DT, [0], -1.0, 1.0, problem.cost, control="targets")
