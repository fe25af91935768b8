"""``wpsim run`` for robots: actuators driven by ``--control none|hold|sine|FILE``, start poses
from ``--q0`` and MJCF keyframes, the joint summary line, and one-line errors for bad input.

Joint angles are read back from the written USD stage (body orientations, parent to child),
so every check sees what a viewer would show."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wpsim.apps.cli import main

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARM = ASSETS / "arm_7link.xml"
JOINTS = [f"link{i}_joint" for i in range(1, 8)]
AXES = np.array([(1.0, 0.0, 0.0) if i % 2 == 0 else (0.0, 1.0, 0.0) for i in range(7)])  # hinge axes of arm_7link
BENT = {"link2_joint": 0.8, "link4_joint": -0.6, "link6_joint": 0.5}
"""A start pose in which gravity pulls the arm down (rad)."""
BENT_ANGLES = np.array([BENT.get(name, 0.0) for name in JOINTS])


def q0_option(pose: dict) -> str:
    return ",".join(f"{name}={value}" for name, value in pose.items())


def wpsim_run(capsys, *args) -> tuple:
    """(exit status, stdout, stderr) of ``wpsim run ARGS`` in this process."""
    status = main(["run", *[str(a) for a in args]])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def arm_with_keys(tmp_path, keys: str) -> Path:
    """arm_7link.xml with a ``<keyframe>`` holding ``keys`` (XML of ``<key>`` elements)."""
    path = tmp_path / "arm_keys.xml"
    path.write_text(ARM.read_text().replace("</mujoco>", f"<keyframe>{keys}</keyframe></mujoco>"))
    return path


def body_poses(stage_path) -> tuple:
    """(positions (F, B, 3) m, rotations (F,) lists of scipy Rotations) of the bodies
    link1..link7 in every frame of a stage."""
    from pxr import Usd
    from scipy.spatial.transform import Rotation

    stage = Usd.Stage.Open(str(stage_path))
    prims = {p.GetName(): p for p in stage.Traverse() if p.HasAttribute("wpsim:body")}
    links = [prims[f"link{i}"] for i in range(1, 8)]
    frames = int(stage.GetEndTimeCode()) + 1
    positions = np.zeros((frames, 7, 3))
    quats = np.zeros((frames, 7, 4))
    for b, prim in enumerate(links):
        translate, orient = prim.GetAttribute("xformOp:translate"), prim.GetAttribute("xformOp:orient")
        for k in range(frames):
            positions[k, b] = translate.Get(k)
            q = orient.Get(k)
            quats[k, b] = (*q.GetImaginary(), q.GetReal())
    return positions, Rotation.from_quat(quats.reshape(-1, 4)).as_matrix().reshape(frames, 7, 3, 3)


def joint_angles(stage_path) -> np.ndarray:
    """(F, 7) hinge angles (rad) of arm_7link in every frame, from its bodies' orientations."""
    from scipy.spatial.transform import Rotation

    _, rotations = body_poses(stage_path)
    parent = np.concatenate([np.broadcast_to(np.eye(3), (len(rotations), 1, 3, 3)), rotations[:, :-1]], axis=1)
    relative = np.einsum("fbji,fbjk->fbik", parent, rotations)
    rotvec = Rotation.from_matrix(relative.reshape(-1, 3, 3)).as_rotvec().reshape(-1, 7, 3)
    return np.einsum("fbi,bi->fb", rotvec, AXES)


def summary_value(out: str, label: str) -> float:
    """The number after ``label`` in the joint summary line."""
    line = next(line for line in out.splitlines() if line.startswith("joints over the recorded frames"))
    return float(line.split(label, 1)[1].split()[0])


# ---------------------------------------------------------------------------- hold and none
def test_hold_keeps_the_bent_arm_within_5_mrad_of_its_start_for_two_seconds(tmp_path, capsys):
    """From a bent keyframe pose with a velocity kick (so the PD must act, not only the
    holding torque), 2 s at the file's 1 ms step; the passive arm from there falls away."""
    pose = "0 0.8 0 -0.6 0 0.5 0"
    arm = arm_with_keys(tmp_path, f'<key name="bent" qpos="{pose}" qvel="0 0 -0.5 0 0 0 1"/>')
    start = np.array([float(v) for v in pose.split()])
    status, out, err = wpsim_run(capsys, arm, "--steps", 2000, "--fps", 50, "--out", tmp_path / "hold.usd")
    assert status == 0, err
    assert 'start pose: <key name="bent">' in out and "control: hold the start pose" in out  # hold is the default
    angles = joint_angles(tmp_path / "hold.usd")
    assert len(angles) == 101 and np.abs(angles[0] - start).max() < 1e-9
    assert np.abs(angles - start).max() < 5e-3  # rad, over every frame of the 2 s
    assert np.abs(angles[-1] - start).max() < 1e-4  # settled back
    assert summary_value(out, "final hold error |q - q0|") == pytest.approx(np.abs(angles[-1] - start).max(), abs=1e-6)

    status, out, err = wpsim_run(capsys, arm, "--control", "none", "--steps", 2000, "--fps", 50, "--out",
                                 tmp_path / "none.usd")
    assert status == 0, err
    assert np.abs(joint_angles(tmp_path / "none.usd") - start).max() > 0.3


