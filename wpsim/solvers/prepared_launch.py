"""A kernel launch, forward or adjoint, prepared once and re-run many times with some of its
arguments changed."""

from __future__ import annotations

import contextlib
import ctypes
import threading

import warp as wp

PREPARED_LAUNCHES = 8
"""Prepared unrecorded launch sets a fused articulation step keeps (a ping-pong of two states
under one control needs two)."""
CACHED_LAUNCHES = 64
"""Unrecorded launches a solver's ``PreparedLaunchCache`` keeps (a staged robot step with
soft-constraint contact makes about 20 distinct launches per pair of states)."""


def adjoint_of(value):
    """The adjoint an adjoint launch takes for argument ``value``, as ``wp.Tape.get_adjoint``
    gives it for wpsim's arguments but without a tape: an array's gradient, else None."""
    return value.grad if isinstance(value, wp.array) and value.grad else None


class PreparedLaunch:
    """``wp.launch(..., record_cmd=True)`` kept for re-running; ``retarget`` swaps the
    arguments that differ, ``run`` launches.

    On the CPU, Warp's ``Launch.launch`` refills a ctypes argument block of every argument per
    run (about 1 us per argument, twice for an adjoint launch); here the blocks are filled
    once, from the structure types Warp builds on the first run, and only changed arguments
    are rewritten. Where those structures are not found (another Warp version, CUDA, block
    launches), it re-runs through ``Launch.launch``.

    Args:
        kernel, dim, inputs, outputs, device: as for ``wp.launch``.
        adjoint: an adjoint launch, into the arguments' gradients (``adjoint_of``); the caller
            hands those arrays to the tape (``wp.Tape.record_func``) for ``tape.zero()``.
    """

    def __init__(self, kernel, dim, inputs: list, outputs: list, device, adjoint: bool = False):
        self.arguments = [*inputs, *outputs]
        """The launch's current arguments, kept alive while it is."""
        self.adjoint = adjoint
        self.adjoints = [adjoint_of(a) for a in self.arguments] if adjoint else None
        """An adjoint launch's current adjoints of its arguments (kept alive)."""
        adjoints = {}
        if adjoint:
            adjoints = {"adj_inputs": self.adjoints[:len(inputs)], "adj_outputs": self.adjoints[len(inputs):]}
        self.command = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_tape=False,
                                 record_cmd=True, adjoint=adjoint, **adjoints)
        """Warp's recorded launch; None for a launch of no threads (Warp records none), which runs nothing."""
        self._blocks = None
        self._names = None

    def retarget(self, inputs: list, outputs: list):
        """Use these arguments from the next run on (those of the same kernel launch for other
        arrays); only those that differ from the current ones are rewritten."""
        for index, new in enumerate([*inputs, *outputs]):
            old = self.arguments[index]
            if new is old or (not isinstance(new, wp.array) and type(new) is type(old) and new == old):
                continue
            self.set(index, new)

    def copy_arguments(self, other: PreparedLaunch):
        """Take every argument (and adjoint) of ``other``, a launch of the same kernel: a copy of
        its argument blocks where both have them, else argument by argument."""
        if self._blocks is None or other._blocks is None:
            for index, value in enumerate(other.arguments):
                if value is not self.arguments[index]:
                    self.set(index, value)
            return
        self.arguments = list(other.arguments)
        self.adjoints = None if other.adjoints is None else list(other.adjoints)
        for mine, theirs in zip(self._blocks, other._blocks):
            ctypes.memmove(ctypes.addressof(mine), ctypes.addressof(theirs), ctypes.sizeof(mine))

    def set(self, index: int, value, adjoint=None):
        """Set argument ``index`` (inputs then outputs) to ``value`` and, for an adjoint
        launch, its adjoint to ``adjoint`` (default: ``adjoint_of(value)``)."""
        previous = self.arguments[index]
        self.arguments[index] = value
        command = self.command
        if self.adjoint:
            if adjoint is None:
                adjoint = adjoint_of(value)
            previous_adjoint, self.adjoints[index] = self.adjoints[index], adjoint
        if command is None:
            return
        if self._blocks is not None and isinstance(value, wp.array) and isinstance(adjoint, (wp.array, type(None))):
            name = self._names[index]
            _point(self._blocks[0], name, previous, value)
            if self.adjoint:
                if adjoint is None:
                    setattr(self._blocks[1], name, type(getattr(self._blocks[1], name))())
                else:
                    _point(self._blocks[1], name, previous_adjoint, adjoint)
            return
        command.set_param_at_index(index, value)
        if self.adjoint:
            command.set_param_at_index(index, adjoint, adjoint=True)
        if self._blocks is not None:
            setattr(self._blocks[0], self._names[index], command.params[1 + index])
            if self.adjoint:
                setattr(self._blocks[1], self._names[index], command.params[1 + len(self.arguments) + index])

    def run(self):
        """Launch with the current arguments."""
        command = self.command
        if command is None:
            return
        if self._blocks is not None:
            bounds = ctypes.byref(command.params[0])
            if not self.adjoint:
                command.hooks.forward(bounds, ctypes.byref(self._blocks[0]))
            else:
                command.hooks.backward(bounds, ctypes.byref(self._blocks[0]), ctypes.byref(self._blocks[1]))
            return
        command.launch()
        if command.device.is_cpu and command.block_dim <= 1:
            self._prepare_blocks()

    def _prepare_blocks(self):
        """Build the ctypes argument blocks from the structure types of the launch just run."""
        command = self.command
        params = command.params
        adjoint = self.adjoint
        count = len(self.arguments)
        cached = getattr(command.kernel, "_invoke_cache", {}).get((tuple(type(p) for p in params[1:]), adjoint))
        if cached is None or len(cached) != (4 if adjoint else 2):
            return
        structures, fields = (cached[:2], cached[2:]) if adjoint else ((cached[0],), (cached[1],))
        blocks = []
        for k, (structure, names) in enumerate(zip(structures, fields)):
            block = structure()
            for i, (name, _) in enumerate(names):
                setattr(block, name, params[1 + k * count + i])
            blocks.append(block)
        self._names = [name for name, _ in fields[0]]
        self._blocks = blocks


