"""Fuzzing the command line (issue 45 item 7): ``wpsim run / render / sysid / demo /
build-kernels / gradcheck / bench`` with options drawn from valid and hostile values, run in
this process through ``wpsim.apps.cli.main``. Each ends with status 0 or 1 (it ran), 2 (one
line saying what is wrong), never a traceback or another exception; nothing is written outside
``--out`` (and ``--video``) and no input changes. Hostile values make most of those commands
refusals, so a second test draws run, render and sysid from valid values only: each must end 0
having written its outputs (a command that says it ran but wrote nothing fails there). Valid
values are kept small (a few steps, one iteration, tiny images) so that an accepted command
finishes in about a second.

``WPSIM_FUZZ_EXAMPLES`` sets the examples per test (see tests/fuzz_support.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fuzz_support import Table, captured, changes, digests, examples, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from wpsim.apps.cli import main

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TABLE = Table("test_fuzz_cli")
PRISTINE: dict = {}  # input name -> its bytes
BAD = ("abc", "nan", "inf", "-inf", "-1", "0", "1e308", "", "1e999")


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    TABLE.emit()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A folder of inputs: robots, a mesh, 0.1 s of sysid data, a rollout stage, garbage."""
    folder = tmp_path_factory.mktemp("inputs")
    for name in ("arm_2link.xml", "cartpole.urdf", "cube.obj"):
        shutil.copy(ASSETS / name, folder / name)
    lines = (ASSETS / "arm_2link_sysid.csv").read_text().splitlines()[:101]
    (folder / "data.csv").write_text("\n".join(lines) + "\n")
    (folder / "garbage.xml").write_bytes(b"\x00\xffnot a scene<<")
    with captured():
        assert main(["run", str(folder / "arm_2link.xml"), "--steps", "20", "--out", str(folder / "rollout.usda")]) == 0
    PRISTINE.update({p.name: p.read_bytes() for p in folder.iterdir()})
    return folder


def _pick(data, label: str, values, absent: float = 0.5):
    """A value of ``values``, or None (the option left out) with probability about ``absent``."""
    if data.draw(st.floats(0, 1), label=f"{label}?") < absent:
        return None
    return data.draw(st.sampled_from(values), label=label)


