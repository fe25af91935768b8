"""Benchmark suite ``fem_convergence``: how the soft-body elements converge in bending.

A clamped cantilever of a square section sags under its own weight: L = 0.4 m, section
0.04 m x 0.04 m (slender: L / h = 10), 1000 kg/m^3, Young's modulus 20 MPa, Poisson 0.3,
clamped at x = 0 (every vertex of that face fixed). Meshes of n = 1, 2, 4 cells through the
thickness (10 n along the length, 6 tets per cell; quick: n = 1), each with plain linear
tets and with face-based strain smoothing. The static sag is found by backward Euler
(``ImplicitEulerSolver``, float64) at 60 ms steps with strain-rate damping (2 kPa s) for
1.8 s (quick: 0.9 s), ten times the beam's first bending period (0.18 s): every vertex then
moves slower than 1e-6 m/s (the suite says so where one does not, ``REST_SPEED``), and
60 steps give the same sags to 1e-8 m.

Reference: Timoshenko beam theory, q L^4 / (8 E I) + q L^2 / (2 kappa G A) with q = rho g A,
I = h^4 / 12, kappa = 5/6 (11.89 mm; the shear term is 1 % of it). Records per case: the tip's
mean sag (``deflection_m``), its error against the reference (``error_percent``, negative:
too stiff), the number of tets and the wall time of the static solve.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

from wpsim.bench.records import progress, record

LENGTH, THICKNESS, DENSITY, YOUNG, POISSON, GRAVITY = 0.4, 0.04, 1000.0, 2.0e7, 0.3, 9.81
DAMPING, DT, STEPS, QUICK_STEPS = 2.0e3, 0.06, 30, 15
REST_SPEED = 1e-6
"""m/s: a beam whose vertices all move slower than this after the steps is at rest."""
NEWTON_TOLERANCE = 1e-6
"""m/s: the backward-Euler residual accepted (moving the tip by at most 6e-8 m a step); its
default, 1e-10, is below what rounding leaves of this stiff beam's forces, so that Newton
solves would count as unconverged."""


def beam_theory_sag() -> float:
    """Timoshenko's tip sag (m) of the cantilever under its own weight."""
    area = THICKNESS**2
    load = DENSITY * GRAVITY * area
    inertia = THICKNESS**4 / 12.0
    shear = YOUNG / (2.0 * (1.0 + POISSON))
    return load * LENGTH**4 / (8.0 * YOUNG * inertia) + load * LENGTH**2 / (2.0 * 5.0 / 6.0 * shear * area)


def cantilever_sag(cells: int, strain_smoothing: bool, device=None, steps: int = STEPS) -> tuple:
    """(tip sag (m), tets, largest speed left (m/s), backward-Euler steps whose Newton solve
    did not converge) of the cantilever meshed with ``cells`` cells through the thickness,
    after ``steps`` steps."""
    from wpsim.core import geometry
    from wpsim.core.builder import ModelBuilder
    from wpsim.solvers import simulate
    from wpsim.solvers.implicit_euler import ImplicitEulerSolver

    cell = THICKNESS / cells
    along = int(round(LENGTH / cell))
    points = geometry.grid_points((along + 1, cells + 1, cells + 1), (cell, cell, cell))
    tets = geometry.grid_tetrahedra(along, cells, cells)
    builder = ModelBuilder()
    builder.add_soft_mesh(points, tets, density=DENSITY, young_modulus=YOUNG, poisson_ratio=POISSON, kd=DAMPING,
                          fixed=np.flatnonzero(points[:, 0] < 1e-9), strain_smoothing=strain_smoothing)
    model = builder.finalize(device=device, dtype=wp.float64)
    solver = ImplicitEulerSolver(model, tolerance=NEWTON_TOLERANCE)
    final = simulate(solver, model.state(), steps, DT)
    tip = np.flatnonzero(points[:, 0] > LENGTH - 1e-9)
    sag = -float(np.mean(final.particle_q.numpy()[tip, 2] - points[tip, 2]))
    return sag, len(tets), float(np.abs(final.particle_qd.numpy()).max()), solver.unconverged_steps


def fem_convergence_suite(device=None, quick: bool = False) -> list[dict]:
    """The cantilever's sag and its error against beam theory, per element kind and mesh."""
    reference = beam_theory_sag()
    records = []
    for cells in (1,) if quick else (1, 2, 4):
        for smoothing in (False, True):
            start = time.perf_counter()
            steps = QUICK_STEPS if quick else STEPS
            sag, tets, speed, unconverged = cantilever_sag(cells, smoothing, device, steps)
            wall = time.perf_counter() - start
            kind = "strain-smoothed tets" if smoothing else "linear tets"
            params = {"mode": kind, "cells_through_thickness": cells, "tets": tets, "steps": steps, "dt": DT,
                      "reference_m": reference, "residual_speed_m_s": speed,
                      "unconverged_steps": unconverged, "device": str(device or "default"),
                      "precision": "float64"}
            error = 100.0 * (sag / reference - 1.0)
            records += [record("fem_convergence", "cantilever_gravity", params, "deflection_m", sag),
                        record("fem_convergence", "cantilever_gravity", params, "error_percent", error),
                        record("fem_convergence", "cantilever_gravity", params, "wall_s", wall)]
            progress(f"fem_convergence: cantilever, {kind}, {cells} cell(s) through the thickness ({tets} tets): "
                     f"sag {sag * 1e3:.3f} mm against {reference * 1e3:.3f} mm from beam theory ({error:+.1f} %), "
                     f"{wall:.1f} s" + ("" if speed < REST_SPEED else f"; NOT AT REST: {speed:.2g} m/s left")
                     + (f"; {unconverged} step(s) stopped above the Newton tolerance" if unconverged else ""))
    return records
