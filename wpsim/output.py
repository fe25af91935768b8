"""Files and terminal output for applications: atomic writes, progress lines, plots."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _umask() -> int:
    """The process's file-creation mask."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write) -> Path:
    """Write a file through ``write(tmp_path)`` into a temporary file beside ``path``, then
    rename it over ``path``, so an interrupted run never leaves a truncated file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def write_json(path, data) -> Path:
    """Write ``data`` as indented JSON, atomically."""

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")

    return atomic_write(path, write)


def save_figure(fig, path) -> Path:
    """Save a matplotlib figure atomically (format from the extension)."""
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))


def progress_line(done: int, total: int, message: str, width: int = 24, stream=None) -> None:
    """Print one progress line ``  12/60 [#####-----] message`` (one line per call, log friendly)."""
    filled = int(round(width * done / max(total, 1)))
    bar = "#" * filled + "-" * (width - filled)
    print(f"{done:>{len(str(total))}}/{total} [{bar}] {message}", file=stream or sys.stdout, flush=True)


def example_main(doc: str, name: str, test_help: str, run, check, argv=None) -> int:
    """The command line every example shares: --device, --out (default ./wpsim_out/NAME), --test.

    ``run(test, out, device)`` does the work and returns its result; with --test,
    ``check(result)`` returns a failure message (or None) and a failure exits with status 1.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    parser.add_argument("--out", default=f"wpsim_out/{name}", help="output folder (default: %(default)s)")
    parser.add_argument("--test", action="store_true", help=test_help)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = run(args.test, args.out, args.device)
    print(f"done in {time.perf_counter() - start:.1f} s")
    failure = check(result) if args.test else None
    if failure:
        raise SystemExit(f"test failed: {failure}")
    return 0
