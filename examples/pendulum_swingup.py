"""Trajectory optimisation under a torque limit: swing a pendulum up by pumping energy.

The pendulum is built in code: one capsule link (0.5 m long, radius 2 cm, 1500 kg/m^3,
about 0.99 kg, its centre of mass 0.25 m below the hinge) on a revolute joint about y at
1 m height (joint damping 0.01 N m s/rad), swinging in the x-z plane; angle 0 hangs
down, +-pi is upright. The motor torque is bounded by |u| <= u_max = 0.4 m g l_c (about
0.97 N m against the 2.43 N m that gravity exerts with the link horizontal), so it cannot
lift the link directly: it must swing back and forth to pump in the 2 m g l_c = 4.9 J the
climb needs. Semi-implicit Euler, float64, 10 ms steps, the torque held for 5 steps
(T = 60 plan steps, 3 s).

Every initial state is planned twice, towards +pi and towards -pi (worlds of one
``TrajectoryProblem``), and the better of the two counts. Cost: 50 rad^-2 (q_T - target)^2
+ 2 (rad/s)^-2 qd_T^2 + 0.01 (N m)^-2 sum u_t^2. iLQR (``wpsim.opt.ilqr``) and, in the full
run, L-BFGS-B shooting (``wpsim.opt.trajopt.shoot_lbfgsb``) start from zero torque with the
bounds honoured. Success: within 0.1 rad of upright at t = T with |qd_T| < 0.5 rad/s.
Full run (8 initial states, 120 rollouts per world): both methods swing every state up in 3 to 6
rate reversals, iLQR to angle errors of about 1e-3 rad in a quarter of L-BFGS-B's time.

Writes swingup.png (angle, rate and torque against time for every initial state, the best
plan's cost per iteration), swingup.usd (the best plans, side by side, 20 frames per second)
with swingup_frames.png, and result.json (angles in rad, rates in rad/s, torques in N m).
--test: 3 initial states, iLQR with 60 rollouts per world; fails unless every state
reaches upright and no torque exceeds u_max.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

import wpsim
from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.usd_export import write_rollouts
from wpsim.io.usd_render import render_strip
from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import TrajectoryCost, TrajectoryProblem, shoot_lbfgsb

LENGTH, RADIUS, DENSITY = 0.5, 0.02, 1500.0  # m, m, kg/m^3
HINGE_HEIGHT, DAMPING = 1.0, 0.01  # m, N m s/rad
GRAVITY = 9.81  # m/s^2
TORQUE_FRACTION = 0.4  # u_max / (m g l_c)
DT, SUBSTEPS, STEPS = 0.01, 5, 60  # s, simulator steps per plan step, plan steps
SUCCESS_RAD, SUCCESS_RATE = 0.1, 0.5  # rad, rad/s
METHODS = {"iLQR": ilqr, "L-BFGS-B": shoot_lbfgsb}


def scene() -> wpsim.ModelBuilder:
    """The pendulum (see the module docstring)."""
    b = wpsim.ModelBuilder(gravity=-GRAVITY)
    link = b.add_body()
    b.add_shape_capsule(link, pos=(0.0, 0.0, -LENGTH / 2), radius=RADIUS, half_height=LENGTH / 2, density=DENSITY)
    b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), parent_pos=(0.0, 0.0, HINGE_HEIGHT), damping=DAMPING)
    return b


def gravity_torque() -> float:
    """m g l_c (N m): the largest torque gravity exerts about the hinge (link horizontal)."""
    model = scene().finalize()
    return float(model.body_mass.numpy()[0] * GRAVITY * np.linalg.norm(model.body_com.numpy()[0]))


def initial_states(count: int, seed: int) -> np.ndarray:
    """(count, 2) angles (rad) and rates (rad/s): at rest hanging first, then a hanging
    start with a small push, then random angles within 1 rad of hanging and rates within
    +-1.5 rad/s."""
    rng = np.random.default_rng(seed)
    x0 = np.column_stack([rng.uniform(-1.0, 1.0, count), rng.uniform(-1.5, 1.5, count)])
    x0[0] = 0.0, 0.0
    if count > 1:
        x0[1] = 0.0, 1.0
    return x0


def wrapped_error(q: np.ndarray) -> np.ndarray:
    """|angle from upright| (rad) in [0, pi]."""
    return np.abs(np.remainder(q, 2.0 * np.pi) - np.pi)


def make_problem(x0: np.ndarray, u_max: float, device=None) -> TrajectoryProblem:
    """Worlds 2 i and 2 i + 1 plan initial state i towards +pi and -pi."""
    worlds = np.repeat(x0, 2, axis=0)
    goal = np.zeros((len(worlds), 1, 2))
    goal[:, 0, 0] = np.tile([np.pi, -np.pi], len(x0))
    cost = TrajectoryCost(target=goal, running=np.zeros(2), terminal=np.array([50.0, 2.0]), effort=np.full(1, 0.01))
    return TrajectoryProblem(scene(), worlds, STEPS, SUBSTEPS, DT, actuated=[0], lower=-u_max, upper=u_max, cost=cost,
                             device=device)


def summary(result, u_max: float) -> dict:
    """Per initial state: the better direction's final angle error, rate, success and torques."""
    error = wrapped_error(result.states[:, -1, 0]).reshape(-1, 2)
    rate = result.states[:, -1, 1].reshape(-1, 2)
    costs = result.costs.reshape(-1, 2)
    pick = np.argmin(np.where(np.isfinite(costs), costs, np.inf), axis=1)
    rows = np.arange(len(pick))
    chosen = 2 * rows + pick
    err, qd = error[rows, pick], rate[rows, pick]
    success = (err < SUCCESS_RAD) & (np.abs(qd) < SUCCESS_RATE)
    return {"worlds": chosen.tolist(), "direction": np.where(pick == 0, "+pi", "-pi").tolist(),
            "final_angle_error_rad": err.tolist(), "final_rate_rad_s": qd.tolist(), "success": success.tolist(),
            "success_rate": float(success.mean()), "cost": costs[rows, pick].tolist(),
            "max_torque_Nm": float(np.abs(result.controls).max()),
            "within_limit": bool(np.abs(result.controls).max() <= u_max * (1.0 + 1e-9)),
            "swings": [int((np.diff(np.sign(result.states[w, :, 1])) != 0).sum()) for w in chosen],
            **result.to_dict()}


