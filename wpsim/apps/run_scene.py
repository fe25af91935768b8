"""Scenes from files for ``wpsim run``: a soft body from a closed surface mesh (OBJ, STL,
PLY; tetrahedralised by ``wpsim.core.meshing``) or from a tetrahedral mesh (``.npz`` with
``vertices`` (V, 3) in m and ``tets`` (E, 4)), dropped onto a ground plane; rigid bodies
from URDF, MJCF or USD with UsdPhysics (loaded with their start pose by
``wpsim.tasks.robot_scene``) with their actuators driven (``RobotControlOptions``); and the
simulation of such a scene into a USD stage.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.health import SimulationBlowUp
from wpsim.core.meshing import cells_through_thinnest, tetrahedralize
from wpsim.io.mesh_files import SURFACE_SUFFIXES, load_surface
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import UsdRecorder
from wpsim.kernels.enums import JOINT_PRISMATIC, JOINT_REVOLUTE
from wpsim.solvers import ImplicitEulerSolver, SemiImplicitSolver, SoftContactOptions
from wpsim.tasks.robot_scene import joint_unit, parse_joint_values


@dataclass
class SoftSceneOptions:
    """Material and placement of a soft body loaded from a file (SI units)."""

    cell_size: float | None = None  # m, voxel cell of the tetrahedral mesher (None: ``auto_tetrahedralize``)
    scale: float = 1.0  # file units to m
    density: float = 1000.0  # kg/m^3
    young_modulus: float = 5.0e4  # Pa
    poisson_ratio: float = 0.3
    damping: float = 1.0  # Pa s, strain-rate damping
    strain_smoothing: bool = False  # face-based strain smoothing of the tets (ModelBuilder.add_tetrahedra)
    order: int = 1  # 1: linear tets; 2: quadratic (10-node) tets, which converge in bending
    drop_height: float = 0.02  # m, gap between the body's lowest point and the ground
    contact_radius: float = 0.001  # m
    ground_ke: float = 1.0e3  # N/m
    ground_kd: float = 0.05  # N s/m
    ground_mu: float = 0.5

    @property
    def element_kind(self) -> str:
        """The tets' kind as ``wpsim bench --suite fem_convergence`` names it."""
        if self.order == 2:
            return "quadratic tets"
        return "strain-smoothed tets" if self.strain_smoothing else "linear tets"


TET_BUDGET = 20_000
"""Tets ``auto_cell_size`` aims to stay under, and above which ``mesh_warnings`` warns."""
VOLUME_TOLERANCE = 0.10
"""Relative volume error of a tet mesh against its surface above which it is warned about."""


def auto_cell_size(lower, upper) -> float:
    """A first mesher cell (m) for a surface with bounding box [lower, upper]: six cells
    across its thinnest side, coarsened where that would fill the box with more than
    ``TET_BUDGET`` tets (six per cell)."""
    extent = np.maximum(np.asarray(upper, np.float64) - np.asarray(lower, np.float64), 1e-9)
    return float(max(extent.min() / 6.0, (np.prod(extent) / (TET_BUDGET / 6.0)) ** (1.0 / 3.0)))


def auto_tetrahedralize(vertices, faces, name: str):
    """The tet mesh of a surface with an automatic cell: from ``auto_cell_size``, shrunk by
    0.7 (at most four times) while the volume is more than ``VOLUME_TOLERANCE`` off and the
    next mesh would stay within ``TET_BUDGET`` tets."""
    cell = auto_cell_size(vertices.min(axis=0), vertices.max(axis=0))
    mesh = tetrahedralize(vertices, faces, cell, name)
    for _ in range(4):
        if abs(mesh.quality["volume_relative_error"]) <= VOLUME_TOLERANCE or len(mesh.tets) / 0.7**3 > TET_BUDGET:
            break
        cell *= 0.7
        mesh = tetrahedralize(vertices, faces, cell, name)
    return mesh, cell


