"""Policy learning: cart-pole swing-up by analytic policy gradients and by evolution strategies.

The cart-pole of ``assets/cartpole.xml`` (1 kg cart on a slider, 0.2 kg pole of 1 m on a hinge,
angle 0 upright) is imported from MJCF and replicated into 64 worlds stepped together
(semi-implicit, dt = 10 ms, float32) through ``wpsim.opt.torch.TorchStep``. Every episode
starts each world from a random state: pole angle uniform over the circle, cart within
+-0.5 m, small velocities. A policy (MLP, 2 x 64 tanh units) sees (x, cos, sin, velocities)
every 20 ms (action repeat 2) and pushes the cart with 10 N tanh(a). Reward per policy step:
minus the cost angle^2 (rad^2, angle wrapped to [-pi, pi)) + 0.1 rate^2 + 0.05 x^2 + 0.1 speed^2
+ 0.001 a^2, and a steep 2 (|x| - 1.5 m)^2 beyond 1.5 m. An episode lasts 5 s. Success: the pole
within 0.1 rad of upright and the cart within +-2 m at every simulator step of the last second.

Trainers with the same policy architecture, the same initial weights and the same
environment steps per iteration (one 5 s episode of all 64 worlds = 32,000 steps):

- APG: backpropagation through the simulator over windows of 1 s (truncated at the window
  boundaries), one Adam update per window (learning rate 1e-2 decayed to 1e-3), gradient norm
  clipped at 1; value-free: the objective is the window's reward sum;
- APG+value (full run only): windows of 0.5 s closed by a learned value of the end state
  (discount 0.99 per policy step, TD(0.95) targets), as in SHAC;
- ES: antithetic evolution strategies, one perturbed policy per world (32 pairs), no gradients.

All are evaluated on 100 held-out initial states. Writes training.png (held-out success and
return against environment steps and wall time), swingup.usd (the trained APG policy from four
held-out states, side by side) with swingup_frames.png, and result.json (histories and the
comparison: environment steps and training time to reach 50 % success, best score at equal
budget). --test: 50 iterations of APG and ES; APG must reach 50 % and beat ES.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import warp as wp

wp.config.log_level = wp.LOG_WARNING

import torch

from wpsim import SemiImplicitSolver
from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.io.mjcf import import_mjcf
from wpsim.opt.policies import (
    APGConfig,
    ESConfig,
    PolicyTask,
    episode_path,
    held_out_states,
    plot_training,
    run_comparison,
    train_apg,
    train_es,
)
from wpsim.opt.torch import TorchStep

ASSET = Path(__file__).resolve().parents[1] / "assets" / "cartpole.xml"
DT = 0.01  # s
ACTION_REPEAT = 2
EPISODE_S, SUCCESS_S = 5.0, 1.0  # s
MAX_FORCE = 10.0  # N
TRACK = 2.0  # m, half length of the track
UPRIGHT_TOLERANCE = 0.1  # rad
SOFT_TRACK = 1.5  # m, where the track penalty starts
HELD_OUT_SEED = 12345  # the held-out initial states' own seed (training draws from config seeds)


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Angle (rad) wrapped into [-pi, pi)."""
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


