"""The guides of ``docs/`` build into a site with the API reference (warnings are errors),
every Python block of a guide runs, every shell command of a guide names a real command,
option and file, and the performance tables are the benchmark records' figures."""

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GUIDES = sorted(DOCS.glob("*.md"))

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("pdoc")


def blocks(path: Path, language: str) -> list:
    """The fenced ``language`` blocks of a Markdown file, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def numbers_after(prefix: str, text: str) -> list:
    """The numbers on the first line of ``text`` that starts with ``prefix``."""
    line = next(line for line in text.splitlines() if line.startswith(prefix))
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", line[len(prefix):])]


def check_long_horizons(out: str, folder: Path):
    assert float(re.search(r"^loss (\S+) m\^2 after 3000 steps$", out, flags=re.M).group(1)) > 0.0
    values = numbers_after("dloss/dv0", out)
    assert len(values) == 3 and any(abs(v) > 1e-3 for v in values)
    assert (folder / "adjoint_norms.png").stat().st_size > 0
    assert len(re.findall(r"relative error \S+, ok True", out)) == 3


def check_robots(out: str, folder: Path):
    ball = re.search(r"^healthy \| ball at \[(\S+)", out, flags=re.M)
    assert ball and float(ball.group(1)) > 0.5  # the arm hit the ball and it rolled away
    values = numbers_after("dloss/d(joint targets)", out)
    assert len(values) == 2 and all(abs(v) > 1e-3 for v in values)


def check_fitting(out: str, folder: Path):
    fitted = {line.split()[0]: float(line.split()[2]) for line in out.splitlines() if line.split()[:1] in (["ke"], ["kd"])}
    assert abs(fitted["ke"] / 400.0 - 1.0) < 1e-3 and abs(fitted["kd"] / 2.0 - 1.0) < 1e-3, out
    assert (folder / "fit.png").stat().st_size > 10_000


def check_pytorch(out: str, folder: Path):
    losses = [float(v) for v in re.findall(r"^iteration \d+: loss (\S+) m\^2$", out, flags=re.M)]
    assert len(losses) == 6 and losses[-1] < losses[0] / 4.0  # iterations 0, 30, ..., 120, 149


def check_getting_started(out: str, folder: Path):
    assert re.search(r"^healthy$", out, flags=re.M)
    height = re.search(r"torso height 0\.450 m -> (\S+) m", out)
    assert height and 0.2 < float(height.group(1)) < 0.45  # settled on its feet, not through the floor


def check_soft_bodies(out: str, folder: Path):
    assert re.search(r"^\d+ tets, volume error \d\.\d %$", out, flags=re.M)
    lowest = float(re.search(r"^healthy \| lowest point (\S+) mm$", out, flags=re.M).group(1))
    assert 5.0 < lowest < 15.0  # resting on its particles' 10 mm radius


def check_contact(out: str, folder: Path):
    x = float(re.search(r"^healthy \| box at x = (\S+) m$", out, flags=re.M).group(1))
    assert 0.05 < x < 0.15
    assert 0.1 < numbers_after("dx/dv0 (s):", out)[0] < 0.3  # about its flight time, 0.175 s


def check_ray(out: str, folder: Path):
    start, end = (float(v) for v in re.search(r"^loss (\S+) -> (\S+) in \d+ iterations", out, flags=re.M).groups())
    assert end < 1e-3 * start  # the two workers' fit of four windows of the measured run
    fitted = {line.split()[0]: float(line.split()[2]) for line in out.splitlines() if line.startswith("link")}
    assert len(fitted) == 6 and abs(fitted["link2.mass"] / 0.4 - 1.0) < 0.05


CHECKS = {"gradients.md": check_long_horizons, "robots.md": check_robots, "optimisation.md": check_fitting,
          "pytorch.md": check_pytorch, "getting_started.md": check_getting_started,
          "soft_bodies.md": check_soft_bodies, "contact.md": check_contact, "ray.md": check_ray}
"""What each guide's blocks must print (every guide with a Python block has an entry)."""


def test_every_guide_with_code_has_its_checks():
    assert sorted(g.name for g in GUIDES if blocks(g, "python")) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_python_blocks_of_a_guide_run(name, tmp_path):
    """A guide's blocks run in order as one script in an empty folder."""
    if name == "pytorch.md":
        pytest.importorskip("torch")
    if name == "ray.md":
        pytest.importorskip("ray")
    script = tmp_path / "guide.py"
    script.write_text("\n".join(blocks(DOCS / name, "python")))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    CHECKS[name](proc.stdout, tmp_path)