def mesh_warnings(quality: dict) -> list:
    """Warnings about a mesher result: a volume far from the surface's, or too many tets."""
    found = []
    error = quality["volume_relative_error"]
    if abs(error) > VOLUME_TOLERANCE:
        found.append(f"the tet mesh's volume is {error * 100:+.0f} % off the surface's (above "
                     f"{VOLUME_TOLERANCE * 100:.0f} %): try a smaller --cell")
    if quality["tets"] > TET_BUDGET:
        found.append(f"{quality['tets']} tets (more than {TET_BUDGET}) will be slow: try a larger --cell")
    return found


BENDING_CELLS = {"linear tets": 8, "strain-smoothed tets": 8, "quadratic tets": 1}
"""Cells through a soft body's thinnest section below which its bending is more than 10 % too
stiff, per element kind, from ``wpsim bench --suite fem_convergence``'s clamped beam sagging under
its own weight against Timoshenko's sag: linear tets -21.5 % at 4 cells, strain-smoothed -13.3 %,
quadratic -3.1 % at 1; at 8 cells (``wpsim.bench.fem_convergence.measure("cantilever_gravity",
kind, 8)``, beyond the suite's 1, 2 and 4) linear -7.3 %, strain-smoothed -4.5 %."""


def bending_warning(cells: float, kind: str) -> str | None:
    """A warning when ``cells`` through a soft body's thinnest section are below
    ``BENDING_CELLS`` for element ``kind``, else None."""
    needed = BENDING_CELLS[kind]
    if cells >= needed:
        return None
    advice = "use a smaller --cell" if kind == "quadratic tets" else \
        f"try --order 2 (quadratic tets need {BENDING_CELLS['quadratic tets']}) or a smaller --cell"
    return (f"{cells:.1f} cells through the thinnest section: {kind} bend more than 10 % too stiffly with "
            f"fewer than {needed}; {advice}")


def soft_mesh_from_file(path, options: SoftSceneOptions) -> tuple:
    """(vertices (V, 3) in m, tets (E, 4), mesher quality dict with the cell used, or None for
    a .npz tet mesh) of the soft body in ``path``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        vertices, tets = _tet_mesh_npz(path)
        return vertices * options.scale, tets, None
    if suffix not in SURFACE_SUFFIXES:
        raise ValueError(f"{path}: unsupported scene file {suffix!r}; expected {SURFACE_SUFFIXES} or .npz")
    surface = load_surface(path, options.scale)
    if options.cell_size is None:
        mesh, cell = auto_tetrahedralize(surface.vertices, surface.faces, str(path))
    else:
        mesh, cell = tetrahedralize(surface.vertices, surface.faces, options.cell_size, str(path)), options.cell_size
    return mesh.vertices, mesh.tets, {**mesh.quality, "cell_size_m": cell}


def _tet_mesh_npz(path: Path) -> tuple:
    """(vertices (V, 3) float64, tets (E, 4) int64) of a .npz tet mesh, without unused vertices."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):  # empty, truncated or another format (np.load would try pickle)
        raise ValueError(f"{path}: not an .npz archive (a zip of .npy arrays 'vertices' and 'tets')")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive")
        with data:
            vertices, tets = np.asarray(data["vertices"]), np.asarray(data["tets"])
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a tet mesh with arrays 'vertices' and 'tets' ({error})") from error
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) == 0 or not np.issubdtype(vertices.dtype, np.number):
        raise ValueError(f"{path}: 'vertices' must be a non-empty (V, 3) numeric array, got {vertices.shape} "
                         f"{vertices.dtype}")
    if tets.ndim != 2 or tets.shape[1] != 4 or len(tets) == 0 or not np.issubdtype(tets.dtype, np.integer):
        raise ValueError(f"{path}: 'tets' must be a non-empty (E, 4) integer array, got {tets.shape} {tets.dtype}")
    if tets.min() < 0 or tets.max() >= len(vertices):
        raise ValueError(f"{path}: a tet vertex index is outside [0, {len(vertices)})")
    used, compact = np.unique(tets, return_inverse=True)  # vertices no tet uses would be fixed particles
    return vertices[used].astype(np.float64), compact.reshape(-1, 4).astype(np.int64)