class CartPoleSwingUp(PolicyTask):
    """Swing the pole up from anywhere on the circle and balance it, cart on a +-2 m track."""

    observation_size = 5
    action_size = 1

    def initial_states(self, count: int, generator: torch.Generator) -> dict:
        """Pole angle uniform over the circle, cart in +-0.5 m, speeds in +-0.2 m/s and +-0.5 rad/s."""
        u = torch.rand(count, 4, generator=generator, dtype=torch.float64)
        q = torch.stack([u[:, 0] - 0.5, (2.0 * u[:, 1] - 1.0) * math.pi], dim=1)
        qd = torch.stack([0.4 * (u[:, 2] - 0.5), u[:, 3] - 0.5], dim=1)
        return {"joint_q": q.to(self.device, self.dtype).contiguous(),
                "joint_qd": qd.to(self.device, self.dtype).contiguous()}

    def observe(self, state: dict, step_index: int) -> torch.Tensor:
        """(x / 2 m, cos, sin, cart speed / 3 m/s, pole rate / 8 rad/s)."""
        x, angle = state["joint_q"][:, 0], state["joint_q"][:, 1]
        speed, rate = state["joint_qd"][:, 0], state["joint_qd"][:, 1]
        return torch.stack([x / TRACK, torch.cos(angle), torch.sin(angle), speed / 3.0, rate / 8.0], dim=1)

    def controls(self, action: torch.Tensor, state: dict, time_s: float, substep: int) -> dict:
        """Cart force MAX_FORCE tanh(a) (N); no torque on the pole."""
        force = MAX_FORCE * torch.tanh(action[:, :1])
        return {"joint_f": torch.cat([force, torch.zeros_like(force)], dim=1).contiguous()}

    def reward(self, previous: dict, action: torch.Tensor, current: dict) -> torch.Tensor:
        """Minus a quadratic cost of the wrapped pole angle, the speeds, the cart position and
        the action, and a steep penalty near the track ends."""
        x, angle = current["joint_q"][:, 0], wrap_angle(current["joint_q"][:, 1])
        speed, rate = current["joint_qd"][:, 0], current["joint_qd"][:, 1]
        beyond = torch.relu(x.abs() - SOFT_TRACK)
        return -(angle * angle + 0.1 * rate * rate + 0.05 * x * x + 0.1 * speed * speed + 2.0 * beyond * beyond
                 + 0.001 * action[:, 0] ** 2)

    def goal_reached(self, state: dict) -> torch.Tensor:
        """Pole within 0.1 rad of upright, cart within the track."""
        x, angle = state["joint_q"][:, 0], state["joint_q"][:, 1]
        return (wrap_angle(angle).abs() < UPRIGHT_TOLERANCE) & (x.abs() < TRACK)


def make_task(worlds: int, device=None) -> CartPoleSwingUp:
    """The swing-up task over ``worlds`` replicated cart-poles."""
    builder, _ = import_mjcf(ASSET)
    model = builder.replicated(worlds).finalize(device=device, requires_grad=True, dtype=wp.float32)
    step = TorchStep(SemiImplicitSolver(model), DT, worlds=worlds)
    episode = int(round(EPISODE_S / (DT * ACTION_REPEAT)))
    return CartPoleSwingUp(step, ACTION_REPEAT, episode, success_steps=int(round(SUCCESS_S / (DT * ACTION_REPEAT))))


@dataclass
class SwingUpConfig:
    """Budget and settings of the trainers (the same iterations: the same environment steps).
    ``apg_value``: an extra APG run with a learned value at the window ends (None: skipped)."""

    worlds: int = 64
    iterations: int = 150
    evaluate_every: int = 10
    held_out: int = 100
    success_threshold: float = 0.5
    hidden: tuple = (64, 64)
    apg: APGConfig = field(default_factory=lambda: APGConfig(window_steps=50, learning_rate=1e-2,
                                                             final_learning_rate=1e-3, max_grad_norm=1.0))
    es: ESConfig = field(default_factory=lambda: ESConfig(sigma=0.05, learning_rate=0.05))
    apg_value: APGConfig | None = field(default_factory=lambda: APGConfig(
        window_steps=25, learning_rate=1e-2, final_learning_rate=1e-3, max_grad_norm=1.0, value_hidden=(64, 64)))


