"""The ``wpsim`` console script's first module: it catches SIGINT and SIGTERM before
``import wpsim`` (about a second of Warp and numpy loading) and then runs
``wpsim.apps.cli.main``, so a signal at any moment ends the command with one line and no
traceback. It sits outside the package because importing any module of ``wpsim`` runs
``wpsim/__init__.py`` first."""

import signal
import sys

_STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


def main(argv=None) -> int:
    """Run ``wpsim ARGV`` (``wpsim.apps.cli.main``); a stop signal while wpsim loads prints
    ``wpsim: interrupted`` (or ``terminated``) and returns 128 + its number."""
    early = []

    def record(signum, frame):
        early.append(signum)

    for stop in _STOPS:
        signal.signal(stop, record)
    if not early:
        from wpsim.apps.cli import main as run

    status = None if early else run(argv)
    if early:  # before wpsim.apps.cli took over the signals, or after it gave them back
        print(f"wpsim: {_STOPS[early[0]]}", file=sys.stderr, flush=True)
        return 128 + int(early[0])
    return status


if __name__ == "__main__":
    sys.exit(main())
