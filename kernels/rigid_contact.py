"""Compliant contact between rigid-body shapes and static geometry (device code).

A contact pair is (shape a, shape b); shape a is on a body, shape b is static (body -1)
or on another body. The narrow phase (``contact_plan``, then ``plan_contact`` per contact
slot) is shared with the soft-constraint contact of ``soft_contact``; per pair:
- b a plane: a's contact points (sphere centre, capsule segment ends, box corners, mesh
  hull vertices) against it;
- a mesh against a sphere, capsule or box: its hull vertices against their signed
  distance;
- two meshes: each hull's vertices, and points along its edges (up to 3 per edge,
  ``shape_hull_points``), against the other hull's face planes (the largest n . x - offset
  over the planes: the signed distance inside a hull, a lower bound outside): a corner
  pressing into a face is found exactly, two edges crossing at the nearest edge point
  (within half the points' spacing);
- sphere or capsule against sphere or capsule: closest points of their core segments;
- a sphere or capsule against a box: its core points against the box's signed distance;
- two boxes: a separating-axis test over the 6 face axes and the 9 edge-pair axes of both
  boxes. Where a face axis separates them most (the usual case), that face is the reference
  face, and the contacts are the other box's corners within its extent, its own corners
  within the facing (incident) face of the other, and the crossings of the two faces'
  edges, i.e. the corners of their overlap polygon. Where an edge-pair axis separates them
  clearly more (boxes touching edge to edge), the one contact is the closest points of
  those two edges, along that axis.
Each contact applies the compliant force of ``kernels.contact`` with the pair's mean
stiffness, damping and friction at the surface point of the penetrating shape. Against
static geometry the friction slope is unbounded and the contact's damping and friction
slopes (``contact_velocity_slopes``) go to the joint-space solve, which treats them
implicitly; between two bodies they stay explicit, the slope bounded by the pair's mass.
Wrenches are taken about each body's articulation origin (see ``articulation``) and added
into ``body_f`` with atomics.
"""

import warp as wp

from .articulation import spatial, vec6
from .contact import (
    contact_velocity_slopes,
    friction_force,
    gradient_reach,
    normal_force_and_slip,
    onset_damping,
    shape_sdf,
)
from .enums import SHAPE_BOX, SHAPE_CAPSULE, SHAPE_MESH, SHAPE_PLANE, SHAPE_SPHERE
from .generic import kernel, mat33, set_deterministic, transform, vec3

CAPSULE_BOX_SAMPLES = wp.constant(5)
"""Points along a capsule's core tested against a box."""
FRICTION_RATE_FACTOR = wp.constant(8.0)
"""Multiplies dt (1/m_a + 1/m_b) in the friction slope bound of body-body contacts: several
contact points share a pair, and rotation lowers the effective mass at a corner."""
PLAN_NONE = wp.constant(0)
PLAN_POINTS = wp.constant(1)
PLAN_SEGMENTS = wp.constant(2)
PLAN_FACE = wp.constant(3)
PLAN_EDGE = wp.constant(4)
PLAN_HULLS = wp.constant(5)
BOX_PAIR_SLOTS = wp.constant(29)
"""Contact slots of two boxes: 8 corners of one, 4 of the other's reference face, 16 edge
crossings of their facing faces (PLAN_FACE), 1 edge-edge contact (PLAN_EDGE)."""
HULL_PLANE_TIE = wp.constant(1.0e-3)
"""Face planes of a hull whose n . x - offset at a point are within this fraction of the
hull's size of the largest count as equally near (see ``hull_distance``)."""
EDGE_AXIS_MIN_SINE = wp.constant(1.0e-3)
"""Edge pairs closer to parallel than this (sine of their angle) have no axis of their own:
their cross product is ill-defined, and a face axis covers them."""

set_deterministic(__name__)


@wp.func
def shape_pose(body: int, local: transform, body_q: wp.array(dtype=transform)):
    """World pose of a shape (its own transform for static shapes)."""
    if body >= 0:
        return body_q[body] * local
    return local


@wp.func
def pair_poses(a: int, b: int, shape_body: wp.array(dtype=int), shape_transform: wp.array(dtype=transform),
               body_q: wp.array(dtype=transform)):
    """(body of shape a, body of shape b, world pose of a, world pose of b) of a shape pair."""
    body_a = shape_body[a]
    body_b = shape_body[b]
    X_a = shape_pose(body_a, shape_transform[a], body_q)
    return body_a, body_b, X_a, shape_pose(body_b, shape_transform[b], body_q)


@wp.func
def point_velocity(body: int, x: vec3, body_q: wp.array(dtype=transform), body_qd: wp.array(dtype=vec6)):
    """Velocity (m/s) of the body point at world position x; zero for static geometry."""
    zero = x * type(x[0])(0.0)
    if body < 0:
        return zero
    v = body_qd[body]
    w = wp.vector(v[0], v[1], v[2])
    return wp.vector(v[3], v[4], v[5]) + wp.cross(w, x - wp.transform_get_translation(body_q[body]))


