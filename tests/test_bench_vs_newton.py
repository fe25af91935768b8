"""Benchmark suite ``vs_newton``: the records of a quick run (both sides of every scene, their
ratio, finite final states that agree where the two step alike) and the skipped record without
Newton. No timing thresholds."""

import json
import math
import os
import sys

import pytest

from wpsim import bench
from wpsim.bench import vs_newton

KEYS = {"suite", "case", "params", "metric", "value"}
CASES = {"particles", "cloth", "soft_block", "arm_7", "quadruped_12"}


@pytest.fixture(scope="module")
def quick_records():
    pytest.importorskip("newton")
    return bench.run_suites(["vs_newton"], device="cpu", quick=True)


def _find(records, case, metric, mode):
    found = [r for r in records if r["case"] == case and r["metric"] == metric and r["params"]["mode"] == mode]
    assert len(found) == 1, (case, metric, mode, found)
    return found[0]


def test_every_scene_has_both_speeds_and_their_ratio(quick_records):
    assert all(set(r) == KEYS and r["suite"] == "vs_newton" for r in quick_records)
    assert json.loads(json.dumps(quick_records)) == quick_records
    assert {r["case"] for r in quick_records} == CASES
    steps = vs_newton.suite_config(quick=True)["steps"]
    for case in CASES:
        wp_rate = _find(quick_records, case, "steps_per_s", "wpsim")
        nw_rate = _find(quick_records, case, "steps_per_s", "newton")
        for r in (wp_rate, nw_rate):
            assert math.isfinite(r["value"]) and r["value"] > 0, r
            p = r["params"]
            assert p["steps"] == steps and p["dt"] > 0 and p["cores"] == os.cpu_count() and p["newton"]
            assert p["wpsim_finite"] is True and p["newton_finite"] is True, r
        assert wp_rate["params"]["dt"] == nw_rate["params"]["dt"]
        ratio = _find(quick_records, case, "time_ratio", "wpsim/newton")["value"]
        assert ratio == pytest.approx(wp_rate["value"] / nw_rate["value"])
        for mode in ("wpsim", "newton"):
            launches = _find(quick_records, case, "launches_per_step", mode)["value"]
            assert launches >= 1 and launches == int(launches)
    for case in ("arm_7", "quadruped_12"):
        assert _find(quick_records, case, "launches_per_step", "wpsim")["value"] == 1  # the fused step


def test_the_deterministic_scenes_end_alike(quick_records):
    # m (particle scenes) or m|rad (robots); the particle pile is chaotic, so it is not compared
    limits = {"cloth": 1e-3, "soft_block": 1e-3, "arm_7": 1e-3, "quadruped_12": 1e-3}
    for case, limit in limits.items():
        diff = _find(quick_records, case, "steps_per_s", "wpsim")["params"]["final_max_abs_diff"]
        assert diff < limit, (case, diff)


def test_without_newton_the_suite_says_it_was_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "newton", None)  # makes "import newton" raise ImportError
    records = vs_newton.vs_newton_suite("cpu", quick=True)
    assert len(records) == 1 and set(records[0]) == KEYS
    params = records[0]["params"]
    assert records[0]["suite"] == "vs_newton" and records[0]["case"] == "skipped"
    assert params["skipped"] is True and "newton" in params["reason"] and params["cores"] == os.cpu_count()