def run(test: bool, out, device) -> dict:
    out = Path(out)
    mgl = gravity_torque()
    u_max = TORQUE_FRACTION * mgl
    print(f"gravity torque m g l_c = {mgl:.3f} N m, torque limit u_max = {u_max:.3f} N m")
    count, budget = (3, 60) if test else (8, 120)
    methods = {"iLQR": ilqr} if test else METHODS
    x0 = initial_states(count, seed=3)
    problem = make_problem(x0, u_max, device=device)
    results = {name: method(problem, budget) for name, method in methods.items()}
    rows = {name: summary(result, u_max) for name, result in results.items()}
    for name, r in rows.items():
        print(f"{name}: {r['rollouts']} rollouts per world, {r['wall_s']:.1f} s, success {r['success_rate']:.0%}, "
              f"largest |u| {r['max_torque_Nm']:.3f} N m")
        for i, (q0, qd0) in enumerate(x0):
            print(f"  start q0 = {q0:+.2f} rad, qd0 = {qd0:+.2f} rad/s -> {r['direction'][i]}: angle error "
                  f"{r['final_angle_error_rad'][i]:.4f} rad, rate {r['final_rate_rad_s'][i]:+.3f} rad/s, "
                  f"{r['swings'][i]} rate reversals, {'success' if r['success'][i] else 'FAILED'}")
    best = max(rows, key=lambda name: (rows[name]["success_rate"], -np.mean(rows[name]["cost"])))
    _plot(out / "swingup.png", results, rows, best, u_max)
    _write_stage(out / "swingup.usd", problem, results[best].states[rows[best]["worlds"]])
    render_strip(out / "swingup.usd", out / "swingup_frames.png")
    result = {"gravity_torque_Nm": mgl, "torque_limit_Nm": u_max, "initial_states": x0.tolist(),
              "budget_rollouts_per_world": budget, "horizon_s": STEPS * SUBSTEPS * DT, "best": best, "methods": rows}
    write_json(out / "result.json", result)
    print(f"best: {best}; wrote swingup.png, swingup.usd, swingup_frames.png, result.json in {out}")
    return result


