"""Semi-implicit (symplectic Euler) solver for particles, springs, cloth and soft bodies."""

from __future__ import annotations

import numpy as np
import warp as wp

from ..kernels import particles
from ..kernels.generic import for_precision
from ..model import Control, Model, State
from .articulation import ArticulationStepper
from .base import SolverBase
from .forces import launch_forces


class SemiImplicitSolver(SolverBase):
    """Explicit force evaluation followed by a symplectic Euler update.

    A step is at most seven launches: broad phase (only with particle-particle contact,
    not recorded on the tape), particle forces (drag, external, contact), springs,
    triangles, bending hinges, tetrahedra, integration. Launches of absent element kinds
    are skipped. Forces of the step are written into ``state_in.particle_f``, the contact
    neighbour list into ``state_in.neighbor_*``; positions and velocities into
    ``state_out``. Recorded on ``wp.Tape`` like any launch: give every step a fresh
    ``state_out`` while recording.

    Args:
        model: the Model to step.
        **health_options: see ``SolverBase`` (raise_on_blowup, health_check_interval,
            max_coordinate, max_speed).
    """

    def __init__(self, model: Model, **health_options):
        super().__init__(model, **health_options)
        self._articulations = ArticulationStepper(model) if model.body_count else None
        self._grid = None
        if model.particle_max_neighbors > 0:
            dim = int(np.clip(2 * round(model.particle_count ** (1.0 / 3.0)), 8, 128))
            self._grid = wp.HashGrid(dim, dim, dim, device=model.device, dtype=model.dtype)

    def step(self, state_in: State, state_out: State, control: Control | None, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out`` under ``control``."""
        model = self.model
        control = self._zero_control if control is None else control
        n = model.particle_count
        real = model.real
        if self._grid is not None:
            self._find_neighbors(state_in)
        launch_forces(
            model, state_in.particle_q, state_in.particle_qd, control, dt, self._friction_smoothing,
            state_in.neighbor_count, state_in.neighbor_index, state_in.particle_f,
        )
        q, qd, f = state_in.particle_q, state_in.particle_qd, state_in.particle_f
        wp.launch(
            for_precision(particles.integrate_particles, model.dtype),
            dim=n,
            inputs=[
                model.particle_mass, model.particle_world, model.gravity, q, qd, f, real(dt),
                self.step_count, self.max_coordinate, self.max_speed,
            ],
            outputs=[state_out.particle_q, state_out.particle_qd, self.world_fault_step],
            device=model.device,
        )
        if self._articulations is not None:
            self._articulations.step(self, state_in, state_out, control, dt)
        self._step_done()

    def _find_neighbors(self, state: State):
        """Broad phase for particle-particle contact (not differentiated, not on the tape)."""
        model = self.model
        cell = 2.0 * model.particle_max_radius
        self._grid.build(state.particle_q, cell)
        wp.launch(
            for_precision(particles.build_neighbor_lists, model.dtype),
            dim=model.particle_count,
            inputs=[wp.uint64(self._grid.id), model.particle_radius, model.particle_world, state.particle_q, model.real(cell)],
            outputs=[state.neighbor_count, state.neighbor_index, self.neighbor_overflow],
            device=model.device,
            record_tape=False,
        )
