"""Peak-memory benchmarks: the tracker-report parser and the ``implicit_integration`` suite
(quick mode, one worker process per case). Memory peaks are deterministic allocation sums,
so the growth targets are asserted; no timings are."""

import math

import pytest

from wpsim import bench
from wpsim.bench.process import parse_peak_bytes

REPORT = """Allocation Tracking Report
  Total allocations:
    cpu              2 (394.53 KB)
  Peak usage:
    cpu              390.62 KB
    cuda:0           1.50 MB
  Live allocations:
    cpu              1 (3.91 KB)
"""


def test_peak_parser_sums_devices_with_units():
    assert parse_peak_bytes(REPORT) == int(390.62 * 1024 + 1.5 * 2**20)
    assert parse_peak_bytes("Allocation Tracking Report\n") == 0


def test_implicit_adjoint_memory_does_not_grow_with_newton_iterations():
    records = bench.run_suites(["implicit_integration"], device="cpu", quick=True)
    peaks = {(r["params"]["mode"], r["params"]["iterations"]): r["value"]
             for r in records if r["metric"] == "peak_memory_bytes"}
    assert set(peaks) == {(m, n) for m in ("unrolled", "implicit") for n in (1, 5, 20)}
    assert all(v > 0 and math.isfinite(v) for v in peaks.values())
    assert peaks["implicit", 20] < 1.05 * peaks["implicit", 1]
    assert peaks["unrolled", 20] > 5.0 * peaks["unrolled", 1]
    assert peaks["unrolled", 1] > peaks["implicit", 1]
    ratios = {r["params"]["mode"]: r["value"] for r in records if r["metric"] == "memory_ratio"}
    assert ratios["implicit"] == peaks["implicit", 20] / peaks["implicit", 1]


def test_implicit_contact_memory_does_not_grow_with_newton_iterations():
    """Quick suite: 1 and 10 Newton iterations at 16 contacts, and 16 and 64 contacts, and
    the contact-free baseline."""
    records = bench.run_suites(["implicit_contact"], device="cpu", quick=True)
    peaks = {(r["params"]["mode"], r["params"]["iterations"], r["params"]["contacts"]): r["value"]
             for r in records if r["metric"] == "peak_memory_bytes" and r["params"]["mode"] != "none"}
    assert set(peaks) == {(m, n, c) for m in ("unrolled", "implicit") for n, c in ((1, 16), (10, 16), (10, 64))}
    baseline = {r["params"]["boxes"]: r["value"] for r in records
                if r["metric"] == "peak_memory_bytes" and r["params"]["mode"] == "none"}
    assert set(baseline) == {4, 16} and baseline[16] < peaks["implicit", 10, 64]
    shares = [r["value"] for r in records if r["metric"] == "memory_ratio" and "share" in r["params"]]
    assert len(shares) == 2 and min(shares) > 1.0
    assert peaks["implicit", 10, 16] < 1.04 * peaks["implicit", 1, 16]
    assert peaks["unrolled", 10, 16] > 1.5 * peaks["unrolled", 1, 16]
    assert peaks["unrolled", 10, 64] > 2.0 * peaks["implicit", 10, 64]
    gradients = {r["params"]["mode"]: r["params"]["gradient_norm"] for r in records
                 if r["metric"] == "peak_memory_bytes" and r["params"]["iterations"] == 10
                 and r["params"]["contacts"] == 16}
    assert gradients["implicit"] == pytest.approx(gradients["unrolled"], rel=1e-9)


def test_torch_rollout_memory_is_checkpointed():
    """Quick suite ``torch``: the four gradient computations agree (the suite raises
    otherwise), and a checkpointed TorchRollout holds several times less Warp memory than a
    full tape. No timing is asserted."""
    pytest.importorskip("torch")
    records = bench.run_suites(["torch"], device="cpu", quick=True)
    modes = {r["params"]["mode"] for r in records if r["metric"] == "wall_s"}
    assert modes == {"warp_checkpoint", "torch_rollout", "warp_full", "torch_step_loop"}
    peaks = {r["params"]["mode"]: r["value"] for r in records if r["metric"] == "peak_memory_bytes"}
    assert peaks["full"] > 2.0 * peaks["checkpoint"] > 0
    gradients = {r["params"]["gradient_l1"] for r in records if r["metric"] == "peak_memory_bytes"}
    assert len(gradients) == 1


def test_implicit_contact_adjoint_fits_more_ilqr_worlds_under_a_cap():
    """Quick suite: at 10 Newton iterations the box-push iLQR iteration with the implicit
    adjoint fits more worlds under 64 MiB than with the unrolled one, and the largest batch's
    measured peak is within the cap."""
    records = bench.run_suites(["ilqr_memory"], device="cpu", quick=True)
    largest = {r["params"]["mode"]: r["value"] for r in records if r["metric"] == "count"}
    assert set(largest) == {"implicit", "unrolled"} and min(largest.values()) >= 2
    assert largest["implicit"] > 1.5 * largest["unrolled"]
    peaks = {(r["params"]["mode"], r["params"]["worlds"]): r for r in records if r["metric"] == "peak_memory_bytes"}
    for mode, worlds in largest.items():
        assert 0 < peaks[mode, worlds]["value"] <= 64 * 2**20 and peaks[mode, worlds]["params"]["finite"]
