"""The registry of benchmark suites behind ``wpsim bench`` and the runner.

Every suite is a callable ``(device, quick) -> list[dict]`` of records (see
``wpsim.bench.records``). Timings exclude kernel compilation (every case warms up first) and
are bracketed by ``wp.synchronize_device``; ratios are measured in the same run.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable

import warp as wp

from wpsim.bench.checkpoint import checkpoint_suite
from wpsim.bench.contact_pile import contact_pile_suite
from wpsim.bench.fem_calibration import fem_calibration_suite
from wpsim.bench.fem_convergence import fem_convergence_suite
from wpsim.bench.ilqr_memory import ilqr_memory_suite
from wpsim.bench.implicit_contact import implicit_contact_suite
from wpsim.bench.implicit_integration import implicit_integration_suite
from wpsim.bench.records import progress
from wpsim.bench.render_speed import render_suite
from wpsim.bench.scene_speed import forward_suite, rigid_suite


def torch_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``torch`` (``wpsim.bench.torch_bridge``), imported when run: it needs torch."""
    from wpsim.bench.torch_bridge import torch_suite as run

    return run(device, quick)


def distributed_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``distributed`` (``wpsim.bench.distributed``), imported when run: it needs ray."""
    from wpsim.bench.distributed import distributed_suite as run

    return run(device, quick)


def vs_mujoco_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``vs_mujoco`` (``wpsim.bench.vs_mujoco``), imported when run; skipped without mujoco."""
    from wpsim.bench.vs_mujoco import vs_mujoco_suite as run

    return run(device, quick)


def vs_mujoco_sysid_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``vs_mujoco_sysid`` (``wpsim.bench.vs_mujoco_sysid``), imported when run; skipped without
    mujoco.sysid."""
    from wpsim.bench.vs_mujoco_sysid import vs_mujoco_sysid_suite as run

    return run(device, quick)


def vs_newton_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``vs_newton`` (``wpsim.bench.vs_newton``), imported when run; skipped without newton."""
    from wpsim.bench.vs_newton import vs_newton_suite as run

    return run(device, quick)


def import_corpus_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``import_corpus`` (``wpsim.bench.import_corpus``): the installed robot-file corpus."""
    from wpsim.bench.import_corpus import import_corpus_suite as run

    return run(device, quick)


SUITES: dict[str, Callable[..., list]] = {
    "forward": forward_suite,
    "checkpoint": checkpoint_suite,
    "implicit_integration": implicit_integration_suite,
    "implicit_contact": implicit_contact_suite,
    "ilqr_memory": ilqr_memory_suite,
    "rigid": rigid_suite,
    "contact_pile": contact_pile_suite,
    "render": render_suite,
    "torch": torch_suite,
    "distributed": distributed_suite,
    "vs_mujoco": vs_mujoco_suite,
    "vs_mujoco_sysid": vs_mujoco_sysid_suite,
    "vs_newton": vs_newton_suite,
    "import_corpus": import_corpus_suite,
    "fem_convergence": fem_convergence_suite,
    "fem_calibration": fem_calibration_suite,
}
"""Registered suites by name; each is ``(device, quick: bool) -> list[dict]`` of records."""


DEFAULT_SUITES = ("forward",)


def run_suites(names: list[str] | None = None, device=None, quick: bool = False) -> list[dict]:
    """Run the named suites (default: ``forward``) on ``device`` and return all their records."""
    names = list(DEFAULT_SUITES) if not names else list(names)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown benchmark suite(s) {unknown}; available: {sorted(SUITES)}")
    records = []
    # Warp prints its start-up banner and module loads on stdout; keep stdout for the caller.
    with contextlib.redirect_stdout(sys.stderr):
        device = wp.get_device(device)
        for name in names:
            progress(f"suite {name} on {device} ({'quick' if quick else 'full'})")
            records += SUITES[name](device, quick)
    return records
