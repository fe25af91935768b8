"""Benchmark suite ``fem_calibration``: does a soft body's calibrated material depend on the
mesh it was fitted on?

A clamped beam (0.12 m long, 3 cm square, 1000 kg/m^3, Poisson 0.3) is released straight and
sags and swings under gravity. Its "measurement" is two embedded markers (the centre of the
free end and of the middle section) filmed every 5 ms, simulated on a fine mesh of quadratic
tets (``TRUTH_CELLS`` cells through the thickness) at Young's modulus 300 kPa and strain-rate
damping 100 Pa s, without noise. The same beam is then meshed with 1, 2 and 4 cells through
the thickness of each element kind (``wpsim.bench.fem_statics.ELEMENT_KINDS``) and its
modulus and damping fitted to the markers from a wrong start (150 kPa, 40 Pa s) by
``wpsim.opt.least_squares`` (Levenberg-Marquardt; the Jacobian by forward differences in
log space, one float64 rollout per parameter). Quadratic meshes as fine as the truth's or
finer are not fitted (the fit would reproduce the truth's own mesh).

Every rollout is semi-implicit Euler in float64 at a step that keeps the explicit scheme
stable over the whole box of bounds (``stable_step``): the strain-rate damping of a fine
mesh's fastest mode, not its elasticity, sets that step, which is why the damping here is
small (0.6 % of critical in the first bending mode) and the beam short.
"""

from __future__ import annotations

import math
import time

import numpy as np
import warp as wp

from wpsim.bench.fem_statics import ELEMENT_KINDS, ElasticBlock
from wpsim.bench.records import progress, record

LENGTH, THICKNESS, DENSITY, POISSON = 0.12, 0.03, 1000.0, 0.3
TRUTH = {"young_modulus": 3.0e5, "damping": 100.0}
"""The measured beam's Young's modulus (Pa) and strain-rate damping (Pa s)."""
START = {"young_modulus": 1.5e5, "damping": 40.0}
LOWER = {"young_modulus": 5.0e4, "damping": 10.0}
UPPER = {"young_modulus": 1.0e6, "damping": 250.0}
MARKERS = {"tip": (LENGTH, 0.5 * THICKNESS, 0.5 * THICKNESS), "middle": (0.5 * LENGTH, 0.5 * THICKNESS,
                                                                          0.5 * THICKNESS)}
"""Marker positions (m) in the beam at rest, clamped end at x = 0."""
FRAME_S = 0.005
HORIZON_S, QUICK_HORIZON_S = 0.5, 0.2
TRUTH_CELLS, QUICK_TRUTH_CELLS = 3, 2
CELLS, QUICK_CELLS = (1, 2, 4), (1,)
STEP_SAFETY = 0.5
"""Fraction of the stability limit that a rollout's time step takes."""


def _clamped(points):
    return points[:, 0] < 1e-9


def stable_step(kind: str, cells: int, device=None) -> float:
    """A time step (s) that keeps semi-implicit Euler stable on this mesh for every modulus and
    damping within the bounds: the fastest mode's omega^2 = a E (a from power iteration at the
    upper modulus) with damping rate a kd is stable while a dt (E dt + 2 kd) <= 4; this solves
    it at the upper bounds, times ``STEP_SAFETY``, shortened to a whole number of steps per frame."""
    block = ElasticBlock((LENGTH, THICKNESS, THICKNESS), (4 * cells, cells, cells), kind, UPPER["young_modulus"],
                         POISSON, _clamped, DENSITY, device)
    a = (2.0 / block.stable_time_step()) ** 2 / UPPER["young_modulus"]
    e, kd = UPPER["young_modulus"], UPPER["damping"]
    limit = (-2.0 * kd * a + math.sqrt((2.0 * kd * a) ** 2 + 16.0 * e * a)) / (2.0 * e * a)
    return FRAME_S / math.ceil(FRAME_S / (STEP_SAFETY * limit))


