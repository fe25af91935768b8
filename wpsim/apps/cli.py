"""The ``wpsim`` command line: demo, gradcheck, bench, run, render, sysid, build-kernels."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path


def _quiet_warp():
    """Silence Warp's start-up banner and module-load lines (warnings still show)."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    return wp


MAX_IMAGE_SIDE = 16384
"""The largest --width or --height of ``wpsim render`` (pixels)."""


def _check_device(device):
    """Refuse a ``--device`` that Warp does not know on this machine."""
    if device is None:
        return
    wp = _quiet_warp()
    try:
        wp.get_device(device)
    except (ValueError, RuntimeError):
        have = ", ".join(str(d) for d in wp.get_devices())
        raise ValueError(f"--device {device}: no such Warp device here (have: {have})") from None


DEMO_ITERATIONS = 20
"""Levenberg-Marquardt iterations (Jacobians, the first at the start) of the demo's
calibration at most: it converges in 16 (the modulus and the gain settle in 5; the Poisson
ratio and the damping, which the markers barely constrain, need the rest)."""


def cmd_demo(args) -> int:
    """Run the soft-finger calibration (or the throw) and write its plots; exit status 1 if
    the calibration misses a target of ``finger_calibration.targets`` (markers at the noise
    floor, modulus and gain within 5 %, Poisson ratio within 0.05; the throw: if the miss did
    not shrink 100x)."""
    from wpsim.apps.run_scene import check_writable

    _quiet_warp()
    _check_device(args.device)
    check_writable(args.out, "--out", folder=True)
    if args.task == "throw":
        from wpsim.apps.throw_demo import run_demo
        from wpsim.tasks.throw import DemoConfig

        result = run_demo(args.out, DemoConfig(iterations=args.iterations or 30), device=args.device)
        return 0 if result["loss_reduction"] >= 100.0 else 1
    from wpsim.apps.finger_demo import calibrate, describe
    from wpsim.tasks.finger_calibration import FingerConfig, targets

    print("calibrating the soft finger against assets/soft_finger_markers_fine.csv (converged reference, 0.5 mm noise)")
    report = calibrate("fine", FingerConfig(iterations=args.iterations or DEMO_ITERATIONS), args.out, args.device)
    print(describe(report))
    print(f"wrote {args.out}/calibration.png, history.png, calibration.gif (the fitted finger and its markers), "
          "calibration.usd (variants 'initial' and 'fitted'), "
          "calibration.json")
    return 0 if all(targets(report).values()) else 1


def cmd_gradcheck(args) -> int:
    """Run the gradient audit; exit status 1 if any family fails."""
    _quiet_warp()
    from wpsim.apps.gradient_audit import TOLERANCE, run_audit
    from wpsim.io.progress import progress_line

    def progress(done, total, row):
        status = "ok" if row["ok"] else "FAIL"
        progress_line(done, total, f"{row['solver']:<14} {row['family']:<22} {row['param']:<25} "
                      f"rel. error {row['rel_error']:.2e}  {status}", stream=sys.stderr)

    import warp as wp

    # Warp prints module-load lines on stdout; keep stdout for the result.
    with contextlib.redirect_stdout(sys.stderr), wp.ScopedDevice(args.device):
        rows = run_audit(progress)
    failed = [r for r in rows if not r["ok"]]
    if args.json:
        print(json.dumps([{k: r[k] for k in ("solver", "family", "param", "rel_error", "ok")} for r in rows], indent=2))
    else:
        print(f"{'solver':<15}{'family':<23}{'parameter':<27}{'rel. error':>11}  result   "
              "(tape vs central differences, float64)")
        for r in rows:
            print(f"{r['solver']:<15}{r['family']:<23}{r['param']:<27}{r['rel_error']:>11.2e}  "
                  f"{'ok' if r['ok'] else 'FAIL'}")
        print(f"{len(rows) - len(failed)}/{len(rows)} passed (bound {TOLERANCE:g})")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    """Run benchmark suites; a table, or JSON records with --json."""
    _quiet_warp()
    from wpsim import bench

    records = bench.run_suites(args.suite, device=args.device, quick=args.quick)
    print(json.dumps(records, indent=2) if args.json else bench.format_table(records))
    return 0


