"""Benchmark suite ``vs_mujoco_sysid``: a quick run (exact data) gives both tools' records in
the shared format with their ratio, both fits recover the arms (masses, damping, armature,
friction, servo gains), wpsim the sliding puck, and
without mujoco.sysid the suite says why in one record. No timing thresholds."""

import json
import math
import sys

import pytest

from wpsim import bench
from wpsim.bench import vs_mujoco_sysid


def _one(records, case, mode, metric, **params):
    found = [r for r in records if r["case"] == case and r["params"].get("mode") == mode and r["metric"] == metric
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
    # the second with dry friction from 0, the third the gains of position servos from kp x0.5, kv x2
    for case, parameters in (("arm3_planar", 9), ("arm3_friction", 12), ("arm3_servo", 6)):
        for tool in ("wpsim", "mujoco"):
            error = _one(records, case, tool, "error_percent", data="exact", parameters=parameters)
            assert error < 1e-3, (case, tool, error)  # from masses x0.6, damping x0.3, armature 0
            assert _one(records, case, tool, "count", data="exact") > 0
            cpu = _one(records, case, tool, "wall_s", data="exact", clock="process")
            assert math.isfinite(cpu) and cpu > 0
        ratio = _one(records, case, "cpu wpsim/mujoco", "time_ratio", data="exact")
        assert ratio == pytest.approx(_one(records, case, "wpsim", "wall_s", clock="process")
                                      / _one(records, case, "mujoco", "wall_s", clock="process"))
    error = _one(records, "puck_contact", "wpsim", "error_percent", data="exact")
    assert error < 1e-3, error  # mass x0.6, damping x0.3, friction x0.5; MuJoCo's fit ends on its bounds here
    assert math.isfinite(_one(records, "puck_contact", "mujoco", "error_percent", data="exact"))


def test_without_mujoco_sysid_the_suite_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    records = vs_mujoco_sysid.vs_mujoco_sysid_suite("cpu", quick=True)
    assert len(records) == 1 and records[0]["params"]["skipped"] and "mujoco.sysid" in records[0]["params"]["reason"]


def test_the_full_inertia_arm_is_the_same_body_in_both_tools():
    """arm6_full_inertia's start file: MuJoCo and wpsim read the same masses, centres of mass
    and inertias, MuJoCo's pseudo-inertia coordinates are wpsim's log-Cholesky ones, and the
    modifier that MuJoCo's side fits through writes the body back unchanged."""
    import numpy as np

    mujoco = pytest.importorskip("mujoco")
    sysid = pytest.importorskip("mujoco.sysid")
    if not hasattr(sysid, "body_inertia_param"):
        pytest.skip("mujoco.sysid lacks its optional dependencies")
    from wpsim.bench import sysid_arm6 as arm6
    from wpsim.io.robots import import_robot
    from wpsim.opt.inertia import to_log_cholesky

    spec = mujoco.MjSpec.from_string(arm6.arm6_xml(start=True))
    before = spec.compile()
    ours = import_robot_from_string(import_robot, arm6.arm6_xml(start=True))
    for i, body in enumerate(arm6.BODIES):
        b = ours["bodies"][body]
        theta = to_log_cholesky(ours["mass"][b], ours["com"][b], ours["inertia"][b], body)
        param = sysid.body_inertia_param(spec, before, body, inertia_type=sysid.InertiaType.Pseudo)
        np.testing.assert_allclose(param.value, theta, atol=1e-12)
        arm6._principal_axes_modifier(mujoco, body)(spec, param)
    after = spec.compile()
    for field in ("body_mass", "body_ipos"):  # principal moments: compared as matrices below (any order)
        np.testing.assert_allclose(getattr(after, field), getattr(before, field), rtol=1e-9, atol=1e-12)
    def inertia(model, b):
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, model.body_iquat[b])
        rotation = rotation.reshape(3, 3)
        return rotation @ np.diag(model.body_inertia[b]) @ rotation.T

    for body in arm6.BODIES:
        b = after.body(body).id
        np.testing.assert_allclose(inertia(after, b), inertia(before, b), atol=1e-12)
        np.testing.assert_allclose(inertia(after, b), ours["inertia"][ours["bodies"][body]], atol=1e-12)


def import_robot_from_string(import_robot, xml: str) -> dict:
    """Masses (B,), centres of mass (B, 3) and inertias (B, 3, 3) of an MJCF text as wpsim
    imports it, with body name -> index."""
    import tempfile
    from pathlib import Path

    import warp as wp

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "arm.xml"
        path.write_text(xml)
        builder, scene = import_robot(path)
    model = builder.finalize(device="cpu", dtype=wp.float64)
    return {"bodies": scene.bodies, "mass": model.body_mass.numpy(), "com": model.body_com.numpy(),
            "inertia": model.body_inertia.numpy()}
