"""Gradient health: where non-finite gradients come from, clipping by global norm, and the
per-step adjoint norms of a rollout.

- ``nonfinite_grads`` names the arrays whose ``.grad`` holds NaN or Inf.
- ``backward_checked`` runs a tape's backward one launch at a time and returns the first
  launch whose adjoint turned a gradient non-finite (kernel name and argument).
- ``clip_grad_norm`` scales gradients in place to a maximum global 2-norm.
- ``GradientMonitor`` collects, during ``wpsim.diff.Rollout.backward``, the norm of the loss
  adjoint of every state (particles, joints, bodies) and of each step's contribution to
  chosen gradients; its ``GradientReport`` is JSON-ready (``to_dict``) and plotted by
  ``wpsim.io.plots.plot_gradient_norms``.
- ``adjoint_growth`` finds the states whose adjoint grew past a factor beyond what the loss
  terms explain (``growth_message`` words the warning that ``Rollout`` and
  ``wpsim.opt.Problem`` give).

All reductions run on the device over flat scalar views of the gradient arrays (any
float32/float64 scalar, vector or matrix dtype, contiguous), launched with
``record_tape=False``; results are read back with one synchronisation per call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from wpsim.core.fields import DYNAMIC_STATE_FIELDS
from wpsim.core.health import SimulationError
from wpsim.kernels.generic import PRECISIONS, for_precision
from wpsim.kernels.gradients import count_nonfinite, scale_to_norm, sum_squared_change, sum_squares

_NO_INDEX = 2**31 - 1


def _flat(arr: wp.array, name: str, writable: bool = False) -> wp.array:
    """A flat 1-D view of the scalars of a float32/float64 array; of a contiguous copy when
    the array is strided (not allowed when the result is to be written)."""
    scalar = getattr(arr.dtype, "_wp_scalar_type_", arr.dtype)
    if scalar not in PRECISIONS:
        raise ValueError(f"{name}: dtype {wp.types.type_repr(arr.dtype)} is not built on float32 or float64")
    if not arr.is_contiguous:
        if writable:
            raise ValueError(f"{name}: the array is not contiguous, so its gradient cannot be scaled in place")
        arr = arr.contiguous()
    view = arr if arr.dtype is scalar else arr.view(scalar)
    return view.flatten()


def _grad(name: str, arr: wp.array) -> wp.array:
    """The gradient array of ``arr``, or a ValueError naming it."""
    if not isinstance(arr, wp.array):
        raise ValueError(f"{name}: expected a warp array, got {type(arr).__name__}")
    if arr.grad is None:
        raise ValueError(f"{name} has no gradient array (allocate it with requires_grad=True)")
    return arr.grad


def _launch(generic_kernel, values: wp.array, dim: int, inputs: list, outputs: list):
    """Launch a diagnostic kernel at the precision of the flat view ``values`` (not recorded)."""
    wp.launch(for_precision(generic_kernel, values.dtype), dim=dim, inputs=inputs, outputs=outputs,
              device=values.device, record_tape=False)


def _same_device(grads: list, what: str):
    devices = {str(g.device) for g in grads}
    if len(devices) > 1:
        raise ValueError(f"{what}: all arrays must be on one device, got {sorted(devices)}")
    return grads[0].device


# ---------------------------------------------------------------------------- non-finite detection
@dataclass
class NonFiniteGrad:
    """A gradient holding NaN or Inf: ``count`` of its ``size`` elements (a vector counts
    once), the lowest offending element index ``first_index``."""

    name: str
    count: int
    size: int
    first_index: int

    def __str__(self) -> str:
        return f"{self.name} ({self.count} of {self.size} entries, first at index {self.first_index})"


def _find_nonfinite(items: list) -> list:
    """``NonFiniteGrad`` of every (name, gradient array) pair holding NaN or Inf (one sync)."""
    items = [(name, g) for name, g in items if g.size > 0]
    if not items:
        return []
    device = _same_device([g for _, g in items], "nonfinite_grads")
    count = wp.zeros(len(items), dtype=int, device=device)
    first = wp.full(len(items), _NO_INDEX, dtype=int, device=device)
    for slot, (name, g) in enumerate(items):
        flat = _flat(g, name)
        _launch(count_nonfinite, flat, g.size, [flat, wp.types.type_size(g.dtype), slot], [count, first])
    counts, firsts = count.numpy(), first.numpy()
    return [NonFiniteGrad(name, int(c), g.size, int(f)) for (name, g), c, f in zip(items, counts, firsts) if c > 0]


def nonfinite_grads(arrays: dict) -> list:
    """The arrays (name -> array with ``.grad``) whose gradient holds NaN or Inf, as a list
    of ``NonFiniteGrad`` (empty when all are finite); one device synchronisation."""
    return _find_nonfinite([(name, _grad(name, arr)) for name, arr in arrays.items()])


@dataclass
class NonFiniteSource:
    """The backward launch that first turned a gradient non-finite.

    kernel: kernel name, or the qualified name of a custom backward function
        (``tape.record_func``, then ``custom`` is True); launch_index: its index in
        ``tape.launches`` (forward order); arguments: the arguments whose gradient it made
        non-finite, as "label (array name)" where the array is named (label "array" for a
        custom backward function); step: step index, or the state index for a loss term
        (``loss_term``), when the tape belongs to a rollout.
    """

    kernel: str
    launch_index: int
    arguments: list
    step: int | None = None
    loss_term: bool = False
    custom: bool = False

    def __str__(self) -> str:
        where = ""
        if self.step is not None:
            where = f"in the loss term of state {self.step} " if self.loss_term else f"at step {self.step} "
        kind = "custom backward function" if self.custom else "kernel"
        return f"{where}by {kind} {self.kernel}, argument {', '.join(self.arguments)}"


class NonFiniteGradientError(SimulationError):
    """A backward pass produced NaN or Inf gradients: ``grads`` lists the named gradients
    that are non-finite (``NonFiniteGrad``), ``source`` the launch that produced the first
    one (``NonFiniteSource``, or None when they were non-finite before the backward)."""

    def __init__(self, grads: list, source: NonFiniteSource | None):
        self.grads = grads
        self.source = source
        what = ", ".join(str(g) for g in grads) or "(no named array)"
        where = f"first produced {source}" if source is not None else "already non-finite before the backward"
        super().__init__(f"non-finite gradient: {what}; {where}")


def _launch_name(launch) -> str:
    if callable(launch):
        return getattr(launch, "__qualname__", repr(launch))
    return launch[0].key


def _launch_arguments(tape: wp.Tape, launch) -> list:
    """(argument label, array) of a tape entry's arguments that carry a gradient; for a
    custom backward function, the arrays registered on the tape with ``record_func``."""
    if callable(launch):
        pairs = [("array", a) for a in tape.gradients if isinstance(a, wp.array)]
    else:
        kernel_, inputs, outputs = launch[0], launch[3], launch[4]
        pairs = [(arg.label, a) for arg, a in zip(kernel_.adj.args, list(inputs) + list(outputs))]
    return [(label, a) for label, a in pairs if isinstance(a, wp.array) and a.grad is not None]


def backward_checked(tape: wp.Tape, loss: wp.array | None = None, names: dict | None = None,
                     step: int | None = None, loss_term: bool = False) -> NonFiniteSource | None:
    """Run ``tape``'s backward one launch at a time and stop at the first launch after
    which a gradient of one of its arguments is NaN or Inf.

    The launches and their order are those of ``tape.backward()``, so when nothing is
    non-finite the gradients are bitwise the same. ``loss`` (optional) is seeded with
    gradient 1 as ``tape.backward(loss)`` does. ``names`` (name -> array) names the arrays
    in the result; ``step``/``loss_term`` are copied into it. Every gradient the tape
    touches is checked first (ValueError if one is already non-finite), then after every
    launch the gradients of that launch's arguments: one device synchronisation per launch.
    After a custom backward function (``record_func``) all arrays registered on the tape
    are checked. Post hoc: ``tape.zero(); backward_checked(tape, loss)`` replays a backward
    that went wrong. Returns the ``NonFiniteSource``, or None when all stayed finite.
    Array fields of ``wp.struct`` arguments are not checked (wpsim kernels take none).
    """
    if loss is not None:
        if loss.size != 1 or loss.grad is None:
            raise ValueError("backward_checked: loss must be a one-element array with requires_grad=True")
        loss.grad.fill_(1.0)
    by_id = {id(a): name for name, a in (names or {}).items()}

    def label(arg, a):
        return f"{arg} ({by_id[id(a)]})" if id(a) in by_id else arg

    touched = {id(a): (label(arg, a), a.grad) for entry in tape.launches for arg, a in _launch_arguments(tape, entry)}
    already = _find_nonfinite(list(touched.values()))
    if already:
        raise ValueError(f"backward_checked: gradients already non-finite before the backward: "
                         f"{', '.join(str(g) for g in already)}")
    single = wp.Tape()
    try:
        for index in reversed(range(len(tape.launches))):
            entry = tape.launches[index]
            single.launches = [entry]
            single.backward()
            args = [(label(arg, a), a.grad) for arg, a in _launch_arguments(tape, entry)]
            bad = _find_nonfinite(args)
            if bad:
                return NonFiniteSource(_launch_name(entry), index, [g.name for g in bad], step, loss_term,
                                       callable(entry))
    finally:
        tape.gradients.update(single.gradients)  # so that tape.zero() clears them as after tape.backward()
    return None


# ---------------------------------------------------------------------------- clipping
def _named_items(arrays) -> list:
    items = list(arrays.items()) if isinstance(arrays, dict) else [(f"arrays[{i}]", a) for i, a in enumerate(arrays)]
    if not items:
        raise ValueError("no arrays given")
    return items


def clip_grad_norm(arrays, max_norm: float, sync: bool = True) -> float | None:
    """Scale the gradients of ``arrays`` (a dict name -> array, or a sequence of arrays) in
    place so that their global 2-norm, sqrt of the sum of squares of all gradient entries
    (gradient units), is at most ``max_norm``. Returns the norm before clipping; with
    ``sync=False`` nothing waits for the device and None is returned. A non-finite norm
    leaves the gradients unchanged."""
    if not (max_norm > 0.0 and math.isfinite(max_norm)):
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm}")
    items = {a.grad.ptr if a.grad is not None else id(a): (name, a) for name, a in _named_items(arrays)}
    flats = [_flat(_grad(name, a), name, writable=True) for name, a in items.values()]  # each gradient once
    total = wp.zeros(1, dtype=wp.float64, device=_same_device(flats, "clip_grad_norm"))
    for flat in flats:
        _launch(sum_squares, flat, flat.size, [flat, 0], [total])
    for flat in flats:
        _launch(scale_to_norm, flat, flat.size, [total, wp.float64(max_norm)], [flat])
    return math.sqrt(float(total.numpy()[0])) if sync else None


# ---------------------------------------------------------------------------- per-step norms
ADJOINT_FIELDS = ("particle_q", "particle_qd", "joint_q", "joint_qd", "body_q", "body_qd")
"""State fields whose adjoint norms a ``GradientReport`` holds for every state."""

ADJOINT_GROWTH_LIMIT = 1.0e3
"""Default growth of the per-state adjoint norm that triggers a warning: the adjoint of a
state over the sum of the adjoints that the loss terms of it and of the later states put in
directly (see ``adjoint_growth``), so that a loss summed over many states does not count as
growth by itself."""


@dataclass
class GradientReport:
    """Per-state gradient norms of one rollout backward (a variance diagnostic).

    adjoint_norms: state field (``ADJOINT_FIELDS``) -> (T+1,) 2-norm of dL/d field of state
        k = 0..T over all its entries, as propagated into step k-1 (after truncation and
        clipping; see ``Rollout``); loss units per unit of the field (per m for positions,
        per m/s for velocities, per rad or m for joint coordinates). Only this backward's
        adjoint counts: gradients that state 0 accumulated before it are not included.
        Body poses and velocities are those the step from state k computed: their adjoint
        is what reads them directly (particle-body contact, a loss through ``eval_fk``), 0
        at state T; the joint adjoints include it.
    step_contributions: tracked array name -> (T,) 2-norm of step k's contribution to
        dL/d(array) (loss units per unit of the array), k = 0..T-1.
    loss_adjoint_norms: (T+1,) combined 2-norm, over the integrated fields (as
        ``state_norm``), of the adjoint that the loss term of state k added to that state
        directly (0 where it has no term); None in a report made without it.
    nonfinite: ``NonFiniteGrad`` of the rollout's named gradients after the backward.
    truncation_window, adjoint_clip: the rollout's settings.
    """

    adjoint_norms: dict
    step_contributions: dict = field(default_factory=dict)
    nonfinite: list = field(default_factory=list)
    truncation_window: int | None = None
    adjoint_clip: float | None = None
    loss_adjoint_norms: np.ndarray | None = None

    @property
    def num_steps(self) -> int:
        return len(self.adjoint_norms["particle_q"]) - 1

    @property
    def adjoint_q_norm(self) -> np.ndarray:
        """(T+1,) norm of the particle position adjoints (loss units per m)."""
        return self.adjoint_norms["particle_q"]

    @property
    def adjoint_qd_norm(self) -> np.ndarray:
        """(T+1,) norm of the particle velocity adjoints (loss units per m/s)."""
        return self.adjoint_norms["particle_qd"]

    @property
    def state_norm(self) -> np.ndarray:
        """(T+1,) combined 2-norm of the adjoints of the integrated fields (particle and joint
        positions and velocities) of each state."""
        return np.sqrt(sum(self.adjoint_norms[name] ** 2 for name in DYNAMIC_STATE_FIELDS))

    def to_dict(self) -> dict:
        """JSON-serialisable content (lists of floats; NaN/Inf become None)."""

        def floats(values):
            return [float(v) if math.isfinite(v) else None for v in values]

        return {
            "num_steps": self.num_steps,
            "adjoint_norms": {name: floats(v) for name, v in self.adjoint_norms.items()},
            "step_contributions": {name: floats(v) for name, v in self.step_contributions.items()},
            "nonfinite": [vars(g) for g in self.nonfinite],
            "truncation_window": self.truncation_window,
            "adjoint_clip": self.adjoint_clip,
            "loss_adjoint_norms": None if self.loss_adjoint_norms is None else floats(self.loss_adjoint_norms),
        }


def adjoint_growth(report: GradientReport, limit: float = ADJOINT_GROWTH_LIMIT) -> dict | None:
    """Where the adjoint of a rollout grows past ``limit`` beyond what its loss terms explain
    (None if nowhere), from a ``GradientReport``.

    The growth of state k is its combined adjoint norm (``GradientReport.state_norm``) over
    the sum, over the states j >= k, of the norms of the adjoints that their loss terms
    added directly (``loss_adjoint_norms``; the latest state with a non-zero adjoint,
    ``reference``, counts with its whole adjoint). By the triangle inequality it is at most
    the largest amplification of an adjoint by the steps between k and a later loss term:
    a loss summed over many states does not raise it, an unstable or chaotic rollout does.
    With a loss at the last state only it is the growth back from that state. Returns
    {"reference", "first", "last" (states over the limit), "peak" (state), "growth"}."""
    norms = report.state_norm
    live = np.flatnonzero(norms > 0.0)
    if live.size == 0:
        return None
    reference = int(live[-1])
    injected = np.zeros(reference + 1)
    if report.loss_adjoint_norms is not None:
        injected[:] = report.loss_adjoint_norms[: reference + 1]
    injected[reference] = max(injected[reference], norms[reference])
    explained = np.cumsum(injected[::-1])[::-1]  # sum over j >= k, > 0 up to the reference
    growth = norms[: reference + 1] / explained
    over = np.flatnonzero(growth > limit)
    if over.size == 0:
        return None
    peak = int(np.argmax(growth))
    return {"reference": reference, "first": int(over[0]), "last": int(over[-1]), "peak": peak,
            "growth": float(growth[peak])}


def growth_message(growth: dict, limit: float) -> str:
    """The warning text for an ``adjoint_growth`` result, with the state range and remedies."""
    return (f"the adjoint of states {growth['first']}-{growth['last']} is more than {limit:g}x what the loss terms "
            f"of those and the later states (up to state {growth['reference']}) put in directly (up to "
            f"{growth['growth']:.3g}x at state {growth['peak']}): the rollout amplifies sensitivities back in time, "
            "so the gradient is dominated by those early steps and may be unreliable; consider "
            "Rollout(truncation_window=...) or Rollout(adjoint_clip=...)")


class GradientMonitor:
    """Accumulates on the device, during a rollout backward of ``num_steps`` steps, the norm
    of each state's adjoint and of each step's change of the gradients of ``track`` (name ->
    array with ``.grad``); ``report`` reads them back once. ``start`` (the rollout's state 0,
    whose gradients accumulate across backward passes) is measured by its change since the
    monitor was made."""

    def __init__(self, num_steps: int, device, track: dict | None = None, start=None):
        self.num_steps = num_steps
        self._norms = wp.zeros(len(ADJOINT_FIELDS) * (num_steps + 1), dtype=wp.float64, device=device)
        # views of the live gradients, so they must be contiguous
        self._track = [(name, _flat(_grad(name, a), name, writable=True)) for name, a in (track or {}).items()]
        self._before = [wp.empty_like(flat) for _, flat in self._track]
        self._changes = wp.zeros(len(self._track) * num_steps, dtype=wp.float64, device=device)
        self._loss_norms = wp.zeros(num_steps + 1, dtype=wp.float64, device=device)
        self._held: dict = {}  # field -> the state's adjoint before its loss term
        self._start = start
        self._baseline = {} if start is None else {
            name: wp.clone(flat) for name, flat in self._state_grads(start)}

    @staticmethod
    def _state_grads(state) -> list:
        """(field, flat gradient) of the ``ADJOINT_FIELDS`` of ``state`` that have entries."""
        grads = [(name, getattr(state, name).grad) for name in ADJOINT_FIELDS]
        return [(name, _flat(g, f"adjoint of {name}")) for name, g in grads if g is not None and g.size > 0]

    def before_loss_term(self, state):
        """Keep the adjoint of ``state``'s integrated fields before its loss term's backward."""
        for name, flat in self._state_grads(state):
            if name in DYNAMIC_STATE_FIELDS:
                if name not in self._held:
                    self._held[name] = wp.empty_like(flat)
                wp.copy(self._held[name], flat)

    def state_adjoint(self, k: int, state):
        """Record the norms of the adjoints (gradients) of state k's ``ADJOINT_FIELDS``, and
        of what its loss term added since ``before_loss_term``."""
        baseline = self._baseline if state is self._start else {}
        for name, flat in self._state_grads(state):
            if name in self._held:
                _launch(sum_squared_change, flat, flat.size, [flat, self._held[name], k], [self._loss_norms])
            slot = ADJOINT_FIELDS.index(name) * (self.num_steps + 1) + k
            if name in baseline:
                _launch(sum_squared_change, flat, flat.size, [flat, baseline[name], slot], [self._norms])
            else:
                _launch(sum_squares, flat, flat.size, [flat, slot], [self._norms])

    def before_step(self):
        """Snapshot the tracked gradients before a step's backward."""
        for (_, flat), before in zip(self._track, self._before):
            wp.copy(before, flat)

    def after_step(self, k: int):
        """Record the norm of step k's change of each tracked gradient."""
        for i, ((_, flat), before) in enumerate(zip(self._track, self._before)):
            _launch(sum_squared_change, flat, flat.size, [flat, before, i * self.num_steps + k], [self._changes])

    def report(self, nonfinite: list, truncation_window=None, adjoint_clip=None) -> GradientReport:
        """The ``GradientReport`` (one device synchronisation)."""
        norms = np.sqrt(self._norms.numpy()).reshape(len(ADJOINT_FIELDS), self.num_steps + 1)
        changes = np.sqrt(self._changes.numpy())
        contributions = {name: changes[i * self.num_steps:(i + 1) * self.num_steps]
                         for i, (name, _) in enumerate(self._track)}
        return GradientReport(dict(zip(ADJOINT_FIELDS, norms)), contributions, nonfinite, truncation_window,
                              adjoint_clip, np.sqrt(self._loss_norms.numpy()))