def run(config: SwingUpConfig, out_dir, device=None) -> dict:
    """Train by APG and by ES on the same budget; write training.png and result.json; return the result."""
    torch.set_num_threads(1)
    task = make_task(config.worlds, device)
    held_out = held_out_states(task, config.held_out, HELD_OUT_SEED)
    trainers = [("APG", train_apg, config.apg), ("ES", train_es, config.es)]
    if config.apg_value is not None:
        trainers.insert(1, ("APG+value", train_apg, config.apg_value))
    for _, _, settings in trainers:
        settings.iterations = config.iterations
    runs = run_comparison(task, trainers, held_out, config.hidden, config.evaluate_every, config.success_threshold)
    summary, final = runs["comparison"], runs["final"]
    result = {
        "config": asdict(config),
        "episode_env_steps": task.episode_env_steps,
        "comparison": summary,
        "final_held_out": {name: {"success_rate": e.success_rate, "mean_return": e.mean_return}
                           for name, e in final.items()},
        "histories": [h.to_dict() for h in runs["histories"]],
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    write_swing_ups(out / "swingup.usd", task, runs["policies"]["APG"], held_out)
    plot_training(runs["histories"], out / "training.png",
                  f"cart-pole swing-up ({config.worlds} worlds, {config.held_out} held-out states)",
                  config.success_threshold)
    for name, entry in summary["methods"].items():
        steps = entry["env_steps_to_threshold"]
        reached = (f"reached {config.success_threshold:.0%} after {steps:,} steps, {entry['wall_s_to_threshold']:.0f} s"
                   if steps is not None else f"never reached {config.success_threshold:.0%}")
        print(f"{name}: held-out success {final[name].success_rate:.0%}, mean return {final[name].mean_return:+.1f} "
              f"after {entry['total_env_steps']:,} steps ({entry['total_wall_s']:.0f} s of training); {reached}")
    at_equal_time = ", ".join(f"{name} {entry['best_success_rate_at_equal_wall_s']:.0%}"
                              for name, entry in summary["methods"].items())
    print(f"best held-out success within {summary['equal_budget_wall_s']:.0f} s of training: {at_equal_time}")
    print(f"wrote {out / 'training.png'}, {out / 'result.json'}, {out / 'swingup.usd'}, {out / 'swingup_frames.png'}")
    return result


def write_swing_ups(path: Path, task: CartPoleSwingUp, policy, held_out: dict, shown: int = 4):
    """The trained policy's episodes from the first ``shown`` held-out states, side by side
    1 m apart along y, as a USD stage at the policy rate, and a strip of its frames."""
    from wpsim.io.usd_export import UsdRecorder
    from wpsim.io.usd_render import render_strip

    path_states = episode_path(task, policy, {k: v[:shown] for k, v in held_out.items()})
    builder, scene = import_mjcf(ASSET)
    model = builder.replicated(shown).finalize(dtype=wp.float32)
    recorder = UsdRecorder(model, fps=1.0 / (DT * ACTION_REPEAT), world_spacing=(0.0, 1.0, 0.0),
                           body_names={index: name for name, index in scene.bodies.items()})
    frame = model.state(requires_grad=False)
    for state in path_states:
        frame.joint_q.assign(state["joint_q"][:shown].reshape(-1).cpu().numpy())
        frame.joint_qd.assign(state["joint_qd"][:shown].reshape(-1).cpu().numpy())
        recorder.record(frame)
    recorder.write(path)
    render_strip(path, path.with_name(f"{path.stem}_frames.png"))


def check(result: dict):
    """Failure message unless APG reaches 50 % held-out success and beats ES at the same budget."""
    apg, es = result["final_held_out"]["APG"], result["final_held_out"]["ES"]
    if apg["success_rate"] < 0.5:
        return f"APG held-out success {apg['success_rate']:.0%} < 50 %"
    if apg["success_rate"] <= es["success_rate"]:
        return f"APG ({apg['success_rate']:.0%}) not better than ES ({es['success_rate']:.0%}) at the same budget"
    return None


def main(argv=None) -> int:
    """Command line: --device, --out, --test (short budget; APG >= 50 % success and better than ES)."""
    return example_main(
        __doc__, "cartpole_swingup", "short budget; fail unless APG reaches 50 % held-out success and beats ES",
        lambda test, out, device: run(SwingUpConfig(iterations=50, apg_value=None) if test else SwingUpConfig(),
                                      out, device),
        check, argv, inputs=[ASSET],
    )


if __name__ == "__main__":
    sys.exit(main())
