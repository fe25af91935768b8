"""Benchmark suite ``vs_mujoco_sysid``: a quick run (exact data) gives both tools' records in
the shared format with their ratio, both fits recover the arm, and without mujoco.sysid the
suite says why in one record. No timing thresholds."""

import json
import math
import sys

import pytest

from wpsim import bench
from wpsim.bench import vs_mujoco_sysid


def _one(records, mode, metric, **params):
    found = [r for r in records if r["params"].get("mode") == mode and r["metric"] == metric
             and all(r["params"].get(k) == v for k, v in params.items())]
    assert len(found) == 1, (mode, metric, params, found)
    return found[0]["value"]


def test_quick_run_compares_both_tools_on_the_same_problem():
    pytest.importorskip("mujoco")
    sysid = pytest.importorskip("mujoco.sysid")
    if not hasattr(sysid, "optimize"):
        pytest.skip("mujoco.sysid lacks its optional dependencies")
    records = bench.run_suites(["vs_mujoco_sysid"], device="cpu", quick=True)
    assert json.loads(json.dumps(records)) == records
    assert all(r["suite"] == "vs_mujoco_sysid" and r["metric"] in bench.METRIC_UNITS for r in records)
    for tool in ("wpsim", "mujoco"):
        error = _one(records, tool, "error_percent", data="exact")
        assert error < 1e-3, (tool, error)  # from masses x0.6, damping x0.3, armature 0
        assert _one(records, tool, "count", data="exact") > 0
        cpu = _one(records, tool, "wall_s", data="exact", clock="process")
        assert math.isfinite(cpu) and cpu > 0
    ratio = _one(records, "cpu wpsim/mujoco", "time_ratio", data="exact")
    assert ratio == pytest.approx(_one(records, "wpsim", "wall_s", clock="process")
                                  / _one(records, "mujoco", "wall_s", clock="process"))
    contact = [r for r in records if r["case"] == "contact"]
    assert len(contact) == 1 and contact[0]["params"]["skipped"] and "contact" in contact[0]["params"]["reason"]


def test_without_mujoco_sysid_the_suite_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    records = vs_mujoco_sysid.vs_mujoco_sysid_suite("cpu", quick=True)
    assert len(records) == 1 and records[0]["params"]["skipped"] and "mujoco.sysid" in records[0]["params"]["reason"]
