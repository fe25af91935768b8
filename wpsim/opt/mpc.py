"""Receding-horizon control (model-predictive control) by iLQR, alone or around a nominal policy.

``RecedingHorizon`` holds a short-horizon ``TrajectoryProblem`` (H plan steps) of the W
worlds it controls and re-plans at every plan step from the worlds' current states:

- alone (``nominal=None``): iLQR starts from the previous plan shifted by one step (its
  last control repeated; zeros in the bounds at the first step);
- around a policy (``nominal=policy``): the policy is rolled out closed loop over the
  horizon from the current states, and iLQR starts from its controls ū_t, so the applied
  control is u_t = ū_t + r_t: the policy's action (no gradient flows into the policy) plus
  the residual r_t that the short-horizon plan adds. Where iLQR finds nothing better, r_t = 0
  and the policy acts alone.

The problem's cost is the controller's: its running weights on states 1..H-1 of each plan,
its terminal weights on state H, a time-invariant target (broadcast over the steps). Only
the first control of each plan is applied. ``controller(k, state, control)`` is the
callback of ``wpsim.solvers.rollout.simulate`` (k counts simulator steps: a re-plan every
``problem.substeps``), so any scene can run under it; ``run`` steps a plant of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from wpsim.opt.ilqr import ilqr
from wpsim.opt.trajopt import TrajectoryProblem


@dataclass
class ClosedLoop:
    """A closed-loop run of W worlds: states (W, S + 1, nx) at the plan steps, controls
    (W, S, nu) applied (N m or N), plan_s: wall time of every re-plan (s), events: what
    stopped a world's plan ("plan step k: iteration i, world w: ...")."""

    states: np.ndarray
    controls: np.ndarray
    plan_s: list = field(default_factory=list)
    events: list = field(default_factory=list)

    @property
    def seconds_per_control_step(self) -> float:
        """Mean wall time of one re-plan (s), all W worlds together."""
        return float(np.mean(self.plan_s)) if self.plan_s else 0.0


class RecedingHorizon:
    """iLQR re-planned at every plan step (see the module docstring).

    problem: the short-horizon problem of the W controlled worlds (its x0 is overwritten
        at each re-plan).
    budget: rollouts per world per re-plan (a nominal policy's rollout counts one), at
        least nx + 2 for the iLQR part (its start and one iteration).
    nominal: None, or ``policy(k, x (W, nx)) -> u (W, nu)`` of the episode's plan step k.
    ilqr_options: keyword arguments for ``wpsim.opt.ilqr.ilqr`` (regularisation).
    """

    def __init__(self, problem: TrajectoryProblem, budget: int, nominal=None, ilqr_options: dict | None = None):
        self.problem, self.nominal = problem, nominal
        self.ilqr_budget = int(budget) - (1 if nominal is not None else 0)
        if int(budget) != budget or self.ilqr_budget < problem.nx + 2:
            raise ValueError(f"RecedingHorizon: budget must be an integer >= {problem.nx + 2 + (nominal is not None)} "
                             f"rollouts per world per re-plan, got {budget}")
        self.ilqr_options = dict(ilqr_options or {})
        self.plan: np.ndarray | None = None
        """(W, H, nu) the latest plan."""
        self.gains: np.ndarray | None = None
        """(W, H, nu, nx + nu) its feedback gains."""
        self.plan_s, self.events = [], []
        self._held: np.ndarray | None = None

    def reset(self):
        """Forget the previous plan, timings and events (a new episode)."""
        self.plan = self.gains = self._held = None
        self.plan_s, self.events = [], []

    def _start_plan(self, k: int) -> np.ndarray:
        """(W, H, nu) the controls iLQR starts from at plan step k."""
        p = self.problem
        if self.nominal is not None:
            _, _, U, _ = p.plans.simulate(policy=lambda t, x: p.clip(np.asarray(self.nominal(k + t, x), np.float64)))
            return U
        if self.plan is None:
            return p.initial_controls()
        return np.concatenate([self.plan[:, 1:], self.plan[:, -1:]], axis=1)

    def act(self, k: int, x: np.ndarray) -> np.ndarray:
        """Re-plan from the states x (W, nx) at plan step k; returns the (W, nu) controls to apply."""
        started = time.perf_counter()
        self.problem.restart(x)
        result = ilqr(self.problem, self.ilqr_budget, controls=self._start_plan(k), **self.ilqr_options)
        self.plan, self.gains = result.controls, result.gains
        self.events.extend(f"plan step {k}: {event}" for event in result.events)
        self.plan_s.append(time.perf_counter() - started)
        return self.plan[:, 0]

    def __call__(self, k: int, state, control):
        """``simulate``'s controller: re-plans from ``state`` at every ``problem.substeps``-th
        simulator step k and writes the held controls into ``control``."""
        plans = self.problem.plans
        if k % self.problem.substeps == 0 or self._held is None:
            self._held = self.act(k // self.problem.substeps, plans.read_state(state))
        plans.fill_control(control, self._held)

    def run(self, x0: np.ndarray, plan_steps: int) -> ClosedLoop:
        """Control the W worlds from x0 (W, nx) for ``plan_steps`` plan steps on a plant of
        their own (the problem's scene and solver, unrecorded)."""
        p = self.problem
        if int(plan_steps) != plan_steps or plan_steps < 1:
            raise ValueError(f"plan_steps must be an integer >= 1, got {plan_steps}")
        x0 = p.checked_states(x0)
        if x0.shape[0] != p.worlds:
            raise ValueError(f"run: x0 must hold the controller's {p.worlds} worlds, got {x0.shape[0]}")
        plant = p.builder.replicated(p.worlds).finalize(device=p.device, dtype=p.dtype)
        solver = p.make_solver(plant)
        states = [plant.state(), plant.state()]
        control = plant.control()
        p.plans.write_state(states[0], x0)
        self.reset()
        X, U = np.empty((p.worlds, plan_steps + 1, p.nx)), np.empty((p.worlds, plan_steps, p.nu))
        X[:, 0] = x0
        for k in range(plan_steps):
            U[:, k] = self.act(k, X[:, k])
            p.plans.fill_control(control, U[:, k])
            for _ in range(p.substeps):
                solver.step(states[0], states[1], control, p.dt)
                states.reverse()
            X[:, k + 1] = p.plans.read_state(states[0])
        return ClosedLoop(X, U, list(self.plan_s), list(self.events))