def check_writable(path, what: str, folder: bool = False):
    """Raise ValueError unless files can be created at ``path`` (a file, or a folder with
    ``folder`` or without a suffix): nothing in the way is a file and the nearest existing folder
    is writable; names ``what`` (e.g. the option). Creates nothing."""
    import tempfile

    path = Path(path)
    folder = folder or not path.suffix
    if path.is_dir() and not folder:
        raise ValueError(f"{what} {path}: is a folder")
    existing = (path if folder else path.parent).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{what} {path}: {existing} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".wpsim-write-check-"):
            pass
    except OSError as error:
        raise ValueError(f"{what} {path}: cannot write there ({error.strerror or error})") from None


def check_outputs(what: str, out, inputs, names=()):
    """Refuse the output ``out`` (named by ``what``) before any work: if it would replace one of
    the files ``inputs`` (None entries and non-files skipped) - ``out`` itself, or with ``names``
    the files of those names that the command writes into the folder ``out`` - if ``out`` is a
    frames folder (no suffix, no ``names``: numbered files) that holds one of them at any depth,
    or if it cannot be written (``check_writable``)."""
    import os

    targets = [Path(out) / name for name in names] if names else [Path(out)]
    frames_folder = Path(out).resolve() if not names and not Path(out).suffix else None
    for source in inputs:
        if source is None or not os.path.isfile(source):
            continue
        if frames_folder is not None and frames_folder in Path(source).resolve().parents:
            raise ValueError(f"{what} {out}: the frames folder holds the input {source}; write the frames elsewhere")
        for target in targets:
            if target.exists() and os.path.samefile(target, source):
                raise ValueError(f"{what} {out}: would overwrite the input {source}")
    check_writable(out, what, folder=bool(names))


MAX_STEPS = 10_000_000
"""The most steps ``wpsim run`` takes (about 3 h of simulated time at 1 ms)."""
MAX_DT = 1.0
"""The longest time step (s) ``wpsim run`` accepts."""


def check_run_options(options: SoftSceneOptions, out, fps: float, video=None, dt: float | None = None,
                      steps: int = 1):
    """Reject bad ``wpsim run`` settings (and unwritable outputs) before anything is
    simulated; ``dt`` None means the scene's own step."""
    from wpsim.io.render import VIDEO_SUFFIXES

    if dt is not None and not (np.isfinite(dt) and 0.0 < dt <= MAX_DT):
        raise ValueError(f"--dt must be a finite time step > 0 s and <= {MAX_DT:g} s, got {dt}")
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"--steps must be >= 1 and <= {MAX_STEPS:,}, got {steps}")
    if not (np.isfinite(fps) and fps > 0.0):
        raise ValueError(f"--fps must be a finite rate > 0 frames/s, got {fps}")

    if Path(out).suffix not in (".usd", ".usda", ".usdc"):
        raise ValueError(f"{out}: the output must be a USD stage (.usd, .usda or .usdc)")
    check_writable(out, "--out")
    if video is not None:
        if Path(video).suffix.lower() not in (*VIDEO_SUFFIXES, ".png", ""):
            raise ValueError(f"--video {video}: use .gif, .mp4, .png (an image strip) or a folder (numbered PNGs)")
        check_writable(video, "--video")
    if not 0.0 <= options.drop_height < np.inf:
        raise ValueError(f"drop height must be finite and >= 0 m (above the ground), got {options.drop_height}")
    if options.order not in (1, 2):
        raise ValueError(f"--order must be 1 (linear tets) or 2 (quadratic tets), got {options.order!r}")
    if options.order == 2 and options.strain_smoothing:
        raise ValueError("--strain-smoothing is for linear tets; quadratic tets (--order 2) need none")
    if options.cell_size is not None and not 0.0 < options.cell_size < np.inf:
        raise ValueError(f"--cell must be finite and > 0 m, got {options.cell_size}")
    for name in ("scale", "density", "young_modulus"):
        if not 0.0 < getattr(options, name) < np.inf:
            raise ValueError(f"{name} must be finite and > 0, got {getattr(options, name)}")


