"""The kill tests (issue 45 items 2 and 7): every ``wpsim`` command that writes files, started
as the console script does (``python -m wpsim_cli``) and sent SIGINT or SIGTERM at a few points
of its work (while wpsim loads, once it has started, later on), ends with one line
(``wpsim: interrupted`` / ``wpsim: terminated``), status 130 / 143 and no traceback; its outputs
are absent or whole, no temporary file is left in ``--out`` and no process it started lives on.
(test_atomic_writes.py kills writers in the middle of a USD write; test_hostile_input.py has
the first Ctrl-C test of ``wpsim run``.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARM = ASSETS / "arm_2link.xml"
EXIT = {signal.SIGINT: (130, "wpsim: interrupted"), signal.SIGTERM: (143, "wpsim: terminated")}


class Command:
    """A ``wpsim`` subprocess whose merged output is read as it comes."""

    def __init__(self, args, env=None, entry=("-m", "wpsim_cli")):
        self.proc = subprocess.Popen([sys.executable, *entry, *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        self.text = ""
        self.start = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for chunk in iter(lambda: os.read(self.proc.stdout.fileno(), 65536), b""):
            self.text += chunk.decode(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 120.0):
        """Block until the output matches ``pattern`` (a regex)."""
        while not re.search(pattern, self.text):
            assert self.proc.poll() is None, f"ended before {pattern!r}:\n{self.text[-2000:]}"
            assert time.monotonic() - self.start < timeout, f"no {pattern!r} in {timeout} s:\n{self.text[-2000:]}"
            time.sleep(0.02)

    def stop(self, sig) -> str:
        """Send ``sig``, wait for the exit, check status and last line; returns the output."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=120)
        time.sleep(0.05)  # the reader's last chunk
        status, line = EXIT[sig]
        lines = [x for x in re.split(r"[\r\n]", self.text) if x.strip()]
        # a stop between a print's text and its newline (two writes) leaves that stdout line open
        assert self.proc.returncode == status and "Traceback" not in self.text and lines[-1].endswith(line), \
            f"status {self.proc.returncode}:\n{self.text[-3000:]}"
        return self.text


def at(command: Command, point):
    """Wait for ``point``: seconds after the start (a float) or an output pattern (a str)."""
    if isinstance(point, float):
        time.sleep(max(0.0, point - (time.monotonic() - command.start)))
    else:
        command.wait_for(point)


def no_leftovers(folder: Path):
    """No temporary files (names starting with '.') anywhere under ``folder``."""
    if folder.exists():
        hidden = [p for p in folder.rglob(".*")]
        assert not hidden, hidden


def whole_usd(path: Path):
    from pxr import Usd

    if path.exists():
        assert Usd.Stage.Open(str(path)) is not None


RUN_POINTS = [(0.3, signal.SIGTERM), (r"2 bodies", signal.SIGINT), (r" 3/10 \[", signal.SIGTERM)]


@pytest.mark.parametrize("point, sig", RUN_POINTS, ids=["loading-TERM", "started-INT", "stepping-TERM"])
def test_run_stops_in_one_line_leaving_no_partial_stage(tmp_path, point, sig):
    out = tmp_path / "out"
    command = Command(["run", ARM, "--steps", "30000", "--out", out / "x.usd", "--video", out / "x.gif"])
    at(command, point)
    command.stop(sig)
    no_leftovers(tmp_path)
    assert not (out / "x.gif").exists()
    whole_usd(out / "x.usd")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_the_module_entry_stops_in_one_line_while_wpsim_loads(tmp_path, sig):
    """``python -m wpsim.apps.cli`` (not only the console script) stopped inside ``import wpsim``
    (Warp is loaded, the kernels not yet: -X importtime says when) ends in one line, 130/143
    (was a KeyboardInterrupt traceback, or killed by SIGTERM without a word)."""
    out = tmp_path / "out"
    command = Command(["run", ARM, "--steps", "50", "--out", out / "x.usd"],
                      entry=("-X", "importtime", "-m", "wpsim.apps.cli"))
    at(command, r"\|\s+warp\s*[\r\n]")
    assert not re.search(r"\|\s+wpsim\.kernels\s*$", command.text, re.M)  # still loading wpsim
    command.stop(sig)
    assert not out.exists()


