"""The ``wpsim`` console script: gradcheck, demo, bench, run and build-kernels, as a user runs them."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WPSIM = [sys.executable, "-m", "wpsim.apps.cli"]
ASSETS = Path(__file__).resolve().parents[1] / "assets"


def run(args, **kw):
    return subprocess.run(WPSIM + args, capture_output=True, text=True, timeout=600, **kw)


def test_gradcheck_json_every_family_passes():
    proc = run(["gradcheck", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    assert {tuple(sorted(r)) for r in rows} == {("family", "ok", "param", "rel_error", "solver")}
    assert {r["solver"] for r in rows} == {"semi-implicit", "implicit Euler", "soft contact", "smoothed contact",
                                           "soft contact, impedance curve"}
    families = {r["family"] for r in rows}
    assert {"particle", "spring", "cloth membrane", "cloth bending", "soft body", "tet activation",
            "ground contact", "shape contact", "particle contact", "rigid body", "joint", "joint drive",
            "rigid contact", "rigid mesh contact", "particle-body contact", "soft contact"} <= families
    assert all(r["ok"] and r["rel_error"] <= 1e-4 for r in rows), [r for r in rows if not r["ok"]]


def test_demo_calibrates_the_finger_and_writes_its_outputs(tmp_path):
    proc = run(["demo", "--iterations", "2", "--out", str(tmp_path)])
    # two iterations are too few for the targets: the exit status says so
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    report = json.loads((tmp_path / "calibration.json").read_text())
    assert set(report["parameters"]) == {"young_modulus", "poisson_ratio", "damping", "gain"}
    assert report["fit"]["loss"] < report["fit"]["loss_initial"]
    assert report["rms_marker_error_mm"]["after"] < report["rms_marker_error_mm"]["before"]
    for name in ("calibration.png", "history.png", "calibration.usd", "calibration.gif"):
        assert (tmp_path / name).stat().st_size > 1000
    for line in ("young_modulus", "Pa", "marker RMS error"):
        assert line in proc.stdout
    assert not list(tmp_path.glob(".*")), "temporary files left behind"
    from pxr import Usd

    stage = Usd.Stage.Open(str(tmp_path / "calibration.usd"))
    variant_set = stage.GetPrimAtPath("/World").GetVariantSets().GetVariantSet("iteration")
    assert variant_set.GetVariantNames() == ["fitted", "initial"]
    for take in ("initial", "fitted"):  # the measured markers and this take's simulated ones
        variant_set.SetVariantSelection(take)
        for markers in ("measured", "simulated"):
            points = stage.GetPrimAtPath(f"/World/markers/{markers}").GetAttribute("points")
            assert points.GetNumTimeSamples() == stage.GetEndTimeCode() + 1
            assert len(points.Get(0)) == 6


def test_throw_demo_writes_its_outputs(tmp_path):
    proc = run(["demo", "--task", "throw", "--iterations", "3", "--out", str(tmp_path)])
    # three iterations are too few for the 100x target: the exit status says so
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["losses_m2"][-1] < result["losses_m2"][0]
    assert (proc.returncode == 0) == (result["loss_reduction"] >= 100.0)
    for name in ("loss.png", "trajectory.png", "rollout.usd"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "loss" in proc.stdout and "m^2" in proc.stdout
    assert not list(tmp_path.glob(".*")), "temporary files left behind"
    from pxr import Usd

    accepted = int(re.search(r"the throw after each of the (\d+) accepted steps", proc.stdout).group(1))
    stage = Usd.Stage.Open(str(tmp_path / "rollout.usd"))
    variants = stage.GetPrimAtPath("/World").GetVariantSets().GetVariantSet("iteration").GetVariantNames()
    assert len(variants) == (accepted if accepted > 1 else 0)  # one take is written without a variant set
    target = stage.GetPrimAtPath("/World/markers/target").GetAttribute("points").Get()
    assert [round(v, 6) for v in target[0]] == [round(v, 6) for v in result["target_m"]]


def test_bench_quick_json():
    proc = run(["bench", "--quick", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads(proc.stdout)
    assert records and all(set(r) == {"suite", "case", "params", "metric", "value"} for r in records)
    assert {r["metric"] for r in records} >= {"steps_per_s", "backward_over_forward", "world_steps_per_s"}


@pytest.mark.parametrize("args", [["--help"], ["demo", "--help"], ["bench", "--help"]])
def test_help(args):
    proc = run(args)
    assert proc.returncode == 0 and "usage: wpsim" in proc.stdout


def test_run_drops_a_mesh_file_and_writes_usd(tmp_path):
    from pxr import Usd, UsdGeom

    out = tmp_path / "finger.usda"
    proc = run(["run", str(ASSETS / "soft_finger.obj"), "--cell", "0.004", "--steps", "400", "--fps", "100",
                "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "984 tets of 4.0 mm cells" in proc.stdout and "frames" in proc.stdout
    stage = Usd.Stage.Open(str(out))
    soft = UsdGeom.Mesh(stage.GetPrimAtPath("/World/world_0/soft"))
    assert soft.GetPointsAttr().GetTimeSamples() == [float(k) for k in range(5)]  # t = 0, 10 ms, ... 40 ms
    assert stage.GetPrimAtPath("/World/shapes/shape_0").GetTypeName() == "Plane"


@pytest.mark.parametrize("args", [["assets/quadruped.xml", "--steps", "2000", "--out", "quadruped.usd"],
                                  ["assets/soft_finger.obj", "--cell", "0.004", "--out", "finger.usd"]])
def test_readme_run_commands_succeed(tmp_path, args):
    """The README's two ``wpsim run`` commands, as written (assets from the repository)."""
    args = [str(ASSETS.parent / a) if a.startswith("assets/") else str(tmp_path / a) if a.endswith(".usd") else a
            for a in args]
    proc = run(["run", *args])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Path(args[-1]).stat().st_size > 0 and "wrote" in proc.stdout


