"""The code passes the ruff checks of pyproject.toml, the same that the pre-commit hook runs."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (the test extra installs it)")
    proc = subprocess.run([ruff, "check", "--no-cache", "wpsim", "kernels", "tests", "examples", "benchmarks", "docs",
                           "assets", "wpsim_cli.py"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
