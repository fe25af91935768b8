"""Regenerate the "measured" runs of ``arm_2link_friction/`` with MuJoCo (run from the
repository root: ``python assets/make_friction_data.py``; needs ``pip install mujoco``).

The 2-link arm of ``arm_2link.xml`` is given other link masses (inertias scaled with them),
joint damping and armature than its file says, and a Coulomb friction torque on both joints
(MuJoCo's ``dof_frictionloss``), an effect wpsim's joint model does not have. It is stepped
by MuJoCo at the file's time step (1 ms) from random initial angles and rates under random
sums of sines, the torque held over each sample period (a 200 Hz controller). Every file
holds, at 200 Hz, the time (s), both joint angles (rad) and rates (rad/s) and the torques
(N m) applied until the next sample, as ``wpsim.io.measurements`` NPZ arrays: ten training
runs of 1 s (``train_00.npz`` ...) and three held-out runs of 1.5 s (``heldout_00.npz``
...). The true parameters, the seed and every run's initial state and excitation go to
``truth.json``. Runs that would come within 0.5 rad of the joint limits (+-2.5 rad) are
drawn again.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_sysid_data import JOINTS, arm_model, run_arm  # noqa: E402  (the shared MuJoCo arm)

from wpsim.io.files import atomic_write, write_json  # noqa: E402
from wpsim.io.measurements import load_trajectory  # noqa: E402

OUT = Path(__file__).resolve().parent / "arm_2link_friction"
SEED = 20240611
TRUTH = {
    "link1.mass": 1.2, "link2.mass": 0.6,  # kg (the file: 1.0 and 0.5)
    "link1_joint.damping": 0.1, "link2_joint.damping": 0.07,  # N m s/rad (the file: 0.05)
    "link1_joint.armature": 0.015, "link2_joint.armature": 0.008,  # kg m^2 (the file: 0)
}
FRICTION = {"link1_joint": 0.3, "link2_joint": 0.2}  # N m, Coulomb (frictionloss)
RUNS = {"train": (10, 1.0), "heldout": (3, 1.5)}  # split -> (runs, duration s)
SAMPLE_EVERY = 5  # MuJoCo steps per sample: 200 Hz at the file's 1 ms
TORQUE_SCALE = {"link1_joint": 2.0, "link2_joint": 0.8}  # N m, largest amplitude of one sine
SINES = 3  # per joint
MAX_ANGLE = 2.0  # rad, runs beyond it are drawn again (limits at 2.5 rad)


def draw_run(rng: np.random.Generator) -> dict:
    """A random initial state (rad, rad/s) and sum-of-sines excitation per joint."""
    return {
        "q0": rng.uniform(-0.6, 0.6, len(JOINTS)).tolist(),
        "qd0": rng.uniform(-1.5, 1.5, len(JOINTS)).tolist(),
        "excitation": {joint: [(float(rng.uniform(0.2, 1.0) * TORQUE_SCALE[joint]), float(rng.uniform(0.3, 3.0)),
                                float(rng.uniform(0.0, 2.0 * np.pi))) for _ in range(SINES)]
                       for joint in JOINTS},
    }


def held_torques(run: dict, steps: int, dt: float) -> np.ndarray:
    """(steps + 1, joints) N m: the excitation at each sample time, held until the next."""
    held = (np.arange(steps + 1) // SAMPLE_EVERY) * SAMPLE_EVERY * dt
    return np.stack([sum(a * np.sin(2.0 * np.pi * f * held + p) for a, f, p in run["excitation"][joint])
                     for joint in JOINTS], axis=1)


def save_npz(path: Path, time: np.ndarray, columns: dict) -> Path:
    """Write a measurement NPZ atomically, with fixed zip timestamps (byte-reproducible)."""

    def write(tmp):
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, values in {"time": time, **columns}.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(values, dtype=np.float64))
                archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(2024, 1, 1, 0, 0, 0)), buffer.getvalue(),
                                 compress_type=zipfile.ZIP_DEFLATED)

    return atomic_write(path, write)


def main():
    mj = arm_model(TRUTH, FRICTION)
    rng = np.random.default_rng(SEED)
    runs, redrawn = {}, 0
    for split, (count, duration) in RUNS.items():
        steps = int(round(duration / mj.opt.timestep))
        for i in range(count):
            while True:
                run = draw_run(rng)
                time, columns = run_arm(mj, run["q0"], run["qd0"], held_torques(run, steps, mj.opt.timestep),
                                        SAMPLE_EVERY)
                if max(np.abs(columns[f"q:{j}"]).max() for j in JOINTS) <= MAX_ANGLE:
                    break
                redrawn += 1
            name = f"{split}_{i:02d}.npz"
            save_npz(OUT / name, time, columns)
            load_trajectory(OUT / name)  # the file reads back in the measurement format
            runs[name] = {"split": split, "duration_s": duration, **run}
    write_json(OUT / "truth.json", {
        "robot": "arm_2link.xml", "parameters": TRUTH, "frictionloss_N_m": FRICTION, "seed": SEED,
        "sample_rate_Hz": 1.0 / (SAMPLE_EVERY * mj.opt.timestep), "mujoco_timestep_s": mj.opt.timestep,
        "excitation": "joint -> [(amplitude N m, frequency Hz, phase rad)], held over each sample period",
        "runs": runs})
    size = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(runs)} runs ({redrawn} redrawn near the joint limits) to {OUT.name}/, {size / 1024:.0f} KiB "
          f"in all; friction {FRICTION} N m, parameters {TRUTH}")


if __name__ == "__main__":
    main()
