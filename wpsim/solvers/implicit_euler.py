"""Backward-Euler (implicit) solver for particles, springs, cloth and soft bodies, with an
implicit-function-theorem adjoint.

A step finds the end velocity v that zeroes the mass-scaled residual

    R(v) = v - v_n - dt (f(x_n + dt v, v) / m + g)        (m/s; R = v for fixed particles)

and sets x = x_n + dt v. Newton's method solves R(v) = 0: each iteration solves J p = R
(J = dR/dv) by matrix-free BiCGSTAB, with J p taken as a finite difference of R (the solve
only needs a good direction; convergence is measured on R itself), then backtracks along
-p until the residual norm decreases.

Differentiation, chosen by ``adjoint``:

- ``"implicit"`` (default): the Newton and Krylov iterations run off the tape. One custom
  backward entry per step, at the converged v, solves J^T lam = -(dL/dv_out + dt dL/dx_out)
  with exact vector-Jacobian products from Warp's reverse mode (one small recorded residual
  evaluation replayed per Krylov iteration), then applies lam^T dR/d(inputs) once. Memory
  does not depend on the iteration counts.
- ``"unrolled"``: every Newton, line-search and Krylov operation is recorded on fresh arrays
  and differentiated by the tape (memory grows with the iterations; for comparison).

Particle-particle contact is not supported (its neighbour list would change inside the
solve); contact against the ground and static shapes is, with two caveats. The contact
force has a kink at first touch and, with contact damping kd > 0, a jump of kd |v_n|: where
the solution sits on that jump R has no root and Newton stalls (the step is counted in
``unconverged_steps``; backward Euler damps anyway, so kd = 0 is the better choice here).
In float32 the finite-difference Jacobian products are too coarse for stiff contact and
Newton often stalls at contact onset: use float64 with contact.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS, MODEL_FIELDS
from wpsim.core.health import SimulationError
from wpsim.core.model import Control, Model, State
from wpsim.core.tape import tape_paused
from wpsim.kernels import implicit
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import SolverBase
from wpsim.solvers.forces import SmoothingScratch, launch_forces
from wpsim.solvers.krylov import Workspace, bicgstab
from wpsim.solvers.prepared_launch import caching_launches

ADJOINT_MODES = ("implicit", "unrolled")


@dataclass
class SolveStats:
    """Convergence of one solve.

    For a step: Newton iterations, total BiCGSTAB iterations, the final residual as the
    largest absolute component of R (m/s), the tolerance it was held to (m/s; see
    ``ImplicitEulerSolver``) and whether it met it. For an adjoint solve: 1, its BiCGSTAB
    iterations, the 2-norm of its final residual, the tolerance as an absolute 2-norm.
    """

    newton_iterations: int = 0
    krylov_iterations: int = 0
    residual: float = float("nan")
    tolerance: float = float("nan")
    converged: bool = False


def _without_grad(arr: wp.array) -> wp.array:
    """An alias of ``arr`` (same memory) that carries no gradient."""
    if not arr.requires_grad:
        return arr
    if arr.ptr is None:
        return wp.zeros(arr.shape, dtype=arr.dtype, device=arr.device)
    return wp.array(ptr=arr.ptr, dtype=arr.dtype, shape=arr.shape, strides=arr.strides, device=arr.device)


class _Detached:
    """Attribute proxy of a Model/Control whose listed arrays are gradient-free aliases."""

    def __init__(self, source, names):
        self._source = source
        for name in names:
            setattr(self, name, _without_grad(getattr(source, name)))

    def __getattr__(self, name):
        return getattr(self._source, name)


class ImplicitEulerSolver(SolverBase):
    """Backward-Euler steps solved by Newton-Krylov, differentiable implicitly or unrolled.

    Args:
        model: the Model to step (without particle-particle contact).
        adjoint: ``"implicit"`` (IFT adjoint, memory independent of iterations) or
            ``"unrolled"`` (the tape differentiates every iteration).
        newton_iterations: maximum Newton iterations per step.
        tolerance: Newton stops when every component of R is within the tolerance (m/s):
            the larger of this value (default 1e-10 in float64, 1e-3 in float32) and the
            step's rounding floor 1000 eps |x|_rms / dt (the velocity error of rounding the
            positions, with room for stiffness amplification up to dt^2 k / m = 1000), so
            that scenes far from the origin still converge. 0 runs all
            ``newton_iterations`` (unless it stalls), and such steps count as unconverged.
        krylov_iterations: maximum BiCGSTAB iterations per linear solve.
        krylov_tolerance: relative residual at which a Newton direction is accepted.
        line_search_steps: maximum halvings of the Newton step.
        adjoint_tolerance: relative residual of the adjoint solve; default 1e-12 (float64)
            or 1e-6 (float32).
        adjoint_iterations: maximum BiCGSTAB iterations of the adjoint solve (a warning
            says when it stops short: that step's gradient is then inexact; a non-finite
            incoming gradient propagates as NaN).
        **health_options: see ``SolverBase``. With ``raise_on_blowup`` an unconverged step
            also raises ``SimulationError``.

    Attributes: ``last_solve`` and ``last_adjoint`` (``SolveStats``), ``unconverged_steps``
    (since construction or ``reset_health``; checkpoint re-runs count again).

    Friction uses the model's smoothing speed without the explicit solver's dt/m bound
    (backward Euler is stable without it, and the bound would let static friction creep
    more as dt grows). ``state_in.particle_f`` receives the forces at the end state
    (without gravity), recorded on the tape like the semi-implicit solver's. The unrolled
    mode is a float64 comparison tool: in float32 its differentiated finite differences
    are dominated by rounding.
    """

    def __init__(
        self,
        model: Model,
        adjoint: str = "implicit",
        newton_iterations: int = 20,
        tolerance: float | None = None,
        krylov_iterations: int = 200,
        krylov_tolerance: float = 1e-4,
        line_search_steps: int = 8,
        adjoint_tolerance: float | None = None,
        adjoint_iterations: int = 1000,
        **health_options,
    ):
        super().__init__(model, **health_options)
        if adjoint not in ADJOINT_MODES:
            raise ValueError(f"adjoint must be one of {ADJOINT_MODES}, got {adjoint!r}")
        if model.particle_max_neighbors > 0:
            raise ValueError("ImplicitEulerSolver does not support particle-particle contact; "
                             "use SemiImplicitSolver or disable it with ModelBuilder.set_particle_contact(False)")
        if model.particle_impacts:
            raise ValueError("ImplicitEulerSolver does not resolve particle impacts; use SemiImplicitSolver or "
                             "ModelBuilder.set_particle_impacts(False)")
        if model.body_count > 0:
            raise ValueError("ImplicitEulerSolver does not step rigid bodies yet; use SemiImplicitSolver")
        if min(newton_iterations, krylov_iterations, adjoint_iterations) < 1 or line_search_steps < 0:
            raise ValueError("newton_iterations, krylov_iterations and adjoint_iterations must be >= 1, "
                             "line_search_steps >= 0")
        double = model.dtype == wp.float64
        if not double and model.shape_count > 0:
            warnings.warn("ImplicitEulerSolver in float32 with contact shapes: Newton often stalls at contact "
                          "onset in float32; finalize the model with dtype=wp.float64", stacklevel=2)
        self.adjoint = adjoint
        self.newton_iterations = newton_iterations
        self.tolerance = (1e-10 if double else 1e-3) if tolerance is None else float(tolerance)
        self.krylov_iterations = krylov_iterations
        self.krylov_tolerance = krylov_tolerance
        self.line_search_steps = line_search_steps
        self.adjoint_tolerance = (1e-12 if double else 1e-6) if adjoint_tolerance is None else adjoint_tolerance
        self.adjoint_iterations = adjoint_iterations
        self._fd_scale = 1e-8 if double else 3e-3
        """Relative forward-difference step of Jacobian-vector products (see _jacobian_product)."""
        self.last_solve = SolveStats()
        self.last_adjoint = SolveStats()
        self.unconverged_steps = 0
        self._epsilon = float(np.finfo(np.float64 if double else np.float32).eps)
        n, device = model.particle_count, model.device
        self._forward_ws = Workspace(n, model.dtype, device, reuse=True)
        self._adjoint_ws = Workspace(n, model.dtype, device, reuse=True)
        self._vjp_ws = Workspace(n, model.dtype, device, reuse=True, requires_grad=True)
        self._smoothing = SmoothingScratch(model)
        grad_fields = [s.name for s in MODEL_FIELDS if s.differentiable]
        self._detached_model = _Detached(model, grad_fields)
        self._model_grad_arrays = [a for a in model.parameter_arrays().values() if a.grad is not None and a.size > 0]
        """Parameter arrays whose gradients the custom backward writes (and tape.zero() clears)."""

    # ------------------------------------------------------------------ forward
    def step(self, state_in: State, state_out: State, control: Control | None, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out`` under ``control``."""
        self._entry.step(state_in, state_out, control, dt)
        model = self.model
        control = self._zero_control if control is None else control
        if self.adjoint == "unrolled":
            self._solve(model, state_in, state_out, control, dt,
                        Workspace(model.particle_count, model.dtype, model.device, reuse=False))
        else:
            with tape_paused() as tape, caching_launches(self._launches):
                self._solve(model, state_in, state_out, control, dt, self._forward_ws)
            if tape is not None and state_out.particle_q.requires_grad:
                self._record_adjoint(tape, state_in, state_out, control, dt)
        # the end forces, recorded after the step so that their adjoint runs first
        launch_forces(model, state_out.particle_q, state_out.particle_qd, control, 0.0, self._friction_smoothing,
                      state_in, state_in.particle_f, self._smoothing)
        self._step_done()

    def reset_health(self):
        """Clear the health flags, the step counter and ``unconverged_steps``."""
        super().reset_health()
        self.unconverged_steps = 0

    def _solve(self, model, state_in: State, state_out: State, control: Control, dt: float, ws: Workspace):
        """Newton iterations from v = v_n; writes state_out and the end forces."""
        v = state_in.particle_qd
        position_scale = ws.norm(state_in.particle_q) / np.sqrt(max(ws.n, 1)) + 0.01  # RMS distance + 1 cm (m)
        tolerance = max(self.tolerance, 1e3 * self._epsilon * position_scale / dt)
        r, r_max = self._residual(model, state_in, control, v, dt, ws, "R0")
        keys = {"v": "v1", "R": "R1"}  # names holding the next trial (alternate in reuse mode)
        stats = SolveStats(tolerance=tolerance)
        while r_max > tolerance and stats.newton_iterations < self.newton_iterations:
            # velocity scale of the finite-difference step: |v| + 1 m/s, or the positions' size / dt
            scale = max(ws.norm(v) / np.sqrt(ws.n) + 1.0, position_scale / dt)
            direction, k_its, _ = bicgstab(
                lambda p, out: self._jacobian_product(model, state_in, control, v, r, p, dt, scale, ws, out),
                r, ws, self.krylov_tolerance, 0.0, self.krylov_iterations)
            stats.krylov_iterations += k_its
            r_norm = ws.norm(r)
            step = 1.0
            for _ in range(self.line_search_steps + 1):
                v_trial = ws.axpy(v, direction, -step, keys["v"])
                r_trial, trial_max = self._residual(model, state_in, control, v_trial, dt, ws, keys["R"])
                if ws.norm(r_trial) < (1.0 - 1e-4 * step) * r_norm:
                    break
                step *= 0.5
            else:
                break  # no decrease along the direction: stalled
            keys = {"v": _other(keys["v"]), "R": _other(keys["R"])}
            v, r, r_max = v_trial, r_trial, trial_max
            stats.newton_iterations += 1
        stats.residual, stats.converged = r_max, bool(r_max <= tolerance)
        self.last_solve = stats
        wp.launch(
            for_precision(implicit.finish_step, model.dtype), dim=model.particle_count,
            inputs=[model.particle_world, state_in.particle_q, v, model.real(dt), self.step_count,
                    self.max_coordinate, self.max_speed],
            outputs=[state_out.particle_q, state_out.particle_qd, self.world_fault_step],
            device=model.device,
        )
        if not stats.converged:
            self.unconverged_steps += 1
            if self.raise_on_blowup:
                raise SimulationError(f"step {self.step_count}: Newton did not converge "
                                      f"(residual {r_max:.3e} m/s > {tolerance:.1e} m/s)")

    def _residual(self, model, state_in: State, control, v: wp.array, dt: float, ws: Workspace, key: str,
                  measure: bool = True, particle_q: wp.array | None = None, particle_qd: wp.array | None = None):
        """R(v) into the vector ``key``; returns (R, host max_i |R_i| in m/s, or None
        without ``measure``). Friction gets dt = 0: no explicit-stability bound."""
        real = model.dtype
        q_n = state_in.particle_q if particle_q is None else particle_q
        qd_n = state_in.particle_qd if particle_qd is None else particle_qd
        x = ws.launch(implicit.implicit_positions, [q_n, v, real(dt)], ws.vector("x_eval"))
        f = ws.vector("f_eval")
        launch_forces(model, x, v, control, 0.0, self._friction_smoothing, state_in, f, self._smoothing)
        r = ws.launch(implicit.implicit_residual, [model.particle_mass, model.gravity, qd_n, v, f, real(dt)],
                      ws.vector(key))
        if not measure:
            return r, None
        return r, (float(np.abs(r.numpy()).max()) if ws.n else 0.0)

    def _jacobian_product(self, model, state_in, control, v, r, p, dt, scale, ws: Workspace, out: wp.array):
        """out = J p by a difference of R along p: forward (from ``r`` = R(v)) in float64,
        central in float32, whose rounding would swamp a forward difference. The step moves
        velocities by fd_scale * ``scale`` (m/s) in RMS, so positions move by at least
        fd_scale relative to the scene's size and rounding stays small."""
        p_norm = ws.norm(p)
        if p_norm == 0.0 or not np.isfinite(p_norm):
            return ws.launch(implicit.scaled_difference, [p, p, model.real(0.0)], out)
        h = self._fd_scale * scale / (p_norm / np.sqrt(ws.n))
        r_plus, _ = self._residual(model, state_in, control, ws.axpy(v, p, h, "v_plus"), dt, ws, "R_plus", False)
        if model.dtype == wp.float64:
            return ws.launch(implicit.scaled_difference, [r_plus, r, model.real(1.0 / h)], out)
        r_minus, _ = self._residual(model, state_in, control, ws.axpy(v, p, -h, "v_minus"), dt, ws, "R_minus",
                                    False)
        return ws.launch(implicit.scaled_difference, [r_plus, r_minus, model.real(0.5 / h)], out)

    # ------------------------------------------------------------------ adjoint
    def _record_adjoint(self, tape: wp.Tape, state_in: State, state_out: State, control: Control, dt: float):
        """Put the IFT backward of this step on ``tape``."""
        candidates = [state_out.particle_q, state_out.particle_qd, state_in.particle_q, state_in.particle_qd]
        candidates += [getattr(control, s.name) for s in CONTROL_FIELDS]
        arrays = [a for a in candidates if a.grad is not None and a.size > 0] + self._model_grad_arrays
        tape.record_func(backward=lambda: self._backward(state_in, state_out, control, dt), arrays=arrays)

    def _backward(self, state_in: State, state_out: State, control: Control, dt: float):
        """Adjoint of one step: solve J^T lam = -(gv + dt gx), then add lam^T dR/d(inputs)."""
        ws, vjp_ws, model = self._adjoint_ws, self._vjp_ws, self.model
        gx, gv = state_out.particle_q.grad, state_out.particle_qd.grad
        rhs = ws.axpy(gv, gx, dt, "rhs")
        rhs = ws.launch(implicit.scaled_difference, [ws.zeros("zero"), rhs, model.real(1.0)], ws.vector("neg_rhs"))
        probe = vjp_ws.vector("probe")
        wp.copy(probe, state_out.particle_qd)
        vjp_ws.zero_grads()  # wp.copy also copies the gradient
        with tape_paused():
            detached_tape = wp.Tape()
            with detached_tape:
                r, _ = self._residual(
                    self._detached_model, state_in, _Detached(control, [s.name for s in CONTROL_FIELDS]), probe, dt,
                    vjp_ws, "R", False, _without_grad(state_in.particle_q), _without_grad(state_in.particle_qd))

            def transpose_product(w: wp.array, out: wp.array) -> wp.array:
                detached_tape.backward(grads={r: w})
                wp.copy(out, probe.grad)
                detached_tape.zero()
                return out

            lam, its, res = bicgstab(transpose_product, rhs, ws, self.adjoint_tolerance, 0.0, self.adjoint_iterations)
            target = self.adjoint_tolerance * ws.norm(rhs)
            self.last_adjoint = SolveStats(1, its, res, target, bool(res <= target))
            if np.isfinite(res) and not self.last_adjoint.converged:
                warnings.warn(f"ImplicitEulerSolver: adjoint solve did not converge ({its} iterations, "
                              f"residual {res:.3e} > {target:.3e}); the step's gradient is inexact", stacklevel=2)
            vjp_ws.zero_grads()
            input_tape = wp.Tape()
            with input_tape:
                r, _ = self._residual(model, state_in, control, probe, dt, vjp_ws, "R", False)
            input_tape.backward(grads={r: lam})
            vjp_ws.zero_grads()
        if state_in.particle_q.grad is not None:
            ws.launch(implicit.axpy, [state_in.particle_q.grad, gx, model.real(1.0)], state_in.particle_q.grad)
        gx.zero_()  # consumed, as Warp's kernel adjoints consume their outputs' adjoints
        gv.zero_()


def _other(key: str) -> str:
    """The alternate name of a two-slot pair ("v1" <-> "v2")."""
    return key[:-1] + ("2" if key.endswith("1") else "1")
