"""The Newton solve of the soft-constraint contact cost (``soft_contact`` builds its rows): the
pairs in contact that its walks visit (``touching_pair_list``); per island, the cost's
gradient and Hessian (``island_gradient``, ``island_hessian``), the exact line search along
the Newton step (``island_line_search``), the step's size relative to the accelerations
(``step_ratio``, the convergence test), and the staged schedule's kernels around them (one
launch per stage and Newton iteration; ``soft_contact_step`` runs the same functions in one
thread per articulation).
"""
import warp as wp

from .generic import kernel
from .soft_contact import EDGES, dof_rows, row_active, row_force, slot_times


@wp.func
def slot_coefficients(row_jacobian: wp.array2d(dtype=wp.Float), first: int, column: int, other_column: int,
                      shared: bool):
    """Column ``column`` of the four edge rows of the slot from row ``first`` (a 4-vector), plus
    column ``other_column`` where both sides of the pair are one articulation (``shared``)."""
    c = wp.vector(row_jacobian[first, column], row_jacobian[first + 1, column], row_jacobian[first + 2, column],
                  row_jacobian[first + 3, column])
    if shared:
        c = c + wp.vector(row_jacobian[first, other_column], row_jacobian[first + 1, other_column],
                          row_jacobian[first + 2, other_column], row_jacobian[first + 3, other_column])
    return c


@wp.func
def any_slot(pair: int, pair_row_start: wp.array(dtype=int), row_values: wp.array(dtype=wp.Float)):
    """1 if the first row of any contact slot of ``pair`` has a nonzero value (its in-contact
    flag), else 0."""
    found = int(0)
    for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
        if row_values[first] != type(row_values[first])(0.0):
            found = 1
    return found


@wp.func
def touching_pair_list(
    art: int,
    articulation_pair_start: wp.array(dtype=int),
    articulation_pairs: wp.array(dtype=int),
    pair_articulation: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    row_in_contact: wp.array(dtype=wp.Float),
    touching_pairs_out: wp.array(dtype=int),
    touching_pair_count_out: wp.array(dtype=int),
):
    """The pairs whose shape a is on articulation ``art`` (``pair_articulation``) with a slot
    in contact (``row_in_contact``), in ``articulation_pairs`` order, into touching_pairs_out
    from articulation_pair_start[art] on and their number into touching_pair_count_out[art]:
    the pairs the solve's walks visit (a pair apart adds nothing to the cost)."""
    start = articulation_pair_start[art]
    count = int(0)
    for entry in range(start, articulation_pair_start[art + 1]):
        pair = articulation_pairs[entry]
        if pair_articulation[pair] == art and any_slot(pair, pair_row_start, row_in_contact) != 0:
            touching_pairs_out[start + count] = pair
            count += 1
    touching_pair_count_out[art] = count


