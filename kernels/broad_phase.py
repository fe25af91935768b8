"""Broad phase of rigid shape contact (device code): which shape pairs may touch, and which
of those are near each other this step.

``may_touch`` is the one rule for a candidate pair (shape a on a body, shape b static or
on another body): same world (a static shape of world -1 meets every world), different
bodies, not a forbidden body pair (a joint's parent and child, ``exclude_contact`` pairs),
not one articulation unless self-contact is on (``body_contact_group``), collision bits
that meet, and at least one side that can move. ``allowed_pairs`` applies it at finalize to
every ordered pair of shapes whose worlds may meet (the full candidate list,
``contact_pair``); per step,
``shape_bounds`` boxes each shape that is not a plane, a Warp BVH over those boxes is
refit, and ``near_pairs`` lists the candidate pairs whose boxes overlap, after the pairs
with planes (always listed: a plane has no box), as keys a * shapes + b that are sorted
(a fixed order, so that results do not depend on thread timing) and decoded by
``pairs_from_keys``. Nothing here is differentiated.
"""

import warp as wp

from .generic import kernel, transform, vec3


@wp.func
def forbidden(key: wp.int64, contact_forbidden_key: wp.array(dtype=wp.int64)):
    """Whether a body-pair key (larger body * body count + smaller) is in the sorted list."""
    lo = int(0)
    hi = contact_forbidden_key.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if contact_forbidden_key[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    found = False
    if lo < contact_forbidden_key.shape[0]:
        found = contact_forbidden_key[lo] == key
    return found


@wp.func
def may_touch(
    a: int,
    b: int,
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_collision_type: wp.array(dtype=int),
    shape_collision_mask: wp.array(dtype=int),
    body_contact_group: wp.array(dtype=int),
    body_moving: wp.array(dtype=int),
    body_static_contact: wp.array(dtype=int),
    contact_forbidden_key: wp.array(dtype=wp.int64),
):
    """Whether shape a (on a body) and shape b (static or on another body) are a candidate
    contact pair (the rule of the module docstring)."""
    ba = shape_body[a]
    bb = shape_body[b]
    ok = ba >= 0 and a != b
    if ok:
        bits = (shape_collision_type[a] & shape_collision_mask[b]) | (shape_collision_type[b] & shape_collision_mask[a])
        ok = bits != 0
    if ok and bb < 0:
        ok = (shape_world[b] == -1 or shape_world[b] == shape_world[a]) and body_static_contact[ba] != 0
        ok = ok and body_moving[ba] != 0
    if ok and bb >= 0:
        ok = shape_world[a] == shape_world[b] and ba != bb and body_contact_group[ba] != body_contact_group[bb]
        ok = ok and (body_moving[ba] != 0 or body_moving[bb] != 0)
        if ok:
            count = wp.int64(body_moving.shape[0])
            key = wp.int64(wp.max(ba, bb)) * count + wp.int64(wp.min(ba, bb))
            ok = not forbidden(key, contact_forbidden_key)
    return ok


@wp.kernel(enable_backward=False)
def allowed_pairs(
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_collision_type: wp.array(dtype=int),
    shape_collision_mask: wp.array(dtype=int),
    body_contact_group: wp.array(dtype=int),
    body_moving: wp.array(dtype=int),
    body_static_contact: wp.array(dtype=int),
    contact_forbidden_key: wp.array(dtype=wp.int64),
    pair_a_in: wp.array(dtype=int),
    pair_b_in: wp.array(dtype=int),
    allowed_out: wp.array(dtype=wp.int8),
):
    """One thread per ordered shape pair (a, b) = (pair_a_in[i], pair_b_in[i]) of shapes whose
    worlds may meet: 1 where it is listed, a candidate pair with a on a body and b static, or
    both on bodies and a < b."""
    i = wp.tid()
    a = pair_a_in[i]
    b = pair_b_in[i]
    listed = shape_body[b] < 0 or a < b
    if listed and may_touch(a, b, shape_body, shape_world, shape_collision_type, shape_collision_mask,
                            body_contact_group, body_moving, body_static_contact, contact_forbidden_key):
        allowed_out[i] = wp.int8(1)
    else:
        allowed_out[i] = wp.int8(0)


@kernel(enable_backward=False)
def shape_bounds(
    contact_bvh_shape: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_bound_centre: wp.array(dtype=vec3),
    shape_bound_half: wp.array(dtype=vec3),
    shape_margin: wp.array(dtype=wp.Float),
    body_q_in: wp.array(dtype=transform),
    margin: float,
    own_margins: int,
    lower_out: wp.array(dtype=wp.vec3),
    upper_out: wp.array(dtype=wp.vec3),
):
    """One thread per boxed shape (``contact_bvh_shape``, every shape but planes): its world
    axis-aligned box, the shape-frame box (centre, half extents, m) turned into the world,
    grown by ``margin`` (m), with ``own_margins`` also by the shape's ``shape_margin`` (two
    shapes closer than the sum of theirs then overlap), and rounded outwards to float32."""
    k = wp.tid()
    s = contact_bvh_shape[k]
    grow = margin
    if own_margins != 0:
        grow = margin + float(shape_margin[s])
    X = shape_transform[s]
    if shape_body[s] >= 0:
        X = body_q_in[shape_body[s]] * X
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    centre = wp.transform_point(X, shape_bound_centre[s])
    h = shape_bound_half[s]
    lower = wp.vec3()
    upper = wp.vec3()
    for i in range(3):
        reach = wp.abs(R[i, 0]) * h[0] + wp.abs(R[i, 1]) * h[1] + wp.abs(R[i, 2]) * h[2]
        grown = float(reach) * 1.000001 + grow + 1.0e-6 * wp.abs(float(centre[i]))
        lower[i] = float(centre[i]) - grown
        upper[i] = float(centre[i]) + grown
    lower_out[k] = lower
    upper_out[k] = upper


@wp.kernel(enable_backward=False)
def near_pairs(
    contact_bvh_shape: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_collision_type: wp.array(dtype=int),
    shape_collision_mask: wp.array(dtype=int),
    body_contact_group: wp.array(dtype=int),
    body_moving: wp.array(dtype=int),
    body_static_contact: wp.array(dtype=int),
    contact_forbidden_key: wp.array(dtype=wp.int64),
    lower_in: wp.array(dtype=wp.vec3),
    upper_in: wp.array(dtype=wp.vec3),
    bvh: wp.uint64,
    capacity: int,
    pair_key_out: wp.array(dtype=int),
    pair_count_out: wp.array(dtype=int),
):
    """One thread per boxed shape k: for a shape a on a body, every boxed shape b whose box
    its box overlaps and that ``may_touch`` accepts (b static, or on a body with a < b)
    gets the key a * shapes + b in the next slot, ``pair_count_out`` (which starts at the
    number of pairs with planes, already in the first slots); past ``capacity`` slots a
    pair is counted, not written."""
    k = wp.tid()
    a = contact_bvh_shape[k]
    if shape_body[a] < 0:
        return
    shapes = shape_body.shape[0]
    query = wp.bvh_query_aabb(bvh, lower_in[k], upper_in[k])
    hit = int(0)
    while wp.bvh_query_next(query, hit):
        b = contact_bvh_shape[hit]
        if (shape_body[b] < 0 or a < b) and may_touch(a, b, shape_body, shape_world, shape_collision_type,
                                                       shape_collision_mask, body_contact_group, body_moving,
                                                       body_static_contact, contact_forbidden_key):
            slot = wp.atomic_add(pair_count_out, 0, 1)
            if slot < capacity:
                pair_key_out[slot] = a * shapes + b


@wp.kernel(enable_backward=False)
def pairs_from_keys(pair_key_in: wp.array(dtype=int), shapes: int, pair_out: wp.array2d(dtype=int)):
    """One thread per slot: the shape pair (a, b) of its key a * ``shapes`` + b."""
    k = wp.tid()
    pair_out[k, 0] = pair_key_in[k] // shapes
    pair_out[k, 1] = pair_key_in[k] % shapes


@wp.kernel(enable_backward=False)
def record_peak(pair_count_in: wp.array(dtype=int), peak_out: wp.array(dtype=int)):
    """The most pairs a step has found (one thread)."""
    wp.atomic_max(peak_out, 0, pair_count_in[0])
