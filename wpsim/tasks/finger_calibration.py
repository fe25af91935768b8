"""Soft-robot calibration: a fibre-actuated soft finger whose Young's modulus, Poisson ratio,
damping and actuation gain are fitted to measured marker trajectories.

The finger is the tet mesh of ``assets/soft_finger_tets.npz`` (a capsule of radius 8 mm,
60 mm long along +x, 984 tets of 4 mm cells) made quadratic (a node at every edge's
midpoint, 1855 nodes: linear tets of that size lock in bending and curl 21 % less than a
mesh twice as fine; see the ``fem_convergence`` suite), 1100 kg/m^3, clamped at its base
(nodes with x < 4.5 mm fixed) and held horizontally under gravity 0.1 m above the ground
(which it does not reach). The tets of its upper half (z > 0) carry fibres along x; a known
activation schedule contracts them (a = -0.15 sin^2(pi t / T) times a gain) so that the
finger curls up and back down in T = 0.3 s. Six markers inside it (4 mm from its axis,
along the top and one side) are "filmed" at 500 Hz.

The measured runs (``assets/make_finger_data.py``) come from the same model with known
parameters (``TRUTH``), and from a converged reference: the finger meshed finer (each tet
split into 8, 7872 quadratic tets, 2 mm cells) plus 0.5 mm of camera noise. The calibration
(``FingerCalibration``) fits the modulus and the Poisson ratio (through the Lame parameters
of every tet, ``DerivedParameter``), the damping (one value for every tet) and the gain of
the activation controller (``ActivationSchedule``) to the markers by Levenberg-Marquardt
(``wpsim.opt.least_squares``) with a forward-difference Jacobian: five rollouts per
iteration cost less than one tape gradient of the quadratic finger (about nine rollouts'
worth), and the noisy fit converges in 16. ``targets`` says whether a fit meets the
calibration's targets. The demo, ``wpsim demo``, runs the fit
and writes its report (``wpsim.apps.finger_demo``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.core.builder import ModelBuilder
from wpsim.core.validation import lame_parameters
from wpsim.diff.markers import TetMarkers
from wpsim.opt.least_squares import DifferenceResiduals
from wpsim.opt.parameters import DerivedParameter, Parameter, ParameterSet
from wpsim.solvers import SemiImplicitSolver
from wpsim.solvers.controllers import ActivationSchedule

ASSETS = Path(__file__).resolve().parents[2] / "assets"
MESH = ASSETS / "soft_finger_tets.npz"
DATA = {"same": ASSETS / "soft_finger_markers_same.csv", "fine": ASSETS / "soft_finger_markers_fine.csv"}
"""Measured runs: from the calibrated mesh itself (exact), and from the finer mesh with noise."""
TRUTH = {"young_modulus": 1.0e5, "poisson_ratio": 0.3, "damping": 10.0, "gain": 1.0}
"""Parameters of the measured finger: Pa, -, Pa s, -."""
UNITS = {"young_modulus": "Pa", "poisson_ratio": "-", "damping": "Pa s", "gain": "-"}
NOISE = 5.0e-4
"""Camera noise (m, Gaussian, per coordinate) of the converged reference's markers."""
NOISE_RMS_MM = float(np.sqrt(3.0)) * NOISE * 1e3
"""The RMS marker distance (mm) that the noise alone leaves: the fit's floor."""
DENSITY = 1100.0  # kg/m^3
CLAMP_X = 4.5e-3  # m: vertices closer to the base are fixed
HEIGHT = 0.1  # m: the finger's axis above the ground
AMPLITUDE = -0.15  # peak fibre activation (contraction)
MARKERS = {
    "top_15": (0.015, 0.0, 0.004), "top_30": (0.030, 0.0, 0.004), "top_45": (0.045, 0.0, 0.004),
    "top_57": (0.057, 0.0, 0.004), "side_30": (0.030, 0.004, 0.0), "side_50": (0.050, 0.004, 0.0),
}
"""Marker positions in the finger's rest frame (m; the base at x = 0, the axis along x)."""
MARKER_COLOR = {"measured": (0.2, 0.4, 0.95), "simulated": (1.0, 0.55, 0.1)}
"""RGB of the measured (blue) and simulated (orange) markers in pictures and stages."""
MARKER_RADIUS = {"measured": 1.5e-3, "simulated": 1.2e-3}
"""Drawn radius (m) of the measured and simulated markers."""


