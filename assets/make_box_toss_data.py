"""Regenerate ``box_toss.xml`` and its "measured" run ``box_toss.csv`` (run from the
repository root: ``python assets/make_box_toss_data.py``; needs ``pip install mujoco``).

A 10 cm, 1 kg box (a free body) is launched 5 mm above the ground at 2.0 m/s along x and
0.4 m/s along y, spinning at 4 rad/s about z, lands, slides and comes to rest. MuJoCo steps
it at 1 ms with both geoms' friction at the true value; the position of the box's centre is
recorded at 100 Hz for 0.8 s (columns ``marker:box:x|y|z``, m). The file's own friction
(0.8) is the calibration's starting guess. The true value and the launch go to
``box_toss_truth.json``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.io.files import atomic_write, write_json
from wpsim.io.measurements import save_trajectory

HERE = Path(__file__).resolve().parent
TRUE_FRICTION = 0.35
START = {"position_m": [0.0, 0.0, 0.055], "velocity_m_per_s": [2.0, 0.4, 0.0], "spin_rad_per_s": [0.0, 0.0, 4.0]}
DURATION, EVERY = 0.8, 10  # s, steps between samples

XML = """<mujoco model="box_toss">
  <option timestep="0.001" gravity="0 0 -9.81"/>
  <worldbody>
    <geom name="ground" type="plane" size="5 5 0.1" friction="{mu} 0.005 0.0001"/>
    <body name="box" pos="0 0 0.055">
      <freejoint name="box_free"/>
      <geom name="box_geom" type="box" size="0.05 0.05 0.05" mass="1" friction="{mu} 0.005 0.0001"/>
    </body>
  </worldbody>
</mujoco>
"""


def main():
    import mujoco

    atomic_write(HERE / "box_toss.xml", lambda tmp: Path(tmp).write_text(XML.format(mu=0.8)))
    mj = mujoco.MjModel.from_xml_string(XML.format(mu=TRUE_FRICTION))
    data = mujoco.MjData(mj)
    data.qpos[:3] = START["position_m"]
    data.qvel[:3] = START["velocity_m_per_s"]
    data.qvel[3:] = START["spin_rad_per_s"]  # body axes, as the box starts unrotated
    steps = int(round(DURATION / mj.opt.timestep))
    positions = []
    for k in range(steps + 1):
        if k % EVERY == 0:
            positions.append(data.qpos[:3].copy())
        mujoco.mj_step(mj, data)
    positions = np.array(positions)
    time = mj.opt.timestep * EVERY * np.arange(len(positions))
    save_trajectory(HERE / "box_toss.csv", time, {f"marker:box:{a}": positions[:, i] for i, a in enumerate("xyz")})
    write_json(HERE / "box_toss_truth.json", {"friction": TRUE_FRICTION, "start": START, "robot": "box_toss.xml",
                                             "sample_period_s": mj.opt.timestep * EVERY})
    slid = np.linalg.norm(positions[-1, :2] - positions[0, :2])
    print(f"wrote box_toss.xml and {len(time)} samples to box_toss.csv; the box slid {slid:.3f} m")


if __name__ == "__main__":
    main()