ROBOT_TIME_STEP = 1.0e-3
"""The time step (s) ``wpsim run`` takes for a URDF or UsdPhysics robot whose file sets none
(an MJCF file always has one: MuJoCo's default where it sets none, ``wpsim.io.mjcf``)."""


CONTROL_MODES = ("none", "hold", "sine")
"""``--control`` words; anything else must be a ``wpsim.io.measurements`` file (.csv, .npz)."""
DATA_SUFFIXES = (".csv", ".npz")


@dataclass
class RobotControlOptions:
    """Start pose and actuator drive of a robot for ``wpsim run`` (SI units; see
    ``robot_controller``)."""

    mode: str | None = None  # none, hold, sine or a data file; None: hold with actuators, else none
    kp: float | None = None  # N m/rad or N/m, motor PD stiffness (None: from the effective inertia)
    kd: float | None = None  # N m s/rad or N s/m, motor PD damping (with kp)
    time_constant: float | None = None  # s, of the derived motor gains (None: max(0.01 s, 10 dt))
    amplitude: float = 0.3  # rad or m, sine
    frequency: float = 0.5  # Hz, sine
    q0: str | None = None  # "JOINT=VALUE,..." start coordinates (rad or m)
    key: str | None = None  # MJCF <key> name (None: the file's first key, if any)


def check_control_options(options: RobotControlOptions):
    """Reject bad robot options (naming the option) before anything is imported."""
    mode = options.mode
    if mode is not None and mode not in CONTROL_MODES and Path(mode).suffix.lower() not in DATA_SUFFIXES:
        raise ValueError(f"--control {mode}: expected {', '.join(CONTROL_MODES)} or a .csv / .npz data file")
    if (options.kp is None) != (options.kd is None):
        raise ValueError("--kp and --kd go together (give both, or neither to derive them from --time-constant)")
    for option, value in (("--kp", options.kp), ("--kd", options.kd)):
        if value is not None and not (np.isfinite(value) and value >= 0.0):
            raise ValueError(f"{option} must be a finite number >= 0, got {value}")
    if options.time_constant is not None and not (np.isfinite(options.time_constant) and options.time_constant > 0.0):
        raise ValueError(f"--time-constant must be > 0 s, got {options.time_constant}")
    if not (np.isfinite(options.amplitude) and options.amplitude >= 0.0):
        raise ValueError(f"--amplitude must be a finite number >= 0 (rad or m), got {options.amplitude}")
    if not (np.isfinite(options.frequency) and options.frequency > 0.0):
        raise ValueError(f"--frequency must be > 0 Hz, got {options.frequency}")
    parse_joint_values(options.q0)


def control_mode(options: RobotControlOptions, scene) -> str:
    """The ``--control`` a robot gets: the option's, else hold with actuators, none without."""
    return options.mode or ("hold" if scene.actuators else "none")


