"""Iterative LQR on a ``wpsim.opt.trajopt.TrajectoryProblem``, batched over its worlds.

Each iteration linearises the dynamics about every world's plan (A_t, B_t by batched
vector-Jacobian products through one recorded step, ``TrajectoryProblem.linearise``),
expands the cost to second order (exact: the cost is a sum of weighted squares of the
state and controls), runs the Riccati recursion backwards and the feedback law forwards
with a line search; each world has its own regularisation and step size.

The smoothness term couples u_t with u_{t-1}, so the recursion runs on the state
z_t = (x_t, u_{t-1}) with dynamics z_{t+1} = (f(x_t, u_t), u_t); the gains act on
(x_t - x̄_t, u_{t-1} - ū_{t-1}). Bounds: controls whose step would cross a bound are held
at the bound and drop out of the feedback (the clamped rows of the gain are zero), the
free ones are solved with them fixed (one pass of the box-QP of Tassa, Mansard & Todorov
2014), and the forward pass clips. Regularisation (Levenberg): mu I is added to Q_uu; mu
grows (a factor growing by ``grow`` each time) when Q_uu is not positive definite or the
line search fails, and shrinks after an accepted step; past ``max_mu`` the world stops
with an event ("regularisation diverged"), its best plan kept.
"""

from __future__ import annotations

import numpy as np

from wpsim.opt.trajopt import PlanResult, PlanTracker, TrajectoryProblem, check_budget

ALPHAS = (1.0, 0.5, 0.25, 0.1, 0.03)
"""Step sizes the line search tries, in order."""


def backward_pass(A, B, lx, lu, lxx, luu, lux, mu, U, lower, upper) -> tuple:
    """Riccati recursion of a time-varying LQ problem about nominal controls U, batched over W.

    A (W, T, n, n), B (W, T, n, m): dynamics of the deviations; lx (W, T + 1, n),
    lxx (W, T + 1, n, n): state cost gradient and Hessian (entry T: the terminal cost);
    lu (W, T, m), luu (W, T, m, m), lux (W, T, m, n): control and cross terms; mu (W,):
    regularisation added to Q_uu; U (W, T, m) with bounds lower, upper (m,).

    Returns (k (W, T, m) feedforward steps, K (W, T, m, n) gains, expected (W, 2): the
    model's cost change is alpha expected[0] + alpha^2 expected[1], failed (W,) bool: Q_uu +
    mu I not positive definite at some step; those worlds' outputs are meaningless)."""
    W, T, n, m = B.shape
    k, K = np.zeros((W, T, m)), np.zeros((W, T, m, n))
    expected, failed = np.zeros((W, 2)), np.zeros(W, dtype=bool)
    Vx, Vxx = lx[:, T].copy(), lxx[:, T].copy()
    eye = np.eye(m)
    for t in range(T - 1, -1, -1):
        At, Bt = A[:, t], B[:, t]
        Qx = lx[:, t] + np.einsum("wji,wj->wi", At, Vx)
        Qu = lu[:, t] + np.einsum("wji,wj->wi", Bt, Vx)
        VA, VB = Vxx @ At, Vxx @ Bt
        Qxx = lxx[:, t] + np.swapaxes(At, 1, 2) @ VA
        Quu = luu[:, t] + np.swapaxes(Bt, 1, 2) @ VB
        Qux = lux[:, t] + np.swapaxes(Bt, 1, 2) @ VA
        Qreg = 0.5 * (Quu + np.swapaxes(Quu, 1, 2)) + mu[:, None, None] * eye
        failed |= np.linalg.eigvalsh(Qreg)[:, 0] <= 0.0
        Qreg[failed] = eye  # keeps the solves finite; those worlds are redone with a larger mu
        step = -np.linalg.solve(Qreg, Qu[..., None])[..., 0]
        target = U[:, t] + step
        clamped = (target < lower) | (target > upper)
        fixed = np.where(clamped, np.clip(target, lower, upper) - U[:, t], 0.0)  # steps onto the bound
        free = ~clamped
        mask = free[:, :, None] & free[:, None, :]
        system = np.where(mask, Qreg, 0.0) + np.where(clamped[:, :, None], eye, 0.0)
        rhs = np.where(free, -(Qu + np.einsum("wij,wj->wi", Qreg, fixed)), fixed)
        kt = np.linalg.solve(system, rhs[..., None])[..., 0]
        Kt = np.where(free[:, :, None], -np.linalg.solve(system, np.where(free[:, :, None], Qux, 0.0)), 0.0)
        k[:, t], K[:, t] = kt, Kt
        expected[:, 0] += np.einsum("wi,wi->w", kt, Qu)
        expected[:, 1] += 0.5 * np.einsum("wi,wij,wj->w", kt, Quu, kt)
        KT = np.swapaxes(Kt, 1, 2)
        Vx = Qx + np.einsum("wij,wjk,wk->wi", KT, Quu, kt) + np.einsum("wij,wj->wi", KT, Qu) + \
            np.einsum("wji,wj->wi", Qux, kt)
        Vxx = Qxx + KT @ Quu @ Kt + KT @ Qux + np.swapaxes(Qux, 1, 2) @ Kt
        Vxx = 0.5 * (Vxx + np.swapaxes(Vxx, 1, 2))
    return k, K, expected, failed


