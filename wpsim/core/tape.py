"""Access to the ``wp.Tape`` that is recording, for code that must know about it or step
outside it (custom adjoints, host-side bookkeeping, export)."""

from __future__ import annotations

import contextlib

import warp as wp


def active_tape():
    """The ``wp.Tape`` currently recording, or None."""
    wp.init()
    return wp._src.context.runtime.tape



@contextlib.contextmanager
def tape_paused():
    """Suspend recording on the active ``wp.Tape`` (if any); yields that tape or None."""
    wp.init()
    runtime = wp._src.context.runtime
    tape, runtime.tape = runtime.tape, None
    try:
        yield tape
    finally:
        runtime.tape = tape
