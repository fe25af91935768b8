"""The element forces of unrecorded CPU steps, split over threads.

Warp runs a CPU launch on one core. With many elements (springs, triangles, bending hinges,
tetrahedra), ``shares`` threads each add the forces of a contiguous share of every element
kind; ctypes releases the GIL while a kernel runs, so the shares run at the same time. Two ways:

- **by world**, when every element kind lists its elements world by world and there are at
  least as many worlds with elements as shares: each share takes whole worlds. Shares then
  touch disjoint particles, so after the particle forces (drag, contact) every share adds
  straight into them. Each particle's forces are summed in the one-thread order: results are
  bitwise those of one thread and of a recorded step.
- **by fraction** otherwise (one world): each share takes a fraction of every kind and adds
  into a force buffer of its own (the first share: into the particle forces, computed on its
  thread first, so it takes a smaller fraction); the buffers are then added into the particle
  forces in share order. Only the order of each particle's sum changes: results are bitwise the
  same from run to run with the same number of shares, and equal one thread's to rounding, so
  ``SemiImplicitSolver`` splits by fraction only in ``advance`` (see ``PreparedParticleSteps``).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import warp as wp

from wpsim.core.fields import warp_dtype
from wpsim.kernels import particles
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import KernelLaunch
from wpsim.solvers.cpu_workers import WORKERS
from wpsim.solvers.forces import element_launches
from wpsim.solvers.prepared_launch import PreparedLaunch

ELEMENT_KINDS = ("spring", "tri", "bend", "tet")
"""The element kinds whose forces ``element_launches`` adds, in its order."""
MIN_ELEMENTS_PER_SHARE = 2048
"""Elements (all kinds together) each share needs: handing a share to a thread costs 20 to 60
us on a 2-core x86 CPU (``cpu_workers``), the time of 400 to 1,200 triangles."""
PARTICLE_WORK = 0.65
"""Time of one particle's drag and contact forces, in elements' force evaluations (measured per
launch: 0.65 triangles or hinges in the ``vs_newton`` cloth, 0.64 tets in its soft block)."""


def element_count(model) -> int:
    """Springs, triangles, hinges and tets of ``model`` together."""
    return sum(getattr(model, f"{kind}_count") for kind in ELEMENT_KINDS)


def element_shares(model, threads: int) -> int:
    """Shares the element forces of ``model`` are split into with ``threads`` CPU threads: at
    most one per thread, each of at least ``MIN_ELEMENTS_PER_SHARE`` elements (1: no split)."""
    return max(1, min(threads, element_count(model) // MIN_ELEMENTS_PER_SHARE))


def shares_by_world(model, shares: int) -> list | None:
    """Per share, kind -> (first, end) element range, each share whole worlds with about equal
    element counts; None when an element joins particles of two worlds, a kind's elements are
    not listed world by world or fewer than ``shares`` worlds have elements."""
    particle_world = model.particle_world.numpy()
    worlds = {}
    for kind in ELEMENT_KINDS:
        if not getattr(model, f"{kind}_count"):
            worlds[kind] = np.zeros(0, dtype=np.int64)
            continue
        element_worlds = particle_world[getattr(model, f"{kind}_indices").numpy()]
        world = element_worlds[:, 0]
        if np.any(element_worlds != world[:, None]) or np.any(np.diff(world) < 0):
            return None
        worlds[kind] = world
    per_world = sum(np.bincount(w, minlength=model.num_worlds) for w in worlds.values())
    used = np.flatnonzero(per_world)
    if len(used) < shares:
        return None
    before = np.cumsum(per_world[used]) - per_world[used]
    """Elements of the worlds before each world with elements."""
    total = int(per_world.sum())
    cuts = []
    for k in range(1, shares):
        first = int(np.searchsorted(before, k * total / shares))  # the first world past k / shares of all
        lowest = cuts[-1] + 1 if cuts else 1  # every share keeps at least one world
        cuts.append(min(max(first, lowest), len(used) - (shares - k)))
    cut_worlds = used[cuts]
    firsts = {kind: [0, *np.searchsorted(w, cut_worlds, side="left").tolist(), len(w)] for kind, w in worlds.items()}
    return [{kind: (f[k], f[k + 1]) for kind, f in firsts.items()} for k in range(shares)]


def shares_by_fraction(model, shares: int) -> list:
    """Per share, kind -> (first, end) element range: the same fraction of every kind, equal work
    counting the first share's particle forces as ``PARTICLE_WORK`` elements per particle (the
    first share takes no elements when they outweigh its part)."""
    elements = element_count(model)
    particle_work = PARTICLE_WORK * model.particle_count
    first = min(max((elements + particle_work) / shares - particle_work, 0.0), elements / shares) / elements
    bounds = [0.0, *(first + (1.0 - first) * k / (shares - 1) for k in range(shares))]
    ranges = []
    for k in range(shares):
        share = {}
        for kind in ELEMENT_KINDS:
            n = getattr(model, f"{kind}_count")
            share[kind] = (round(n * bounds[k]), round(n * bounds[k + 1]))
        ranges.append(share)
    return ranges


class ElementChunk:
    """One share's elements of every kind (kind -> (first, end) range): what ``element_launches``
    takes."""

    def __init__(self, ranges: dict):
        self._range = ranges

    def count(self, kind: str) -> int:
        """Elements of ``kind`` in the share."""
        first, end = self._range[kind]
        return end - first

    def view(self, array: wp.array, kind: str) -> wp.array:
        """The share's slice of ``array`` (one entry per element of ``kind``)."""
        first, end = self._range[kind]
        return array[first:end]


