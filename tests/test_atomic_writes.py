"""Atomic file writes under interruption: writers of a USD stage killed at random moments
never leave a truncated target, and their temporary files (ours and USD's own) do not pile
up; a terminated (SIGTERM) command line leaves none at all."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from wpsim.io.files import atomic_write, remove_stale_temporaries

WRITER = textwrap.dedent("""
    import signal, sys
    import numpy as np
    from pxr import Usd, UsdGeom, Vt
    from wpsim.io.files import atomic_write
    if sys.argv[2] == "cli":  # what wpsim's command line does on SIGTERM
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    stage = Usd.Stage.CreateInMemory()
    points = UsdGeom.Points.Define(stage, "/World/points").GetPointsAttr()
    cloud = np.random.default_rng(0).random((20000, 3)).astype(np.float32)
    for t in range(100):
        points.Set(Vt.Vec3fArray.FromNumpy(cloud + t), t)
    print("ready", flush=True)
    while True:
        atomic_write(sys.argv[1], lambda tmp: stage.GetRootLayer().Export(str(tmp)))
""")


def _kill_writers(tmp_path, kills: int, sig, mode: str) -> list:
    """Start a writer of ``stage.usdc`` ``kills`` times and send it ``sig`` at a random
    moment; after each, check the target and return the leftover names seen."""
    from pxr import Usd

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    target = tmp_path / "out" / "stage.usdc"
    rng = random.Random(7)
    seen = []
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, str(script), str(target), mode], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(sig)
        proc.wait(timeout=60)
        if target.exists():  # never truncated: the stage opens with every frame
            stage = Usd.Stage.Open(str(target))
            assert stage.GetPrimAtPath("/World/points").GetAttribute("points").GetNumTimeSamples() == 100
        seen.append(sorted(p.name for p in target.parent.iterdir() if p.name != target.name))
    return seen


def test_killed_writers_leave_no_truncated_stage_and_no_pile_of_temporaries(tmp_path):
    seen = _kill_writers(tmp_path, 10, signal.SIGKILL, "plain")
    writers = [{name.split("-")[1] for name in names} for names in seen]
    assert all(len(pids) <= 1 for pids in writers), seen  # only the last killed writer's files remain
    assert any(seen), "no kill landed inside a write; the test did not exercise the clean-up"
    target = tmp_path / "out" / "stage.usdc"
    atomic_write(target, lambda tmp: open(tmp, "wb").write(b"next write"))  # sweeps the last writer's files
    assert sorted(p.name for p in target.parent.iterdir()) == ["stage.usdc"]


def test_terminated_command_line_writers_leave_nothing(tmp_path):
    seen = _kill_writers(tmp_path, 5, signal.SIGTERM, "cli")
    assert seen == [[]] * 5


def test_stale_temporaries_of_live_writers_are_kept(tmp_path):
    target = tmp_path / "stage.usdc"
    mine = tmp_path / f".stage.usdc-wpsim{os.getpid()}-abc.usdc"
    dead = tmp_path / ".stage.usdc-wpsim999999999-abc.Xy12zz"
    other = tmp_path / ".other.usdc-wpsim999999999-abc.usdc"
    for path in (mine, dead, other):
        path.write_bytes(b"")
    assert remove_stale_temporaries(target) == [dead]
    assert mine.exists() and other.exists() and not dead.exists()


def test_a_failed_write_removes_its_temporary(tmp_path):
    target = tmp_path / "plot.png"

    def fail(tmp):
        open(tmp, "wb").write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert list(tmp_path.iterdir()) == []