def _argv(data, command: str, inputs: Path, out: Path) -> tuple:
    """(argv, the output paths it names) of one fuzzed command."""
    i = lambda name: str(inputs / name)  # noqa: E731
    outs = []
    if command == "run":
        scene = data.draw(st.sampled_from((i("arm_2link.xml"), i("arm_2link.xml"), i("cartpole.urdf"), i("cube.obj"),
                                           i("garbage.xml"), i("missing.urdf"), str(inputs), "/dev/null")),
                          label="scene")
        target = data.draw(st.sampled_from((f"{out}/r.usd", f"{out}/r.usda", f"{out}/sub/r.usdc", f"{out}/r.txt",
                                            f"{out}", i("rollout.usda"), "/proc/wpsim/r.usd")), label="--out")
        argv, outs = ["run", scene, "--out", target], [target]
        argv += ["--steps", data.draw(st.sampled_from(("2", "3", *BAD, "1e12", "99999999999")), label="--steps")]
        video = _pick(data, "--video", (f"{out}/v.gif", f"{out}/v.png", f"{out}/frames", f"{out}/v.txt",
                                         i("data.csv"), "/proc/wpsim/v.gif"), 0.8)
        if video:
            argv += ["--video", video]
            outs.append(video)
        for option, values in (("--dt", ("1e-3", "2e-4", *BAD, "1e-9")), ("--fps", ("60", "1000", *BAD)),
                               ("--solver", ("implicit", "semi-implicit", "bogus")), ("--contact", ("penalty", "x")),
                               ("--scale", ("1", "0.01", *BAD)), ("--density", ("1000", *BAD)),
                               ("--young", ("5e4", *BAD)), ("--height", ("0.02", *BAD)), ("--cell", ("0.3", *BAD)),
                               ("--control", ("none", "hold", "sine", i("data.csv"), i("garbage.xml"), "bogus")),
                               ("--q0", ("link1_joint=0.1", "nope=1", "link1_joint=nan", "link1_joint", "=")),
                               ("--key", ("bogus",)), ("--kp", ("10", *BAD)), ("--kd", ("1", *BAD)),
                               ("--time-constant", ("0.05", *BAD)), ("--amplitude", ("0.1", *BAD)),
                               ("--frequency", ("1", *BAD)), ("--device", ("cpu", "bogus", "cuda:7"))):
            value = _pick(data, option, values, 0.85)
            if value is not None:
                argv += [option, value]
        if data.draw(st.booleans(), label="--floating"):
            argv.append("--floating")
    elif command == "render":
        stage = data.draw(st.sampled_from((i("rollout.usda"), i("rollout.usda"), i("garbage.xml"), i("arm_2link.xml"),
                                           i("missing.usd"))), label="stage")
        target = data.draw(st.sampled_from((f"{out}/r.gif", f"{out}/r.png", f"{out}/frames", f"{out}/r.txt",
                                            i("rollout.usda"), "/proc/wpsim/r.gif")), label="--out")
        argv, outs = ["render", stage, "--out", target], [target]
        for option, values in (("--width", ("8", "16", *BAD, "100000")), ("--height", ("8", "12", *BAD, "100000")),
                               ("--fps", ("30", "5", *BAD, "1000000")), ("--take", ("bogus", "0")),
                               ("--device", ("cpu", "bogus"))):
            value = _pick(data, option, values, 0.3 if option in ("--width", "--height") else 0.8)
            if value is not None:
                argv += [option, value]
        if "--width" not in argv:  # keep accepted renders tiny
            argv += ["--width", "16", "--height", "12"]
    elif command == "sysid":
        robot = data.draw(st.sampled_from((*[i("arm_2link.xml")] * 3, i("cartpole.urdf"),
                                           i("garbage.xml"), i("missing.xml"), i("rollout.usda"))), label="robot")
        measured = data.draw(st.sampled_from((*[i("data.csv")] * 3, i("garbage.xml"), i("missing.csv"),
                                              i("arm_2link.xml"))), label="data")
        target = data.draw(st.sampled_from((f"{out}", f"{out}/sub", str(inputs), "/proc/wpsim")), label="--out")
        argv, outs = ["sysid", robot, measured, "--out", target, "--quiet"], [target]
        argv += ["--iterations", data.draw(st.sampled_from(("1", "1", "2", "0", "-1", "abc")), label="--iterations")]
        for option, values in (("--fit", ("masses", "damping,armature", "bogus", "", "masses,masses")),
                               ("--method", ("lbfgsb", "adam", "nelder-mead", "least-squares", "bogus")),
                               ("--starts", ("1", "2", "0", "-1", "1000000")), ("--duration", ("0.05", *BAD)),
                               ("--dt", ("1e-3", "2e-3", *BAD, "10", "1e-9")),
                               ("--residual-every", ("1", "5", "0", "-1", "1000000")), ("--device", ("cpu", "bogus"))):
            value = _pick(data, option, values, 0.85)
            if value is not None:
                argv += [option, value]
        if "--duration" not in argv:  # an accepted fit stays short
            argv += ["--duration", "0.02"]
    elif command == "demo":  # only refused settings: an accepted demo runs a whole calibration
        argv = ["demo", "--out", f"{out}/demo"]
        argv += data.draw(st.sampled_from((["--iterations", "-1"], ["--iterations", "abc"], ["--task", "bogus"],
                                           ["--device", "bogus"], ["--out", "/proc/wpsim"], ["--out", i("data.csv")])),
                          label="refused")
        outs = [f"{out}/demo"]
    elif command == "build-kernels":  # only refused settings: an accepted one compiles every kernel
        argv = ["build-kernels"] + data.draw(st.sampled_from((["--device", "bogus"], ["--processes", "0"],
                                                              ["--processes", "abc"], ["--arch", "10"],
                                                              ["--module", "bogus"], ["--arch", "abc"])),
                                          label="refused")
    else:  # gradcheck, bench and nonsense: refused settings only
        argv = data.draw(st.sampled_from((["gradcheck", "--bogus"], ["gradcheck", "--device", "bogus"],
                                          ["bench", "--suite", "bogus"], ["bench", "--device", "bogus", "--quick"],
                                          ["bogus"], [], ["--version"], ["run"], ["run", "--help"])), label="argv")
    return argv, outs