@kernel(enable_backward=False)
def soft_contact_touching_pairs(
    articulation_pair_start_in: wp.array(dtype=int),
    articulation_pairs_in: wp.array(dtype=int),
    pair_articulation_in: wp.array(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    row_in_contact_in: wp.array(dtype=wp.Float),
    touching_pairs_out: wp.array(dtype=int),
    touching_pair_count_out: wp.array(dtype=int),
):
    """One thread per articulation: its pairs with a slot in contact (``touching_pair_list``)."""
    touching_pair_list(wp.tid(), articulation_pair_start_in, articulation_pairs_in, pair_articulation_in,
                       pair_row_start_in, row_in_contact_in, touching_pairs_out, touching_pair_count_out)


@wp.func
def island_gradient(
    island: int,
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    accel_free: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    dof_row_settings: wp.array2d(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    impedance: wp.Float,
    mujoco_weights: int,
    gradient_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    dof_curvature_out: wp.array(dtype=wp.Float),
):
    """Island ``island``'s cost gradient (see ``soft_contact_newton_system``), and the Hessian
    weight of each of its rows in contact (D_r [x_r < 0], into row_curvature_out) and of each
    dof's own rows (dof_curvature_out). Returns 1 if any of those weights differs from the one
    the arrays held (the Hessian they describe has changed), else 0."""
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = impedance * type(impedance)(0.0)
    changed = int(0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        for i in range(n_dofs):
            m_row = articulation_H_start[art] + i * n_dofs
            g = zero
            for k in range(n_dofs):
                g += mass_matrix[m_row + k] * (accel[d0 + k] - accel_free[d0 + k])
            gradient_out[d0 + i] = g
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art] + touching_pair_count[art]):
            pair = touching_pairs[entry]  # each pair once, by the articulation of its shape a
            shared = pair_dof_count[pair, 0] > 0 and pair_dof[pair, side_column] == pair_dof[pair, 0]
            sides = 2  # side b of a static shape has no dofs
            if shared:
                sides = 1  # both sides on one articulation: each coefficient sums them
            for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                if row_weight[first] != zero:  # slots not in contact (most) add nothing; edges share the weight
                    for r in range(first, first + EDGES):
                        active = row_active(row_weight[r], row_violation[r])
                        if active != row_curvature_out[r]:
                            changed = 1
                        row_curvature_out[r] = active
                    slot_force = wp.vector(row_force(row_weight[first], row_violation[first]),
                                           row_force(row_weight[first + 1], row_violation[first + 1]),
                                           row_force(row_weight[first + 2], row_violation[first + 2]),
                                           row_force(row_weight[first + 3], row_violation[first + 3]))
                    for side_i in range(sides):  # the slot's four edge rows at once
                        for i in range(pair_dof_count[pair, side_i]):
                            c = slot_coefficients(row_jacobian, first, side_i * side_column + i, side_column + i,
                                                  shared)
                            wp.atomic_add(gradient_out, pair_dof[pair, side_i * side_column + i], wp.dot(c, slot_force))
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        for i in range(n_dofs):
            dof = d0 + i
            j = dof_joint[dof]
            force, curvature = dof_rows(joint_type[j], joint_q[joint_q_start[j]], joint_qd[dof], accel[dof],
                                        joint_limit_lower[dof], joint_limit_upper[dof], joint_friction[dof],
                                        mass_matrix[articulation_H_start[art] + i * (n_dofs + 1)], dof_row_settings,
                                        dof, mujoco_weights, limits, friction_rows)
            wp.atomic_add(gradient_out, dof, force)
            if curvature != dof_curvature_out[dof]:
                changed = 1
            dof_curvature_out[dof] = curvature
    return changed


@wp.func
def island_hessian(
    island: int,
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    dof_slot: wp.array(dtype=int),
    island_dof_start: wp.array(dtype=int),
    island_H_start: wp.array(dtype=int),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_curvature: wp.array(dtype=wp.Float),
    dof_curvature: wp.array(dtype=wp.Float),
    side_column: int,
    impedance: wp.Float,
    hessian_out: wp.array(dtype=wp.Float),
):
    """Island ``island``'s cost Hessian (see ``soft_contact_newton_system``) from the rows' and
    dofs' Hessian weights that ``island_gradient`` recorded: the lower triangle and diagonal
    (the Cholesky factorisation reads no more; the entries above stay zero)."""
    i0 = island_dof_start[island]
    n_island = island_dof_start[island + 1] - i0
    h_island = island_H_start[island]
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = impedance * type(impedance)(0.0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n_dofs = articulation_dof_start[art + 1] - d0
        c0 = dof_slot[d0] - i0  # the island column of the articulation's first dof
        for i in range(n_dofs):
            base = h_island + (c0 + i) * n_island
            m_row = articulation_H_start[art] + i * n_dofs
            for k in range(c0 + i + 1):
                hessian_out[base + k] = zero
            for k in range(i + 1):
                hessian_out[base + c0 + k] = mass_matrix[m_row + k]
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art] + touching_pair_count[art]):
            pair = touching_pairs[entry]  # each pair once, by the articulation of its shape a
            shared = pair_dof_count[pair, 0] > 0 and pair_dof[pair, side_column] == pair_dof[pair, 0]
            sides = 2  # side b of a static shape has no dofs
            if shared:
                sides = 1  # both sides on one articulation: each coefficient sums them
            for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                if row_weight[first] != zero:  # slots not in contact (most) add nothing; edges share the weight
                    # the slot's four edge rows at once: one pass over their shared columns
                    active = wp.vector(row_curvature[first], row_curvature[first + 1], row_curvature[first + 2],
                                       row_curvature[first + 3])
                    for side_i in range(sides):
                        for i in range(pair_dof_count[pair, side_i]):
                            w = wp.cw_mul(active, slot_coefficients(row_jacobian, first, side_i * side_column + i,
                                                                    side_column + i, shared))
                            if w[0] != zero or w[1] != zero or w[2] != zero or w[3] != zero:
                                own = dof_slot[pair_dof[pair, side_i * side_column + i]] - i0
                                base = h_island + own * n_island
                                for side in range(2):
                                    for k in range(pair_dof_count[pair, side]):
                                        column = side * side_column + k
                                        at = dof_slot[pair_dof[pair, column]] - i0
                                        if at <= own:  # the lower triangle and the diagonal
                                            entry_ik = (w[0] * row_jacobian[first, column]
                                                        + w[1] * row_jacobian[first + 1, column]
                                                        + w[2] * row_jacobian[first + 2, column]
                                                        + w[3] * row_jacobian[first + 3, column])
                                            if entry_ik != zero:
                                                wp.atomic_add(hessian_out, base + at, entry_ik)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        for dof in range(d0, articulation_dof_start[art + 1]):
            if dof_curvature[dof] != zero:
                own = dof_slot[dof] - i0
                wp.atomic_add(hessian_out, h_island + own * (n_island + 1), dof_curvature[dof])