@dataclass
class FingerConfig:
    """Settings of a calibration run."""

    duration_s: float = 0.3
    dt: float = 2.5e-5  # s: stable over the whole box of bounds for quadratic 4 mm tets
    frame_every: int = 80  # steps between camera frames (500 Hz)
    order: int = 2  # the calibrated finger's tets: 2 quadratic, 1 strain-smoothed linear
    initial: dict = field(default_factory=lambda: {"young_modulus": 5.0e4, "poisson_ratio": 0.4, "damping": 5.0,
                                                   "gain": 0.7})
    iterations: int = 20  # Levenberg-Marquardt iterations (Jacobians) at most

    @property
    def steps(self) -> int:
        return int(round(self.duration_s / self.dt))


def build_finger(vertices, tets, young_modulus: float, poisson_ratio: float, damping: float, device=None,
                 requires_grad: bool = True, order: int = 2):
    """The clamped finger (float64) of the tet mesh (vertices (V, 3) m in the rest frame), of
    quadratic tets (``order`` 2: a node at every edge's midpoint) or strain-smoothed linear
    tets (``order`` 1, ``ModelBuilder.add_tetrahedra``)."""
    vertices, tets = np.asarray(vertices, dtype=np.float64), np.asarray(tets)
    centres = vertices[tets].mean(axis=1)
    fiber = np.where(centres[:, 2:3] > 0.0, [[1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]])
    builder = ModelBuilder()
    builder.add_ground_plane()
    builder.add_soft_mesh(vertices, tets, pos=(0.0, 0.0, HEIGHT), density=DENSITY, young_modulus=young_modulus,
                          poisson_ratio=poisson_ratio, kd=damping, fiber=fiber, radius=0.002,
                          fixed=np.flatnonzero(vertices[:, 0] < CLAMP_X), strain_smoothing=order == 1,
                          order=order)
    return builder.finalize(device=device, requires_grad=requires_grad, dtype=wp.float64)


def load_mesh(path=MESH) -> tuple:
    """(vertices (V, 3) m, tets (E, 4)) of a tet mesh file (.npz with those arrays)."""
    with np.load(path) as mesh:
        return mesh["vertices"].astype(np.float64), mesh["tets"].astype(np.int64)


def activation_schedule(model, steps: int, dt: float) -> np.ndarray:
    """(steps, E) activations: AMPLITUDE sin^2(pi t / T) on the fibre tets, 0 elsewhere."""
    fibred = np.linalg.norm(model.tet_fiber.numpy(), axis=1) > 0.0
    t = dt * np.arange(steps)
    return AMPLITUDE * np.sin(np.pi * t / (dt * steps))[:, None] ** 2 * fibred[None, :]


def markers(model) -> TetMarkers:
    """The finger's markers, placed at rest (lifted to the finger's height)."""
    points = np.array(list(MARKERS.values())) + (0.0, 0.0, HEIGHT)
    return TetMarkers(model, list(MARKERS), points)


def marker_columns(times, positions: np.ndarray) -> dict:
    """``marker:<name>:x|y|z`` columns (``wpsim.io.measurements``) of positions (N, M, 3)."""
    return {f"marker:{name}:{axis}": positions[:, m, a] for m, name in enumerate(MARKERS)
            for a, axis in enumerate("xyz")}


def camera_frames(model, config: FingerConfig, schedule: ActivationSchedule):
    """Yield the state at t = 0 and at every camera frame of an unrecorded run (the same
    object each time: read it before the next one)."""
    solver = SemiImplicitSolver(model, raise_on_blowup=True, health_check_interval=100)
    state, following = model.state(requires_grad=False), model.state(requires_grad=False)
    control = model.control(requires_grad=False)
    yield state
    for k in range(config.steps):
        schedule(k, state, control)
        solver.step(state, following, control, config.dt)
        state, following = following, state
        if (k + 1) % config.frame_every == 0:
            yield state