def cost_expansion(problem: TrajectoryProblem, X: np.ndarray, U: np.ndarray) -> tuple:
    """(lx, lu, lxx, luu, lux) of the problem's cost about (X, U) on the augmented state
    z_t = (x_t, u_{t-1}) (shapes as ``backward_pass`` with n = nx + nu): the exact
    derivatives of the weighted squares that ``TrajectoryCost`` sums."""
    c, (W, T, nu), nx = problem.cost, U.shape, problem.nx
    weights = c.state_weights(T)  # (T + 1, nx)
    smooth = np.where(np.arange(T)[:, None] > 0, c.smoothness, 0.0)  # (T, nu): no smoothness at t = 0
    previous = np.concatenate([np.zeros((W, 1, nu)), U[:, :-1]], axis=1)
    lx = np.zeros((W, T + 1, nx + nu))
    lx[:, :, :nx] = 2.0 * weights * (X - c.target)
    lx[:, :T, nx:] = -2.0 * smooth * (U - previous)
    lxx = np.zeros((W, T + 1, nx + nu, nx + nu))
    diagonal = np.zeros((T + 1, nx + nu))
    diagonal[:, :nx], diagonal[:T, nx:] = 2.0 * weights, 2.0 * smooth
    lxx[:] = diagonal[:, :, None] * np.eye(nx + nu)
    lu = 2.0 * c.effort * (U - c.nominal[:, None, :]) + 2.0 * smooth * (U - previous)
    luu = np.broadcast_to((2.0 * (c.effort + smooth))[:, :, None] * np.eye(nu), (W, T, nu, nu)).copy()
    lux = np.zeros((W, T, nu, nx + nu))
    lux[:, :, :, nx:] = -2.0 * smooth[:, :, None] * np.eye(nu)
    return lx, lu, lxx, luu, lux


def augmented_dynamics(A: np.ndarray, B: np.ndarray) -> tuple:
    """(A~ (W, T, n, n), B~ (W, T, n, nu)) of z = (x, u_prev), n = nx + nu, from A and B."""
    W, T, nx, nu = B.shape
    Az = np.zeros((W, T, nx + nu, nx + nu))
    Az[:, :, :nx, :nx] = A
    Bz = np.zeros((W, T, nx + nu, nu))
    Bz[:, :, :nx], Bz[:, :, nx:] = B, np.eye(nu)
    return Az, Bz


