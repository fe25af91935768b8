"""The README stays short and true: its two commands, its first example, its links."""

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
    assert len(code.splitlines()) <= 20
    proc = run_snippet(code, tmp_path, 300)
    assert "healthy | loss" in proc.stdout
    grad_line = next(line for line in proc.stdout.splitlines() if line.startswith("dloss/dv0"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", grad_line.split(":", 1)[1])]
    assert len(values) == 3 and any(abs(v) > 1e-4 for v in values)


def test_the_readme_is_short_and_its_links_lead_somewhere():
    assert len(README.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    assert [link for link in local if not (ROOT / link).exists()] == []