@kernel
def soft_contact_newton_system(
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    dof_slot_in: wp.array(dtype=int),
    island_dof_start_in: wp.array(dtype=int),
    island_H_start_in: wp.array(dtype=int),
    island_articulation_start_in: wp.array(dtype=int),
    island_articulations_in: wp.array(dtype=int),
    articulation_pair_start_in: wp.array(dtype=int),
    touching_pairs_in: wp.array(dtype=int),
    touching_pair_count_in: wp.array(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    accel_free_in: wp.array(dtype=wp.Float),
    row_jacobian_in: wp.array2d(dtype=wp.Float),
    row_weight_in: wp.array(dtype=wp.Float),
    row_violation_in: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    dof_row_settings_in: wp.array2d(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    impedance: wp.Float,
    mujoco_weights: int,
    gradient_out: wp.array(dtype=wp.Float),
    row_curvature_out: wp.array(dtype=wp.Float),
    dof_curvature_out: wp.array(dtype=wp.Float),
    hessian_out: wp.array(dtype=wp.Float),
):
    """One thread per island (articulations whose bodies touch, solved together; its dofs at
    the positions ``dof_slot_in``, from ``island_dof_start_in``): for every dof i,
    gradient_i = (H (a - a0))_i + sum_r J_ri D_r min(0, x_r) and row i of the island's Hessian
    blockdiag(H) + sum_r D_r [x_r < 0] J_r^T J_r, row by row over the pairs of its
    articulations and their slots in contact (D_r != 0), adding only the rows' nonzero columns
    up to the diagonal (the Cholesky factorisation reads the lower triangle; the entries
    above it stay zero); then the rows on one dof (``dof_rows``: joint limits, dry friction),
    weighted as ``dof_row_weight`` says. The rows' and dofs' Hessian weights go to
    row_curvature_out and dof_curvature_out."""
    island = wp.tid()
    island_gradient(island, dof_joint, articulation_dof_start, articulation_H_start, joint_type, joint_q_start,
                    joint_limit_lower, joint_limit_upper, joint_friction, island_articulation_start_in,
                    island_articulations_in,
                    articulation_pair_start_in, touching_pairs_in, touching_pair_count_in, pair_row_start_in,
                    pair_dof_in, pair_dof_count_in, mass_matrix_in, accel_free_in, row_jacobian_in, row_weight_in,
                    row_violation_in, joint_q_in, joint_qd_in, accel_in, dof_row_settings_in, side_column, limits,
                    friction_rows, impedance, mujoco_weights, gradient_out, row_curvature_out,
                    dof_curvature_out)
    island_hessian(island, articulation_dof_start, articulation_H_start, dof_slot_in, island_dof_start_in,
                   island_H_start_in, island_articulation_start_in, island_articulations_in,
                   articulation_pair_start_in, touching_pairs_in, touching_pair_count_in, pair_row_start_in,
                   pair_dof_in, pair_dof_count_in, mass_matrix_in, row_jacobian_in, row_weight_in, row_curvature_out,
                   dof_curvature_out, side_column, impedance, hessian_out)


@wp.func
def line_slope(
    alpha: wp.Float,
    dof_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    e0: int,
    e1: int,
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    row_step: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    step: wp.array(dtype=wp.Float),
    dof_row_settings: wp.array2d(dtype=wp.Float),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    limits: int,
    friction_rows: int,
    mujoco_weights: int,
):
    """(phi'(alpha), phi''(alpha)) of the rows' part of the cost along a - alpha d: every row
    x_r(alpha) = x_r - alpha J_r d of the pairs in contact of the island's articulations
    (``island_articulations`` e0 to e1; ``touching_pairs``) adds -D s min(0, x) and
    D s^2 [x < 0] with s = J_r d (``row_step``); the rows on one dof (``dof_rows``: limits,
    friction) add -s dcost/da and s^2 d^2cost/da^2 at a - alpha d."""
    zero = alpha * type(alpha)(0.0)
    slope = zero
    curvature = zero
    for e in range(e0, e1):
        art = island_articulations[e]
        for entry in range(articulation_pair_start[art], articulation_pair_start[art] + touching_pair_count[art]):
            pair = touching_pairs[entry]  # each pair once, by the articulation of its shape a
            for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                if row_weight[first] != zero:  # slots not in contact (most) add nothing; edges share the weight
                    for r in range(first, first + EDGES):
                        s = row_step[r]
                        x = row_violation[r] - alpha * s
                        slope -= s * row_force(row_weight[r], x)
                        curvature += row_active(row_weight[r], x) * s * s
    if limits != 0 or friction_rows != 0:
        for e in range(e0, e1):
            art = island_articulations[e]
            d0 = articulation_dof_start[art]
            n = articulation_dof_start[art + 1] - d0
            for dof in range(d0, d0 + n):
                j = dof_joint[dof]
                s = step[dof]
                force, active = dof_rows(joint_type[j], joint_q[joint_q_start[j]], joint_qd[dof],
                                         accel[dof] - alpha * s, joint_limit_lower[dof], joint_limit_upper[dof],
                                         joint_friction[dof], mass_matrix[articulation_H_start[art] + (dof - d0) * (n + 1)],
                                         dof_row_settings, dof, mujoco_weights, limits, friction_rows)
                slope -= s * force
                curvature += active * s * s
    return slope, curvature


@wp.func
def step_ratio(e0: int, e1: int, island_articulations: wp.array(dtype=int), articulation_dof_start: wp.array(dtype=int),
               step: wp.array(dtype=wp.Float), accel: wp.array(dtype=wp.Float)):
    """max |step| / (1 + max |accel|) over the dofs of the articulations ``island_articulations``
    e0 to e1."""
    zero = accel[0] * type(accel[0])(0.0)
    largest_step = zero
    largest_accel = zero
    for e in range(e0, e1):
        art = island_articulations[e]
        for i in range(articulation_dof_start[art], articulation_dof_start[art + 1]):
            largest_step = wp.max(largest_step, wp.abs(step[i]))
            largest_accel = wp.max(largest_accel, wp.abs(accel[i]))
    return largest_step / (type(zero)(1.0) + largest_accel)


LINE_SEARCH_EVALUATIONS = 61
"""Evaluations of phi' at most per line search (bisection halves the bracket at each)."""


@wp.func
def island_line_search(
    island: int,
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_dof_start: wp.array(dtype=int),
    island_articulation_start: wp.array(dtype=int),
    island_articulations: wp.array(dtype=int),
    articulation_pair_start: wp.array(dtype=int),
    touching_pairs: wp.array(dtype=int),
    touching_pair_count: wp.array(dtype=int),
    pair_row_start: wp.array(dtype=int),
    pair_dof: wp.array2d(dtype=int),
    pair_dof_count: wp.array2d(dtype=int),
    mass_matrix: wp.array(dtype=wp.Float),
    accel_free: wp.array(dtype=wp.Float),
    row_jacobian: wp.array2d(dtype=wp.Float),
    row_weight: wp.array(dtype=wp.Float),
    row_violation: wp.array(dtype=wp.Float),
    joint_q: wp.array(dtype=wp.Float),
    joint_qd: wp.array(dtype=wp.Float),
    accel: wp.array(dtype=wp.Float),
    step: wp.array(dtype=wp.Float),
    dof_row_settings: wp.array2d(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    mujoco_weights: int,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    ascent_alpha: wp.Float,
    row_step: wp.array(dtype=wp.Float),
):
    """Island ``island``'s exact step length (see ``soft_contact_line_search``), ``ascent_alpha``
    where d is not a descent direction; J_r d of its rows in contact go to ``row_step`` once,
    before the evaluations."""
    i0 = island_dof_start[island]
    i1 = island_dof_start[island + 1]
    e0 = island_articulation_start[island]
    e1 = island_articulation_start[island + 1]
    zero = accel[0] * type(accel[0])(0.0)
    one = zero + type(zero)(1.0)
    if i1 == i0:  # an island without dofs has nothing to search
        return one
    if step_ratio(e0, e1, island_articulations, articulation_dof_start, step, accel) <= tolerance:
        return one
    dhd = zero  # d^T H d
    dhr = zero  # d^T H (a - a0)
    for e in range(e0, e1):
        art = island_articulations[e]
        d0 = articulation_dof_start[art]
        n = articulation_dof_start[art + 1] - d0
        h0 = articulation_H_start[art]
        for i in range(n):
            for k in range(n):
                h = mass_matrix[h0 + i * n + k] * step[d0 + i]
                dhd += h * step[d0 + k]
                dhr += h * (accel[d0 + k] - accel_free[d0 + k])
        for entry in range(articulation_pair_start[art], articulation_pair_start[art] + touching_pair_count[art]):
            pair = touching_pairs[entry]  # each pair once, by the articulation of its shape a
            for first in range(pair_row_start[pair], pair_row_start[pair + 1], EDGES):
                if row_weight[first] != zero:
                    times = slot_times(first, pair, pair_dof, pair_dof_count, side_column, row_jacobian, step)
                    for e in range(EDGES):
                        row_step[first + e] = times[e]
    # evaluation 0 at alpha = 0 gives phi'(0); then Newton steps on phi' from alpha = 1
    alpha = zero
    start = zero
    lo = zero
    hi = -one  # no upper bracket yet
    for evaluation in range(LINE_SEARCH_EVALUATIONS):
        slope, curvature = line_slope(
            alpha, dof_joint, joint_type, joint_q_start, joint_limit_lower, joint_limit_upper, joint_friction, e0,
            e1, island_articulations, articulation_pair_start, touching_pairs, touching_pair_count, pair_row_start,
            mass_matrix, row_weight, row_violation, row_step, joint_q, joint_qd, accel, step, dof_row_settings,
            articulation_dof_start, articulation_H_start, limits, friction_rows, mujoco_weights)
        slope += alpha * dhd - dhr
        curvature += dhd
        if evaluation == 0:
            start = slope
            alpha = one
            if not (start < zero and curvature > zero):  # not a descent direction
                alpha = ascent_alpha
                break
            continue
        if wp.abs(slope) <= slope_tolerance * wp.abs(start):
            break
        if slope < zero:
            lo = alpha
        else:
            hi = alpha
        trial = alpha - slope / curvature
        if hi >= zero and (trial <= lo or trial >= hi):
            trial = type(zero)(0.5) * (lo + hi)
        if trial == alpha:  # no step left in this precision
            break
        alpha = trial
    return alpha


@kernel(enable_backward=False)
def soft_contact_line_search(
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    island_dof_start_in: wp.array(dtype=int),
    island_articulation_start_in: wp.array(dtype=int),
    island_articulations_in: wp.array(dtype=int),
    articulation_pair_start_in: wp.array(dtype=int),
    touching_pairs_in: wp.array(dtype=int),
    touching_pair_count_in: wp.array(dtype=int),
    pair_row_start_in: wp.array(dtype=int),
    pair_dof_in: wp.array2d(dtype=int),
    pair_dof_count_in: wp.array2d(dtype=int),
    mass_matrix_in: wp.array(dtype=wp.Float),
    accel_free_in: wp.array(dtype=wp.Float),
    row_jacobian_in: wp.array2d(dtype=wp.Float),
    row_weight_in: wp.array(dtype=wp.Float),
    row_violation_in: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    accel_in: wp.array(dtype=wp.Float),
    step_in: wp.array(dtype=wp.Float),
    dof_row_settings_in: wp.array2d(dtype=wp.Float),
    side_column: int,
    limits: int,
    friction_rows: int,
    mujoco_weights: int,
    tolerance: wp.Float,
    slope_tolerance: wp.Float,
    ascent_alpha: wp.Float,
    row_step_out: wp.array(dtype=wp.Float),
    alpha_out: wp.array(dtype=wp.Float),
):
    """One thread per island: the exact minimiser alpha >= 0 of the (convex, piecewise
    quadratic) cost phi(alpha) = f(a - alpha d) along the Newton step d, by Newton steps on
    the piecewise-linear phi' kept inside a bracket (bisection where a step leaves it), until
    |phi'| <= slope_tolerance |phi'(0)| or no step is left in the precision; ``ascent_alpha``
    where d is not a descent direction (1 for a Newton step, whose gradient is then zero to
    rounding; 0 for the warm start's search); 1 where d is already within the convergence
    tolerance (max |d| <= tolerance (1 + max |a|), where the search would only see rounding and
    the full step keeps an unrolled adjoint exact). J_r d of every row in contact is computed once, into
    ``row_step_out``."""
    island = wp.tid()
    alpha_out[island] = island_line_search(
        island, dof_joint, articulation_dof_start, articulation_H_start, joint_type, joint_q_start, joint_limit_lower,
        joint_limit_upper, joint_friction, island_dof_start_in, island_articulation_start_in, island_articulations_in,
        articulation_pair_start_in, touching_pairs_in, touching_pair_count_in, pair_row_start_in, pair_dof_in,
        pair_dof_count_in, mass_matrix_in, accel_free_in, row_jacobian_in, row_weight_in, row_violation_in,
        joint_q_in, joint_qd_in, accel_in, step_in, dof_row_settings_in, side_column, limits, friction_rows,
        mujoco_weights, tolerance, slope_tolerance, ascent_alpha, row_step_out)


@kernel
def newton_update(accel_in: wp.array(dtype=wp.Float), step_in: wp.array(dtype=wp.Float),
                  alpha_in: wp.array(dtype=wp.Float), dof_island_in: wp.array(dtype=int),
                  island_done_in: wp.array(dtype=int), accel_out: wp.array(dtype=wp.Float)):
    """accel_out = accel_in - alpha_in[island] step_in: the line-searched Newton step; accel_in
    itself for an island that has converged (``island_done_in``), which stops there as the
    fused step's thread does."""
    i = wp.tid()
    island = dof_island_in[i]
    if island_done_in[island] != 0:
        accel_out[i] = accel_in[i]
    else:
        accel_out[i] = accel_in[i] - alpha_in[island] * step_in[i]


@kernel(enable_backward=False)
def island_residual(articulation_dof_start: wp.array(dtype=int), island_dof_start_in: wp.array(dtype=int),
                    island_articulation_start_in: wp.array(dtype=int), island_articulations_in: wp.array(dtype=int),
                    step_in: wp.array(dtype=wp.Float), accel_in: wp.array(dtype=wp.Float),
                    residual_out: wp.array(dtype=wp.Float)):
    """One thread per island: max |Newton step| / (1 + max |a|) over its dofs, the optimality
    residual Hess^-1 grad f relative to the accelerations (read by the host)."""
    island = wp.tid()
    residual_out[island] = type(residual_out[island])(0.0)
    if island_dof_start_in[island + 1] > island_dof_start_in[island]:
        residual_out[island] = step_ratio(island_articulation_start_in[island],
                                          island_articulation_start_in[island + 1], island_articulations_in,
                                          articulation_dof_start, step_in, accel_in)


@kernel
def to_island_order(values_in: wp.array(dtype=wp.Float), island_dofs_in: wp.array(dtype=int),
                    ordered_out: wp.array(dtype=wp.Float)):
    """ordered_out[p] = values_in[island_dofs_in[p]]: a dof vector in the islands' order."""
    p = wp.tid()
    ordered_out[p] = values_in[island_dofs_in[p]]


@kernel
def from_island_order(ordered_in: wp.array(dtype=wp.Float), island_dofs_in: wp.array(dtype=int),
                      values_out: wp.array(dtype=wp.Float)):
    """values_out[island_dofs_in[p]] = ordered_in[p]: back to the model's dof order."""
    p = wp.tid()
    values_out[island_dofs_in[p]] = ordered_in[p]


@kernel(enable_backward=False)
def difference(values_in: wp.array(dtype=wp.Float), subtracted_in: wp.array(dtype=wp.Float),
               result_out: wp.array(dtype=wp.Float)):
    """result_out = values_in - subtracted_in."""
    i = wp.tid()
    result_out[i] = values_in[i] - subtracted_in[i]


@kernel(enable_backward=False)
def negate(values_in: wp.array(dtype=wp.Float), result_out: wp.array(dtype=wp.Float)):
    """result_out = -values_in."""
    i = wp.tid()
    result_out[i] = -values_in[i]
