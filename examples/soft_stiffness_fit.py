"""System identification: recover the Young's modulus of a soft cantilever from its tip motion.

A 4x1x1-cell Neo-Hookean beam (10 cm x 2.5 cm x 2.5 cm, 1000 kg/m^3, Poisson ratio 0.3),
clamped at x = 0, is released straight and sags and oscillates under gravity. The
"measurement" is the tip marker (centroid of the four free-end vertices) filmed at 100 Hz
in a rollout with a hidden modulus of 30 kPa, with 0.2 mm of Gaussian camera noise.
Starting 3x too soft, the script fits log E (so that E stays positive) by gradient descent
with an adaptive step (``wpsim.opt.optimisers.adaptive_gradient_descent``) on the summed squared tip
error. The Lame parameters of every tet are set from (E, nu)
before each rollout, and dL/dlog E = sum_e (mu_e dL/dmu_e + lambda_e dL/dlambda_e) comes
from the tape's gradients w.r.t. ``model.tet_mu`` and ``model.tet_lambda``.

Writes fit.png (loss per iteration; measured vs fitted tip height), fit.usd (the beam at the
hidden and at the fitted modulus, without noise, as the variants "measured" and "fitted")
and result.json.
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
from wpsim.diff.losses import squared_distance
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip
from wpsim.opt.optimisers import adaptive_gradient_descent

CELLS = 4  # along the beam; one cell across
CELL = 0.025  # m
DENSITY = 1000.0  # kg/m^3


@dataclass
class FitConfig:
    """Settings of the stiffness fit."""

    iterations: int = 20
    horizon_s: float = 0.6
    dt: float = 1e-3
    frame_every: int = 10  # steps between camera frames (100 Hz)
    hidden_modulus_pa: float = 30e3
    initial_modulus_pa: float = 10e3
    poisson_ratio: float = 0.3
    damping_pa_s: float = 2.0  # known strain-rate damping
    noise_m: float = 2e-4
    learning_rate: float = 0.25  # (log E)^2 per unit of relative loss

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return int(round(self.horizon_s / self.dt))


def check_time_step(model, config: FitConfig):
    """Print the explicit-step stability margins at the hidden modulus, and the largest
    modulus at which the step stays stable.

    The stiffest FEM mode of a lumped-mass linear tet mesh has omega_max^2 ~ (lambda + 2 mu) h
    / m_min (h the cell size, m_min the lightest free vertex), and strain-rate damping adds a
    damper of about kd h, which must satisfy kd h dt / m_min < 2.
    """
    mass = model.particle_mass.numpy()
    m_min = float(mass[mass > 0].min())
    mu, lam = lame_parameters(config.hidden_modulus_pa, config.poisson_ratio)
    omega = np.sqrt((lam[0] + 2.0 * mu[0]) * CELL / m_min)
    damping = config.damping_pa_s * CELL * config.dt / m_min
    e_max = config.hidden_modulus_pa * (2.0 / (config.dt * omega)) ** 2
    print(f"dt = {config.dt * 1e3:.1f} ms, lightest vertex {m_min * 1e3:.2f} g: dt*omega_max = {config.dt * omega:.2f} "
          f"(< 2), kd*h*dt/m = {damping:.3f} (< 2); stable for E < {e_max / 1e3:.0f} kPa")


class StiffnessFit:
    """The clamped beam, its measured tip path, and the loss and gradient as functions of log E."""

    def __init__(self, config: FitConfig, device=None):
        """Build the clamped beam and its tip marker weights."""
        self.config = config
        builder = ModelBuilder()
        clamped = np.arange(0, (CELLS + 1) * 4, CELLS + 1)  # x fastest: every (CELLS+1)-th vertex is at x = 0
        builder.add_soft_grid(
            pos=(0.0, 0.0, 0.5), dim_x=CELLS, dim_y=1, dim_z=1, cell_x=CELL, cell_y=CELL, cell_z=CELL,
            density=DENSITY, young_modulus=config.initial_modulus_pa, poisson_ratio=config.poisson_ratio,
            kd=config.damping_pa_s, fixed=clamped,
        )
        self.model = builder.finalize(device=device, requires_grad=True)
        self.solver = SemiImplicitSolver(self.model)
        self.state0 = self.model.state()
        x = self.model.particle_q.numpy()
        tip = np.isclose(x[:, 0], x[:, 0].max())
        self.tip_weights = wp.array(tip / tip.sum(), dtype=self.model.dtype, device=self.model.device)
        self.frames = range(config.frame_every, config.steps + 1, config.frame_every)
        self.times = np.array([0, *self.frames]) * config.dt
        self.measured = None

    def _set_modulus(self, modulus: float):
        """Write the Lame parameters of modulus (Pa) into every tet; return them (Pa)."""
        mu, lam = lame_parameters(modulus, self.config.poisson_ratio)
        self.model.tet_mu.fill_(float(mu[0]))
        self.model.tet_lambda.fill_(float(lam[0]))
        return float(mu[0]), float(lam[0])

    def _rollout(self):
        """All states of one rollout from rest at the current modulus."""
        self.solver.reset_health()
        states = simulate(self.solver, self.state0, self.config.steps, self.config.dt, keep_states=True)
        self.solver.check_health()
        return states

    def tip_path(self, modulus: float) -> np.ndarray:
        """Tip marker positions (frames + 1, 3) in m, starting at t = 0."""
        self._set_modulus(modulus)
        states = self._rollout()
        tips = [diagnostics.centroids(self.model, states[k], self.tip_weights) for k in (0, *self.frames)]
        return np.array([t.numpy()[0] for t in tips], dtype=np.float64)

    def measure(self, seed: int = 0):
        """Film the beam at the hidden modulus, with camera noise."""
        path = self.tip_path(self.config.hidden_modulus_pa)
        path[1:] += np.random.default_rng(seed).normal(0.0, self.config.noise_m, path[1:].shape)
        self.measured = wp.array(path[1:], dtype=self.model.vec3, device=self.model.device)
        return path

    def loss_and_gradient(self, theta) -> tuple[float, np.ndarray]:
        """Summed squared tip error (m^2) and its gradient w.r.t. theta = [log E]."""
        mu, lam = self._set_modulus(float(np.exp(theta[0])))
        tape = wp.Tape()
        with tape:
            states = self._rollout()
            loss = wp.zeros(1, dtype=self.model.dtype, device=self.model.device, requires_grad=True)
            for j, k in enumerate(self.frames):
                tip = diagnostics.centroids(self.model, states[k], self.tip_weights)
                squared_distance(tip, self.measured[j : j + 1], loss=loss)
        tape.backward(loss=loss)
        grad = mu * self.model.tet_mu.grad.numpy().sum() + lam * self.model.tet_lambda.grad.numpy().sum()
        value = float(loss.numpy()[0])
        tape.zero()
        return value, np.array([grad], dtype=np.float64)


def run(config: FitConfig, out_dir, device=None) -> dict:
    """Measure, fit log E, write fit.png and result.json into out_dir; return the result."""
    fit = StiffnessFit(config, device)
    check_time_step(fit.model, config)
    measured = fit.measure()
    print(f"measured {len(fit.frames)} tip frames over {config.horizon_s:.2f} s (hidden E = "
          f"{config.hidden_modulus_pa / 1e3:.1f} kPa, noise {config.noise_m * 1e3:.1f} mm); "
          f"initial guess E = {config.initial_modulus_pa / 1e3:.1f} kPa")
    reference = []

    def relative_loss(theta):
        """Loss and gradient divided by the initial loss, so that the step size is scale free."""
        loss, grad = fit.loss_and_gradient(theta)
        if not reference:
            reference.append(loss)
        return loss / reference[0], grad / reference[0]

    estimates = []  # modulus (Pa) of the best point after each iteration

    def report(it, theta, relative, accepted):
        """Print one progress line and record the current best estimate."""
        estimates.append(float(np.exp(theta[0])) if accepted else estimates[-1])
        loss = relative * reference[0]
        rms = np.sqrt(loss / len(fit.frames))
        mark = "" if accepted else "  (rejected, smaller step)"
        progress_line(it, config.iterations, f"E {np.exp(theta[0]) / 1e3:8.3f} kPa   loss {loss:.3e} m^2   "
                      f"rms tip error {rms * 1e3:6.3f} mm{mark}")

    best, relative = adaptive_gradient_descent(
        relative_loss, [np.log(config.initial_modulus_pa)], config.iterations, config.learning_rate, callback=report
    )
    fitted = float(np.exp(best[0]))
    error = fitted / config.hidden_modulus_pa - 1.0
    result = {
        "config": asdict(config),
        "fitted_modulus_pa": fitted,
        "relative_error": error,
        "losses_m2": [r * reference[0] for r in relative],
        "estimates_pa": estimates,
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    _plot(out / "fit.png", fit, config, result, measured)
    takes = {}
    for name, modulus in (("measured", config.hidden_modulus_pa), ("fitted", fitted)):
        fit._set_modulus(modulus)
        takes[name] = fit._rollout()[::config.frame_every]
    write_rollouts(out / "fit.usd", fit.model, takes, fps=1.0 / (config.frame_every * config.dt))
    render_strip(out / "fit.usd", out / "fit_frames.png", take="fitted")
    print(f"fitted E = {fitted / 1e3:.3f} kPa (hidden {config.hidden_modulus_pa / 1e3:.3f} kPa, "
          f"error {error * 100:+.3f} %)")
    print(f"wrote {out / 'fit.png'}, {out / 'fit.usd'} (variants 'measured' and 'fitted'), {out / 'result.json'}")
    return result


def _plot(path, fit: StiffnessFit, config: FitConfig, result: dict, measured: np.ndarray):
    """Loss curve and tip height over time (measured, initial guess, fitted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    left.semilogy(result["losses_m2"], marker=".")
    left.set(xlabel="iteration (best loss so far)", ylabel="summed squared tip error (m^2)",
             title="Stiffness fit: loss and estimate")
    left.grid(True, which="both", alpha=0.3)
    twin = left.twinx()
    twin.plot(np.array(result["estimates_pa"]) / 1e3, color="tab:green", marker=".", label="estimate")
    twin.axhline(config.hidden_modulus_pa / 1e3, color="tab:green", linestyle=":", label="hidden value")
    twin.set_ylabel("Young's modulus estimate (kPa)", color="tab:green")
    twin.legend(loc="center right", fontsize=8)
    z0 = measured[0, 2]
    right.plot(fit.times, (measured[:, 2] - z0) * 1e3, "k.", markersize=4, label="measured (hidden E + noise)")
    for modulus, style, label in ((config.initial_modulus_pa, "--", "initial guess"),
                                  (result["fitted_modulus_pa"], "-", "fitted")):
        height = (fit.tip_path(modulus)[:, 2] - z0) * 1e3
        right.plot(fit.times, height, style, label=f"{label}: E = {modulus / 1e3:.2f} kPa")
    right.set(xlabel="time (s)", ylabel="tip height change (mm)", title="Tip of the clamped beam")
    right.legend(loc="lower left", fontsize=8)
    right.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (short fit that asserts a 1 % recovery)."""

    def check(result):
        error = result["relative_error"]
        return f"fitted modulus off by {error * 100:+.2f} % (> 1 %)" if abs(error) > 0.01 else None

    return example_main(
        __doc__, "soft_stiffness_fit", "short run; fail unless E is recovered within 1 %%",
        lambda test, out, device: run(FitConfig(iterations=10, horizon_s=0.4) if test else FitConfig(), out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
