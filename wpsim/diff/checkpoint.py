"""Differentiable rollouts whose memory does not grow with the horizon: full tapes,
checkpointed recompute (one or two levels) and truncated backpropagation.

Recording. A rollout of T steps records, in this order, the loss term of state 0, step 0,
the loss term of state 1, step 1, ..., step T-1, the loss term of state T. Every loss term
and every step (the controller's launches and the solver step) is recorded on its own
``wp.Tape``; the backward runs these tapes in reverse with ``tape.backward()``, which is the
launch order of one big tape. Between two tapes the rollout can act on the adjoint of a
state (truncation, clipping, diagnostics). State k is the state after k steps.

Modes.
- ``"full"``: every state is kept (fresh states from ``State.batch``) with the tapes of the
  forward. Memory grows like T.
- ``"checkpoint"``: the forward runs unrecorded and keeps only the integrated fields
  (particle positions and velocities, joint coordinates and velocities) at
  segment starts (every ``segment_length`` steps, default ceil(sqrt(T))). The backward
  takes the segments in reverse: it restores the segment's start state (segment 0 uses
  the caller's ``state0`` itself), re-runs the segment's steps and loss terms while
  recording into a pool of segment_length + 1 states, seeds the adjoint of the segment's
  end state with the adjoint carried back from the later segment, runs the backward and
  carries the adjoint of the start state on. With ``levels=2`` the forward keeps outer
  checkpoints every ceil(T^(2/3)) steps; the backward re-runs each outer segment
  unrecorded to store inner checkpoints every ceil(sqrt(outer length)) steps, then treats
  it as above. Memory grows like sqrt(T) (one level) or T^(1/3) (two levels); the time is
  about one extra forward per level. A segment [s, e) records the loss terms of states
  s..e-1 (the last one also that of state T), so a boundary state's term is recorded once
  and the adjoint carried back to the previous segment is complete. Loss value and
  gradients are bitwise those of full mode: the same launches add into the same gradients
  in the same order.

Health. ``forward`` starts the solver's health record afresh (``start_rollout``: flags
cleared, ``solver.step_count`` 0), so a health report names steps of this rollout, 0..T-1.
``solver.step_count`` is set to each re-run's first step index (so health reports name the
right step) and left at T after the backward.

Truncation (``truncation_window=W``): for every state index k with 0 < k < T and
k % W == 0, the adjoint that state k (its integrated fields) receives from the steps
after it is set to zero before state k's own loss term is added. So the loss term of state
j reaches back to state m = W * floor((j - 1) / W) and no further (through steps j-1..m);
the gradient of ``state0`` only sees the loss terms of states 0..W. Gradients of model
parameters, controls and controller parameters still sum the contributions of all steps,
each step's computed with the truncated adjoint. ``adjoint_clip=c`` instead scales that
same incoming adjoint of every state 0 < k < T (all integrated fields together) down
to 2-norm c when it is larger (at multiples of W truncation takes precedence). Both act
identically in both modes. The backward warns (once per Rollout) when the truncation cuts
every path to the loss from ``state0`` (no loss term at states 0..W but later ones) or from a
per-step Control (no loss term between its step and the next truncation point): their
gradients are then exactly zero. Which states have loss terms is read from the recorded
tapes (a loss term that launches nothing counts as absent).

Gradients accumulate into existing ``.grad`` arrays like ``wp.Tape.backward`` (see
``zero_grad``). Between ``forward`` and ``backward`` the model parameters, user-given
controls, the controller's parameters and ``state0`` must not be modified: a full-mode
backward reads them as they are then (unchecked), a checkpointed backward re-runs the steps
with them: it checks that ``state0`` and the end state of every re-run segment are bitwise
the forward's, and raises RuntimeError otherwise (one read-back per segment). ``loss_fn``
and a controller must not keep references to the states they get (checkpoint mode reuses
them), and must read only a state's integrated fields and its body poses and velocities:
they get a ``PosedState`` (where the model has bodies), whose ``body_q``/``body_qd`` are
computed from its joint coordinates and velocities when first read, recorded with the loss
term or the step, so gradients reach the joint state. A state's ``particle_f``, neighbour
lists and body wrenches belong to the step that starts from it, which has not run yet when
the state's loss term is recorded.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS, DYNAMIC_STATE_FIELDS, STORED_STATE_FIELDS
from wpsim.core.model import Control, State
from wpsim.core.validation import require_dt
from wpsim.diff.grad_health import (
    GradientMonitor,
    GradientReport,
    NonFiniteGradientError,
    adjoint_growth,
    backward_checked,
    clip_grad_norm,
    growth_message,
    nonfinite_grads,
)
from wpsim.solvers.base import start_rollout
from wpsim.solvers.kinematics import PosedState

MODES = ("full", "checkpoint")

_STATE_FIELDS = DYNAMIC_STATE_FIELDS + ("particle_f", "body_q", "body_qd", "body_f")
"""State arrays whose gradients a step's backward accumulates."""