class ElementThreads:
    """Runs a step's particle force launches with the element forces split into ``shares`` > 1
    (see the module docstring)."""

    def __init__(self, model, shares: int):
        self.model = model
        self.shares = shares
        ranges = shares_by_world(model, shares)
        self.by_world = ranges is not None
        """True: each share takes whole worlds (results bitwise one thread's)."""
        self._chunks = [ElementChunk(r) for r in (ranges or shares_by_fraction(model, shares))]
        self._rows = None if self.by_world else wp.zeros(
            (shares - 1, model.particle_count), dtype=warp_dtype("vec3", model.dtype), device=model.device)
        """By fraction: the force buffers (N) of shares 1.. (shares - 1, P), zero between steps
        (the launch that adds them into the particle forces zeroes them)."""

    def launches(self, q: wp.array, qd: wp.array, control, f: wp.array, domain_stress: wp.array) -> tuple:
        """(per share its element launches, the launch adding the shares' buffers into ``f`` or
        None by world) for a step at positions ``q`` and velocities ``qd`` with forces ``f``."""
        model = self.model
        outputs = [f] * self.shares if self.by_world else [f, *(self._rows[k] for k in range(self.shares - 1))]
        shares = [element_launches(model, q, qd, control, out, domain_stress, chunk, recorded=False)
                  for chunk, out in zip(self._chunks, outputs)]
        add_rows = None if self.by_world else KernelLaunch(
            for_precision(particles.add_force_rows, model.dtype), model.particle_count, [], [self._rows, f])
        return shares, add_rows

    def run(self, particle_force: PreparedLaunch, shares: list, add_rows: PreparedLaunch | None):
        """The particle force launch and ``launches``' element launches, prepared: the first share on
        this thread, the others on ``WORKERS``' threads, then ``add_rows``."""
        if self.by_world:
            particle_force.run()

        def first_share():
            if not self.by_world:
                particle_force.run()
            _run_all(shares[0])

        try:
            WORKERS.run([first_share, *(partial(_run_all, share) for share in shares[1:])])
        except BaseException:
            if self._rows is not None:
                self._rows.zero_()  # the buffers start the next step at zero
            raise
        if add_rows is not None:
            add_rows.run()


def _run_all(launches: list):
    """Run prepared launches in order."""
    for launch in launches:
        launch.run()
