"""Gymnasium's MuJoCo assets (the MJCF files users bring most often): every file imports, and
every file steps like MuJoCo (Euler, contact and joint limits off) to 1e-6 over 500 steps from
a perturbed state (the swimmer since fluid forces are honoured)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from wpsim.io.mjcf import import_mjcf

gymnasium = pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")
ASSETS = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
MATCHED = ["ant", "half_cheetah", "hopper", "humanoid", "humanoidstandup", "inverted_double_pendulum",
           "inverted_pendulum", "point", "pusher", "pusher_v5", "reacher", "swimmer", "walker2d", "walker2d_v5"]


SILENT = {"half_cheetah"}  # every attribute honoured (its joints' solreflimit and solimplimit included)


def test_every_gymnasium_file_imports_and_the_list_is_complete():
    """All 14 import (one warning each lists what is not honoured, e.g. the RK4 integrator,
    none for ``SILENT``), weigh what MuJoCo weighs, and each exception names its reason."""
    from wpsim.bench.mujoco_reference import load_mujoco

    names = sorted(p.stem for p in ASSETS.glob("*.xml"))
    assert names == sorted(MATCHED)
    for name in names:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            builder, scene = import_mjcf(ASSETS / f"{name}.xml")
        if name in SILENT:
            assert not caught and not scene.unhonoured
        else:
            assert len(caught) == 1 and str(ASSETS / f"{name}.xml") in str(caught[0].message)
        assert builder.finalize().joint_dof_count > 0
        mj = load_mujoco(ASSETS / f"{name}.xml")
        assert abs(builder.bodies.array("body_mass").sum() - mj.body_mass.sum()) < 1e-9 * mj.body_mass.sum()


@pytest.mark.parametrize("name", MATCHED)
def test_gymnasium_file_steps_like_mujoco(name):
    from wpsim.bench.mujoco_reference import rollouts

    ours, theirs, q0 = rollouts(ASSETS / f"{name}.xml", steps=500, seed=1)
    assert np.abs(theirs[-1] - q0).max() > 0.1  # it moved
    assert np.abs(ours - theirs).max() < 1e-6
