"""A kernel launch prepared once and re-run many times with one changing integer argument."""

from __future__ import annotations

import ctypes

import warp as wp


class PreparedLaunch:
    """``wp.launch(..., record_cmd=True)`` kept for re-running, with the argument at
    ``counter_index`` (an int, e.g. a step number) changed per run.

    On the CPU, Warp's ``Launch.launch`` refills a ctypes argument block of every argument per
    run (about 1 us per argument); here the block is filled once, from the structure type Warp
    builds on the first run, and only the counter is rewritten. Where that structure is not
    found (another Warp version, CUDA, block launches), it re-runs through ``Launch.launch``.
    """

    def __init__(self, kernel, dim, inputs: list, outputs: list, device, counter_index: int):
        self.arrays = (inputs, outputs)
        """The launch's arguments, kept alive while it is."""
        self.command = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_tape=False,
                                 record_cmd=True)
        self.counter_index = counter_index
        self._block = None
        self._counter_name = None

    def run(self, counter: int):
        """Launch with the counter argument set to ``counter``."""
        if self._block is not None:
            setattr(self._block, self._counter_name, counter)
            self.command.hooks.forward(ctypes.byref(self.command.params[0]), ctypes.byref(self._block))
            return
        self.command.set_param_at_index(self.counter_index, counter)
        self.command.launch()
        if self.command.device.is_cpu and self.command.block_dim <= 1:
            self._prepare_block()

    def _prepare_block(self):
        """Build the ctypes argument block from the structure type of the launch just run."""
        command = self.command
        params = command.params
        cached = getattr(command.kernel, "_invoke_cache", {}).get((tuple(type(p) for p in params[1:]), False))
        if cached is None or len(cached) != 2:
            return
        structure, fields = cached
        block = structure()
        for k, (name, _) in enumerate(fields):
            setattr(block, name, params[1 + k])
        self._counter_name = fields[self.counter_index][0]
        self._block = block
