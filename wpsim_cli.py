"""The ``wpsim`` console script's first module: it catches SIGINT and SIGTERM before
``import wpsim`` (about a second of Warp and numpy loading) and then runs
``wpsim.apps.cli.main``, so a signal at any moment ends the command with one line and no
traceback. It sits outside the package because importing any module of ``wpsim`` runs
``wpsim/__init__.py`` first; for ``python -m wpsim.apps.cli`` that file calls
``catch_stops_as_module`` before it loads anything else, and the module's ``__main__`` runs
``main``."""

import signal
import sys

_STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
MODULE = "wpsim.apps.cli"
"""The command line's module, as ``python -m`` names it."""
_early: list = []  # stop signals recorded before wpsim.apps.cli took the signals over


def _record(signum, frame):
    _early.append(signum)


def catch_stops():
    """Record SIGINT and SIGTERM (``main`` reports them) instead of dying of them."""
    for stop in _STOPS:
        signal.signal(stop, _record)


def catch_stops_as_module():
    """``catch_stops`` while ``python -m wpsim.apps.cli`` loads its package (``sys.argv[0]`` is
    ``-m`` until the module runs); nothing in any other process."""
    argv = getattr(sys, "orig_argv", [])
    named = [argv[k + 1] for k in range(len(argv) - 1) if argv[k] == "-m"] + [a[2:] for a in argv if a[:2] == "-m"]
    if sys.argv[:1] == ["-m"] and MODULE in named:
        catch_stops()


def main(argv=None) -> int:
    """Run ``wpsim ARGV`` (``wpsim.apps.cli.main``); a stop signal while wpsim loads prints
    ``wpsim: interrupted`` (or ``terminated``) and returns 128 + its number."""
    catch_stops()
    if not _early:
        from wpsim.apps.cli import main as run

    status = None if _early else run(argv)
    if _early:  # before wpsim.apps.cli took over the signals, or after it gave them back
        print(f"wpsim: {_STOPS[_early[0]]}", file=sys.stderr, flush=True)
        return 128 + int(_early[0])
    return status


if __name__ == "__main__":
    sys.exit(main())
