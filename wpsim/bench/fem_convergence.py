"""Benchmark suite ``fem_convergence``: how the soft-body elements converge.

Four static cases, each meshed with 1, 2 and 4 cells through the thickness (quick: 1) and
each element kind of ``wpsim.bench.fem_statics`` (linear, strain-smoothed and quadratic
tets), solved to static equilibrium by Newton's method on the simulator's own forces
(float64; ``ElasticBlock.solve``):

- ``cantilever_gravity``: a clamped beam, L = 0.4 m, 0.04 m square (L / h = 10), 1000 kg/m^3,
  E = 20 MPa, Poisson 0.3, sagging under its own weight (lumped masses, as the simulator
  applies gravity). Reference: Timoshenko, q L^4 / (8 E I) + q L^2 / (2 kappa G A), q = rho g A,
  kappa = 5/6 (11.894 mm).
- ``cantilever_tip_load``: the same beam, weightless, under 1 N spread evenly over its free
  end. Reference: P L^3 / (3 E I) + P L / (kappa G A) (5.034 mm).
- ``torsion``: the same bar twisted by 0.05 N m at its free end (tangential traction in
  proportion to the distance from the axis). Measured: the twist rate (rad/m) fitted over
  the middle half of the length, away from the clamp's warping restraint. Reference:
  Saint-Venant, T / (G J) with J = 0.1406 h^4 of a square section (the series below).
- ``incompressible_compression``: a 0.1 m cube of Poisson 0.49 (E = 1 MPa) clamped at its
  base, under 10 kPa on its top face; measured: the top face's mean sink. No closed form:
  the reference is the fine quadratic mesh.

Every case also has ``fine_error_percent``, the error against the same case meshed with
``FINE_CELLS`` cells through the thickness in quadratic tets (quick: 2; the converged reference). Per mesh:
the nodes, the stable time step of the explicit (semi-implicit) solver at rest (2 /
omega_max, ``stable_dt_s``) and the wall time of one of its float32 steps (``step_s``).
"""

from __future__ import annotations

import time

import numpy as np

from wpsim.bench.fem_statics import ELEMENT_KINDS, ElasticBlock
from wpsim.bench.records import progress, record

LENGTH, THICKNESS, DENSITY, YOUNG, POISSON, GRAVITY = 0.4, 0.04, 1000.0, 2.0e7, 0.3, 9.81
TIP_LOAD, TORQUE = 1.0, 0.05  # N, N m
CUBE, CUBE_YOUNG, CUBE_POISSON, PRESSURE = 0.1, 1.0e6, 0.49, 1.0e4  # m, Pa, -, Pa
SHEAR_FACTOR = 5.0 / 6.0
CELLS, QUICK_CELLS, QUICK_FINE_CELLS = (1, 2, 4), (1,), 2
FINE_CELLS = {"cantilever_gravity": 6, "cantilever_tip_load": 6, "torsion": 6, "incompressible_compression": 8}
"""Cells through the thickness of each case's fine quadratic reference mesh (the beams' 6: 15,552
tets, 21,097 nodes)."""


def _shear_modulus(young: float, poisson: float) -> float:
    return young / (2.0 * (1.0 + poisson))


def beam_theory_sag() -> float:
    """Timoshenko's tip sag (m) of the cantilever under its own weight."""
    area, inertia = THICKNESS**2, THICKNESS**4 / 12.0
    load = DENSITY * GRAVITY * area
    return (load * LENGTH**4 / (8.0 * YOUNG * inertia)
            + load * LENGTH**2 / (2.0 * SHEAR_FACTOR * _shear_modulus(YOUNG, POISSON) * area))


def beam_theory_tip_deflection() -> float:
    """Timoshenko's tip deflection (m) of the weightless cantilever under ``TIP_LOAD``."""
    area, inertia = THICKNESS**2, THICKNESS**4 / 12.0
    return (TIP_LOAD * LENGTH**3 / (3.0 * YOUNG * inertia)
            + TIP_LOAD * LENGTH / (SHEAR_FACTOR * _shear_modulus(YOUNG, POISSON) * area))


def saint_venant_twist_rate() -> float:
    """Twist rate (rad/m) of the square bar under ``TORQUE``: T / (G J), J = beta h^4 with
    beta = (1 - 192 / pi^5 sum_(n odd) tanh(n pi / 2) / n^5) / 3 (0.1406)."""
    n = np.arange(1, 40, 2, dtype=np.float64)
    beta = (1.0 - 192.0 / np.pi**5 * np.sum(np.tanh(n * np.pi / 2.0) / n**5)) / 3.0
    return TORQUE / (_shear_modulus(YOUNG, POISSON) * beta * THICKNESS**4)


def _beam(kind: str, cells: int, device) -> ElasticBlock:
    return ElasticBlock((LENGTH, THICKNESS, THICKNESS), (10 * cells, cells, cells), kind, YOUNG, POISSON,
                        lambda p: p[:, 0] < 1e-9, DENSITY, device)


