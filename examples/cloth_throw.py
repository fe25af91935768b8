"""Differentiable optimisation: throw a cloth so that it lands and comes to rest on a target spot.

A 0.4 m x 0.4 m cloth (0.5 kg/m^2, 10 x 10 vertices in --test, 12 x 12 otherwise; membrane
moduli 20 N/m, bending 1e-3 N m/rad) starts with its centre 0.6 m above the ground, pitched
by 20 degrees, and every vertex gets the same launch velocity (vx, vy, 1.5 m/s). It flies
under gravity and light air drag (0.5 N s/m per m^2), lands edge first on the ground
(penalty contact 100 N/m, 0.5 N s/m, Coulomb friction 0.5), slides and comes to rest. Float64,
1 ms steps. The vertices have equal masses (the cloth's mass over its vertex count): the
ground contact acts per vertex, and with area-lumped masses the light edge vertices rebound
more than the interior, the cloth crumples on landing and the gradient grows without bound.

The loss is the squared horizontal distance (m^2) between the cloth's centre of mass at the
final time and a target spot; ``wp.Tape`` differentiates it through the whole rollout and
L-BFGS-B (scipy) updates the horizontal launch velocity (vx, vy). The vertical launch speed is
fixed, so the landing time does not move with the decision variables: in vx and vy the loss is
smooth and the tape gradient matches central differences, while in vz it is rough (the step at
which each vertex first touches the ground changes; the contact damper ramps in over
``contact_damping_depth``, 1 mm, less than these light vertices sink in one step), so central
differences in vz settle poorly.

Writes throw.png (miss distance per iteration; side and top views of the centre-of-mass paths
and the cloth at rest), throw.usd (takes "initial" and "optimised", 50 frames per second, the
target as a red marker) with throw_frames.png, and result.json. ``--test``: coarser cloth,
at most 12 iterations; fails unless the cloth ends within 5 cm of the target and at rest, the
loss falls at least 10x and the tape gradient agrees with a central finite difference (1e-3).
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
from wpsim.diff import diagnostics
from wpsim.diff.losses import squared_distance
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import UsdRecorder
from wpsim.io.usd_render import render_strip
from wpsim.solvers.rollout import simulate

CLOTH_SIZE, DENSITY, LAUNCH_HEIGHT, PITCH_DEG = 0.4, 0.5, 0.6, 20.0  # m, kg/m^2, m, degrees
MEMBRANE_MU = MEMBRANE_LAMBDA = 20.0  # N/m
MEMBRANE_KD, BEND_KE, BEND_KD = 0.05, 1e-3, 1e-5  # N s/m, N m/rad, N m s/rad
CONTACT_KE, CONTACT_KD, CONTACT_MU = 100.0, 0.5, 0.5  # N/m, N s/m, -
AIR_DRAG = 0.5  # N s/m per m^2 of cloth
RADIUS = 0.005  # m, contact radius of the vertices
VZ = 1.5  # m/s, fixed vertical launch speed
SUCCESS_M, REST_SPEED, FD_TOLERANCE = 0.05, 0.05, 1e-3  # m, m/s, relative
USD_FPS = 50.0


@dataclass
class ThrowConfig:
    """Settings of the throw optimisation."""

    vertices: int = 12  # per side
    horizon_s: float = 1.5
    dt: float = 1e-3
    iterations: int = 30
    initial_velocity: tuple = (1.5, 0.2)  # m/s, (vx, vy)
    target: tuple = (1.25, 0.35)  # m, (x, y) on the ground
    tolerance_m: float = 1e-4  # stop once the miss is below this
    fd_eps: float = 1e-4  # m/s, central-difference step

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return round(self.horizon_s / self.dt)


class ClothThrow:
    """The cloth and ground, the solver, and rollouts as functions of (vx, vy)."""

    def __init__(self, config: ThrowConfig, device=None):
        self.config = config
        builder = ModelBuilder()
        builder.add_ground_plane(ke=CONTACT_KE, kd=CONTACT_KD, mu=CONTACT_MU)
        cells = config.vertices - 1
        cell = CLOTH_SIZE / cells
        pitch = np.radians(PITCH_DEG)
        rot = (0.0, np.sin(pitch / 2), 0.0, np.cos(pitch / 2))  # about y: the +x edge lands first
        corner = (-0.5 * CLOTH_SIZE * np.cos(pitch), -0.5 * CLOTH_SIZE, LAUNCH_HEIGHT + 0.5 * CLOTH_SIZE * np.sin(pitch))
        builder.add_cloth_grid(pos=corner, rot=rot, dim_x=cells, dim_y=cells, cell_x=cell, cell_y=cell,
                               density=DENSITY, tri_mu=MEMBRANE_MU, tri_lambda=MEMBRANE_LAMBDA, tri_kd=MEMBRANE_KD,
                               bend_ke=BEND_KE, bend_kd=BEND_KD, radius=RADIUS)
        self.model = builder.finalize(device=device, requires_grad=True, dtype=wp.float64)
        n = self.model.particle_count
        mass = CLOTH_SIZE**2 * DENSITY / n
        self.model.particle_mass.assign(np.full(n, mass))
        self.model.particle_drag.assign(np.full(n, CLOTH_SIZE**2 * AIR_DRAG / n))
        self.solver = SemiImplicitSolver(self.model)
        self.weights = diagnostics.mass_weights(self.model)
        self.state0 = self.model.state()
        self.target = wp.array([(*config.target, 0.0)], dtype=self.model.vec3, device=self.model.device)
        self.evaluations = 0

    def stability(self) -> dict:
        """Explicit-step margins of a vertex: dt * omega (< 2) and damping * dt / m (< 2)."""
        m, dt = float(self.model.particle_mass.numpy()[0]), self.config.dt
        omega = np.sqrt((MEMBRANE_LAMBDA + 2 * MEMBRANE_MU + CONTACT_KE) / m)
        return {"vertex_mass_kg": m, "dt_omega": dt * omega,
                "damping_dt_over_m": (CONTACT_KD + MEMBRANE_KD) * dt / m,
                "contact_damping_ratio": CONTACT_KD / (2 * np.sqrt(CONTACT_KE * m))}

    def _launch(self, v_xy):
        v = np.array([v_xy[0], v_xy[1], VZ], dtype=np.float64)
        self.state0.particle_qd.assign(np.tile(v, (self.model.particle_count, 1)))
        self.solver.reset_health()

    def states(self, v_xy) -> list:
        """All steps + 1 states of the throw at horizontal launch velocity ``v_xy`` (m/s)."""
        self._launch(v_xy)
        states = simulate(self.solver, self.state0, self.config.steps, self.config.dt, keep_states=True)
        self.solver.check_health()
        return states

    def loss(self, v_xy) -> float:
        """Squared horizontal miss (m^2), forward only."""
        self._launch(v_xy)
        final = simulate(self.solver, self.state0, self.config.steps, self.config.dt)
        self.solver.check_health()
        centre = diagnostics.centroids(self.model, final, self.weights).numpy()[0]
        return float(np.sum((centre[:2] - np.asarray(self.config.target)) ** 2))

    def loss_and_gradient(self, v_xy) -> tuple[float, np.ndarray]:
        """Loss (m^2) and its gradient w.r.t. (vx, vy) (m^2 per m/s), from one taped rollout."""
        self._launch(v_xy)
        tape = wp.Tape()
        with tape:
            final = simulate(self.solver, self.state0, self.config.steps, self.config.dt)
            centre = diagnostics.centroids(self.model, final, self.weights)
            loss = squared_distance(centre, self.target, axis_weights=(1.0, 1.0, 0.0))
        self.solver.check_health()
        tape.backward(loss=loss)
        grad = self.state0.particle_qd.grad.numpy().astype(np.float64).sum(axis=0)[:2]
        value = float(loss.numpy()[0])
        tape.zero()
        self.evaluations += 1
        return value, grad

    def centre_path(self, states) -> np.ndarray:
        """Centre of mass (steps + 1, 3) in m of a list of states."""
        w = self.weights.numpy()[:, None]
        return np.array([(s.particle_q.numpy() * w).sum(axis=0) for s in states], dtype=np.float64)


def gradient_check(problem: ClothThrow, v_xy, eps: float) -> dict:
    """Tape gradient against central differences in vx and vy (step ``eps`` m/s)."""
    _, tape_grad = problem.loss_and_gradient(v_xy)
    fd = np.zeros(2)
    for i in range(2):
        step = np.zeros(2)
        step[i] = eps
        fd[i] = (problem.loss(v_xy + step) - problem.loss(v_xy - step)) / (2 * eps)
    error = float(np.linalg.norm(tape_grad - fd) / max(np.linalg.norm(fd), 1e-300))
    return {"at_m_per_s": list(map(float, v_xy)), "eps_m_per_s": eps, "tape": tape_grad.tolist(),
            "finite_difference": fd.tolist(), "relative_error": error}


def optimise(problem: ClothThrow, config: ThrowConfig) -> dict:
    """L-BFGS-B on (vx, vy); returns the history (one entry per iteration) and the best point."""
    from scipy.optimize import minimize

    v0 = np.asarray(config.initial_velocity, dtype=np.float64)
    cache = {}

    def fun(v):
        key = tuple(v)
        if key not in cache:
            cache[key] = problem.loss_and_gradient(v)
        return cache[key]

    loss0, grad0 = fun(v0)
    history = [{"iteration": 0, "v_m_per_s": v0.tolist(), "loss_m2": loss0, "grad_norm": float(np.linalg.norm(grad0))}]
    print(f"  iteration  0: miss {np.sqrt(loss0) * 100:7.3f} cm   v = ({v0[0]:.4f}, {v0[1]:.4f}) m/s")

    def callback(intermediate_result):
        v, loss = intermediate_result.x, float(intermediate_result.fun)
        history.append({"iteration": len(history), "v_m_per_s": v.tolist(), "loss_m2": loss,
                        "grad_norm": float(np.linalg.norm(fun(v)[1]))})
        print(f"  iteration {len(history) - 1:2d}: miss {np.sqrt(loss) * 100:7.3f} cm   "
              f"v = ({v[0]:.4f}, {v[1]:.4f}) m/s   ({problem.evaluations} rollouts)")
        if loss < config.tolerance_m**2:
            raise StopIteration

    out = minimize(fun, v0, jac=True, method="L-BFGS-B", bounds=[(0.0, 6.0), (-3.0, 3.0)], callback=callback,
                   options={"maxiter": config.iterations, "ftol": 1e-14, "gtol": 1e-12})
    best = min(history, key=lambda h: h["loss_m2"])
    return {"history": history, "best": best, "message": str(out.message)}


def run(config: ThrowConfig, out_dir, device=None) -> dict:
    """Check the gradient, optimise, write throw.png, throw.usd, throw_frames.png and
    result.json into out_dir; return the result."""
    problem = ClothThrow(config, device)
    margins = problem.stability()
    print(f"{problem.model.particle_count} vertices of {margins['vertex_mass_kg'] * 1e3:.2f} g; dt = "
          f"{config.dt * 1e3:.1f} ms: dt*omega = {margins['dt_omega']:.2f} (< 2), kd*dt/m = "
          f"{margins['damping_dt_over_m']:.2f} (< 2), contact damping ratio {margins['contact_damping_ratio']:.2f}")
    result = {"config": asdict(config), "stability": margins}
    check = gradient_check(problem, np.asarray(config.initial_velocity, dtype=np.float64), config.fd_eps)
    print(f"gradient check at v = {config.initial_velocity} m/s: tape ({check['tape'][0]:.6f}, "
          f"{check['tape'][1]:.6f}), central difference ({check['finite_difference'][0]:.6f}, "
          f"{check['finite_difference'][1]:.6f}) m^2/(m/s); relative error {check['relative_error']:.2e}")
    result["gradient_check"] = check
    problem.evaluations = 0
    print(f"target spot ({config.target[0]:.2f}, {config.target[1]:.2f}) m; L-BFGS-B over (vx, vy), vz = {VZ} m/s:")
    opt = optimise(problem, config)
    history, best = opt["history"], opt["best"]
    v_best = np.asarray(best["v_m_per_s"])
    first, last = history[0], best
    initial_states, final_states = problem.states(first["v_m_per_s"]), problem.states(v_best)
    health = problem.solver.health()
    rest_speed = float(np.abs(final_states[-1].particle_qd.numpy()).max())
    paths = problem.centre_path(initial_states), problem.centre_path(final_states)
    result.update({
        "iterations": len(history) - 1, "rollouts_with_gradient": problem.evaluations, "optimiser": opt["message"],
        "history": history, "best_velocity_m_per_s": [*v_best.tolist(), VZ],
        "initial_distance_cm": float(np.sqrt(first["loss_m2"]) * 100),
        "final_distance_cm": float(np.sqrt(last["loss_m2"]) * 100),
        "loss_reduction": first["loss_m2"] / max(last["loss_m2"], 1e-300),
        "final_centre_m": paths[1][-1].tolist(), "final_max_speed_m_per_s": rest_speed,
        "at_rest": rest_speed < REST_SPEED, "healthy": health.ok, "health": str(health),
    })
    out = Path(out_dir)
    write_json(out / "result.json", result)
    _plot(out / "throw.png", problem, history, paths, final_states[-1], config)
    _write_usd(out / "throw.usd", problem, {"initial": initial_states, "optimised": final_states})
    render_strip(out / "throw.usd", out / "throw_frames.png")
    print(f"miss {result['initial_distance_cm']:.2f} cm -> {result['final_distance_cm']:.4f} cm after "
          f"{result['iterations']} iterations ({problem.evaluations} taped rollouts); loss "
          f"{result['loss_reduction']:.3g}x lower; launch velocity ({v_best[0]:.4f}, {v_best[1]:.4f}, {VZ}) m/s")
    print(f"at t = {config.horizon_s:.2f} s the fastest vertex moves at {rest_speed * 100:.2f} cm/s; health: {health}")
    print(f"wrote {out / 'throw.png'}, {out / 'throw.usd'}, {out / 'throw_frames.png'}, {out / 'result.json'}")
    return result


def _write_usd(path: Path, problem: ClothThrow, takes: dict):
    """The takes' rollouts at about USD_FPS frames per second, each with the target marker."""
    every = max(1, round(1.0 / (USD_FPS * problem.config.dt)))
    recorder = UsdRecorder(problem.model, fps=1.0 / (every * problem.config.dt))
    for name, states in takes.items():
        recorder.begin_take(name)
        for state in states[::every]:
            recorder.record(state)
        recorder.add_markers("target", [(*problem.config.target, 0.0)], radius=0.02, color=(0.9, 0.1, 0.1))
    recorder.write(path)