def simulate_markers(model, config: FingerConfig, schedule: ActivationSchedule,
                     probe: TetMarkers | None = None) -> np.ndarray:
    """(frames + 1, M, 3) marker positions (m) at every camera frame, unrecorded (``probe``:
    the finger's markers, located anew if None)."""
    probe = probe or markers(model)
    return np.array([probe.positions(state).numpy() for state in camera_frames(model, config, schedule)])


def material(tet_count: int):
    """The map (Young's modulus Pa, Poisson ratio) -> Lame arrays of ``tet_count`` tets."""

    def build(values: np.ndarray) -> dict:
        mu, lam = lame_parameters(values[0], values[1])
        return {"model.tet_mu": np.full(tet_count, mu[0]), "model.tet_lambda": np.full(tet_count, lam[0])}

    return build


class FingerRun:
    """One finger at the initial guesses with its markers, activation controller and the four
    parameters bound to them; ``simulate`` runs it with new values."""

    def __init__(self, config: FingerConfig, device=None):
        self.config = config
        init = config.initial
        vertices, tets = load_mesh()
        self.model = build_finger(vertices, tets, init["young_modulus"], init["poisson_ratio"], init["damping"], device,
                                  order=config.order)
        self.markers = markers(self.model)
        self.schedule = ActivationSchedule(self.model, activation_schedule(self.model, config.steps, config.dt),
                                           init["gain"])
        # the bounds keep the explicit step stable (stiffer, more incompressible or more damped
        # fingers need a smaller one)
        self.parameters = [
            DerivedParameter("material", [init["young_modulus"], init["poisson_ratio"]], material(self.model.tet_count),
                             labels=("young_modulus", "poisson_ratio"), units=("Pa", "-"),
                             lower=[2.0e4, 0.05], upper=[2.0e5, 0.42], scale=[init["young_modulus"], 0.1]),
            Parameter("model.tet_kd", shared=True, log=True, name="damping", lower=0.5, upper=15.0),
            Parameter("controller.gain", log=True, name="gain", unit="-", lower=0.2, upper=3.0),
        ]
        """The declared parameters (a ``Problem`` over this finger's rollout can take them)."""
        self.params = ParameterSet(self.parameters, {"model": self.model, "controller": self.schedule})

    def simulate(self, x: np.ndarray) -> np.ndarray:
        """Marker positions (frames + 1, M, 3) m with the physical parameter values ``x`` (in
        ``params.labels`` order)."""
        self.params.write(np.asarray(x, dtype=np.float64))
        return simulate_markers(self.model, self.config, self.schedule, self.markers)


class FingerCalibration:
    """The finger at the initial guesses (``FingerRun``; the model, markers, controller and
    parameters are the first run's), the measured markers on its frames, and the
    least-squares residuals (``wpsim.opt.least_squares.DifferenceResiduals``) of fitting the
    four parameters to them: simulated minus measured markers over the square root of their
    count, so that r . r is the mean squared marker distance (m^2). ``workers`` fingers (default:
    one per CPU core, at most one per parameter) share the Jacobian's runs."""

    def __init__(self, data, config: FingerConfig, device=None, workers: int | None = None):
        import os

        self.config = config
        workers = workers or min(len(UNITS), os.cpu_count() or 1)
        self.runs = [FingerRun(config, device) for _ in range(workers)]
        first = self.runs[0]
        self.model, self.markers, self.schedule, self.params = first.model, first.markers, first.schedule, first.params
        data.require("marker", MARKERS, "marker of the finger")
        frames = config.steps // config.frame_every
        self.times = config.dt * config.frame_every * np.arange(frames + 1)
        grid = data.resample(self.times)
        self.measured = np.stack([grid.channel("marker", name) for name in MARKERS], axis=1)
        self.residuals = DifferenceResiduals(self.params, [run.simulate for run in self.runs], self.measured,
                                             1.0 / np.sqrt(frames * len(MARKERS)))

    def set(self, values: dict):
        """Write the parameters ``values`` (by name) into the model and the controller."""
        self.params.write(np.array([values[label] for label in self.params.labels]))

    def simulate(self, values: dict) -> np.ndarray:
        """Marker positions (frames + 1, M, 3) with the parameters ``values`` (by name)."""
        return self.runs[0].simulate(np.array([values[label] for label in self.params.labels]))


