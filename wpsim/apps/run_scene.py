"""Scenes from files for ``wpsim run``: a soft body from a closed surface mesh (OBJ, STL,
PLY; tetrahedralised by ``wpsim.core.meshing``) or from a tetrahedral mesh (``.npz`` with
``vertices`` (V, 3) in m and ``tets`` (E, 4)), dropped onto a ground plane; rigid bodies
from URDF (with a ground plane added), MJCF or USD with UsdPhysics (as the file describes
its world); and the simulation of such a scene into a USD stage.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.meshing import tetrahedralize
from wpsim.io.mesh_files import SURFACE_SUFFIXES, load_surface
from wpsim.io.progress import progress_line
from wpsim.io.robots import import_robot
from wpsim.io.usd_export import UsdRecorder
from wpsim.solvers import ImplicitEulerSolver, SemiImplicitSolver, SoftContactOptions


@dataclass
class SoftSceneOptions:
    """Material and placement of a soft body loaded from a file (SI units)."""

    cell_size: float | None = None  # m, voxel cell of the tetrahedral mesher (None: ``auto_tetrahedralize``)
    scale: float = 1.0  # file units to m
    density: float = 1000.0  # kg/m^3
    young_modulus: float = 5.0e4  # Pa
    poisson_ratio: float = 0.3
    damping: float = 1.0  # Pa s, strain-rate damping
    drop_height: float = 0.02  # m, gap between the body's lowest point and the ground
    contact_radius: float = 0.001  # m
    ground_ke: float = 1.0e3  # N/m
    ground_kd: float = 0.05  # N s/m
    ground_mu: float = 0.5


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


def check_writable(path, what: str):
    """Raise ValueError unless a file can be created at ``path`` (its folder exists or can
    be made, and is writable), naming ``what`` (e.g. the option)."""
    import os
    import tempfile

    folder = Path(path).parent if Path(path).suffix else Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".wpsim-write-check-"):
            pass
    except OSError as error:
        raise ValueError(f"{what} {path}: cannot write there ({error.strerror or error})") from None
    if Path(path).is_dir() and Path(path).suffix:
        raise ValueError(f"{what} {path}: is a folder")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{what} {path}: the folder is not writable")


def check_run_options(options: SoftSceneOptions, out, fps: float, video=None):
    """Reject bad ``wpsim run`` settings (and unwritable outputs) before anything is
    simulated."""
    from wpsim.io.render import VIDEO_SUFFIXES

    if Path(out).suffix not in (".usd", ".usda", ".usdc"):
        raise ValueError(f"{out}: the output must be a USD stage (.usd, .usda or .usdc)")
    check_writable(out, "--out")
    if video is not None:
        if Path(video).suffix.lower() not in (*VIDEO_SUFFIXES, ".png", ""):
            raise ValueError(f"--video {video}: use .gif, .mp4, .png (an image strip) or a folder (numbered PNGs)")
        check_writable(video, "--video")
    if not fps > 0.0:
        raise ValueError(f"fps must be > 0, got {fps}")
    if not options.drop_height >= 0.0:
        raise ValueError(f"drop height must be >= 0 m (above the ground), got {options.drop_height}")
    if options.cell_size is not None and not options.cell_size > 0.0:
        raise ValueError(f"--cell must be > 0 m, got {options.cell_size}")
    for name in ("scale", "density", "young_modulus"):
        if not getattr(options, name) > 0.0:
            raise ValueError(f"{name} must be > 0, got {getattr(options, name)}")


def robot_scene(path, floating: bool = False) -> tuple:
    """(ModelBuilder, ImportedScene) of a robot file (see ``wpsim.io.robots``); a URDF, which
    describes no world, gets a ground plane."""
    builder, scene = import_robot(path, floating=floating)
    if Path(path).suffix.lower() == ".urdf":
        builder.add_ground_plane(ke=1.0e4, kd=100.0, mu=0.5)
    return builder, scene


def soft_scene(path, options: SoftSceneOptions) -> tuple:
    """A ModelBuilder with the ground and the soft body of ``path`` lying ``drop_height``
    above it, and the mesher's quality statistics (None for a .npz tet mesh)."""
    vertices, tets, quality = soft_mesh_from_file(path, options)
    builder = ModelBuilder()
    builder.add_ground_plane(ke=options.ground_ke, kd=options.ground_kd, mu=options.ground_mu)
    lift = options.drop_height + options.contact_radius - vertices[:, 2].min()
    builder.add_soft_mesh(vertices, tets, pos=(0.0, 0.0, lift), density=options.density,
                          young_modulus=options.young_modulus, poisson_ratio=options.poisson_ratio,
                          kd=options.damping, radius=options.contact_radius)
    return builder, quality


