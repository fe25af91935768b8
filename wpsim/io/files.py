"""Files and terminal output for applications: atomic writes, progress lines, plots."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process's file-creation mask."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


_TEMP_TAG = "-wpsim"
"""Temporary files of ``atomic_write`` are named ``.<target name>-wpsim<pid>-<random><suffix>``;
a library that writes through its own temporary file beside that one (USD does) names it
from the same stem, so every leftover of a writer starts with ``.<target name>-wpsim<pid>-``."""


def _alive(pid: int) -> bool:
    """Whether a process with this id exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list:
    """Remove the temporary files that writers of ``path`` left behind when they were killed
    (their process is gone); returns the removed paths."""
    path = Path(path)
    prefix = f".{path.name}{_TEMP_TAG}"
    removed = []
    if not path.parent.is_dir():
        return removed
    for entry in path.parent.iterdir():
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            try:
                entry.unlink()
                removed.append(entry)
            except FileNotFoundError:
                pass  # another writer removed it first
    return removed


def atomic_write(path: str | os.PathLike, write) -> Path:
    """Write a file through ``write(tmp_path)`` into a temporary file beside ``path``, then
    rename it over ``path``, so an interrupted run never leaves a truncated file behind. The
    temporary file is removed on every error; one left by a writer that was killed (no
    handler runs then) is removed by the next write of the same path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp, held = None, _hold_termination_signals()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{_TEMP_TAG}{os.getpid()}-", suffix=path.suffix,
                                   dir=path.parent)
        os.close(fd)
        held = _release_signals(held)  # a SIGINT or SIGTERM that came meanwhile is handled here, tmp known
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        raise
    finally:
        _release_signals(held)
    return path


def _hold_termination_signals():
    """Hold SIGINT and SIGTERM (delivered when released) while a temporary file is created
    and its name is not yet known to the clean-up; returns the mask to restore (None where
    signal masks do not exist)."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _release_signals(held):
    """Restore the signal mask ``_hold_termination_signals`` returned (nothing for None);
    returns None."""
    if held is not None:
        import signal

        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return None


def write_json(path, data) -> Path:
    """Write ``data`` as indented JSON, atomically."""

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")

    return atomic_write(path, write)