@wp.func
def contact_point(kind: int, size: vec3, k: int):
    """Local position and radius (m) of contact point k of a primitive (see ``point_count``)."""
    zero = size[0] * type(size[0])(0.0)
    if kind == SHAPE_BOX:
        sx = type(zero)(float((k & 1) * 2 - 1))
        sy = type(zero)(float(((k >> 1) & 1) * 2 - 1))
        sz = type(zero)(float(((k >> 2) & 1) * 2 - 1))
        return wp.vector(sx * size[0], sy * size[1], sz * size[2]), zero
    if kind == SHAPE_CAPSULE:
        return wp.vector(zero, zero, size[1] * type(zero)(float(2 * k - 1))), size[0]
    return wp.vector(zero, zero, zero), size[0]


@wp.func
def shape_contact_point(kind: int, size: vec3, k: int, points: wp.array(dtype=vec3), start: int):
    """Local position and radius (m) of contact point k of any shape (mesh: hull vertex k)."""
    if kind == SHAPE_MESH:
        return points[start + k], size[0] * type(size[0])(0.0)
    return contact_point(kind, size, k)


@wp.func
def point_count(kind: int, mesh_points: int):
    """Number of contact points of a shape: box 8, capsule 2, sphere 1, mesh its hull
    vertices (``mesh_points``), plane 0."""
    if kind == SHAPE_BOX:
        return 8
    if kind == SHAPE_CAPSULE:
        return 2
    if kind == SHAPE_SPHERE:
        return 1
    if kind == SHAPE_MESH:
        return mesh_points
    return 0


@wp.func
def segment_parameter(numerator: wp.Float, denominator: wp.Float):
    """numerator / denominator clamped to [0, 1] (0 for a degenerate denominator)."""
    zero = numerator * type(numerator)(0.0)
    if denominator <= type(numerator)(1.0e-12):
        return zero
    return wp.clamp(numerator / denominator, zero, type(numerator)(1.0))


