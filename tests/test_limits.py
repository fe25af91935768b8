"""Limits with one-line errors (issue 45 item 3): MJCF nesting depth, candidate contact pairs
and the memory they need (estimated before allocating), articulation size (a 10,000-link chain
is refused up front with the reason), measured-data sizes, optimiser start counts."""

import io
import zipfile

import numpy as np
import pytest

from wpsim.apps.cli import main
from wpsim.core import limits, rigid_builder
from wpsim.core.builder import ModelBuilder
from wpsim.io import measurements
from wpsim.io.measurements import MeasurementError, load_trajectory
from wpsim.io.mjcf import import_mjcf
from wpsim.io.scene_parsing import SceneFileError
from wpsim.io.urdf import import_urdf
from wpsim.solvers import SemiImplicitSolver, articulation_size


def nested_mjcf(path, depth: int):
    """An MJCF file of ``depth`` bodies, each inside the previous one."""
    bodies = "".join(f'<body name="b{i}" pos="0 0 0.1"><joint type="hinge"/><geom type="sphere" size="0.01"/>'
                     for i in range(depth))
    path.write_text(f"<mujoco><worldbody>{bodies}{'</body>' * depth}</worldbody></mujoco>")
    return path


def chain_urdf(path, links: int):
    """A URDF serial chain of ``links`` links joined by revolute joints."""
    inertial = ('<inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/>'
                '</inertial>')
    parts = [f'<link name="l{i}">{inertial}</link>' for i in range(links)]
    parts += [f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
              f'<origin xyz="0 0 0.05"/><axis xyz="0 1 0"/></joint>' for i in range(1, links)]
    path.write_text(f'<robot name="chain">{"".join(parts)}</robot>')
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
    with pytest.raises(ValueError, match=r"300 collision shapes \(300 in world 0, 0 shared by every world; 300 on "
                                         r"bodies\) make "
                                         r"90,000 candidate contact pairs; listing them needs about 5\.5 MiB, more "
                                         r"than the memory budget of 1\.0 MiB \(WPSIM_MEMORY_BUDGET=1M; .* spread "):
        builder.finalize(device="cpu")
    monkeypatch.setenv(limits.BUDGET_VARIABLE, "lots")
    with pytest.raises(ValueError, match="WPSIM_MEMORY_BUDGET='lots': expected a size in bytes"):
        builder.finalize(device="cpu")


def test_candidate_pairs_of_100000_shapes_in_one_world_are_refused():
    with pytest.raises(ValueError, match=r"100,000 collision shapes .* make 10,000,000,000 candidate contact pairs; "
                                         r"at most 2,147,483,647 \(MAX_CANDIDATE_PAIRS\)"):
        rigid_builder.check_candidate_pairs(np.zeros(100_000, dtype=np.int64), np.arange(100_000))
    budget, source = limits.memory_budget()
    assert 0 < budget and "of" in source


def test_static_shapes_pair_with_body_shapes_only(monkeypatch):
    """Two static shapes never touch: they are neither listed nor counted (they were, 301^2
    pairs, 5.5 MiB, refused here), and the count is exactly the listing's length."""
    builder = spheres(1)
    for i in range(300):
        builder.add_shape_sphere(-1, pos=(0.3 * i, 1.0, 0.1), radius=0.1)
    monkeypatch.setenv(limits.BUDGET_VARIABLE, "1M")
    assert builder.finalize(device="cpu").contact_pair_count == 300
    rng = np.random.default_rng(3)
    for _ in range(20):
        world, body = rng.integers(-1, 4, size=40), rng.integers(-1, 3, size=40)
        listed = len(rigid_builder.world_pairs(world, body))
        monkeypatch.setattr(rigid_builder, "MAX_CANDIDATE_PAIRS", listed)
        rigid_builder.check_candidate_pairs(world, body)
        monkeypatch.setattr(rigid_builder, "MAX_CANDIDATE_PAIRS", listed - 1)
        with pytest.raises(ValueError, match=f"make {listed:,} candidate contact pairs"):
            rigid_builder.check_candidate_pairs(world, body)


def test_a_10000_link_chain_is_refused_up_front_with_the_reason(tmp_path):
    builder, scene = import_urdf(chain_urdf(tmp_path / "chain.urdf", 10_000))  # was 11 s (quadratic), now linear
    model = builder.finalize(device="cpu")  # was 32 s (quadratic root search), now under a second
    assert model.max_articulation_dofs == 9_999
    with pytest.raises(ValueError, match=r"articulation 0 \(root body 0\) has 9,999 dofs, more than the 2,048 a solver "
                                         r"steps \(MAX_ARTICULATION_DOFS\): its dense mass matrix takes 762\.8 MiB per "
                                         r"world with its factor and a step about 1\.7e\+11 multiply-adds"):
        SemiImplicitSolver(model)  # was accepted: 1.6 GB of scratch, then minutes per step


