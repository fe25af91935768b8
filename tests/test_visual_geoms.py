"""MJCF geoms that do not collide (contype = conaffinity = 0, as MuJoCo files' "visual"
classes) are drawn: in the renderer's images, the USD rollouts and the strip made from them
(the rollouts.png of ``wpsim sysid``)."""

import numpy as np
import pytest
from PIL import Image

import wpsim
from wpsim.core.geometry import primitive_surface
from wpsim.core.meshing import check_solid, signed_volume
from wpsim.io.mjcf import import_mjcf
from wpsim.io.render import BACKGROUND, SceneRenderer

SCENE = """<mujoco>
  <default><default class="visual"><geom contype="0" conaffinity="0" group="2"/></default></default>
  <worldbody>
    <geom class="visual" type="box" size="0.3 0.3 0.02" pos="0 0 -0.3"/>
    <body name="arm" pos="0 0 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom class="visual" type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <geom class="visual" type="sphere" size="0.06" pos="0.3 0 0"/>
      <body name="tip" pos="0.3 0 0">
        <joint name="wrist" type="hinge" axis="0 1 0"/>
        <geom class="visual" type="cylinder" size="0.03 0.1" pos="0.1 0 0"/>
        <geom class="visual" type="ellipsoid" size="0.05 0.03 0.02" pos="0.2 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def covered(image: np.ndarray) -> int:
    """Pixels that are not the background."""
    background = (np.asarray(BACKGROUND) * 255 + 0.5).astype(np.uint8)
    return int(np.any(image[..., :3] != background, axis=-1).sum())


@pytest.fixture
def visual_only(tmp_path):
    path = tmp_path / "visual_only.xml"
    path.write_text(SCENE)
    builder, _ = import_mjcf(path)
    return builder.finalize()


def test_collision_free_primitives_are_drawn(visual_only):
    """The five geoms collide with nothing but are drawn, and the bodies still weigh."""
    model = visual_only
    assert model.shape_count == 0 and len(model.visual_meshes) == 5
    assert [body for body, *_ in model.visual_meshes] == [-1, 0, 0, 1, 1]
    assert (model.body_mass.numpy() > 0.0).all()
    assert covered(SceneRenderer(model, 160, 120).render(model.state())) > 500


@pytest.mark.parametrize("kind, size, volume", [
    ("box", (0.1, 0.2, 0.3), 0.048), ("sphere", (0.2,), 4.0 / 3.0 * np.pi * 0.008),
    ("capsule", (0.1, 0.3), np.pi * 0.01 * 0.6 + 4.0 / 3.0 * np.pi * 1e-3),
    ("cylinder", (0.1, 0.3), np.pi * 0.01 * 0.6), ("ellipsoid", (0.1, 0.2, 0.3), 4.0 / 3.0 * np.pi * 0.006)])
def test_primitive_surfaces_are_closed_outward_and_of_their_size(kind, size, volume):
    vertices, faces = primitive_surface(kind, size)
    check_solid(vertices, faces, kind)
    assert signed_volume(vertices, faces) == pytest.approx(volume, rel=0.04)


def test_a_rollout_of_collision_free_geoms_renders_from_its_stage(visual_only, tmp_path):
    """The rollouts stage holds the drawn geoms, and its strip is not blank."""
    pytest.importorskip("pxr")
    from wpsim.io.usd_export import write_rollouts
    from wpsim.io.usd_render import render_strip

    model = visual_only
    states = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 40, 5e-3, keep_states=True)[::10]
    stage = write_rollouts(tmp_path / "rollouts.usd", model, {"fitted": states}, 20.0)
    strip = render_strip(stage, tmp_path / "rollouts.png", count=2, width=120, height=90)["out"]
    assert covered(np.asarray(Image.open(strip))) > 500
