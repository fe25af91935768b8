"""Benchmark library: record format, finite positive values, launch counts, table, registry.

Runs the ``forward`` suite in quick mode once (small scenes, 10 steps). No timing
thresholds: only the shape of the output and exact launch counts are asserted.
"""

import contextlib
import io
import json
import math
import os

import numpy as np
import pytest
import warp as wp

from wpsim import bench
from wpsim.tasks import scene_library

KEYS = {"suite", "case", "params", "metric", "value"}


@pytest.fixture(scope="module")
def quick_run():
    """Records of a quick forward run, plus what it wrote to stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        records = bench.run_suites(["forward"], device="cpu", quick=True)
    return records, out.getvalue()


def _value(records, case, metric, mode=None):
    found = [r["value"] for r in records
             if r["case"] == case and r["metric"] == metric and (mode is None or r["params"]["mode"] == mode)]
    assert len(found) == 1, (case, metric, mode, found)
    return found[0]


def test_records_have_the_shared_format(quick_run):
    records, _ = quick_run
    assert records and all(set(r) == KEYS for r in records)
    assert json.loads(json.dumps(records)) == records
    for r in records:
        assert r["suite"] == "forward"
        assert r["metric"] in bench.METRIC_UNITS
        assert isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0, r
        p = r["params"]
        assert p["device"] == "cpu" and p["precision"] == "float32"
        assert p["steps"] == 10 and p["dt"] > 0 and p["worlds"] >= 1 and p["particles"] > 0


def test_every_scene_reports_speed_ratio_and_launches(quick_run):
    records, _ = quick_run
    cases = {r["case"] for r in records}
    assert {"particles", "cloth", "soft_block"} <= cases
    for case in cases:
        metrics = {r["metric"] for r in records if r["case"] == case}
        assert {"steps_per_s", "backward_over_forward", "launches_per_step", "recorded_launches_per_step",
                "wall_s"} <= metrics, case
        modes = {r["params"]["mode"] for r in records if r["case"] == case and r["metric"] == "wall_s"}
        assert modes == {"tape_forward", "tape_backward"}


def test_scene_sizes_are_reported(quick_run):
    records, _ = quick_run
    params = {r["case"]: r["params"] for r in records}
    cloth = scene_library.cloth_on_sphere(8).finalize()
    assert params["cloth"]["particles"] == cloth.particle_count and params["cloth"]["triangles"] == cloth.tri_count
    assert params["soft_block"]["tets"] == scene_library.soft_block(3).finalize().tet_count > 0
    assert params["particles"]["particle_contact"] is True and params["cloth"]["particle_contact"] is False


@pytest.mark.parametrize(
    "case, launches, recorded",
    [
        ("soft_block", 3, 3),  # particle forces, tetrahedra, integrate
        ("cloth", 4, 4),  # particle forces, triangles, bending, integrate
        ("particles", 3, 2),  # broad-phase neighbour lists (not recorded), particle forces, integrate
    ],
)
def test_launches_per_step(quick_run, case, launches, recorded):
    records, _ = quick_run
    assert _value(records, case, "launches_per_step") == launches
    assert _value(records, case, "recorded_launches_per_step") == recorded


def test_many_worlds_scale_steps_by_world_count(quick_run):
    records, _ = quick_run
    multi = [r for r in records if r["metric"] == "world_steps_per_s"]
    assert len(multi) == 1
    case, worlds = multi[0]["case"], multi[0]["params"]["worlds"]
    assert worlds > 1
    assert multi[0]["value"] == pytest.approx(worlds * _value(records, case, "steps_per_s"))
    single_world = {r["case"] for r in records if r["params"]["worlds"] == 1}
    assert not [r for r in records if r["metric"] == "world_steps_per_s" and r["case"] in single_world]


def test_stdout_is_left_to_the_caller(quick_run):
    _, stdout = quick_run
    assert stdout == ""


def test_count_launches_counts_wp_launch_calls():
    @wp.kernel
    def bump(a: wp.array(dtype=float)):
        a[wp.tid()] += 1.0

    a = wp.zeros(4, dtype=float, device="cpu")

    def twice():
        wp.launch(bump, dim=4, inputs=[a], device="cpu")
        wp.launch(bump, dim=4, inputs=[a], device="cpu")

    launch = wp.launch
    assert bench.count_launches(twice) == 2
    assert wp.launch is launch
    assert a.numpy().tolist() == [2.0] * 4


def test_unknown_suite_and_metric_are_rejected():
    with pytest.raises(ValueError, match="available"):
        bench.run_suites(["no_such_suite"])
    with pytest.raises(ValueError, match="unknown benchmark metric"):
        bench.record("forward", "x", {}, "speed", 1.0)


def test_format_table_lists_every_record_with_units(quick_run):
    records, _ = quick_run
    table = bench.format_table(records)
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["suite", "case", "metric", "value", "unit"]
    assert len(lines) == len(records) + 2  # header and device/precision footer
    assert "steps/s" in table and "world-steps/s" in table and "launches" in table
    unit_column = lines[0].index("unit")
    for line, r in zip(lines[1:-1], records):
        assert line[unit_column:].startswith(bench.METRIC_UNITS[r["metric"]] + " "), line
        assert line.startswith(f"{r['suite']}  ") and f" {r['case']} " in line


def test_suites_registry_entries_are_callables():
    assert "forward" in bench.SUITES
    assert all(callable(fn) for fn in bench.SUITES.values())


def test_rigid_suite_reports_every_robot_alone_and_in_many_worlds():
    records = bench.run_suites(["rigid"], quick=True)
    by_case = {}
    for r in records:
        by_case.setdefault(r["case"], {})[r["params"]["mode"], r["metric"]] = r
    expected = {"arm_7": (7, 7), "box_stack_5": (5, 30), "quadruped_12": (13, 18)}
    for name, (bodies, dofs) in expected.items():
        for case, worlds in ((name, 1), (f"{name}_x8", 8)):
            found = by_case[case]
            speed = found["forward", "steps_per_s"]
            assert speed["value"] > 0 and speed["params"]["bodies"] == bodies * worlds
            assert speed["params"]["joint_dofs"] == dofs * worlds and speed["params"]["worlds"] == worlds
            assert found["tape", "backward_over_forward"]["value"] > 0
            # the fused articulation step: one launch per step (per CPU thread with many worlds);
            # the box stack's contacts join articulations, so it takes the 7 staged launches
            launches = found["forward", "launches_per_step"]["value"]
            assert launches == 7 if name == "box_stack_5" else 1 <= launches <= os.cpu_count()
            if worlds > 1:
                world_speed = found["forward", "world_steps_per_s"]["value"]
                assert world_speed == pytest.approx(speed["value"] * worlds)


def test_contact_pile_suite_tests_fewer_pairs_with_the_broad_phase():
    records = bench.run_suites(["contact_pile"], quick=True)
    value = {(r["case"], r["metric"]): r["value"] for r in records}
    for name, boxes in (("pile", 64), ("pile", 256), ("soft_pile", 64)):
        candidates = next(r["params"]["candidate_pairs"] for r in records if r["case"] == f"{name}_{boxes}")
        assert value[f"{name}_{boxes}_every_pair", "count"] == candidates
        assert boxes <= value[f"{name}_{boxes}_broad_phase", "count"] < candidates / 20  # ground and layer pairs
        assert value[f"{name}_{boxes}", "time_ratio"] > 0
    for mode in ("broad_phase", "every_pair"):  # one layer: each box alone on the ground
        assert value[f"soft_pile_64_{mode}_islands", "count"] == 64
        assert value[f"soft_pile_64_{mode}_largest_island_dofs", "count"] == 6


def test_fem_convergence_suite_measures_the_elements_against_theory_and_a_fine_mesh():
    """Quick: one cell through the thickness, the fine reference at two. Linear tets lock in
    bending and twist (far too stiff), strain smoothing less so, quadratic tets are within a
    few per cent of beam theory; the nearly incompressible block locks linear tets only."""
    from wpsim.bench.fem_convergence import (
        beam_theory_sag,
        beam_theory_tip_deflection,
        fem_convergence_suite,
        saint_venant_twist_rate,
    )

    assert beam_theory_sag() == pytest.approx(0.01189, rel=1e-3)  # q L^4 / (8 E I) = 11.77 mm, plus shear
    assert beam_theory_tip_deflection() == pytest.approx(0.005039, rel=1e-3)
    assert saint_venant_twist_rate() == pytest.approx(0.05 / (2e7 / 2.6 * 0.1406 * 0.04**4), rel=1e-3)
    records = fem_convergence_suite("cpu", quick=True)
    error = {(r["case"], r["params"]["mode"], r["metric"]): r["value"] for r in records if "error" in r["metric"]}
    for case in ("cantilever_gravity", "cantilever_tip_load", "torsion"):
        linear, smoothed, quadratic = (error[case, f"{kind} tets", "error_percent"]
                                       for kind in ("linear", "strain-smoothed", "quadratic"))
        assert -90.0 < linear < smoothed < quadratic < 0.0
    for case in ("cantilever_gravity", "cantilever_tip_load"):
        assert error[case, "quadratic tets", "error_percent"] > -4.0
        assert error[case, "linear tets", "error_percent"] < -70.0
    assert error["incompressible_compression", "linear tets", "fine_error_percent"] < -20.0
    assert abs(error["incompressible_compression", "quadratic tets", "fine_error_percent"]) < 3.0
    stable = {r["params"]["mode"]: r["value"] for r in records if r["metric"] == "stable_dt_s"}
    assert 0 < stable["quadratic tets"] < stable["linear tets"]  # closer nodes: a shorter explicit step


def test_fem_calibration_recovers_its_own_mesh_and_shows_the_linear_mesh_bias():
    """Fitted on the mesh that made the data, modulus and damping come back exactly (the
    residuals, their difference Jacobian and the optimiser agree); on the quick suite's
    coarse meshes, one cell of quadratic tets recovers the modulus within 5 % where linear
    tets, locked in bending, land far too soft."""
    from wpsim.bench.fem_calibration import (
        QUICK_HORIZON_S,
        START,
        TRUTH,
        SwingingBeam,
        fem_calibration_suite,
    )
    from wpsim.opt.least_squares import DifferenceResiduals, least_squares

    beam = SwingingBeam("quadratic tets", 1, QUICK_HORIZON_S, "cpu")
    truth = [TRUTH["young_modulus"], TRUTH["damping"]]
    measured = beam.marker_path(truth)
    fit = least_squares(DifferenceResiduals(beam.params, beam.marker_path, measured, 1.0), iterations=20,
                        x0=[START["young_modulus"], START["damping"]], progress=False)
    np.testing.assert_allclose(fit.x, truth, rtol=1e-5)

    records = fem_calibration_suite("cpu", quick=True)
    error = {(r["case"], r["params"]["mode"]): r["value"] for r in records if r["metric"] == "error_percent"}
    assert abs(error["young_modulus", "quadratic tets"]) < 5.0
    assert error["young_modulus", "linear tets"] < -50.0
    assert abs(error["damping", "quadratic tets"]) < 25.0
    rms = {r["params"]["mode"]: r["value"] for r in records if r["metric"] == "rms_mm"}
    assert rms["quadratic tets"] < 0.1 * rms["linear tets"]