def ilqr(problem: TrajectoryProblem, budget: int, controls=None, mu0: float = 1e-6, min_mu: float = 1e-8,
         max_mu: float = 1e8, grow: float = 2.0, armijo: float = 1e-4) -> PlanResult:
    """iLQR from ``controls`` (default zeros in the bounds), ``budget`` rollouts per world:
    the start, then per iteration nx for the linearisation (one per Jacobian row) and one per
    line-search step tried. A trial is accepted for a world when its cost falls by at least
    ``armijo`` times the model's prediction. A world stops (an event, best plan kept) when
    its cost turns non-finite, its linearisation has NaN (the step is named) or its
    regularisation passes ``max_mu``. ``PlanResult.gains``: each world's gains of its last
    backward pass, about the plan before its last accepted step."""
    nx, nu = problem.nx, problem.nu
    check_budget(budget, nx + 1, "ilqr")
    if not 0.0 < min_mu <= mu0 < max_mu or not grow > 1.0:
        raise ValueError(f"ilqr needs 0 < min_mu <= mu0 < max_mu and grow > 1, got {min_mu}, {mu0}, {max_mu}, {grow}")
    U = problem.initial_controls(controls)
    costs, X = problem.evaluate(U)
    track = PlanTracker("ilqr", U, costs, X, problem.plans.blown_up)
    W, T = problem.worlds, problem.steps
    mu, factor = np.full(W, mu0), np.ones(W)
    gains = np.zeros((W, T, nu, nx + nu))
    accepted = np.ones(W, dtype=bool)  # whose plan changed since the last linearisation

    def regularise(worlds, failure: str):
        factor[worlds] = np.maximum(grow, factor[worlds] * grow)
        mu[worlds] = np.maximum(min_mu, mu[worlds] * factor[worlds])
        for w in np.flatnonzero(worlds & (mu > max_mu)):
            track.stop(w, f"the regularisation diverged (mu = {mu[w]:.3g} > {max_mu:g} after {failure})")

    while track.active.any() and track.rollouts + (nx if accepted.any() else 0) + 1 <= budget:
        track.begin()
        if accepted.any():  # else the line search failed everywhere: same plans, larger mu
            Ubar, Xbar, Jbar = track.U.copy(), track.X.copy(), track.costs.copy()
            A, B = problem.linearise(Xbar, Ubar)
            track.rollouts += nx
            finite = np.isfinite(A).all(axis=(2, 3)) & np.isfinite(B).all(axis=(2, 3))  # (W, T)
            for w in np.flatnonzero(track.active & ~finite.all(axis=1)):
                track.stop(w, f"the linearisation of step {int(np.argmin(finite[w]))} has NaN or Inf")
            Az, Bz = augmented_dynamics(np.where(finite[..., None, None], A, 0.0),
                                        np.where(finite[..., None, None], B, 0.0))
            expansion = cost_expansion(problem, Xbar, Ubar)
        while True:  # raise mu where Q_uu is not positive definite
            k, K, expected, failed = backward_pass(Az, Bz, *expansion, mu, Ubar, problem.lower, problem.upper)
            failed &= track.active
            if not failed.any():
                break
            regularise(failed, "Q_uu was not positive definite")
        searching = track.active.copy()
        gains[searching] = K[searching]
        accepted = np.zeros(W, dtype=bool)
        for alpha in ALPHAS[:budget - track.rollouts]:
            def policy(t, x, alpha=alpha):
                du = new_U[:, t - 1] - Ubar[:, t - 1] if t > 0 else np.zeros((W, nu))
                dz = np.concatenate([x - Xbar[:, t], du], axis=1)
                new_U[:, t] = problem.clip(Ubar[:, t] + alpha * k[:, t] + np.einsum("wij,wj->wi", K[:, t], dz))
                return new_U[:, t]

            new_U = Ubar.copy()
            trial, Xt, Ut, _ = problem.plans.simulate(policy=policy)
            predicted = -(alpha * expected[:, 0] + alpha * alpha * expected[:, 1])
            ok = searching & (Jbar - trial > armijo * np.maximum(predicted, 0.0)) & (trial < Jbar)
            track.offer(Ut, trial, Xt, problem.plans.blown_up, ok | (searching & ~np.isfinite(trial)))
            track.rollouts += 1
            accepted |= ok
            searching &= ~ok & track.active
            if not searching.any():
                break
        factor[accepted] = np.minimum(1.0 / grow, factor[accepted] / grow)
        mu[accepted] = np.where(mu[accepted] * factor[accepted] > min_mu, mu[accepted] * factor[accepted], min_mu)
        regularise(searching, "a failed line search")
        track.end(0)
    return track.result(gains)
