"""The ``wpsim`` console script: gradcheck, demo and bench, as a user runs them."""

import json
import subprocess
import sys

import pytest

WPSIM = [sys.executable, "-m", "wpsim.cli"]


def run(args, **kw):
    return subprocess.run(WPSIM + args, capture_output=True, text=True, timeout=600, **kw)


def test_gradcheck_json_every_family_passes():
    proc = run(["gradcheck", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    assert {tuple(sorted(r)) for r in rows} == {("family", "ok", "param", "rel_error", "solver")}
    assert {r["solver"] for r in rows} == {"semi-implicit", "implicit Euler"}
    families = {r["family"] for r in rows}
    assert {"particle", "spring", "cloth membrane", "cloth bending", "soft body", "tet activation",
            "ground contact", "shape contact", "particle contact"} <= families
    assert all(r["ok"] and r["rel_error"] <= 1e-4 for r in rows), [r for r in rows if not r["ok"]]


def test_demo_writes_its_outputs(tmp_path):
    proc = run(["demo", "--iterations", "3", "--out", str(tmp_path)])
    # three iterations are too few for the 100x target: the exit status says so
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["losses_m2"][-1] < result["losses_m2"][0]
    assert (proc.returncode == 0) == (result["loss_reduction"] >= 100.0)
    for name in ("loss.png", "trajectory.png", "rollout.usd"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "loss" in proc.stdout and "m^2" in proc.stdout
    assert not list(tmp_path.glob(".*")), "temporary files left behind"


def test_bench_quick_json():
    proc = run(["bench", "--quick", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads(proc.stdout)
    assert records and all(set(r) == {"suite", "case", "params", "metric", "value"} for r in records)
    assert {r["metric"] for r in records} >= {"steps_per_s", "backward_over_forward", "world_steps_per_s"}


@pytest.mark.parametrize("args", [["--help"], ["demo", "--help"], ["bench", "--help"]])
def test_help(args):
    proc = run(args)
    assert proc.returncode == 0 and "usage: wpsim" in proc.stdout
