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


def test_quickstart_runs(tmp_path):
    code = re.search(r"## Quickstart\n\n```python\n(.*?)```", README, flags=re.S).group(1)
    assert len(code.splitlines()) <= 25
    script = tmp_path / "quickstart.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "healthy | loss" in proc.stdout
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/dv0"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 3 and any(abs(v) > 1e-4 for v in values)


def test_long_horizon_snippet_runs(tmp_path):
    code = re.search(r"## Long horizons\n\n```python\n(.*?)```", README, flags=re.S).group(1)
    script = tmp_path / "long_horizon.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loss = float(re.search(r"^loss (\S+) m\^2 after 3000 steps$", proc.stdout, flags=re.M).group(1))
    assert loss > 0.0
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/dv0"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 3 and any(abs(v) > 1e-3 for v in values)
    assert (tmp_path / "adjoint_norms.png").stat().st_size > 0


def test_robots_snippet_runs(tmp_path):
    code = re.search(r"## Robots\n\n```python\n(.*?)```", README, flags=re.S).group(1)
    script = tmp_path / "robots.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ball = re.search(r"^healthy \| ball at \[(\S+)", proc.stdout, flags=re.M)
    assert ball and float(ball.group(1)) > 0.5  # the arm hit the ball and it rolled away
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/d(joint targets)"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 2 and all(abs(v) > 1e-3 for v in values)
