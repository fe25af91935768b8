"""The examples check --out as the command line does, before any work: not a folder holding
a file they read (assets/, examples/), not an input itself, and writable; one line, status 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from wpsim.apps.console import check_example_out

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES, ASSETS = ROOT / "examples", ROOT / "assets"


def listing(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("script, out, message", [
    ("arm_sysid", ASSETS, f"--out {ASSETS}: would overwrite the input {ASSETS / 'arm_2link.xml'}"),
    ("arm_reach", EXAMPLES / "arm_reach.py", "is a file, not a folder"),
    ("billiards", EXAMPLES, f"would overwrite the input {EXAMPLES / 'billiards.py'}"),
])
def test_an_example_refuses_an_out_that_holds_or_is_an_input(script, out, message):
    before = listing(ASSETS), listing(EXAMPLES)
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{script}.py"), "--test", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and message in lines[-1] and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert (listing(ASSETS), listing(EXAMPLES)) == before and "done in" not in proc.stdout


def test_check_example_out(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("t\n0\n")
    check_example_out(tmp_path / "out", [data])  # a new folder beside the input: fine, nothing created
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="would overwrite the input"):
        check_example_out(tmp_path, [data])
    with pytest.raises(ValueError, match="is a file, not a folder"):
        check_example_out(data / "out", [])
    if Path("/proc/self").is_dir():  # Linux: nobody creates files in /proc
        with pytest.raises(ValueError, match="cannot write there"):
            check_example_out("/proc/wpsim_out", [])
