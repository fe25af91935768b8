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


def test_the_version_moves_together_in_pyproject_the_package_and_the_changelog():
    import re

    import wpsim

    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    newest = re.search(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.M).group(1)
    assert declared == wpsim.__version__ == newest
