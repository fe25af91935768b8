"""SIGINT and SIGTERM for the ``wpsim`` command line: one line, a conventional exit status
(128 + the signal's number) and nothing half-written, wherever the signal lands.

The handler raises ``Stopped`` (a ``KeyboardInterrupt``) in the main thread, so ``finally`` blocks and
``wpsim.io.files.atomic_write`` remove their temporary files as the command unwinds. Some
places swallow an exception raised there: a ``__del__`` (Python prints "Exception ignored"),
a C++ library calling back into Python (``pxr``'s module start-up turns it into a warning and
goes on). So the first signal also starts a timer (SIGALRM every ``RESEND_S``) that raises it
again while no exception is being handled, until the command has unwound; the unraisable
hook keeps the swallowed copy quiet; ``pxr`` is imported with a stop held back until the
import is done (``import_pxr``). A signal that lands in ``stopping``'s own frame (before the command starts,
after it returns) is only recorded.
"""

from __future__ import annotations

import contextlib
import signal
import sys

STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
"""The signals that stop a command, with the word of its one-line exit ``wpsim: WORD``."""
RESEND_S = 0.2
"""Period (s) at which a stop that some code swallowed is raised again."""



class Stopped(KeyboardInterrupt):
    """The stop a signal raises. Not ``KeyboardInterrupt`` itself: CPython marks a bare one that
    leaves an ``exec`` of a string (as scipy's imports do) as unhandled and then ends the process
    by SIGINT whatever the exit status."""


_received: list = []  # the stop signal of the running command, if any
_frames: list = []  # the code of ``stopping``'s own frames: a signal there is only recorded
_holding: list = []  # non-empty inside ``held_back``: a signal is only recorded


def received() -> int | None:
    """The stop signal the running command got (None: none)."""
    return _received[0] if _received else None


def _on_stop(signum, frame):
    """Record the signal; raise Stopped unless the command has not started or has
    returned, or it is already unwinding from a stop (its clean-up must not be cut short)."""
    first = not _received
    if first:
        _received.append(signum)
        signal.setitimer(signal.ITIMER_REAL, RESEND_S, RESEND_S)
    if _holding or (frame is not None and frame.f_code in _frames):
        return
    if first or sys.exc_info()[0] is None:
        raise Stopped


def _resend(signum, frame):
    """Raise the recorded stop again where no exception is being handled (it was swallowed)."""
    if _received and not _holding and sys.exc_info()[0] is None and (frame is None or frame.f_code not in _frames):
        raise Stopped


def _quiet_unraisable(previous):
    """An unraisable hook that drops the stop raised inside a ``__del__`` or callback (the
    timer raises it again) and hands anything else to ``previous``."""

    def hook(unraisable):
        if not (_received and isinstance(unraisable.exc_value, Stopped)):
            previous(unraisable)

    return hook


@contextlib.contextmanager
def held_back():
    """Only record a stop inside the block and raise it when the block ends: for code that
    swallows an exception raised inside it."""
    _holding.append(True)
    try:
        yield
    finally:
        _holding.pop()
    if _received and not _holding:
        raise Stopped


def import_pxr():
    """Import the ``pxr`` modules wpsim uses with a stop held back until they are imported
    (``pxr``'s module start-up swallows an exception raised in it and goes on, half imported)."""
    with held_back():
        from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade, UsdUtils, Vt  # noqa: F401


def stopping(command, stream=None) -> int:
    """``command()``'s exit status, or after SIGINT / SIGTERM one line ``wpsim: interrupted``
    (or ``terminated``) on ``stream`` (stderr) and 128 + the signal's number. The handlers,
    the unraisable hook and the SIGALRM handler are restored afterwards."""
    previous = {s: signal.getsignal(s) for s in (*STOPS, signal.SIGALRM)}
    hook = sys.unraisablehook
    _received.clear()
    _frames.append(stopping.__code__)
    status = None
    try:
        for s in STOPS:
            signal.signal(s, _on_stop)
        signal.signal(signal.SIGALRM, _resend)
        sys.unraisablehook = _quiet_unraisable(hook)
        try:
            if not _received:
                status = command()
        except BaseException:
            if not _received:
                raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        sys.unraisablehook = hook
        _frames.remove(stopping.__code__)
    if _received:
        print(f"wpsim: {STOPS[_received[0]]}", file=stream or sys.stderr, flush=True)
        return 128 + int(_received[0])
    return status