def rms_mm(simulated: np.ndarray, measured: np.ndarray) -> float:
    """RMS distance (mm) between simulated and measured markers over all frames."""
    return float(np.sqrt(np.mean(np.sum((simulated - measured) ** 2, axis=-1))) * 1e3)


def write_usd(path, calibration: FingerCalibration, takes: dict, simulated: dict | None = None):
    """A USD stage of the finger's rollout (every camera frame) for each entry of ``takes``
    (take name -> parameter values by name), as the variants of "iteration", with the
    measured markers (blue points, /World/markers/measured) and, where ``simulated`` (take
    name -> (frames, M, 3) m) has the take, its simulated markers (orange); the values of
    the last take stay in the model."""
    from wpsim.io.usd_export import UsdRecorder

    config, model = calibration.config, calibration.model
    recorder = UsdRecorder(model, 1.0 / (config.dt * config.frame_every))
    for take, values in takes.items():
        calibration.set(values)
        recorder.begin_take(take)
        for state in camera_frames(model, config, calibration.schedule):
            recorder.record(state)
        recorder.add_markers("measured", calibration.measured, MARKER_RADIUS["measured"], MARKER_COLOR["measured"])
        if simulated is not None and take in simulated:
            recorder.add_markers("simulated", simulated[take], MARKER_RADIUS["simulated"], MARKER_COLOR["simulated"])
    return recorder.write(path)


def write_video(path, calibration: FingerCalibration, simulated: np.ndarray, every: int = 3):
    """A GIF of the finger with the model's current parameters at every ``every``-th camera
    frame, the measured markers in blue and ``simulated`` ((frames + 1, M, 3) m) in orange,
    played at a tenth of real time."""
    from wpsim.io.render import SceneRenderer, save_images

    config = calibration.config
    renderer = SceneRenderer(calibration.model, 480, 320)
    images = []
    for k, state in enumerate(camera_frames(calibration.model, config, calibration.schedule)):
        if k % every == 0:
            if renderer.camera is None:
                renderer.camera = _framed_with_curl(renderer, *renderer.bounds(state))
            markers = {"measured": (calibration.measured[k], MARKER_COLOR["measured"], MARKER_RADIUS["measured"]),
                       "simulated": (simulated[k], MARKER_COLOR["simulated"], MARKER_RADIUS["simulated"])}
            images.append(renderer.render(state, markers))
    return save_images(path, images, fps=0.1 / (config.dt * config.frame_every * every))


def _framed_with_curl(renderer, lower, upper):
    """A camera on the finger at rest with room above it for its curl (half its length)."""
    from wpsim.io.render import frame_camera

    reach = upper[0] - lower[0]
    return frame_camera(lower - (0.0, 0.0, 0.1 * reach), upper + (0.0, 0.0, 0.6 * reach), 2, renderer.width,
                        renderer.height, view=(0.2, -1.6, 0.5))


def targets(report: dict) -> dict:
    """Which calibration targets a report meets: on the calibrated mesh's own data every
    parameter within 1 %; on the converged reference's noisy data a marker RMS error at the
    noise floor (within 5 % of the noise's own RMS distance, ``NOISE_RMS_MM``), the modulus
    and the gain within 5 % and the Poisson ratio within 0.05 of the truth."""
    errors = {name: abs(entry["relative_error"]) for name, entry in report["parameters"].items()}
    if report["data"] == DATA["same"].name:
        return {"all_parameters_within_1_percent": max(errors.values()) <= 0.01}
    poisson = report["parameters"]["poisson_ratio"]
    return {"markers_at_the_noise_floor": report["rms_marker_error_mm"]["after"] <= 1.05 * NOISE_RMS_MM,
            "modulus_and_gain_within_5_percent": max(errors["young_modulus"], errors["gain"]) <= 0.05,
            "poisson_ratio_within_0.05": abs(poisson["fitted"] - poisson["truth"]) <= 0.05}