def robot_controller(builder: ModelBuilder, scene, path, options: RobotControlOptions, dt: float, steps: int) -> tuple:
    """(make, description): ``make(model)`` builds the ``JointPDController`` driving the robot's
    actuators as ``options.mode`` says (None: no controller, ``none``), for ``steps`` steps of
    ``dt`` s; the description names what it does. Actuators (``ImportedScene.actuators``):

    - position: the drive target joint_target_q is the reference (the file's kp acts on it);
    - velocity: joint_target_qd is the reference's rate (the file's kv acts on it): ``hold``
      damps motion without holding a position;
    - motor: a PD joint torque kp (q* - q) + kd (qd* - qd) with the stated kp, kd, or kp =
      M / T^2, kd = 2 M / T (critical damping, time constant T) with M the joint-space inertia
      of the motor joints at the start pose (``effective_inertia``, other joints free).

    ``hold``: the reference is the start pose, and motors add the torque that holds it still
    there (gravity compensation at the start); ``sine``: the start pose plus amplitude sin(2 pi
    f t) on every actuated joint (motors with that same holding torque); a data file
    (``wpsim.io.measurements``): its ``tau:<joint>`` generalized forces (N m or N, on any
    hinge or slide joint; joint torques, no gear applied), ``q:<joint>`` / ``qd:<joint>``
    references of actuated joints (a motor's needs a ``q:`` column) replayed held over each
    sample (file time ``time[0]`` is t = 0); joints without a column get zero controls, as
    with ``none``."""
    from wpsim.solvers.controllers import JointPDController, effective_inertia

    mode = control_mode(options, scene)
    if mode == "none":
        return None, "none (passive: zero torques and drive targets)"
    types, _, _ = builder.joint_offsets()
    kinds = {actuator["joint"]: actuator["kind"] for actuator in scene.actuators}
    names = {joint: name for name, joint in scene.joints.items()}
    columns, rows = {}, 1
    if mode in CONTROL_MODES:
        if not kinds:
            raise ValueError(f"--control {mode}: {path} has no actuators to drive")
        start_pose, motors = list(kinds), [j for j, kind in kinds.items() if kind == "motor"]
    else:
        columns, rows = _replayed_columns(mode, scene, types, kinds, dt, steps), steps
        start_pose, motors = [], [scene.joints[n] for k, n in columns if k == "q" and kinds[scene.joints[n]] == "motor"]
    time_constant = options.time_constant or max(0.01, 10.0 * dt)
    amplitude = options.amplitude if mode == "sine" else 0.0

    def make(model):
        state = model.state(requires_grad=False)
        q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
        q_init = state.joint_q.numpy().astype(np.float64)
        dofs = model.joint_dof_count
        schedules = {kind: np.zeros((rows, dofs)) for kind in ("q", "qd", "tau")}
        wave = np.zeros(dofs)
        for joint in start_pose:
            schedules["q"][:, qd_start[joint]] = q_init[q_start[joint]]
            wave[qd_start[joint]] = amplitude
        for (kind, name), values in columns.items():
            schedules[kind][:, qd_start[scene.joints[name]]] = values
        kp = kd = None
        pd = qd_start[np.asarray(motors, dtype=np.int64)]
        if pd.size:
            inertia, rest_acceleration = effective_inertia(model, state, pd)
            stiffness, damping = ((inertia / time_constant**2, 2.0 * inertia / time_constant) if options.kp is None
                                  else (np.eye(pd.size) * options.kp, np.eye(pd.size) * options.kd))
            kp, kd = np.zeros((dofs, dofs)), np.zeros((dofs, dofs))
            kp[np.ix_(pd, pd)], kd[np.ix_(pd, pd)] = stiffness, damping
            if mode in CONTROL_MODES:
                schedules["tau"][:, pd] -= inertia @ rest_acceleration
        return JointPDController(model, dt, schedules["q"], schedules["qd"], schedules["tau"], kp, kd, wave,
                                 options.frequency if mode == "sine" else 0.0)

    gains = (f"kp {options.kp:g}, kd {options.kd:g}" if options.kp is not None else
             f"kp = M / T^2, kd = 2 M / T with T = {time_constant:g} s")
    named = mode not in CONTROL_MODES or set(motors) != set(kinds)
    pd_text = (f"; motor PD ({gains})" + (f" on {', '.join(names[j] for j in motors)}" if named else "")) if motors else ""
    if mode == "hold":
        what = f"hold the start pose{pd_text}" + (" + the torque holding the start pose" if motors else "")
    elif mode == "sine":
        what = f"sine of {options.amplitude:g} rad (m) at {options.frequency:g} Hz around the start pose{pd_text}"
    else:
        what = f"replay {mode} ({', '.join(f'{kind}:{name}' for kind, name in columns)}){pd_text}"
    return make, what + (f"; actuated: {', '.join(names[j] for j in kinds)}" if mode in CONTROL_MODES else "")


