"""The throw task (the demo ``wpsim demo --task throw``, ``wpsim.apps.throw_demo``): throw a
soft cube so that, after bouncing off the ground, it lands on a target.

A 2x2x2-cell Neo-Hookean cube is thrown with an initial velocity v0 (m/s). At the horizon
(0.8 s, after it has bounced) the loss is the squared horizontal distance (m^2) between its
centre of mass and a target spot on the ground. The target is where a throw at a hidden
velocity ends up, so it is reachable. Gradients of the loss w.r.t. v0 come from
``wp.Tape`` through 800 steps of FEM and ground contact; gradient descent with an adaptive
step (``wpsim.opt.optimisers.adaptive_gradient_descent``) updates v0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.diff import diagnostics
from wpsim.diff.losses import squared_distance
from wpsim.solvers import SemiImplicitSolver
from wpsim.solvers.rollout import simulate
from wpsim.tasks import scene_library


@dataclass
class DemoConfig:
    """Settings of the bounce-to-target optimisation."""

    iterations: int = 30
    horizon_s: float = 0.8
    dt: float = 1e-3
    initial_velocity: tuple = (1.0, 0.0, 2.0)
    hidden_velocity: tuple = (1.6, 0.5, 2.6)
    learning_rate: float = 1.0  # initial step, (m/s)^2 / m^2
    tolerance_m2: float = 1e-8  # stop once the miss is below 0.1 mm

    @property
    def steps(self) -> int:
        return int(round(self.horizon_s / self.dt))


class BounceProblem:
    """The soft cube, its solver, and loss/gradient evaluations as functions of v0."""

    def __init__(self, config: DemoConfig, device=None):
        self.config = config
        self.model = scene_library.bouncing_cube(config.initial_velocity).finalize(device=device, requires_grad=True)
        self.solver = SemiImplicitSolver(self.model)
        self.weights = diagnostics.mass_weights(self.model)
        self.state0 = self.model.state()
        self.target = wp.zeros(1, dtype=self.model.vec3, device=self.model.device)
        self.horizontal = tuple(1.0 - u for u in self.model.up_vector)

    def _throw(self, velocity):
        self.state0.particle_qd.assign(np.tile(np.asarray(velocity, dtype=np.float64), (self.model.particle_count, 1)))
        self.solver.reset_health()

    def final_centroid(self, velocity) -> np.ndarray:
        """Centre of mass (m) at the horizon for initial velocity ``velocity``."""
        self._throw(velocity)
        final = simulate(self.solver, self.state0, self.config.steps, self.config.dt)
        self.solver.check_health()
        return diagnostics.centroids(self.model, final, self.weights).numpy()[0].astype(np.float64)

    def states(self, velocity) -> list:
        """All steps + 1 states of the rollout with initial velocity ``velocity``."""
        self._throw(velocity)
        states = simulate(self.solver, self.state0, self.config.steps, self.config.dt, keep_states=True)
        self.solver.check_health()
        return states

    def trajectory(self, velocity) -> np.ndarray:
        """Centre-of-mass path (steps + 1, 3) in m for initial velocity ``velocity``."""
        states = self.states(velocity)
        return np.array([diagnostics.centroids(self.model, s, self.weights).numpy()[0] for s in states], dtype=np.float64)

    def loss_and_gradient(self, velocity) -> tuple[float, np.ndarray]:
        """Loss (m^2) and its gradient w.r.t. v0 (m^2 per m/s), from one taped rollout."""
        self._throw(velocity)
        tape = wp.Tape()
        with tape:
            final = simulate(self.solver, self.state0, self.config.steps, self.config.dt)
            centroid = diagnostics.centroids(self.model, final, self.weights)
            loss = squared_distance(centroid, self.target, axis_weights=self.horizontal)
        self.solver.check_health()
        tape.backward(loss=loss)
        grad = self.state0.particle_qd.grad.numpy().astype(np.float64).sum(axis=0)
        value = float(loss.numpy()[0])
        tape.zero()
        return value, grad
