"""Trajectory optimisation of a robot arm: torques that swing a 2-link arm's tip onto a target.

The double pendulum of ``assets/arm_2link.xml`` (two 0.3 m links on hinges about x and y,
masses 1 and 0.5 kg, joint damping 0.05 N m s/rad) is imported from MJCF, and a massless
tip marker is welded to the end of its second link. The joint torques are piecewise linear
in time, 6 knots per joint over T = 0.6 s (600 semi-implicit steps of 1 ms, float64). The
objective is the squared miss (m^2) between the tip and a target point at t = T plus a small
effort penalty 1e-6 |knots|^2. ``wp.Tape`` gives the Jacobian of the tip's final position
with respect to every step's torques (three backward passes of one recorded rollout); the
chain rule through the interpolation gives it for the knots, and damped Gauss-Newton steps
(Levenberg-Marquardt with the effort weight as damping) update them from zero torques (the
arm hanging still).

Writes reach.png (miss per iteration; the tip's path with the target; the optimised
torques), reach.usd (the zero-torque and the optimised rollout as the variants of the set
"iteration", 100 frames per second, bodies as Xforms) and result.json (m, N m).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import SemiImplicitSolver, eval_fk, simulate
from wpsim.apps.console import example_main
from wpsim.diff.losses import body_position_loss
from wpsim.io.files import write_json
from wpsim.io.mjcf import import_mjcf
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip

ASSET = Path(__file__).resolve().parents[1] / "assets" / "arm_2link.xml"
DT, KNOTS, EFFORT = 1e-3, 6, 1e-6  # s, knots per joint, m^2 / (N m)^2
# m: where the tip is with the shoulder at 0.6 rad and the elbow at -1.0 rad (a 2-joint arm's
# tip moves on a surface, so the target must lie on it)
TARGET = (0.3 * np.sin(1.0), 0.3 * (1.0 + np.cos(1.0)) * np.sin(0.6), 1.5 - 0.3 * (1.0 + np.cos(1.0)) * np.cos(0.6))


def build(device):
    """The imported arm with a tip marker; returns (model, tip body index)."""
    builder, scene = import_mjcf(ASSET)
    tip = builder.add_body()  # massless, welded 0.3 m down the second link
    builder.add_joint_fixed(scene.bodies["link2"], tip, parent_pos=(0.0, 0.0, -0.3))
    return builder.finalize(device=device, requires_grad=True, dtype=wp.float64), tip


def interpolation(steps: int) -> np.ndarray:
    """(steps, KNOTS) weights: torque at step k = weights[k] @ knot values."""
    t = np.linspace(0.0, KNOTS - 1, steps)
    weights = np.zeros((steps, KNOTS))
    lower = np.minimum(t.astype(int), KNOTS - 2)
    frac = t - lower
    weights[np.arange(steps), lower] = 1.0 - frac
    weights[np.arange(steps), lower + 1] = frac
    return weights


class Reach:
    """Loss and gradient of a knot vector (KNOTS, 2) in N m."""

    def __init__(self, model, tip: int, steps: int):
        self.model, self.tip, self.steps = model, tip, steps
        self.solver = SemiImplicitSolver(model)
        self.weights = interpolation(steps)
        self.controls = [model.control() for _ in range(steps)]
        self.target = wp.array([TARGET], dtype=wp.vec3d, device=model.device)

    def rollout(self, knots: np.ndarray, record: bool):
        torques = self.weights @ knots  # (steps, 2)
        for control, tau in zip(self.controls, torques):
            control.joint_f.assign(tau)
            control.joint_f.grad.zero_()
        state = self.model.state()
        tape = wp.Tape() if record else None
        with tape if record else contextlib.nullcontext():
            states = simulate(self.solver, state, self.steps, DT, lambda k: self.controls[k], keep_states=True)
            eval_fk(self.model, states[-1])
            miss = body_position_loss(states[-1], [self.tip], self.target)
        return tape, miss, states, torques

    def residual_and_jacobian(self, knots: np.ndarray) -> tuple:
        """Tip miss r = tip(T) - target (3,) m and its Jacobian (3, KNOTS * 2) m/(N m):
        one recorded rollout, three backward passes seeded with a unit adjoint on one
        coordinate of the tip's final position each."""
        tape, _, states, torques = self.rollout(knots, record=True)
        final = states[-1]
        tip = final.body_q.numpy()[self.tip, :3]
        rows = []
        for axis in range(3):
            seed = np.zeros((self.model.body_count, 7))
            seed[self.tip, axis] = 1.0
            tape.backward(grads={final.body_q: wp.array(seed, dtype=wp.transformd, device=self.model.device)})
            per_step = np.array([c.joint_f.grad.numpy() for c in self.controls])  # (steps, 2)
            rows.append((self.weights.T @ per_step).ravel())
            tape.zero()
        return tip - np.asarray(TARGET), np.array(rows), torques

    def tip_path(self, knots: np.ndarray) -> tuple:
        _, _, states, torques = self.rollout(knots, record=False)
        path = []
        for state in states:
            eval_fk(self.model, state)
            path.append(state.body_q.numpy()[self.tip, :3].copy())
        return np.array(path), states, torques