class SwingingBeam:
    """The clamped beam meshed with ``cells`` cells through the thickness of element ``kind``:
    its markers at every frame of a ``horizon`` (s) run, as a function of (Young's modulus Pa,
    damping Pa s), written through a ``ParameterSet``."""

    def __init__(self, kind: str, cells: int, horizon: float, device=None):
        from wpsim.core import geometry
        from wpsim.core.builder import ModelBuilder
        from wpsim.core.validation import lame_parameters
        from wpsim.diff.markers import TetMarkers
        from wpsim.opt.parameters import DerivedParameter, Parameter, ParameterSet
        from wpsim.solvers import SemiImplicitSolver

        grid = (4 * cells, cells, cells)
        points = geometry.grid_points(tuple(c + 1 for c in grid), (LENGTH / grid[0],) + (THICKNESS / cells,) * 2)
        builder = ModelBuilder()
        builder.add_soft_mesh(points, geometry.grid_tetrahedra(*grid), density=DENSITY,
                              young_modulus=START["young_modulus"], poisson_ratio=POISSON, kd=START["damping"],
                              fixed=np.flatnonzero(_clamped(points)), strain_smoothing=kind == "strain-smoothed tets",
                              order=2 if kind == "quadratic tets" else 1)
        self.kind, self.cells = kind, cells
        self.model = model = builder.finalize(device=device, dtype=wp.float64, requires_grad=True)
        self.markers = TetMarkers(model, list(MARKERS), list(MARKERS.values()))
        self.dt = stable_step(kind, cells, device)
        self.every = round(FRAME_S / self.dt)
        self.frames = round(horizon / FRAME_S)
        self.solver = SemiImplicitSolver(model, raise_on_blowup=True, health_check_interval=1000)
        tets = model.tet_count

        def lame(theta):
            mu, lam = lame_parameters(theta[0], POISSON)
            return {"model.tet_mu": np.full(tets, mu[0]), "model.tet_lambda": np.full(tets, lam[0])}

        self.params = ParameterSet([
            DerivedParameter("young_modulus", [START["young_modulus"]], lame, labels=("young_modulus",),
                             units=("Pa",), lower=[LOWER["young_modulus"]], upper=[UPPER["young_modulus"]], log=True),
            Parameter("model.tet_kd", shared=True, log=True, name="damping", unit="Pa s", lower=LOWER["damping"],
                      upper=UPPER["damping"]),
        ], {"model": model})

    def marker_path(self, values) -> np.ndarray:
        """(frames + 1, markers, 3) marker positions (m) from rest, with (modulus, damping) ``values``."""
        self.params.write(np.asarray(values, dtype=np.float64))
        model = self.model
        state, following = model.state(requires_grad=False), model.state(requires_grad=False)
        path = [self.markers.positions(state).numpy()]
        for _ in range(self.frames):
            for _ in range(self.every):
                self.solver.step(state, following, None, self.dt)
                state, following = following, state
            path.append(self.markers.positions(state).numpy())
        return np.array(path, dtype=np.float64)


def fem_calibration_suite(device=None, quick: bool = False) -> list[dict]:
    """Measure the beam on the truth mesh, then fit modulus and damping on every coarser mesh
    of each element kind: their errors, the marker RMS left, iterations, rollouts, wall time."""
    from wpsim.opt.least_squares import DifferenceResiduals, least_squares

    horizon = QUICK_HORIZON_S if quick else HORIZON_S
    truth_cells = QUICK_TRUTH_CELLS if quick else TRUTH_CELLS
    truth = SwingingBeam("quadratic tets", truth_cells, horizon, device)
    measured = truth.marker_path([TRUTH["young_modulus"], TRUTH["damping"]])
    swing = float(np.ptp(measured[:, 0, 2]))
    progress(f"fem_calibration: truth on {truth_cells} quadratic cells through the thickness ({truth.model.particle_count} "
             f"nodes, dt {truth.dt * 1e6:.1f} us): tip swings {swing * 1e3:.2f} mm")
    records = []
    for kind in ELEMENT_KINDS:
        for cells in QUICK_CELLS if quick else CELLS:
            if kind == "quadratic tets" and cells >= truth_cells:
                continue
            start = time.perf_counter()
            beam = SwingingBeam(kind, cells, horizon, device)
            residuals = DifferenceResiduals(beam.params, beam.marker_path, measured, 1.0 / math.sqrt(measured[1:].size))
            fit = least_squares(residuals, iterations=20, x0=[START["young_modulus"], START["damping"]],
                                progress=False)
            wall = time.perf_counter() - start
            fitted = dict(zip(("young_modulus", "damping"), fit.x))
            errors = {name: 100.0 * (fitted[name] / TRUTH[name] - 1.0) for name in TRUTH}
            rms = math.sqrt(fit.loss)
            params = {"mode": kind, "cells_through_thickness": cells, "nodes": beam.model.particle_count,
                      "truth_cells": truth_cells, "horizon_s": horizon, "dt_s": beam.dt, "converged": bool(fit.converged),
                      "message": fit.message, "device": str(device or "default"), "precision": "float64"}
            records += [record("fem_calibration", "young_modulus", params, "error_percent", errors["young_modulus"]),
                        record("fem_calibration", "damping", params, "error_percent", errors["damping"]),
                        record("fem_calibration", "marker_rms", params, "rms_mm", rms * 1e3),
                        record("fem_calibration", "iterations", params, "count", len(fit.history) - 1),
                        record("fem_calibration", "rollouts", params, "count", fit.rollouts),
                        record("fem_calibration", "fit", params, "wall_s", wall)]
            progress(f"fem_calibration: {kind}, {cells} cell(s) through the thickness: E {errors['young_modulus']:+.1f} %, "
                     f"damping {errors['damping']:+.1f} %, marker RMS {rms * 1e3:.3f} mm, {len(fit.history) - 1} "
                     f"iterations, {fit.rollouts} rollouts, {wall:.1f} s ({fit.message})")
    return records
