"""Soft-constraint rigid contact solved by Newton iterations, differentiated implicitly (one
transposed solve at the converged accelerations) or by unrolling every iteration on the
tape. See ``wpsim.kernels.soft_contact`` for the formulation."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.core.limits import require_memory
from wpsim.core.tape import active_tape, tape_paused
from wpsim.kernels import rigid_contact, soft_contact, soft_contact_newton
from wpsim.kernels.generic import for_precision
from wpsim.solvers.articulation_size import MAX_ARTICULATION_DOFS
from wpsim.solvers.prepared_launch import launch_unrecorded
from wpsim.solvers.soft_contact_options import ROUNDING_STEPS, SoftContactOptions, check_soft_contact_options


def articulation_worlds(model) -> np.ndarray:
    """(A,) world of each articulation (of its root body)."""
    if model.joint_count == 0:
        return np.zeros(model.articulation_count, np.int64)
    joint_art, child = model.joint_articulation.numpy(), model.joint_child.numpy()
    root_joint = np.searchsorted(joint_art, np.arange(model.articulation_count))
    return model.body_world.numpy()[child[np.minimum(root_joint, len(child) - 1)]].astype(np.int64)


def contact_islands(articulation_count: int, art_a: np.ndarray, art_b: np.ndarray,
                    touching: np.ndarray | None = None) -> np.ndarray:
    """Island of each articulation: the connected components of the articulations joined by
    the pairs (shape a's articulation ``art_a``, shape b's ``art_b``, -1 for a static shape)
    that are ``touching`` (all when None), numbered in the order of their first
    articulation. Returns (A,) island indices."""
    from scipy.sparse import coo_matrix  # scipy loads on first use: ``import wpsim`` stays light
    from scipy.sparse.csgraph import connected_components

    linked = (art_b >= 0) & (art_b != art_a)
    if touching is not None:
        linked &= touching
    graph = coo_matrix((np.ones(int(linked.sum())), (art_a[linked], art_b[linked])),
                       shape=(articulation_count, articulation_count))
    _, labels = connected_components(graph, directed=False)
    first = np.full(labels.max(initial=-1) + 1, articulation_count)
    np.minimum.at(first, labels, np.arange(articulation_count))
    rank = np.empty_like(first)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[labels].astype(np.int64)


@dataclass
class Islands:
    """The islands of a step (articulations whose bodies touch, solved together; every
    other articulation alone), on the model's device. Island i holds the articulations
    ``articulations[articulation_start[i]:articulation_start[i + 1]]`` and the dofs
    ``dofs[dof_start[i]:dof_start[i + 1]]`` (its Hessian's row order)."""

    labels: np.ndarray  # (A,) island of each articulation (host)
    count: int
    articulation_start: wp.array  # (islands + 1,) int32, into articulations
    articulations: wp.array  # (A,) int32, island by island, ascending within one
    dof_start: wp.array  # (islands + 1,) int32, into dofs
    H_start: wp.array  # (islands + 1,) int32, starts of the dense (n x n) Hessians
    dofs: wp.array  # (D,) int32, island by island
    dof_island: wp.array  # (D,) int32
    dof_slot: wp.array  # (D,) int32, position of each dof in dofs
    hessian_size: int  # sum of n^2
    largest: int  # dofs of the largest island
    world: np.ndarray  # (islands,) world of each island (host)


def pair_columns(model, pairs: np.ndarray, shape_body: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Jacobian columns of each shape pair's rows: (columns (P, 2, W) int32, the dof of
    column c of side s, ascending, -1 beyond the side's count; counts (P, 2) int32), W the most
    columns of any side (at least 1). A side's columns are the dofs whose joint is its body's
    joint or an ancestor of it (the only dofs that move the body's points); where both shapes
    are on one articulation both sides take the union of their two lists, so that column c
    is the same dof on both sides (``soft_contact_newton``'s shared pairs); a static shape b
    has none."""
    count = len(pairs)
    lists = [[[], []] for _ in range(count)]
    if model.body_count and count:
        body_joint = model.body_joint.numpy()
        dfs_pos, dfs_end = model.joint_dfs_pos.numpy(), model.joint_dfs_end.numpy()
        articulation = model.joint_articulation.numpy()
        dof_joint = model.dof_joint.numpy()
        dof_start = model.articulation_dof_start.numpy()

        def moving(body: int) -> np.ndarray:
            joint = body_joint[body]
            art = articulation[joint]
            dofs = np.arange(dof_start[art], dof_start[art + 1])
            owner = dof_joint[dofs]
            return dofs[(dfs_pos[owner] <= dfs_pos[joint]) & (dfs_pos[joint] < dfs_end[owner])]

        for i, (a, b) in enumerate(pairs):
            body_a, body_b = shape_body[a], shape_body[b]
            lists[i][0] = moving(body_a)
            if body_b >= 0:
                lists[i][1] = moving(body_b)
                if articulation[body_joint[body_b]] == articulation[body_joint[body_a]]:
                    lists[i][0] = lists[i][1] = np.union1d(lists[i][0], lists[i][1])
    counts = np.array([[len(side) for side in sides] for sides in lists], np.int32).reshape(count, 2)
    width = max(int(counts.max(initial=0)), 1)
    columns = np.full((count, 2, width), -1, np.int32)
    for i, sides in enumerate(lists):
        for side, dofs in enumerate(sides):
            columns[i, side, :len(dofs)] = dofs
    return columns, counts


@dataclass
class PairRows:
    """The shape pairs a step builds rows for (every candidate pair, or the broad phase's near
    ones) and their row layout, on the model's device (``count`` pairs, ``row_count`` rows)."""

    chosen: np.ndarray  # (S,) indices of the pairs in the model's contact_pair (host)
    count: int
    row_count: int
    contact_pair: wp.array  # (S, 2) int32 shapes (a on a body, b static or on a body)
    pair_row_start: wp.array  # (S + 1,) int32 first row of each pair (EDGES per contact slot)
    row_pair: wp.array  # (R,) int32 pair of each row
    pair_dof: wp.array  # (S, 2 side_column) int32 the dof of each Jacobian column (``pair_columns``; -1: none)
    pair_dof_count: wp.array  # (S, 2) int32 columns of each side (0: static b)
    pair_articulation: wp.array  # (S,) int32 articulation of shape a: its island's line search counts the pair
    articulation_pair_start: wp.array  # (A + 1,) int32 into articulation_pairs
    articulation_pairs: wp.array  # (pairs per articulation,) int32 pairs involving each articulation (either side)
    articulations: tuple  # (art_a, art_b) (S,) each, host; -1: static b
    row_bounds: tuple  # (first, end) (S,) each, host: each pair's rows
    point_rows: np.ndarray  # (contact points,) host: the first row of each contact point's slots


class SoftContact:
    """The contact rows and Newton solve of one model: bodies against static shapes and
    against each other, articulations whose bodies touch at a step solved together as one
    island (``Islands``); joint limits and dry friction as rows of their own dof."""

    def __init__(self, model, options: SoftContactOptions, broad_phase=None):
        check_soft_contact_options(options)
        self.model, self.options = model, options
        pairs = model.contact_pair.numpy().reshape(-1, 2)
        shape_body = model.shape_body.numpy()
        body_art = model.joint_articulation.numpy()[model.body_joint.numpy()] if model.body_count else np.zeros(0, int)
        body_b = shape_body[pairs[:, 1]]
        art_a = body_art[shape_body[pairs[:, 0]]]
        art_b = np.where(body_b >= 0, body_art[np.maximum(body_b, 0)] if len(body_art) else -1, -1)
        self.pair_count = len(pairs)
        """Candidate pairs."""
        self._candidate_articulations = (art_a, art_b)
        self._candidate_pairs = pairs
        self._dof_start = model.articulation_dof_start.numpy().copy()
        """Host copies the per-step layouts (``_pair_rows``, ``_islands``) read."""
        self._slots, self._parts = self._slot_counts()
        self._columns = pair_columns(model, pairs, shape_body)
        """(every candidate pair's columns (P, 2, side_column) int, their counts (P, 2)): host
        arrays ``_pair_rows`` picks from."""
        self.side_column = self._columns[0].shape[2]
        self.jacobian_width = self.side_column * (2 if (art_b >= 0).any() else 1)
        """Columns of a row's Jacobian: the dofs that move shape a's body (``pair_columns``),
        then (from ``side_column``) those that move shape b's when some pair has b on a body."""
        self.broad_phase = broad_phase
        """The ``RigidBroadPhase`` choosing each step's pairs (those whose boxes overlap), or
        None: every candidate pair."""
        if broad_phase is not None:
            keys = pairs.astype(np.int64) @ np.array([model.shape_count, 1])
            self._key_order = np.argsort(keys)
            self._sorted_keys = keys[self._key_order]
            self._near = (wp.zeros((broad_phase.capacity, 2), dtype=int, device=model.device),
                          wp.zeros(1, dtype=int, device=model.device))
        self.pairs = None
        self.pairs = self._all_pairs = self._pair_rows(np.arange(self.pair_count))
        """The latest step's ``PairRows``."""
        self.last_iterations = 0
        """Newton iterations of the latest staged step (the fused step keeps its record on the
        device: ``status``)."""
        self._articulation_world = articulation_worlds(model)
        self.islands = self._checked_islands = None
        self.islands = self._candidate_islands = self._islands(contact_islands(model.articulation_count, art_a,
                                                                                art_b))
        if options.fixed_iterations:  # every step solves the candidate islands: refused up front if too large
            self._solvable(self._candidate_islands)
        """The latest step's ``Islands``; before the first step (and at every step with
        ``fixed_iterations``, which reads nothing back) those of all candidate pairs."""
        self._device_status_arrays()
        self.reset_status()
        self._last_in_contact = None
        self.dof_zeros = wp.zeros(model.joint_dof_count, dtype=model.dtype, device=model.device)
        """(D,) zeros: the joint-space assembly's limit_ke, limit_kd and dry friction where
        this solve enforces the limits and friction instead."""
        self._buffers = {}
        self._kept_adjoint_buffers = {}
        self._adjoint_buffers = None
        """The arrays with gradients an adjoint reuses (``_array``), while one runs (else None)."""
        real = model.real
        self._dof_row_flags = (int(options.joint_limits), int(options.joint_friction))
        self._mujoco_weights = int(options.regularisation == "mujoco")
        self._friction_mixing = int(options.friction_mixing == "mujoco")
        self.inverse_weights = (wp.zeros((model.body_count, 2), dtype=model.dtype, device=model.device),
                                wp.zeros(model.joint_dof_count, dtype=model.dtype, device=model.device))
        """(B, 2) every body's translational (1/kg) and rotational (1/(kg m^2)) inverse weight and
        (D,) every dof's at the model's initial pose, which rows read with regularisation
        "mujoco" (``set_inverse_weights``)."""
        dof_settings = self._dof_settings()
        self.dof_row_settings = wp.array(dof_settings, dtype=model.dtype, device=model.device)
        """(D, ``soft_contact.DOF_SETTINGS``) what the rows on each dof read: its inverse weight at
        the reference pose, its limit row's solref and solimp, its friction-loss row's (the
        dof's own, ``ModelBuilder.set_joint_softness``, else these options')."""
        self._params = (real(options.time_constant), real(options.damping_ratio), real(options.impedance))
        self._impedance_curve = (real(options.impedance_min), real(options.impedance_width),
                                 real(options.impedance_midpoint), real(options.impedance_power))
        """(dmin, width m, midpoint, power) of the contacts' impedance (``impedance_at``)."""
        eps = float(np.finfo(np.float32 if model.dtype == wp.float32 else np.float64).eps)
        hardest = max(options.impedance, options.impedance_min, *self._shape_impedances(),
                      *dof_settings[:, [soft_contact.DOF_LIMIT_SOLIMP, soft_contact.DOF_LIMIT_SOLIMP + 1,
                                        soft_contact.DOF_FRICTION_SOLIMP, soft_contact.DOF_FRICTION_SOLIMP + 1]].ravel())
        self._tolerance = max(options.tolerance, ROUNDING_STEPS * eps * (1.0 + hardest / (1.0 - hardest)))
        self._slope_tolerance = max(1e-13, 1e3 * eps)
        """The line search stops where |phi'| <= this * |phi'(0)| (float32: 1.2e-4)."""

    def _shape_impedances(self) -> np.ndarray:
        """dmin and dmax of every shape with soft-contact settings of its own."""
        own = np.any(self.model.shape_solref.numpy() != 0.0, axis=1)
        return self.model.shape_solimp.numpy()[own, :2].ravel()

    def _dof_settings(self, dof_inverse_weight: np.ndarray | None = None) -> np.ndarray:
        """The host values of ``dof_row_settings``: each dof's own limit and friction settings,
        these options' where its solref is 0 0, and ``dof_inverse_weight`` (zeros if None)."""
        m, o = self.model, self.options
        settings = np.zeros((m.joint_dof_count, soft_contact.DOF_SETTINGS))
        if dof_inverse_weight is not None:
            settings[:, soft_contact.DOF_INVERSE_WEIGHT] = dof_inverse_weight
        options = ((o.time_constant, o.damping_ratio),
                   (o.impedance_min, o.impedance, o.impedance_width, o.impedance_midpoint, o.impedance_power))
        for kind, ref_column, imp_column in (("limit", soft_contact.DOF_LIMIT_SOLREF, soft_contact.DOF_LIMIT_SOLIMP),
                                             ("friction", soft_contact.DOF_FRICTION_SOLREF,
                                              soft_contact.DOF_FRICTION_SOLIMP)):
            solref = getattr(m, f"joint_{kind}_solref").numpy().reshape(-1, 2)
            solimp = getattr(m, f"joint_{kind}_solimp").numpy().reshape(-1, 5)
            own = np.any(solref != 0.0, axis=1)[:, None]
            settings[:, ref_column:ref_column + 2] = np.where(own, solref, options[0])
            settings[:, imp_column:imp_column + 5] = np.where(own, solimp, options[1])
        return settings

    def set_inverse_weights(self, body: np.ndarray, dof: np.ndarray):
        """The reference pose's inverse weights (``inverse_weights``, and ``dof_row_settings``'
        first column), in place."""
        self.inverse_weights[0].assign(body)
        self.inverse_weights[1].assign(dof)
        self.dof_row_settings.assign(self._dof_settings(dof))

    @property
    def island_count(self) -> int:
        """Islands of the latest step."""
        return self.islands.count

    @property
    def largest_island(self) -> int:
        """Dofs of the latest step's largest island (its dense Hessian is factored each iteration)."""
        return self.islands.largest

    def _islands(self, labels: np.ndarray) -> Islands:
        """``Islands`` from each articulation's island ``labels`` (the latest step's, unchanged,
        when they are alike)."""
        if self.islands is not None and np.array_equal(self.islands.labels, labels):
            return self.islands
        dof_start = self._dof_start
        count = int(labels.max(initial=-1)) + 1
        articulations = np.lexsort((np.arange(len(labels)), labels))
        articulation_start = np.searchsorted(labels[articulations], np.arange(count + 1))
        dof_label = np.repeat(labels, np.diff(dof_start))
        dofs = np.argsort(dof_label, kind="stable")
        dof_slot = np.empty_like(dofs)
        dof_slot[dofs] = np.arange(len(dofs))
        sizes = np.bincount(dof_label, minlength=count)
        return Islands(
            labels=labels.copy(), count=count, articulation_start=self._ints(articulation_start),
            articulations=self._ints(articulations), dof_start=self._ints(np.concatenate([[0], np.cumsum(sizes)])),
            H_start=self._ints(np.concatenate([[0], np.cumsum(sizes * sizes)])), dofs=self._ints(dofs),
            dof_island=self._ints(dof_label), dof_slot=self._ints(dof_slot), hessian_size=int(np.sum(sizes * sizes)),
            largest=int(sizes.max(initial=0)),
            world=self._articulation_world[articulations[articulation_start[:-1]]])

    def _step_islands(self, pairs: PairRows, in_contact: wp.array) -> Islands:
        """The islands of the ``pairs`` with a slot in contact (reads ``in_contact`` back), or
        with ``fixed_iterations`` those of every candidate pair."""
        if self.options.fixed_iterations or pairs.row_count == 0:
            return self._candidate_islands
        contacts = np.concatenate([[0.0], np.cumsum(in_contact.numpy())])
        first, end = pairs.row_bounds
        touching = contacts[end] > contacts[first] + 0.5
        return self._solvable(self._islands(contact_islands(self.model.articulation_count, *pairs.articulations,
                                                            touching)))

    def _solvable(self, islands: Islands) -> Islands:
        """``islands``, once their dense Hessians are within reach: an island of more than
        ``MAX_ARTICULATION_DOFS`` dofs, or Hessians and factors beyond the memory budget, are
        refused (``ValueError``) naming the island's dofs and bytes."""
        if islands is self._checked_islands:
            return islands
        itemsize = wp.types.type_size_in_bytes(self.model.dtype)
        what = (f"the soft-contact solve's largest island (articulations whose bodies may touch, solved with one "
                f"dense Hessian) has {islands.largest:,} dofs")
        if islands.largest > MAX_ARTICULATION_DOFS:
            raise ValueError(f"{what}, more than the {MAX_ARTICULATION_DOFS:,} a solver steps "
                             f"(MAX_ARTICULATION_DOFS); a step factors it in one thread (about {islands.largest**3 / 6:.2g} multiply-adds): keep "
                             f"fewer bodies able to touch, or leave fixed_iterations off (islands of each step's "
                             f"contacts)")
        require_memory(f"{what}: the Hessians and factors of {islands.count:,} islands",
                       2 * islands.hessian_size * itemsize, "fewer bodies able to touch, or fewer worlds per model")
        self._checked_islands = islands
        return islands

    def _step_pairs(self, state_in) -> PairRows:
        """The pairs of this step: with a broad phase, the candidate pairs whose boxes overlap
        at ``state_in``'s poses (reads them back; the latest step's ``PairRows`` when they are
        the same), else every candidate pair."""
        if self.broad_phase is None:
            return self._all_pairs
        near, count = self._near
        self.broad_phase.find(state_in, 0.0, near, count, own_margins=True)  # rows from the shapes' margins on
        found = near.numpy()[: min(int(count.numpy()[0]), self.broad_phase.capacity)].astype(np.int64)
        at = np.searchsorted(self._sorted_keys, found @ np.array([self.model.shape_count, 1]))
        chosen = self._key_order[at]
        if self.pairs is not None and np.array_equal(self.pairs.chosen, chosen):
            return self.pairs
        return self._pair_rows(chosen)

    def reset_status(self):
        """Forget the convergence record (``unconverged``, ``most_iterations``, and the
        device's per-world record of the fused step)."""
        self.unconverged: dict = {}
        self.most_iterations = 0
        self._warned_tape = False
        self.world_iterations.zero_()
        self.world_unconverged_steps.zero_()
        self.world_first_unconverged.fill_(np.iinfo(np.int32).max)
        self.world_worst_residual.zero_()

    def _device_status_arrays(self):
        """(W,) per-world convergence record of the fused step, kept on the device: most
        iterations of a step, unconverged steps (island-steps), the first of them, their worst
        residual."""
        m = self.model
        worlds = max(m.num_worlds, 1)
        self.world_iterations = wp.zeros(worlds, dtype=wp.int32, device=m.device)
        self.world_unconverged_steps = wp.zeros(worlds, dtype=wp.int32, device=m.device)
        self.world_first_unconverged = wp.zeros(worlds, dtype=wp.int32, device=m.device)
        self.world_worst_residual = wp.zeros(worlds, dtype=m.dtype, device=m.device)

    def status(self) -> tuple:
        """(unconverged: world -> ``UnconvergedContact``, most iterations of a step) since the
        last reset, from both schedules: the staged steps' host record and the fused steps'
        device record (read back here)."""
        from wpsim.core.health import UnconvergedContact

        unconverged = {world: copy.copy(entry) for world, entry in self.unconverged.items()}
        steps = self.world_unconverged_steps.numpy()
        first, worst = self.world_first_unconverged.numpy(), self.world_worst_residual.numpy()
        for world in np.flatnonzero(steps):
            entry = unconverged.get(int(world))
            if entry is None:
                unconverged[int(world)] = UnconvergedContact(int(first[world]), int(steps[world]), float(worst[world]),
                                                             self._tolerance, self.options.iterations)
            else:
                entry.first_step = min(entry.first_step, int(first[world]))
                entry.steps += int(steps[world])
                entry.worst_residual = max(entry.worst_residual, float(worst[world]))
        return unconverged, max(self.most_iterations, int(self.world_iterations.numpy().max(initial=0)))

    def _record_convergence(self, residual: np.ndarray, step_index: int, recorded: bool, islands: Islands):
        """Book islands whose final residual is above the tolerance; warn or raise."""
        self.most_iterations = max(self.most_iterations, self.last_iterations)
        bad = np.flatnonzero(residual > self._tolerance)
        if bad.size == 0:
            return
        from wpsim.core.health import ContactNotConverged, UnconvergedContact

        for island in bad:
            world = int(islands.world[island])
            entry = self.unconverged.get(world)
            if entry is None:
                entry = self.unconverged[world] = UnconvergedContact(step_index, 0, 0.0, self._tolerance,
                                                                     self.options.iterations)
            entry.steps += 1
            entry.worst_residual = max(entry.worst_residual, float(residual[island]))
        world = int(islands.world[bad[0]])
        message = (f"step {step_index}, world {world}: the soft-contact solve stopped after "
                   f"{self.last_iterations} iterations with residual {float(residual[bad].max()):.3g} > tolerance "
                   f"{self._tolerance:.3g}")
        if self.options.raise_on_nonconvergence:
            raise ContactNotConverged(message)
        if recorded and not self._warned_tape:
            import warnings

            self._warned_tape = True
            warnings.warn(f"{message}; this step is on a tape, and its adjoint assumes a converged solve, so the "
                          "gradient may be off (raise SoftContactOptions.iterations)", stacklevel=5)

    def _ints(self, values) -> wp.array:
        return wp.array(np.asarray(values, np.int32), dtype=wp.int32, device=self.model.device)

    def _pair_rows(self, chosen: np.ndarray) -> PairRows:
        """``PairRows`` of the candidate pairs ``chosen`` (indices into ``contact_pair``)."""
        m = self.model
        art_a, art_b = (side[chosen] for side in self._candidate_articulations)
        count = len(chosen)
        rows_per_pair = self._slots[chosen] * soft_contact.EDGES
        pair_row_start = np.concatenate([[0], np.cumsum(rows_per_pair)]).astype(np.int64)
        in_pair = np.arange(pair_row_start[-1]) - np.repeat(pair_row_start[:-1], rows_per_pair)
        point_rows = in_pair % np.repeat(self._parts[chosen] * soft_contact.EDGES, rows_per_pair) == 0
        other = (art_b >= 0) & (art_b != art_a)
        touching_art = np.concatenate([art_a, art_b[other]])
        touching_pair = np.concatenate([np.arange(count), np.flatnonzero(other)])
        order = np.lexsort((touching_pair, touching_art))
        return PairRows(
            chosen=chosen.copy(), count=count, row_count=int(pair_row_start[-1]),
            contact_pair=self._ints(self._candidate_pairs[chosen].reshape(count, 2)),
            pair_row_start=self._ints(pair_row_start),
            row_pair=self._ints(np.repeat(np.arange(count), rows_per_pair)),
            pair_dof=self._ints(self._columns[0][chosen].reshape(count, 2 * self.side_column)),
            pair_dof_count=self._ints(self._columns[1][chosen].reshape(count, 2)),
            pair_articulation=self._ints(art_a),
            articulation_pair_start=self._ints(np.searchsorted(touching_art[order],
                                                              np.arange(m.articulation_count + 1))),
            articulation_pairs=self._ints(touching_pair[order]),
            articulations=(art_a, art_b), row_bounds=(pair_row_start[:-1], pair_row_start[1:]),
            point_rows=np.flatnonzero(point_rows))

    def _slot_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(contact slots of each pair: its contact points from the shared narrow phase times the
        slots each takes, those slots per point (``soft_contact.contact_parts``)), host arrays."""
        m = self.model
        points = wp.zeros(self.pair_count, dtype=wp.int32, device=m.device)
        parts = wp.zeros(self.pair_count, dtype=wp.int32, device=m.device)
        if self.pair_count:
            wp.launch(rigid_contact.pair_slot_counts, dim=self.pair_count,
                      inputs=[m.contact_pair, m.shape_kind, m.shape_point_count, m.shape_hull_point_count],
                      outputs=[points], device=m.device, record_tape=False)
            wp.launch(soft_contact.soft_contact_pair_parts, dim=self.pair_count,
                      inputs=[m.contact_pair, m.shape_condim, m.shape_priority], outputs=[parts], device=m.device,
                      record_tape=False)
        parts = parts.numpy().astype(np.int64)
        return points.numpy().astype(np.int64) * parts, parts

    def active_contacts(self) -> int:
        """Contact points that penetrated in the latest step (reads back from the device)."""
        if self.pairs.row_count == 0 or self._last_in_contact is None:
            return 0
        return int(round(float(self._last_in_contact.numpy()[self.pairs.point_rows].sum())))

    # ------------------------------------------------------------------ arrays
    def _array(self, name: str, shape, grad: bool) -> wp.array:
        """A zeroed array for ``name``: fresh (with gradient) when ``grad``, else one buffer per
        name reused from call to call, so an unrecorded step allocates nothing after the first;
        within an adjoint (``_adjoint``), whose tape is run before the next, one buffer with a
        zeroed gradient per name too.
        Callers zero nothing: every kernel writing these overwrites all entries it reads."""
        if grad and self._adjoint_buffers is None:
            return wp.zeros(shape, dtype=self.model.dtype, device=self.model.device, requires_grad=True)
        buffers = self._adjoint_buffers if grad else self._buffers
        buffer = buffers.get(name)
        if buffer is None or buffer.shape != (shape if isinstance(shape, tuple) else (shape,)):
            buffer = buffers[name] = wp.zeros(shape, dtype=self.model.dtype, device=self.model.device,
                                              requires_grad=grad)
        elif grad:
            buffer.grad.zero_()
        return buffer

    def _rows(self, pairs: PairRows, grad: bool) -> dict:
        """Row arrays of ``pairs``: jacobian (R, ``jacobian_width``), then per row (R,): velocity,
        inverse_mass, distance, in_contact, aref, weight; the pairs in contact of each articulation
        (``soft_contact_newton.touching_pair_list``): touching_pairs and touching_pair_count (A,)."""
        rows = {"jacobian": self._array("jacobian", (pairs.row_count, self.jacobian_width), grad)}
        for name in ("velocity", "inverse_mass", "distance", "in_contact", "aref", "weight"):
            rows[name] = self._array(name, pairs.row_count, grad)
        rows["touching_pairs"] = self._index_array("touching_pairs", max(pairs.articulation_pairs.shape[0], 1), grad)
        rows["touching_pair_count"] = self._index_array("touching_pair_count", self.model.articulation_count, grad)
        return rows

    def _index_array(self, name: str, length: int, fresh: bool) -> wp.array:
        """An int32 array of ``length`` for ``name``: new when ``fresh`` (a recorded step's
        backward reads its own), else one buffer per name reused from call to call."""
        fresh = fresh and self._adjoint_buffers is None
        buffer = None if fresh else self._buffers.get(name)
        if buffer is None or buffer.shape != (length,):
            buffer = wp.zeros(length, dtype=wp.int32, device=self.model.device)
            if not fresh:
                self._buffers[name] = buffer
        return buffer

    def _vector(self, name: str, grad: bool, length: int | None = None) -> wp.array:
        return self._array(name, self.model.joint_dof_count if length is None else length, grad)

    # ------------------------------------------------------------------ launches
    def _launch(self, kernel, dim, inputs, outputs, record: bool = True):
        """Launch ``kernel`` in the model's precision; recorded on an active tape if ``record``."""
        if record and active_tape() is not None:
            wp.launch(for_precision(kernel, self.model.dtype), dim=dim, inputs=inputs, outputs=outputs,
                      device=self.model.device)
            return
        launch_unrecorded(for_precision(kernel, self.model.dtype), dim, inputs, outputs, self.model.device)

    def _reorder(self, kernel, values: wp.array, islands: Islands, name: str, grad: bool, record: bool = True):
        """``values`` (D,) into or out of the islands' dof order (``to_island_order`` or
        ``from_island_order``), in the buffer ``name`` (fresh with ``grad``)."""
        out = self._vector(name, grad)
        self._launch(kernel, self.model.joint_dof_count, [values, islands.dofs], [out], record)
        return out

    def _build_rows(self, scratch, state_in, pairs: PairRows, rows):
        m = self.model
        if pairs.count == 0:
            rows["touching_pair_count"].zero_()
            return
        self._launch(
            soft_contact.soft_contact_rows, pairs.count,
            [m.shape_kind, m.shape_body, m.shape_transform, m.shape_size, m.shape_mu, m.shape_priority,
             m.shape_condim, m.shape_rotational_mu, m.shape_margin, m.shape_point_start, m.shape_points, m.shape_hull_points, m.shape_hull_point_start,
             m.shape_hull_point_count, m.shape_plane_normal, m.shape_plane_offset, m.shape_plane_start,
             m.shape_plane_count, m.shape_bound_centre, m.shape_bound_half, m.body_joint, m.body_origin,
             m.joint_articulation, m.joint_dfs_pos,
             m.joint_dfs_end, m.dof_joint, m.articulation_dof_start, m.articulation_H_start, pairs.contact_pair,
             pairs.pair_row_start, pairs.pair_dof, pairs.pair_dof_count, state_in.body_q, state_in.joint_qd, scratch.dof_motion, scratch.mass_matrix,
             self.side_column, self._friction_mixing],
            [rows[k] for k in ("jacobian", "velocity", "inverse_mass", "distance", "in_contact")],
        )
        self._launch(soft_contact.soft_contact_slot_parameters, pairs.row_count // soft_contact.EDGES,
                     [m.shape_body, m.shape_mu, m.shape_solref, m.shape_solimp, m.shape_solmix, m.shape_priority,
                      m.shape_condim, pairs.contact_pair, pairs.row_pair,
                      *(rows[k] for k in ("velocity", "inverse_mass", "distance", "in_contact")),
                      self.inverse_weights[0], *self._params, *self._impedance_curve, self._mujoco_weights,
                      m.real(self.options.impratio), self._friction_mixing],
                     [rows["aref"], rows["weight"]])
        self._launch(soft_contact_newton.soft_contact_touching_pairs, m.articulation_count,
                     [pairs.articulation_pair_start, pairs.articulation_pairs, pairs.pair_articulation,
                      pairs.pair_row_start, rows["in_contact"]],
                     [rows["touching_pairs"], rows["touching_pair_count"]], record=False)

    def _violations(self, pairs: PairRows, rows, accel, grad: bool) -> wp.array:
        """The rows' violations J_r a - aref_r at ``accel`` (0 for rows not in contact)."""
        violation = self._vector("violation", grad, pairs.row_count)
        if pairs.row_count:
            self._launch(soft_contact.soft_contact_violation, pairs.row_count,
                         [pairs.row_pair, pairs.pair_dof, pairs.pair_dof_count, rows["jacobian"], rows["aref"],
                          rows["weight"], accel, self.side_column],
                         [violation])
        return violation

    def _system(self, scratch, state_in, pairs: PairRows, rows, accel, islands: Islands, grad: bool):
        """(gradient (D,), the islands' Hessians, the rows' violations) of the contact, joint-limit
        and joint-friction cost at ``accel``."""
        m = self.model
        violation = self._violations(pairs, rows, accel, grad)
        gradient = self._vector("gradient", grad)
        hessian = self._array("hessian", islands.hessian_size, grad)
        self._launch(soft_contact_newton.soft_contact_newton_system, islands.count,
                     [m.dof_joint, m.articulation_dof_start, m.articulation_H_start, m.joint_type, m.joint_q_start,
                      m.joint_limit_lower, m.joint_limit_upper, m.joint_friction, islands.dof_slot, islands.dof_start,
                      islands.H_start, islands.articulation_start, islands.articulations,
                      pairs.articulation_pair_start, rows["touching_pairs"], rows["touching_pair_count"],
                      pairs.pair_row_start, pairs.pair_dof, pairs.pair_dof_count,
                      scratch.mass_matrix, scratch.qdd, rows["jacobian"], rows["weight"], violation, state_in.joint_q,
                      state_in.joint_qd, accel, self.dof_row_settings, self.side_column, *self._dof_row_flags,
                      self._params[2], self._mujoco_weights],
                     [gradient, self._array("row_curvature", max(pairs.row_count, 1), grad),
                      self._vector("dof_curvature", grad), hessian])
        return gradient, hessian, violation

    def _newton_direction(self, scratch, state_in, pairs: PairRows, rows, accel, islands: Islands, factor: wp.array,
                          tape) -> tuple:
        """(Hess^-1 grad of the cost at ``accel``, the rows' violations there), the Hessian's
        Cholesky factor going to ``factor`` (fresh arrays on a tape). The islands' Hessians
        are solved in their dof order."""
        from wpsim.solvers.articulation import cholesky_solve

        grad = tape is not None
        gradient, hessian, violation = self._system(scratch, state_in, pairs, rows, accel, islands, grad)
        ordered = self._reorder(soft_contact_newton.to_island_order, gradient, islands, "ordered_gradient", grad)
        ordered_step = self._vector("ordered_step", grad)
        cholesky_solve(self.model, hessian, ordered, ordered_step, factor, self._vector("work", False), tape,
                       (islands.dof_start, islands.H_start))
        return self._reorder(soft_contact_newton.from_island_order, ordered_step, islands, "step", grad), violation

    def _line_search(self, scratch, state_in, pairs: PairRows, rows, accel, step, violation, islands: Islands,
                     fresh: bool, ascent_alpha: float = 1.0) -> wp.array:
        """(islands,) exact step lengths along the Newton steps (off the tape: an unrolled
        adjoint treats them as constants, exact at convergence where they are 1); ``fresh``:
        a new array (a recorded iteration keeps its own), else a reused buffer;
        ``ascent_alpha``: the length where a step is not a descent direction."""
        m = self.model
        alpha = (wp.zeros(islands.count, dtype=m.dtype, device=m.device) if fresh
                 else self._array("alpha", islands.count, False))
        self._launch(soft_contact_newton.soft_contact_line_search, islands.count,
                     [m.dof_joint, m.articulation_dof_start, m.articulation_H_start, m.joint_type, m.joint_q_start,
                     m.joint_limit_lower, m.joint_limit_upper, m.joint_friction, islands.dof_start,
                     islands.articulation_start, islands.articulations, pairs.articulation_pair_start,
                     rows["touching_pairs"], rows["touching_pair_count"], pairs.pair_row_start, pairs.pair_dof,
                     pairs.pair_dof_count,
                     scratch.mass_matrix, scratch.qdd, rows["jacobian"], rows["weight"], violation,
                     state_in.joint_q, state_in.joint_qd, accel, step, self.dof_row_settings, self.side_column,
                     *self._dof_row_flags, self._mujoco_weights, m.real(self._tolerance),
                     m.real(self._slope_tolerance), m.real(ascent_alpha)],
                     [self._array("row_step", max(pairs.row_count, 1), False), alpha], record=False)
        return alpha

    def _warm_start(self, scratch, state_in, pairs: PairRows, rows, islands: Islands, fresh: bool) -> wp.array:
        """Where the Newton iterations start: the least-cost point on the line from the
        unconstrained ``scratch.qdd`` through ``state_in``'s warm start (``qdd`` itself where
        the line does not descend from it), as the fused step's ``contact_solve`` finds it;
        in a new array with ``fresh`` (an unrolled tape reads it at backward time)."""
        m = self.model
        direction = self._vector("warm_direction", False)
        self._launch(soft_contact_newton.difference, m.joint_dof_count, [scratch.qdd, state_in.joint_qdd_warm_start],
                     [direction], record=False)
        violation = self._violations(pairs, rows, scratch.qdd, False)
        alpha = self._line_search(scratch, state_in, pairs, rows, scratch.qdd, direction, violation, islands, False,
                                  ascent_alpha=0.0)
        start = wp.zeros(m.joint_dof_count, dtype=m.dtype, device=m.device) if fresh else self._vector("warm_start",
                                                                                                         False)
        self._launch(soft_contact_newton.newton_update, m.joint_dof_count,
                     [scratch.qdd, direction, alpha, islands.dof_island, self._done_flags(islands.count)], [start],
                     record=False)
        return start

    def _newton_step(self, scratch, state_in, pairs: PairRows, rows, accel, islands: Islands, done: wp.array, tape,
                     out_name: str):
        """One line-searched Newton step from ``accel`` into the buffer ``out_name`` (fresh
        arrays on a tape), islands flagged in ``done`` (islands,) kept where they are; returns
        (new accelerations, Newton step)."""
        grad = tape is not None
        step, violation = self._newton_direction(scratch, state_in, pairs, rows, accel, islands,
                                                 self._array("factor", islands.hessian_size, grad), tape)
        alpha = self._line_search(scratch, state_in, pairs, rows, accel, step, violation, islands, grad)
        out = self._vector(out_name, grad)
        self._launch(soft_contact_newton.newton_update, self.model.joint_dof_count,
                     [accel, step, alpha, islands.dof_island, done], [out])
        return out, step

    def _done_flags(self, count: int, flags: np.ndarray | None = None, fresh: bool = False) -> wp.array:
        """(islands,) int32 flags of the islands that have converged (``flags``, else none), in
        a reused buffer, or a new array when ``fresh`` (an unrolled tape reads each iteration's
        flags at backward time)."""
        values = np.zeros(max(count, 1), np.int32) if flags is None else flags.astype(np.int32)
        buffer = self._buffers.get("done")
        if fresh or buffer is None or buffer.shape != values.shape:
            buffer = wp.array(values, dtype=wp.int32, device=self.model.device)
            if not fresh:
                self._buffers["done"] = buffer
            return buffer
        buffer.assign(values)
        return buffer

    def _residuals(self, step, accel, islands: Islands) -> np.ndarray:
        """(islands,) max |Newton step| / (1 + max |a|) of each island (reads back)."""
        residual = self._array("residual", islands.count, False)
        self._launch(soft_contact_newton.island_residual, islands.count,
                     [self.model.articulation_dof_start, islands.dof_start, islands.articulation_start,
                      islands.articulations, step, accel], [residual], record=False)
        return residual.numpy()

    # ------------------------------------------------------------------ solve
    def solve(self, scratch, state_in, tape, step_index: int = 0, solution: wp.array | None = None) -> wp.array:
        """The constrained joint accelerations (D,) of step ``step_index``, from the
        unconstrained ``scratch.qdd`` (its Newton iterations start at ``state_in``'s warm start,
        ``SoftContactOptions.warm_start``, or there); recorded on ``tape`` (implicitly or unrolled) when
        given. Islands that reach the iteration cap above the tolerance are booked (see
        ``SoftContactOptions.raise_on_nonconvergence``). ``solution``: the step's converged
        accelerations, already found (the fused step's, replayed for its backward): no
        iterations, only the implicit adjoint's record (implicit mode).

        In implicit mode the constraint rows are built off the tape and dropped after the
        solve; the backward rebuilds them and the Hessian from the step's inputs, so a recorded
        step keeps only its solution (memory independent of the iterations and of the contact
        count)."""
        m = self.model
        if m.joint_dof_count == 0:  # only static bodies: nothing moves, nothing to solve
            self.last_iterations = 0
            return scratch.qdd
        unrolled = tape is not None and self.options.adjoint == "unrolled"
        if solution is not None:
            if tape is None or unrolled:
                raise ValueError("a given solution is replayed only on a tape with the implicit adjoint")
            pairs, islands, accel = self._all_pairs, self._candidate_islands, solution  # the fused step's
        else:
            with contextlib.nullcontext() if unrolled else tape_paused():
                pairs = self.pairs = self._step_pairs(state_in)
                rows = self._rows(pairs, unrolled)
                self._build_rows(scratch, state_in, pairs, rows)
                self._last_in_contact = rows["in_contact"]
                islands = self.islands = self._step_islands(pairs, rows["in_contact"])
                accel = self._iterate(scratch, state_in, pairs, rows, islands, tape, step_index)
            if unrolled or tape is None:
                return accel
        result = wp.clone(accel, requires_grad=True)
        read = [scratch.mass_matrix, scratch.qdd, scratch.dof_motion, state_in.body_q, state_in.joint_q,
                state_in.joint_qd, m.shape_transform, m.shape_size, m.shape_mu, m.shape_rotational_mu, m.shape_margin,
                m.shape_solref, m.shape_solimp, m.shape_solmix, m.shape_points, m.shape_hull_points,
                m.shape_plane_normal, m.shape_plane_offset, m.body_origin,
                m.joint_limit_lower, m.joint_limit_upper, m.joint_friction]  # the backward writes their gradients
        tape.record_func(backward=lambda: self._adjoint(scratch, state_in, result, pairs, islands),
                         arrays=[result, *(a for a in read if a.requires_grad and a.size)])
        return result

    def _iterate(self, scratch, state_in, pairs: PairRows, rows, islands: Islands, tape, step_index: int) -> wp.array:
        """The Newton iterations of ``solve`` (on ``tape`` when the adjoint is unrolled), each
        island stopping at its first step within the tolerance; books the unconverged ones."""
        unrolled = tape is not None and self.options.adjoint == "unrolled"
        accel, residual = scratch.qdd, None
        if self.options.warm_start:
            accel = self._warm_start(scratch, state_in, pairs, rows, islands, unrolled)
        done = self._done_flags(islands.count)
        for k in range(self.options.iterations):  # off the tape: alternate between two buffers
            accel, step = self._newton_step(scratch, state_in, pairs, rows, accel, islands, done,
                                            tape if unrolled else None, f"accel{k % 2}")
            if not self.options.fixed_iterations:
                # an island stops at its first step within the tolerance (its residual is that step's)
                finished = None if residual is None else residual <= self._tolerance
                latest = self._residuals(step, accel, islands)
                residual = latest if finished is None else np.where(finished, residual, latest)
                if residual.max(initial=0.0) <= self._tolerance:
                    break
                done = self._done_flags(islands.count, residual <= self._tolerance, fresh=unrolled)
        self.last_iterations = k + 1
        if residual is not None:
            self._record_convergence(residual, step_index, tape is not None, islands)
        return accel

    def _adjoint(self, scratch, state_in, result, pairs: PairRows, islands: Islands):
        """IFT backward: the optimality residual (the cost's gradient) and its Hessian rebuilt at
        the solution from the step's inputs (its rows from the poses, velocities, motion columns
        and mass matrix; a0) on a tape of its own, lambda = Hess^-1 dL/da, then that tape's
        backward with seed -lambda."""
        from wpsim.solvers.articulation import cholesky_solve

        m = self.model
        detached = self._vector("detached", False)
        self._adjoint_buffers = self._kept_adjoint_buffers
        try:
            with tape_paused():
                wp.copy(detached, result)
                residual_tape = wp.Tape()
                with residual_tape:
                    rows = self._rows(pairs, True)
                    self._build_rows(scratch, state_in, pairs, rows)
                    gradient, hessian, _ = self._system(scratch, state_in, pairs, rows, detached, islands, True)
                ordered = self._reorder(soft_contact_newton.to_island_order, result.grad, islands, "ordered_gradient",
                                        False, False)
                ordered_lam = self._vector("ordered_step", False)
                cholesky_solve(m, hessian, ordered, ordered_lam, self._array("factor", islands.hessian_size, False),
                               self._vector("work", False), None, (islands.dof_start, islands.H_start))
                lam = self._reorder(soft_contact_newton.from_island_order, ordered_lam, islands, "step", True, False)
                seed = self._vector("seed", False)
                wp.launch(for_precision(soft_contact_newton.negate, m.dtype), dim=m.joint_dof_count, inputs=[lam],
                          outputs=[seed], device=m.device, record_tape=False)
                residual_tape.backward(grads={gradient: seed})
        finally:
            self._adjoint_buffers = None