def frame_step_indices(steps: int, dt: float, fps: float) -> np.ndarray:
    """Step indices of frames 0, 1, ... of a recording at ``fps`` (<= 1 / dt) frames per
    second of ``steps`` steps of ``dt`` s: frame j is the step nearest to j / fps s."""
    count = int(np.floor(steps * dt * fps + 1e-9)) + 1
    return np.rint(np.arange(count) / (fps * dt)).astype(np.int64)


def simulate_to_usd(builder: ModelBuilder, out, steps: int, dt: float, fps: float = 60.0, solver: str = "semi-implicit",
                    device=None, soft_contact: SoftContactOptions | None = None, video=None,
                    body_names: dict | None = None) -> dict:
    """Simulate ``steps`` steps of ``dt`` s (float64), recording ``fps`` frames per second
    into the USD stage ``out`` (and, with ``video``, rendered into that GIF, MP4, PNG strip or
    folder, ``wpsim.io.render``); raises ``SimulationBlowUp`` if the state blows up. Frame j
    (time code j, ``fps`` time codes per second) holds the state of the step nearest to
    j / fps s, within dt / 2; an ``fps`` above 1 / dt records every step (1 / dt frames per
    second). ``soft_contact``: rigid contact and joint limits as soft constraints (semi-implicit
    solver; None: penalty forces). ``body_names`` (body index -> name) name the bodies' prims.
    Returns a summary (frames, final height range and speed
    of particles and body origins, Newton statistics)."""
    import warp as wp

    if steps < 1 or not dt > 0.0:
        raise ValueError(f"steps must be >= 1 and dt > 0 s, got {steps} and {dt}")
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
    recorder.record(a)
    frames = [_copy(model, a)] if video is not None else None
    report_every = max(1, steps // 10)
    for k in range(1, steps + 1):
        stepper.step(a, b, None, dt)
        a, b = b, a
        if k == next_frame:
            next_frame = next(frame_steps, None)
            stepper.check_health()  # a blow-up is reported as such, with its step and world
            recorder.record(a)
            if frames is not None:
                frames.append(_copy(model, a))
        if k % report_every == 0:
            q, qd = _points(model, a)
            progress_line(k // report_every, steps // report_every, f"t = {k * dt:.3f} s   lowest point "
                          f"z = {q[:, 2].min() * 1e3:.2f} mm   max speed {np.abs(qd).max():.3f} m/s")
    stepper.check_health()
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
    return summary


def _copy(model, state):
    """A State holding ``state``'s positions and velocities."""
    copy = model.state(requires_grad=False)
    copy.assign(state)
    return copy


def _points(model, state) -> tuple:
    """Positions (N, 3) m and velocities (N, 3) m/s of the particles and body origins."""
    from wpsim.solvers.kinematics import eval_fk

    eval_fk(model, state)
    q = np.concatenate([state.particle_q.numpy().reshape(-1, 3), state.body_q.numpy().reshape(-1, 7)[:, :3]])
    qd = np.concatenate([state.particle_qd.numpy().reshape(-1, 3), state.body_qd.numpy().reshape(-1, 6)[:, 3:]])
    return q, qd