def _plot(path: Path, problem: ClothThrow, history, paths, final_state, config: ThrowConfig):
    """Miss per iteration; side view and top view of the centre-of-mass paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (miss, side, top) = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    miss.semilogy([h["iteration"] for h in history], [np.sqrt(h["loss_m2"]) * 100 for h in history], marker=".")
    miss.axhline(SUCCESS_M * 100, color="k", linestyle=":", label="5 cm")
    miss.set(xlabel="L-BFGS-B iteration", ylabel="horizontal miss (cm)", title="Distance to the target")
    miss.legend(fontsize=8)
    miss.grid(True, which="both", alpha=0.3)
    for p, label in zip(paths, ("initial throw", "optimised throw")):
        side.plot(p[:, 0], p[:, 2], label=label)
        top.plot(p[:, 0], p[:, 1], label=label)
    x = final_state.particle_q.numpy()
    top.triplot(x[:, 0], x[:, 1], problem.model.tri_indices.numpy().reshape(-1, 3), color="tab:orange",
                linewidth=0.4, alpha=0.7)
    top.plot(*config.target, "r*", markersize=14, label="target")
    side.axhline(0.0, color="k", linewidth=0.8)
    side.set(xlabel="x (m)", ylabel="z (m)", title="Centre of mass, side view")
    top.set(xlabel="x (m)", ylabel="y (m)", title=f"Top view; the cloth at t = {config.horizon_s:.1f} s")
    for ax in (side, top):
        ax.legend(fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (coarser cloth, fewer iterations; asserts the throw)."""

    def check(result):
        failures = []
        if result["final_distance_cm"] > SUCCESS_M * 100:
            failures.append(f"the cloth ends {result['final_distance_cm']:.2f} cm from the target (> 5 cm)")
        if result["loss_reduction"] < 10.0:
            failures.append(f"the loss fell only {result['loss_reduction']:.3g}x (< 10x)")
        if result["gradient_check"]["relative_error"] > FD_TOLERANCE:
            failures.append(f"tape and finite-difference gradients differ by "
                            f"{result['gradient_check']['relative_error']:.2e} (> {FD_TOLERANCE:g})")
        if not result["at_rest"]:
            failures.append(f"the cloth still moves at {result['final_max_speed_m_per_s']:.3f} m/s")
        if not result["healthy"]:
            failures.append(f"unhealthy simulation: {result['health']}")
        return "; ".join(failures) or None

    def run_example(test, out, device):
        config = ThrowConfig(vertices=10, horizon_s=1.2, iterations=12) if test else ThrowConfig()
        return run(config, out, device)

    return example_main(__doc__, "cloth_throw", "coarser cloth, at most 12 iterations; fail unless it lands within "
                        "5 cm of the target, 10x lower loss and the gradient check passes", run_example, check, argv)


if __name__ == "__main__":
    sys.exit(main())
