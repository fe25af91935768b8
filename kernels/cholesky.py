"""Dense Cholesky factorisation and solves of the per-articulation (or per-island) blocks of
a joint-space system, laid out row-major from ``articulation_H_start``, and the backward of a
solve (one transposed solve)."""

import warp as wp

from .generic import kernel


@wp.func
def factor_and_solve(
    a: int,
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    rhs_in: wp.array(dtype=wp.Float),
    factor_out: wp.array(dtype=wp.Float),
    qdd_out: wp.array(dtype=wp.Float),
):
    """Factor and solve articulation ``a``'s block (see ``cholesky_solve``)."""
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    base = articulation_H_start[a]
    last = base + (n - 1) * n
    for c in range(n):
        s = mass_matrix_in[base + c * n + c]
        for k in range(c):
            s -= factor_out[base + c * n + k] * factor_out[base + c * n + k]
        diagonal = wp.sqrt(s)
        factor_out[base + c * n + c] = diagonal
        # four rows below the diagonal at a time: four independent sums (each in the order of
        # one row's) share the loads of row c, where one row's sum waits on its previous term;
        # rows past the end repeat the last row
        for r in range(c + 1, n, 4):
            row_0 = base + r * n
            row_1 = wp.min(row_0 + n, last)
            row_2 = wp.min(row_0 + 2 * n, last)
            row_3 = wp.min(row_0 + 3 * n, last)
            s_0 = mass_matrix_in[row_0 + c]
            s_1 = mass_matrix_in[row_1 + c]
            s_2 = mass_matrix_in[row_2 + c]
            s_3 = mass_matrix_in[row_3 + c]
            for k in range(c):
                l_ck = factor_out[base + c * n + k]
                s_0 -= factor_out[row_0 + k] * l_ck
                s_1 -= factor_out[row_1 + k] * l_ck
                s_2 -= factor_out[row_2 + k] * l_ck
                s_3 -= factor_out[row_3 + k] * l_ck
            factor_out[row_0 + c] = s_0 / diagonal
            factor_out[row_1 + c] = s_1 / diagonal
            factor_out[row_2 + c] = s_2 / diagonal
            factor_out[row_3 + c] = s_3 / diagonal
    triangular_solves(n, base, d0, factor_out, rhs_in, qdd_out)


@kernel(enable_backward=False)
def cholesky_solve(
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    rhs_in: wp.array(dtype=wp.Float),
    factor_out: wp.array(dtype=wp.Float),
    qdd_out: wp.array(dtype=wp.Float),
):
    """One thread per articulation: factor H = L L^T (lower triangle of H read) into
    ``factor_out`` and solve H qdd_out = rhs_in. Not differentiated by the tape: the solver
    registers ``cholesky_solve_adjoint`` as its backward."""
    factor_and_solve(wp.tid(), articulation_dof_start, articulation_H_start, mass_matrix_in, rhs_in, factor_out,
        qdd_out)


@wp.func
def triangular_solves(n: int, base: int, d0: int, factor: wp.array(dtype=wp.Float), b: wp.array(dtype=wp.Float),
                      x: wp.array(dtype=wp.Float)):
    """Solve L L^T x = b for one articulation's block (x used as scratch for L^-1 b)."""
    for r in range(n):
        s = b[d0 + r]
        for k in range(r):
            s -= factor[base + r * n + k] * x[d0 + k]
        x[d0 + r] = s / factor[base + r * n + r]
    for rr in range(n):
        r = n - 1 - rr
        s = x[d0 + r]
        for k in range(r + 1, n):
            s -= factor[base + k * n + r] * x[d0 + k]
        x[d0 + r] = s / factor[base + r * n + r]


@kernel(enable_backward=False)
def cholesky_solve_adjoint(
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    factor_in: wp.array(dtype=wp.Float),
    qdd_in: wp.array(dtype=wp.Float),
    adj_qdd_in: wp.array(dtype=wp.Float),
    adjoint_out: wp.array(dtype=wp.Float),
    adj_mass_matrix_out: wp.array(dtype=wp.Float),
    adj_rhs_out: wp.array(dtype=wp.Float),
):
    """Backward of ``cholesky_solve``. The forward reads only the lower triangle of H (the
    matrix it factors is H_rc for r >= c mirrored), so with lambda = H^-1 adj_qdd (into
    adjoint_out) and G = -lambda qdd^T: adj_rhs += lambda, adj_H_rc += G_rc + G_cr below the
    diagonal, G_rr on it, nothing above."""
    a = wp.tid()
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    base = articulation_H_start[a]
    triangular_solves(n, base, d0, factor_in, adj_qdd_in, adjoint_out)
    for r in range(n):
        lam = adjoint_out[d0 + r]
        adj_rhs_out[d0 + r] += lam
        for c in range(r + 1):
            g = lam * qdd_in[d0 + c]
            if c < r:
                g += adjoint_out[d0 + c] * qdd_in[d0 + r]
            adj_mass_matrix_out[base + r * n + c] -= g


@kernel(enable_backward=False)
def cholesky_back_solve(
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    factor_in: wp.array(dtype=wp.Float),
    rhs_in: wp.array(dtype=wp.Float),
    solution_out: wp.array(dtype=wp.Float),
):
    """One thread per articulation: solution_out = (L L^T)^-1 rhs_in with the Cholesky factor L
    of an earlier ``cholesky_solve``."""
    a = wp.tid()
    triangular_solves(articulation_dof_start[a + 1] - articulation_dof_start[a], articulation_H_start[a],
                      articulation_dof_start[a], factor_in, rhs_in, solution_out)
