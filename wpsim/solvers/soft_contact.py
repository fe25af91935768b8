"""Soft-constraint rigid contact solved by Newton iterations, differentiated implicitly (one
transposed solve at the converged accelerations) or by unrolling every iteration on the
tape. See ``wpsim.kernels.soft_contact`` for the formulation."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.core.tape import tape_paused
from wpsim.kernels import rigid_contact, soft_contact
from wpsim.kernels.generic import for_precision

ADJOINTS = ("implicit", "unrolled")


@dataclass
class SoftContactOptions:
    """Settings of the soft-constraint contact solve.

    joint_limits: revolute and prismatic joint limits are soft constraints of the same
        solve (same time constant, damping ratio and impedance; the model's limit_ke and
        limit_kd are not used); False keeps them as penalty springs.
    iterations: Newton iterations at most (all of them with ``fixed_iterations``); each
        step is scaled by an exact line search on the cost, so the cost decreases every
        iteration and the iterates cannot cycle.
    tolerance: stop when every island's largest Newton step (the optimality residual
        Hess^-1 grad f) is below tolerance * (1 + max |a|); at
        least 32 machine epsilons of the model's precision (float32: 3.8e-6), below which
        rounding keeps the steps from shrinking.
    fixed_iterations: run exactly ``iterations`` (for benchmarks; no host read-back, so no
        convergence report).
    raise_on_nonconvergence: raise ``ContactNotConverged`` at a step whose solve stops at
        the cap above the tolerance (otherwise it is counted in ``solver.health()``, and a
        recorded step warns once that its adjoint assumes a converged solve).
    adjoint: "implicit" (backward = one solve at the solution, memory independent of the
        iterations) or "unrolled" (every iteration recorded on the tape).
    time_constant (s), damping_ratio: the reference acceleration's spring and damper.
    impedance: in (0, 1); closer to 1 makes contacts harder. Soft constraints let a
    sticking contact creep slowly (a 4 kg box on a 0.3 rad incline with mu = 0.5: about
    1.0 mm/s at the defaults, 11 mm/s at impedance 0.9) and sink slightly (0.01 mm).
    """

    joint_limits: bool = True
    joint_friction: bool = True
    iterations: int = 20
    tolerance: float = 1e-10
    fixed_iterations: bool = False
    raise_on_nonconvergence: bool = False
    adjoint: str = "implicit"
    time_constant: float = 0.02
    damping_ratio: float = 1.0
    impedance: float = 0.99


def contact_islands(articulation_count: int, art_a: np.ndarray, art_b: np.ndarray) -> np.ndarray:
    """Island of each articulation: runs of consecutive articulations joined wherever a
    candidate pair links two of them (art_b < 0: static shape), so every island's dofs are
    contiguous. Since candidate pairs link every two articulations with shapes in one world,
    an island is in practice such a world's articulations; its dense Hessian is factored
    each Newton iteration (cubic in its dofs). Returns (A,) island indices."""
    join = np.zeros(articulation_count + 1, np.int64)  # join[t] > 0: articulation t+1 joins t's island
    linked = (art_b >= 0) & (art_b != art_a)
    lo, hi = np.minimum(art_a, art_b)[linked], np.maximum(art_a, art_b)[linked]
    np.add.at(join, lo, 1)
    np.add.at(join, hi, -1)
    joined = np.cumsum(join)[: max(articulation_count - 1, 0)] > 0
    return np.concatenate([[0], np.cumsum(~joined)]).astype(np.int64)[:articulation_count]


class SoftContact:
    """The contact rows and Newton solve of one model: bodies against static shapes and
    against each other, articulations that may touch solved together as one island; joint
    limits and dry friction as rows of their own dof."""

    def __init__(self, model, options: SoftContactOptions):
        if options.adjoint not in ADJOINTS:
            raise ValueError(f"soft contact adjoint must be one of {ADJOINTS}, got {options.adjoint!r}")
        if options.iterations < 1 or not options.time_constant > 0 or not 0.0 < options.impedance < 1.0:
            raise ValueError("soft contact needs iterations >= 1, time_constant > 0 s and 0 < impedance < 1")
        self.model, self.options = model, options
        pairs = model.contact_pair.numpy().reshape(-1, 2)
        shape_body = model.shape_body.numpy()
        body_art = model.joint_articulation.numpy()[model.body_joint.numpy()] if model.body_count else np.zeros(0, int)
        body_b = shape_body[pairs[:, 1]]
        art_a = body_art[shape_body[pairs[:, 0]]]
        art_b = np.where(body_b >= 0, body_art[np.maximum(body_b, 0)] if len(body_art) else -1, -1)
        self.pair_count = len(pairs)
        sizes = self._island_layout(contact_islands(model.articulation_count, art_a, art_b))
        self._row_layout(art_a, art_b)
        self.pair_articulation = self._ints(art_a)
        """Articulation of each pair's shape a: the one whose island's line search counts it."""
        self.largest_island = int(sizes.max(initial=0))
        """Dofs of the largest island (its dense Hessian is solved by Cholesky each iteration)."""
        self.last_iterations = 0
        """Newton iterations of the latest step."""
        self._island_world = self._island_worlds()
        self.reset_status()
        self._last_in_contact = None
        self.dof_zeros = wp.zeros(model.joint_dof_count, dtype=model.dtype, device=model.device)
        """(D,) zeros: the joint-space assembly's limit_ke, limit_kd and dry friction where
        this solve enforces the limits and friction instead."""
        self._buffers = {}
        real = model.real
        self._dof_row_flags = (int(options.joint_limits), int(options.joint_friction))
        self._params = (real(options.time_constant), real(options.damping_ratio), real(options.impedance))
        self._tolerance = max(options.tolerance, 32.0 * float(np.finfo(np.float32 if model.dtype == wp.float32
                                                                      else np.float64).eps))

    def _island_worlds(self) -> np.ndarray:
        """(islands,) world of each island (of its first articulation's root body)."""
        m = self.model
        if m.joint_count == 0:
            return np.zeros(self.island_count, np.int64)
        joint_art, child = m.joint_articulation.numpy(), m.joint_child.numpy()
        root_joint = np.searchsorted(joint_art, self.island_articulation_start.numpy()[:-1])
        return m.body_world.numpy()[child[np.minimum(root_joint, len(child) - 1)]].astype(np.int64)

    def reset_status(self):
        """Forget the convergence record (``unconverged``, ``most_iterations``)."""
        self.unconverged: dict = {}
        self.most_iterations = 0
        self._warned_tape = False

    def _record_convergence(self, residual: np.ndarray, step_index: int, recorded: bool):
        """Book islands whose final residual is above the tolerance; warn or raise."""
        self.most_iterations = max(self.most_iterations, self.last_iterations)
        bad = np.flatnonzero(residual > self._tolerance)
        if bad.size == 0:
            return
        from wpsim.core.health import ContactNotConverged, UnconvergedContact

        for island in bad:
            world = int(self._island_world[island])
            entry = self.unconverged.get(world)
            if entry is None:
                entry = self.unconverged[world] = UnconvergedContact(step_index, 0, 0.0, self._tolerance,
                                                                     self.options.iterations)
            entry.steps += 1
            entry.worst_residual = max(entry.worst_residual, float(residual[island]))
        world = int(self._island_world[bad[0]])
        message = (f"step {step_index}, world {world}: the soft-contact solve stopped after "
                   f"{self.last_iterations} iterations with residual {float(residual[bad].max()):.3g} > tolerance "
                   f"{self._tolerance:.3g}")
        if self.options.raise_on_nonconvergence:
            raise ContactNotConverged(message)
        if recorded and not self._warned_tape:
            import warnings

            self._warned_tape = True
            warnings.warn(f"{message}; this step is on a tape, and its adjoint assumes a converged solve, so the "
                          "gradient may be off (raise SoftContactOptions.iterations)", stacklevel=4)

    def _ints(self, values) -> wp.array:
        return wp.array(np.asarray(values, np.int32), dtype=wp.int32, device=self.model.device)

    def _island_layout(self, island_of_art: np.ndarray) -> np.ndarray:
        """Island arrays (dof and dense-Hessian starts, island of each dof) from each
        articulation's island; returns the islands' dof counts."""
        dof_start = self.model.articulation_dof_start.numpy()
        first_art = np.flatnonzero(np.diff(island_of_art, prepend=-1))
        island_dof_start = np.append(dof_start[first_art], dof_start[-1])
        sizes = np.diff(island_dof_start)
        self.island_count = len(first_art)
        self.island_articulation_start = self._ints(np.append(first_art, len(island_of_art)))
        self.island_dof_start = self._ints(island_dof_start)
        self.island_H_start = self._ints(np.concatenate([[0], np.cumsum(sizes * sizes)]))
        self.dof_island = self._ints(np.repeat(np.arange(self.island_count), sizes))
        self.hessian_size = int(np.sum(sizes * sizes))
        return sizes

    def _row_layout(self, art_a: np.ndarray, art_b: np.ndarray):
        """Row arrays of the pairs (shape a's articulation ``art_a``, shape b's ``art_b`` or -1):
        rows of each pair, each side's first dof and dof count, the pairs of each
        articulation and the Jacobian's column layout."""
        dof_start = self.model.articulation_dof_start.numpy()
        rows_per_pair = self._slot_counts() * soft_contact.EDGES
        pair_row_start = np.concatenate([[0], np.cumsum(rows_per_pair)])
        self.row_count = int(pair_row_start[-1])
        self.pair_row_start = self._ints(pair_row_start)
        self.row_pair = self._ints(np.repeat(np.arange(self.pair_count), rows_per_pair))
        has_b = art_b >= 0
        b = np.maximum(art_b, 0)
        self.pair_dof = self._ints(np.stack([dof_start[art_a], np.where(has_b, dof_start[b], -1)], axis=1))
        self.pair_dof_count = self._ints(np.stack([dof_start[art_a + 1] - dof_start[art_a],
                                                   np.where(has_b, dof_start[b + 1] - dof_start[b], 0)], axis=1))
        other = has_b & (art_b != art_a)
        touching_art = np.concatenate([art_a, art_b[other]])
        touching_pair = np.concatenate([np.arange(self.pair_count), np.flatnonzero(other)])
        order = np.lexsort((touching_pair, touching_art))
        self.articulation_pairs = self._ints(touching_pair[order])
        """Pairs involving each articulation (either side), from ``articulation_pair_start``."""
        self.articulation_pair_start = self._ints(np.searchsorted(touching_art[order],
                                                                  np.arange(self.model.articulation_count + 1)))
        self.side_column = max(self.model.max_articulation_dofs, 1)
        self.jacobian_width = self.side_column * (2 if has_b.any() else 1)
        """Columns of a row's Jacobian: the dofs of shape a's articulation, then (from
        ``side_column``) of shape b's when some pair has b on a body."""

    def _slot_counts(self) -> np.ndarray:
        """Contact slots of each pair, from the shared narrow phase."""
        slots = wp.zeros(self.pair_count, dtype=wp.int32, device=self.model.device)
        if self.pair_count:
            wp.launch(rigid_contact.pair_slot_counts, dim=self.pair_count,
                      inputs=[self.model.contact_pair, self.model.shape_kind, self.model.shape_point_count,
                              self.model.shape_hull_point_count],
                      outputs=[slots], device=self.model.device, record_tape=False)
        return slots.numpy().astype(np.int64)

    def active_contacts(self) -> int:
        """Contact points that penetrated in the latest step (reads back from the device)."""
        if self.row_count == 0 or self._last_in_contact is None:
            return 0
        return int(round(float(self._last_in_contact.numpy().sum()))) // soft_contact.EDGES

    # ------------------------------------------------------------------ arrays
    def _array(self, name: str, shape, grad: bool) -> wp.array:
        """A zeroed array for ``name``: fresh (with gradient) when ``grad``, else one buffer per
        name reused from call to call, so an unrecorded step allocates nothing after the first.
        Callers zero nothing: every kernel writing these overwrites all entries it reads."""
        if grad:
            return wp.zeros(shape, dtype=self.model.dtype, device=self.model.device, requires_grad=True)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.shape != (shape if isinstance(shape, tuple) else (shape,)):
            buffer = self._buffers[name] = wp.zeros(shape, dtype=self.model.dtype, device=self.model.device)
        return buffer

    def _rows(self, grad: bool) -> dict:
        """Row arrays: jacobian (R, ``jacobian_width``), then per row (R,): velocity,
        inverse_mass, distance, in_contact, aref, weight."""
        rows = {"jacobian": self._array("jacobian", (self.row_count, self.jacobian_width), grad)}
        for name in ("velocity", "inverse_mass", "distance", "in_contact", "aref", "weight"):
            rows[name] = self._array(name, self.row_count, grad)
        return rows

    def _vector(self, name: str, grad: bool, length: int | None = None) -> wp.array:
        return self._array(name, self.model.joint_dof_count if length is None else length, grad)

    # ------------------------------------------------------------------ launches
    def _launch(self, kernel, dim, inputs, outputs):
        wp.launch(for_precision(kernel, self.model.dtype), dim=dim, inputs=inputs, outputs=outputs,
                  device=self.model.device)

    def _build_rows(self, scratch, state_in, rows):
        m = self.model
        if self.pair_count == 0:
            return
        self._launch(
            soft_contact.soft_contact_rows, self.pair_count,
            [m.contact_pair, m.shape_kind, m.shape_body, m.shape_transform, m.shape_size, m.shape_mu,
             m.shape_point_start, m.shape_points, m.shape_hull_points, m.shape_hull_point_start,
             m.shape_hull_point_count, m.shape_plane_normal, m.shape_plane_offset, m.shape_plane_start,
             m.shape_plane_count, m.body_joint, m.body_origin, m.joint_articulation, m.joint_dfs_pos,
             m.joint_dfs_end, m.dof_joint, m.articulation_dof_start, m.articulation_H_start, self.pair_row_start,
             state_in.body_q, state_in.joint_qd, scratch.dof_motion, scratch.mass_matrix, self.side_column],
            [rows[k] for k in ("jacobian", "velocity", "inverse_mass", "distance", "in_contact")],
        )
        self._launch(soft_contact.soft_contact_row_parameters, self.row_count,
                     [*(rows[k] for k in ("velocity", "inverse_mass", "distance", "in_contact")), *self._params],
                     [rows["aref"], rows["weight"]])

    def _system(self, scratch, state_in, rows, accel, grad: bool):
        """(gradient, Hessian) of the contact and joint-limit cost at ``accel``."""
        m = self.model
        violation = self._vector("violation", grad, self.row_count)
        if self.row_count:
            self._launch(soft_contact.soft_contact_violation, self.row_count,
                         [self.row_pair, self.pair_dof, self.pair_dof_count, rows["jacobian"], rows["aref"],
                          rows["weight"], accel, self.side_column],
                         [violation])
        gradient = self._vector("gradient", grad)
        hessian = self._array("hessian", self.hessian_size, grad)
        self._launch(soft_contact.soft_contact_newton_system, m.joint_dof_count,
                     [m.dof_joint, m.joint_articulation, m.articulation_dof_start, m.articulation_H_start,
                      m.joint_type, m.joint_q_start, m.joint_limit_lower, m.joint_limit_upper, m.joint_friction,
                      self.dof_island,
                      self.island_dof_start, self.island_H_start, self.articulation_pair_start,
                      self.articulation_pairs, self.pair_row_start, self.pair_dof, self.pair_dof_count,
                      scratch.mass_matrix, scratch.qdd, rows["jacobian"], rows["weight"], violation, state_in.joint_q,
                      state_in.joint_qd, accel, self.side_column, *self._dof_row_flags, *self._params],
                     [gradient, hessian])
        return gradient, hessian, violation

    def _newton_direction(self, scratch, state_in, rows, accel, factor: wp.array, tape) -> tuple:
        """(Hess^-1 grad of the cost at ``accel``, the rows' violations there), the Hessian's
        Cholesky factor going to ``factor`` (fresh arrays on a tape)."""
        from wpsim.solvers.articulation import cholesky_solve

        gradient, hessian, violation = self._system(scratch, state_in, rows, accel, tape is not None)
        step = self._vector("step", tape is not None)
        cholesky_solve(self.model, hessian, gradient, step, factor, self._vector("work", False), tape,
                       (self.island_dof_start, self.island_H_start))
        return step, violation

    def _line_search(self, scratch, state_in, rows, accel, step, violation, fresh: bool) -> wp.array:
        """(islands,) exact step lengths along the Newton steps (off the tape: an unrolled
        adjoint treats them as constants, exact at convergence where they are 1); ``fresh``:
        a new array (a recorded iteration keeps its own), else a reused buffer."""
        m = self.model
        alpha = (wp.zeros(self.island_count, dtype=m.dtype, device=m.device) if fresh
                 else self._array("alpha", self.island_count, False))
        wp.launch(for_precision(soft_contact.soft_contact_line_search, m.dtype), dim=self.island_count,
                  inputs=[m.dof_joint, m.articulation_dof_start, m.articulation_H_start, m.joint_type, m.joint_q_start,
                          m.joint_limit_lower, m.joint_limit_upper, m.joint_friction, self.island_dof_start,
                          self.island_articulation_start, self.articulation_pair_start, self.articulation_pairs,
                          self.pair_articulation, self.pair_row_start, self.pair_dof, self.pair_dof_count,
                          scratch.mass_matrix, scratch.qdd, rows["jacobian"], rows["weight"], violation,
                          state_in.joint_q, state_in.joint_qd, accel, step, self.side_column, *self._dof_row_flags,
                          *self._params, m.real(self._tolerance)],
                  outputs=[alpha], device=m.device, record_tape=False)
        return alpha

    def _newton_step(self, scratch, state_in, rows, accel, tape, out_name: str):
        """One line-searched Newton step from ``accel`` into the buffer ``out_name`` (fresh
        arrays on a tape); returns (new accelerations, Newton step)."""
        grad = tape is not None
        step, violation = self._newton_direction(scratch, state_in, rows, accel,
                                                 self._array("factor", self.hessian_size, grad), tape)
        alpha = self._line_search(scratch, state_in, rows, accel, step, violation, grad)
        out = self._vector(out_name, grad)
        self._launch(soft_contact.newton_update, self.model.joint_dof_count, [accel, step, alpha, self.dof_island],
                     [out])
        return out, step

    def _residuals(self, step, accel) -> np.ndarray:
        """(islands,) max |Newton step| / (1 + max |a|) of each island (reads back)."""
        residual = self._array("residual", self.island_count, False)
        wp.launch(for_precision(soft_contact.island_residual, self.model.dtype), dim=self.island_count,
                  inputs=[self.island_dof_start, step, accel], outputs=[residual], device=self.model.device,
                  record_tape=False)
        return residual.numpy()

    # ------------------------------------------------------------------ solve
    def solve(self, scratch, state_in, tape, step_index: int = 0) -> wp.array:
        """The constrained joint accelerations (D,) of step ``step_index``, from the
        unconstrained ``scratch.qdd``; recorded on ``tape`` (implicitly or unrolled) when
        given. Islands that reach the iteration cap above the tolerance are booked (see
        ``SoftContactOptions.raise_on_nonconvergence``).

        In implicit mode the constraint rows are built off the tape and dropped after the
        solve; the backward rebuilds them from the step's inputs, so a recorded step keeps
        only its solution and the Hessian factor (memory independent of the iterations and
        almost of the contact count)."""
        m = self.model
        unrolled = tape is not None and self.options.adjoint == "unrolled"
        with contextlib.nullcontext() if unrolled else tape_paused():
            rows = self._rows(unrolled)
            self._build_rows(scratch, state_in, rows)
            self._last_in_contact = rows["in_contact"]
            accel, residual = scratch.qdd, None
            for k in range(self.options.iterations):  # off the tape: alternate between two buffers
                accel, step = self._newton_step(scratch, state_in, rows, accel, tape if unrolled else None,
                                                f"accel{k % 2}")
                if not self.options.fixed_iterations:
                    residual = self._residuals(step, accel)
                    if residual.max(initial=0.0) <= self._tolerance:
                        break
            self.last_iterations = k + 1
            if residual is not None:
                self._record_convergence(residual, step_index, tape is not None)
            if unrolled or tape is None:
                return accel
            factor = wp.zeros(self.hessian_size, dtype=m.dtype, device=m.device)  # at the solution, for the backward
            self._newton_direction(scratch, state_in, rows, accel, factor, None)
        result = wp.clone(accel, requires_grad=True)
        read = [scratch.mass_matrix, scratch.qdd, scratch.dof_motion, state_in.body_q, state_in.joint_q,
                state_in.joint_qd, m.shape_transform, m.shape_size, m.shape_mu, m.shape_points, m.shape_hull_points,
                m.shape_plane_normal, m.shape_plane_offset, m.body_origin,
                m.joint_limit_lower, m.joint_limit_upper, m.joint_friction]  # gradients the backward writes (tape.zero clears them)
        tape.record_func(backward=lambda: self._adjoint(scratch, state_in, result, factor),
                         arrays=[result, *(a for a in read if a.requires_grad and a.size)])
        return result

    def _adjoint(self, scratch, state_in, result, factor):
        """IFT backward: lambda = Hess^-1 dL/da at the solution, then the VJP, with seed
        -lambda, of the optimality residual rebuilt from the step's inputs (its rows from the
        poses, velocities, motion columns and mass matrix; H; a0)."""
        from wpsim.kernels import articulation

        m = self.model
        lam = wp.zeros_like(result.grad)
        wp.launch(for_precision(articulation.cholesky_back_solve, m.dtype), dim=self.island_count,
                  inputs=[self.island_dof_start, self.island_H_start, factor, result.grad], outputs=[lam],
                  device=m.device, record_tape=False)
        detached = wp.clone(result, requires_grad=False)
        with tape_paused():
            residual_tape = wp.Tape()
            with residual_tape:
                rows = self._rows(True)
                self._build_rows(scratch, state_in, rows)
                gradient = self._system(scratch, state_in, rows, detached, True)[0]
            seed = wp.zeros_like(lam)
            wp.launch(for_precision(soft_contact.negate, m.dtype), dim=m.joint_dof_count, inputs=[lam],
                      outputs=[seed], device=m.device, record_tape=False)
            residual_tape.backward(grads={gradient: seed})
