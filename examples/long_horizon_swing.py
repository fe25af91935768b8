"""Long-horizon optimisation with checkpointed gradients: launch a rope pendulum to hit a target.

A rope of 8 damped springs (1 m long, 1e4 N/m and 2 N s/m per link) carrying seven 20 g
beads and a 0.5 kg bob hangs from a fixed anchor at z = 2 m (float64, no contact or ground;
air drag 0.01 N s/m on every bead and the bob). It starts straight at the release angle
theta0 from the vertical, turning about the anchor at the launch rate omega0 (rad/s), and
swings in the x-z plane for T = 5 s (5,000 semi-implicit steps of 1 ms; the stiffest mode,
neighbouring beads in antiphase, has dt * omega = 2 dt sqrt(ke / m) = 1.4 < 2). The loss is
the squared distance (m^2) between the bob and a target point at t = T, 20 degrees on the
far side of the vertical and 1.005 m from the anchor; gradient descent with an adaptive step
(``wpsim.opt.optimisers.adaptive_gradient_descent``) updates (theta0, omega0) from a release at 45
degrees at rest. The bob cannot leave the circle of the rope's length (about 1.005 m hanging:
the links stretch under the bob, more while it swings), so the miss that remains is radial;
it is printed split into its radial part and its part along the swing.

Every gradient comes from ``wpsim.diff.Rollout`` in checkpoint mode: the forward keeps the
positions and velocities every ceil(sqrt(T)) steps and the backward re-runs one segment at a
time on a tape, so memory grows like sqrt(T) instead of T. At the first iterate one
forward + backward is also run with a full tape (every state and tape kept) to compare Warp's
peak allocation (``wpsim.bench.process.tracked_peak``; Warp arrays only, the full tape's
Python objects come on top) and to check that the two gradients are bitwise equal. The best
iterate is evaluated once more with ``backward(diagnostics=True)`` for the per-step adjoint
norms.

Writes optimisation.png (loss per iteration; the bob's path in the swing plane and its angle
over time, before and after, with the target), gradient_norms.png (adjoint norms against the
step index), swing.usd (the initial and optimised swings as the variants of the set
"iteration", 100 frames per second) and result.json (lengths in m, losses in m^2, memory in
bytes).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import ModelBuilder, SemiImplicitSolver
from wpsim.apps.console import example_main
from wpsim.bench.process import tracked_peak
from wpsim.diff import Rollout
from wpsim.diff.losses import squared_distance
from wpsim.io.files import write_json
from wpsim.io.plots import plot_gradient_norms, save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import UsdRecorder
from wpsim.io.usd_render import render_strip
from wpsim.opt.optimisers import adaptive_gradient_descent

LINKS = 8
ROPE_LENGTH = 1.0  # m
BEAD_MASS, BOB_MASS = 0.02, 0.5  # kg
LINK_KE, LINK_KD = 1.0e4, 2.0  # N/m, N s/m
DRAG = 0.01  # N s/m
ANCHOR = np.array([0.0, 0.0, 2.0])  # m
MIB = 2.0**20


@dataclass
class SwingConfig:
    """Settings of the launch optimisation."""

    iterations: int = 15
    horizon_s: float = 5.0
    dt: float = 1e-3
    initial_angle_deg: float = 45.0
    initial_rate_rad_s: float = 0.0
    target_angle_deg: float = -20.0  # from the vertical, in the swing plane
    target_radius_m: float = 1.005  # from the anchor
    learning_rate: float = 0.05  # first step: p -= learning_rate * d(loss / initial loss) / dp

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return int(round(self.horizon_s / self.dt))


def _direction(angle: float) -> np.ndarray:
    """Unit vector at ``angle`` (rad) from straight down, towards +x, in the x-z plane."""
    return np.array([np.sin(angle), 0.0, -np.cos(angle)])


class RopeSwing:
    """The rope pendulum, its launch parameters p = (theta0 rad, omega0 rad/s), and the loss
    and its gradient w.r.t. p through a ``Rollout``."""

    def __init__(self, config: SwingConfig, device=None):
        """Build the rope hanging straight down and the target."""
        self.config = config
        self.reach = ROPE_LENGTH * np.arange(LINKS + 1) / LINKS  # m from the anchor, per particle
        builder = ModelBuilder()
        masses = [0.0] + [BEAD_MASS] * (LINKS - 1) + [BOB_MASS]  # the anchor is fixed (mass 0)
        builder.add_particles(ANCHOR + self.reach[:, None] * _direction(0.0), masses=masses, radii=0.01,
                              drag=[0.0] + [DRAG] * LINKS)
        builder.add_springs([(i, i + 1) for i in range(LINKS)], ke=LINK_KE, kd=LINK_KD)
        self.model = builder.finalize(device=device, dtype=wp.float64)  # no parameter gradients needed
        self.solver = SemiImplicitSolver(self.model)
        self.state0 = self.model.state(requires_grad=True)
        self.target = ANCHOR + config.target_radius_m * _direction(np.radians(config.target_angle_deg))
        self._target = wp.array([self.target], dtype=self.model.vec3, device=self.model.device)
        self.rollout = self.make_rollout("checkpoint")

    def make_rollout(self, mode: str) -> Rollout:
        """A rollout over the horizon whose loss is the bob's squared distance to the target at T."""
        steps, bob = self.config.steps, LINKS

        def loss_fn(k, state, loss):
            if k == steps:
                squared_distance(state.particle_q[bob:bob + 1], self._target, loss=loss)

        return Rollout(self.solver, steps, self.config.dt, loss_fn, mode=mode)

    def launch(self, p):
        """Write the straight rope at angle p[0] turning at p[1] into state0; returns the
        radial and tangential unit vectors."""
        radial, tangent = _direction(p[0]), _direction(p[0] + 0.5 * np.pi)
        self.state0.particle_q.assign(ANCHOR + self.reach[:, None] * radial)
        self.state0.particle_qd.assign(p[1] * self.reach[:, None] * tangent)
        return radial, tangent

    def loss_and_gradient(self, p, rollout: Rollout | None = None, diagnostics: bool = False):
        """(loss m^2, dL/dp, adjoint-norm report or None) from one forward + backward."""
        rollout = rollout or self.rollout
        radial, tangent = self.launch(p)
        self.state0.particle_q.grad.zero_()
        self.state0.particle_qd.grad.zero_()
        loss = rollout.forward(self.state0)
        report = rollout.backward(diagnostics=diagnostics)
        g_q, g_v = self.state0.particle_q.grad.numpy(), self.state0.particle_qd.grad.numpy()
        # x_i = A + r_i radial(theta), v_i = omega r_i tangent(theta), d radial/d theta = tangent,
        # d tangent/d theta = -radial
        d_theta = self.reach @ (g_q @ tangent) - p[1] * (self.reach @ (g_v @ radial))
        d_omega = self.reach @ (g_v @ tangent)
        return loss, np.array([d_theta, d_omega]), report

    def compare_modes(self, p) -> dict:
        """Warp's peak allocation (bytes) of one forward + backward at p in each mode, and
        whether the two state0 gradients are bitwise equal (``tracked_peak`` clears the
        tracker's process-wide high-water mark before each measurement)."""
        found = {}
        for mode in ("checkpoint", "full"):
            peak, _ = tracked_peak(lambda: self.loss_and_gradient(p, self.make_rollout(mode)))
            found[mode] = (peak, self.state0.particle_q.grad.numpy().copy(), self.state0.particle_qd.grad.numpy().copy())
        (ck, *ck_grads), (full, *full_grads) = found["checkpoint"], found["full"]
        equal = all(np.array_equal(a, b) for a, b in zip(ck_grads, full_grads))
        return {"checkpoint_peak_bytes": ck, "full_peak_bytes": full, "memory_ratio": full / ck,
                "gradients_bitwise_equal": bool(equal)}

    def bob_path(self, p, every: int = 10, recorder: UsdRecorder | None = None) -> np.ndarray:
        """Bob positions (m), every ``every`` steps from t = 0, of an unrecorded rollout (whose
        states at those steps also go to ``recorder``)."""
        self.launch(p)
        states = [self.model.state(requires_grad=False) for _ in range(2)]
        states[0].assign(self.state0)
        path = [states[0].particle_q.numpy()[LINKS].copy()]
        if recorder is not None:
            recorder.record(states[0])
        for k in range(self.config.steps):
            self.solver.step(states[k % 2], states[(k + 1) % 2], None, self.config.dt)
            if (k + 1) % every == 0:
                path.append(states[(k + 1) % 2].particle_q.numpy()[LINKS].copy())
                if recorder is not None:
                    recorder.record(states[(k + 1) % 2])
        return np.array(path)