def _record(fn, *args) -> wp.Tape:
    """A tape holding the launches of ``fn(*args)``."""
    tape = wp.Tape()
    with tape:
        fn(*args)
    return tape


def _zero_state_grads(state: State):
    for name in _STATE_FIELDS:
        grad = getattr(state, name).grad
        if grad is not None:
            grad.zero_()


def _zero_control(control: Control, grads: bool):
    """Zero a rollout-owned control's values (and gradients with ``grads``)."""
    for spec in CONTROL_FIELDS:
        arr = getattr(control, spec.name)
        arr.zero_()
        if grads and arr.grad is not None:
            arr.grad.zero_()


def _with_grads(names: dict) -> dict:
    return {name: arr for name, arr in names.items() if arr.grad is not None}


def _state_names(state: State, k: int) -> dict:
    return _with_grads({f"state[{k}].{name}": getattr(state, name) for name in _STATE_FIELDS})


def _control_names(control: Control | None, label: str) -> dict:
    if control is None:
        return {}
    return _with_grads({f"{label}.{s.name}": getattr(control, s.name) for s in CONTROL_FIELDS})


class Rollout:
    """A differentiable rollout of ``num_steps`` steps of ``dt`` seconds with a summed loss.

    Args:
        solver: an object with ``.model``, ``.step(state_in, state_out, control, dt)`` and an
            int ``.step_count`` (e.g. ``SemiImplicitSolver``); custom backward functions it
            records with ``tape.record_func`` are supported.
        num_steps: T >= 1.
        dt: time step (s).
        loss_fn: ``loss_fn(k, state, loss)`` for k = 0..T adds the loss term of state k into
            the array ``loss`` with Warp launches (the loss is the sum of their terms).
        control: None, one Control for every step, a list of T Controls (one per step), or
            a controller ``controller(k, state, control)`` that fills a zeroed Control
            provided by the rollout with Warp launches (recorded, so gradients reach the
            parameters it reads).
        mode: "full" or "checkpoint" (see the module docstring).
        segment_length: checkpoint segment length in steps (outer segments with
            ``levels=2``); default ceil(sqrt(T)), or ceil(T^(2/3)) with ``levels=2``.
        levels: 1 or 2 checkpoint levels (checkpoint mode).
        truncation_window: W >= 1 steps for truncated backpropagation, or None.
        adjoint_clip: maximum 2-norm of the adjoint a state receives from later steps, or None.
        loss_size: entries of ``loss`` (e.g. one per world, for per-world losses of a batch
            of independent worlds); the rollout's loss is their sum, ``losses()`` each one.
        adjoint_growth_limit: with ``backward(diagnostics=True)``, warn (once per Rollout)
            when the adjoint of the states grows past this factor beyond what the loss
            terms of the later states put in (``adjoint_growth``), naming the state range;
            None: no check.
    """

    def __init__(self, solver, num_steps: int, dt: float, loss_fn: Callable, control=None, mode: str = "checkpoint",
                 segment_length: int | None = None, levels: int = 1, truncation_window: int | None = None,
                 adjoint_clip: float | None = None, loss_size: int = 1, adjoint_growth_limit: float | None = None):
        for attr in ("model", "step", "step_count"):
            if not hasattr(solver, attr):
                raise ValueError(f"solver has no attribute {attr!r} (needs model, step and step_count)")
        if int(num_steps) != num_steps or num_steps < 1:
            raise ValueError(f"num_steps must be an integer >= 1, got {num_steps}")
        require_dt(dt)
        if not callable(loss_fn):
            raise ValueError("loss_fn must be callable as loss_fn(step, state, loss)")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        if levels not in (1, 2):
            raise ValueError(f"levels must be 1 or 2, got {levels}")
        if segment_length is not None and (int(segment_length) != segment_length or segment_length < 1):
            raise ValueError(f"segment_length must be an integer >= 1, got {segment_length}")
        if truncation_window is not None and (int(truncation_window) != truncation_window or truncation_window < 1):
            raise ValueError(f"truncation_window must be an integer >= 1, got {truncation_window}")
        if adjoint_clip is not None and not (adjoint_clip > 0.0 and math.isfinite(adjoint_clip)):
            raise ValueError(f"adjoint_clip must be a positive finite norm, got {adjoint_clip}")
        if int(loss_size) != loss_size or loss_size < 1:
            raise ValueError(f"loss_size must be an integer >= 1, got {loss_size}")
        if adjoint_growth_limit is not None and not adjoint_growth_limit > 1.0:
            raise ValueError(f"adjoint_growth_limit must be a factor > 1, got {adjoint_growth_limit}")
        self.loss_size = int(loss_size)
        self.adjoint_growth_limit = adjoint_growth_limit
        self.warnings: list = []
        """Messages of the warnings given (each at most once)."""
        self._loss_terms: set = set()  # states whose recorded loss term launched something
        self.solver, self.model = solver, solver.model
        self.num_steps, self.dt, self.loss_fn, self.mode = int(num_steps), float(dt), loss_fn, mode
        self.truncation_window, self.adjoint_clip = truncation_window, adjoint_clip
        self._controller, self._controls = self._parse_control(control)
        top = segment_length or math.ceil(self.num_steps ** (levels / (levels + 1.0)))
        self.segment_lengths = [min(int(top), self.num_steps)]
        """Checkpoint segment length (steps) per level, outermost first."""
        for _ in range(levels - 1):
            self.segment_lengths.append(math.ceil(math.sqrt(self.segment_lengths[-1])))
        self._buffers_grad = None  # requires_grad of the allocated checkpoint buffers
        self._pending = False  # a forward waits for its backward
        self._state0 = self._loss = self._final = None

    def _parse_control(self, control):
        """(controller or None, per-step list of Controls or None)."""
        if control is None or isinstance(control, Control):
            return None, [control] * self.num_steps
        if isinstance(control, (list, tuple)):
            if len(control) != self.num_steps:
                raise ValueError(f"got {len(control)} controls for {self.num_steps} steps (one per step expected)")
            bad = [k for k, c in enumerate(control) if not isinstance(c, Control)]
            if bad:
                raise ValueError(f"control[{bad[0]}] is a {type(control[bad[0]]).__name__}, not a Control")
            return None, list(control)
        if callable(control):
            return control, None
        raise ValueError("control must be None, a Control, a list of Controls or a controller, "
                         f"got {type(control).__name__}")

    # ------------------------------------------------------------------------ public API
    @property
    def loss(self) -> wp.array:
        """The loss array (``loss_size`` entries) of the last forward."""
        if self._loss is None:
            raise ValueError("no forward() has run yet")
        return self._loss

    def losses(self) -> np.ndarray:
        """(loss_size,) entries of the last forward's loss (host copy)."""
        return self.loss.numpy().astype(np.float64)

    @property
    def controller(self):
        """The controller callback given as ``control``, or None."""
        return self._controller

    def user_controls(self) -> list:
        """The distinct Controls given as ``control`` (none with a controller)."""
        return list({id(c): c for c in self._controls or [] if c is not None}.values())

    @property
    def final_state(self) -> State:
        """A State holding the positions and velocities after T steps (last forward); in
        checkpoint mode a copy without gradients."""
        if self._final is None:
            raise ValueError("no forward() has run yet")
        return self._final

    def forward(self, state0: State) -> float:
        """Run T steps from ``state0`` and return the loss, the sum of its entries (reads it
        back: one sync)."""
        if not isinstance(state0, State):
            raise ValueError(f"state0 must be a State, got {type(state0).__name__}")
        if hasattr(self.solver, "check_step"):  # before a loss or controller launch reads them
            for control in self.user_controls() or [None]:
                self.solver.check_step(state0, state0, control, self.dt)
        self._pending = False  # until this forward completes
        self._states = self._tapes = None  # release a previous full-mode forward first
        self._state0 = state0
        start_rollout(self.solver)
        self._loss = wp.zeros(self.loss_size, dtype=self.model.dtype, device=self.model.device, requires_grad=True)
        if self.mode == "full":
            self._states = [state0] + State.batch(self.model, self.num_steps, state0.requires_grad)
            self._scratch = None
            if self._controller is not None:
                self._scratch = [self.model.control(state0.requires_grad) for _ in range(self.num_steps)]
            self._tapes = self._record_range(0, self.num_steps, self._states, self._loss, self._scratch)
            self._final = self._states[-1]
        else:
            self._allocate(state0.requires_grad)
            self._sweep(0, self.num_steps, state0, 0, self._loss)
        self._pending = True
        return float(self.losses().sum())

    def backward(self, diagnostics: bool = False, check_finite: bool = False,
                 track: dict | None = None, loss_adjoint: wp.array | None = None) -> GradientReport | None:
        """Accumulate d loss / d x into the ``.grad`` of ``state0``'s positions and velocities,
        the controls and every array the steps read (model parameters, controller parameters).

        diagnostics: return a ``GradientReport``: per-state adjoint norms, each step's
            contribution to the gradients of ``track``, and the named gradients (model
            parameters, state 0, a single user Control, ``track``) that are non-finite at
            the end. Costs a few reductions per step and one sync at the end.
        check_finite: run every tape launch by launch and raise ``NonFiniteGradientError``
            at the first launch that makes a gradient NaN or Inf (names the arrays, kernel,
            argument and step). Costs one device synchronisation per launch (several per
            step): for debugging.
        track: name -> array with ``.grad`` (e.g. a controller's parameters), named in the
            report and the error; needs ``diagnostics`` or ``check_finite``.
        loss_adjoint: (loss_size,) weights of the loss entries (default all 1): the
            gradients are then those of sum_i loss_adjoint[i] * loss[i], a vector-Jacobian
            product of the per-entry losses.
        """
        if not self._pending:
            raise ValueError("backward() needs a forward() before it (one backward per forward)")
        if not self._state0.requires_grad:
            raise ValueError("backward(): state0 was created without requires_grad, so it has no gradient arrays")
        if track and not (diagnostics or check_finite):
            raise ValueError("track needs diagnostics=True or check_finite=True")
        if loss_adjoint is not None and loss_adjoint.shape != (self.loss_size,):
            raise ValueError(f"loss_adjoint must have shape ({self.loss_size},), got {loss_adjoint.shape}")
        self._names = self._base_names(track) if check_finite or diagnostics else {}
        if check_finite:
            already = nonfinite_grads(self._names)
            if already:
                raise NonFiniteGradientError(already, None)
        self._check = check_finite
        self._monitor = (GradientMonitor(self.num_steps, self.model.device, track, self._state0)
                         if diagnostics else None)
        self._pending = False
        try:
            if self.mode == "full":
                self._seed(self._loss, loss_adjoint)
                self._backward_steps(0, self.num_steps, self._states, *self._tapes)
                self._states = self._tapes = None  # final_state stays
            else:
                self._seed(self._rerun_loss, loss_adjoint)
                self._verify(self._state0, 0, self._checkpoint(0, 0, 0))
                final = tuple(getattr(self._final, name) for name in STORED_STATE_FIELDS)
                self._backward_range(0, self.num_steps, 0, final)
        finally:
            self.solver.step_count = self.num_steps
        cut = self._truncation_cut()
        if cut is not None:
            self._warn(cut)
        if not diagnostics:
            return None
        report = self._monitor.report(nonfinite_grads(self._names), self.truncation_window, self.adjoint_clip)
        growth = None if self.adjoint_growth_limit is None else adjoint_growth(report, self.adjoint_growth_limit)
        if growth is not None:
            self._warn(growth_message(growth, self.adjoint_growth_limit))
        return report

    @staticmethod
    def _seed(loss: wp.array, loss_adjoint: wp.array | None):
        """Set the adjoint of the loss entries: ones, or ``loss_adjoint``."""
        if loss_adjoint is None:
            loss.grad.fill_(1.0)
        else:
            wp.copy(loss.grad, loss_adjoint)

    def zero_grad(self):
        """Zero the gradients of ``state0`` (last forward), the user-given controls and the
        model parameters (not those of a controller's own parameters)."""
        arrays = list(self.model.parameter_arrays().values())
        if self._state0 is not None:
            arrays += [getattr(self._state0, name) for name in _STATE_FIELDS]
        for control in self.user_controls():
            arrays += [getattr(control, s.name) for s in CONTROL_FIELDS]
        for arr in arrays:
            if arr.grad is not None:
                arr.grad.zero_()

    # ------------------------------------------------------------------------ stepping
    def _step(self, k: int, state: State, out: State, scratch: Control | None):
        """Step k from ``state`` into ``out``; a controller fills ``scratch`` (zeroed) first."""
        if self._controller is None:
            control = self._controls[k]
        else:
            control = scratch
            self._controller(k, self._posed(state), control)
        self.solver.step(state, out, control, self.dt)

    def _posed(self, state: State) -> State:
        """What the loss and the controller see of ``state``: a ``PosedState`` where the model has
        bodies, so that their poses are those of the joint state (a step fills the state's own
        only when it starts from it, after its loss term and its controller have run)."""
        return PosedState(self.model, state) if self.model.body_count else state

    def _loss_term(self, k: int, state: State, loss: wp.array):
        self.loss_fn(k, self._posed(state), loss)

    def _record_range(self, s: int, e: int, states: list, loss: wp.array, scratch: list | None):
        """Record the loss terms of states s..e-1 (and T when e == T) and steps s..e-1 into
        ``states`` (states[j] is state s + j), one tape each; returns (loss_tapes, step_tapes)."""
        loss_tapes, step_tapes = [], []
        for k in range(s, e):
            loss_tapes.append(_record(self._loss_term, k, states[k - s], loss))
            step_tapes.append(_record(self._step, k, states[k - s], states[k - s + 1],
                                      None if scratch is None else scratch[k - s]))
        if e == self.num_steps:
            loss_tapes.append(_record(self._loss_term, e, states[e - s], loss))
        self._loss_terms.update(k for k, tape in zip(range(s, e + 1), loss_tapes) if tape.launches)
        return loss_tapes, step_tapes

    def _sweep(self, a: int, b: int, start: State, level: int, loss: wp.array | None = None) -> State:
        """Run steps a..b-1 unrecorded from ``start`` (state a), alternating between pool
        states 0 and 1, storing the states at the level's segment starts; with ``loss``, add
        the loss terms of states a..b into it and keep the final state. Returns state b."""
        length = self.segment_lengths[level]
        self.solver.step_count = a
        scratch = None if self._scratch is None else self._scratch[0]
        state = start
        if loss is not None:
            self._loss_term(a, state, loss)
        for k in range(a, b):
            if (k - a) % length == 0:
                for name, store in zip(STORED_STATE_FIELDS, self._checkpoint(level, a, k)):
                    wp.copy(store, getattr(state, name))
            out = self._pool[1] if state is self._pool[0] else self._pool[0]
            if scratch is not None:
                _zero_control(scratch, grads=False)
            self._step(k, state, out, scratch)
            if loss is not None:
                self._loss_term(k + 1, out, loss)
            state = out
        if loss is not None:
            self._final.assign(state)
        return state

    def _allocate(self, requires_grad: bool):
        """Checkpoint-mode buffers: the state pool, controller controls, checkpoint stores."""
        if self._buffers_grad == requires_grad:
            return
        model, leaf = self.model, self.segment_lengths[-1]
        self._pool = State.batch(model, leaf + 1, requires_grad)
        self._scratch = None  # the controller's Controls, one per step of a leaf segment
        if self._controller is not None:
            self._scratch = [model.control(requires_grad) for _ in range(leaf)]
        spans = [self.num_steps] + self.segment_lengths[:-1]
        self._final = State(model, False)
        fields = [getattr(self._final, name) for name in STORED_STATE_FIELDS]
        self._stores = [
            tuple(wp.zeros((math.ceil(span / length), f.shape[0]), dtype=f.dtype, device=model.device) for f in fields)
            for span, length in zip(spans, self.segment_lengths)
        ]
        self._carry = [wp.zeros_like(getattr(self._final, name)) for name in DYNAMIC_STATE_FIELDS]
        self._rerun_loss = wp.zeros(self.loss_size, dtype=model.dtype, device=model.device, requires_grad=True)
        self._buffers_grad = requires_grad

    # ------------------------------------------------------------------------ backward
    def _restore(self, s: int, level: int, a: int) -> State:
        """State s from the level's checkpoints of the range starting at a (state0 for s = 0)."""
        if s == 0:
            return self._state0
        start = self._pool[0]
        for name, store in zip(STORED_STATE_FIELDS, self._checkpoint(level, a, s)):
            wp.copy(getattr(start, name), store)
        return start

    def _checkpoint(self, level: int, a: int, k: int) -> tuple:
        """Arrays of the fields a step reads (``STORED_STATE_FIELDS``) stored for state k at
        ``level`` (range from a); an empty field is its (empty) array of the final state."""
        index = (k - a) // self.segment_lengths[level]
        return tuple(
            store[index] if store.shape[1] else getattr(self._final, name)
            for name, store in zip(STORED_STATE_FIELDS, self._stores[level])
        )

    def _backward_range(self, a: int, b: int, level: int, expected_end: tuple):
        """Backward of steps a..b-1, whose level-``level`` checkpoints are stored, segment by
        segment in reverse; an inner level first re-runs the segment to store its own. Every
        re-run must end where the forward went: at the next checkpoint, or at
        ``expected_end`` (the stored fields of state b)."""
        length = self.segment_lengths[level]
        for s in reversed(range(a, b, length)):
            e = min(s + length, b)
            end = expected_end if e == b else self._checkpoint(level, a, e)
            start = self._restore(s, level, a)
            if level + 1 == len(self.segment_lengths):
                self._backward_segment(s, e, start, end)
            else:
                self._verify(self._sweep(s, e, start, level + 1), e, end)
                self._backward_range(s, e, level + 1, end)

    def _backward_segment(self, s: int, e: int, start: State, expected_end: tuple):
        """Re-run steps s..e-1 recorded from ``start`` into the pool, check that state e is
        the forward's, seed its adjoint with the carried one, backpropagate and carry state
        s's adjoint on."""
        states = [start] + self._pool[1:e - s + 1]
        for state in states:
            if state is not self._state0:
                _zero_state_grads(state)
        if self._scratch is not None:
            for control in self._scratch[:e - s]:
                _zero_control(control, grads=True)
        if e < self.num_steps:
            for name, carry in zip(DYNAMIC_STATE_FIELDS, self._carry):
                wp.copy(getattr(states[-1], name).grad, carry)
        self.solver.step_count = s
        tapes = self._record_range(s, e, states, self._rerun_loss, self._scratch)
        self._verify(states[-1], e, expected_end)
        self._backward_steps(s, e, states, *tapes)
        if s > 0:
            for name, carry in zip(DYNAMIC_STATE_FIELDS, self._carry):
                wp.copy(carry, getattr(states[0], name).grad)

    def _verify(self, state: State, k: int, expected: tuple):
        """A re-run must reproduce the forward's state k bitwise (reads both back)."""
        for name, reference in zip(STORED_STATE_FIELDS, expected):
            if not np.array_equal(getattr(state, name).numpy(), reference.numpy()):
                raise RuntimeError(
                    f"the checkpointed re-run does not reproduce the forward's {name} of state {k}: a model "
                    "parameter, control, controller parameter or state0 changed between forward() and backward()"
                )

    def _backward_steps(self, s: int, e: int, states: list, loss_tapes: list, step_tapes: list):
        """Run the tapes of loss terms and steps from state e (or T) back to state s."""
        if e == self.num_steps:
            self._backward_state(e, states[e - s], loss_tapes[e - s])
        for k in reversed(range(s, e)):
            control = self._controls[k] if self._controller is None else self._scratch[k - s]
            names = {**_state_names(states[k - s], k), **_state_names(states[k - s + 1], k + 1),
                     **_control_names(control, f"control[{k}]")} if self._check else {}
            if self._monitor is not None:
                self._monitor.before_step()
            self._run(step_tapes[k - s], k, False, names)
            if self._monitor is not None:
                self._monitor.after_step(k)
            self._backward_state(k, states[k - s], loss_tapes[k - s])

    def _backward_state(self, k: int, state: State, loss_tape: wp.Tape):
        """Truncate or clip the adjoint state k got from later steps, add its loss term's."""
        integrated = [getattr(state, name) for name in DYNAMIC_STATE_FIELDS]
        if self.truncation_window and 0 < k < self.num_steps and k % self.truncation_window == 0:
            for arr in integrated:
                arr.grad.zero_()
        elif self.adjoint_clip is not None and 0 < k < self.num_steps:
            clip_grad_norm(integrated, self.adjoint_clip, sync=False)
        if self._monitor is not None:
            self._monitor.before_loss_term(state)
        self._run(loss_tape, k, True, _state_names(state, k) if self._check else {})
        if self._monitor is not None:
            self._monitor.state_adjoint(k, state)

    def _reach(self, k: int) -> range:
        """The states whose loss terms reach the adjoint of state k: k up to the first
        truncation point at or after it (W for state 0), or T."""
        window = self.truncation_window or self.num_steps
        return range(k, min(self.num_steps, window * max(1, math.ceil(k / window))) + 1)

    def _truncation_cut(self) -> str | None:
        """The warning when the truncation window cuts every path to the loss from ``state0``
        or from the per-step Controls of some steps (their gradients are then exactly 0)."""
        if not self.truncation_window or not self._loss_terms:
            return None
        last = max(self._loss_terms)
        cut = [] if self._loss_terms.intersection(self._reach(0)) else ["state0"]
        steps = {}  # id of a user Control -> the steps it is used at
        for k, control in enumerate(self._controls or []):
            if control is not None:
                steps.setdefault(id(control), []).append(k)
        cut_steps = [k for ks in steps.values() if last > ks[0] and
                     not any(self._loss_terms.intersection(self._reach(j + 1)) for j in ks) for k in ks]
        if cut_steps:
            cut.append(f"the controls of steps {_ranges(sorted(cut_steps))}")
        if not cut:
            return None
        return (f"truncation_window={self.truncation_window} cuts every path to the loss from {' and '.join(cut)}: "
                f"their gradients are exactly 0 (loss terms at states {_ranges(sorted(self._loss_terms))}; the "
                "adjoint of a state reaches back only to the previous multiple of the window)")

    def _warn(self, message: str):
        """Warn once per Rollout with ``message``."""
        if message not in self.warnings:
            self.warnings.append(message)
            warnings.warn(message, stacklevel=3)

    def _run(self, tape: wp.Tape, k: int, loss_term: bool, names: dict):
        """Backward of one tape, launch by launch with ``check_finite``."""
        if not self._check:
            tape.backward()
            return
        named = {id(a) for a in self._names.values()}
        names = {**self._names, **{n: a for n, a in names.items() if id(a) not in named}}
        source = backward_checked(tape, names=names, step=k, loss_term=loss_term)
        if source is not None:
            raise NonFiniteGradientError(nonfinite_grads(names), source)

    def _base_names(self, track: dict | None) -> dict:
        """Named gradients reported by diagnostics: model parameters, state 0, user-given
        controls and tracked arrays."""
        names = _with_grads({f"model.{n}": a for n, a in self.model.parameter_arrays().items()})
        names.update(_state_names(self._state0, 0))
        controls = self.user_controls()
        if len(controls) == 1:
            names.update(_control_names(controls[0], "control"))
        names.update(track or {})
        return names


def _ranges(values: list) -> str:
    """Sorted integers as "0-4, 7, 9-10"."""
    runs = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