def _write_stage(path: Path, problem: TrajectoryProblem, states: np.ndarray):
    """The plans' rollouts (states (n, T + 1, 2)) as one take, the pendulums 0.8 m apart along x."""
    model = scene().replicated(len(states)).finalize(dtype=wp.float64)
    frames = []
    for k in range(states.shape[1]):
        frame = model.state(requires_grad=False)
        frame.joint_q.assign(states[:, k, 0])
        frame.joint_qd.assign(states[:, k, 1])
        frames.append(frame)
    write_rollouts(path, model, {"swingup": frames}, fps=1.0 / (SUBSTEPS * DT), world_spacing=(0.8, 0.0, 0.0))


def _plot(path: Path, results: dict, rows: dict, best: str, u_max: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (angle, rate, torque, history) = plt.subplots(1, 4, figsize=(20, 4), layout="constrained")
    result, worlds = results[best], rows[best]["worlds"]
    t = np.arange(STEPS + 1) * SUBSTEPS * DT
    for i, w in enumerate(worlds):
        angle.plot(t, result.states[w, :, 0], label=f"start {i}")
        rate.plot(t, result.states[w, :, 1])
        torque.step(t[:-1], result.controls[w, :, 0], where="post")
    for level in (np.pi, -np.pi):
        angle.axhline(level, color="k", linestyle="--", linewidth=0.8)
    for level in (u_max, -u_max):
        torque.axhline(level, color="r", linestyle=":", linewidth=0.8)
    angle.set(xlabel="t (s)", ylabel="angle (rad, 0 hanging)", title=f"{best}: angle (upright dashed)")
    angle.legend(fontsize=7)
    rate.set(xlabel="t (s)", ylabel="rate (rad/s)", title="angular rate")
    torque.set(xlabel="t (s)", ylabel="torque (N m)", title=f"torque (limit +-{u_max:.2f} N m dotted)")
    for name, r in results.items():
        costs = np.array([r.initial_costs, *r.history])
        chosen = costs[:, rows[name]["worlds"]]
        history.semilogy(np.arange(len(costs)), chosen.mean(axis=1), label=name)
    history.set(xlabel="iteration", ylabel="best cost (mean over starts)", title="cost per iteration")
    history.legend()
    for ax in (angle, rate, torque, history):
        ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (3 initial states, iLQR with 60 rollouts each)."""

    def check(result):
        r = result["methods"]["iLQR"]
        if not all(r["success"]):
            failed = [i for i, ok in enumerate(r["success"]) if not ok]
            return (f"iLQR did not swing up from starts {failed}: angle errors "
                    f"{[round(r['final_angle_error_rad'][i], 3) for i in failed]} rad, rates "
                    f"{[round(r['final_rate_rad_s'][i], 3) for i in failed]} rad/s")
        if not r["within_limit"]:
            return f"a torque of {r['max_torque_Nm']:.3f} N m exceeds the limit {result['torque_limit_Nm']:.3f} N m"
        if result["torque_limit_Nm"] >= result["gravity_torque_Nm"]:
            return "the torque limit is not below m g l_c"
        return None

    return example_main(__doc__, "pendulum_swingup", "3 initial states, iLQR with 60 rollouts each; fail unless "
                        "every state swings up within the torque limit", run, check, argv)


if __name__ == "__main__":
    sys.exit(main())