def _valid_argv(data, command: str, inputs: Path, out: Path) -> tuple:
    """(argv, the output paths it names) of one command drawn from valid values only: it must
    run (status 0) and write its outputs under ``out``."""
    i = lambda name: str(inputs / name)  # noqa: E731
    if command == "run":
        scene = data.draw(st.sampled_from((i("arm_2link.xml"), i("cartpole.urdf"), i("cube.obj"))), label="scene")
        target = data.draw(st.sampled_from((f"{out}/r.usd", f"{out}/r.usda", f"{out}/sub/r.usdc")), label="--out")
        argv, outs = ["run", scene, "--out", target, "--steps", data.draw(st.sampled_from(("2", "3")))], [target]
        video = _pick(data, "--video", (f"{out}/v.gif", f"{out}/v.png", f"{out}/frames"), 0.7)
        if video:
            argv += ["--video", video, "--fps", "1000"]  # a frame per step
            outs.append(video)
        options = [("--dt", ("1e-3", "2e-4")), ("--device", ("cpu",))]
        if scene.endswith(".obj"):
            options += [("--solver", ("implicit", "semi-implicit")), ("--scale", ("1", "0.5")), ("--cell", ("0.3",)),
                        ("--density", ("500", "1000")), ("--young", ("5e4", "1e5")), ("--height", ("0.02", "0"))]
        elif scene.endswith(".urdf"):  # the cart-pole has no actuators to drive
            options += [("--contact", ("penalty", "soft"))]
            if data.draw(st.booleans(), label="--floating"):
                argv.append("--floating")
        else:
            options += [("--contact", ("penalty", "soft")), ("--control", ("none", "hold", "sine")),
                        ("--amplitude", ("0.1",)), ("--frequency", ("1",)), ("--time-constant", ("0.05",))]
            if data.draw(st.booleans(), label="--kp --kd"):  # they go together, and replace --time-constant
                argv += ["--kp", "10", "--kd", "1"]
                options.pop()
        for option, values in options:
            value = _pick(data, option, values, 0.6)
            if value is not None:
                argv += [option, value]
    elif command == "render":
        target = data.draw(st.sampled_from((f"{out}/r.gif", f"{out}/r.png", f"{out}/frames")), label="--out")
        argv, outs = ["render", i("rollout.usda"), "--out", target, "--width", "16", "--height", "12"], [target]
        fps = _pick(data, "--fps", ("30", "12.5"))
        argv += ["--fps", fps] if fps else []
    else:
        target = data.draw(st.sampled_from((f"{out}", f"{out}/sub")), label="--out")
        argv, outs = ["sysid", i("arm_2link.xml"), i("data.csv"), "--out", target, "--quiet", "--iterations", "1",
                      "--duration", data.draw(st.sampled_from(("0.02", "0.05")), label="--duration")], [target]
        for option, values in (("--fit", ("masses", "damping,armature", "damping")),
                               ("--method", ("lbfgsb", "adam", "nelder-mead", "least-squares")),
                               ("--dt", ("1e-3", "2e-3")), ("--residual-every", ("1", "5"))):
            value = _pick(data, option, values, 0.6)
            if value is not None:
                argv += [option, value]
    return argv, outs


def _outside(changed: list, outs: list, root: Path) -> list:
    """The changed paths (relative to ``root``) that are not under one of ``outs``."""
    allowed = [Path(o).resolve() for o in outs]
    return [c for c in changed if not any((root / c).resolve() == a or a in (root / c).resolve().parents
                                          for a in allowed)]


COMMANDS = ("run", "render", "sysid", "other")
VALID_EVERY = {"run": 2, "render": 2, "sysid": 8}
"""Per command, one example drawn from valid values only (``_valid_argv``) per this many of
the hostile test's examples (a valid fit costs about a second, a run or render much less)."""


