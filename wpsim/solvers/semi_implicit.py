"""Semi-implicit (symplectic Euler) solver for particles, springs, cloth and soft bodies."""

from __future__ import annotations

import numpy as np
import warp as wp

from ..health import NO_FAULT, HealthReport, SimulationBlowUp, SimulationError
from ..kernels import cloth, fem, particles, springs
from ..kernels.generic import for_precision
from ..model import Control, Model, State


class SemiImplicitSolver:
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
        raise_on_blowup: raise ``SimulationBlowUp`` as soon as a health check fails.
        health_check_interval: with ``raise_on_blowup``, read the health flags back every
            this many steps (each read synchronises with the device).
        max_coordinate: positions beyond this distance from the origin (m) count as a blow-up.
        max_speed: speeds beyond this (m/s) count as a blow-up.
    """

    def __init__(
        self,
        model: Model,
        raise_on_blowup: bool = False,
        health_check_interval: int = 1,
        max_coordinate: float = 1.0e5,
        max_speed: float = 1.0e5,
    ):
        if health_check_interval < 1:
            raise ValueError("health_check_interval must be >= 1")
        self.model = model
        self.raise_on_blowup = raise_on_blowup
        self.health_check_interval = health_check_interval
        self.max_coordinate = model.real(max_coordinate)
        self.max_speed = model.real(max_speed)
        self._friction_smoothing = model.real(model.friction_smoothing)
        self.step_count = 0
        """Steps taken by this solver; the step index reported by health checks."""
        device = model.device
        self.world_fault_step = wp.full(model.num_worlds, NO_FAULT, dtype=wp.int32, device=device)
        self.neighbor_overflow = wp.zeros(1, dtype=wp.int32, device=device)
        self._zero_control = model.control(requires_grad=False)
        self._grid = None
        if model.particle_max_neighbors > 0:
            dim = int(np.clip(2 * round(model.particle_count ** (1.0 / 3.0)), 8, 128))
            self._grid = wp.HashGrid(dim, dim, dim, device=device, dtype=model.dtype)

    def step(self, state_in: State, state_out: State, control: Control | None, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out`` under ``control``."""
        model = self.model
        control = self._zero_control if control is None else control
        n = model.particle_count
        real = model.real
        if self._grid is not None:
            self._find_neighbors(state_in)
        wp.launch(
            for_precision(particles.eval_particle_forces, model.dtype),
            dim=n,
            inputs=[
                model.particle_mass, model.particle_radius, model.particle_drag, model.particle_world,
                model.shape_kind, model.shape_world, model.shape_transform, model.shape_size,
                model.shape_ke, model.shape_kd, model.shape_mu,
                model.pair_ke, model.pair_kd, model.pair_mu, self._friction_smoothing, real(dt),
                state_in.particle_q, state_in.particle_qd, state_in.neighbor_count, state_in.neighbor_index,
                control.particle_f_ext,
            ],
            outputs=[state_in.particle_f],
            device=model.device,
        )
        q, qd, f = state_in.particle_q, state_in.particle_qd, state_in.particle_f
        if model.spring_count:
            wp.launch(
                for_precision(springs.eval_springs, model.dtype),
                dim=model.spring_count,
                inputs=[model.spring_indices, model.spring_ke, model.spring_kd, model.spring_rest_length, q, qd],
                outputs=[f],
                device=model.device,
            )
        if model.tri_count:
            wp.launch(
                for_precision(cloth.eval_triangles, model.dtype),
                dim=model.tri_count,
                inputs=[
                    model.tri_indices, model.tri_rest_inv, model.tri_rest_area,
                    model.tri_mu, model.tri_lambda, model.tri_kd, q, qd,
                ],
                outputs=[f],
                device=model.device,
            )
        if model.bend_count:
            wp.launch(
                for_precision(cloth.eval_bending, model.dtype),
                dim=model.bend_count,
                inputs=[model.bend_indices, model.bend_rest_angle, model.bend_ke, model.bend_kd, q, qd],
                outputs=[f],
                device=model.device,
            )
        if model.tet_count:
            wp.launch(
                for_precision(fem.eval_tetrahedra, model.dtype),
                dim=model.tet_count,
                inputs=[
                    model.tet_indices, model.tet_rest_inv, model.tet_rest_volume, model.tet_mu,
                    model.tet_lambda, model.tet_kd, model.tet_fiber, q, qd, control.tet_activation,
                ],
                outputs=[f],
                device=model.device,
            )
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
        self.step_count += 1
        if self.raise_on_blowup and self.step_count % self.health_check_interval == 0:
            self.check_health(raise_error=True)

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

    def health(self) -> HealthReport:
        """Read the per-world blow-up flags and the neighbour overflow flag (synchronises)."""
        steps = self.world_fault_step.numpy()
        overflow = int(self.neighbor_overflow.numpy()[0])
        faults = {int(w): int(s) for w, s in enumerate(steps) if s != NO_FAULT}
        return HealthReport(faults, overflow - 1 if overflow > 0 else None)

    def check_health(self, raise_error: bool = True) -> HealthReport:
        """The health report. With ``raise_error``: ``SimulationBlowUp`` if a world blew up,
        ``SimulationError`` if particle contacts were dropped."""
        report = self.health()
        if raise_error and report.fault_steps:
            raise SimulationBlowUp(str(report))
        if raise_error and not report.ok:
            raise SimulationError(str(report))
        return report

    def reset_health(self):
        """Clear the blow-up and overflow flags and restart the step counter at 0."""
        self.world_fault_step.fill_(NO_FAULT)
        self.neighbor_overflow.zero_()
        self.step_count = 0
