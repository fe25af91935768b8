"""A kernel launch, forward or adjoint, prepared once and re-run many times with some of its
arguments changed."""

from __future__ import annotations

import ctypes

import warp as wp

PREPARED_LAUNCHES = 8
"""Launch sets a cache of prepared launches keeps (ping-pong stepping needs two); beyond it a kept
set of the same kernels is retargeted to the new arguments."""


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
        adjoints = {}
        if adjoint:
            adjoints = {"adj_inputs": [adjoint_of(a) for a in inputs], "adj_outputs": [adjoint_of(a) for a in outputs]}
        self.command = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_tape=False,
                                 record_cmd=True, adjoint=adjoint, **adjoints)
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
        for mine, theirs in zip(self._blocks, other._blocks):
            ctypes.memmove(ctypes.addressof(mine), ctypes.addressof(theirs), ctypes.sizeof(mine))

    def set(self, index: int, value, adjoint=None):
        """Set argument ``index`` (inputs then outputs) to ``value`` and, for an adjoint
        launch, its adjoint to ``adjoint`` (default: ``adjoint_of(value)``)."""
        self.arguments[index] = value
        command = self.command
        if self.adjoint and adjoint is None:
            adjoint = adjoint_of(value)
        if self._blocks is not None and isinstance(value, wp.array) and isinstance(adjoint, (wp.array, type(None))):
            name = self._names[index]
            setattr(self._blocks[0], name, value.__ctype__())
            if self.adjoint:
                setattr(self._blocks[1], name, adjoint.__ctype__() if adjoint is not None else
                        type(getattr(self._blocks[1], name))())
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


class PreparedLaunchSets:
    """Unrecorded launch sequences prepared once (``PreparedLaunch``) and kept by their arguments,
    so that re-running the same sequence on the same arrays (a solver's steps between the same
    states) skips ``wp.launch``'s argument packing. A sequence is a list of ``KernelLaunch``;
    arguments named in ``varying`` change on every run (a step number) and are set each time.
    Once ``capacity`` sets are kept, a kept set of the same kernels is retargeted to a new
    sequence's arguments (callers that step fresh states every time)."""

    def __init__(self, device, capacity: int = PREPARED_LAUNCHES):
        self.device = device
        self.capacity = capacity
        self._sets = {}

    def __len__(self) -> int:
        return len(self._sets)

    def run(self, launches: list, varying: tuple = ()):
        """Launch ``launches`` in order; ``varying``: (launch position, argument index) pairs left
        out of the lookup key (the current values are set before the run)."""
        kernels = tuple((launch.kernel, launch.dim) for launch in launches)
        skipped = set(varying)
        key = (kernels, tuple(
            id(value) if isinstance(value, wp.array) else (type(value), value)
            for position, launch in enumerate(launches)
            for index, value in enumerate((*launch.inputs, *launch.outputs)) if (position, index) not in skipped
        ))
        prepared = self._sets.pop(key, None)
        if prepared is None:
            prepared = self._spare(kernels)
            if prepared is None:
                prepared = [PreparedLaunch(launch.kernel, launch.dim, launch.inputs, launch.outputs, self.device)
                            for launch in launches]
            else:
                for kept, launch in zip(prepared, launches):
                    kept.retarget(launch.inputs, launch.outputs)
        self._sets[key] = prepared
        for position, index in varying:
            launch = launches[position]
            value = (*launch.inputs, *launch.outputs)[index]
            if prepared[position].arguments[index] != value:
                prepared[position].set(index, value)
        for kept in prepared:
            kept.run()

    def _spare(self, kernels: tuple):
        """Once the cache is full: remove and return the oldest kept set of these kernels (None
        if there is none; the oldest set of all is dropped to make room)."""
        if len(self._sets) < self.capacity:
            return None
        spare = next((key for key in self._sets if key[0] == kernels), None)
        if spare is None:
            self._sets.pop(next(iter(self._sets)))
            return None
        return self._sets.pop(spare)