def _cube(kind: str, cells: int, device) -> ElasticBlock:
    return ElasticBlock((CUBE, CUBE, CUBE), (cells, cells, cells), kind, CUBE_YOUNG, CUBE_POISSON,
                        lambda p: p[:, 2] < 1e-9, DENSITY, device)


def _at_end(p):
    return p[:, 0] > LENGTH - 1e-9


def _twist_traction(p):
    """Tangential traction (Pa) of the end face, in proportion to the distance from the bar's
    axis, with the resultant torque ``TORQUE`` about +x: T / I_p * (e_x x r)."""
    r = p - np.array([LENGTH, 0.5 * THICKNESS, 0.5 * THICKNESS])
    polar = THICKNESS**4 / 6.0
    return TORQUE / polar * np.stack([np.zeros(len(p)), -r[:, 2], r[:, 1]], axis=1)


def measure(case: str, kind: str, cells: int, device=None) -> tuple:
    """(measured value: m, or rad/m for torsion; the mesh) of ``case`` with ``cells`` cells
    through the thickness of element ``kind``."""
    if case == "incompressible_compression":
        body = _cube(kind, cells, device)
        top = lambda p: p[:, 2] > CUBE - 1e-9  # noqa: E731
        u, _, _ = body.solve(body.surface_load(top, lambda p: np.tile([0.0, 0.0, -PRESSURE], (len(p), 1))))
        return -float(u[top(body.x0), 2].mean()), body
    body = _beam(kind, cells, device)
    if case == "cantilever_gravity":
        u, _, _ = body.solve(body.gravity_load(GRAVITY))
    elif case == "cantilever_tip_load":
        traction = np.array([0.0, 0.0, -TIP_LOAD / THICKNESS**2])
        u, _, _ = body.solve(body.surface_load(_at_end, lambda p: np.tile(traction, (len(p), 1))))
    elif case == "torsion":
        u, _, _ = body.solve(body.surface_load(_at_end, _twist_traction))
        r = body.x0[:, 1:] - 0.5 * THICKNESS
        away = (r**2).sum(axis=1) > 1e-12
        angle = (r[:, 0] * u[:, 2] - r[:, 1] * u[:, 1])[away] / (r**2).sum(axis=1)[away]
        x = body.x0[away, 0]
        middle = (x >= 0.25 * LENGTH - 1e-9) & (x <= 0.75 * LENGTH + 1e-9)
        return float(np.polyfit(x[middle], angle[middle], 1)[0]), body
    else:
        raise ValueError(f"unknown fem_convergence case {case!r}")
    return -float(u[_at_end(body.x0), 2].mean()), body


CASES = {"cantilever_gravity": beam_theory_sag, "cantilever_tip_load": beam_theory_tip_deflection,
         "torsion": saint_venant_twist_rate, "incompressible_compression": None}
"""Each case and its closed-form reference (None: the fine mesh only)."""


def fem_convergence_suite(device=None, quick: bool = False) -> list[dict]:
    """Every case, element kind and mesh: the measured value, its errors against the closed
    form and against the fine quadratic mesh, the stable explicit time step and the cost of
    one step."""
    records = []
    for case, closed_form in CASES.items():
        metric = "twist_rate_rad_per_m" if case == "torsion" else "deflection_m"
        fine_cells = QUICK_FINE_CELLS if quick else FINE_CELLS[case]
        fine, _ = measure(case, "quadratic tets", fine_cells, device)
        reference = closed_form() if closed_form else fine
        for kind in ELEMENT_KINDS:
            for cells in QUICK_CELLS if quick else CELLS:
                start = time.perf_counter()
                value, body = measure(case, kind, cells, device)
                wall = time.perf_counter() - start
                params = {"mode": kind, "cells_through_thickness": cells, "nodes": body.nodes,
                          "tets": body.model.tet_count, "reference": reference, "fine_reference": fine,
                          "fine_cells": fine_cells, "device": str(device or "default"), "precision": "float64"}
                error, fine_error = 100.0 * (value / reference - 1.0), 100.0 * (value / fine - 1.0)
                records += [record("fem_convergence", case, params, metric, value),
                            record("fem_convergence", case, params, "fine_error_percent", fine_error),
                            record("fem_convergence", case, params, "wall_s", wall)]
                if closed_form:
                    records.append(record("fem_convergence", case, params, "error_percent", error))
                if case == "cantilever_gravity":
                    records += [record("fem_convergence", case, params, "stable_dt_s", body.stable_time_step()),
                                record("fem_convergence", case, params, "step_s", body.step_cost())]
                progress(f"fem_convergence: {case}, {kind}, {cells} cell(s) through the thickness ({body.nodes} "
                         f"nodes): {value:.6g} {'rad/m' if case == 'torsion' else 'm'}"
                         + (f", {error:+.1f} % against theory" if closed_form else "")
                         + f", {fine_error:+.1f} % against the fine mesh, {wall:.1f} s")
    return records