def shell_commands(path: Path) -> list:
    """The commands of a guide's bash blocks (comments and blank lines dropped)."""
    lines = [line.split(" #")[0].strip() for block in blocks(path, "bash") for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def command_problem(line: str):
    """Why a guide's shell command would fail (None: it names a real command, its options
    parse, and the files it reads exist)."""
    from wpsim.apps.cli import build_parser

    words = shlex.split(line)
    if words[0] == "wpsim":
        try:
            args = build_parser().parse_args(words[1:])
        except SystemExit:
            return "the wpsim command line refuses it"
        named = [getattr(args, name) for name in ("scene", "stage", "robot", "data") if hasattr(args, name)]
        inputs = [p for value in named for p in (value if isinstance(value, list) else [value])]  # sysid: data files
        missing = [p for p in inputs if p.startswith("assets/") and not (ROOT / p).is_file()]
        return f"no file {missing}" if missing else None
    if words[:2] == ["python", "-m"]:
        return None if importlib.util.find_spec(words[2]) else f"no module {words[2]}"
    if words[0] == "python" and words[1].startswith("examples/"):
        return None if (ROOT / words[1]).is_file() else f"no script {words[1]}"
    if words[0] == "python3" and words[1:3] == ["-m", "venv"]:
        return None
    return "not a command this test knows how to check"


@pytest.mark.parametrize("guide", [g.name for g in GUIDES if blocks(g, "bash")])
def test_the_shell_commands_of_a_guide_are_real(guide):
    problems = {line: command_problem(line) for line in shell_commands(DOCS / guide)}
    assert {line: why for line, why in problems.items() if why} == {}


def test_a_wrong_command_is_caught():
    assert command_problem("wpsim run assets/quadruped.xml --no-such-option") is not None
    assert command_problem("wpsim run assets/no_such_robot.xml") is not None
    assert command_problem("python examples/no_such_example.py --test") is not None
    assert command_problem("python -m wpsim.no_such_module") is not None
    assert command_problem("wpsim render wpsim_out/calibration.usd --take initial --out initial.mp4") is None


def test_the_site_builds_with_the_api_reference_and_the_records_figures(tmp_path):
    from wpsim.apps.api_reference import module_names
    from wpsim.apps.docs_site import build

    index = build(tmp_path)
    assert index.is_file()
    assert all((tmp_path / guide.with_suffix(".html").name).is_file() for guide in GUIDES)
    names = module_names()
    assert {"wpsim.opt.torch", "wpsim.core.builder", "wpsim.io.usd_export", "wpsim.kernels.fem"} <= set(names)
    assert [n for n in names if not (tmp_path / "api" / (n.replace(".", "/") + ".html")).is_file()] == []
    page = (tmp_path / "api/wpsim/opt/torch.html").read_text()
    assert "TorchStep" in page and "TorchRollout" in page and "initial_state" in page
    # the performance tables hold the records' figures
    performance = (tmp_path / "performance.html").read_text()
    stance = json.loads((ROOT / "benchmarks/records/cpu_2026-12-07/vs_mujoco_stance_fused_recorded.json").read_text())
    rate = next(r["value"] for r in stance if r["params"].get("mode") == "wpsim_stance_worlds"
                and r["params"]["worlds"] == 256 and r["case"] == "quadruped_12")
    assert f"{rate:,.0f}" in performance


def test_a_guide_with_a_broken_link_fails_the_build(tmp_path):
    from wpsim.apps.docs_site import build_guides

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "conf.py").write_text((DOCS / "conf.py").read_text().replace(
        'Path(__file__).resolve().parent / "_ext"', repr(str(DOCS / "_ext"))))
    (docs / "index.md").write_text("# Index\n\nSee [a guide that is not there](missing.md).\n")
    with pytest.raises(RuntimeError, match="failed"):
        build_guides(tmp_path / "site", docs)


def test_a_versus_table_compares_like_with_like():
    sys.path.insert(0, str(DOCS / "_ext"))
    from record_tables import versus_rows

    records = [
        {"case": "a", "metric": "steps_per_s", "value": 300.0, "params": {"mode": "ours"}},
        {"case": "a", "metric": "steps_per_s", "value": 100.0, "params": {"mode": "theirs"}},
        {"case": "a", "metric": "wall_s", "value": 2.0, "params": {"mode": "ours", "worlds": 64}},
        {"case": "a", "metric": "wall_s", "value": 8.0, "params": {"mode": "theirs", "worlds": 64}},
        {"case": "b", "metric": "steps_per_s", "value": 5.0, "params": {"mode": "ours"}},  # no baseline: left out
    ]
    assert versus_rows(records, "steps_per_s", "ours", "theirs") == [("a", 1, 300.0, 100.0, 3.0)]
    assert versus_rows(records, "wall_s", "ours", "theirs") == [("a", 64, 2.0, 8.0, 4.0)]
    with pytest.raises(ValueError, match="no record"):
        versus_rows(records, "count", "ours", "theirs")


def test_a_record_table_lists_one_metric_by_the_named_params():
    sys.path.insert(0, str(DOCS / "_ext"))
    from record_tables import record_rows

    records = [
        {"case": "beam", "metric": "error_percent", "value": -78.0, "params": {"mode": "linear", "cells": 1}},
        {"case": "beam", "metric": "wall_s", "value": 11.0, "params": {"mode": "linear", "cells": 1}},
        {"case": "beam", "metric": "error_percent", "value": -21.0, "params": {"mode": "linear", "cells": 4}},
    ]
    assert record_rows(records, "error_percent", ["mode", "cells"]) == [["linear", 1, -78.0], ["linear", 4, -21.0]]
    with pytest.raises(ValueError, match="no record"):
        record_rows(records, "count", ["mode"])