def test_the_articulation_limit_is_the_module_constant(tmp_path, monkeypatch):
    model = import_urdf(chain_urdf(tmp_path / "chain.urdf", 12))[0].finalize(device="cpu")
    monkeypatch.setattr(articulation_size, "MAX_ARTICULATION_DOFS", 10)
    with pytest.raises(ValueError, match="has 11 dofs, more than the 10 a solver steps"):
        SemiImplicitSolver(model)
    monkeypatch.setattr(articulation_size, "MAX_ARTICULATION_DOFS", 11)
    solver, state = SemiImplicitSolver(model), model.state()
    solver.step(state, model.state(), None, 1e-3)


def test_a_soft_contact_solver_refuses_a_too_large_articulation_before_its_dense_solve(tmp_path, monkeypatch):
    """The soft-constraint solve factors a dense Hessian per island (an articulation, or in the
    staged schedule articulations that touch): the articulation limit holds for it too, checked
    before the contact solve's scratch is built."""
    from wpsim.solvers import SoftContactOptions, semi_implicit

    model = import_urdf(chain_urdf(tmp_path / "chain.urdf", 12))[0].finalize(device="cpu")
    monkeypatch.setattr(articulation_size, "MAX_ARTICULATION_DOFS", 10)

    def never(*args):
        raise AssertionError("the soft-contact solve was built")

    built = semi_implicit.SoftContact
    monkeypatch.setattr(semi_implicit, "SoftContact", never)
    with pytest.raises(ValueError, match="has 11 dofs, more than the 10 a solver steps"):
        SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    monkeypatch.setattr(semi_implicit, "SoftContact", built)
    monkeypatch.setattr(articulation_size, "MAX_ARTICULATION_DOFS", 11)
    assert SemiImplicitSolver(model, soft_contact=SoftContactOptions()).soft_contact.largest_island == 11


def test_csv_field_longer_than_the_csv_limit_is_one_line_naming_file_and_line(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("time,q:a\n0,1\n0.1," + "1" * 200_000 + "\n")  # was a csv.Error traceback
    with pytest.raises(MeasurementError, match=r"long\.csv, line 3: not a CSV row of numbers \(field larger than"):
        load_trajectory(path)


def test_csv_rows_beyond_the_sample_limit_are_refused_while_reading(tmp_path, monkeypatch):
    path = tmp_path / "rows.csv"
    path.write_text("time,q:a\n" + "".join(f"{0.001 * k},{k}\n" for k in range(1000)))
    monkeypatch.setattr(measurements, "MAX_SAMPLES", 100)  # stands for 10 million rows (was a MemoryError)
    with pytest.raises(MeasurementError, match=r"rows\.csv, line 102: more than 100 samples \(MAX_SAMPLES"):
        load_trajectory(path)


def test_npz_member_that_is_not_npy_is_one_line(tmp_path):
    path = tmp_path / "other.npz"
    with zipfile.ZipFile(path, "w") as archive:  # was AttributeError: 'bytes' object has no attribute 'ndim'
        archive.writestr("time", b"0 0.1 0.2")
        archive.writestr("q:a.npy", b"")
    with pytest.raises(MeasurementError, match=r"other\.npz: member 'time' is not a \.npy array"):
        load_trajectory(path)


def test_npz_arrays_are_sized_from_their_headers_before_decompressing(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.npz"  # 16 MB of zeros in a few kB: accepted and decompressed before
    np.savez_compressed(bomb, time=np.zeros(2_000_000), **{"q:a": np.zeros(2)})
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**10,)})
    liar = tmp_path / "liar.npz"  # a header promising 80 GB in a few bytes
    with zipfile.ZipFile(liar, "w") as archive:
        archive.writestr("time.npy", header.getvalue() + bytes(64))

    def never(*args, **kwargs):
        raise AssertionError("an array was decompressed")

    monkeypatch.setattr(np.lib.format, "read_array", never)
    for path in (bomb, liar):
        with pytest.raises(MeasurementError, match=rf"{path.stem}\.npz, array 'time': more than 1,000,000 samples"):
            load_trajectory(path)
    small = tmp_path / "small.npz"
    np.savez(small, time=np.arange(1000.0), **{"q:a": np.zeros(1000)})
    monkeypatch.setenv(limits.BUDGET_VARIABLE, "1K")
    with pytest.raises(MeasurementError, match=r"small\.npz: 1,000 samples of 2 columns needs about 31\.2 KiB, more "
                                               r"than the memory budget of 1\.0 KiB"):
        load_trajectory(small)


def test_run_refuses_a_file_time_step_beyond_the_limit_in_one_line(tmp_path, capsys):
    scene = tmp_path / "slow.xml"
    scene.write_text('<mujoco><option timestep="1e308"/><worldbody><body><joint type="hinge"/>'
                     '<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')
    code = main(["run", str(scene), "--steps", "10", "--out", str(tmp_path / "out.usda")])  # was an OverflowError
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1] == (f"wpsim run: error: {scene}: the file's time step 1e+308 s is longer than 1 s; "
                                       "pass --dt")
    assert "Traceback" not in "\n".join(lines) and not (tmp_path / "out.usda").exists()