def _replayed_columns(path, scene, types, kinds: dict, dt: float, steps: int) -> dict:
    """{(kind, joint name): (steps,) values held over each sample} of a data file driving the
    robot (see ``robot_controller``)."""
    from wpsim.io.measurements import MeasurementError, load_trajectory

    data = load_trajectory(path)
    for column in data.columns:
        if column.partition(":")[0] not in ("tau", "q", "qd"):
            raise MeasurementError(f"{path}: column {column!r}: wpsim run replays tau:, q: and qd: columns only")
    one_dof = [n for n, j in scene.joints.items() if int(types[j]) in (JOINT_REVOLUTE, JOINT_PRISMATIC)]
    for kind in ("tau", "q", "qd"):
        data.require(kind, one_dof, "hinge or slide joint of the robot")
    actuated = ", ".join(n for n in one_dof if scene.joints[n] in kinds) or "none"
    for kind in ("q", "qd"):
        for name in data.names(kind):
            joint = scene.joints[name]
            if joint not in kinds:
                raise MeasurementError(f"{path}: column '{kind}:{name}' is a reference for joint {name!r}, which no "
                                       f"actuator drives (actuated: {actuated})")
            if kind == "qd" and kinds[joint] == "motor" and name not in data.names("q"):
                raise MeasurementError(f"{path}: column 'qd:{name}': motor joint {name!r} also needs a 'q:{name}' "
                                       "column (a PD reference), or give 'tau:' only")
    end = data.time[0] + dt * (steps - 1)
    if end > data.time[-1] + 1e-9 * max(1.0, abs(data.time[-1])):
        raise MeasurementError(f"{path}: the data covers {data.time[0]:g}-{data.time[-1]:g} s, but --steps {steps} "
                               f"of {dt:g} s need {data.time[0]:g}-{end:g} s")
    grid = data.resample(data.time[0] + dt * np.arange(steps), hold=("tau", "q", "qd"))
    return {(kind, name): grid.channel(kind, name) for kind in ("tau", "q", "qd") for name in data.names(kind)}


def soft_scene(path, options: SoftSceneOptions) -> tuple:
    """A ModelBuilder with the ground and the soft body of ``path`` lying ``drop_height``
    above it, and a report: the mesher's quality statistics (none for a .npz tet mesh), the
    cells through the thinnest section and a bending warning (``bending_warning``)."""
    vertices, tets, quality = soft_mesh_from_file(path, options)
    builder = ModelBuilder()
    builder.add_ground_plane(ke=options.ground_ke, kd=options.ground_kd, mu=options.ground_mu)
    lift = options.drop_height + options.contact_radius - vertices[:, 2].min()
    builder.add_soft_mesh(vertices, tets, pos=(0.0, 0.0, lift), density=options.density,
                          young_modulus=options.young_modulus, poisson_ratio=options.poisson_ratio,
                          kd=options.damping, radius=options.contact_radius,
                          strain_smoothing=options.strain_smoothing, order=options.order)
    cells = quality["cells_through_thinnest"] if quality else cells_through_thinnest(vertices, tets)
    return builder, {**(quality or {}), "cells_through_thinnest": cells,
                     "bending_warning": bending_warning(cells, options.element_kind)}


def frame_step_indices(steps: int, dt: float, fps: float) -> np.ndarray:
    """Step indices of frames 0, 1, ... of a recording at ``fps`` (<= 1 / dt) frames per
    second of ``steps`` steps of ``dt`` s: frame j is the step nearest to j / fps s."""
    count = int(np.floor(steps * dt * fps + 1e-9)) + 1
    return np.rint(np.arange(count) / (fps * dt)).astype(np.int64)