def _point(block, name: str, previous, array: wp.array):
    """Make argument block ``block``'s array field ``name`` (which describes ``previous``) describe
    ``array``: where both have the same shape, strides and flags only its data and gradient
    pointers are written (building a new array's ctypes descriptor costs several times more),
    else its whole descriptor."""
    if (isinstance(previous, wp.array) and previous.shape == array.shape and previous.strides == array.strides
            and getattr(previous, "_retain_grad", False) == getattr(array, "_retain_grad", False)):
        field = getattr(block, name)
        field.data = array.ptr or 0
        field.grad = (array.grad.ptr or 0) if array.grad is not None else 0
        return
    setattr(block, name, array.__ctype__())


class PreparedLaunchCache:
    """Unrecorded launches prepared once (``PreparedLaunch``) and kept by kernel, dim and the
    identity of their array arguments, so that the same launch on the same arrays again (a
    solver's steps between the same states) skips ``wp.launch``'s argument packing; its other
    arguments (a step number, a time step) are retargeted on every run. Once ``capacity``
    launches are kept, the oldest kept launch of the same kernel and dim is retargeted to a new
    one's arrays (callers that step fresh states every time), else the oldest of all is dropped."""

    def __init__(self, capacity: int = CACHED_LAUNCHES):
        self.capacity = capacity
        self._kept = {}

    def __len__(self) -> int:
        return len(self._kept)

    def run(self, kernel, dim, inputs: list, outputs: list, device):
        """Launch ``kernel`` (as ``wp.launch(..., record_tape=False)``)."""
        arguments = (*inputs, *outputs)
        key = (kernel, dim if isinstance(dim, int) else tuple(dim),
               *[id(value) for value in arguments if isinstance(value, wp.array)])
        launch = self._kept.pop(key, None) or self._spare(key[:2])
        if launch is None:
            launch = PreparedLaunch(kernel, dim, inputs, outputs, device)
        else:
            launch.retarget(inputs, outputs)
        self._kept[key] = launch
        launch.run()

    def _spare(self, launch: tuple):
        """Once the cache is full: remove and return the oldest kept launch of this (kernel, dim)
        (None if there is none; the oldest launch of all is dropped to make room)."""
        if len(self._kept) < self.capacity:
            return None
        spare = next((key for key in self._kept if key[:2] == launch), None)
        if spare is None:
            self._kept.pop(next(iter(self._kept)))
            return None
        return self._kept.pop(spare)


_THREAD = threading.local()


@contextlib.contextmanager
def caching_launches(cache: PreparedLaunchCache):
    """Within the block, ``launch_unrecorded`` on the CPU runs through ``cache`` on this thread
    (a solver's step: the launches it keeps then live as long as the solver)."""
    previous = getattr(_THREAD, "cache", None)
    _THREAD.cache = cache
    try:
        yield
    finally:
        _THREAD.cache = previous


def launch_unrecorded(kernel, dim, inputs: list, outputs: list, device):
    """``wp.launch(..., record_tape=False)``; on the CPU within ``caching_launches``, through its cache."""
    cache = getattr(_THREAD, "cache", None)
    device = wp.get_device(device)
    if cache is None or not device.is_cpu:
        wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_tape=False)
        return
    cache.run(kernel, dim, inputs, outputs, device)
