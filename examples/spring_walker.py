"""Open-loop gait optimisation: a mass-spring walker (after DiffTaichi's) learns to walk forward.

The walker lives in the x-z plane: 20 particles of 20 g (contact radius 5 mm) on the nodes of
5 cm square cells (a body of 5 x 1 cells on two legs of 1 x 2 cells under its ends, 35 cm
long, 15 cm high), each cell's edges and diagonals joined by 46 springs (500 N/m,
1.5 N s/m). It stands on a ground plane (penalty contact 2 kN/m, 5 N s/m, Coulomb friction
mu = 1.0, smoothed below 1 cm/s). Four muscles, the left and right vertical springs of each
leg, change their rest length through ``control.spring_activation`` (rest length
L0 (1 + a)): muscle g follows a_g(t) = alpha_g cos(2 pi f t) + beta_g sin(2 pi f t) at
f = 4 Hz, its amplitude at most 0.3, so the eight parameters set the amplitude and phase of
each muscle. Semi-implicit Euler, dt = 2 ms, float32.

Several restarts (worlds of one model, initial parameters drawn with standard deviation
0.05) are optimised together: one tape per iteration records the rollout, every step's
activation row of a (steps, springs) array, and the centre of mass of every world at the
horizon; the backward from its forward (x) displacement gives the activation gradients,
mapped onto (alpha, beta) on the host, and Adam ascends (step 0.03 decayed geometrically to
0.003), projecting amplitudes onto 0.3. The spring damping keeps the gradient of the 1000-step
contact rollout from exploding (with 0.5 N s/m its norm grew to ~1e3 and the gaits collapsed).
Full run (2 s, 8 restarts, 100 iterations): the best restart goes from about 0 to about 70 cm
(35 cm/s), the mean over restarts to about 50 cm.

Writes walk.png (distance per iteration per restart, centre-of-mass path, the best gait's
muscle activations, snapshots of the walker), walk.usd (the best restart's initial and
optimised gaits as the variants "initial" and "optimised" of the set "iteration") with
walk_frames.png (the optimised take), and result.json (distances in m). --test: 1 s horizon,
4 restarts, 40 iterations; fails unless the best restart walks at least 15 cm and at least
10 cm farther than under its initial parameters, and the mean over restarts gains 5 cm.
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
from wpsim.diff import diagnostics
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip
from wpsim.opt.optimisers import Adam
from wpsim.solvers.controllers import step_controls

CELL = 0.05  # m
BODY_CELLS = [(i, 2) for i in range(5)]  # (column, row) of the 5 cm cells
LEG_CELLS = [(0, 0), (0, 1), (4, 0), (4, 1)]
PARTICLE_MASS, RADIUS = 0.02, 0.005  # kg, m
SPRING_KE, SPRING_KD = 500.0, 1.5  # N/m, N s/m
GROUND_KE, GROUND_KD, GROUND_MU = 2.0e3, 5.0, 1.0  # N/m, N s/m, -
MAX_AMPLITUDE = 0.3  # largest relative rest-length change of a muscle
MUSCLES = ("rear leg, rear side", "rear leg, front side", "front leg, rear side", "front leg, front side")
MUSCLE_COLUMNS = (0, 1, 4, 5)  # the grid column of each muscle's vertical springs
USD_FPS = 50.0


@dataclass
class WalkConfig:
    """Settings of the gait optimisation."""

    iterations: int = 100
    horizon_s: float = 2.0
    dt: float = 2e-3
    frequency_hz: float = 4.0
    restarts: int = 8
    initial_std: float = 0.05  # of alpha and beta at the start
    learning_rate: float = 0.03  # Adam step in activation units, at the start
    final_learning_rate: float = 0.003  # reached geometrically at the last iteration
    seed: int = 0

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return round(self.horizon_s / self.dt)


def walker_builder() -> tuple[ModelBuilder, np.ndarray]:
    """The ground and one walker; returns the builder and the (springs, muscles) one-hot
    membership of the springs in the muscles."""
    nodes: dict = {}
    for i, k in BODY_CELLS + LEG_CELLS:
        for corner in ((i, k), (i + 1, k), (i + 1, k + 1), (i, k + 1)):
            nodes.setdefault(corner, len(nodes))
    builder = ModelBuilder()
    builder.add_ground_plane(ke=GROUND_KE, kd=GROUND_KD, mu=GROUND_MU)
    grid = np.array(list(nodes), dtype=np.float64)
    builder.add_particles(np.stack([grid[:, 0] * CELL, np.zeros(len(grid)), grid[:, 1] * CELL + RADIUS], axis=1),
                          masses=PARTICLE_MASS, radii=RADIUS)
    pairs: list = []
    for i, k in BODY_CELLS + LEG_CELLS:
        corners = [nodes[c] for c in ((i, k), (i + 1, k), (i + 1, k + 1), (i, k + 1))]
        for a, b in ((0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (1, 3)):
            pair = tuple(sorted((corners[a], corners[b])))
            if pair not in pairs:
                pairs.append(pair)
    builder.add_springs(pairs, ke=SPRING_KE, kd=SPRING_KD)
    membership = np.zeros((len(pairs), len(MUSCLES)))
    for s, (p, q) in enumerate(pairs):
        (xp, zp), (xq, zq) = grid[p], grid[q]
        if xp == xq and max(zp, zq) <= 2 and xp in MUSCLE_COLUMNS:  # a vertical leg spring
            membership[s, MUSCLE_COLUMNS.index(xp)] = 1.0
    return builder, membership


def check_time_step(dt: float, membership: np.ndarray, pairs: np.ndarray):
    """Print the explicit-step margins of the busiest particle: its springs (stiffened by up to
    1 / (1 - MAX_AMPLITUDE) when shortened) and the ground, dt sqrt(k / m) < 2, kd dt / m < 2."""
    degree = np.bincount(pairs.ravel()).max()
    omega = np.sqrt((degree * SPRING_KE / (1.0 - MAX_AMPLITUDE) + GROUND_KE) / PARTICLE_MASS)
    damping = (degree * SPRING_KD + GROUND_KD) * dt / PARTICLE_MASS
    print(f"dt = {dt * 1e3:.1f} ms: dt*omega_max = {dt * omega:.2f} (< 2), kd*dt/m = {damping:.2f} (< 2)")


class Walker:
    """``restarts`` walkers (one per world) and their forward distance as a function of the gaits."""

    def __init__(self, config: WalkConfig, device=None):
        """Build the worlds, the gait basis and one Control per step (a row of one activation array)."""
        self.config = config
        builder, self.membership = walker_builder()
        self.springs = len(self.membership)
        self.model = model = builder.replicated(config.restarts).finalize(device=device, requires_grad=True)
        self.solver = SemiImplicitSolver(model)
        self.weights = diagnostics.mass_weights(model)
        self.state0 = model.state()
        self.times = np.arange(config.steps) * config.dt
        phase = 2.0 * np.pi * config.frequency_hz * self.times
        self.basis = np.stack([np.cos(phase), np.sin(phase)], axis=1)  # (steps, 2)
        self.activation, self.controls = step_controls(model, "spring_activation", config.steps)

    def muscle_activations(self, params: np.ndarray) -> np.ndarray:
        """(steps, worlds, muscles) activations of the gaits params (worlds, muscles, 2)."""
        return np.einsum("tb,wmb->twm", self.basis, params)

    def _rollout(self, params: np.ndarray, keep_states: bool = False):
        """Simulate the gaits from rest; the final state, or all states."""
        per_spring = np.einsum("twm,sm->tws", self.muscle_activations(params), self.membership)
        self.activation.assign(per_spring.reshape(self.config.steps, -1))
        self.solver.reset_health()
        result = simulate(self.solver, self.state0, self.config.steps, self.config.dt,
                          control=self.controls.__getitem__, keep_states=keep_states)
        self.solver.check_health()
        return result

    def _com(self, state) -> wp.array:
        return diagnostics.centroids(self.model, state, self.weights)

    def distance_and_gradient(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Forward (x) displacement (m) of each world's centre of mass at the horizon, and its
        gradient with respect to that world's params (worlds, muscles, 2)."""
        tape = wp.Tape()
        with tape:
            com = self._com(self._rollout(params))
        start = self._com(self.state0).numpy()[:, 0]
        seed = np.zeros((self.config.restarts, 3))
        seed[:, 0] = 1.0
        tape.backward(grads={com: wp.array(seed, dtype=self.model.vec3, device=self.model.device)})
        grad = self.activation.grad.numpy().astype(np.float64).reshape(self.config.steps, self.config.restarts, -1)
        grad = np.einsum("tws,sm,tb->wmb", grad, self.membership, self.basis)
        tape.zero()
        return com.numpy()[:, 0].astype(np.float64) - start, grad

    def states(self, params: np.ndarray) -> list:
        """All states of a rollout (steps + 1)."""
        return self._rollout(params, keep_states=True)


