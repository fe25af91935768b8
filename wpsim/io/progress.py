"""Progress on the terminal: one-line updates for logs, and a live bar (tqdm, when it is
installed) for long runs such as optimisations."""

from __future__ import annotations

import sys


def progress_line(done: int, total: int, message: str, width: int = 24, stream=None) -> None:
    """Print one progress line ``  12/60 [#####-----] message`` (one line per call, log friendly)."""
    filled = int(round(width * done / max(total, 1)))
    bar = "#" * filled + "-" * (width - filled)
    print(f"{done:>{len(str(total))}}/{total} [{bar}] {message}", file=stream or sys.stdout, flush=True)


class ProgressBar:
    """A progress bar over ``total`` units with a status text (the current loss and
    parameters, say): tqdm's bar on stderr when tqdm is installed, else one
    ``progress_line`` every ``every`` updates and at the end. ``enabled=False`` shows nothing."""

    def __init__(self, total: int, description: str, enabled: bool = True, every: int = 10):
        self.total, self.description, self.every, self.done = int(total), description, max(int(every), 1), 0
        self._bar = None
        self._enabled = enabled
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.total, desc=description, file=sys.stderr, dynamic_ncols=True, leave=True)

    def update(self, status: str, count: int = 1):
        """Advance by ``count`` units and show ``status``."""
        self.done += count
        if self._bar is not None:
            self._bar.set_postfix_str(status, refresh=False)
            self._bar.update(count)
        elif self._enabled and (self.done % self.every == 0 or self.done >= self.total):
            progress_line(min(self.done, self.total), self.total, f"{self.description}: {status}", stream=sys.stderr)

    def close(self):
        """Finish the bar (tqdm keeps its last line)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
