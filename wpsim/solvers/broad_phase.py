"""Per-step broad phase of rigid contact (penalty and soft-constraint): the candidate pairs
whose shapes' boxes overlap, found through a Warp BVH instead of testing every pair (see
``wpsim.kernels.broad_phase``)."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.kernels import broad_phase, contact
from wpsim.kernels.generic import for_precision

NO_PAIR = 2**31 - 1
"""Sort key of an empty pair slot (sorts last)."""
BROAD_PHASE_MIN_PAIRS = 256
"""Candidate pairs without a plane (the pairs the broad phase can leave out) above which
``SemiImplicitSolver`` uses the broad phase by default: below, its launches (boxes, BVH
refit, query, sort) cost more than testing every pair (the ``contact_pile`` benchmark: 1.4x
faster at 2,080 pairs)."""


class RigidBroadPhase:
    """Finds a step's near candidate pairs into (pairs (capacity, 2), count (1,)) arrays.

    ``capacity`` (default: the pairs with planes plus 16 per boxed shape, at least 64, and
    never more than the candidate pairs) bounds the pairs a step keeps; a step that finds
    more drops the rest and ``dropped`` says how many (``SemiImplicitSolver.health``).
    ``tested`` is the pairs the last step handed to the narrow phase (reads back).
    """

    def __init__(self, model, capacity: int | None = None):
        self.model = model
        planes, boxed = len(model.contact_plane_pair), len(model.contact_bvh_shape)
        default = min(max(planes + 16 * boxed, 64), max(model.contact_pair_count, 1))
        self.capacity = int(default if capacity is None else capacity)
        if self.capacity < planes:
            raise ValueError(f"contact_pair_capacity {self.capacity} is below the {planes} pairs with planes")
        self.planes = planes
        self.shapes = model.shape_count
        if self.shapes * self.shapes >= NO_PAIR:
            raise ValueError(f"the broad phase's pair keys overflow with {self.shapes} shapes (at most 46340)")
        device = model.device
        self._lower = wp.zeros(boxed, dtype=wp.vec3, device=device)
        self._upper = wp.zeros(boxed, dtype=wp.vec3, device=device)
        self._bvh = None
        self._keys = wp.zeros(2 * self.capacity, dtype=int, device=device)
        self._order = wp.zeros(2 * self.capacity, dtype=int, device=device)
        plane_keys = model.contact_plane_pair.numpy().astype(np.int64) @ np.array([self.shapes, 1])
        self._plane_keys = wp.array(plane_keys.astype(np.int32), dtype=int, device=device)
        self._peak = wp.zeros(1, dtype=int, device=device)
        self._last_count = None

    def find(self, state_in, margin: float, pairs_out: wp.array, count_out: wp.array, own_margins: bool = False):
        """The near candidate pairs of ``state_in``'s poses, boxes grown by ``margin`` (m) and
        with ``own_margins`` by each shape's ``shape_margin`` too, sorted by (a, b), into
        ``pairs_out`` (capacity, 2) and their number into ``count_out`` (1,)."""
        model = self.model
        boxed = len(self._lower)
        if boxed:
            wp.launch(for_precision(broad_phase.shape_bounds, model.dtype), dim=boxed,
                      inputs=[model.contact_bvh_shape, model.shape_body, model.shape_transform,
                              model.shape_bound_centre, model.shape_bound_half, model.shape_margin, state_in.body_q,
                              float(margin), int(own_margins)],
                      outputs=[self._lower, self._upper], device=model.device, record_tape=False)
            if self._bvh is None:
                self._bvh = wp.Bvh(self._lower, self._upper)
            else:
                self._bvh.refit()
        self._keys.fill_(NO_PAIR)
        if self.planes:
            wp.copy(self._keys, self._plane_keys, count=self.planes)
        count_out.fill_(self.planes)
        if boxed:
            wp.launch(broad_phase.near_pairs, dim=boxed,
                      inputs=[model.contact_bvh_shape, model.shape_body, model.shape_world, model.shape_collision_type,
                              model.shape_collision_mask, model.body_contact_group, model.body_moving,
                              model.body_static_contact, model.contact_forbidden_key, self._lower, self._upper,
                              wp.uint64(self._bvh.id), self.capacity],
                      outputs=[self._keys, count_out], device=model.device, record_tape=False)
        wp.launch(broad_phase.record_peak, dim=1, inputs=[count_out], outputs=[self._peak], device=model.device,
                  record_tape=False)
        wp.utils.radix_sort_pairs(self._keys, self._order, self.capacity)
        wp.launch(broad_phase.pairs_from_keys, dim=self.capacity, inputs=[self._keys, self.shapes],
                  outputs=[pairs_out], device=model.device, record_tape=False)
        self._last_count = count_out

    @property
    def dropped(self) -> int:
        """The most pairs a step found beyond ``capacity`` since the last reset (reads back)."""
        return max(int(self._peak.numpy()[0]) - self.capacity, 0)

    @property
    def tested(self) -> int:
        """Pairs the last step handed to the narrow phase (reads back; 0 before a step)."""
        if self._last_count is None:
            return 0
        return min(int(self._last_count.numpy()[0]), self.capacity)

    def reset(self):
        """Forget the peak pair count."""
        self._peak.zero_()


def rigid_broad_phase(model, wanted: bool | None, capacity: int | None, reads_back: bool) -> RigidBroadPhase | None:
    """The ``RigidBroadPhase`` of a solver, or None (every candidate pair each step):
    ``wanted`` True or False, None for above ``BROAD_PHASE_MIN_PAIRS`` candidate pairs without
    a plane (robots on the ground in many worlds have few: their links meet the plane); None
    without candidate pairs, or where a step reads nothing back (``reads_back`` False:
    soft-constraint contact with fixed iterations, whose rows would follow the near pairs
    read back each step)."""
    if wanted is None:
        wanted = model.contact_pair_count - len(model.contact_plane_pair) > BROAD_PHASE_MIN_PAIRS
    if not (wanted and reads_back and model.contact_pair_count and model.body_count):
        return None
    return RigidBroadPhase(model, capacity)


def contact_margin(gradient_width: float) -> float:
    """Gap (m) within which penalty contact acts: ``GRADIENT_REACH`` smoothed-gradient widths."""
    return float(contact.GRADIENT_REACH) * float(gradient_width)
