"""Benchmark suite ``import_corpus``: its Gymnasium part (the quick run) with the issue's
targets (14/14 import, 14/14 healthy for 5 s with contact, every file within 1e-6 rad of
MuJoCo), the per-file records, skipped parts, and the pybullet
reference on a repository URDF."""

from pathlib import Path

import numpy as np
import pytest

from wpsim.bench import import_corpus

ASSETS = Path(__file__).resolve().parents[1] / "assets"


@pytest.fixture(scope="module")
def gymnasium_records():
    pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    return import_corpus.import_corpus_suite("cpu", quick=True)


def test_gymnasium_part_meets_the_targets(gymnasium_records):
    rates = {r["params"]["mode"]: r for r in gymnasium_records if r["metric"] == "rate_percent"}
    summary = rates["import_rate"]["params"]
    assert summary["files"] == summary["reference_loads"] == summary["imported"] == 14
    assert rates["import_rate"]["value"] == 100.0 and rates["healthy_rate"]["value"] == 100.0
    assert summary["compared"] == 14 and summary["agree"] == 14  # the swimmer's fluid forces since they are honoured
    worst = [r["value"] for r in gymnasium_records if r["metric"] == "max_abs_dq"]
    assert len(worst) == 14 and max(worst) <= import_corpus.AGREE


def test_every_file_has_an_import_record_with_its_warnings(gymnasium_records):
    imported = [r for r in gymnasium_records if r["params"].get("mode") == "imported"]
    assert len(imported) == 14 and all(r["value"] == 1.0 for r in imported)
    for r in imported:
        assert r["params"]["warnings"] == len(r["params"]["unhonoured"])
        assert all(":" in line for line in r["params"]["unhonoured"])  # file:line: element ...
    assert sum(r["params"]["warnings"] > 0 for r in imported) == 13  # half_cheetah: everything honoured
    runs = [r for r in gymnasium_records if r["params"].get("mode") == "contact_run"]
    assert len(runs) == 14 and all(r["value"] == 1.0 and r["params"]["failure"] == "" for r in runs)


def test_a_refused_file_is_recorded_with_its_reason(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text("<mujoco><worldbody><body><geom type='hfield'/></body></worldbody></mujoco>")
    found = import_corpus.check_file("test", path, tmp_path, compare=False, run=False)
    assert found["imported"] is False and "hfield" in found["reason"]
    assert found["reference_loads"] in (False, None)  # MuJoCo refuses it too (no hfield asset)
    (rec,) = import_corpus.file_records(found, {"part": "test"})
    assert rec["value"] == 0.0 and "hfield" in rec["params"]["reason"]
    assert import_corpus.rates([found])["reference_loads"] == (0 if found["reference_loads"] is False else 1)


def test_missing_packages_give_skipped_records(monkeypatch):
    monkeypatch.setattr(import_corpus, "package_folder", lambda name: None)
    records = import_corpus.import_corpus_suite("cpu", parts=("menagerie", "pybullet"))
    assert [(r["case"], r["params"]["skipped"]) for r in records] == [("menagerie", "package not installed"),
                                                                      ("pybullet", "package not installed")]


def test_pybullet_reference_agrees_on_a_repository_arm():
    pytest.importorskip("pybullet")
    from wpsim.bench.pybullet_reference import urdf_rollouts

    ours, theirs, q0 = urdf_rollouts(ASSETS / "arm_7link.urdf", steps=300, seed=2)
    assert ours.shape == theirs.shape == (300, 7)
    assert np.abs(theirs[-1] - q0).max() > 0.1  # it moved
    assert np.abs(ours - theirs).max() < 1e-6


STANDING = """<mujoco><option timestep="0.002"/><worldbody><geom type="plane" size="2 2 0.1"/>
<body name="base" pos="0 0 0.3"><freejoint/><geom type="box" size="0.2 0.1 0.04" density="500"/>{legs}</body>
</worldbody><actuator>{servos}</actuator>
<keyframe><key name="home" qpos="0 0 0.25 1 0 0 0 0.1 0.1 -0.1 -0.1" ctrl="0.1 0.1 -0.1 -0.1"/></keyframe></mujoco>"""
LEG = ('<body pos="{x} {y} 0"><joint name="{name}" type="hinge" axis="0 1 0" damping="0.5"/>'
       '<geom type="capsule" fromto="0 0 0 0 0 -0.22" size="0.02"/></body>')


def test_a_standing_robot_is_held_at_its_keyframe_as_in_mujoco(tmp_path):
    """A four-legged table on position servos, held at its ``home`` keyframe for 2 s with
    contact on: wpsim's base height and joint angles agree with MuJoCo's within 1e-4 m and
    1e-4 rad (measured 2.2e-6 m and 3.6e-6 rad), well within the suite's 1 mm and 0.01 rad; a
    file without a ``home`` keyframe is not a standing robot."""
    pytest.importorskip("mujoco")
    from wpsim.bench.mujoco_reference import load_mujoco
    from wpsim.bench.standing import standing_comparison, standing_robot

    corners = {"a": (0.18, 0.08), "b": (0.18, -0.08), "c": (-0.18, 0.08), "d": (-0.18, -0.08)}
    legs = "".join(LEG.format(x=x, y=y, name=name) for name, (x, y) in corners.items())
    servos = "".join(f'<position joint="{name}" kp="50"/>' for name in corners)
    path = tmp_path / "table.xml"
    path.write_text(STANDING.format(legs=legs, servos=servos))
    assert standing_robot(load_mujoco(path)) and not standing_robot(load_mujoco(ASSETS / "quadruped.xml"))
    found = standing_comparison(path)
    assert found["contacts"] == found["mujoco_contacts"] == 4
    assert found["mujoco_start_height_m"] - found["mujoco_base_height_m"] > 0.005  # it settles onto its legs
    assert found["height_error_m"] < 1e-4 and found["joint_error_rad"] < 1e-4 and found["agrees"]
    assert import_corpus.standing_check(ASSETS / "quadruped.xml") == {}
    checked = import_corpus.check_file("test", path, tmp_path, compare=False)
    (standing,) = [r for r in import_corpus.file_records(checked, {}) if r["params"]["mode"] == "standing"]
    assert standing["value"] == pytest.approx(found["height_error_m"], rel=1e-6) and standing["params"]["agrees"]
    assert import_corpus.rates([checked])["standing_agree"] == 1