def run(config: SwingConfig, out_dir, device=None) -> dict:
    """Optimise the launch, write the plots and result.json into out_dir; return the result."""
    swing = RopeSwing(config, device)
    initial = np.array([np.radians(config.initial_angle_deg), config.initial_rate_rad_s])
    print(f"rope pendulum: {LINKS} links, {ROPE_LENGTH:.2f} m, bob {BOB_MASS:.2f} kg; horizon T = {config.steps} "
          f"steps of {config.dt * 1e3:.1f} ms ({config.horizon_s:.1f} s); target {config.target_angle_deg:+.0f} deg "
          f"from the vertical at {config.target_radius_m:.3f} m")
    memory = swing.compare_modes(initial)
    print(f"one forward + backward at T = {config.steps}: Warp peak {memory['full_peak_bytes'] / MIB:.2f} MiB with "
          f"a full tape, {memory['checkpoint_peak_bytes'] / MIB:.3f} MiB checkpointed "
          f"(segments of {swing.rollout.segment_lengths[0]} steps): {memory['memory_ratio']:.1f}x less; "
          f"gradients bitwise equal: {memory['gradients_bitwise_equal']}")
    reference, trials = [], []

    def relative_loss(p):
        """Loss and gradient divided by the initial loss, so that the step size is scale free."""
        loss, grad, _ = swing.loss_and_gradient(p)
        if not reference:
            reference.append(loss)
        return loss / reference[0], grad / reference[0]

    def report_line(it, p, relative, accepted):
        """Print one progress line per loss evaluation."""
        trials.append(relative * reference[0])
        mark = "" if accepted else "  (rejected, smaller step)"
        progress_line(it, config.iterations, f"theta0 {np.degrees(p[0]):8.3f} deg   omega0 {p[1]:+.4f} rad/s   "
                      f"loss {trials[-1]:.3e} m^2   bob to target {np.sqrt(trials[-1]) * 1e3:8.3f} mm{mark}")

    best, relative = adaptive_gradient_descent(relative_loss, initial, config.iterations, config.learning_rate,
                                               callback=report_line)
    loss, _, report = swing.loss_and_gradient(best, diagnostics=True)  # the best iterate again, with diagnostics
    miss = swing.rollout.final_state.particle_q.numpy()[LINKS] - swing.target
    outward = (swing.target - ANCHOR) / np.linalg.norm(swing.target - ANCHOR)
    radial = float(miss @ outward)
    result = {
        "config": asdict(config),
        "release_angle_deg": float(np.degrees(best[0])),
        "launch_rate_rad_s": float(best[1]),
        "initial_distance_m": float(np.sqrt(reference[0])),
        "final_distance_m": float(np.sqrt(loss)),
        "final_miss_radial_m": radial,
        "final_miss_along_swing_m": float(np.linalg.norm(miss - radial * outward)),
        "best_losses_m2": [r * reference[0] for r in relative],
        "trial_losses_m2": trials,
        "memory": memory,
        "adjoint_q_norm_state0": float(report.adjoint_q_norm[0]),
        "adjoint_qd_norm_state0": float(report.adjoint_qd_norm[0]),
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    plot_gradient_norms(report, out / "gradient_norms.png",
                        title=f"adjoint norms at the optimised launch over {config.steps} steps (checkpointed)")
    _plot(out / "optimisation.png", swing, config, result, initial, best)
    recorder = UsdRecorder(swing.model, fps=1.0 / (10 * config.dt))
    for name, p in (("initial", initial), ("optimised", best)):
        recorder.begin_take(name)
        swing.bob_path(p, recorder=recorder)
    recorder.write(out / "swing.usd")
    render_strip(out / "swing.usd", out / "swing_frames.png", take="optimised")
    print(f"bob {result['final_distance_m'] * 1e3:.3f} mm from the target after {config.horizon_s:.1f} s "
          f"(from {result['initial_distance_m'] * 1e3:.1f} mm): "
          f"{radial * 1e3:+.3f} mm radial, {result['final_miss_along_swing_m'] * 1e3:.3f} mm along the swing")
    print(f"wrote {out / 'optimisation.png'}, {out / 'gradient_norms.png'}, {out / 'swing.usd'} (variants "
          f"'initial' and 'optimised'), {out / 'result.json'}")
    return result


def _plot(path, swing: RopeSwing, config: SwingConfig, result: dict, initial, final):
    """Loss per iteration; the bob's path in the swing plane and its angle over time, before
    and after, with the target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, plane, angle) = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained",
                                                gridspec_kw={"width_ratios": [1.0, 1.1, 1.3]})
    loss_ax.semilogy(result["trial_losses_m2"], "x", color="tab:gray", label="evaluated step")
    loss_ax.semilogy(result["best_losses_m2"], marker=".", label="best so far")
    loss_ax.xaxis.get_major_locator().set_params(integer=True)
    loss_ax.legend(fontsize=8)
    loss_ax.set(xlabel="iteration", ylabel="squared bob-target distance at t = T (m^2)",
                title=f"Loss over {config.steps} steps (checkpointed gradients)")
    loss_ax.grid(True, which="both", alpha=0.3)
    every = 10
    times = np.arange(config.steps // every + 1) * every * config.dt
    target = swing.target - ANCHOR
    for p, style, label in ((initial, "--", "initial launch"), (final, "-", "optimised launch")):
        rel = swing.bob_path(p, every) - ANCHOR
        line, = plane.plot(rel[:, 0], rel[:, 2], style, linewidth=0.8,
                           label=f"{label}: theta0 = {np.degrees(p[0]):.1f} deg, omega0 = {p[1]:+.3f} rad/s")
        plane.plot(rel[-1, 0], rel[-1, 2], "o", color=line.get_color())
        angle.plot(times, np.degrees(np.arctan2(rel[:, 0], -rel[:, 2])), style, color=line.get_color(), label=label)
    plane.plot(target[0], target[2], "r*", markersize=14, label=f"target (dots: bob at t = {config.horizon_s:.1f} s)")
    plane.plot(0.0, 0.0, "ks", label="anchor")
    plane.set(xlabel="x (m)", ylabel="z relative to the anchor (m)", title="Bob path in the swing plane",
              aspect="equal")
    plane.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8)
    plane.grid(True, alpha=0.3)
    angle.plot(config.horizon_s, config.target_angle_deg, "r*", markersize=14, label="target at t = T")
    angle.set(xlabel="time (s)", ylabel="bob angle from the vertical (deg)", title="Bob angle over the horizon")
    angle.legend(fontsize=8)
    angle.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (1.2 s horizon, 6 iterations; asserts the result)."""

    def check(result):
        memory = result["memory"]
        if not memory["gradients_bitwise_equal"]:
            return "checkpointed and full-tape gradients differ"
        if memory["checkpoint_peak_bytes"] >= memory["full_peak_bytes"]:
            return "checkpointing did not lower the peak memory"
        if result["final_distance_m"] > 0.005 or result["final_distance_m"] > 0.05 * result["initial_distance_m"]:
            return (f"the bob ended {result['final_distance_m'] * 1e3:.2f} mm from the target "
                    f"(initially {result['initial_distance_m'] * 1e3:.1f} mm; needs < 5 mm and < 5 %)")
        return None

    return example_main(
        __doc__, "long_horizon_swing", "1.2 s horizon; fail unless the bob ends within 5 mm of the target, "
        "checkpointed gradients equal full ones bitwise and use less memory",
        lambda test, out, device: run(SwingConfig(iterations=6, horizon_s=1.2) if test else SwingConfig(),
                                      out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
