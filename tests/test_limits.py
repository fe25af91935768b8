"""Limits with one-line errors (issue 45 item 3): MJCF nesting depth, candidate contact pairs
and the memory they need (estimated before allocating), articulation size (a 10,000-link chain
is refused up front with the reason), measured-data sizes, optimiser start counts."""

import pytest

from wpsim.io.mjcf import import_mjcf
from wpsim.io.scene_parsing import SceneFileError


def nested_mjcf(path, depth: int):
    """An MJCF file of ``depth`` bodies, each inside the previous one."""
    bodies = "".join(f'<body name="b{i}" pos="0 0 0.1"><joint type="hinge"/><geom type="sphere" size="0.01"/>'
                     for i in range(depth))
    path.write_text(f"<mujoco><worldbody>{bodies}{'</body>' * depth}</worldbody></mujoco>")
    return path


def test_mjcf_nested_deeper_than_the_limit_is_refused_naming_file_and_element(tmp_path):
    path = nested_mjcf(tmp_path / "deep.xml", 1000)  # was a RecursionError traceback
    with pytest.raises(SceneFileError, match=r"deep\.xml: <body name=\"b498\">: nested 501 elements deep; at most 500"):
        import_mjcf(path)
    builder, scene = import_mjcf(nested_mjcf(tmp_path / "ok.xml", 497))  # the deepest geom at the limit
    assert len(scene.bodies) == 497 and builder.joints.count == 497