def _outcome(argv: list, outs: list, inputs: Path, sandbox: Path, valid: bool) -> tuple:
    """Run ``wpsim ARGV`` in ``sandbox``'s cwd and classify it: (category, description). A
    valid command must end 0 having written its outputs, else it is an "unnamed error"."""
    cwd = sandbox / "cwd"
    cwd.mkdir()
    before, before_inputs = digests(sandbox), digests(inputs)
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        with captured() as (stdout, stderr):
            try:
                status = main(argv)
            except SystemExit as exit:  # argparse: usage errors, --help, --version
                status = exit.code
            except Exception as error:  # noqa: BLE001 - the category this suite is looking for
                status = f"{type(error).__name__}: {error}"
    finally:
        os.chdir(previous)
    err = stderr.getvalue()
    named = {Path(a).name for a in argv if a.startswith(str(inputs)) and a not in outs}  # this command's inputs
    touched = changes(before_inputs, digests(inputs))
    changed_inputs = [p for p in touched if p in named]
    outside = _outside(changes(before, digests(sandbox)), outs, sandbox) + _outside(touched, outs, inputs)
    for name in touched:  # the next example starts from the same inputs
        if name in PRISTINE:
            (inputs / name).write_bytes(PRISTINE[name])
        else:
            (inputs / name).unlink()
    last = err.strip().splitlines()[-1] if err.strip() else ""
    missing = [o for o in outs if not Path(o).exists()] if valid else []
    if not isinstance(status, int) or "Traceback" in err:
        category = "crash/traceback"
    elif changed_inputs:
        category = "input changed"
    elif outside:
        category = "file outside --out"
    elif status == 2:
        category = "exit 2" if last.startswith("wpsim") else "crash/traceback"
    elif status not in (0, 1):
        category = "crash/traceback"
    else:
        poor_fit = status == 1 and last.startswith("wpsim sysid: poor fit: ")  # a named verdict, outputs written
        category = "unnamed error" if valid and ((status != 0 and not poor_fit) or missing) else "passed"
    described = f"wpsim {' '.join(argv)} -> {status}: {last[:200]} {outside or changed_inputs or missing or ''}"
    return category, described


@pytest.mark.parametrize("command", COMMANDS)
@fuzz_settings()
@given(data=st.data())
def test_fuzzed_command_lines_exit_cleanly_and_write_only_their_outputs(tmp_path_factory, inputs, command, data):
    if command == "other":
        command = data.draw(st.sampled_from(("demo", "build-kernels", "misc")), label="command")
    sandbox = tmp_path_factory.mktemp("cli")
    argv, outs = _argv(data, command, inputs, sandbox / "out")
    category, described = _outcome(argv, outs, inputs, sandbox, valid=False)
    TABLE.add(f"CLI {command}", category, described)
    assert category in ("exit 2", "passed"), described


@pytest.mark.parametrize("command", tuple(VALID_EVERY))
def test_valid_command_lines_run_and_write_only_their_outputs(tmp_path_factory, inputs, command):
    @fuzz_settings(max_examples=max(1, examples() // VALID_EVERY[command]))
    @given(data=st.data())
    def check(data):
        sandbox = tmp_path_factory.mktemp("valid")
        argv, outs = _valid_argv(data, command, inputs, sandbox / "out")
        category, described = _outcome(argv, outs, inputs, sandbox, valid=True)
        TABLE.add(f"CLI {command} (valid)", category, described)
        assert category == "passed", described

    check()


def test_sysid_refuses_too_many_starts_or_steps_in_one_line(capsys, inputs, tmp_path):
    for extra, message in ((["--starts", "1000000"], "--starts must be 1 to 1,024"),
                           (["--dt", "1e-9"], "99,000,000 steps per rollout, more than 1,000,000")):
        status = main(["sysid", str(inputs / "arm_2link.xml"), str(inputs / "data.csv"), "--out", str(tmp_path / "o"),
                       *extra])
        lines = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert not list(tmp_path.iterdir())
