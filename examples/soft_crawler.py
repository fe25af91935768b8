"""Control optimisation: a soft block robot learns to crawl forward.

A 4x1x2-cell Neo-Hookean block (20 cm long, 5 cm wide, 10 cm high; 20 kPa, 500 kg/m^3)
rests on a ground with friction (mu = 0.8). Each tetrahedron lengthens or shortens along x
(fibre direction (1, 0, 0)) by its signed activation in ``control.tet_activation``. The tets
form four groups (back/front half x bottom/top layer); group g follows a 2 Hz sinusoid
a_g(t) = alpha_g cos(2 pi f t) + beta_g sin(2 pi f t) with amplitude at most 0.3, so the
eight gait parameters set the amplitude and phase of each group. Phase lags between the
groups make the body rock and shift its weight, so friction grips differently in the two
halves of a cycle and the block can walk.

Adam maximises the forward (x) displacement of the centre of mass after 1 s. Every step
gets its own Control whose activation array is one row of a (steps, tets) array; the tape
fills that array's gradient, and the chain rule on the host maps it onto (alpha, beta).
Writes crawl.png (objective per iteration, centre-of-mass path, optimised gait), crawl.usd
(the initial and the optimised gait as the variants "initial" and "optimised" of the set
"iteration") and result.json.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import ModelBuilder, SemiImplicitSolver, simulate
from wpsim.apps.console import example_main
from wpsim.core.validation import lame_parameters
from wpsim.diff import diagnostics
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import write_rollouts
from wpsim.opt.optimisers import Adam
from wpsim.solvers.controllers import step_controls

CELL = 0.05  # m
DIMS = (4, 1, 2)  # cells along x, y, z
DENSITY, MODULUS, POISSON, TET_KD = 500.0, 20e3, 0.3, 1.0  # kg/m^3, Pa, -, Pa s
GROUND_KE, GROUND_KD, GROUND_MU = 2e3, 0.5, 0.8  # N/m, N s/m, -
RADIUS = 0.005  # m, contact radius of the vertices
MAX_AMPLITUDE = 0.3
USD_FPS = 100.0  # frames per second of crawl.usd
GROUPS = ("back bottom", "back top", "front bottom", "front top")


@dataclass
class CrawlConfig:
    """Settings of the gait optimisation."""

    iterations: int = 50
    horizon_s: float = 1.0
    dt: float = 1e-3
    frequency_hz: float = 2.0
    initial_amplitude: float = 0.1  # all groups in phase: the block pulses almost in place
    learning_rate: float = 0.04  # Adam step in activation units

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return int(round(self.horizon_s / self.dt))


def check_time_step(model, dt: float, stiffness: float = 1.0):
    """Print the explicit-step stability margins for the lightest vertex (the tets' Lame
    parameters scaled by ``stiffness``).

    Its fastest mode combines FEM stiffness (lambda + 2 mu) h, raised by up to
    1 / (1 - MAX_AMPLITUDE) in a contracted tet, with the ground stiffness ke:
    omega^2 ~ (k_fem + ke) / m_min, and dt * omega must stay below 2. The dampers (ground
    kd, tet damping ~ kd_tet h) must satisfy kd dt / m_min < 2.
    """
    mass = model.particle_mass.numpy()
    m_min = float(mass[mass > 0].min())
    mu, lam = lame_parameters(MODULUS, POISSON)
    k_fem = stiffness * (lam[0] + 2.0 * mu[0]) * CELL / (1.0 - MAX_AMPLITUDE)
    omega = np.sqrt((k_fem + GROUND_KE) / m_min)
    damping = (GROUND_KD + TET_KD * CELL) * dt / m_min
    print(f"dt = {dt * 1e3:.1f} ms, lightest vertex {m_min * 1e3:.2f} g: dt*omega_max = {dt * omega:.2f} (< 2), "
          f"kd*dt/m = {damping:.2f} (< 2)")


def crawler_builder() -> ModelBuilder:
    """The ground (with friction) and the soft block robot resting on it."""
    builder = ModelBuilder()
    builder.add_ground_plane(ke=GROUND_KE, kd=GROUND_KD, mu=GROUND_MU)
    builder.add_soft_grid(
        pos=(0.0, 0.0, RADIUS), dim_x=DIMS[0], dim_y=DIMS[1], dim_z=DIMS[2], cell_x=CELL, cell_y=CELL,
        cell_z=CELL, density=DENSITY, young_modulus=MODULUS, poisson_ratio=POISSON, kd=TET_KD,
        fiber=(1.0, 0.0, 0.0), radius=RADIUS,
    )
    return builder


def group_membership(model) -> np.ndarray:
    """One-hot group of every tet (tets, groups) from the tet centroids in the rest shape (one world)."""
    centre = model.particle_q.numpy()[model.tet_indices.numpy()].mean(axis=1)
    front = centre[:, 0] > 0.5 * DIMS[0] * CELL
    top = centre[:, 2] > RADIUS + 0.5 * DIMS[2] * CELL
    return np.eye(len(GROUPS))[2 * front + top]


class Crawler:
    """The block robot on the ground, and its displacement as a function of the gait."""

    def __init__(self, config: CrawlConfig, device=None, dtype=wp.float32):
        """Build the robot (in ``dtype``), its tet groups, the gait basis and one Control per step."""
        self.config = config
        self.model = model = crawler_builder().finalize(device=device, requires_grad=True, dtype=dtype)
        self.solver = SemiImplicitSolver(model)
        self.weights = diagnostics.mass_weights(model)
        self.state0 = model.state()
        self.membership = group_membership(model)
        self.times = np.arange(config.steps) * config.dt
        phase = 2.0 * np.pi * config.frequency_hz * self.times
        self.basis = np.stack([np.cos(phase), np.sin(phase)], axis=1)  # (steps, 2)
        self.activation, self.controls = step_controls(model, "tet_activation", config.steps)
        self.lame = model.tet_mu.numpy().astype(np.float64), model.tet_lambda.numpy().astype(np.float64)

    def set_stiffness(self, scales: np.ndarray):
        """Scale both Lame parameters of every tet by its group's factor (groups,)."""
        per_tet = self.membership @ scales
        self.model.tet_mu.assign(self.lame[0] * per_tet)
        self.model.tet_lambda.assign(self.lame[1] * per_tet)

    def group_activations(self, params: np.ndarray) -> np.ndarray:
        """Activation of each group at each step (steps, groups) for params (groups, 2)."""
        return self.basis @ params.T

    def _rollout(self, params: np.ndarray, keep_states: bool = False):
        """Simulate the gait params from rest; the final state, or all states."""
        self.activation.assign(self.group_activations(params) @ self.membership.T)
        self.solver.reset_health()
        result = simulate(self.solver, self.state0, self.config.steps, self.config.dt,
                          control=self.controls.__getitem__, keep_states=keep_states)
        self.solver.check_health()
        return result

    def _com(self, state):
        """Centre of mass (m) of a state, as a one-element device array."""
        return diagnostics.centroids(self.model, state, self.weights)

    def displacement_and_gradient(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        """Forward displacement (m) of the centre of mass and its gradient w.r.t. params (m)."""
        displacement, grad, _ = self.displacement_and_gradients(params)
        return displacement, grad

    def displacement_and_gradients(self, params: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Forward displacement (m) and its gradients w.r.t. the gait params (m) and the
        groups' stiffness scales of ``set_stiffness`` (m per unit scale), about the current scales."""
        tape = wp.Tape()
        with tape:
            com = self._com(self._rollout(params))
        start = self._com(self.state0).numpy()[0, 0]
        forward = wp.array([[1.0, 0.0, 0.0]], dtype=self.model.vec3, device=self.model.device)
        tape.backward(grads={com: forward})
        per_group = self.activation.grad.numpy().astype(np.float64) @ self.membership  # (steps, groups)
        grad = (self.basis.T @ per_group).T
        lame_grad = self.model.tet_mu.grad.numpy() * self.lame[0] + self.model.tet_lambda.grad.numpy() * self.lame[1]
        tape.zero()
        return float(com.numpy()[0, 0] - start), grad, self.membership.T @ lame_grad

    def com_path(self, params: np.ndarray) -> np.ndarray:
        """Centre of mass (steps + 1, 3) in m along a rollout."""
        return np.array([self._com(s).numpy()[0] for s in self._rollout(params, keep_states=True)], dtype=np.float64)


def project(params: np.ndarray) -> np.ndarray:
    """Scale each group's (alpha, beta) down to amplitude MAX_AMPLITUDE where it exceeds it."""
    amplitude = np.linalg.norm(params, axis=1, keepdims=True)
    return params * np.minimum(1.0, MAX_AMPLITUDE / np.maximum(amplitude, 1e-12))


def run(config: CrawlConfig, out_dir, device=None) -> dict:
    """Optimise the gait with Adam; write crawl.png and result.json into out_dir; return the result."""
    crawler = Crawler(config, device)
    check_time_step(crawler.model, config.dt)
    params = np.zeros((len(GROUPS), 2))
    params[:, 0] = config.initial_amplitude
    initial = params.copy()
    optimiser = Adam(lr=config.learning_rate)
    history, best, best_params = [], -np.inf, params
    for it in range(config.iterations + 1):
        displacement, grad = crawler.displacement_and_gradient(params)
        history.append(displacement)
        if displacement > best:
            best, best_params = displacement, params.copy()
        amplitudes = " ".join(f"{a:.2f}" for a in np.linalg.norm(params, axis=1))
        progress_line(it, config.iterations, f"displacement {displacement:+.4f} m   group amplitudes {amplitudes}")
        if it < config.iterations:
            params = project(optimiser.step(params, -grad))  # ascend
    result = {
        "config": asdict(config),
        "groups": list(GROUPS),
        "displacements_m": history,
        "initial_displacement_m": history[0],
        "best_displacement_m": best,
        "initial_params": initial.tolist(),
        "best_params": best_params.tolist(),
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    _plot(out / "crawl.png", crawler, result)
    every = int(round(1.0 / (USD_FPS * config.dt)))
    write_rollouts(out / "crawl.usd", crawler.model, {
        "initial": crawler._rollout(initial, keep_states=True)[::every],
        "optimised": crawler._rollout(best_params, keep_states=True)[::every],
    }, fps=1.0 / (every * config.dt))
    print(f"forward displacement after {config.horizon_s:.1f} s: {history[0]:+.4f} m (initial gait) -> "
          f"{best:+.4f} m (optimised)")
    print(f"wrote {out / 'crawl.png'}, {out / 'crawl.usd'} (variants 'initial' and 'optimised'), "
          f"{out / 'result.json'}")
    return result


def _plot(path, crawler: Crawler, result: dict):
    """Objective per iteration, centre-of-mass path, optimised group activations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (obj, com, gait) = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    obj.plot(np.array(result["displacements_m"]) * 100, marker=".")
    obj.set(xlabel="Adam iteration", ylabel="forward displacement (cm)", title="Objective")
    t = np.arange(crawler.config.steps + 1) * crawler.config.dt
    for key, label in (("initial_params", "initial gait"), ("best_params", "optimised gait")):
        x = crawler.com_path(np.array(result[key]))[:, 0]
        com.plot(t, (x - x[0]) * 100, label=label)
    com.set(xlabel="time (s)", ylabel="centre of mass x - x0 (cm)", title="Centre-of-mass path")
    com.legend(fontsize=8)
    for name, a in zip(GROUPS, crawler.group_activations(np.array(result["best_params"])).T):
        gait.plot(crawler.times, a, label=name)
    gait.set(xlabel="time (s)", ylabel="activation (fibre strain)", title="Optimised gait")
    gait.set_ylim(-1.1 * MAX_AMPLITUDE, 1.8 * MAX_AMPLITUDE)  # room for the legend
    gait.legend(fontsize=8, ncol=2, loc="upper center")
    for ax in (obj, com, gait):
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (short horizon; asserts a clear improvement)."""

    def check(result):
        gain = result["best_displacement_m"] - result["initial_displacement_m"]
        return f"the optimised gait gains only {gain * 100:.2f} cm (< 1 cm)" if gain < 0.01 else None

    return example_main(
        __doc__, "soft_crawler", "short run; fail unless the gait gains > 1 cm",
        lambda test, out, device: run(CrawlConfig(iterations=12, horizon_s=0.5) if test else CrawlConfig(), out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
