"""Soft-constraint rigid contact solved by Newton iterations, differentiated implicitly (one
transposed solve at the converged accelerations) or by unrolling every iteration on the
tape. See ``wpsim.kernels.soft_contact`` for the formulation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from ..kernels import soft_contact
from ..kernels.generic import for_precision
from .krylov import tape_paused

ADJOINTS = ("implicit", "unrolled")


@dataclass
class SoftContactOptions:
    """Settings of the soft-constraint contact solve.

    iterations: Newton iterations at most (all of them with ``fixed_iterations``).
    tolerance: stop when the largest Newton step is below tolerance * (1 + max |a|).
    fixed_iterations: run exactly ``iterations`` (for benchmarks; no host read-back).
    adjoint: "implicit" (backward = one solve at the solution, memory independent of the
        iterations) or "unrolled" (every iteration recorded on the tape).
    time_constant (s), damping_ratio: the reference acceleration's spring and damper.
    impedance: in (0, 1); closer to 1 makes contacts harder. Soft constraints let a
    sticking contact creep slowly (a 4 kg box on a 0.3 rad incline with mu = 0.5: about
    0.9 mm/s at the defaults, 10x that at impedance 0.9) and sink slightly (0.01 mm).
    """

    iterations: int = 20
    tolerance: float = 1e-10
    fixed_iterations: bool = False
    adjoint: str = "implicit"
    time_constant: float = 0.02
    damping_ratio: float = 1.0
    impedance: float = 0.99


class SoftContact:
    """The contact rows and Newton solve of one model (bodies against static shapes)."""

    def __init__(self, model, options: SoftContactOptions):
        if options.adjoint not in ADJOINTS:
            raise ValueError(f"soft contact adjoint must be one of {ADJOINTS}, got {options.adjoint!r}")
        if options.iterations < 1 or not options.time_constant > 0 or not 0.0 < options.impedance < 1.0:
            raise ValueError("soft contact needs iterations >= 1, time_constant > 0 s and 0 < impedance < 1")
        self.model, self.options = model, options
        pairs = model.contact_pair.numpy().reshape(-1, 2)
        body = model.shape_body.numpy()
        kind = model.shape_kind.numpy()
        if len(pairs) and (body[pairs[:, 1]] >= 0).any():
            a, b = pairs[np.flatnonzero(body[pairs[:, 1]] >= 0)[0]]
            raise ValueError(f"soft-constraint contact handles bodies against static shapes only; shapes {a} and {b} "
                             "are both on bodies (use the penalty contact)")
        if len(pairs) and (kind[pairs[:, 0]] == 4).any():
            raise ValueError("soft-constraint contact does not handle mesh shapes yet (use the penalty contact)")
        joint_art = model.joint_articulation.numpy()
        art = joint_art[model.body_joint.numpy()[body[pairs[:, 0]]]] if len(pairs) else np.zeros(0, np.int64)
        order = np.argsort(art, kind="stable")
        counts = np.bincount(art, minlength=model.articulation_count)
        device = model.device
        self.pair_shapes = wp.array(pairs[order].astype(np.int32), dtype=wp.int32, device=device)
        self.pair_articulation = wp.array(art[order].astype(np.int32), dtype=wp.int32, device=device)
        self.articulation_pair_start = wp.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
                                                dtype=wp.int32, device=device)
        self.pair_count = len(pairs)
        self.row_count = self.pair_count * soft_contact.ROWS_PER_PAIR
        self.last_iterations = 0
        """Newton iterations of the latest step."""
        self._last_in_contact = None
        self._buffers = {}
        real = model.real
        self._params = (real(options.time_constant), real(options.damping_ratio), real(options.impedance))

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
        """Row arrays: jacobian (R, max dofs), then per row (R,): velocity, inverse_mass,
        distance, in_contact, aref, weight."""
        rows = {"jacobian": self._array("jacobian", (self.row_count, max(self.model.max_articulation_dofs, 1)), grad)}
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
            [self.pair_shapes, self.pair_articulation, m.shape_kind, m.shape_body, m.shape_transform, m.shape_size,
             m.shape_mu, m.body_joint, m.body_origin, m.joint_dfs_pos, m.joint_dfs_end, m.dof_joint,
             m.articulation_dof_start, m.articulation_H_start, state_in.body_q, state_in.joint_qd,
             scratch.dof_motion, scratch.mass_matrix],
            [rows[k] for k in ("jacobian", "velocity", "inverse_mass", "distance", "in_contact")],
        )
        self._launch(soft_contact.soft_contact_row_parameters, self.row_count,
                     [*self._params, *(rows[k] for k in ("velocity", "inverse_mass", "distance", "in_contact"))],
                     [rows["aref"], rows["weight"]])

    def _system(self, scratch, rows, accel, grad: bool):
        """(gradient, Hessian) of the contact cost at ``accel`` (fresh arrays)."""
        m = self.model
        violation = self._vector("violation", grad, self.row_count)
        if self.row_count:
            self._launch(soft_contact.soft_contact_violation, self.row_count,
                         [self.pair_articulation, m.articulation_dof_start, rows["jacobian"], rows["aref"], accel],
                         [violation])
        gradient = self._vector("gradient", grad)
        hessian = self._array("hessian", scratch.mass_matrix.shape[0], grad)
        self._launch(soft_contact.soft_contact_newton_system, m.joint_dof_count,
                     [m.dof_joint, m.joint_articulation, m.articulation_dof_start, m.articulation_H_start,
                      self.articulation_pair_start, scratch.mass_matrix, scratch.qdd, rows["jacobian"],
                      rows["weight"], violation, accel],
                     [gradient, hessian])
        return gradient, hessian

    def _newton_step(self, scratch, rows, accel, tape, out_name: str = "accel", keep_factor: bool = False):
        """One Newton step from ``accel`` into the buffer ``out_name`` (fresh arrays on a
        tape); returns (new accelerations, step, Hessian factor). ``keep_factor``: the factor
        in an array of its own (it outlives the step)."""
        from .articulation import cholesky_solve

        grad = tape is not None
        gradient, hessian = self._system(scratch, rows, accel, grad)
        step = self._vector("step", grad)
        factor = wp.zeros_like(scratch.factor) if keep_factor else self._array("factor", scratch.factor.shape[0], grad)
        cholesky_solve(self.model, hessian, gradient, step, factor, self._vector("work", False), tape)
        out = self._vector(out_name, grad)
        self._launch(soft_contact.newton_update, self.model.joint_dof_count, [accel, step], [out])
        return out, step, factor

    def _converged(self, step, accel) -> bool:
        norms = self._array("norms", 2, False)
        wp.launch(for_precision(soft_contact.max_abs, self.model.dtype), dim=1, inputs=[step], outputs=[norms[0:1]],
                  device=self.model.device, record_tape=False)
        wp.launch(for_precision(soft_contact.max_abs, self.model.dtype), dim=1, inputs=[accel],
                  outputs=[norms[1:2]], device=self.model.device, record_tape=False)
        step_norm, accel_norm = norms.numpy()
        return step_norm <= self.options.tolerance * (1.0 + accel_norm)

    # ------------------------------------------------------------------ solve
    def solve(self, scratch, state_in, tape) -> wp.array:
        """The constrained joint accelerations (D,) of this step, from the unconstrained
        ``scratch.qdd``; recorded on ``tape`` (implicitly or unrolled) when given.

        In implicit mode the constraint rows are built off the tape and dropped after the
        solve; the backward rebuilds them from the step's inputs, so a recorded step keeps
        only its solution and the Hessian factor (memory independent of the iterations and
        almost of the contact count)."""
        if tape is not None and self.options.adjoint == "unrolled":
            rows = self._rows(True)
            self._build_rows(scratch, state_in, rows)
            self._last_in_contact = rows["in_contact"]
            accel = scratch.qdd
            for k in range(self.options.iterations):
                accel, step, _ = self._newton_step(scratch, rows, accel, tape)
                if not self.options.fixed_iterations and self._converged(step, accel):
                    break
            self.last_iterations = k + 1
            return accel
        with tape_paused():
            rows = self._rows(False)
            self._build_rows(scratch, state_in, rows)
            self._last_in_contact = rows["in_contact"]
            accel = scratch.qdd
            for k in range(self.options.iterations):  # alternate between two buffers
                accel, step, _ = self._newton_step(scratch, rows, accel, None, f"accel{k % 2}")
                if not self.options.fixed_iterations and self._converged(step, accel):
                    break
            self.last_iterations = k + 1
            if tape is None:
                return accel
            _, _, factor = self._newton_step(scratch, rows, accel, None, "accel_unused", keep_factor=True)
        result = wp.clone(accel, requires_grad=True)
        m = self.model
        read = [scratch.mass_matrix, scratch.qdd, scratch.dof_motion, state_in.body_q, state_in.joint_qd,
                m.shape_transform, m.shape_size, m.shape_mu]  # gradients the backward writes (tape.zero clears them)
        tape.record_func(backward=lambda: self._adjoint(scratch, state_in, result, factor), arrays=[result, *read])
        return result

    def _adjoint(self, scratch, state_in, result, factor):
        """IFT backward: lambda = Hess^-1 dL/da at the solution, then the VJP, with seed
        -lambda, of the optimality residual rebuilt from the step's inputs (its rows from the
        poses, velocities, motion columns and mass matrix; H; a0)."""
        from ..kernels import articulation

        m = self.model
        lam = wp.zeros_like(result.grad)
        wp.launch(for_precision(articulation.cholesky_back_solve, m.dtype), dim=m.articulation_count,
                  inputs=[m.articulation_dof_start, m.articulation_H_start, factor, result.grad], outputs=[lam],
                  device=m.device, record_tape=False)
        detached = wp.clone(result, requires_grad=False)
        with tape_paused():
            residual_tape = wp.Tape()
            with residual_tape:
                rows = self._rows(True)
                self._build_rows(scratch, state_in, rows)
                gradient, _ = self._system(scratch, rows, detached, True)
            seed = wp.zeros_like(lam)
            wp.launch(for_precision(soft_contact.negate, m.dtype), dim=m.joint_dof_count, inputs=[lam],
                      outputs=[seed], device=m.device, record_tape=False)
            residual_tape.backward(grads={gradient: seed})
