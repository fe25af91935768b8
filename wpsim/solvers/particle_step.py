"""The particle part of a semi-implicit step: force launches and the symplectic Euler update, and
unrecorded CPU steps through launches prepared once per set of arrays."""

from __future__ import annotations

from typing import NamedTuple

from wpsim.kernels import impacts, particles
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import KernelLaunch
from wpsim.solvers.element_threads import ElementThreads, element_shares
from wpsim.solvers.forces import element_launches, particle_force_launch, smoothed_stress_launches
from wpsim.solvers.prepared_launch import PREPARED_LAUNCHES, PreparedLaunch

STEP_ARGUMENT = -3
"""Position of the step number (for the fault flags) in ``integrate_launch``'s inputs."""


def integrate_launch(solver, state_in, state_out, dt: float) -> KernelLaunch:
    """The symplectic Euler update of ``solver``'s particles from ``state_in`` (forces in its
    ``particle_f``) into ``state_out`` (with impacts cut at their time of impact when the model
    has ``particle_impacts``)."""
    model = solver.model
    settings = [model.real(dt), solver.step_count, solver.max_coordinate, solver.max_speed]
    outputs = [state_out.particle_q, state_out.particle_qd, solver.world_fault_step]
    if model.particle_impacts:
        inputs = [
            model.particle_mass, model.particle_radius, model.particle_world, model.shape_kind, model.shape_body,
            model.shape_world, model.shape_transform, model.shape_size, model.shape_mu, model.pair_mu,
            model.impact_restitution, model.gravity, state_in.particle_q, state_in.particle_qd,
            state_in.particle_f, state_in.neighbor_count, state_in.neighbor_index, solver._friction_smoothing,
            *settings,
        ]
        integrate = impacts.integrate_particles_with_impacts
    else:
        inputs = [model.particle_mass, model.particle_world, model.gravity, state_in.particle_q,
                  state_in.particle_qd, state_in.particle_f, *settings]
        integrate = particles.integrate_particles
    return KernelLaunch(for_precision(integrate, model.dtype), model.particle_count, inputs, outputs)


class _Plan(NamedTuple):
    """The launches of one step (``KernelLaunch``es, or ``PreparedLaunch``es once prepared)."""

    particle_force: object
    smoothing: list
    shares: list
    """Per share of the element forces its launches (one share without ``ElementThreads``)."""
    add_rows: object
    """The launch adding the shares' buffers into the forces, or None."""
    integrate: object
    step_argument: int
    """Index of the step number among ``integrate``'s arguments."""

    def launches(self) -> list:
        """Every launch, in a fixed order."""
        return [self.particle_force, *self.smoothing, *(launch for share in self.shares for launch in share),
                *([] if self.add_rows is None else [self.add_rows]), self.integrate]

    def holding(self, launches: list) -> _Plan:
        """A plan of this one's shape holding ``launches`` (in ``launches()``' order)."""
        each = iter(launches)
        return _Plan(next(each), [next(each) for _ in self.smoothing], [[next(each) for _ in s] for s in self.shares],
                     None if self.add_rows is None else next(each), next(each), self.step_argument)


class PreparedParticleSteps:
    """Unrecorded CPU particle steps of a ``SemiImplicitSolver``: the force and update launches
    are prepared (``PreparedLaunch``) at the first step between a set of state and control arrays
    under a set of settings, and re-run with only the step number changed; once
    ``PREPARED_LAUNCHES`` sets are kept, a set of the same settings is retargeted to new arrays
    (callers that step fresh states every time). With enough elements the element forces are
    split over ``threads`` threads (``ElementThreads``): by world in every step, by fraction only
    in ``advance`` (a ``step``, recorded or not, is bitwise the same, which checkpointed
    rollouts verify when they re-run a segment). Keep Model arrays and change them in
    place (``assign``), as wpsim's optimisers do: prepared launches read the arrays they were
    made with."""

    def __init__(self, model, threads: int):
        self.model = model
        shares = element_shares(model, threads)
        self.element_threads = ElementThreads(model, shares) if shares > 1 else None
        """The split of the element forces over threads, or None (one thread)."""
        self._plans = {}
        """Prepared steps (``_Plan``) by (the arrays, the settings) they were made for."""

    def run(self, solver, state_in, state_out, control, dt: float, by_fraction: bool = False):
        """One step's particle launches from ``state_in`` into ``state_out``. The element forces
        are split by world where ``ElementThreads`` can, which leaves results bitwise; by
        fraction only with ``by_fraction`` (``advance``), which changes them to rounding."""
        threads = self.element_threads
        split = threads is not None and (threads.by_world or by_fraction)
        arrays = (
            id(state_in.particle_q), id(state_in.particle_qd), id(state_in.particle_f), id(state_in.neighbor_count),
            id(state_in.neighbor_index), id(state_in.body_q), id(state_in.body_qd), id(state_in.body_f),
            id(control.particle_f_ext), id(control.spring_activation), id(control.tet_activation),
            id(state_out.particle_q), id(state_out.particle_qd),
        )
        settings = (split, float(dt), float(solver._friction_smoothing), float(solver.contact_gradient_width),
                    float(solver.max_coordinate), float(solver.max_speed))
        plan = self._plans.get((arrays, settings))
        if plan is None:
            plan = self._prepared(settings, self._launches(solver, state_in, state_out, control, dt, split))
            self._plans[(arrays, settings)] = plan
        for launch in plan.smoothing:
            launch.run()
        if split:
            threads.run(plan.particle_force, plan.shares, plan.add_rows)
        else:
            plan.particle_force.run()
            for launch in plan.shares[0]:
                launch.run()
        plan.integrate.set(plan.step_argument, solver.step_count)
        plan.integrate.run()

    def _launches(self, solver, state_in, state_out, control, dt: float, split: bool) -> _Plan:
        """The ``KernelLaunch``es of a step between these arrays (``split``: over ``ElementThreads``)."""
        model = self.model
        q, qd, f = state_in.particle_q, state_in.particle_qd, state_in.particle_f
        smoothing, domain_stress = smoothed_stress_launches(model, q, control, solver._smoothing)
        if split:
            shares, add_rows = self.element_threads.launches(q, qd, control, f, domain_stress)
        else:
            shares, add_rows = [element_launches(model, q, qd, control, f, domain_stress, recorded=False)], None
        particle_force = particle_force_launch(model, q, qd, control, dt, solver._friction_smoothing, state_in, f,
                                               solver.contact_gradient_width)
        integrate = integrate_launch(solver, state_in, state_out, dt)
        return _Plan(particle_force, smoothing, shares, add_rows, integrate, len(integrate.inputs) + STEP_ARGUMENT)

    def _prepared(self, settings: tuple, launches: _Plan) -> _Plan:
        """``launches`` prepared: once ``PREPARED_LAUNCHES`` plans are kept, a kept plan of the
        same settings retargeted to their arrays; else new ``PreparedLaunch``es."""
        full = len(self._plans) >= PREPARED_LAUNCHES
        spare = next((key for key in self._plans if key[1] == settings), None) if full else None
        if spare is None:
            if full:
                self._plans.clear()
            device = self.model.device
            return launches.holding([PreparedLaunch(*launch, device) for launch in launches.launches()])
        kept = self._plans.pop(spare)
        for prepared, launch in zip(kept.launches(), launches.launches()):
            prepared.retarget(launch.inputs, launch.outputs)
        return kept