def simulate_to_usd(builder: ModelBuilder, out, steps: int, dt: float, fps: float = 60.0, solver: str = "semi-implicit",
                    device=None, soft_contact: SoftContactOptions | None = None, video=None,
                    body_names: dict | None = None, make_controller=None, joint_names: dict | None = None) -> dict:
    """Simulate ``steps`` steps of ``dt`` s (float64), recording ``fps`` frames per second
    into the USD stage ``out`` (and, with ``video``, rendered into that GIF, MP4, PNG strip or
    folder, ``wpsim.io.render``); raises ``SimulationBlowUp`` if the state blows up. Frame j
    (time code j, ``fps`` time codes per second) holds the state of the step nearest to
    j / fps s, within dt / 2; an ``fps`` above 1 / dt records every step (1 / dt frames per
    second). ``soft_contact``: rigid contact and joint limits as soft constraints (semi-implicit
    solver; None: penalty forces). ``body_names`` (body index -> name) name the bodies' prims.
    ``make_controller(model)``: a controller ``(k, state, control)`` filling the Control of
    every step k (e.g. from ``robot_controller``; None: zero controls). ``joint_names`` (joint
    index -> name): the hinge and slide joints whose speeds and distance from the start pose
    are summarised over the recorded frames ("joints", see ``JointWatch``).
    Returns a summary (frames, final height range and speed
    of particles and body origins, Newton statistics)."""
    import warp as wp

    if steps < 1 or not 0.0 < dt <= MAX_DT:
        raise ValueError(f"steps must be >= 1 and dt > 0 s and <= {MAX_DT:g} s, got {steps} and {dt}")
    model = builder.finalize(device=device, dtype=wp.float64)
    if model.particle_count + model.body_count == 0:
        raise ValueError("the scene has no particles or bodies: nothing to simulate")
    kinds = {"semi-implicit": SemiImplicitSolver, "implicit": ImplicitEulerSolver}
    if solver not in kinds:
        raise ValueError(f"unknown solver {solver!r}; expected one of {sorted(kinds)}")
    if soft_contact is not None and solver != "semi-implicit":
        raise ValueError("soft contact is a semi-implicit solver option")
    extra = {} if soft_contact is None else {"soft_contact": soft_contact}
    stepper = kinds[solver](model, raise_on_blowup=True, health_check_interval=100, **extra)
    fps = min(float(fps), 1.0 / dt)  # at most one frame per step
    frame_steps = iter(frame_step_indices(steps, dt, fps)[1:])
    next_frame = next(frame_steps, None)
    recorder = UsdRecorder(model, fps=fps, body_names=body_names)
    a, b = model.state(requires_grad=False), model.state(requires_grad=False)
    controller = None if make_controller is None else make_controller(model)
    control = None if controller is None else model.control(requires_grad=False)
    recorder.record(a)
    watch = None if not joint_names else JointWatch(model, joint_names, a)
    frames = [_copy(model, a)] if video is not None else None
    report_every = max(1, steps // 10)
    for k in range(1, steps + 1):
        if controller is not None:
            controller(k - 1, a, control)
        try:
            stepper.step(a, b, control, dt)
            if k == next_frame or k == steps:
                stepper.check_health()  # a blow-up is reported as such, before a frame is recorded
        except SimulationBlowUp as error:
            raise SimulationBlowUp(f"{error}; {worst_element(model, b, body_names or {})}") from error
        a, b = b, a
        if k == next_frame:
            next_frame = next(frame_steps, None)
            recorder.record(a)
            if watch is not None:
                watch.record(a, k * dt)
            if frames is not None:
                frames.append(_copy(model, a))
        if k % report_every == 0:
            q, qd = _points(model, a)
            progress_line(k // report_every, steps // report_every, f"t = {k * dt:.3f} s   lowest point "
                          f"z = {q[:, 2].min() * 1e3:.2f} mm   max speed {np.abs(qd).max():.3f} m/s")
    path = recorder.write(out)
    if frames is not None:
        from wpsim.io.render import render_rollout

        render_rollout(model, frames, video, fps=recorder.fps)
    q, qd = _points(model, a)
    summary = {"usd": str(path), "frames": recorder.frame_count, "fps": recorder.fps, "particles": model.particle_count,
               "tets": model.tet_count, "bodies": model.body_count, "final_lowest_z_m": float(q[:, 2].min()),
               "final_highest_z_m": float(q[:, 2].max()), "final_max_speed_m_per_s": float(np.abs(qd).max())}
    if solver == "implicit":
        summary["unconverged_steps"] = stepper.unconverged_steps
    if video is not None:
        summary["video"] = str(video)
    if watch is not None:
        summary["joints"] = watch.summary(a)
    return summary


class JointWatch:
    """Speeds and distances from the start pose of named hinge and slide joints, over the
    recorded frames of a run."""

    def __init__(self, model, joint_names: dict, start):
        types = model.joint_type.numpy()
        self.joints = [(j, name) for j, name in sorted(joint_names.items())
                       if int(types[j]) in (JOINT_REVOLUTE, JOINT_PRISMATIC)]
        self.units = [joint_unit(int(types[j])) for j, _ in self.joints]
        self.coords = model.joint_q_start.numpy()[[j for j, _ in self.joints]].astype(np.int64)
        self.dofs = model.joint_qd_start.numpy()[[j for j, _ in self.joints]].astype(np.int64)
        self.start = start.joint_q.numpy().astype(np.float64)[self.coords]
        self.speed = (0.0, 0, 0.0)  # (value, index into joints, time s)
        self.distance = (0.0, 0, 0.0)
        self.record(start, 0.0)

    def record(self, state, t: float):
        """Take in the state of time ``t`` (s)."""
        if not self.joints:
            return
        speed = np.abs(state.joint_qd.numpy().astype(np.float64)[self.dofs])
        distance = np.abs(state.joint_q.numpy().astype(np.float64)[self.coords] - self.start)
        for name, values in (("speed", speed), ("distance", distance)):
            i = int(np.argmax(values))
            if values[i] > getattr(self, name)[0]:
                setattr(self, name, (float(values[i]), i, t))

    def summary(self, final) -> dict:
        """Largest speed (rad/s or m/s) and distance from the start pose (rad or m) over the
        frames, with their joint and time (s), and the final pose's largest distance."""
        if not self.joints:
            return {}
        distance = np.abs(final.joint_q.numpy().astype(np.float64)[self.coords] - self.start)
        last = int(np.argmax(distance))

        def entry(value, i, t=None):
            item = {"value": value, "joint": self.joints[i][1], "unit": self.units[i]}
            return item if t is None else {**item, "time_s": t}

        return {"max_speed": {**entry(*self.speed), "unit": self.units[self.speed[1]] + "/s"},
                "max_distance_from_start": entry(*self.distance),
                "final_distance_from_start": entry(float(distance[last]), last)}


def _copy(model, state):
    """A State holding ``state``'s positions and velocities."""
    copy = model.state(requires_grad=False)
    copy.assign(state)
    return copy


def worst_element(model, state, body_names: dict) -> str:
    """Which particle or body of ``state`` is furthest gone: the first with a non-finite
    position or velocity, else the one farthest from the origin or fastest (relative to the
    blow-up limits of 1e5 m and 1e5 m/s), with its position (m) and speed (m/s)."""
    q, qd = _points(model, state)
    with np.errstate(invalid="ignore", over="ignore"):
        badness = np.maximum(np.linalg.norm(q, axis=1), np.linalg.norm(qd, axis=1))
    badness[~(np.isfinite(q).all(axis=1) & np.isfinite(qd).all(axis=1))] = np.inf
    i = int(np.argmax(badness))
    if i < model.particle_count:
        what = f"particle {i}"
    else:
        body = i - model.particle_count
        what = f"body {body_names[body]!r} ({body})" if body in body_names else f"body {body}"
    return f"worst: {what} at {np.array2string(q[i], precision=3)} m moving {np.linalg.norm(qd[i]):.3g} m/s"


def _points(model, state) -> tuple:
    """Positions (N, 3) m and velocities (N, 3) m/s of the particles and body origins."""
    from wpsim.solvers.kinematics import eval_fk

    eval_fk(model, state)
    q = np.concatenate([state.particle_q.numpy().reshape(-1, 3), state.body_q.numpy().reshape(-1, 7)[:, :3]])
    qd = np.concatenate([state.particle_qd.numpy().reshape(-1, 3), state.body_qd.numpy().reshape(-1, 6)[:, 3:]])
    return q, qd