def test_run_renders_a_video_and_checks_its_outputs_before_simulating(tmp_path):
    from PIL import Image

    video = tmp_path / "clip.gif"
    proc = run(["run", str(ASSETS / "soft_finger.obj"), "--cell", "0.004", "--steps", "300", "--fps", "100",
                "--out", str(tmp_path / "finger.usd"), "--video", str(video)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    with Image.open(video) as opened:
        assert opened.n_frames == 4 and opened.size == (480, 360)
    blocked = tmp_path / "file"
    blocked.write_text("")
    ok = str(tmp_path / "ok.usd")
    for option, outputs in (("--out", ["--out", str(blocked / "x.usd")]),
                            ("--video", ["--out", ok, "--video", str(blocked / "x.gif")]),
                            ("--video", ["--out", ok, "--video", str(tmp_path / "x.avi")])):
        proc = run(["run", str(ASSETS / "soft_finger.obj"), "--steps", "5", *outputs])
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and lines[-1].startswith(f"wpsim run: error: {option} "), proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "ok.usd").exists()


ROBOT_FILES = ["quadruped.xml", "quadruped.urdf", "arm_2link.xml", "arm_2link.urdf", "arm_7link.xml", "arm_7link.urdf",
               "cartpole.xml", "cartpole.urdf", "box_toss.xml"]


@pytest.mark.parametrize("name", ROBOT_FILES)
def test_every_robot_asset_runs_ten_seconds_at_its_files_time_step(tmp_path, name):
    """``wpsim run``'s robot setup (soft contact and joint limits) at the file's step."""
    from wpsim.apps.run_scene import simulate_to_usd
    from wpsim.solvers import SoftContactOptions
    from wpsim.tasks.robot_scene import robot_scene

    builder, scene = robot_scene(ASSETS / name)
    dt = scene.timestep or 1e-3
    summary = simulate_to_usd(builder, tmp_path / "rollout.usdc", int(round(10.0 / dt)), dt, fps=10.0,
                              soft_contact=SoftContactOptions())
    assert summary["frames"] == 101 and np.isfinite(summary["final_max_speed_m_per_s"])
    assert summary["final_lowest_z_m"] > -0.05  # nothing fell through the ground


@pytest.mark.parametrize("name, match", [("robot.urdf", "has no links"), ("scene.usda", "cannot be read as a USD stage"),
                                         ("scene.dae", "unsupported scene file"), ("missing.npz", "no such file")])
def test_run_rejects_what_it_cannot_import(tmp_path, name, match):
    if name.endswith((".urdf", ".usda")):
        (tmp_path / name).write_text("<robot name='r'/>")
    proc = run(["run", str(tmp_path / name), "--steps", "1", "--out", str(tmp_path / "x.usd")])
    assert proc.returncode == 2 and match in proc.stderr and "Traceback" not in proc.stderr



@pytest.mark.parametrize("arrays, extra, match", [
    ({"vertices": np.zeros((4, 2)), "tets": np.array([[0, 1, 2, 3]])}, [], "'vertices' must be"),
    ({"vertices": np.eye(4)[:, :3], "tets": np.array([[0.0, 1.0, 2.0, 3.0]])}, [], "'tets' must be"),
    ({"vertices": np.eye(4)[:, :3], "tets": np.array([[0, 1, 2, 4]])}, [], "outside"),
    ({"vertices": np.eye(4)[:, :3], "tets": np.array([[0, 1, 2, 3]])}, ["--fps", "0"], "--fps must be a finite rate > 0"),
    ({"vertices": np.eye(4)[:, :3], "tets": np.array([[0, 1, 2, 3]])}, ["--height", "-0.1"], "drop height"),
])
def test_run_checks_tet_files_and_options_first(tmp_path, arrays, extra, match):
    path = tmp_path / "mesh.npz"
    np.savez(path, **arrays)
    proc = run(["run", str(path), "--out", str(tmp_path / "x.usd"), *extra])
    assert proc.returncode == 2 and match in proc.stderr, proc.stderr[-1000:]
    assert not (tmp_path / "x.usd").exists()


def test_run_ignores_vertices_no_tet_uses(tmp_path):
    """An unused vertex far below would otherwise decide the drop height (and be a fixed particle)."""
    tets = np.load(ASSETS / "soft_finger_tets.npz")
    path = tmp_path / "finger.npz"
    np.savez(path, vertices=np.vstack([tets["vertices"], [[0.0, 0.0, -5.0]]]), tets=tets["tets"])
    out = tmp_path / "finger.usda"
    proc = run(["run", str(path), "--steps", "10", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.Open(str(out))
    assert not stage.GetPrimAtPath("/World/world_0/particles")  # no stray particle
    points = np.array(UsdGeom.Mesh(stage.GetPrimAtPath("/World/world_0/soft")).GetPointsAttr().Get(0))
    assert points[:, 2].min() == pytest.approx(0.021, abs=1e-6)  # 2 cm drop + 1 mm contact radius


def test_run_with_the_implicit_solver_at_a_large_step(tmp_path):
    out = tmp_path / "finger.usd"
    proc = run(["run", str(ASSETS / "soft_finger_tets.npz"), "--solver", "implicit", "--dt", "0.002", "--steps", "20",
                "--fps", "100", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "implicit solver: 0 of 20 steps did not converge" in proc.stdout
    assert out.stat().st_size > 0


@pytest.mark.parametrize("scene, extra", [("cartpole.xml", []), ("quadruped.urdf", ["--floating"])])
def test_run_simulates_a_robot_file(tmp_path, scene, extra):
    out = tmp_path / "robot.usda"
    path = Path(__file__).resolve().parents[1] / "assets" / scene
    proc = run(["run", str(path), "--steps", "200", "--fps", "100", "--out", str(out), *extra])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bodies" in proc.stdout and out.is_file()
    from pxr import Usd

    stage = Usd.Stage.Open(str(out))
    bodies = [p for p in stage.Traverse() if p.HasAttribute("wpsim:body")]
    assert len(bodies) == (2 if scene.startswith("cartpole") else 13)
    if scene.startswith("cartpole"):  # prims carry the file's body names
        assert [p.GetName() for p in bodies] == ["cart", "pole"]
    else:
        assert not [p for p in bodies if p.GetName().startswith("body_")]
    translate = bodies[0].GetAttribute("xformOp:translate")
    assert len(translate.GetTimeSamples()) >= 5


def test_render_draws_a_stage_that_run_wrote_and_names_bad_input(tmp_path):
    from PIL import Image

    stage = tmp_path / "finger.usd"
    proc = run(["run", str(ASSETS / "soft_finger.obj"), "--cell", "0.004", "--steps", "300", "--fps", "100",
                "--out", str(stage)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run(["render", str(stage), "--out", str(tmp_path / "finger.gif"), "--width", "64", "--height", "48",
                "--fps", "100"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "4 frames at 100 fps, 64 x 48 pixels" in proc.stdout
    with Image.open(tmp_path / "finger.gif") as opened:
        assert opened.n_frames == 4 and opened.size == (64, 48)
    (tmp_path / "garbage.usda").write_bytes(b"\x00\x01not usd")
    (tmp_path / "empty.usd").write_bytes(b"")
    for args, message in (([str(tmp_path / "missing.usd")], "missing.usd: no such file"),
                          ([str(tmp_path / "garbage.usda")], "garbage.usda: cannot be read as a USD stage"),
                          ([str(tmp_path / "empty.usd")], "empty.usd: cannot be read as a USD stage"),
                          ([str(stage), "--take", "fitted"], "has no takes"),
                          ([str(stage), "--fps", "0"], "fps must be a finite rate > 0 frames/s")):
        out = tmp_path / "bad.gif"
        proc = run(["render", *args, "--out", str(out)])
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
        assert not out.exists()


def test_every_option_has_help_and_the_version_is_printed():
    import argparse

    from wpsim import __version__
    from wpsim.apps.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {'/'.join(action.option_strings) or action.dest}"
               for name, sub in subparsers.choices.items() for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not action.help]
    assert not missing, f"options without help text: {missing}"
    without_device = [name for name, sub in subparsers.choices.items()
                  if not any(a.dest == "device" for a in sub._actions)]
    assert not without_device, f"subcommands without --device: {without_device}"
    proc = run(["--version"])
    assert proc.returncode == 0 and proc.stdout.strip() == f"wpsim {__version__}"
    assert (ASSETS.parent / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_a_blow_up_is_one_line_with_what_to_try(tmp_path):
    out = tmp_path / "quadruped.usd"
    # penalty contact at 20 ms steps (the file's 2,000 steps at 2.5 ms blew up only while limits were explicit)
    proc = run(["run", str(ASSETS / "quadruped.xml"), "--contact", "penalty", "--dt", "0.02", "--steps", "500", "--out",
                str(out)])
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert last.startswith("wpsim run: simulation failed: world 0 blew up at step ") and "--contact soft" in last
    assert re.search(r"worst: body '\w+' \(\d+\) at \[.*\] m moving \S+ m/s", last), last  # the file's body name
    assert not out.exists()


def test_the_mesher_cell_defaults_from_the_mesh_and_bad_meshes_are_warned(tmp_path):
    default = run(["run", str(ASSETS / "icosphere.stl"), "--steps", "2", "--out", str(tmp_path / "a.usd")])
    assert default.returncode == 0, default.stderr[-2000:]
    tets = int(default.stdout.split("icosphere.stl: ")[1].split(" tets")[0])
    assert tets <= 20_000 and "wpsim run: warning" not in default.stderr
    coarse = run(["run", str(ASSETS / "icosphere.stl"), "--cell", "0.0167", "--steps", "2", "--out",
                  str(tmp_path / "b.usd")])
    assert coarse.returncode == 0 and "wpsim run: warning: the tet mesh's volume is -19 % off" in coarse.stderr


@pytest.mark.parametrize("fps, dt", [(60.0, 2e-3), (25.0, 3e-3), (1000.0, 2e-3)])
def test_recorded_frames_are_at_exactly_the_asked_rate(tmp_path, fps, dt):
    """Frame j of the stage is the state of the step nearest to j / fps (a falling
    particle's semi-implicit height there); an fps above 1 / dt records every step."""
    from pxr import Usd, UsdGeom

    import wpsim
    from wpsim.apps.run_scene import simulate_to_usd

    builder = wpsim.ModelBuilder()
    builder.add_particle((0.0, 0.0, 10.0), mass=1.0, radius=0.01)
    steps = int(round(1.2 / dt))
    summary = simulate_to_usd(builder, tmp_path / "fall.usda", steps, dt, fps=fps)
    rate = min(fps, 1.0 / dt)
    stage = Usd.Stage.Open(str(tmp_path / "fall.usda"))
    assert stage.GetTimeCodesPerSecond() == pytest.approx(rate, rel=1e-12)
    assert summary["frames"] == int(np.floor(1.2 * rate + 1e-9)) + 1
    points = UsdGeom.Points(stage.GetPrimAtPath("/World/world_0/particles")).GetPointsAttr()
    g = 9.81
    for j in (1, 7, summary["frames"] - 1):
        k = int(round(j / (rate * dt)))
        assert abs(k * dt - j / rate) <= dt / 2 + 1e-12
        height = 10.0 - g * dt * dt * k * (k + 1) / 2.0  # symplectic Euler after k steps from rest
        assert points.Get(j)[0][2] == pytest.approx(height, abs=1e-5)


def _damaged_files(tmp_path) -> list:
    """(path, what) of empty, binary-garbage and truncated files of every type wpsim run reads."""
    rng = np.random.default_rng(3)
    garbage = rng.integers(0, 256, 400, dtype=np.uint8).tobytes()
    originals = {".obj": "cube.obj", ".stl": "icosphere.stl", ".ply": "cylinder.ply", ".npz": "soft_finger_tets.npz",
                 ".xml": "cartpole.xml", ".urdf": "cartpole.urdf", ".usda": None, ".usd": None}
    files = []
    for suffix, original in originals.items():
        contents = {"empty": b"", "garbage": garbage}
        if original is not None:
            data = (ASSETS / original).read_bytes()
            contents["truncated"] = data[: len(data) // 2]
        for what, content in contents.items():
            path = tmp_path / f"{what}{suffix}"
            path.write_bytes(content)
            files.append((path, what))
    return files


def test_run_names_every_damaged_file_in_one_line(tmp_path, capsys):
    """Empty, garbage and truncated scene files of every supported type: exit status 2, one
    line naming the file, no traceback (in process: nothing may escape main), no output."""
    from wpsim.apps.cli import main

    failures = []
    for path, what in _damaged_files(tmp_path):
        out = tmp_path / "out.usd"
        status = main(["run", str(path), "--steps", "2", "--out", str(out)])
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        if status != 2 or len(lines) != 1 or path.name not in lines[0] or "pxrInternal" in lines[0] \
                or "pickle" in lines[0] or out.exists():
            failures.append((path.name, status, lines))
    assert not failures, failures


def test_a_mesh_with_a_non_utf8_comment_loads(tmp_path):
    from wpsim.apps.cli import main

    text = (ASSETS / "cube.obj").read_bytes()
    path = tmp_path / "latin1.obj"
    path.write_bytes(b"# caf\xe9 cr\xe8me\n" + text)
    assert main(["run", str(path), "--steps", "2", "--cell", "0.025", "--out", str(tmp_path / "cube.usd")]) == 0
    assert (tmp_path / "cube.usd").stat().st_size > 0


@pytest.mark.parametrize("option, value", [("--dt", "0"), ("--dt", "-0.001"), ("--dt", "inf"), ("--dt", "nan"),
                                           ("--fps", "inf"), ("--fps", "0"), ("--steps", "0")])
def test_run_names_a_bad_number_option(tmp_path, capsys, option, value):
    from wpsim.apps.cli import main

    out = tmp_path / "x.usd"
    assert main(["run", str(ASSETS / "cartpole.xml"), f"{option}={value}", "--out", str(out)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"wpsim run: error: {option} must be") and value in lines[0]
    assert not out.exists()


def test_run_strain_smoothing_reaches_the_soft_body(tmp_path):
    """--strain-smoothing builds the tets with face domains, and changes how the body deforms
    once it lands (0.15 s at the default 0.1 ms step; it lands after about 0.065 s)."""
    from wpsim.apps.run_scene import SoftSceneOptions, soft_scene

    mesh = ASSETS / "soft_finger_tets.npz"
    assert soft_scene(mesh, SoftSceneOptions(strain_smoothing=True))[0].finalize().domain_count > 0
    assert soft_scene(mesh, SoftSceneOptions())[0].finalize().domain_count == 0
    from pxr import Usd, UsdGeom

    ends = []
    for flags in ([], ["--strain-smoothing"]):
        out = tmp_path / f"finger{len(flags)}.usda"
        proc = run(["run", str(mesh), "--steps", "1500", "--fps", "100", "--young", "2e4", "--out", str(out), *flags])
        assert proc.returncode == 0, proc.stderr[-2000:]
        stage = Usd.Stage.Open(str(out))
        ends.append(np.array(UsdGeom.Mesh(stage.GetPrimAtPath("/World/world_0/soft")).GetPointsAttr().Get(
            stage.GetEndTimeCode())))
    assert np.isfinite(ends[1]).all() and np.abs(ends[1] - ends[0]).max() > 1e-5


def test_build_kernels_writes_cuda_binaries_without_a_gpu(tmp_path):
    """``--arch`` compiles with the NVRTC inside Warp: sm_90 binaries into the kernel cache that
    ``WARP_CACHE_PATH`` names, on a machine without a GPU."""
    env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path)}
    proc = run(["build-kernels", "--arch", "90", "--module", "wpsim.kernels.markers", "--processes", "1"], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wpsim.kernels.markers" in proc.stdout and "built in" in proc.stdout
    binaries = list(tmp_path.rglob("wp_wpsim.kernels.markers_*.sm90.cubin"))
    assert len(binaries) == 1 and binaries[0].stat().st_size > 1000


def test_build_kernels_knows_the_modules_the_package_imports_lazily():
    """build-kernels (and the suite's prebuild) covers every kernel module of ``wpsim.kernels``:
    the soft-contact Newton and fused-step modules and the impact kernels, which the package
    does not import, were missed, so their first step compiled them."""
    from wpsim.apps.build_kernels import kernel_modules

    modules = kernel_modules()
    for name in ("soft_contact_step", "soft_contact_newton", "impacts", "soft_contact", "articulation"):
        assert f"wpsim.kernels.{name}" in modules


def test_build_kernels_refuses_an_unknown_module_or_arch():
    proc = run(["build-kernels", "--module", "wpsim.kernels.no_such_module"])
    assert proc.returncode == 2 and "wpsim.kernels.no_such_module" in proc.stderr
    proc = run(["build-kernels", "--arch", "9"])
    assert proc.returncode == 2 and "compute capability" in proc.stderr


def test_run_prints_cells_through_the_thinnest_section_and_warns_below_the_studys_count(tmp_path, capsys):
    """A 0.2 x 0.05 x 0.01 m slab: with the default linear tets and a 5 mm cell, 2 cells span its
    thickness, below what linear tets need in bending (a warning naming --order 2); quadratic
    tets (--order 2) need one, so no warning; robot files refuse the soft-body flags."""
    import trimesh

    from wpsim.apps.cli import main
    from wpsim.apps.run_scene import BENDING_CELLS
    from wpsim.core.meshing import cells_through_thinnest

    slab = tmp_path / "slab.obj"
    trimesh.creation.box(extents=(0.2, 0.05, 0.01)).export(slab)
    out = tmp_path / "slab.usda"
    for flags, warned in (([], True), (["--order", "2"], False)):
        assert main(["run", str(slab), "--cell", "0.005", "--steps", "2", *flags, "--out", str(out)]) == 0
        captured = capsys.readouterr()
        line = next(line for line in captured.out.splitlines() if "cells through the thinnest section" in line)
        kind = "quadratic tets" if flags else "linear tets"
        assert f"({kind})" in line and float(line.split(": ")[1].split()[0]) == pytest.approx(2.0, rel=0.1)
        assert ("--order 2" in captured.err and "bend more than 10 %" in captured.err) is warned
    assert BENDING_CELLS["quadratic tets"] <= 2 < BENDING_CELLS["linear tets"]
    cube = trimesh.creation.box(extents=(0.1, 0.1, 0.1)).vertices
    tets = np.array([[0, 1, 2, 4]])  # one corner tet of a unit-cell-like layout: volume 1/6 of its box
    assert cells_through_thinnest(cube, tets) == pytest.approx(1.0, rel=1e-9)
    assert main(["run", str(ASSETS / "cartpole.xml"), "--order", "2", "--out", str(tmp_path / "r.usd")]) == 2
    assert "--order applies to soft bodies" in capsys.readouterr().err
    assert main(["run", str(slab), "--order", "2", "--strain-smoothing", "--out", str(out)]) == 2
    assert "--strain-smoothing is for linear tets" in capsys.readouterr().err
