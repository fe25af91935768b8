"""Limits with one-line errors (issue 45 item 3): MJCF nesting depth, candidate contact pairs
and the memory they need (estimated before allocating), articulation size (a 10,000-link chain
is refused up front with the reason), measured-data sizes, optimiser start counts."""

import numpy as np
import pytest

from wpsim.core import limits, rigid_builder
from wpsim.core.builder import ModelBuilder
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


def spheres(count: int) -> ModelBuilder:
    """``count`` free spheres in one world."""
    builder = ModelBuilder()
    for i in range(count):
        body = builder.add_body()
        builder.add_joint_free(body, pos=(0.3 * i, 0.0, 1.0))
        builder.add_shape_sphere(body, radius=0.1, density=1000.0)
    return builder


def test_candidate_pairs_beyond_the_memory_budget_are_refused_before_listing(monkeypatch):
    builder = spheres(300)
    monkeypatch.setenv(limits.BUDGET_VARIABLE, "1M")

    def never(shape_world):
        raise AssertionError("the pairs were listed")

    monkeypatch.setattr(rigid_builder, "world_pairs", never)
    with pytest.raises(ValueError, match=r"300 collision shapes \(300 in world 0, 0 shared by every world\) make "
                                         r"90,000 candidate contact pairs; listing them needs about 5\.5 MiB, more "
                                         r"than the memory budget of 1\.0 MiB \(WPSIM_MEMORY_BUDGET=1M; .* spread "):
        builder.finalize(device="cpu")
    monkeypatch.setenv(limits.BUDGET_VARIABLE, "lots")
    with pytest.raises(ValueError, match="WPSIM_MEMORY_BUDGET='lots': expected a size in bytes"):
        builder.finalize(device="cpu")


def test_candidate_pairs_of_100000_shapes_in_one_world_are_refused():
    with pytest.raises(ValueError, match=r"100,000 collision shapes .* make 10,000,000,000 candidate contact pairs; "
                                         r"at most 2,147,483,647 \(MAX_CANDIDATE_PAIRS\)"):
        rigid_builder.check_candidate_pairs(np.zeros(100_000, dtype=np.int64))
    budget, source = limits.memory_budget()
    assert 0 < budget and "of" in source

