"""Every example runs in its short ``--test`` mode (which asserts its result) and writes its plots."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PLOTS = {
    "bounce_to_target": ["loss.png", "trajectory.png"],
    "cloth_drape": ["drape.png"],
    "long_horizon_swing": ["optimisation.png", "gradient_norms.png"],
    "soft_crawler": ["crawl.png"],
    "soft_stiffness_fit": ["fit.png"],
}


def test_every_example_is_listed():
    """A new example must say which plots it writes."""
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(PLOTS)


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_example(script, tmp_path):
    """The example's --test run succeeds and writes non-empty plots and result.json."""
    proc = subprocess.run(
        [sys.executable, str(script), "--test", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    for name in PLOTS.get(script.stem, []):
        plot = tmp_path / name
        assert plot.is_file() and plot.stat().st_size > 0, f"{script.name} did not write {name}"
    assert (tmp_path / "result.json").is_file()
