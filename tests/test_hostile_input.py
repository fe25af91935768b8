"""Hostile input is refused before any work, with a ValueError (or, on the command line, one
line and exit status 2) naming the argument, field or element: solver entry points."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.checkpoint import Rollout
from wpsim.io.mjcf import import_mjcf

ASSETS = Path(__file__).resolve().parents[1] / "assets"
DT = 1.0e-3


def particle_model(n: int, dtype=wp.float32):
    builder = wpsim.ModelBuilder()
    builder.add_particles(np.linspace(0.0, 1.0, 3 * n).reshape(n, 3) + 1.0)
    return builder.finalize(device="cpu", dtype=dtype)


def arm():
    builder, _ = import_mjcf(ASSETS / "arm_2link.xml")
    return builder.finalize(device="cpu")


def test_a_state_of_another_model_is_refused_naming_the_field():
    small, big = particle_model(10), particle_model(12)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 12 entries, the model has 10 particles"):
        wpsim.SemiImplicitSolver(small).step(big.state(), big.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries, the model has 12 particles"):
        wpsim.SemiImplicitSolver(big).step(small.state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_out.particle_q has 10 entries"):
        wpsim.SemiImplicitSolver(big).step(big.state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 12 entries, the model has 0 particles"):
        wpsim.SemiImplicitSolver(arm()).step(big.state(), big.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has dtype vec3d, the model's is vec3f"):
        wpsim.SemiImplicitSolver(small).step(particle_model(10, wp.float64).state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q is NoneType, not a Warp array"):
        wpsim.SemiImplicitSolver(small).step(None, small.state(), None, DT)


def test_a_control_of_the_wrong_size_is_refused():
    model = arm()
    solver = wpsim.SemiImplicitSolver(model)
    control = model.control()
    control.joint_f = wp.zeros(3, dtype=wp.float32, device="cpu")
    with pytest.raises(ValueError, match=r"control.joint_f has 3 entries, the model has 2 joint dofs"):
        solver.step(model.state(), model.state(), control, DT)
    with pytest.raises(ValueError, match=r"control.joint_f has 3 entries"):
        solver.advance(model.state(), control, DT, 4)
    with pytest.raises(ValueError, match=r"control.particle_f_ext has 4 entries, the model has 0 particles"):
        wpsim.simulate(solver, model.state(), 3, DT, control=particle_model(4).control())


def test_an_array_replaced_after_a_checked_step_is_checked_again():
    model = particle_model(12)
    solver = wpsim.SemiImplicitSolver(model)
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, DT)
    assert s0.checked_by is s1.checked_by is not None
    s0.particle_q = wp.zeros(10, dtype=wp.vec3, device="cpu")
    assert s0.checked_by is None
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries"):
        solver.step(s0, s1, None, DT)


@pytest.mark.parametrize("dt", [0.0, -1.0e-3, float("nan"), float("inf"), "0.001", None])
def test_a_bad_dt_is_refused_at_every_entry_point(dt):
    model = particle_model(4, wp.float64)
    state = model.state()
    for solver in (wpsim.SemiImplicitSolver(model), wpsim.ImplicitEulerSolver(model)):
        with pytest.raises(ValueError, match=r"dt must be"):
            solver.step(state, model.state(), None, dt)
        with pytest.raises(ValueError, match=r"dt must be"):
            solver.advance(state, None, dt, 2)
        with pytest.raises(ValueError, match=r"simulate: dt must be"):
            wpsim.simulate(solver, state, 2, dt)
        with pytest.raises(ValueError, match=r"dt must be"):
            Rollout(solver, 2, dt, lambda k, s, loss: None)
    np.testing.assert_array_equal(state.particle_q.numpy(), model.particle_q.numpy())


@pytest.mark.parametrize("steps", [-1, 2.5, "3", True])
def test_a_bad_step_count_is_refused(steps):
    model = particle_model(4)
    solver = wpsim.SemiImplicitSolver(model)
    with pytest.raises(ValueError, match=r"simulate: num_steps must be"):
        wpsim.simulate(solver, model.state(), steps, DT)
    with pytest.raises(ValueError, match=r"advance: steps must be"):
        solver.advance(model.state(), None, DT, steps)


def test_a_controller_rollout_checks_the_state_before_the_controller_runs():
    model, other = particle_model(12), particle_model(10)
    calls = []
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries"):
        wpsim.simulate(wpsim.SemiImplicitSolver(model), other.state(), 2, DT,
                       controller=lambda k, state, control: calls.append(k))
    assert calls == []


def cli(capsys, *args) -> tuple:
    """(exit status, stderr lines) of ``wpsim ARGS`` in this process."""
    from wpsim.apps.cli import main

    try:
        status = main([str(a) for a in args])
    except SystemExit as exit:  # argparse's usage errors
        status = exit.code
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def digest(path: Path) -> bytes:
    import hashlib

    return hashlib.sha256(path.read_bytes()).digest()


ARM = ASSETS / "arm_2link.xml"
SYSID_DATA = ASSETS / "arm_2link_sysid.csv"


@pytest.mark.parametrize("args, message", [
    (["run", ARM, "--dt", "0", "--out", "OUT.usd"], "--dt must be a finite time step > 0 s"),
    (["run", ARM, "--dt", "-1", "--out", "OUT.usd"], "--dt must be a finite time step > 0 s"),
    (["run", ARM, "--dt", "1e300", "--out", "OUT.usd"], "--dt must be a finite time step > 0 s and <= 1 s"),
    (["run", ARM, "--dt", "inf", "--out", "OUT.usd"], "--dt must be a finite time step"),
    (["run", ARM, "--steps", "1e12", "--out", "OUT.usd"], "argument --steps: invalid int value: '1e12'"),
    (["run", ARM, "--steps", "1000000000000", "--out", "OUT.usd"], "--steps must be >= 1 and <= 10,000,000"),
    (["run", ARM, "--steps", "-5", "--out", "OUT.usd"], "--steps must be >= 1"),
    (["sysid", ARM, SYSID_DATA, "--dt", "10", "--out", "OUT"], "dt 10 s is longer than the 2 s of data fitted"),
    (["sysid", ARM, SYSID_DATA, "--dt", "0", "--out", "OUT"], "--dt must be finite and > 0 s"),
    (["build-kernels", "--device", "bogus"], "--device bogus: no such Warp device here"),
    (["build-kernels", "--processes", "0"], "--processes must be >= 1"),
    (["render", ASSETS / "missing.usd", "--width", "100000", "--out", "OUT.gif"],
     "--width and --height must be 1 to 16384 pixels"),
    (["run", ASSETS / "cube.obj", "--height", "inf", "--out", "OUT.usd"],  # was "Singular matrix"
     "drop height must be finite and >= 0 m"),
    (["run", ASSETS / "cube.obj", "--young", "inf", "--out", "OUT.usd"], "young_modulus must be finite and > 0"),
    (["run", ARM, "--floating", "--out", "OUT.usd"], "--floating is for URDF files"),  # was ignored
])
def test_bad_command_line_values_are_one_line(capsys, tmp_path, args, message):
    args = [str(a).replace("OUT", str(tmp_path / "out")) for a in args]
    status, lines = cli(capsys, *args)
    assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def usd_robot(tmp_path_factory) -> Path:
    """arm_2link as a UsdPhysics stage in out/calibrated.usda, where ``wpsim sysid --out out`` writes its robot."""
    from wpsim.io.usd_physics import export_physics

    path = tmp_path_factory.mktemp("robot") / "out" / "calibrated.usda"
    path.parent.mkdir()
    export_physics(import_mjcf(ARM)[0].finalize(device="cpu"), path, timestep=1e-3)
    return path


def test_no_output_overwrites_an_input(capsys, usd_robot):
    before = digest(usd_robot)
    link = usd_robot.parent.parent / "link.usda"
    link.unlink(missing_ok=True)
    link.symlink_to(usd_robot)
    for args, message in (
            (["run", usd_robot, "--steps", "2", "--out", usd_robot], f"--out {usd_robot}: would overwrite the input"),
            (["run", link, "--steps", "2", "--out", usd_robot], "would overwrite the input"),
            (["sysid", usd_robot, SYSID_DATA, "--out", usd_robot.parent], f"--out {usd_robot.parent}: would overwrite"),
            (["sysid", ARM, usd_robot, "--out", f"{usd_robot.parent}/"], "would overwrite the input"),
            (["render", usd_robot, "--out", usd_robot], "--out")):
        status, lines = cli(capsys, *args)
        assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert digest(usd_robot) == before and sorted(p.name for p in usd_robot.parent.iterdir()) == ["calibrated.usda"]


def test_an_unwritable_output_is_refused_before_any_work(capsys, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    for args, message in (
            (["run", ARM, "--out", "/proc/wpsim/x.usd"], "--out /proc/wpsim/x.usd: cannot write there"),
            (["run", ARM, "--out", blocked / "x.usd"], f"--out {blocked / 'x.usd'}: {blocked} is a file, not a folder"),
            (["sysid", ARM, SYSID_DATA, "--out", blocked], f"--out {blocked}: {blocked} is a file, not a folder"),
            (["sysid", ARM, SYSID_DATA, "--out", "/proc/wpsim"], "--out /proc/wpsim: cannot write there"),
            (["demo", "--out", blocked], f"--out {blocked}: {blocked} is a file, not a folder"),
            (["demo", "--task", "throw", "--out", "/proc/wpsim"], "--out /proc/wpsim: cannot write there"),
            (["render", ARM, "--out", blocked / "frames"], "is a file, not a folder")):
        status, lines = cli(capsys, *args)
        assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_ctrl_c_is_one_line_and_exit_status_130(tmp_path):
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "wpsim.apps.cli", "run", ARM, "--steps", "5000000", "--out",
                             tmp_path / "x.usd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith(f"{ARM}: 2 bodies")  # the run has started
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err and err.strip().splitlines()[-1] == "wpsim: interrupted"
    assert not list(tmp_path.iterdir())


HINGED = '<body name="b1"><joint name="h" type="hinge"/><geom type="sphere" size="0.1"/></body>'
BAD_MJCF = {
    "negative kp": ('<actuator><position name="servo" joint="h" kp="-5"/></actuator>', HINGED,
                    r'<position name="servo">: negative gain \(kp -5'),
    "negative kv": ('<actuator><velocity name="damper" joint="h" kv="-1"/></actuator>', HINGED,
                    r'<velocity name="damper">: negative gain'),
    "negative general kp": ('<actuator><general name="g" joint="h" gainprm="-3" biastype="affine" biasprm="0 3 0"/>'
                            '</actuator>', HINGED, r'<general name="g">: negative gain \(kp -3'),
    "kp not finite": ('<actuator><position name="servo" joint="h" kp="nan"/></actuator>', HINGED,
                      'kp="nan" must be 1 finite numbers'),
    "zero timestep": ('<option timestep="0"/>', HINGED, 'timestep="0" must be > 0 s'),
    "negative timestep": ('<option timestep="-0.001"/>', HINGED, 'timestep="-0.001" must be > 0 s'),
    "infinite timestep": ('<option timestep="inf"/>', HINGED, 'timestep="inf" must be 1 finite numbers'),
    "duplicate body": ("", HINGED + '<body name="b1" pos="1 0 0"><geom type="sphere" size="0.1"/></body>',
                       '<body name="b1">: a second body named "b1"'),
    "duplicate actuator": ('<actuator><motor name="m" joint="h"/><motor name="m" joint="h"/></actuator>', HINGED,
                           '<motor name="m">: a second actuator named "m"'),
    "density not a number": ("", '<body name="b1"><freejoint/><geom type="sphere" size="0.1" density="abc"/></body>',
                             r'<geom> density="abc" is not a list of numbers \(line 1\)'),  # was: named nothing
    "infinite density": ("", '<body name="b1"><freejoint/><geom type="sphere" size="0.1" density="inf"/></body>',
                         '<geom> density="inf" must be 1 finite numbers'),  # was: inertia tensor is not symmetric
    "negative density": ("", '<body name="b1"><freejoint/><geom type="sphere" size="0.1" density="-1"/></body>',
                         '<geom>: density -1 kg/m\\^3 must be >= 0'),
    "negative geom mass": ("", '<body name="b1"><freejoint/><geom type="sphere" size="0.1" mass="-2"/></body>',
                           '<geom>: mass -2 kg must be >= 0'),
    "duplicate mesh": (f'<asset><mesh name="m" file="{ASSETS / "cube.obj"}"/>'
                       f'<mesh name="m" file="{ASSETS / "icosphere.stl"}"/></asset>', HINGED,
                       '<mesh name="m">: a second mesh named "m"'),
}


@pytest.mark.parametrize("case", sorted(BAD_MJCF))
def test_bad_mjcf_values_and_duplicate_names_are_refused(tmp_path, case):
    sections, world, message = BAD_MJCF[case]
    path = tmp_path / "bad.xml"
    path.write_text(f"<mujoco>{sections}<worldbody>{world}</worldbody></mujoco>")
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=message) as error:
        import_mjcf(path, builder)
    assert str(error.value).startswith(f"{path}: ")
    assert builder.bodies.count == 0 and builder.joints.count == 0


INERTIAL = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>'
BAD_URDF = {
    "negative cylinder length": ('<cylinder radius="0.1" length="-1"/>', "",
                                 r'<link name="b"> <cylinder>: length must be positive, got -1 m'),
    "zero cylinder length": ('<cylinder radius="0.1" length="0"/>', "", r"length must be positive, got 0 m"),
    "negative cylinder radius": ('<cylinder radius="-0.1" length="1"/>', "",
                                 r'<link name="b"> <cylinder>: .*radius must be positive'),
    "negative box size": ('<box size="1 -1 1"/>', "", r'<link name="b"> <box>: .*must be positive'),
    "box without size": ("<box/>", "", "<box> needs size"),  # was: unsupported operand type(s) for /
    "massless moving leaf": ('<box size="1 1 1"/>', '<link name="c"><inertial><mass value="0"/></inertial></link>'
                             '<joint name="h" type="continuous"><parent link="b"/><child link="c"/></joint>',
                             '<link name="c">: a moving link that carries no other needs a positive mass and inertia, '
                             'got 0 kg'),  # was refused by finalize as "body 2: mass 0 kg ..."
    "sphere without radius": ("<sphere/>", "", "<sphere> needs radius"),
    "duplicate joint": ('<box size="1 1 1"/>', f'<link name="c">{INERTIAL}</link><joint name="j" type="fixed">'
                        '<parent link="a"/><child link="c"/></joint>', '<joint name="j">: a second joint named "j"'),
}


@pytest.mark.parametrize("case", sorted(BAD_URDF))
def test_bad_urdf_sizes_and_duplicate_joints_are_refused(tmp_path, case):
    from wpsim.io.urdf import import_urdf

    geometry, extra, message = BAD_URDF[case]
    path = tmp_path / "bad.urdf"
    path.write_text(f'<robot name="r"><link name="a">{INERTIAL}</link><link name="b">{INERTIAL}<collision><geometry>'
                    f'{geometry}</geometry></collision></link><joint name="j" type="fixed"><parent link="a"/>'
                    f'<child link="b"/></joint>{extra}</robot>')
    builder = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=message) as error:
        import_urdf(path, builder)
    assert str(error.value).startswith(f"{path}: ")
    assert builder.bodies.count == 0 and builder.joints.count == 0
