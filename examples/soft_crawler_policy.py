"""Policy learning: the soft block robot of ``soft_crawler.py`` learns a feedback gait, by
analytic policy gradients and by evolution strategies.

The scene is ``soft_crawler``'s (its ``crawler_builder`` and tet groups): a 20 cm Neo-Hookean
block on a ground with friction (mu = 0.8), four tet groups (back/front x bottom/top) whose
fibres lengthen or shorten along x with their activation. Here it is replicated into 32
worlds (semi-implicit, dt = 1 ms, float32) stepped through ``wpsim.opt.torch.TorchStep``.

Every 50 ms a policy (MLP, 2 x 32 tanh units) sees a 2 Hz gait clock (cos, sin), the
centre-of-mass velocity, the centre's height, the block's pitch and stretch (front minus back
half) and the current gait coefficients, and chooses each group's new coefficients
(alpha_g, beta_g), amplitude squashed below 0.3. The group activation is the sinusoid
a_g(t) = alpha_g(t) cos(2 pi 2 Hz t) + beta_g(t) sin(2 pi 2 Hz t) whose coefficients ramp
linearly over the 50 ms from the previous choice to the new one (a task variable of the
state), so activations never jump. A policy that outputs zeros plays soft_crawler's initial
gait (all groups in phase, amplitude 0.1). Reward per policy step: forward (x) displacement
of the centre of mass (m), so an episode's return is the distance crawled in 1 s. Episodes
start from the rest shape with random vertex offsets (+-1 mm) and velocities (+-2 cm/s).

APG (windows of 0.25 s, truncated backpropagation, value-free) and ES (antithetic, one
perturbation per world) get the same environment steps and the same initial weights; both
are evaluated on 64 held-out initial states (mean distance in 1 s; success: at least 10 cm,
half a body length). Writes crawl_training.png and result.json. --test: 16 worlds, 10
iterations each; APG's policy must crawl at least 2 cm further than the initial gait.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

import torch
from soft_crawler import CELL, DIMS, GROUPS, MAX_AMPLITUDE, crawler_builder, group_membership

from wpsim import SemiImplicitSolver
from wpsim.apps.console import example_main
from wpsim.io.files import write_json
from wpsim.opt.policies import (
    APGConfig,
    ESConfig,
    PolicyTask,
    held_out_states,
    plot_training,
    run_comparison,
    train_apg,
    train_es,
)
from wpsim.opt.torch import TorchStep

DT = 1e-3  # s
POLICY_DT = 0.05  # s
FREQUENCY = 2.0  # Hz
INITIAL_AMPLITUDE = 0.1  # the zero-output policy's gait: all groups in phase
SUCCESS_DISTANCE = 0.10  # m in one episode
HELD_OUT_SEED = 54321


def squash_gait(raw: torch.Tensor) -> torch.Tensor:
    """Gait coefficients (W, groups, 2) with amplitude MAX_AMPLITUDE tanh(|raw|) from raw (W, groups, 2)."""
    norm = torch.sqrt((raw * raw).sum(dim=-1, keepdim=True) + 1e-12)
    return MAX_AMPLITUDE * raw * torch.tanh(norm) / norm


class CrawlForward(PolicyTask):
    """Crawl as far forward (+x) as possible in one episode."""

    observation_size = 7 + 2 * len(GROUPS)
    action_size = 2 * len(GROUPS)

    def __init__(self, step, episode_s: float):
        repeat = int(round(POLICY_DT / step.dt))
        super().__init__(step, repeat, int(round(episode_s / POLICY_DT)))
        model = step.model
        per_world = model.particle_count // self.worlds
        mass = torch.tensor(model.particle_mass.numpy()[:per_world], dtype=self.dtype, device=self.device)
        self.mass_weights = mass / mass.sum()
        rest = model.particle_q.numpy()[:per_world]
        middle = 0.5 * DIMS[0] * CELL
        self.front = torch.tensor(rest[:, 0] > middle + 1e-6, device=self.device)
        self.back = torch.tensor(rest[:, 0] < middle - 1e-6, device=self.device)
        self.rest_height = float((torch.tensor(rest[:, 2], dtype=self.dtype, device=self.device)
                                  * self.mass_weights).sum())
        self.rest_stretch = float(rest[self.front.cpu().numpy(), 0].mean() - rest[self.back.cpu().numpy(), 0].mean())
        tets = model.tet_count // self.worlds
        self.membership = torch.tensor(group_membership(model)[:tets].T, dtype=self.dtype,
                                       device=self.device)  # (groups, tets)
        # raw output offset of the zero-output policy: amplitude INITIAL_AMPLITUDE on the cosine
        self.base = torch.zeros(len(GROUPS), 2, dtype=self.dtype, device=self.device)
        self.base[:, 0] = math.atanh(INITIAL_AMPLITUDE / MAX_AMPLITUDE)
        self.rest = step.initial_state()

    def initial_states(self, count: int, generator: torch.Generator) -> dict:
        """The rest shape with vertex offsets in +-1 mm and velocities in +-2 cm/s; the previous
        gait (task variable "gait", (count, groups, 2)): the zero-output policy's."""
        q0 = self.rest["particle_q"][:1].expand(count, -1, -1)
        noise = torch.rand(2, *q0.shape, generator=generator, dtype=torch.float64).to(self.device, self.dtype)
        noise = 2.0 * noise - 1.0
        gait = squash_gait(self.base).expand(count, -1, -1).contiguous()
        return {"particle_q": (q0 + 1e-3 * noise[0]).contiguous(), "particle_qd": (0.02 * noise[1]).contiguous(),
                "gait": gait}

    def centre(self, positions: torch.Tensor) -> torch.Tensor:
        """Mass-weighted centres (W, 3) of per-world particle rows (W, P, 3)."""
        return torch.einsum("wpk,p->wk", positions, self.mass_weights)

    def observe(self, state: dict, step_index: int) -> torch.Tensor:
        """(clock cos, clock sin, centre velocity / 5 cm/s (x, z), height / 1 cm, pitch / 1 cm, stretch / 1 cm,
        previous gait coefficients / 0.3)."""
        q, qd = state["particle_q"], state["particle_qd"]
        phase = 2.0 * math.pi * FREQUENCY * step_index * self.policy_dt
        clock = torch.tensor([math.cos(phase), math.sin(phase)], dtype=self.dtype, device=self.device)
        clock = clock.expand(q.shape[0], 2)
        velocity = self.centre(qd)[:, [0, 2]] / 0.05
        height = (self.centre(q)[:, 2:] - self.rest_height) / 0.01
        front, back = q[:, self.front].mean(dim=1), q[:, self.back].mean(dim=1)
        pitch = (front[:, 2:] - back[:, 2:]) / 0.01
        stretch = (front[:, :1] - back[:, :1] - self.rest_stretch) / 0.01
        previous = state["gait"].reshape(q.shape[0], -1) / MAX_AMPLITUDE
        return torch.cat([clock, velocity, height, pitch, stretch, previous], dim=1)

    def gait(self, action: torch.Tensor) -> torch.Tensor:
        """Gait coefficients (W, groups, 2) of the actions."""
        return squash_gait(action.reshape(-1, len(GROUPS), 2) + self.base)

    def controls(self, action: torch.Tensor, state: dict, time_s: float, substep: int) -> dict:
        """Tet activations of the groups' sinusoids at ``time_s``, their coefficients ramping
        linearly over the policy step from the previous gait to the action's (no jumps)."""
        blend = (substep + 1) / self.action_repeat
        coefficients = state["gait"] + blend * (self.gait(action) - state["gait"])
        phase = 2.0 * math.pi * FREQUENCY * time_s
        basis = torch.tensor([math.cos(phase), math.sin(phase)], dtype=self.dtype, device=self.device)
        group_activation = coefficients @ basis  # (W, groups)
        return {"tet_activation": (group_activation @ self.membership).contiguous()}

    def remember(self, action: torch.Tensor, state: dict) -> dict:
        """The gait reached at the end of the policy step."""
        return {"gait": self.gait(action)}

    def reward(self, previous: dict, action: torch.Tensor, current: dict) -> torch.Tensor:
        """Forward displacement (m) of the centre of mass during the policy step."""
        return self.centre(current["particle_q"])[:, 0] - self.centre(previous["particle_q"])[:, 0]

    def goal_reached(self, state: dict) -> torch.Tensor:
        """No per-state goal (success is the distance): True everywhere."""
        return torch.ones(state["particle_q"].shape[0], dtype=torch.bool, device=self.device)

    def episode_success(self, goal: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """At least SUCCESS_DISTANCE crawled forward."""
        return returns >= SUCCESS_DISTANCE


def make_task(worlds: int, episode_s: float, device=None) -> CrawlForward:
    """The crawling task over ``worlds`` replicated blocks."""
    model = crawler_builder().replicated(worlds).finalize(device=device, requires_grad=True, dtype=wp.float32)
    return CrawlForward(TorchStep(SemiImplicitSolver(model), DT, worlds=worlds), episode_s)


@dataclass
class CrawlPolicyConfig:
    """Budget and settings of both trainers (the same iterations: the same environment steps)."""

    worlds: int = 32
    episode_s: float = 1.0
    iterations: int = 40
    evaluate_every: int = 5
    held_out: int = 64
    hidden: tuple = (32, 32)
    apg: APGConfig = field(default_factory=lambda: APGConfig(window_steps=5, learning_rate=3e-3, max_grad_norm=1.0))
    es: ESConfig = field(default_factory=lambda: ESConfig(sigma=0.05, learning_rate=0.02))


def run(config: CrawlPolicyConfig, out_dir, device=None) -> dict:
    """Train by APG and by ES on the same budget; write crawl_training.png and result.json; return the result."""
    torch.set_num_threads(1)
    task = make_task(config.worlds, config.episode_s, device)
    held_out = held_out_states(task, config.held_out, HELD_OUT_SEED)
    config.apg.iterations = config.es.iterations = config.iterations
    runs = run_comparison(task, [("APG", train_apg, config.apg), ("ES", train_es, config.es)], held_out,
                          config.hidden, config.evaluate_every, success_threshold=0.5)
    summary, final = runs["comparison"], runs["final"]
    initial = runs["histories"][0].evaluations[0]["mean_return"]  # both start from the same weights
    result = {
        "config": asdict(config),
        "episode_env_steps": task.episode_env_steps,
        "initial_held_out_distance_m": initial,
        "comparison": summary,
        "final_held_out": {name: {"mean_distance_m": e.mean_return, "success_rate": e.success_rate,
                                  "worst_distance_m": float(np.min(e.returns))} for name, e in final.items()},
        "histories": [h.to_dict() for h in runs["histories"]],
    }
    out = Path(out_dir)
    write_json(out / "result.json", result)
    plot_training(runs["histories"], out / "crawl_training.png",
                  f"soft crawler: distance (m) in {config.episode_s:g} s ({config.worlds} worlds, "
                  f"{config.held_out} held-out states; success: >= {100 * SUCCESS_DISTANCE:g} cm)")
    print(f"initial gait: {100 * initial:+.2f} cm in {config.episode_s:g} s (held-out mean)")
    for name, entry in summary["methods"].items():
        e = final[name]
        print(f"{name}: {100 * e.mean_return:+.2f} cm in {config.episode_s:g} s (held-out mean; worst "
              f"{100 * min(e.returns):+.2f} cm; {e.success_rate:.0%} >= {100 * SUCCESS_DISTANCE:g} cm) after "
              f"{entry['total_env_steps']:,} steps, {entry['total_wall_s']:.0f} s of training")
    for name, entry in summary["methods"].items():
        reached = entry["env_steps_to_threshold"]
        print(f"{name}: half of the held-out states >= {100 * SUCCESS_DISTANCE:g} cm "
              + (f"after {reached:,} steps, {entry['wall_s_to_threshold']:.0f} s" if reached is not None else "never")
              + f"; best held-out mean within {summary['equal_budget_wall_s']:.0f} s of training: "
              f"{100 * entry['best_mean_return_at_equal_wall_s']:+.2f} cm")
    print(f"wrote {out / 'crawl_training.png'}, {out / 'result.json'}")
    return result


def check(result: dict):
    """Failure message unless APG's policy crawls at least 2 cm further than the initial gait (held-out mean)."""
    gain = result["final_held_out"]["APG"]["mean_distance_m"] - result["initial_held_out_distance_m"]
    return f"APG gains only {100 * gain:.2f} cm over the initial gait (< 2 cm)" if gain < 0.02 else None


def main(argv=None) -> int:
    """Command line: --device, --out, --test (short budget; APG must gain >= 2 cm)."""
    return example_main(
        __doc__, "soft_crawler_policy", "short budget; fail unless APG's policy gains >= 2 cm over the initial gait",
        lambda test, out, device: run(CrawlPolicyConfig(iterations=10, evaluate_every=5, held_out=32, worlds=16)
                                      if test else CrawlPolicyConfig(), out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
