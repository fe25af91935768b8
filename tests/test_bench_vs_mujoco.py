"""Benchmark suite ``vs_mujoco``: record structure of a quick run, the skipped record without
MuJoCo, and the two sides' gradients on small cases. No timing thresholds.

The arm's tape gradient is checked against MuJoCo's ``mjd_transitionFD`` chain (the two
simulators step the fixed-base arm alike); the quadruped's against wpsim's own central
differences, since its floating-base dynamics differ from MuJoCo's.
"""

import json
import math
import os
import sys

import numpy as np
import pytest
import warp as wp

from wpsim import bench

pytest.importorskip("mujoco")
pytest.importorskip("mujoco.rollout")

from wpsim.bench import vs_mujoco  # noqa: E402

KEYS = {"suite", "case", "params", "metric", "value"}
CASES = {"arm_7", "quadruped_12"}


@pytest.fixture(scope="module")
def quick_records():
    return bench.run_suites(["vs_mujoco"], device="cpu", quick=True)


def _find(records, case, metric, mode, worlds):
    found = [r for r in records if r["case"] == case and r["metric"] == metric and r["params"]["mode"] == mode
             and r["params"]["worlds"] == worlds]
    assert len(found) == 1, (case, metric, mode, worlds, found)
    return found[0]


def test_records_have_the_shared_format(quick_records):
    assert quick_records and all(set(r) == KEYS for r in quick_records)
    assert json.loads(json.dumps(quick_records)) == quick_records
    assert {r["case"] for r in quick_records} == CASES
    for r in quick_records:
        assert r["suite"] == "vs_mujoco" and r["metric"] in bench.METRIC_UNITS
        assert isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0, r
        p = r["params"]
        assert p["cores"] == os.cpu_count() and p["device"] == "cpu" and p["precision"] == "float32"
        assert p["worlds"] in (1, 64) and p["steps"] > 0 and p["dt"] > 0 and p["mujoco"]
        assert p["wpsim_finite"] is True


@pytest.mark.parametrize("variant", sorted(vs_mujoco.suite_config(quick=True)["worlds"]))
def test_every_comparison_is_reported_with_its_ratio(quick_records, variant):
    config = vs_mujoco.suite_config(quick=True)
    name = vs_mujoco.VARIANTS[variant]
    for case in CASES:
        wp_speed = _find(quick_records, case, "steps_per_s", f"{name}_single", 1)
        assert wp_speed["params"]["fused"] is (variant == "fused")
        mj_speed = _find(quick_records, case, "steps_per_s", f"mujoco_mj_step vs {name}", 1)["value"]
        ratio = _find(quick_records, case, "time_ratio", f"single {name}/mujoco", 1)["value"]
        assert ratio == pytest.approx(mj_speed / wp_speed["value"])
        launches = _find(quick_records, case, "launches_per_step", f"{name}_single", 1)["value"]
        assert launches >= 1 and launches == int(launches)
        if variant == "fused":
            assert launches == 1
        for worlds in config["worlds"][variant]:
            wp_rate = _find(quick_records, case, "world_steps_per_s", f"{name}_worlds", worlds)
            mj_rate = _find(quick_records, case, "world_steps_per_s", f"mujoco_rollout vs {name}", worlds)
            assert mj_rate["params"]["mujoco_threads"] == os.cpu_count()
            assert wp_rate["params"]["steps"] == mj_rate["params"]["steps"] == config["steps"]
            ratio = _find(quick_records, case, "time_ratio", f"worlds {name}/mujoco", worlds)["value"]
            assert ratio == pytest.approx(mj_rate["value"] / wp_rate["value"])
            world_launches = _find(quick_records, case, "launches_per_step", f"{name}_worlds", worlds)["value"]
            if variant == "fused":  # one launch per CPU thread
                assert 1 <= world_launches <= os.cpu_count()
            else:
                assert world_launches == launches
        for worlds in config["grad_worlds"][variant]:
            tape = _find(quick_records, case, "wall_s", f"{name}_tape", worlds)
            chain = _find(quick_records, case, "wall_s", f"mujoco_fd_chain vs {name}", worlds)
            ratio = _find(quick_records, case, "time_ratio", f"gradient {name}/mujoco", worlds)["value"]
            assert ratio == pytest.approx(tape["value"] / chain["value"])
            assert tape["params"]["per_world_s"] == pytest.approx(tape["value"] / worlds)
            assert tape["params"]["steps"] == config["grad_steps"] and tape["params"]["worlds_agree"] is True
            assert math.isfinite(tape["params"]["grad_diff_vs_mujoco"])


def test_arm_gradient_diff_in_records_is_small(quick_records):
    for variant in vs_mujoco.suite_config(quick=True)["grad_worlds"]:
        name = vs_mujoco.VARIANTS[variant]
        record = _find(quick_records, "arm_7", "wall_s", f"{name}_tape", 1)
        assert record["params"]["grad_diff_vs_mujoco"] < 0.05, name


def test_without_mujoco_the_suite_says_it_was_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)  # makes "import mujoco" raise ImportError
    records = vs_mujoco.vs_mujoco_suite("cpu", quick=True)
    assert len(records) == 1 and set(records[0]) == KEYS
    params = records[0]["params"]
    assert params["skipped"] is True and "mujoco" in params["reason"] and params["cores"] == os.cpu_count()
    assert records[0]["suite"] == "vs_mujoco"


def _sides(filename, hinge_start):
    mjs = vs_mujoco.MujocoSide(vs_mujoco.ASSETS / filename, hinge_start)
    return mjs, vs_mujoco.WpsimSide(vs_mujoco.ASSETS / filename, mjs)


def test_arm_tape_gradient_matches_mujoco_fd_chain():
    mjs, ws = _sides("arm_7link.xml", 0.3)
    steps = 8
    controls = np.random.default_rng(1).uniform(-0.2, 0.2, size=(steps, mjs.model.nu))
    model, solver = ws.model("cpu", 2, requires_grad=True)
    grad, _ = ws.gradient_runner(model, solver, steps, controls)()
    reference = mjs.fd_chain_gradient(steps, controls, centered=True)
    scale = np.abs(reference).max()
    assert scale > 0
    for world in range(2):
        np.testing.assert_allclose(grad[:, world], reference, atol=0.02 * scale)


def test_quadruped_tape_gradient_matches_central_differences():
    mjs, ws = _sides("quadruped.xml", None)
    steps, eps = 6, 1e-4
    controls = np.full((steps, mjs.model.nu), 0.1)  # rad; it blows up after ~40 steps (see ROBOTS)
    model, solver = ws.model("cpu", 1, requires_grad=True, dtype=wp.float64)
    grad, _ = ws.gradient_runner(model, solver, steps, controls)()
    scale = np.abs(grad).max()
    assert scale > 0
    for t, a in ((0, 2), (steps // 2, 7), (steps - 1, 0)):
        losses = []
        for sign in (1.0, -1.0):
            moved = controls.copy()
            moved[t, a] += sign * eps
            losses.append(ws.gradient_runner(model, solver, steps, moved)()[1])
        assert (losses[0] - losses[1]) / (2 * eps) == pytest.approx(grad[t, 0, a], abs=1e-3 * scale, rel=1e-3)
