"""The README's commands and quickstart stay true."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"^python3 -m venv .*$", README, flags=re.M)
    assert len(commands) == 2, "the README gives exactly two setup commands"
    assert commands[0].endswith("wpsim demo")
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def snippet(heading: str) -> str:
    """The Python block right under ``## heading`` in the README."""
    return re.search(rf"## {heading}\n\n```python\n(.*?)```", README, flags=re.S).group(1)


def run_snippet(code: str, tmp_path, timeout: int) -> subprocess.CompletedProcess:
    """Run ``code`` as a script in ``tmp_path``; it must exit with status 0."""
    script = tmp_path / "snippet.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_quickstart_runs(tmp_path):
    code = snippet("Quickstart")
    assert len(code.splitlines()) <= 25
    proc = run_snippet(code, tmp_path, 300)
    assert "healthy | loss" in proc.stdout
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/dv0"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 3 and any(abs(v) > 1e-4 for v in values)


def test_long_horizon_snippet_runs(tmp_path):
    proc = run_snippet(snippet("Long horizons"), tmp_path, 600)
    loss = float(re.search(r"^loss (\S+) m\^2 after 3000 steps$", proc.stdout, flags=re.M).group(1))
    assert loss > 0.0
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/dv0"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 3 and any(abs(v) > 1e-3 for v in values)
    assert (tmp_path / "adjoint_norms.png").stat().st_size > 0


def test_robots_snippet_runs(tmp_path):
    proc = run_snippet(snippet("Robots"), tmp_path, 300)
    ball = re.search(r"^healthy \| ball at \[(\S+)", proc.stdout, flags=re.M)
    assert ball and float(ball.group(1)) > 0.5  # the arm hit the ball and it rolled away
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/d(joint targets)"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 2 and all(abs(v) > 1e-3 for v in values)


def test_fitting_snippet_recovers_the_spring(tmp_path):
    proc = run_snippet(snippet("Fitting parameters"), tmp_path, 300)
    fitted = {line.split()[0]: float(line.split()[2]) for line in proc.stdout.splitlines()
              if line.split()[:1] in (["ke"], ["kd"])}
    assert abs(fitted["ke"] / 400.0 - 1.0) < 1e-3 and abs(fitted["kd"] / 2.0 - 1.0) < 1e-3, proc.stdout
    assert (tmp_path / "fit.png").stat().st_size > 10_000


def test_pytorch_snippet_trains_the_policy(tmp_path):
    proc = run_snippet(snippet("PyTorch"), tmp_path, 600)
    losses = [float(v) for v in re.findall(r"^iteration \d+: loss (\S+) m\^2$", proc.stdout, flags=re.M)]
    assert len(losses) == 6  # iterations 0, 30, ..., 120, 149
    assert losses[-1] < losses[0] / 4.0
