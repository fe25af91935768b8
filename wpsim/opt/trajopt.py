"""Trajectory optimisation over per-world control sequences: the problem, its Warp costs and
the first- and zero-order planners (iLQR is in ``wpsim.opt.ilqr``).

A ``TrajectoryProblem`` plans W worlds at once (many initial states, or many restarts of
one): world w starts from its own state x0[w] of one copy of the scene, (joint_q,
joint_qd) or, for particles and cloth, (particle_q, particle_qd) flattened (``StateLayout``),
and holds its own control sequence U[w] (T, nu) of torques or forces on the actuated dofs
(or on entries of the particles' external forces), within bounds, each held for
``substeps`` simulator steps of ``dt``. The cost of a plan is a sum of weighted squared
errors evaluated by Warp kernels on the rollout (``TrajectoryCost``): tracking of a target
or reference state (running weights at states 1..T-1), a goal state (terminal weights at
state T), effort u_t^2 and smoothness (u_t - u_{t-1})^2 for t >= 1; each world's terms
go to its own loss entry, so one recorded rollout and one backward give every world's
gradient.

Planners, all given the same budget of rollouts per world (one rollout: the simulation of
the horizon for one world; a gradient costs one rollout and its backward):

- ``shoot_adam``: Adam on the tape gradient, each world with its own moments, the controls
  projected onto their bounds;
- ``shoot_lbfgsb``: scipy's L-BFGS-B (bounds honoured) on the summed cost of all worlds
  (separable, so its gradient is every world's own), the best plan of each world kept;
- ``cem``: the cross-entropy method, N sampled plans per world simulated as W x N worlds of
  one model, the elite fraction refitting a diagonal Gaussian per world;
- ``wpsim.opt.ilqr.ilqr``: iterative LQR on the linearisations of ``linearise``.

Every planner keeps each world's best plan; a world whose cost turns non-finite (or whose
simulation blows up) is frozen at its best plan and reported in ``PlanResult.events`` with
the iteration and the world.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from wpsim.core.model import State
from wpsim.core.tape import tape_paused
from wpsim.kernels import losses
from wpsim.kernels.enums import JOINT_PRISMATIC, JOINT_REVOLUTE
from wpsim.kernels.generic import for_precision
from wpsim.opt.optimisers import Adam
from wpsim.solvers import SemiImplicitSolver


# ------------------------------------------------------------------ layouts
@dataclass(frozen=True)
class StateLayout:
    """Where a plan's state and controls live in the State and Control of a model.

    kind: "joints" (x = joint_q, joint_qd; controls on joint_f, or with ``control="targets"``
    on the drives' joint_target_q) or "particles" (x = particle_q, particle_qd flattened
    x, y, z per particle; controls on particle_f_ext); nq, nd: position and velocity entries
    of one copy of the scene; forces: entries of its control array (dofs, or 3 per
    particle); vector: whether the arrays hold vec3."""

    kind: str
    position: str
    velocity: str
    control: str
    nq: int
    nd: int
    forces: int
    vector: bool

    @staticmethod
    def of(model, kind: str, control: str = "forces") -> StateLayout:
        """The layout of ``kind`` for one copy of the scene ``model``, its controls "forces"
        or (joints only) "targets", the position targets of the joint drives."""
        if control not in ("forces", "targets") or (control == "targets" and kind != "joints"):
            raise ValueError(f"control must be 'forces' or, for state 'joints', 'targets'; got {control!r} for "
                             f"state {kind!r}")
        if kind == "joints":
            nq, nd = model.joint_coord_count, model.joint_dof_count
            field_name = "joint_f" if control == "forces" else "joint_target_q"
            return StateLayout(kind, "joint_q", "joint_qd", field_name, nq, nd, nd, False)
        if kind == "particles":
            n = 3 * model.particle_count
            return StateLayout(kind, "particle_q", "particle_qd", "particle_f_ext", n, n, n, True)
        raise ValueError(f"state must be 'joints' or 'particles', got {kind!r}")

    @property
    def element(self) -> int:
        """Scalars per array element: 3 for vec3 arrays, else 1."""
        return 3 if self.vector else 1

    def shaped(self, values: np.ndarray) -> np.ndarray:
        """Flat values reshaped for an array of this layout ((-1, 3) for vec3)."""
        return values.reshape(-1, self.element) if self.vector else values.reshape(-1)


# ------------------------------------------------------------------ costs
@dataclass
class TrajectoryCost:
    """Weighted squared errors of a plan, in the per-world state layout x = (positions,
    velocities) of one copy of the scene (nx = nq + nd, see ``StateLayout``) and its nu controls.

    target: the state the errors are measured from, broadcastable to (W, T + 1, nx) (e.g.
        (nx,) one goal for all, (W, 1, nx) one per world, (T + 1, nx) a reference
        trajectory); rad, m, rad/s, m/s.
    running: (nx,) weights of states 1..T-1 (cost per unit^2 per step);
    terminal: (nx,) weights of state T;
    effort: (nu,) weights of (u_t - nominal)^2 (cost per (N m)^2 or N^2, or per rad^2 or
        m^2 for position targets);
    smoothness: (nu,) weights of (u_t - u_{t-1})^2 for t = 1..T-1;
    nominal: the controls effort is measured from, broadcastable to (W, nu) (default 0; a
        robot's holding pose for position targets).
    Every entry must be finite, weights >= 0.
    """

    target: np.ndarray
    running: np.ndarray
    terminal: np.ndarray
    effort: np.ndarray
    smoothness: np.ndarray | None = None
    nominal: np.ndarray | None = None

    def checked(self, worlds: int, steps: int, nx: int, nu: int) -> TrajectoryCost:
        """The cost with arrays of full shape, or ValueError naming the bad entry."""
        shapes = {"running": nx, "terminal": nx, "effort": nu, "smoothness": nu}
        out = {}
        for name, size in shapes.items():
            value = getattr(self, name)
            value = np.zeros(size) if value is None else np.asarray(value, dtype=np.float64)
            if value.shape != (size,):
                raise ValueError(f"TrajectoryCost.{name} must have shape ({size},), got {value.shape}")
            bad = np.flatnonzero(~np.isfinite(value) | (value < 0.0))
            if bad.size:
                raise ValueError(f"TrajectoryCost.{name}[{bad[0]}] = {value[bad[0]]} is not a finite weight >= 0")
            out[name] = value
        try:
            target = np.broadcast_to(np.asarray(self.target, dtype=np.float64), (worlds, steps + 1, nx)).copy()
        except ValueError:
            raise ValueError(f"TrajectoryCost.target of shape {np.shape(self.target)} does not broadcast to "
                             f"(worlds, steps + 1, nx) = {(worlds, steps + 1, nx)}") from None
        bad = np.argwhere(~np.isfinite(target))
        if bad.size:
            w, k, i = bad[0]
            raise ValueError(f"TrajectoryCost.target is not finite in world {w}, state {k}, entry {i}")
        nominal = 0.0 if self.nominal is None else np.asarray(self.nominal, dtype=np.float64)
        try:
            nominal = np.broadcast_to(nominal, (worlds, nu)).copy()
        except ValueError:
            raise ValueError(f"TrajectoryCost.nominal of shape {np.shape(self.nominal)} does not broadcast to "
                             f"(worlds, nu) = {(worlds, nu)}") from None
        bad = np.argwhere(~np.isfinite(nominal))
        if bad.size:
            raise ValueError(f"TrajectoryCost.nominal is not finite in world {bad[0][0]}, control {bad[0][1]}")
        return TrajectoryCost(target, nominal=nominal, **out)

    def state_weights(self, steps: int) -> np.ndarray:
        """(T + 1, nx) weight of every state entry: 0 at state 0, running, terminal at T."""
        weights = np.tile(self.running, (steps + 1, 1))
        weights[0] = 0.0
        weights[steps] = self.terminal
        return weights


# ------------------------------------------------------------------ batches of worlds
class WorldBatch:
    """n copies of the scene in one model (``model``, its ``solver``); copy b plays plan
    world ``plays[b]`` (its initial state and targets). Holds one Control per plan step and
    the cost's Warp arrays."""

    def __init__(self, problem: TrajectoryProblem, plays: np.ndarray):
        self.problem, self.plays, self.n = problem, np.asarray(plays, dtype=np.int64), len(plays)
        p, n = problem, len(plays)
        self.model = p.builder.replicated(n).finalize(device=p.device, requires_grad=True, dtype=p.dtype)
        self.solver = p.make_solver(self.model)
        self.controls = [self.model.control(requires_grad=True) for _ in range(p.steps)]
        layout = p.layout
        self._forces = np.zeros((n, layout.forces))
        self.state0 = self.model.state(requires_grad=True)
        self.write_state(self.state0, p.x0[self.plays])
        self.blown_up: dict = {}
        """Copy -> first simulator step at which the latest ``simulate`` blew up."""
        self._slots = [self._ints(np.repeat(np.arange(n), size // layout.element))
                       for size in (layout.nq, layout.nd, layout.forces)]
        weights = p.cost.state_weights(p.steps)
        self._weights = [(self.field(np.tile(w[:p.nq], n)), self.field(np.tile(w[p.nq:], n))) for w in weights]
        target = p.cost.target[self.plays]  # (n, T + 1, nx)
        self._targets = [(self.field(target[:, k, :p.nq].ravel()), self.field(target[:, k, p.nq:].ravel()))
                         for k in range(p.steps + 1)]
        effort, smooth = np.zeros(layout.forces), np.zeros(layout.forces)
        effort[p.actuated], smooth[p.actuated] = p.cost.effort, p.cost.smoothness
        self._effort, self._smooth = self.field(np.tile(effort, n)), self.field(np.tile(smooth, n))
        nominal = np.zeros((n, layout.forces))
        nominal[:, p.actuated] = p.cost.nominal[self.plays]
        self._nominal = self.field(nominal.ravel())

    def field(self, values) -> wp.array:
        """A device array of the layout's kind (scalars, or vec3 for particles) from flat values."""
        layout = self.problem.layout
        return wp.array(layout.shaped(np.asarray(values, dtype=np.float64)),
                        dtype=self.model.vec3 if layout.vector else self.model.dtype, device=self.model.device)

    def _ints(self, values) -> wp.array:
        return wp.array(np.asarray(values, dtype=np.int32), dtype=wp.int32, device=self.model.device)

    def flat(self, array: wp.array) -> np.ndarray:
        """(n, entries per copy) values of a state, control or gradient array."""
        return array.numpy().reshape(self.n, -1)

    def write_state(self, state: State, x: np.ndarray):
        """Write (n, nx) positions and velocities (the problem's layout) into ``state``."""
        p, layout = self.problem, self.problem.layout
        getattr(state, layout.position).assign(layout.shaped(x[:, :p.nq]))
        getattr(state, layout.velocity).assign(layout.shaped(x[:, p.nq:]))

    def write_control(self, t: int, u: np.ndarray):
        """Write the (n, nu) controls of plan step t into its Control (not recorded)."""
        self.fill_control(self.controls[t], u)

    def fill_control(self, control, u: np.ndarray):
        """Write the (n, nu) controls ``u`` on the actuated dofs of a Control of this batch's
        layout (n copies of the scene; the other dofs get zero force or target), not recorded."""
        self._forces[:, self.problem.actuated] = u
        with tape_paused():
            layout = self.problem.layout
            getattr(control, layout.control).assign(layout.shaped(self._forces))

    def read_state(self, state: State) -> np.ndarray:
        """(n, nx) positions and velocities of ``state``."""
        layout = self.problem.layout
        return np.concatenate([self.flat(getattr(state, layout.position)),
                               self.flat(getattr(state, layout.velocity))], axis=1)

    def _squared_error(self, values, targets, weights, slots, loss):
        kernel = losses.weighted_vector_error_loss if self.problem.layout.vector else losses.weighted_squared_error_loss
        wp.launch(for_precision(kernel, self.model.dtype), dim=values.shape[0],
                  inputs=[values, targets, weights, slots], outputs=[loss], device=self.model.device)

    def add_cost(self, t: int, state: State, loss: wp.array):
        """Add the cost terms of step t: state t + 1 and the controls of step t."""
        layout = self.problem.layout
        (wq, wqd), (rq, rqd) = self._weights[t + 1], self._targets[t + 1]
        self._squared_error(getattr(state, layout.position), rq, wq, self._slots[0], loss)
        self._squared_error(getattr(state, layout.velocity), rqd, wqd, self._slots[1], loss)
        f = getattr(self.controls[t], layout.control)
        self._squared_error(f, self._nominal, self._effort, self._slots[2], loss)
        if t > 0:
            self._squared_error(f, getattr(self.controls[t - 1], layout.control), self._smooth, self._slots[2], loss)

    def simulate(self, controls: np.ndarray | None = None, policy=None, record: bool = False) -> tuple:
        """Roll the n worlds over the horizon under ``controls`` (n, T, nu), or closed loop
        under ``policy(t, x (n, nx)) -> u (n, nu)``; on a tape with ``record``.

        Returns (costs (n,), states (n, T + 1, nx), controls (n, T, nu), (tape, loss) or None):
        the cost of a world whose simulation blew up is NaN (see ``blown_up``)."""
        p, model = self.problem, self.model
        states = [self.state0] + State.batch(model, p.steps * p.substeps, record)
        loss = wp.zeros(self.n, dtype=model.dtype, device=model.device, requires_grad=record)
        X = np.empty((self.n, p.steps + 1, p.nx))
        X[:, 0] = p.x0[self.plays]
        U = np.empty((self.n, p.steps, p.nu))
        self.solver.reset_health()
        if controls is not None:
            for t in range(p.steps):
                self.write_control(t, controls[:, t])
            U[:] = controls
        tape = wp.Tape() if record else None
        with tape if record else contextlib.nullcontext():
            for t in range(p.steps):
                if policy is not None:
                    U[:, t] = policy(t, X[:, t])
                    self.write_control(t, U[:, t])
                for s in range(p.substeps):
                    k = t * p.substeps + s
                    self.solver.step(states[k], states[k + 1], self.controls[t], p.dt)
                end = states[(t + 1) * p.substeps]
                self.add_cost(t, end, loss)
                if policy is not None:
                    X[:, t + 1] = self.read_state(end)
        if policy is None:
            for t in range(1, p.steps + 1):
                X[:, t] = self.read_state(states[t * p.substeps])
        costs = loss.numpy().astype(np.float64)
        self.blown_up = self.solver.health().fault_steps
        costs[list(self.blown_up)] = np.nan
        return costs, X, U, (tape, loss) if record else None

    def gradient(self, recorded: tuple) -> np.ndarray:
        """(n, T, nu) d cost_b / d U_b from the ``(tape, loss)`` of ``simulate(record=True)``."""
        tape, loss = recorded
        tape.backward(grads={loss: wp.ones_like(loss)})
        p = self.problem
        grad = np.stack([self.flat(getattr(c, p.layout.control).grad)[:, p.actuated] for c in self.controls], 1)
        tape.zero()
        return grad


# ------------------------------------------------------------------ the problem
def target_coordinates(model, dofs: np.ndarray) -> np.ndarray:
    """The joint coordinate of each of ``dofs`` of a one-world model whose position targets
    are planned, or ValueError naming a dof that is not a hinge or slider with a drive."""
    types, q_start, qd_start = (a.numpy() for a in (model.joint_type, model.joint_q_start, model.joint_qd_start))
    gains = model.joint_target_ke.numpy() + model.joint_target_kd.numpy()
    coords = []
    for dof in dofs:
        joint = int(np.searchsorted(qd_start, dof, side="right")) - 1
        if int(types[joint]) not in (JOINT_REVOLUTE, JOINT_PRISMATIC) or not gains[dof] > 0.0:
            raise ValueError(f"control='targets': dof {dof} (joint {joint}) is not a hinge or slider with a drive "
                             "(joint_target_ke or joint_target_kd > 0)")
        coords.append(q_start[joint])
    return np.array(coords, dtype=np.int64)


class TrajectoryProblem:
    """Plans of W worlds of one scene (see the module docstring).

    builder: a one-world ``ModelBuilder`` of the scene (replicated here as needed).
    x0: (W, nx) initial states (positions then velocities of one copy in the layout of
        ``state``: joint_q then joint_qd, rad/m and rad/s, m/s; or particle_q then
        particle_qd, x y z per particle, m and m/s).
    steps: T plan steps; substeps: simulator steps per plan step; dt: simulator step (s).
    actuated: the nu controlled entries of one copy's control array (dofs of joint_f, or
        3 i + axis of particle i's particle_f_ext); lower, upper: (nu,)
        finite bounds of their torques or forces (N m or N), or targets (rad or m).
    cost: a ``TrajectoryCost``.
    make_solver: model -> solver (default ``SemiImplicitSolver(model)``; pass soft-contact
        options through it).
    jacobian_worlds: copies of the scene stepped together by ``linearise`` (one Jacobian
        row each), at most.
    dtype: wp.float64 (default) or wp.float32.
    state: "joints" (default) or "particles" (``StateLayout``).
    control: "forces" (default) or, for joints, "targets": the controls are the position
        targets (rad or m) of the actuated dofs' drives (``joint_target_q``; the scene's
        ``joint_target_ke``, ``joint_target_kd`` and force limits act), bounded by lower, upper.
    start_controls: the planners' default start plan, broadcastable to (W, T, nu) (e.g. the
        targets that hold a robot's start pose against gravity); default ``initial_controls``'s.
    """

    def __init__(self, builder, x0, steps: int, substeps: int, dt: float, actuated, lower, upper,
                 cost: TrajectoryCost, make_solver=SemiImplicitSolver, jacobian_worlds: int = 256, device=None,
                 dtype=wp.float64, state: str = "joints", control: str = "forces", start_controls=None):
        for name, value in (("steps", steps), ("substeps", substeps), ("jacobian_worlds", jacobian_worlds)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value}")
        if not dt > 0.0:
            raise ValueError(f"dt must be > 0 s, got {dt}")
        if builder.num_worlds != 1:
            raise ValueError(f"builder must hold one world of the scene, got {builder.num_worlds}")
        self.builder, self.make_solver, self.device, self.dtype = builder, make_solver, device, dtype
        self.steps, self.substeps, self.dt = int(steps), int(substeps), float(dt)
        self.jacobian_worlds = int(jacobian_worlds)
        single = builder.finalize(device=device, dtype=dtype)
        self.layout = StateLayout.of(single, state, control)
        self.nq, self.nd = self.layout.nq, self.layout.nd
        self.nx = self.nq + self.nd
        if self.nx == 0:
            raise ValueError(f"the scene has no {state} to plan")
        self.actuated = np.asarray(actuated, dtype=np.int64).ravel()
        self.nu = self.actuated.size
        forces = self.layout.forces
        if self.nu == 0 or self.actuated.min() < 0 or self.actuated.max() >= forces or \
                len(set(self.actuated.tolist())) != self.nu:
            raise ValueError(f"actuated must be distinct indices of {self.layout.control} entries in 0..{forces - 1}, "
                             f"got {self.actuated.tolist()}")
        self.held = None if control == "forces" else target_coordinates(single, self.actuated)
        """The joint coordinate each actuated dof's target holds (position targets), else None."""
        self.lower, self.upper = (np.broadcast_to(np.asarray(b, dtype=np.float64), (self.nu,)).copy()
                                  for b in (lower, upper))
        bad = np.flatnonzero(~(np.isfinite(self.lower) & np.isfinite(self.upper) & (self.lower < self.upper)))
        if bad.size:
            raise ValueError(f"control {bad[0]}: bounds must be finite with lower < upper, got "
                             f"[{self.lower[bad[0]]}, {self.upper[bad[0]]}]")
        self._batches = {}
        self.x0 = self.checked_states(x0)
        self.worlds = self.x0.shape[0]
        self.cost = cost.checked(self.worlds, self.steps, self.nx, self.nu)
        self.start_controls = None
        self.start_controls = self.initial_controls(start_controls) if start_controls is not None else None

    def checked_states(self, x0) -> np.ndarray:
        """x0 as a (worlds, nx) float64 array, or ValueError naming the bad world and entry."""
        x0 = np.asarray(x0, dtype=np.float64)
        if x0.ndim != 2 or x0.shape[1] != self.nx:
            raise ValueError(f"x0 must have shape (worlds, {self.nx}) ({self.layout.position} then "
                             f"{self.layout.velocity}), got {x0.shape}")
        bad = np.argwhere(~np.isfinite(x0))
        if bad.size:
            raise ValueError(f"x0 is not finite in world {bad[0][0]}, entry {bad[0][1]}")
        return x0

    def restart(self, x0: np.ndarray):
        """Plan from new initial states x0 (W, nx) (same worlds; a receding horizon's
        current states): every batch's start state is rewritten."""
        x0 = self.checked_states(x0)
        if x0.shape[0] != self.worlds:
            raise ValueError(f"restart: x0 must hold the problem's {self.worlds} worlds, got {x0.shape[0]}")
        self.x0 = x0
        for batch in self._batches.values():
            batch.write_state(batch.state0, x0[batch.plays])

    def batch(self, name: str, plays) -> WorldBatch:
        """The batch of copies ``name``, made on first use with copy b playing plan world
        ``plays[b]`` ("plans": one per world; "jacobian<first row>": ``linearise``'s;
        "cem<samples>": ``cem``'s)."""
        if name not in self._batches:
            self._batches[name] = WorldBatch(self, plays)
        return self._batches[name]

    @property
    def plans(self) -> WorldBatch:
        """One copy per plan world."""
        return self.batch("plans", np.arange(self.worlds))

    def initial_controls(self, controls=None) -> np.ndarray:
        """(W, T, nu) start plan: ``controls`` (broadcast) checked against the bounds, or the
        problem's ``start_controls``, or clipped into the bounds: zero forces, or position
        targets at the start pose's coordinates."""
        shape = (self.worlds, self.steps, self.nu)
        if controls is None and self.start_controls is not None:
            return self.start_controls.copy()
        if controls is None:
            start = 0.0 if self.held is None else self.x0[:, None, self.held]
            return np.broadcast_to(np.clip(start, self.lower, self.upper), shape).copy()
        U = np.broadcast_to(np.asarray(controls, dtype=np.float64), shape).copy()
        bad = np.argwhere(~np.isfinite(U) | (U < self.lower) | (U > self.upper))
        if bad.size:
            w, t, j = bad[0]
            raise ValueError(f"initial control {j} of step {t} in world {w} is {U[w, t, j]}, outside its bounds "
                             f"[{self.lower[j]}, {self.upper[j]}]")
        return U

    def clip(self, U: np.ndarray) -> np.ndarray:
        """Controls projected onto their bounds."""
        return np.clip(U, self.lower, self.upper)

    def evaluate(self, U: np.ndarray) -> tuple:
        """(costs (W,), states (W, T + 1, nx)) of the plans U (one unrecorded rollout; the
        cost of a world that blew up is NaN, ``plans.blown_up`` says at which step)."""
        costs, X, _, _ = self.plans.simulate(U)
        return costs, X

    def cost_and_gradient(self, U: np.ndarray) -> tuple:
        """(costs (W,), states, d cost_w / d U_w (W, T, nu)): one recorded rollout and its backward."""
        costs, X, _, recorded = self.plans.simulate(U, record=True)
        return costs, X, self.plans.gradient(recorded)

    def linearise(self, X: np.ndarray, U: np.ndarray) -> tuple:
        """Per-step linearisations of the dynamics about the plans (X (W, T + 1, nx), U):
        (A (W, T, nx, nx) = d x_{t+1} / d x_t, B (W, T, nx, nu) = d x_{t+1} / d u_t).

        Row i of world w's A_t and B_t is a vector-Jacobian product: a copy of the scene
        starts step t from x_t of world w, the step (its substeps) is recorded on a tape,
        and the backward is seeded with a unit adjoint on entry i of x_{t+1}; copies
        (up to ``jacobian_worlds``) give their rows in one pass (soft-contact steps through
        their implicit adjoint)."""
        rows = self.worlds * self.nx
        size = min(rows, self.jacobian_worlds)
        A = np.empty((self.worlds, self.steps, self.nx, self.nx))
        B = np.empty((self.worlds, self.steps, self.nx, self.nu))
        for first in range(0, rows, size):
            row = np.minimum(np.arange(first, first + size), rows - 1)  # a last short chunk repeats its last row
            world, entry = row // self.nx, row % self.nx
            jac = self.batch(f"jacobian{first}", world)
            seed = np.zeros((size, self.nx))
            seed[np.arange(size), entry] = 1.0
            seeds = [jac.field(seed[:, :self.nq].ravel()), jac.field(seed[:, self.nq:].ravel())]
            states = State.batch(jac.model, self.substeps + 1, True)
            for t in range(self.steps):
                jac.write_state(states[0], X[world, t])
                jac.write_control(t, U[world, t])
                tape = wp.Tape()
                with tape:
                    for s in range(self.substeps):
                        jac.solver.step(states[s], states[s + 1], jac.controls[t], self.dt)
                layout = self.layout
                tape.backward(grads={getattr(states[-1], layout.position): seeds[0],
                                     getattr(states[-1], layout.velocity): seeds[1]})
                grad_x = np.concatenate([jac.flat(getattr(states[0], layout.position).grad),
                                         jac.flat(getattr(states[0], layout.velocity).grad)], axis=1)
                grad_u = jac.flat(getattr(jac.controls[t], layout.control).grad)[:, self.actuated]
                tape.zero()
                keep = slice(0, min(size, rows - first))
                A[world[keep], t, entry[keep]] = grad_x[keep]
                B[world[keep], t, entry[keep]] = grad_u[keep]
        return A, B


# ------------------------------------------------------------------ results and bookkeeping
@dataclass
class PlanResult:
    """What a planner found for each of the W worlds.

    method; controls (W, T, nu) the best plan of each world (N m or N); states
    (W, T + 1, nx) its rollout; costs (W,) its cost; initial_costs (W,); history: one (W,)
    array of best-so-far costs per iteration; rollouts: rollouts spent per world (a gradient
    counts one); wall_s (s); events: what stopped a world ("iteration i, world w: ...");
    gains: iLQR's feedback gains (W, T, nu, nx + nu) on (x_t - x̄_t, u_{t-1} - ū_{t-1}),
    else None.
    """

    method: str
    controls: np.ndarray
    states: np.ndarray
    costs: np.ndarray
    initial_costs: np.ndarray
    history: list = field(default_factory=list)
    rollouts: int = 0
    wall_s: float = 0.0
    events: list = field(default_factory=list)
    gains: np.ndarray | None = None

    def to_dict(self) -> dict:
        """JSON-ready summary (costs per world, history, events; no trajectories)."""
        return {"method": self.method, "costs": self.costs.tolist(), "initial_costs": self.initial_costs.tolist(),
                "history": [h.tolist() for h in self.history], "rollouts": self.rollouts, "wall_s": self.wall_s,
                "events": list(self.events)}


class PlanTracker:
    """Each world's best plan, the active worlds, the history and the events of a run."""

    def __init__(self, method: str, U: np.ndarray, costs: np.ndarray, X: np.ndarray, blown_up: dict | None = None):
        self.method, self.start = method, time.perf_counter()
        self.U, self.X = U.copy(), X.copy()
        self.costs = np.full(len(costs), np.inf)
        self.initial_costs = costs.copy()
        self.active = np.ones(len(costs), dtype=bool)
        self.history, self.events, self.rollouts = [], [], 1
        self.iteration = 0
        self.offer(U, costs, X, blown_up)

    def offer(self, U: np.ndarray, costs: np.ndarray, X: np.ndarray, blown_up: dict | None = None,
              worlds: np.ndarray | None = None) -> np.ndarray:
        """Keep the (W, ...) plans of ``worlds`` (a (W,) mask, default all) that beat their
        world's best; a non-finite cost stops its world (an event naming the simulator step
        where ``blown_up``, world -> step, has one). Returns the (W,) mask of improved worlds."""
        better = np.zeros(len(self.costs), dtype=bool)
        for w in np.flatnonzero(self.active if worlds is None else self.active & worlds):
            if not np.isfinite(costs[w]):
                step = (blown_up or {}).get(int(w))
                self.stop(w, f"the cost is {costs[w]}" + ("" if step is None else
                                                          f" (the simulation blew up at simulator step {step})"))
            elif costs[w] < self.costs[w]:
                self.U[w], self.X[w], self.costs[w], better[w] = U[w], X[w], costs[w], True
        return better

    def stop(self, world: int, reason: str):
        """Freeze ``world`` at its best plan and record why."""
        if self.active[world]:
            self.active[world] = False
            self.events.append(f"iteration {self.iteration}, world {world}: {reason}; the best plan is kept")

    def begin(self):
        """Start the next iteration (the start plan's evaluation is iteration 0)."""
        self.iteration += 1

    def end(self, rollouts: int):
        """Close an iteration that spent ``rollouts`` rollouts per world."""
        self.history.append(self.costs.copy())
        self.rollouts += rollouts

    def result(self, gains=None) -> PlanResult:
        return PlanResult(self.method, self.U, self.X, self.costs, self.initial_costs, self.history, self.rollouts,
                          time.perf_counter() - self.start, self.events, gains)


class _Budget(Exception):
    """Raised inside scipy's evaluation when the rollout budget is spent."""


def check_budget(budget: int, per_iteration: int, method: str):
    """ValueError unless ``budget`` covers the start and one iteration of ``per_iteration`` rollouts."""
    if int(budget) != budget or budget < per_iteration + 1:
        raise ValueError(f"{method}: budget must be an integer >= {per_iteration + 1} rollouts per world "
                         f"(one iteration and the start), got {budget}")


# ------------------------------------------------------------------ shooting
def shoot_adam(problem: TrajectoryProblem, budget: int, lr: float = 0.05, controls=None) -> PlanResult:
    """Adam on every world's controls, scaled to their bounds (``lr``: a fraction of each
    control's half range per step), projected onto the bounds; ``budget`` rollouts per
    world, each one a gradient."""
    check_budget(budget, 1, "shoot_adam")
    U = problem.initial_controls(controls)
    half = 0.5 * (problem.upper - problem.lower)
    costs, X, grad = problem.cost_and_gradient(U)
    track = PlanTracker("adam", U, costs, X, problem.plans.blown_up)
    adam = Adam(lr=lr)
    for _ in range(int(budget) - 1):
        track.begin()
        step = adam.step(U / half, np.where(np.isfinite(grad), grad * half, 0.0)) * half
        U = np.where(track.active[:, None, None], problem.clip(step), track.U)
        costs, X, grad = problem.cost_and_gradient(U)
        track.offer(U, costs, X, problem.plans.blown_up)
        track.end(1)
        if not track.active.any():
            break
    return track.result()


def shoot_lbfgsb(problem: TrajectoryProblem, budget: int, controls=None) -> PlanResult:
    """scipy's L-BFGS-B on the summed cost of all worlds (bounds honoured; one line search
    for all), one cost and gradient per rollout, ``budget`` rollouts per world, restarted
    from the best plans when scipy stops early (e.g. a line search fails on a non-smooth
    cost); a world whose cost turns non-finite is frozen at its best plan (its entries
    fixed, its cost out of the sum)."""
    from scipy.optimize import minimize as scipy_minimize

    check_budget(budget, 1, "shoot_lbfgsb")
    U0 = problem.initial_controls(controls)
    start = problem.cost_and_gradient(U0)
    track = PlanTracker("lbfgsb", U0, start[0], start[1], problem.plans.blown_up)
    shape = U0.shape

    def fun(flat):
        U = np.where(track.active[:, None, None], flat.reshape(shape), track.U)
        if track.iteration == 0 and np.array_equal(U, U0):
            costs, grad = start[0], start[2]  # scipy's first evaluation is the start, already spent
        elif track.rollouts >= budget:
            raise _Budget
        else:
            track.begin()
            costs, X, grad = problem.cost_and_gradient(U)
            track.offer(U, costs, X, problem.plans.blown_up)
            track.end(1)
        ok = track.active & np.isfinite(costs)
        return float(np.sum(costs[ok])), np.where(ok[:, None, None], grad, 0.0).ravel()

    bounds = list(zip(np.broadcast_to(problem.lower, shape).ravel(), np.broadcast_to(problem.upper, shape).ravel()))
    spent = -1
    while track.active.any() and spent < track.rollouts < budget:  # restart from the best plans if scipy stops
        spent = track.rollouts
        with contextlib.suppress(_Budget):
            scipy_minimize(fun, track.U.ravel(), jac=True, method="L-BFGS-B", bounds=bounds,
                           options={"maxiter": int(budget), "maxfun": 2 * int(budget), "ftol": 0.0, "gtol": 0.0})
    return track.result()


# ------------------------------------------------------------------ zero order
def cem(problem: TrajectoryProblem, budget: int, samples: int = 32, elite_fraction: float = 0.2,
        initial_std: float = 0.5, smoothing: float = 0.2, seed: int = 0, controls=None) -> PlanResult:
    """The cross-entropy method: each iteration draws ``samples`` plans per world from a
    diagonal Gaussian (mean: the start plan, std: ``initial_std`` of each control's half
    range at first), clipped to the bounds, simulates all W x samples in one model, and
    refits mean and std to the best ``elite_fraction`` (``smoothing``: weight of the old
    mean and std); ``budget`` rollouts per world (``budget // samples`` iterations)."""
    check_budget(budget, samples, "cem")
    if not 0.0 < elite_fraction <= 1.0 or not 0.0 <= smoothing < 1.0 or not initial_std > 0.0:
        raise ValueError("cem needs 0 < elite_fraction <= 1, 0 <= smoothing < 1 and initial_std > 0, got "
                         f"{elite_fraction}, {smoothing}, {initial_std}")
    rng = np.random.default_rng(seed)
    mean = problem.initial_controls(controls)
    costs, X = problem.evaluate(mean)
    track = PlanTracker("cem", mean, costs, X, problem.plans.blown_up)
    std = np.broadcast_to(initial_std * 0.5 * (problem.upper - problem.lower), mean.shape).copy()
    W, elites = problem.worlds, max(1, int(round(elite_fraction * samples)))
    batch = problem.batch(f"cem{samples}", np.repeat(np.arange(W), samples))
    for _ in range((int(budget) - 1) // samples):
        track.begin()
        draws = problem.clip(mean[:, None] + std[:, None] * rng.standard_normal((W, samples, *mean.shape[1:])))
        costs, X, _, _ = batch.simulate(draws.reshape(W * samples, *mean.shape[1:]))
        costs, X = costs.reshape(W, samples), X.reshape(W, samples, *X.shape[1:])
        order = np.argsort(np.where(np.isfinite(costs), costs, np.inf), axis=1)
        best = order[:, 0]
        track.offer(draws[np.arange(W), best], costs[np.arange(W), best], X[np.arange(W), best])
        chosen = np.take_along_axis(draws, order[:, :elites, None, None], axis=1)
        mean = smoothing * mean + (1.0 - smoothing) * chosen.mean(axis=1)
        std = smoothing * std + (1.0 - smoothing) * chosen.std(axis=1)
        track.end(samples)
    return track.result()