@pytest.fixture(scope="module")
def long_stage(tmp_path_factory) -> Path:
    """A 3 s rollout of the arm (181 frames)."""
    from wpsim.apps.cli import main

    path = tmp_path_factory.mktemp("stage") / "arm.usda"
    assert main(["run", str(ARM), "--steps", "3000", "--out", str(path)]) == 0
    return path


@pytest.mark.parametrize("point, sig", [(0.3, signal.SIGINT), (2.5, signal.SIGTERM)],
                         ids=["loading-INT", "drawing-TERM"])
def test_render_stops_in_one_line_leaving_no_partial_video(tmp_path, long_stage, point, sig):
    out = tmp_path / "out"
    command = Command(["render", long_stage, "--out", out / "r.gif"])
    at(command, point)
    command.stop(sig)
    no_leftovers(tmp_path)
    assert not (out / "r.gif").exists()


@pytest.mark.parametrize("point, sig", [(0.3, signal.SIGINT), (r"lbfgsb:", signal.SIGTERM), (r" 2/20 ", signal.SIGINT)],
                         ids=["loading-INT", "started-TERM", "fitting-INT"])
def test_sysid_stops_in_one_line_leaving_whole_files(tmp_path, point, sig):
    out = tmp_path / "out"
    # L-BFGS-B: the default least squares fits this arm in 0.2 s, too fast to stop while fitting
    command = Command(["sysid", ARM, ASSETS / "arm_2link_sysid.csv", "--method", "lbfgsb", "--iterations", "20",
                       "--out", out])
    at(command, point)
    command.stop(sig)
    no_leftovers(tmp_path)
    if (out / "sysid.json").exists():
        json.loads((out / "sysid.json").read_text())
    whole_usd(out / "calibrated.usda")


def test_demo_stops_in_one_line(tmp_path):
    out = tmp_path / "out"
    command = Command(["demo", "--task", "throw", "--out", out])
    at(command, r" 1/30 \[")
    command.stop(signal.SIGTERM)
    no_leftovers(tmp_path)


def _processes_with(marker: str) -> list:
    """Ids of live processes whose environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("point, sig", [(0.3, signal.SIGTERM), (r"building 1 kernel modules", signal.SIGINT)],
                         ids=["loading-TERM", "building-INT"])
def test_build_kernels_stops_in_one_line_and_stops_its_builders(tmp_path, point, sig):
    marker = f"wpsim-kill-test-{tmp_path}"  # unique across pytest-xdist workers
    command = Command(["build-kernels", "--module", "wpsim.kernels.particles", "--processes", "1"],
                      env={"WARP_CACHE_PATH": str(tmp_path / "cache"), "WPSIM_KILL_TEST": marker})
    at(command, point)
    if isinstance(point, str):
        time.sleep(0.5)  # the builder has started compiling
    command.stop(sig)
    time.sleep(0.2)
    assert not _processes_with(marker)  # a builder compiles for seconds: it was stopped, it did not finish


PXR_TRIP = """
import os, signal, sys
class Trip:  # SIGTERM to this process while pxr's modules are being imported
    def find_spec(self, name, path=None, target=None):
        if name == "pxr.Vt":
            os.kill(os.getpid(), signal.SIGTERM)
        return None
sys.meta_path.insert(0, Trip())
from wpsim.apps.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_during_the_pxr_import_ends_the_command(tmp_path):
    out = tmp_path / "x.usd"
    proc = subprocess.run([sys.executable, "-c", PXR_TRIP, "run", str(ARM), "--steps", "50", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "wpsim: terminated" and not out.exists(), proc.stderr