def test_hold_with_stated_gains_and_the_start_pose_torque(tmp_path, capsys):
    """``--kp/--kd`` replace the derived gains: a softer PD lets the kicked arm stray further
    but still holds it (the holding torque carries gravity)."""
    arm = arm_with_keys(tmp_path, '<key qpos="0 0.8 0 -0.6 0 0.5 0" qvel="0 0 -0.5 0 0 0 1"/>')
    status, out, err = wpsim_run(capsys, arm, "--kp", 20, "--kd", 0.2, "--steps", 1000, "--fps", 50, "--out",
                                 tmp_path / "soft.usd")
    assert status == 0, err
    assert "motor PD (kp 20, kd 0.2)" in out
    deviation = np.abs(joint_angles(tmp_path / "soft.usd") - BENT_ANGLES).max(axis=1)
    assert 5e-3 < deviation.max() < 0.05 and deviation[-1] < deviation.max()


# ---------------------------------------------------------------------------- sine
def test_sine_sweeps_every_joint_around_the_start_pose(tmp_path, capsys):
    amplitude, frequency = 0.3, 1.0
    status, out, err = wpsim_run(capsys, ARM, "--q0", q0_option(BENT), "--control", "sine", "--amplitude", amplitude,
                                 "--frequency", frequency, "--steps", 2000, "--fps", 100, "--out",
                                 tmp_path / "sine.usd")
    assert status == 0, err
    angles = joint_angles(tmp_path / "sine.usd")
    t = np.arange(len(angles)) / 100.0
    speeds = np.abs(np.diff(angles, axis=0)) * 100.0  # rad/s between frames
    assert (speeds.max(axis=0) > 1.5).all()  # every joint; the reference peaks at 2 pi f A = 1.88 rad/s
    assert (np.ptp(angles, axis=0) > 0.5).all()
    reference = BENT_ANGLES + amplitude * np.sin(2 * np.pi * frequency * t)[:, None]
    assert np.abs(angles - reference)[t >= 0.2].max() < 0.03  # tracked once the start transient is over
    assert summary_value(out, "largest speed") > 1.5


# ---------------------------------------------------------------------------- start poses
def _fk_positions(pose: dict) -> np.ndarray:
    """Body origins (7, 3) m of arm_7link at ``pose``, by the library's forward kinematics."""
    import warp as wp

    from wpsim.solvers import eval_fk
    from wpsim.tasks.robot_scene import apply_start_pose, robot_scene

    builder, scene = robot_scene(ARM)
    apply_start_pose(builder, scene, ARM, q0_option(pose) if pose else None)
    model = builder.finalize(device="cpu", dtype=wp.float64)
    return eval_fk(model, model.state()).body_q.numpy()[:, :3]


def test_q0_sets_the_first_frame(tmp_path, capsys):
    pose = {"link1_joint": -0.4, "link3_joint": 1.2, "link7_joint": 0.25}
    status, _, err = wpsim_run(capsys, ARM, "--q0", q0_option(pose), "--control", "none", "--steps", 1, "--out",
                               tmp_path / "q0.usd")
    assert status == 0, err
    angles = joint_angles(tmp_path / "q0.usd")[0]
    np.testing.assert_allclose(angles, [pose.get(name, 0.0) for name in JOINTS], atol=1e-9)
    positions, _ = body_poses(tmp_path / "q0.usd")
    np.testing.assert_allclose(positions[0], _fk_positions(pose), atol=1e-9)
    assert not np.allclose(positions[0], _fk_positions({}), atol=1e-3)