@wp.func
def closest_segment_points(p1: vec3, q1: vec3, p2: vec3, q2: vec3):
    """Closest points of segments p1-q1 and p2-q2 (either may be a point)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    c = wp.dot(d1, r)
    b = wp.dot(d1, d2)
    eps = type(a)(1.0e-12)
    s = a * type(a)(0.0)
    t = s
    if a <= eps:
        t = segment_parameter(f, e)
    elif e <= eps:
        s = segment_parameter(-c, a)
    else:
        denom = a * e - b * b
        if denom > eps * a * e:
            s = segment_parameter(b * f - c * e, denom)
        t = (b * s + f) / e
        if t < s * type(a)(0.0):
            t = s * type(a)(0.0)
            s = segment_parameter(-c, a)
        elif t > type(a)(1.0):
            t = type(a)(1.0)
            s = segment_parameter(b - c, a)
    return p1 + d1 * s, p2 + d2 * t


@wp.func
def add_damping(body_damping: wp.array2d(dtype=mat33), body: int, K: mat33, arm: mat33):
    """Add the spatial damping matrix of a contact force -K v(x) at the point with cross
    matrix ``arm`` = [x]x to a body: blocks ww = [x]x K [x]x^T, wv = [x]x K, vv = K."""
    wp.atomic_add(body_damping, body, 0, arm * K * wp.transpose(arm))
    wp.atomic_add(body_damping, body, 1, arm * K)
    wp.atomic_add(body_damping, body, 2, K)


@wp.func
def add_contact(
    pen: wp.Float, n: vec3, x: vec3, body_a: int, body_b: int, ke: wp.Float, kd_full: wp.Float, damping_depth: wp.Float,
    mu: wp.Float, smoothing: wp.Float, rate: wp.Float, width: wp.Float, body_q: wp.array(dtype=transform),
    body_qd: wp.array(dtype=vec6), body_origin: wp.array(dtype=vec3), body_f: wp.array(dtype=vec6),
    body_damping: wp.array2d(dtype=mat33),
):
    """Apply the compliant force of one contact (normal n from b to a, at world point x;
    damping ``kd_full`` ramped over ``damping_depth``, see ``onset_damping``).
    With a gradient width w > 0 contacts up to 6 w apart are evaluated too (their forward
    force is zero; their smoothed gradient is not). Against static geometry (body_b < 0)
    the contact's damping and friction slopes go to body_damping (treated implicitly);
    between two bodies they stay explicit, with the friction slope bounded through
    ``rate`` (dt over the pair's effective mass, s/kg), since one body's implicit term
    would also resist the motion the two share."""
    if pen > -gradient_reach(width):
        kd = onset_damping(kd_full, pen, damping_depth)
        v_rel = point_velocity(body_a, x, body_q, body_qd) - point_velocity(body_b, x, body_q, body_qd)
        fn, vt = normal_force_and_slip(pen, n, v_rel, ke, kd, width)
        f = n * fn + friction_force(fn, vt, mu, smoothing, rate)
        if body_a >= 0:
            wp.atomic_add(body_f, body_a, spatial(wp.cross(x - body_origin[body_a], f), f))
        if body_b >= 0:
            wp.atomic_sub(body_f, body_b, spatial(wp.cross(x - body_origin[body_b], f), f))
        if body_a < 0 or body_b < 0:  # against static geometry: implicit damping of the moving body
            kn, kt = contact_velocity_slopes(fn, vt, kd, mu, smoothing)
            K = wp.outer(n, n) * (kn - kt) + wp.identity(3, dtype=type(pen)) * kt
            moving = body_a
            if body_a < 0:
                moving = body_b
            add_damping(body_damping, moving, K, wp.skew(x - body_origin[moving]))


@wp.func
def core_segment(kind: int, size: vec3, X: transform, end: int):
    """World position of one end of a sphere's or capsule's core segment."""
    local, radius = contact_point(kind, size, end)
    return wp.transform_point(X, local)


@wp.func
def box_face_axis(h_p: vec3, X_p: transform, h_s: vec3, X_s: transform):
    """The axis k of box s along which box p is separated most (least overlap): the largest
    gap |c_k| - h_s[k] - r_p[k] (c: p's centre in s's frame, r_p: p's half width along k).
    Returns (gap (m), k, side = sign of c_k)."""
    to_s = wp.transform_inverse(X_s)
    centre = wp.transform_point(to_s, wp.transform_get_translation(X_p))
    rel = wp.quat_to_matrix(wp.transform_get_rotation(to_s) * wp.transform_get_rotation(X_p))
    axis = int(0)
    best = centre[0] * type(centre[0])(0.0)
    for k in range(3):
        r_p = wp.abs(rel[k, 0]) * h_p[0] + wp.abs(rel[k, 1]) * h_p[1] + wp.abs(rel[k, 2]) * h_p[2]
        gap = wp.abs(centre[k]) - h_s[k] - r_p
        if k == 0 or gap > best:
            best = gap
            axis = k
    return best, axis, wp.sign(centre[axis])


@wp.func
def face_area(h: vec3, axis: int):
    """Area / 4 (m^2) of a box face normal to ``axis``."""
    return h[(axis + 1) % 3] * h[(axis + 2) % 3]


@wp.func
def is_round(kind: int):
    """Spheres and capsules: shapes with a core segment and a radius."""
    return kind == SHAPE_SPHERE or kind == SHAPE_CAPSULE


@wp.func
def plan_by_kind(ka: int, kb: int):
    """How a pair's contacts are found, from its shape kinds: (plan, flip). PLAN_POINTS: the
    contact points of one shape against the other's signed distance (flip: b's points
    against a); PLAN_SEGMENTS: closest points of two core segments; PLAN_HULLS: two meshes,
    each hull's points against the other's face planes; PLAN_FACE: two boxes
    (which box is the reference, or whether two edges touch, PLAN_EDGE, is decided per pose,
    see ``contact_plan``); PLAN_NONE."""
    if ka == SHAPE_BOX and kb == SHAPE_BOX:
        return PLAN_FACE, False
    if ka == SHAPE_MESH and kb == SHAPE_MESH:
        return PLAN_HULLS, False
    if is_round(ka) and is_round(kb):
        return PLAN_SEGMENTS, False
    if kb == SHAPE_PLANE or kb == SHAPE_BOX or (ka == SHAPE_MESH and is_round(kb)):
        return PLAN_POINTS, False
    if ka == SHAPE_BOX or (kb == SHAPE_MESH and is_round(ka)):
        return PLAN_POINTS, True
    return PLAN_NONE, False


@wp.func
def plan_slot_count(plan: int, flip: bool, ka: int, kb: int, mesh_points_a: int, mesh_points_b: int,
                    hull_points_a: int, hull_points_b: int):
    """Contact slots of a pair under its plan: two boxes ``BOX_PAIR_SLOTS``, one segment pair,
    two meshes their hull points, or the point count of the shape whose points are tested
    (a capsule against a box: 5 samples)."""
    if plan == PLAN_FACE or plan == PLAN_EDGE:
        return BOX_PAIR_SLOTS
    if plan == PLAN_SEGMENTS:
        return 1
    if plan == PLAN_HULLS:
        return hull_points_a + hull_points_b
    if plan == PLAN_POINTS:
        kp = ka
        ks = kb
        count_p = mesh_points_a
        if flip:
            kp = kb
            ks = ka
            count_p = mesh_points_b
        if kp == SHAPE_CAPSULE and ks == SHAPE_BOX:
            return CAPSULE_BOX_SAMPLES
        return point_count(kp, count_p)
    return 0


@wp.func
def box_edge_axis(h_a: vec3, X_a: transform, h_b: vec3, X_b: transform):
    """The edge-pair axis L = a_i x b_j (a_i, b_j: the boxes' axes) along which boxes a and b
    are separated most: the largest gap |d . L| - r_a(L) - r_b(L) (d: b's centre from a's,
    r: a box's half width along L). Returns (gap (m), 3 i + j, side = sign(d . L)); gap
    -1e30 when every edge pair is nearly parallel."""
    R_a = wp.quat_to_matrix(wp.transform_get_rotation(X_a))
    R_b = wp.quat_to_matrix(wp.transform_get_rotation(X_b))
    d = wp.transform_get_translation(X_b) - wp.transform_get_translation(X_a)
    zero = d[0] * type(d[0])(0.0)
    best = zero - type(zero)(1.0e30)
    index = int(-1)
    side = zero
    for i in range(3):
        for j in range(3):
            axis = wp.cross(wp.vector(R_a[0, i], R_a[1, i], R_a[2, i]), wp.vector(R_b[0, j], R_b[1, j], R_b[2, j]))
            length = wp.length(axis)
            if length > type(zero)(EDGE_AXIS_MIN_SINE):
                axis = axis / length
                local_a = wp.transpose(R_a) * axis
                local_b = wp.transpose(R_b) * axis
                reach = wp.dot(h_a, wp.vector(wp.abs(local_a[0]), wp.abs(local_a[1]), wp.abs(local_a[2])))
                reach += wp.dot(h_b, wp.vector(wp.abs(local_b[0]), wp.abs(local_b[1]), wp.abs(local_b[2])))
                along = wp.dot(d, axis)
                gap = wp.abs(along) - reach
                if gap > best:
                    best = gap
                    index = 3 * i + j
                    side = wp.sign(along)
    return best, index, side


@wp.func
def contact_plan(ka: int, kb: int, size_a: vec3, size_b: vec3, X_a: transform, X_b: transform, margin: wp.Float):
    """(plan, flip, axis, side) of a pair at its current poses. Two boxes: the face of the box
    whose face axis separates them most (separating-axis test over both boxes' face axes) is
    the reference (``axis``, ``side`` in its frame), the other box's corners are tested
    against it (flip: a's face is the reference); on a tie the larger face is the
    reference, so each contact is counted once. Where an edge-pair axis separates them more
    than every face axis, by ``box_pair_tolerance``, the plan is PLAN_EDGE (``axis`` = 3 i +
    j of a's axis i and b's axis j, ``side``: the sign of b's centre from a's along it).
    Boxes separated by more than ``margin`` (m) along any axis cannot touch: PLAN_NONE."""
    plan, flip = plan_by_kind(ka, kb)
    axis = int(0)
    side = size_a[0] * type(size_a[0])(0.0)
    if plan == PLAN_FACE:
        gap_b, axis_b, side_b = box_face_axis(size_a, X_a, size_b, X_b)
        gap_a, axis_a, side_a = box_face_axis(size_b, X_b, size_a, X_a)
        # gaps within 1e-4 of the box sizes count as equal (rounding, float32 above all): then
        # the larger face is the reference, so a small box resting on a big one is held
        tie = wp.abs(gap_a - gap_b) <= type(gap_a)(1.0e-4) * (wp.max(size_a) + wp.max(size_b))
        b_is_reference = gap_b > gap_a
        if tie:
            b_is_reference = face_area(size_b, axis_b) >= face_area(size_a, axis_a)
        axis = axis_b
        side = side_b
        if not b_is_reference:
            flip = True
            axis = axis_a
            side = side_a
        gap_face = wp.max(gap_a, gap_b)
        gap_edge, edge, side_edge = box_edge_axis(size_a, X_a, size_b, X_b)
        if gap_edge > gap_face + box_pair_tolerance(size_a, size_b):
            plan = PLAN_EDGE
            flip = False
            axis = edge
            side = side_edge
        if wp.max(gap_face, gap_edge) > margin:
            plan = PLAN_NONE
    return plan, flip, axis, side


@wp.func
def box_pair_tolerance(size_p: vec3, size_s: vec3):
    """Distance (m) within which points of two boxes' faces count as on a rim or corner: a
    corner on the reference face's rim (equal stacked boxes) must count despite float32
    rounding of poses far from the world origin, and the slots of ``plan_contact`` must not
    count one corner twice."""
    return type(size_p[0])(1.0e-3) * wp.max(wp.max(size_p), wp.max(size_s))


@wp.func
def face_corner(size: vec3, axis: int, side: wp.Float, i: int):
    """Corner i (0-3, in order around the face) of a box's face normal to ``axis`` on
    ``side``, in the box frame."""
    zero = side * type(side)(0.0)
    one = type(side)(1.0)
    local = wp.vector(zero, zero, zero)
    local[axis] = side * size[axis]
    su = -one
    if i == 1 or i == 2:
        su = one
    sv = -one
    if i >= 2:
        sv = one
    local[(axis + 1) % 3] = su * size[(axis + 1) % 3]
    local[(axis + 2) % 3] = sv * size[(axis + 2) % 3]
    return local


@wp.func
def incident_face(X_p: transform, n: vec3):
    """The face of box p most opposed to the world normal n (which points towards p):
    (axis, side) in p's frame."""
    facing = wp.quat_rotate_inv(wp.transform_get_rotation(X_p), n)
    face = int(0)
    for j in range(1, 3):
        if wp.abs(facing[j]) > wp.abs(facing[face]):
            face = j
    return face, -wp.sign(facing[face])


@wp.func
def box_corner_on_face(size_p: vec3, X_p: transform, size_s: vec3, X_s: transform, axis: int, side: wp.Float, k: int,
                       n: vec3):
    """Corner k of box p against the reference face of box s (normal to ``axis`` on
    ``side``, world normal n): valid when within that face's extent (inclusive, so equal
    aligned boxes stack); (valid, penetration, n, corner)."""
    tolerance = box_pair_tolerance(size_p, size_s)
    local, no_radius = contact_point(SHAPE_BOX, size_p, k)
    corner = wp.transform_point(X_p, local)
    x = wp.transform_point(wp.transform_inverse(X_s), corner)
    inside = True
    for j in range(3):
        if j != axis and wp.abs(x[j]) > size_s[j] + tolerance:
            inside = False
    return inside, size_s[axis] - side * x[axis], n, corner


@wp.func
def face_corner_in_box(size_s: vec3, X_s: transform, size_p: vec3, X_p: transform, axis: int, side: wp.Float, k: int,
                       n: vec3):
    """Corner k (0-3) of the reference face of box s against p's incident face: valid when
    within that face's extent but not at one of its corners (``box_corner_on_face`` counts
    those), so a box sliding over the edge of another keeps contacts at both ends of the
    overlap; (valid, penetration along the incident face's normal, n, corner)."""
    corner = wp.transform_point(X_s, face_corner(size_s, axis, side, k))
    y = wp.transform_point(wp.transform_inverse(X_p), corner)
    face, face_side = incident_face(X_p, n)
    tolerance = box_pair_tolerance(size_p, size_s)
    inside = True
    on_rim = int(0)
    for j in range(3):
        if j != face:
            if wp.abs(y[j]) > size_p[j] + tolerance:
                inside = False
            if wp.abs(y[j]) >= size_p[j] - tolerance:
                on_rim += 1
    if on_rim == 2:
        inside = False
    return inside, size_p[face] - face_side * y[face], n, corner


@wp.func
def cross2(a: vec3, b: vec3, u: int, v: int):
    """The 2D cross product of a and b in the coordinates (u, v)."""
    return a[u] * b[v] - a[v] * b[u]


@wp.func
def edge_crossing(size_p: vec3, X_p: transform, size_s: vec3, X_s: transform, axis: int, side: wp.Float, k: int,
                  n: vec3):
    """Slot k (0-15): where edge k / 4 of p's incident face crosses edge k % 4 of s's
    reference face, seen along the face normal: valid when the edges are not nearly
    parallel and cross away from their ends (ends are corners, counted by the other
    slots), so a box turned on another, or offset diagonally, is held at the corners of
    the overlap polygon; (valid, penetration of the point on p's edge below the reference
    face, n, that point)."""
    to_s = wp.transform_inverse(X_s) * X_p
    face, face_side = incident_face(X_p, n)
    i = k // 4
    j = k % 4
    p0 = wp.transform_point(to_s, face_corner(size_p, face, face_side, i))
    p1 = wp.transform_point(to_s, face_corner(size_p, face, face_side, (i + 1) % 4))
    r0 = face_corner(size_s, axis, side, j)
    r1 = face_corner(size_s, axis, side, (j + 1) % 4)
    u = (axis + 1) % 3
    v = (axis + 2) % 3
    d = p1 - p0
    e = r1 - r0
    length_p = wp.sqrt(d[u] * d[u] + d[v] * d[v])
    length_s = wp.length(e)
    denominator = cross2(d, e, u, v)
    tolerance = box_pair_tolerance(size_p, size_s)
    zero = side * type(side)(0.0)
    # nearly parallel edges (under 3 degrees) are skipped: where they cross is ill-defined,
    # and the crossings of the other, nearly perpendicular, edges lie near the same corners
    if wp.abs(denominator) <= type(side)(0.05) * length_p * length_s:
        return False, zero, n, p0
    w = r0 - p0
    along_p = cross2(w, e, u, v) / denominator * length_p
    along_s = cross2(w, d, u, v) / denominator * length_s
    valid = along_p > tolerance and along_p < length_p - tolerance and along_s > tolerance
    valid = valid and along_s < length_s - tolerance
    point = p0 + d * (along_p / length_p)
    return valid, size_s[axis] - side * point[axis], n, wp.transform_point(X_s, point)


@wp.func
def box_edge(h: vec3, X: transform, axis: int, towards: vec3):
    """The edge of a box along its axis ``axis`` that reaches furthest along the world
    direction ``towards``: its two ends (world)."""
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    centre = wp.transform_get_translation(X)
    for k in range(3):
        column = wp.vector(R[0, k], R[1, k], R[2, k])
        if k != axis:
            centre = centre + column * (h[k] * wp.sign(wp.dot(column, towards)))
    along = wp.vector(R[0, axis], R[1, axis], R[2, axis]) * h[axis]
    return centre - along, centre + along


@wp.func
def edge_edge_contact(size_a: vec3, X_a: transform, size_b: vec3, X_b: transform, axis: int, side: wp.Float):
    """The contact of two boxes touching edge to edge along the edge-pair axis 3 i + j
    (``box_edge_axis``): the closest points of a's edge along its axis i facing b and b's
    edge along its axis j facing a; (valid, penetration along the axis, unit normal from b
    towards a, the point on a's edge)."""
    i = axis // 3
    j = axis % 3
    R_a = wp.quat_to_matrix(wp.transform_get_rotation(X_a))
    R_b = wp.quat_to_matrix(wp.transform_get_rotation(X_b))
    L = wp.normalize(wp.cross(wp.vector(R_a[0, i], R_a[1, i], R_a[2, i]), wp.vector(R_b[0, j], R_b[1, j], R_b[2, j])))
    n = -L * side  # b lies along side * L from a
    a0, a1 = box_edge(size_a, X_a, i, -n)
    b0, b1 = box_edge(size_b, X_b, j, n)
    on_a, on_b = closest_segment_points(a0, a1, b0, b1)
    return True, wp.dot(on_b - on_a, n), n, on_a


@wp.func
def nearest_plane(x: vec3, towards: vec3, plane_normal: wp.array(dtype=vec3), plane_offset: wp.array(dtype=wp.Float),
                  start: int, count: int):
    """The face plane of a convex hull nearest a point x (hull frame): the one of largest
    n . x - offset, or, among planes within ``HULL_PLANE_TIE`` of the hull's size of it, the
    one facing ``towards`` most (the other shape's direction): a point on a rim of the hull
    (equal meshes stacked corner on corner) is at distance 0 from the side faces and would
    never count as inside. An index only: a value assigned in a dynamic loop reaches the
    adjoint with its value from before the loop, so the distance is taken outside."""
    value = wp.dot(plane_normal[start], x) - plane_offset[start]
    size = wp.abs(plane_offset[start])
    for f in range(start + 1, start + count):
        value = wp.max(value, wp.dot(plane_normal[f], x) - plane_offset[f])
        size = wp.max(size, wp.abs(plane_offset[f]))
    tie = size * type(size)(HULL_PLANE_TIE)
    best = start
    facing = type(size)(-2.0)
    for f in range(start, start + count):
        alignment = wp.dot(plane_normal[f], towards)
        if wp.dot(plane_normal[f], x) - plane_offset[f] >= value - tie and alignment > facing:
            facing = alignment
            best = f
    return best


@wp.func
def hull_distance(x: vec3, towards: vec3, plane_normal: wp.array(dtype=vec3), plane_offset: wp.array(dtype=wp.Float),
                  start: int, count: int):
    """(signed distance (m), outward normal) of a point x (hull frame) to a convex hull by
    its ``nearest_plane``: exact inside, a lower bound outside."""
    best = nearest_plane(x, towards, plane_normal, plane_offset, start, count)
    n = plane_normal[best]
    return wp.dot(n, x) - plane_offset[best], n


@wp.func
def hull_contact(k: int, a: int, b: int, X_a: transform, X_b: transform, points: wp.array(dtype=vec3),
                 point_start: wp.array(dtype=int), point_count: wp.array(dtype=int),
                 plane_normal: wp.array(dtype=vec3), plane_offset: wp.array(dtype=wp.Float),
                 plane_start: wp.array(dtype=int), plane_count: wp.array(dtype=int)):
    """Slot k of two mesh shapes a, b: a's hull point k (``points``: the hull points) against
    b's hull (k < a's count), else b's point k - count against a's hull, both with a as the
    first shape: (valid, penetration (m), normal from b towards a, point on a's surface)."""
    count_a = point_count[a]
    to_a = wp.transform_inverse(X_a)
    to_b = wp.transform_inverse(X_b)
    if k < count_a:
        x = wp.transform_point(X_a, points[point_start[a] + k])
        towards_a = wp.normalize(wp.transform_point(to_b, wp.transform_get_translation(X_a)))
        d, n = hull_distance(wp.transform_point(to_b, x), towards_a, plane_normal, plane_offset, plane_start[b],
                             plane_count[b])
        return True, -d, wp.quat_rotate(wp.transform_get_rotation(X_b), n), x
    y = wp.transform_point(X_b, points[point_start[b] + k - count_a])
    towards_b = wp.normalize(wp.transform_point(to_a, wp.transform_get_translation(X_b)))
    d, n = hull_distance(wp.transform_point(to_a, y), towards_b, plane_normal, plane_offset, plane_start[a],
                         plane_count[a])
    outward = wp.quat_rotate(wp.transform_get_rotation(X_a), n)
    return True, -d, -outward, y - outward * d


@wp.func
def plan_contact(
    plan: int, flip: bool, axis: int, side: wp.Float, k: int, a: int, b: int, ka: int, kb: int, size_a: vec3,
    size_b: vec3, X_a: transform, X_b: transform, points: wp.array(dtype=vec3), point_start: wp.array(dtype=int),
    hull_points: wp.array(dtype=vec3), hull_point_start: wp.array(dtype=int), hull_point_count: wp.array(dtype=int),
    plane_normal: wp.array(dtype=vec3), plane_offset: wp.array(dtype=wp.Float), plane_start: wp.array(dtype=int),
    plane_count: wp.array(dtype=int),
):
    """Contact slot k of the pair of shapes a, b under its plan: (valid, penetration (m, > 0
    overlapping), unit normal n from the second shape towards the first, world point x on
    the first shape's surface). The first shape is the one whose points are tested: a, or
    b on flip (two meshes: a, whichever hull's points the slot tests). A box corner outside
    the reference face's extent, coincident core segments or PLAN_NONE give valid = False.
    ``points`` .. ``plane_count``: the mesh shapes' contact points, hull points and hull
    planes (the Model fields of those names with the shape_ prefix)."""
    kp = ka
    ks = kb
    size_p = size_a
    size_s = size_b
    X_p = X_a
    X_s = X_b
    start_p = point_start[a]
    if flip:
        kp = kb
        ks = ka
        size_p = size_b
        size_s = size_a
        X_p = X_b
        X_s = X_a
        start_p = point_start[b]
    zero = side * type(side)(0.0)
    if plan == PLAN_NONE:
        origin = wp.transform_get_translation(X_p)
        return False, zero, origin * zero, origin
    if plan == PLAN_SEGMENTS:
        ca, cb = closest_segment_points(
            core_segment(kp, size_p, X_p, 0), core_segment(kp, size_p, X_p, 1), core_segment(ks, size_s, X_s, 0),
            core_segment(ks, size_s, X_s, 1),
        )
        d = ca - cb
        dist = wp.length(d)
        if dist > zero:
            n = d / dist
            return True, size_p[0] + size_s[0] - dist, n, ca - n * size_p[0]
        return False, zero, d, ca
    if plan == PLAN_HULLS:
        return hull_contact(k, a, b, X_a, X_b, hull_points, hull_point_start, hull_point_count, plane_normal,
                            plane_offset, plane_start, plane_count)
    if plan == PLAN_EDGE:
        if k == BOX_PAIR_SLOTS - 1:
            return edge_edge_contact(size_p, X_p, size_s, X_s, axis, side)
        origin = wp.transform_get_translation(X_p)
        return False, zero, origin * zero, origin
    if plan == PLAN_FACE:
        n_local = wp.vector(zero, zero, zero)
        n_local[axis] = side
        n = wp.quat_rotate(wp.transform_get_rotation(X_s), n_local)
        if k < 8:
            return box_corner_on_face(size_p, X_p, size_s, X_s, axis, side, k, n)
        if k < 12:
            return face_corner_in_box(size_s, X_s, size_p, X_p, axis, side, k - 8, n)
        if k < BOX_PAIR_SLOTS - 1:
            return edge_crossing(size_p, X_p, size_s, X_s, axis, side, k - 12, n)
        return False, zero, n, wp.transform_get_translation(X_p)
    local, radius = shape_contact_point(kp, size_p, k, points, start_p)
    if kp == SHAPE_CAPSULE and ks == SHAPE_BOX:  # sampled along the core, so one lying across a small box is held
        along = type(radius)(float(k)) / type(radius)(float(CAPSULE_BOX_SAMPLES - 1))
        local = wp.vector(local[0], local[1], size_p[1] * (type(radius)(2.0) * along - type(radius)(1.0)))
    centre = wp.transform_point(X_p, local)
    dist, n_local = shape_sdf(ks, wp.transform_point(wp.transform_inverse(X_s), centre), size_s)
    n = wp.quat_rotate(wp.transform_get_rotation(X_s), n_local)
    return True, radius - dist, n, centre - n * radius


@wp.func
def pair_contact_wrenches(
    i: int,
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_ke: wp.array(dtype=wp.Float),
    shape_kd: wp.array(dtype=wp.Float),
    shape_mu: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
    shape_point_count: wp.array(dtype=int),
    shape_points: wp.array(dtype=vec3),
    shape_hull_points: wp.array(dtype=vec3),
    shape_hull_point_start: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    shape_plane_normal: wp.array(dtype=vec3),
    shape_plane_offset: wp.array(dtype=wp.Float),
    shape_plane_start: wp.array(dtype=int),
    shape_plane_count: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    body_origin: wp.array(dtype=vec3),
    contact_pair_in: wp.array2d(dtype=int),
    contact_pair_count_in: wp.array(dtype=int),
    body_q_in: wp.array(dtype=transform),
    body_qd_in: wp.array(dtype=vec6),
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    dt: wp.Float,
    gradient_width: wp.Float,
    body_f_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
):
    """Add the contact wrenches of listed pair ``i`` (see ``eval_rigid_contacts``)."""
    if i >= contact_pair_count_in[0]:
        return
    a = contact_pair_in[i, 0]
    b = contact_pair_in[i, 1]
    ka = shape_kind[a]
    kb = shape_kind[b]
    ba, bb, Xa, Xb = pair_poses(a, b, shape_body, shape_transform, body_q_in)
    half = type(dt)(0.5)
    ke = (shape_ke[a] + shape_ke[b]) * half
    kd = (shape_kd[a] + shape_kd[b]) * half
    mu = (shape_mu[a] + shape_mu[b]) * half
    sa = shape_size[a]
    sb = shape_size[b]
    rate = dt * type(dt)(0.0)
    if ba >= 0 and bb >= 0:  # explicit friction between bodies: slope bounded by the pair's mass
        rate = dt * type(dt)(FRICTION_RATE_FACTOR) * (type(dt)(1.0) / body_mass[ba] + type(dt)(1.0) / body_mass[bb])
    plan, flip, axis, side = contact_plan(ka, kb, sa, sb, Xa, Xb, gradient_reach(gradient_width))
    first = ba
    second = bb
    if flip:
        first = bb
        second = ba
    slots = plan_slot_count(plan, flip, ka, kb, shape_point_count[a], shape_point_count[b], shape_hull_point_count[a],
                            shape_hull_point_count[b])
    for k in range(slots):
        valid, pen, n, x = plan_contact(plan, flip, axis, side, k, a, b, ka, kb, sa, sb, Xa, Xb, shape_points,
                                        shape_point_start, shape_hull_points, shape_hull_point_start,
                                        shape_hull_point_count, shape_plane_normal, shape_plane_offset,
                                        shape_plane_start, shape_plane_count)
        if valid:
            add_contact(pen, n, x, first, second, ke, kd, damping_depth, mu, friction_smoothing, rate, gradient_width,
                        body_q_in, body_qd_in, body_origin, body_f_out, body_damping_out)


@kernel
def eval_rigid_contacts(
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_ke: wp.array(dtype=wp.Float),
    shape_kd: wp.array(dtype=wp.Float),
    shape_mu: wp.array(dtype=wp.Float),
    shape_point_start: wp.array(dtype=int),
    shape_point_count: wp.array(dtype=int),
    shape_points: wp.array(dtype=vec3),
    shape_hull_points: wp.array(dtype=vec3),
    shape_hull_point_start: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    shape_plane_normal: wp.array(dtype=vec3),
    shape_plane_offset: wp.array(dtype=wp.Float),
    shape_plane_start: wp.array(dtype=int),
    shape_plane_count: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    body_origin: wp.array(dtype=vec3),
    contact_pair_in: wp.array2d(dtype=int),
    contact_pair_count_in: wp.array(dtype=int),
    body_q_in: wp.array(dtype=transform),
    body_qd_in: wp.array(dtype=vec6),
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    dt: wp.Float,
    gradient_width: wp.Float,
    body_f_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
):
    """One thread per listed shape pair (the first ``contact_pair_count_in[0]`` rows of
    ``contact_pair_in``: every candidate pair, or a step's broad-phase pairs): add its
    contact wrenches into body_f_out and, for
    contacts with static geometry, their velocity slopes into body_damping_out (B, 3): the
    spatial damping blocks (ww, wv, vv) that the joint-space solve treats implicitly. ``dt``
    (s) bounds the friction slope of body-body contacts; ``damping_depth`` (m) ramps the
    damping in at onset (``onset_damping``); ``gradient_width`` (m) > 0 selects the smoothed
    contact gradient."""
    pair_contact_wrenches(wp.tid(), shape_kind, shape_body, shape_transform, shape_size, shape_ke, shape_kd, shape_mu,
        shape_point_start, shape_point_count, shape_points, shape_hull_points, shape_hull_point_start,
        shape_hull_point_count, shape_plane_normal, shape_plane_offset, shape_plane_start, shape_plane_count,
        body_mass, body_origin, contact_pair_in, contact_pair_count_in, body_q_in, body_qd_in, friction_smoothing,
        damping_depth, dt, gradient_width, body_f_out, body_damping_out)


@wp.kernel(enable_backward=False)
def pair_slot_counts(
    contact_pair: wp.array2d(dtype=int),
    shape_kind: wp.array(dtype=int),
    shape_point_count: wp.array(dtype=int),
    shape_hull_point_count: wp.array(dtype=int),
    slots_out: wp.array(dtype=int),
):
    """One thread per candidate pair: its number of contact slots (``plan_slot_count``)."""
    i = wp.tid()
    a = contact_pair[i, 0]
    b = contact_pair[i, 1]
    plan, flip = plan_by_kind(shape_kind[a], shape_kind[b])
    slots_out[i] = plan_slot_count(plan, flip, shape_kind[a], shape_kind[b], shape_point_count[a],
                                   shape_point_count[b], shape_hull_point_count[a], shape_hull_point_count[b])
