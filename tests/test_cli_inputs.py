"""No output of the command line replaces a file a scene reads (issue 45 item 2): MJCF
includes and meshes, URDF meshes, USD sublayers and assets count as inputs of ``wpsim run``,
``render`` and ``sysid``, not only the files named on the command line."""

import hashlib
import shutil
from pathlib import Path

import pytest

from wpsim.apps.cli import main
from wpsim.apps.scene_inputs import files_read, scene_inputs

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def cli(capsys, *args) -> tuple:
    """(exit status, stderr lines) of ``wpsim ARGS`` in this process."""
    status = main([str(a) for a in args])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def mjcf_scene(tmp_path) -> Path:
    """scene.xml with a mesh (cube.obj), an include named like a USD stage (part.usda) and one
    named like a sysid output (calibrated.usda)."""
    shutil.copy(ASSETS / "cube.obj", tmp_path / "cube.obj")
    (tmp_path / "part.usda").write_text('<mujoco><worldbody><geom type="plane" size="1 1 1"/></worldbody></mujoco>')
    (tmp_path / "calibrated.usda").write_text('<mujoco><option timestep="0.002"/></mujoco>')
    scene = tmp_path / "scene.xml"
    scene.write_text('<mujoco><asset><mesh name="m" file="cube.obj" scale="0.1 0.1 0.1"/></asset>'
                     '<include file="part.usda"/><include file="calibrated.usda"/>'
                     '<worldbody><body name="b" pos="0 0 1">'
                     '<joint name="h" type="hinge"/><geom type="mesh" mesh="m"/></body></worldbody>'
                     '<actuator><motor name="m" joint="h"/></actuator></mujoco>')
    return scene


def test_the_files_an_mjcf_scene_reads_are_found(mjcf_scene):
    found = scene_inputs(mjcf_scene)
    folder = mjcf_scene.parent
    assert found[0] == mjcf_scene and {folder / n for n in ("cube.obj", "part.usda", "calibrated.usda")} <= set(found)
    assert len(found) == len(set(found))
    with files_read() as read:
        pass
    assert read == []


def test_run_and_sysid_refuse_to_overwrite_an_included_file(capsys, mjcf_scene):
    folder = mjcf_scene.parent
    before = digests(folder)
    status, lines = cli(capsys, "run", mjcf_scene, "--steps", "2", "--out", folder / "part.usda")
    assert status == 2 and lines == [f"wpsim run: error: --out {folder / 'part.usda'}: would overwrite the input "
                                     f"{folder / 'part.usda'}"], lines
    status, lines = cli(capsys, "sysid", mjcf_scene, ASSETS / "arm_2link_sysid.csv", "--out", folder)
    assert status == 2 and len(lines) == 1 and f"would overwrite the input {folder / 'calibrated.usda'}" in lines[0]
    assert digests(folder) == before


def test_run_and_render_refuse_to_overwrite_a_usd_sublayer_or_asset(capsys, tmp_path):
    from wpsim.io.mjcf import import_mjcf
    from wpsim.io.usd_physics import export_physics

    export_physics(import_mjcf(ASSETS / "arm_2link.xml")[0].finalize(device="cpu"), tmp_path / "robot.usda",
                   timestep=1e-3)
    (tmp_path / "tex.png").write_bytes(b"\x89PNG not really")
    stage = tmp_path / "stage.usda"
    stage.write_text('#usda 1.0\n(\n    subLayers = [@robot.usda@]\n)\n'
                     'def Xform "Extra"\n{\n    asset tex = @tex.png@\n}\n')
    assert set(scene_inputs(stage)) == {stage, tmp_path / "robot.usda", tmp_path / "tex.png"}
    before = digests(tmp_path)
    status, lines = cli(capsys, "run", stage, "--steps", "2", "--out", tmp_path / "robot.usda")
    assert status == 2 and len(lines) == 1 and f"would overwrite the input {tmp_path / 'robot.usda'}" in lines[0]
    status, lines = cli(capsys, "render", stage, "--out", tmp_path / "tex.png")
    assert status == 2 and len(lines) == 1 and f"would overwrite the input {tmp_path / 'tex.png'}" in lines[0]
    assert digests(tmp_path) == before


def test_a_frames_folder_that_holds_an_input_is_refused(capsys, tmp_path, mjcf_scene):
    from wpsim.apps.run_scene import check_outputs

    frames = tmp_path / "frames"
    stage = frames / "out" / "rollout.usda"
    stage.parent.mkdir(parents=True)
    stage.write_text("#usda 1.0\n")
    status, lines = cli(capsys, "render", stage, "--out", frames)  # was: frames written beside the stage
    assert status == 2 and lines == [f"wpsim render: error: --out {frames}: the frames folder holds the input "
                                     f"{stage}; write the frames elsewhere"], lines
    before = digests(tmp_path)
    status, lines = cli(capsys, "run", mjcf_scene, "--steps", "2", "--out", frames / "run.usda", "--video", tmp_path)
    assert status == 2 and len(lines) == 1 and f"--video {tmp_path}: the frames folder holds the input" in lines[0]
    assert digests(tmp_path) == before and not (frames / "run.usda").exists()
    check_outputs("--out", frames / "ou", [stage])  # a name that only begins like the folder is not it
    check_outputs("--out", frames / "out.gif", [stage])  # a file beside the input's folder is no frames folder
