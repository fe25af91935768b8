"""Particle-pair neighbour lists with a skin (Verlet lists), kept in the States a solver steps."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.kernels import particles
from wpsim.kernels.generic import for_precision
from wpsim.solvers.prepared_launch import launch_unrecorded

SKIN_PER_RADIUS = 0.5
"""Default skin on the CPU, in units of the largest particle radius: lists also hold the pairs
within this distance (m) of contact, and stay valid until some particle has moved half of it."""

GRID_CELL_PER_CUTOFF = 1.5
"""Hash-grid cell size over the query radius: fewer, larger cells than the radius itself (a grid
query visits every cell the query sphere overlaps), about 30 % faster for piles of particles."""


class ParticleNeighborLists:
    """The broad phase of particle-particle contact (not differentiated, not on the tape).

    ``prepare(state)`` makes sure ``state.neighbor_count`` / ``neighbor_index`` list, for every
    particle, each same-world particle within ``margin`` (m) of touching it, sorted by index (so
    contact forces, summed in list order, do not depend on which valid list a step reads).
    Lists are built with an extra ``skin`` (m): a list built from positions x0 still holds every
    pair within ``margin`` of touching while no particle has moved more than skin / 2 from x0.
    A step then reuses the list it was handed (``carry`` copies it into the next state) and
    only rebuilds it when a particle moved farther (relative to its world's first particle),
    which takes one small launch and a read-back instead of a hash-grid build and a grid query.

    A list is reused only from a State this object filled or carried into (a tag on the State),
    and only if its positions are within skin / 2 of the build's; so a state whose positions
    were reset, or a fresh state, gets a new list. When a build with the skin overflows the
    capacity K, it is redone without the skin (as the step needs, overflow reported into
    ``overflow``) and not reused. Skin 0: a build every step, no read-back (CUDA graph capture).
    """

    def __init__(self, model, margin: float, skin: float, overflow: wp.array):
        self.model = model
        self.margin = float(margin)
        """Gap (m) within which particle pairs must be listed for the step."""
        self.skin = float(skin)
        """Extra gap (m) of a build; 0: build every step."""
        self.overflow = overflow
        self.builds = 0
        """Lists built so far (a diagnostic)."""
        dim = int(np.clip(2 * round(model.particle_count ** (1.0 / 3.0)), 8, 128))
        self._grid = wp.HashGrid(dim, dim, dim, device=model.device, dtype=model.dtype)
        self._built_from = wp.empty_like(model.particle_q, requires_grad=False)
        """Positions (m, (P,)) the reusable lists were built from."""
        world = model.particle_world.numpy()
        first = np.full(world.max(initial=-1) + 2, -1)
        first[world[::-1] + 1] = np.arange(len(world))[::-1]
        self._anchor = wp.array(first[world + 1], dtype=int, device=model.device)
        """Per particle, the first particle of its world (index, (P,))."""
        self._flag = wp.zeros(1, dtype=wp.int32, device=model.device)
        self._tag = None

    def prepare(self, state):
        """Give ``state`` valid neighbour lists for a step from its positions."""
        if self._tag is not None and getattr(state, "neighbor_tag", None) is self._tag and not self._moved(state):
            return
        self._tag = None
        if self.skin > 0.0:
            self._flag.zero_()
            self._build(state, self.skin, self._flag)
            if int(self._flag.numpy()[0]) == 0:
                wp.copy(self._built_from, state.particle_q)
                self._tag = object()
                state.neighbor_tag = self._tag
                return
        self._build(state, 0.0, self.overflow)

    def carry(self, state_in, state_out):
        """Copy ``state_in``'s reusable lists into ``state_out`` (after a step between them)."""
        if self._tag is None or getattr(state_in, "neighbor_tag", None) is not self._tag or state_out is state_in:
            return
        wp.copy(state_out.neighbor_count, state_in.neighbor_count)
        wp.copy(state_out.neighbor_index, state_in.neighbor_index)
        state_out.neighbor_tag = self._tag

    def _moved(self, state) -> bool:
        """Whether the lists' pairs may have closed by more than the skin since the build
        (synchronises). Pair distances do not change under a common translation, so each particle's
        displacement is taken relative to that of its world's first particle (``_anchor``):
        a pile that falls or slides as a whole keeps its lists."""
        self._flag.zero_()
        launch_unrecorded(for_precision(particles.flag_moved_particles, self.model.dtype), self.model.particle_count,
                          [self._anchor, state.particle_q, self._built_from, self.model.real(0.5 * self.skin)],
                          [self._flag], self.model.device)
        return int(self._flag.numpy()[0]) != 0

    def _build(self, state, skin: float, overflow: wp.array):
        """Hash-grid query of the pairs within margin + ``skin`` of touching into ``state``'s lists."""
        model = self.model
        reach = self.margin + skin
        cutoff = 2.0 * model.particle_max_radius + reach
        self._grid.build(state.particle_q, GRID_CELL_PER_CUTOFF * cutoff)
        wp.launch(
            for_precision(particles.build_neighbor_lists, model.dtype),
            dim=model.particle_count,
            inputs=[model.particle_radius, model.particle_world, state.particle_q, wp.uint64(self._grid.id),
                    model.real(cutoff), model.real(reach)],
            outputs=[state.neighbor_count, state.neighbor_index, overflow],
            device=model.device,
            record_tape=False,
        )
        self.builds += 1