def project(params: np.ndarray) -> np.ndarray:
    """Scale each muscle's (alpha, beta) down to amplitude MAX_AMPLITUDE where it exceeds it."""
    amplitude = np.linalg.norm(params, axis=-1, keepdims=True)
    return params * np.minimum(1.0, MAX_AMPLITUDE / np.maximum(amplitude, 1e-12))


def run(config: WalkConfig, out_dir, device=None) -> dict:
    """Optimise the gaits with Adam; write walk.png, walk.usd, walk_frames.png and result.json."""
    walker = Walker(config, device)
    check_time_step(config.dt, walker.membership, walker.model.spring_indices.numpy()[:walker.springs])
    rng = np.random.default_rng(config.seed)
    params = project(rng.normal(0.0, config.initial_std, (config.restarts, len(MUSCLES), 2)))
    initial = params.copy()
    optimiser = Adam(lr=config.learning_rate)
    history = []
    best = np.full(config.restarts, -np.inf)
    best_params = params.copy()
    for it in range(config.iterations + 1):
        distance, grad = walker.distance_and_gradient(params)
        history.append(distance)
        better = distance > best
        best[better], best_params[better] = distance[better], params[better]
        progress_line(it, config.iterations, f"forward distance (cm): best {distance.max() * 100:+.1f}, "
                      f"mean {distance.mean() * 100:+.1f}")
        if it < config.iterations:
            fraction = it / max(config.iterations - 1, 1)
            optimiser.lr = config.learning_rate * (config.final_learning_rate / config.learning_rate) ** fraction
            params = project(optimiser.step(params, -np.where(np.isfinite(grad), grad, 0.0)))  # ascend
    history = np.array(history)  # (iterations + 1, restarts)
    winner = int(np.argmax(best))
    result = {
        "config": asdict(config),
        "muscles": list(MUSCLES),
        "distances_m": history.tolist(),
        "initial_distance_m": history[0].tolist(),
        "best_distance_m": best.tolist(),
        "best_restart": winner,
        "best_restart_initial_m": float(history[0, winner]),
        "best_restart_optimised_m": float(best[winner]),
        "mean_initial_m": float(history[0].mean()),
        "mean_optimised_m": float(best.mean()),
        "initial_params": initial.tolist(),
        "best_params": best_params.tolist(),
        "best_speed_m_per_s": float(best[winner] / config.horizon_s),
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    initial_states, optimised_states = walker.states(initial), walker.states(best_params)
    _plot(out / "walk.png", walker, result, history, initial_states, optimised_states)
    every = max(1, round(1.0 / (USD_FPS * config.dt)))
    write_rollouts(out / "walk.usd", walker.model, {"initial": initial_states[::every],
                                                     "optimised": optimised_states[::every]},
                   fps=1.0 / (every * config.dt), world=winner)
    render_strip(out / "walk.usd", out / "walk_frames.png", take="optimised")
    print(f"forward distance of the centre of mass after {config.horizon_s:.1f} s (best of {config.restarts} "
          f"restarts, #{winner}): {history[0, winner] * 100:+.2f} cm (initial gait) -> {best[winner] * 100:+.2f} cm "
          f"(optimised), {best[winner] / config.horizon_s * 100:.1f} cm/s")
    print(f"mean over restarts: {history[0].mean() * 100:+.2f} cm -> {best.mean() * 100:+.2f} cm")
    print(f"wrote walk.png, walk.usd (variants 'initial' and 'optimised'), walk_frames.png, result.json in {out}")
    return result


def _plot(path, walker: Walker, result: dict, history: np.ndarray, initial_states: list, optimised_states: list):
    """Distance per iteration, centre-of-mass path, best gait, snapshots of the optimised walk."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config, winner = walker.config, result["best_restart"]
    fig, (obj, com, gait, snap) = plt.subplots(1, 4, figsize=(20, 4), layout="constrained")
    obj.plot(history * 100, color="0.6", linewidth=0.8)
    obj.plot(history[:, winner] * 100, color="C0", marker=".", label=f"restart {winner} (best)")
    obj.set(xlabel="Adam iteration", ylabel="forward distance (cm)", title="Objective (every restart)")
    obj.legend(fontsize=8)
    t = np.arange(config.steps + 1) * config.dt
    for states, label in ((initial_states, "initial gait"), (optimised_states, "optimised gait")):
        x = np.array([walker._com(s).numpy()[winner, 0] for s in states])
        com.plot(t, (x - x[0]) * 100, label=label)
    com.set(xlabel="time (s)", ylabel="centre of mass x - x0 (cm)", title="Centre-of-mass path")
    com.legend(fontsize=8)
    shown = walker.times < 2.0 / config.frequency_hz
    activations = walker.muscle_activations(np.array(result["best_params"]))[:, winner]
    for name, a in zip(MUSCLES, activations.T):
        gait.plot(walker.times[shown], a[shown], label=name)
    gait.set(xlabel="time (s)", ylabel="activation (relative rest-length change)", title="Optimised gait, two cycles")
    gait.set_ylim(-1.1 * MAX_AMPLITUDE, 1.9 * MAX_AMPLITUDE)
    gait.legend(fontsize=7, ncol=2, loc="upper center")
    pairs = walker.model.spring_indices.numpy()[:walker.springs]
    per_world = walker.model.particle_count // config.restarts
    muscle = walker.membership.any(axis=1)
    for k, frame in enumerate(np.linspace(0, config.steps, 4).astype(int)):
        lift = -25.0 * k  # cm, each snapshot drawn below the previous one
        q = optimised_states[frame].particle_q.numpy()[winner * per_world:(winner + 1) * per_world] * 100
        for s, (i, j) in enumerate(pairs):
            snap.plot(q[[i, j], 0], q[[i, j], 2] + lift, color="C3" if muscle[s] else "0.4",
                      linewidth=1.4 if muscle[s] else 0.7)
        snap.axhline(lift, color="k", linewidth=0.8)
        snap.text(0.98, 1.0 - (k + 0.15) / 4, f"t = {frame * config.dt:.2f} s", fontsize=8, ha="right",
                  transform=snap.transAxes)
    snap.set_xlim(-5.0, max(snap.get_xlim()[1], 45.0) + 15.0)
    snap.set(xlabel="x (cm)", ylabel="z (cm), snapshots stacked", title="Optimised walk (muscles red)",
             aspect="equal", yticks=[])
    for ax in (obj, com, gait):
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def check(result: dict):
    """Failure message unless the best restart walks >= 15 cm, >= 10 cm farther than at its
    start, and the restarts gain >= 5 cm on average."""
    after, before = result["best_restart_optimised_m"], result["best_restart_initial_m"]
    if after < 0.15:
        return f"the best optimised gait walks only {after * 100:.2f} cm (< 15 cm)"
    if after - before < 0.10:
        return f"the best gait gains only {(after - before) * 100:.2f} cm over its initial parameters (< 10 cm)"
    mean_gain = result["mean_optimised_m"] - result["mean_initial_m"]
    if mean_gain < 0.05:
        return f"the restarts gain only {mean_gain * 100:.2f} cm on average (< 5 cm)"
    return None


def main(argv=None) -> int:
    """Command line: --device, --out, --test (1 s, 4 restarts, 40 iterations; asserts >= 15 cm, a 10 cm gain)."""
    return example_main(
        __doc__, "spring_walker", "1 s horizon, 4 restarts, 40 iterations; fail unless the best gait walks >= 15 cm "
        "and gains >= 10 cm, and the restarts gain >= 5 cm on average",
        lambda test, out, device: run(WalkConfig(iterations=40, horizon_s=1.0, restarts=4) if test else WalkConfig(),
                                      out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