def test_keyframes_set_the_pose_and_q0_overrides_them(tmp_path, capsys):
    arm = arm_with_keys(tmp_path, '<key name="first" qpos="0.1 0.2 0.3 0.4 0.5 0.6 0.7"/>'
                                  '<key name="second" qpos="-0.1 0 0 0 0 0 -0.2"/>')
    expected = {None: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "second": [-0.1, 0, 0, 0, 0, 0, -0.2]}
    for key, angles in expected.items():
        extra = [] if key is None else ["--key", key]
        status, out, err = wpsim_run(capsys, arm, *extra, "--steps", 1, "--out", tmp_path / "key.usd")
        assert status == 0, err
        assert f'<key name="{key or "first"}">' in out
        np.testing.assert_allclose(joint_angles(tmp_path / "key.usd")[0], angles, atol=1e-9)
    status, out, err = wpsim_run(capsys, arm, "--key", "second", "--q0", "link4_joint=-1.1", "--steps", 1, "--out",
                                 tmp_path / "both.usd")
    assert status == 0, err
    np.testing.assert_allclose(joint_angles(tmp_path / "both.usd")[0], [-0.1, 0, 0, -1.1, 0, 0, -0.2], atol=1e-9)


def test_keyframe_quaternions_and_velocities_are_converted(tmp_path):
    """MuJoCo's free-joint qpos is (x y z, qw qx qy qz) and qvel (linear, angular); wpsim keeps
    quaternions as (x, y, z, w), of unit length."""
    from wpsim.io.mjcf import import_mjcf

    legs = " ".join(["0.1"] * 12)
    path = tmp_path / "quadruped.xml"
    path.write_text((ASSETS / "quadruped.xml").read_text().replace(
        "</mujoco>", f'<keyframe><key name="k" qpos="1 2 0.5 0 0 0 2 {legs}" qvel="0.1 0.2 0.3 0.4 0.5 0.6 {legs}"/>'
                     "</keyframe></mujoco>"))
    _, scene = import_mjcf(path)
    torso, key = scene.joints["torso_joint"], scene.keyframes["k"]
    np.testing.assert_allclose(key["q"][torso], [1, 2, 0.5, 0, 0, 1, 0])
    np.testing.assert_allclose(key["qd"][torso], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert key["q"][scene.joints["hr_shin_joint"]] == pytest.approx([0.1])


# ---------------------------------------------------------------------------- data files
def test_replaying_a_torque_file_equals_a_hand_made_simulation(tmp_path, capsys):
    """``tau:`` columns at 10 ms samples, held over the 1 ms steps, against the same run
    stepped by hand from Python (soft contact, float64)."""
    import warp as wp

    from wpsim.io.measurements import save_trajectory
    from wpsim.solvers import SemiImplicitSolver, SoftContactOptions, eval_fk
    from wpsim.tasks.robot_scene import robot_scene

    times = np.arange(0.0, 0.30001, 0.01)
    torques = {"link1_joint": 2.0 * np.sin(20.0 * times), "link4_joint": -0.4 + 0.0 * times}
    data = save_trajectory(tmp_path / "torques.csv", times, {f"tau:{n}": v for n, v in torques.items()})
    steps = 300
    status, out, err = wpsim_run(capsys, ARM, "--control", data, "--steps", steps, "--fps", 1000, "--out",
                                 tmp_path / "replay.usd")
    assert status == 0, err
    assert f"control: replay {data} (tau:link1_joint, tau:link4_joint)" in out

    builder, scene = robot_scene(ARM)
    model = builder.finalize(device="cpu", dtype=wp.float64)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    a, b, control = model.state(), model.state(), model.control()
    dofs = model.joint_qd_start.numpy()
    expected = [eval_fk(model, model.state()).body_q.numpy()[:, :3]]
    for k in range(steps):
        f = np.zeros(model.joint_dof_count)
        sample = int(np.floor(k * 1e-3 / 0.01 + 1e-9))
        for name, values in torques.items():
            f[dofs[scene.joints[name]]] = values[sample]
        control.joint_f.assign(f)
        solver.step(a, b, control, 1e-3)
        a, b = b, a
        expected.append(eval_fk(model, a).body_q.numpy()[:, :3].copy())
    positions, _ = body_poses(tmp_path / "replay.usd")
    assert positions.shape[0] == steps + 1
    assert np.abs(positions[-1] - positions[0]).max() > 0.01  # the torques moved the arm
    np.testing.assert_allclose(positions, np.array(expected), atol=1e-12)


def test_a_reference_column_drives_a_motor_by_pd(tmp_path, capsys):
    from wpsim.io.measurements import save_trajectory

    times = np.array([0.0, 0.5, 1.0])
    data = save_trajectory(tmp_path / "targets.csv", times, {"q:link2_joint": [0.4, -0.2, -0.2]})
    status, out, err = wpsim_run(capsys, ARM, "--control", data, "--steps", 1000, "--fps", 100, "--out",
                                 tmp_path / "pd.usd")
    assert status == 0, err
    assert "motor PD (kp = M / T^2, kd = 2 M / T with T = 0.01 s) on link2_joint" in out
    angles = joint_angles(tmp_path / "pd.usd")
    assert angles[49, 1] == pytest.approx(0.4, abs=0.02) and angles[100, 1] == pytest.approx(-0.2, abs=0.02)


def test_velocity_actuators_track_the_sine_rate_and_damp_under_hold(tmp_path, capsys):
    path = tmp_path / "wheel.xml"
    path.write_text("""<mujoco><option timestep="0.001" gravity="0 0 0"/><worldbody>
      <body name="wheel" pos="0 0 1"><joint name="spin" type="hinge" axis="0 0 1"/>
        <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/></body></worldbody>
      <actuator><velocity joint="spin" kv="5"/></actuator>
      <keyframe><key qpos="0" qvel="2"/></keyframe></mujoco>""")
    status, out, err = wpsim_run(capsys, path, "--steps", 1000, "--out", tmp_path / "hold.usda")
    assert status == 0, err
    drift = summary_value(out, "final hold error |q - q0|")
    # MuJoCo's Euler integrator (the file's default) takes the servo's kv explicitly: each 1 ms
    # step scales the speed by 1 - dt kv / I = 0.5, so the wheel turns 2 rad/s x 1 ms x (1/2 + 1/4 + ...)
    assert drift == pytest.approx(0.002, rel=0.02)
    status, out, err = wpsim_run(capsys, path, "--control", "sine", "--amplitude", 0.5, "--frequency", 2,
                                 "--steps", 1000, "--out", tmp_path / "sine.usda")
    assert status == 0, err
    assert summary_value(out, "largest speed") == pytest.approx(2.0 * np.pi * 2 * 0.5, rel=0.05)


def test_a_file_without_a_time_step_runs_at_its_formats_default(tmp_path, capsys):
    """An MJCF file that sets no time step runs at MuJoCo's 2 ms (it ran at 1 ms); a URDF at 1 ms."""
    mjcf = tmp_path / "pendulum.xml"
    mjcf.write_text("""<mujoco><worldbody><body name="link" pos="0 0 1"><joint name="hinge" type="hinge"
      axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" contype="0" conaffinity="0"/>
      </body></worldbody></mujoco>""")
    urdf = tmp_path / "block.urdf"
    urdf.write_text('<robot name="block"><link name="base"><inertial><mass value="1"/><inertia ixx="0.1" '
                    'iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>')
    for path, step in ((mjcf, "dt = 0.002 s"), (urdf, "dt = 0.001 s")):
        status, out, err = wpsim_run(capsys, path, "--steps", 5, "--out", tmp_path / f"{path.stem}.usda")
        assert status == 0, err
        assert step in out


# ---------------------------------------------------------------------------- bad input
def _files(tmp_path) -> dict:
    from wpsim.io.measurements import save_trajectory

    t = np.array([0.0, 0.1])
    files = {"unknown": {"tau:elbow": [0.0, 1.0]}, "marker": {"marker:tip:x": t, "marker:tip:y": t, "marker:tip:z": t},
             "short": {"tau:link1_joint": [0.0, 1.0]}, "rate": {"qd:link1_joint": [0.0, 1.0]}}
    return {name: save_trajectory(tmp_path / f"{name}.csv", t, columns) for name, columns in files.items()}


BAD = [
    (["--control", "hodl"], "--control hodl: expected none, hold, sine"),
    (["--control", "{unknown}"], "{unknown}: column 'tau:elbow' names an unknown hinge or slide joint"),
    (["--control", "{marker}"], "{marker}: column 'marker:tip:x': wpsim run replays tau:, q: and qd:"),
    (["--control", "{short}", "--steps", "200"], "{short}: the data covers 0-0.1 s, but --steps 200"),
    (["--control", "{rate}"], "{rate}: column 'qd:link1_joint': motor joint 'link1_joint' also needs"),
    (["--control", "{tmp}/missing.csv"], "{tmp}/missing.csv: no such data file"),
    (["--q0", "link1_joint=3"], "--q0 link1_joint=3: outside the joint's limits [-2.5, 2.5] rad"),
    (["--q0", "elbow=0.1"], "--q0 elbow=0.1: "),
    (["--q0", "link1_joint"], "--q0 link1_joint: 'link1_joint' is not JOINT=VALUE"),
    (["--q0", "link1_joint=x"], "--q0 link1_joint=x: 'x' (joint link1_joint) is not a number"),
    (["--q0", "link1_joint=1,link1_joint=2"], "joint link1_joint is given twice"),
    (["--key", "rest"], "--key rest: "),
    (["--kp", "10"], "--kp and --kd go together"),
    (["--kp", "-1", "--kd", "1"], "--kp must be a finite number >= 0"),
    (["--amplitude", "nan"], "--amplitude must be a finite number"),
    (["--frequency", "-2"], "--frequency must be > 0 Hz"),
    (["--time-constant", "0"], "--time-constant must be > 0 s"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_a_bad_option_or_file_is_one_line_and_status_2(tmp_path, capsys, args, message):
    names = {**_files(tmp_path), "tmp": tmp_path}
    out = tmp_path / "never.usd"
    status, _, err = wpsim_run(capsys, ARM, "--steps", 10, *[a.format(**names) for a in args], "--out", out)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1, err
    assert lines[0].startswith("wpsim run: error: ") and message.format(**names) in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize("scene, args, message", [
    ("soft_finger.obj", ["--control", "hold"], "--control applies to robot files only"),
    ("arm_7link.urdf", ["--control", "sine"], "has no actuators to drive"),
    ("quadruped.xml", ["--q0", "torso_joint=0.1"], "only hinge and slide joints can be set"),
])
def test_options_that_do_not_fit_the_scene_are_refused(tmp_path, capsys, scene, args, message):
    status, _, err = wpsim_run(capsys, ASSETS / scene, *args, "--out", tmp_path / "x.usd")
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.usd").exists()


def test_a_bad_keyframe_names_the_file_and_key(tmp_path, capsys):
    arm = arm_with_keys(tmp_path, '<key name="short" qpos="0 0 0"/>')
    status, _, err = wpsim_run(capsys, arm, "--out", tmp_path / "x.usd")
    assert status == 2 and f'{arm}: <key name="short"> qpos="0 0 0" must be 7 finite numbers' in err, err


def test_the_console_script_reports_a_bad_data_column_in_one_line(tmp_path):
    """As a user runs it: a separate process, no traceback, nothing written."""
    from wpsim.io.measurements import save_trajectory

    data = save_trajectory(tmp_path / "run.csv", [0.0, 1.0], {"tau:shoulder": [0.0, 1.0]})
    out = tmp_path / "arm.usd"
    proc = subprocess.run([sys.executable, "-m", "wpsim.apps.cli", "run", str(ARM), "--control", str(data), "--out",
                           str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"wpsim run: error: {data}: column 'tau:shoulder'")
    assert not out.exists()


# ---------------------------------------------------------------------------- the library parts
def test_effective_inertia_and_holding_torque_of_a_pendulum():
    """M = I + m r^2 about the hinge, rest acceleration -m g r sin(q) / M (no other dof)."""
    import warp as wp

    import wpsim
    from wpsim.solvers.controllers import effective_inertia

    b = wpsim.ModelBuilder()
    link = b.add_body(mass=1.5, com=(0.0, 0.0, -0.4), inertia=(0.02, 0.02, 0.02))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.3)
    model = b.finalize(device="cpu", dtype=wp.float64)
    inertia, acceleration = effective_inertia(model, model.state(), [0])
    expected = 0.02 + 1.5 * 0.4**2
    assert inertia[0, 0] == pytest.approx(expected, rel=1e-6)
    assert acceleration[0] == pytest.approx(-1.5 * 9.81 * 0.4 * np.sin(0.3) / expected, rel=1e-6)


def test_the_guides_arm_commands_hold_and_move_the_arm(tmp_path, capsys):
    """The getting-started guide's first ``wpsim run assets/arm_7link.xml ...`` command, as
    written and with ``--control sine``: the hold error stays below 1 mrad, the sine moves
    the joints."""
    import re
    import shlex

    guide = (ASSETS.parent / "docs" / "getting_started.md").read_text()
    command = re.search(r"^wpsim run (assets/arm_7link\.xml [^#\n]*)", guide, flags=re.M).group(1)
    args = [str(ASSETS.parent / a) if a.startswith("assets/") else str(tmp_path / a) if a.endswith(".usd") else a
            for a in shlex.split(command)]
    status, out, err = wpsim_run(capsys, *args)
    assert status == 0, err
    assert summary_value(out, "final hold error |q - q0|") < 1e-3 and summary_value(out, "largest |q - q0|") < 1e-3
    status, out, err = wpsim_run(capsys, *args, "--control", "sine")
    assert status == 0, err
    assert summary_value(out, "largest speed") > 0.5 and summary_value(out, "largest |q - q0|") > 0.25