def run(test: bool, out, device) -> dict:
    out = Path(out)
    steps, iterations = (300, 6) if test else (600, 10)
    model, tip = build(device)
    reach = Reach(model, tip, steps)
    knots, history = np.zeros(2 * KNOTS), []
    for it in range(iterations):
        miss, jacobian, torques = reach.residual_and_jacobian(knots.reshape(KNOTS, 2))
        history.append(float(miss @ miss))
        progress_line(it + 1, iterations, f"miss {np.linalg.norm(miss) * 100:.2f} cm   peak torque "
                      f"{np.abs(torques).max():.2f} N m")
        # damped Gauss-Newton (Levenberg-Marquardt) step on |miss|^2 + EFFORT |knots|^2
        system = jacobian.T @ jacobian + EFFORT * np.eye(2 * KNOTS)
        knots = knots - np.linalg.solve(system, jacobian.T @ miss + EFFORT * knots)
    best = (history[-1], knots.reshape(KNOTS, 2), history[-1])
    first_path, first_states, _ = reach.tip_path(np.zeros((KNOTS, 2)))
    best_path, best_states, torques = reach.tip_path(best[1])
    _plot(out / "reach.png", history, first_path, best_path, torques, steps)
    every = int(round(0.01 / DT))
    write_rollouts(out / "reach.usd", model, {"first": first_states[::every], "best": best_states[::every]},
                   fps=1.0 / (every * DT))
    render_strip(out / "reach.usd", out / "reach_frames.png", take="best")
    final_miss = float(np.linalg.norm(best_path[-1] - TARGET))
    result = {"iterations": iterations, "steps": steps, "dt_s": DT, "target_m": list(TARGET),
              "first_miss_m": float(np.linalg.norm(first_path[-1] - TARGET)), "final_miss_m": final_miss,
              "miss_per_iteration_m": [float(np.sqrt(h)) for h in history], "knots_N_m": best[1].tolist()}
    write_json(out / "result.json", result)
    print(f"miss {result['first_miss_m'] * 100:.1f} cm -> {final_miss * 1e3:.2f} mm; wrote reach.png, "
          f"reach.usd, result.json in {out}")
    return result


def _plot(path: Path, history, first_path, best_path, torques, steps):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].semilogy(np.sqrt(history) * 100)
    axes[0].set(xlabel="iteration", ylabel="miss (cm)", title="tip miss at t = T")
    axes[1].plot(first_path[:1, 1], first_path[:1, 2], "ko", label="start (zero torques: stays)")
    axes[1].plot(best_path[:, 1], best_path[:, 2], "-", label="optimised")
    axes[1].plot(TARGET[1], TARGET[2], "r*", markersize=12, label="target")
    axes[1].set(xlabel="y (m)", ylabel="z (m)", title="tip path (side view)", aspect="equal")
    axes[1].legend()
    t = np.arange(steps) * DT
    axes[2].plot(t, torques[:, 0], label="shoulder")
    axes[2].plot(t, torques[:, 1], label="elbow")
    axes[2].set(xlabel="t (s)", ylabel="torque (N m)", title="optimised torques")
    axes[2].legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (shorter; asserts the tip ends within 5 mm)."""

    def check(result):
        if result["final_miss_m"] > 0.005:
            return f"the tip misses the target by {result['final_miss_m'] * 1e3:.1f} mm (> 5 mm)"
        return None

    return example_main(__doc__, "arm_reach", "short run; fail unless the tip ends within 5 mm of the target", run,
                        check, argv, inputs=[ASSET])


if __name__ == "__main__":
    sys.exit(main())