def cmd_build_kernels(args) -> int:
    """Build every wpsim kernel module into Warp's kernel cache (see ``wpsim.apps.build_kernels``)."""
    import os

    from wpsim.apps.build_kernels import build_kernel_modules, kernel_modules

    _quiet_warp()
    if args.processes is not None and args.processes < 1:
        raise ValueError(f"--processes must be >= 1, got {args.processes}")
    if args.arch is None:
        _check_device(args.device)
    processes = args.processes or os.cpu_count() or 1
    target = f"CUDA sm_{args.arch} (ahead of time, no GPU needed)" if args.arch else args.device
    count = len(args.module) if args.module else len(kernel_modules())
    print(f"building {count} kernel modules for {target} in {processes} processes", flush=True)
    try:
        seconds = build_kernel_modules(args.device, processes, args.arch, verbose=True, names=args.module)
    except RuntimeError as error:  # a compiler failed: its messages are above
        print(f"wpsim build-kernels: {error}", file=sys.stderr)
        return 1
    print(f"built in {seconds:.1f} s")
    return 0


def cmd_run(args) -> int:
    """Simulate a robot file (from its start pose, its actuators driven by ``--control``), or
    a soft body from a mesh file dropped on the ground; write its USD stage."""
    _quiet_warp()
    from wpsim.apps.run_scene import (
        MAX_DT,
        ROBOT_TIME_STEP,
        RobotControlOptions,
        SoftSceneOptions,
        check_control_options,
        check_outputs,
        check_run_options,
        control_mode,
        mesh_warnings,
        robot_controller,
        simulate_to_usd,
        soft_scene,
    )
    from wpsim.apps.scene_inputs import files_read, usd_dependencies
    from wpsim.io.robots import is_robot_file
    from wpsim.solvers import SoftContactOptions
    from wpsim.tasks.robot_scene import apply_start_pose, robot_scene

    options = SoftSceneOptions(cell_size=args.cell, scale=args.scale, density=args.density,
                               young_modulus=args.young, drop_height=args.height,
                               strain_smoothing=args.strain_smoothing, order=args.order or 1)
    control = RobotControlOptions(mode=args.control, kp=args.kp, kd=args.kd, time_constant=args.time_constant,
                                  amplitude=args.amplitude, frequency=args.frequency, q0=args.q0, key=args.key)
    _check_device(args.device)
    for option, out in (("--out", args.out), ("--video", args.video)):
        if out is not None:
            check_outputs(option, out, [args.scene, args.control])
    check_run_options(options, args.out, args.fps, args.video, args.dt, args.steps)
    check_control_options(control)
    if args.floating and Path(args.scene).suffix.lower() != ".urdf":
        raise ValueError(f"--floating is for URDF files (their roots are welded unless it is given); {args.scene} "
                         "says itself which bodies are free")
    quality, dt, soft_contact, body_names, make_controller, joint_names = None, args.dt, None, None, None, None
    mode = None
    if is_robot_file(args.scene):
        soft_only = [flag for flag, given in (("--order", args.order is not None),
                                              ("--strain-smoothing", args.strain_smoothing)) if given]
        if soft_only:
            raise ValueError(f"{soft_only[0]} applies to soft bodies, not to the robot file {args.scene}")
        with files_read() as read:  # the scene's includes and meshes are inputs too
            builder, scene = robot_scene(args.scene, floating=args.floating)
        for option, out in (("--out", args.out), ("--video", args.video)):
            if out is not None:
                check_outputs(option, out, [*read, *usd_dependencies(args.scene)])
        body_names = {index: name for name, index in scene.bodies.items()}
        joint_names = {index: name for name, index in scene.joints.items()}
        dt = dt or scene.timestep or ROBOT_TIME_STEP
        if args.solver != "semi-implicit":
            raise ValueError("robots are stepped by the semi-implicit solver only")
        if args.steps < 1 or not dt > 0.0:
            raise ValueError(f"steps must be >= 1 and dt > 0 s, got {args.steps} and {dt}")
        if not dt <= MAX_DT:  # only the file's own can be: --dt is checked
            raise ValueError(f"{args.scene}: the file's time step {dt:g} s is longer than {MAX_DT:g} s; pass --dt")
        soft_contact = SoftContactOptions(**scene.contact_settings) if args.contact == "soft" else None
        key = apply_start_pose(builder, scene, args.scene, args.q0, args.key)
        make_controller, described = robot_controller(builder, scene, args.scene, control, dt, args.steps)
        mode = control_mode(control, scene)
        kinds = sorted({a["kind"] for a in scene.actuators})
        print(f"{args.scene}: {builder.body_count} bodies, {builder.joints.count} joints, {len(scene.actuators)} "
              f"actuators{' (' + ', '.join(kinds) + ')' if kinds else ''}; dt = {dt:g} s; {args.contact} contact and "
              "joint limits")
        start = " + ".join(([f"<key name=\"{key}\">"] if key else []) + (["--q0"] if args.q0 else [])) or "the file's"
        print(f"start pose: {start}; control: {described}")
    else:
        given = [f"--{name.replace('_', '-')}" for name in ("control", "q0", "key", "kp", "kd", "time_constant")
                 if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{given[0]} applies to robot files only, not to {args.scene}")
        builder, quality = soft_scene(args.scene, options)
        dt = dt or 1e-4
    if quality is not None:
        if "cell_size_m" in quality:  # meshed here (not a .npz tet mesh)
            print(f"{args.scene}: {quality['tets']} tets of {quality['cell_size_m'] * 1e3:.1f} mm cells; volume "
                  f"{quality['volume_m3'] * 1e6:.3f} cm^3 ({quality['volume_relative_error'] * 100:+.1f} % vs the "
                  f"surface); shape quality min {quality['shape_min']:.3f}, dihedral angles "
                  f"{quality['dihedral_min_deg']:.0f}-{quality['dihedral_max_deg']:.0f} deg")
        print(f"{args.scene}: {quality['cells_through_thinnest']:.1f} cells through the thinnest section "
              f"({options.element_kind})")
        warnings = [*mesh_warnings(quality)] if "cell_size_m" in quality else []
        for warning in warnings + ([quality["bending_warning"]] if quality["bending_warning"] else []):
            print(f"wpsim run: warning: {warning}", file=sys.stderr)
    summary = simulate_to_usd(builder, args.out, args.steps, dt, args.fps, args.solver, args.device, soft_contact,
                              args.video, body_names, make_controller, joint_names)
    print(f"wrote {summary['usd']}" + (f" and {summary['video']}" if "video" in summary else "") +
          f": {summary['frames']} frames at {summary['fps']:.1f} fps; final lowest point "
          f"{summary['final_lowest_z_m'] * 1e3:.2f} mm, max speed {summary['final_max_speed_m_per_s']:.3f} m/s")
    if "unconverged_steps" in summary:
        print(f"implicit solver: {summary['unconverged_steps']} of {args.steps} steps did not converge")
    if summary.get("joints"):
        speed, most, final = (summary["joints"][k] for k in ("max_speed", "max_distance_from_start",
                                                                 "final_distance_from_start"))
        print(f"joints over the recorded frames: largest speed {speed['value']:.3f} {speed['unit']} ({speed['joint']}, "
              f"t = {speed['time_s']:.2f} s); largest |q - q0| {most['value']:.2e} {most['unit']} ({most['joint']}, "
              f"t = {most['time_s']:.2f} s); {'final hold error' if mode == 'hold' else 'final'} |q - q0| "
              f"{final['value']:.2e} {final['unit']} ({final['joint']})")
    return 0


def cmd_render(args) -> int:
    """Render a USD stage (e.g. one ``wpsim run`` or the demo wrote) into a video or pictures."""
    _quiet_warp()
    from wpsim.apps.run_scene import check_outputs
    from wpsim.apps.scene_inputs import usd_dependencies
    from wpsim.io.render import VIDEO_SUFFIXES
    from wpsim.io.usd_render import render_stage

    if Path(args.out).suffix.lower() not in (*VIDEO_SUFFIXES, ".png", ""):
        raise ValueError(f"--out {args.out}: use .gif, .mp4, .png (an image strip) or a folder (numbered PNGs)")
    if not (1 <= args.width <= MAX_IMAGE_SIDE and 1 <= args.height <= MAX_IMAGE_SIDE):
        raise ValueError(f"--width and --height must be 1 to {MAX_IMAGE_SIDE} pixels, got {args.width} x {args.height}")
    _check_device(args.device)
    check_outputs("--out", args.out, [args.stage, *usd_dependencies(args.stage)])
    summary = render_stage(args.stage, args.out, args.take, args.width, args.height, args.fps, args.device)
    take = f" (take {summary['take']})" if summary["take"] else ""
    print(f"wrote {summary['out']}: {summary['frames']} frames{take} at {summary['fps']:.3g} fps, "
          f"{args.width} x {args.height} pixels")
    return 0


MAX_STARTS = 1024
"""The most initial guesses ``wpsim sysid --starts`` fits (as worlds of one model)."""
MAX_SYSID_STEPS = 1_000_000
"""The most time steps of one ``wpsim sysid`` rollout (data span / dt)."""


def cmd_sysid(args) -> int:
    """Fit a robot's parameters to a measured run; print fitted vs initial values and write
    the report, plots and the calibrated robot."""
    _quiet_warp()
    from wpsim.apps.run_scene import check_outputs
    from wpsim.apps.scene_inputs import files_read, usd_dependencies
    from wpsim.core.validation import require_dt
    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.sysid import identify
    from wpsim.opt.sysid_report import OUTPUT_FILES

    if args.dt is not None:
        require_dt(args.dt, "--dt")
    if not 1 <= args.starts <= MAX_STARTS:
        raise ValueError(f"--starts must be 1 to {MAX_STARTS:,} (the guesses are worlds of one model), "
                         f"got {args.starts}")
    _check_device(args.device)
    check_outputs("--out", args.out, [args.robot, *args.data], names=OUTPUT_FILES)
    with files_read() as read:  # the robot's includes and meshes are inputs too
        _, scene = import_robot(args.robot)
    check_outputs("--out", args.out, [*read, *usd_dependencies(args.robot)], names=OUTPUT_FILES)
    dt = args.dt or scene.timestep
    for path in args.data if dt else ():
        data = load_trajectory(path)
        span = float(data.time[-1] - data.time[0]) if args.duration is None else args.duration
        if span / dt > MAX_SYSID_STEPS:
            raise ValueError(f"{path}: {span:g} s of data at dt {dt:g} s is {span / dt:,.0f} steps per rollout, more "
                             f"than {MAX_SYSID_STEPS:,}: pass a larger --dt or a shorter --duration")
    families = [f.strip() for f in args.fit.split(",") if f.strip()]
    result = identify(args.robot, args.data, families, method=args.method, iterations=args.iterations,
                      duration=args.duration, dt=args.dt, zero_order=args.zero_order, progress=not args.quiet,
                      device=args.device, starts=args.starts, residual_every=args.residual_every,
                      jacobian=args.jacobian, shooting=args.shooting, window=args.window)
    paths = result.write(args.out)
    print(result.summary())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if not result.verdict.ok:
        print(f"wpsim sysid: poor fit: {'; '.join(result.verdict.reasons)}", file=sys.stderr)
    return 0 if result.fit.success and result.verdict.ok else 1


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit status 2)."""

    def error(self, message):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("wpsim")
    except PackageNotFoundError:  # run from a source tree that pip never installed
        installed = "unknown (not installed)"
    parser = _Parser(prog="wpsim", description="wpsim: differentiable physics on NVIDIA Warp")
    parser.add_argument("--version", action="version", version=f"wpsim {installed}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="calibrate a soft finger's stiffness, Poisson ratio, damping and actuation gain "
                                       "to measured markers (or --task throw)")
    demo.add_argument("--task", choices=("calibrate", "throw"), default="calibrate",
                      help="calibrate: the soft-finger calibration (default); throw: a soft cube thrown onto a target")
    demo.add_argument("--out", default="wpsim_out", help="output folder for plots and results (default: ./wpsim_out)")
    demo.add_argument("--iterations", type=int, default=None,
                      help=f"optimisation iterations (default: {DEMO_ITERATIONS} for calibrate, 30 for throw)")
    demo.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    demo.set_defaults(func=cmd_demo)

    grad = sub.add_parser("gradcheck", help="audit every differentiable parameter family against finite differences")
    grad.add_argument("--json", action="store_true", help="print a JSON list of {family, param, rel_error, ok}")
    grad.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    grad.set_defaults(func=cmd_gradcheck)

    from wpsim.bench.suites import SUITES

    bench = sub.add_parser("bench", help="benchmark suites (steps/s, backward/forward ratio, launches per step)")
    bench.add_argument("--suite", action="append", choices=sorted(SUITES), help="suite to run (repeatable; default: forward)")
    bench.add_argument("--json", action="store_true", help="print the records as JSON")
    bench.add_argument("--quick", action="store_true", help="small scenes, few steps")
    bench.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    bench.set_defaults(func=cmd_bench)

    run = sub.add_parser("run", help="simulate a robot (.urdf, .xml MJCF, .usd UsdPhysics) or drop a soft body from a mesh file "
                                     "(.obj/.stl/.ply surface or .npz tets) onto the ground; write the rollout as USD")
    run.add_argument("scene", help="scene file")
    run.add_argument("--steps", type=int, default=2000, help="time steps (default: 2000)")
    run.add_argument("--dt", type=float, default=None,
                     help="time step in s (default: the robot file's, else 2e-3 for MJCF as in MuJoCo, 1e-3 for URDF "
                          "and USD robots, 1e-4 for soft bodies)")
    run.add_argument("--floating", action="store_true", help="URDF: free-floating root links (default: welded)")
    run.add_argument("--out", default="rollout.usd", help="USD stage to write (.usd, .usda, .usdc)")
    run.add_argument("--fps", type=float, default=60.0, help="frames per second recorded (default: 60)")
    run.add_argument("--video", default=None,
                     help="also render the recorded frames (headless ray caster) into this .gif, .mp4 (needs "
                          "imageio-ffmpeg), .png (an image strip) or folder of PNGs")
    run.add_argument("--solver", choices=("semi-implicit", "implicit"), default="semi-implicit",
                     help="soft bodies: semi-implicit (symplectic Euler, default) or implicit (backward Euler with "
                          "Newton-Krylov iterations, for stiff materials at large steps); robots: semi-implicit only")
    run.add_argument("--contact", choices=("soft", "penalty"), default="soft",
                     help="robots: rigid contact and joint limits as soft constraints solved each step (default; "
                          "stable at the file's time step) or as penalty springs")
    run.add_argument("--cell", type=float, default=None,
                     help="tet mesher cell size in m (default: six cells across the surface's thinnest side, "
                          "coarser if that gives more than 20,000 tets)")
    run.add_argument("--scale", type=float, default=1.0, help="file units to m (default: 1)")
    run.add_argument("--density", type=float, default=1000.0, help="kg/m^3 (default: 1000)")
    run.add_argument("--young", type=float, default=5.0e4, help="Young's modulus in Pa (default: 5e4)")
    run.add_argument("--height", type=float, default=0.02, help="drop height in m (default: 0.02)")
    run.add_argument("--strain-smoothing", action="store_true",
                     help="soft bodies: average each tet's strain with its face neighbours' (much less stiff in "
                          "bending on a coarse mesh, about 1.75x the cost per step)")
    run.add_argument("--order", type=int, choices=(1, 2), default=None,
                     help="soft bodies: 1, linear tets (default), or 2, quadratic (10-node) tets with a node at each "
                          "edge's midpoint, which bend within 4 %% of beam theory with one cell through the "
                          "thickness (wpsim bench --suite fem_convergence)")
    run.add_argument("--control", default=None, metavar="none|hold|sine|FILE.csv",
                     help="robots: how the actuators are driven (default: hold for a robot with actuators, else "
                          "none). none: passive (zero torques and drive targets); hold: position actuators target the "
                          "start pose, velocity actuators target zero speed (they damp, they do not hold a pose), "
                          "motors apply a PD torque towards the start pose plus the torque that holds it still there "
                          "(gravity compensation computed at the start); sine: the start pose plus --amplitude "
                          "sin(2 pi --frequency t) on every actuated joint; FILE.csv (or .npz, the "
                          "wpsim.io.measurements format): its tau:<joint> joint torques (N m or N, no gear applied) and q:<joint> / "
                          "qd:<joint> references of actuated joints, each held until the next sample (the file's first "
                          "time is t = 0; joints without a column get zero controls, as with none)")
    run.add_argument("--q0", default=None, metavar="JOINT=VALUE,...",
                     help="robots: start coordinates of hinge (rad) and slide (m) joints by name, within their "
                          "limits; applied after the keyframe")
    run.add_argument("--key", default=None, metavar="NAME",
                     help="MJCF: start from this <keyframe><key name=...> (default: the file's first key, if any)")
    run.add_argument("--kp", type=float, default=None,
                     help="motor PD stiffness in N m/rad (N/m for slide joints), with --kd in N m s/rad (N s/m) "
                          "(default: kp = M / T^2 and kd = 2 M / T, critical damping, with M the joint-space "
                          "inertia matrix of the motor joints at the start pose)")
    run.add_argument("--kd", type=float, default=None,
                     help="motor PD damping in N m s/rad or N s/m (with --kp); the PD torque is explicit, so keep "
                          "kd * dt well below the lightest joint's inertia")
    run.add_argument("--time-constant", type=float, default=None, metavar="T",
                     help="time constant T in s of the default motor gains (default: max(0.01 s, 10 dt))")
    run.add_argument("--amplitude", type=float, default=0.3,
                     help="sine amplitude in rad (m for slide joints) (default: %(default)s)")
    run.add_argument("--frequency", type=float, default=0.5, help="sine frequency in Hz (default: %(default)s)")
    run.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    run.set_defaults(func=cmd_run)

    from wpsim.opt.minimize import METHODS
    from wpsim.opt.sysid import FAMILIES, JACOBIANS, SHOOTING

    render = sub.add_parser("render", help="render a USD stage's rollout (headless ray caster) into a .gif, .mp4, "
                                           ".png strip or folder of PNGs")
    render.add_argument("stage", help="USD stage (.usd, .usda, .usdc), e.g. written by wpsim run or wpsim demo")
    render.add_argument("--out", default="rollout.gif", help="output: .gif, .mp4 (needs imageio-ffmpeg), .png (an "
                                                             "image strip) or a folder (default: %(default)s)")
    render.add_argument("--take", default=None, help="the take to show when the stage has several (default: the last)")
    render.add_argument("--width", type=int, default=480, help="pixels (default: %(default)s)")
    render.add_argument("--height", type=int, default=360, help="pixels (default: %(default)s)")
    render.add_argument("--fps", type=float, default=30.0,
                        help="frames per second of the video, the stage's time codes resampled (default: 30)")
    render.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    render.set_defaults(func=cmd_render)

    sysid = sub.add_parser("sysid", help="fit a robot's masses, damping, armature, friction, servo gains to measured "
                                         "joint trajectories with their applied torques or controls (CSV or NPZ)")
    sysid.add_argument("robot", help="robot file (.urdf, .xml MJCF, .usd UsdPhysics)")
    sysid.add_argument("data", nargs="+",
                       help="measured run(s): time, q:<joint>, qd:<joint>, tau:<joint> and ctrl:<actuator> columns "
                            "(.csv, .npz; ctrl: a motor's control, which acts times its gear, or a position servo's "
                            "target, as MuJoCo's ctrl); several files are fitted together with one set of parameters, each run replayed from its own "
                            "first state (least squares; every file measuring the same joints)")
    sysid.add_argument("--fit", default="masses,damping,armature",
                       help=f"comma-separated parameter families from {', '.join(FAMILIES)}: masses (kg, every "
                            "body with mass, its inertia scaled alike, log-space), inertia (mass, centre of mass and "
                            "rotational inertia of every body with mass: ten log-Cholesky coordinates each, every value "
                            "a physically realisable body; not with masses), damping (N m s/rad or N s/m) and "
                            "armature (kg m^2 or kg) of every measured 1-dof joint, friction (N m or N: dry friction, "
                            "MuJoCo's frictionloss, as friction-loss rows of the soft-constraint solve, which then "
                            "steps the fit; also wherever the file has dry friction), stiffness (N m/rad or N/m: the "
                            "joint spring about the file's springref), servo_gains (kp in N m/rad or N/m and kv in N m s/rad or "
                            "N s/m of every position servo on a measured joint, its targets from the data's ctrl "
                            "columns), contact_friction (the sliding friction "
                            "coefficient of every robot shape that has a contact pair), initial_state (the measured "
                            "joints' starting "
                            "angles and rates, to absorb noise in the first sample) (default: %(default)s)")
    sysid.add_argument("--method", choices=(*METHODS, "least-squares"), default=None,
                       help="optimiser (default: least-squares, or lbfgsb with --starts > 1); least-squares: "
                            "Gauss-Newton / Levenberg-Marquardt on the joint-angle residuals, 8-20 iterations where "
                            "lbfgsb (tape gradients) needs 60 or more (measured by wpsim bench --suite "
                            "vs_mujoco_sysid: 0.45 CPU s against 31 s on a 9-parameter arm, equal or better fits)")
    sysid.add_argument("--jacobian", choices=JACOBIANS, default="differences",
                       help="least-squares: the residual Jacobian by forward differences over n + 1 worlds of one "
                            "batched float64 rollout (n parameters; default, cheapest), or by adjoint (batched tape "
                            "vector-Jacobian products, exact to round-off, ceil(residuals / 64) forward + backward "
                            "passes)")
    sysid.add_argument("--shooting", choices=SHOOTING, default="auto",
                       help="least-squares with --jacobian differences: multiple fits windows of the run, each "
                            "replayed from its own starting angles and rates (fitted with the parameters, from a "
                            "smoothed fit of the measured angles): a long or chaotic run, whose single rollout "
                            "amplifies every error, becomes many short, well-behaved ones; auto (default) does so "
                            "where a small change of the first state grows 1000-fold within the run; single: one "
                            "rollout of the whole run")
    sysid.add_argument("--window", type=float, default=None,
                       help="multiple shooting's window in s (default: until a small change of the first state "
                            "grows 10-fold, at least 0.05 s)")
    sysid.add_argument("--starts", type=int, default=1,
                       help="fit this many initial guesses (the file's values and random ones within the bounds) as "
                            "worlds of one model and keep the best (default: 1)")
    sysid.add_argument("--residual-every", type=int, default=1,
                       help="least-squares: one residual per joint every N steps (default: 1)")
    sysid.add_argument("--iterations", type=int, default=60, help="optimiser iterations (default: 60)")
    sysid.add_argument("--duration", type=float, default=None, help="use the first DURATION s of the data")
    sysid.add_argument("--dt", type=float, default=None, help="time step in s (default: the robot file's)")
    sysid.add_argument("--zero-order", action="store_true",
                       help="also fit with Nelder-Mead on the same rollout budget and report both")
    sysid.add_argument("--out", default="wpsim_out/sysid", help="output folder (default: %(default)s)")
    sysid.add_argument("--quiet", action="store_true", help="no progress bar")
    sysid.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    sysid.set_defaults(func=cmd_sysid)
    build = sub.add_parser("build-kernels", help="compile every kernel module into Warp's kernel cache ahead of the "
                                                 "first run (in parallel; --arch: CUDA binaries without a GPU)")
    build.add_argument("--device", default="cpu", help="Warp device to build for (default: %(default)s)")
    build.add_argument("--arch", type=int, default=None,
                       help="CUDA compute capability to build for without a GPU, e.g. 90 for sm_90 (Hopper)")
    build.add_argument("--processes", type=int, default=None, help="build processes (default: one per core)")
    build.add_argument("--module", action="append", default=None,
                       help="build only this Warp module, e.g. wpsim.kernels.particles or "
                            "wpsim.kernels.articulation_step.steps (repeatable; default: all)")
    build.set_defaults(func=cmd_build_kernels)
    return parser


USD_COMMANDS = ("demo", "run", "render", "sysid")
"""Commands that read or write USD: ``pxr`` is imported first, with the stop signals held back."""


def main(argv=None) -> int:
    """Entry point of the ``wpsim`` console script: ``_run``; SIGINT and SIGTERM print one line
    (``wpsim: interrupted`` / ``terminated``), exit status 130 / 143 (``wpsim.apps.signals``)."""
    from wpsim.apps.signals import stopping

    return stopping(lambda: _run(argv))


def _run(argv) -> int:
    """Parse ``argv`` and run the command; bad input and failed simulations are one line."""
    from wpsim.apps.signals import import_pxr, received
    from wpsim.core.health import SimulationError

    args = build_parser().parse_args(argv)
    try:
        if args.command in USD_COMMANDS:
            import_pxr()
        return args.func(args)
    except ValueError as error:  # bad input: one line, no traceback
        if received():  # a stop that some library turned into another error
            raise
        print(f"wpsim {args.command}: error: {error}", file=sys.stderr)
        return 2
    except SimulationError as error:  # the simulation itself failed: one line, with what to try
        if received():
            raise
        hint = "; try a smaller --dt" + (" or --contact soft" if args.command == "run" else "")
        print(f"wpsim {args.command}: simulation failed: {error}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # python -m wpsim.apps.cli: as the console script, which reports a stop while wpsim loaded
    from wpsim_cli import main as console_main

    sys.exit(console_main())
