"""Regenerate the measured marker runs of the soft finger (run from the repository root:
``python assets/make_finger_data.py``; see ``wpsim.tasks.finger_calibration``).

- ``soft_finger_markers_same.csv``: the calibrated model itself, the 984-tet finger of
  ``soft_finger_tets.npz`` (quadratic tets) with the true parameters, its six markers at
  500 Hz, exact;
- ``soft_finger_markers_fine.csv``: the converged reference: the same finger meshed finer
  (every tet split into 8 at its edge midpoints, ``wpsim.core.meshing.refine_tets``: 7872
  quadratic tets, 2 mm edges), the same parameters, stepped at a quarter of the time step
  (the explicit damping limit shrinks with the square of the edge length), markers plus
  Gaussian noise of ``NOISE`` per coordinate (seeded);
- ``soft_finger_truth.json``: the true parameters and how the runs were made.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.core.meshing import refine_tets
from wpsim.io.files import write_json
from wpsim.io.measurements import save_trajectory
from wpsim.solvers.controllers import ActivationSchedule
from wpsim.tasks import finger_calibration as finger

HERE = Path(__file__).resolve().parent


def run(vertices, tets, config: finger.FingerConfig) -> tuple:
    """(frame times (N,) s, marker positions (N, M, 3) m, tet count) of the finger with the
    true parameters."""
    truth = finger.TRUTH
    model = finger.build_finger(vertices, tets, truth["young_modulus"], truth["poisson_ratio"], truth["damping"],
                                requires_grad=False, order=config.order)
    schedule = ActivationSchedule(model, finger.activation_schedule(model, config.steps, config.dt), truth["gain"])
    positions = finger.simulate_markers(model, config, schedule)
    return config.dt * config.frame_every * np.arange(len(positions)), positions, model.tet_count


def main():
    wp.config.log_level = wp.LOG_WARNING
    config = finger.FingerConfig()
    vertices, tets = finger.load_mesh()
    time, same, coarse_tets = run(vertices, tets, config)
    save_trajectory(HERE / "soft_finger_markers_same.csv", time, finger.marker_columns(time, same))
    fine_config = replace(config, dt=config.dt / 4, frame_every=config.frame_every * 4)  # damping: dt ~ cell^2
    fine_time, fine, fine_tets = run(*refine_tets(vertices, tets), fine_config)
    noisy = fine + np.random.default_rng(11).normal(0.0, finger.NOISE, fine.shape)
    save_trajectory(HERE / "soft_finger_markers_fine.csv", fine_time, finger.marker_columns(fine_time, noisy))
    write_json(HERE / "soft_finger_truth.json", {
        "parameters": finger.TRUTH, "units": finger.UNITS,
        "soft_finger_markers_same.csv": {"tets": coarse_tets, "element": "quadratic tet", "dt_s": config.dt,
                                         "noise_m": 0.0},
        "soft_finger_markers_fine.csv": {"tets": fine_tets, "refined": "1 -> 8 tets", "element": "quadratic tet",
                                         "dt_s": fine_config.dt, "noise_m": finger.NOISE},
    })
    gap = np.sqrt(np.mean(np.sum((fine - same) ** 2, axis=-1))) * 1e3
    print(f"wrote {len(time)} frames of {len(finger.MARKERS)} markers; the fine mesh ({fine_tets} tets) differs from "
          f"the coarse one ({coarse_tets} tets) by {gap:.3f} mm RMS before noise")


if __name__ == "__main__":
    main()
