"""Contact margin (MuJoCo's geom margin) of the soft-constraint contact: a pair's points count
from the sum of its shapes' margins and are pushed towards it, against MuJoCo; a geom's gap
lists contacts in MuJoCo without moving anything."""

import numpy as np
import pytest
import warp as wp
from test_contact_dimensions import paired_runs

import wpsim

DROP = """<mujoco><option timestep="0.002"/><worldbody>
<geom type="plane" size="2 2 0.1" margin="{floor_margin}"/>
<body pos="0 0 0.2"><freejoint/><geom type="{shape}" size="0.1 0.08 0.05" density="600" margin="{margin}" gap="{gap}"
quat="0.98 0.1 0.15 0"/></body>
</worldbody><keyframe><key qpos="0 0 0.2 1 0 0 0" qvel="0.3 0 -0.5 0 0 1"/></keyframe></mujoco>"""


@pytest.mark.parametrize("shape, margin, gap, floor_margin", [("box", 0.003, 0.0, 0.0), ("box", 0.004, 0.002, 0.001),
                                                               ("sphere", 0.0, 0.0, 0.005), ("capsule", 0.002, 0.001,
                                                                                             0.0)])
def test_a_tilted_body_lands_and_rests_as_in_mujoco(tmp_path, shape, margin, gap, floor_margin):
    """A tilted box, sphere or capsule thrown down onto the floor, 0.8 s: its contacts count from
    the sum of the two margins and it comes to rest that much higher than without (the gap
    changes nothing), its centre within 1e-6 m of MuJoCo's throughout (measured 1.9e-13 m and
    below)."""
    text = DROP.format(shape=shape, margin=margin, gap=gap, floor_margin=floor_margin)
    (ours, _), (theirs, _), (contacts, mujoco_contacts) = paired_runs(tmp_path, text, 400)
    assert np.abs(ours[:, :3] - theirs[:, :3]).max() < 1e-6
    assert contacts == mujoco_contacts > 0
    (_, _), (no_margin, _), _ = paired_runs(tmp_path, DROP.format(shape=shape, margin=0, gap=0, floor_margin=0), 400)
    offset = margin + floor_margin
    assert theirs[-1, 2] - no_margin[-1, 2] == pytest.approx(offset, abs=2e-4)


def test_a_bad_margin_is_refused_naming_the_shape():
    builder = wpsim.ModelBuilder()
    plane = builder.add_ground_plane()
    with pytest.raises(ValueError, match="shape 0: margin must be finite and >= 0 m"):
        builder.set_shape_margin(plane, -0.001)
    builder.set_shape_margin(plane, 0.002)
    np.testing.assert_array_equal(builder.finalize(dtype=wp.float64).shape_margin.numpy(), [0.002])


STACK = """<mujoco><option timestep="0.002"/><worldbody>
<geom type="plane" size="2 2 0.1"/>
<body pos="0 0 0.1"><freejoint/><geom type="box" size="0.3 0.3 0.1" density="300" margin="0.002"/></body>
<body pos="0.05 0 0.31"><freejoint/><geom type="sphere" size="0.1" density="800" margin="0.004"/></body>
</worldbody><keyframe><key qpos="0 0 0.1 1 0 0 0 0.05 0 0.31 1 0 0 0" qvel="0 0 0 0 0 0 0.3 0 -0.2 0 0 2"/>
</keyframe></mujoco>"""


@pytest.mark.parametrize("broad_phase", [False, True])
def test_a_ball_within_the_margin_of_a_free_box_moves_as_in_mujoco(tmp_path, broad_phase):
    """Body-body rows within a margin: a ball starting 4 mm above a free box, inside the pair's
    6 mm margin, rolls on it for 0.3 s as in MuJoCo (1e-9 m; measured 1.7e-16), also when the
    broad phase, whose boxes grow by each shape's margin, picks the pairs."""
    (ours, _), (theirs, _), _ = paired_runs(tmp_path, STACK, 150, broad_phase=broad_phase)
    centres = [0, 1, 2, 7, 8, 9]
    assert np.abs(ours[:, centres] - theirs[:, centres]).max() < 1e-9
    assert theirs[-1, 9] - theirs[-1, 2] - 0.2 == pytest.approx(0.006, abs=5e-4)  # resting 6 mm above the box
