"""Spatial tendons: paths through points on bodies (MuJoCo's sites), wrapping around spheres and
cylinders between two of them, with their length L (m), its rate and Jacobian dL/dq over the
dofs of the tendon's articulation, and the generalized force J^T f of a spring, damper and drive
on L (``ModelBuilder.add_spatial_tendon``).

A path is a chain of segments, each from a point on one body to a point on another, straight or
around a wrap (a sphere or an infinite cylinder on a body, optionally told which way to go by a
side point): around it the path runs straight to a tangent point, along the surface (a great
circle, a helix), straight from a tangent point, as MuJoCo wraps. The Jacobian takes the tangent
points as fixed on the wrap's body (the path's length is stationary in their position along the
surface). Sums run through atomic adds to arrays, since loop accumulators of dynamic loops lose
their adjoints.
"""

import warp as wp

from .articulation import bottom, vec6
from .generic import kernel, transform, vec3

vec4 = wp.types.vector(4, wp.Float)
from .soft_contact import point_motion

WRAP_NONE = wp.constant(0)
WRAP_SPHERE = wp.constant(1)
WRAP_CYLINDER = wp.constant(2)
WRAP_TOLERANCE = wp.constant(1.0e-15)
"""Lengths and determinants below this count as zero in the wrap geometry (MuJoCo's mjMINVAL)."""


@wp.func
def segments_cross(p1: wp.Float, p2: wp.Float, q1: wp.Float, q2: wp.Float, r1: wp.Float, r2: wp.Float,
                   s1: wp.Float, s2: wp.Float):
    """Whether the 2D segments p-q and r-s cross (parallel ones do not)."""
    det = (s2 - r2) * (q1 - p1) - (s1 - r1) * (q2 - p2)
    crossed = False
    if wp.abs(det) >= type(det)(WRAP_TOLERANCE):
        a = ((s1 - r1) * (p2 - r2) - (s2 - r2) * (p1 - r1)) / det
        b = ((q1 - p1) * (p2 - r2) - (q2 - p2) * (p1 - r1)) / det
        zero = det * type(det)(0.0)
        one = type(det)(1.0)
        crossed = a >= zero and a <= one and b >= zero and b <= one
    return crossed


@wp.func
def arc_angle(a1: wp.Float, a2: wp.Float, b1: wp.Float, b2: wp.Float, second: int):
    """The angle (rad) along a circle about the origin from 2D point a to b, the short way, or the
    long way where the turn's sense disagrees with the chosen tangent pair (``second``)."""
    one = type(a1)(1.0)
    tolerance = type(a1)(WRAP_TOLERANCE)
    na = wp.max(wp.sqrt(a1 * a1 + a2 * a2), tolerance)
    nb = wp.max(wp.sqrt(b1 * b1 + b2 * b2), tolerance)
    angle = wp.acos(wp.clamp((a1 / na) * (b1 / nb) + (a2 / na) * (b2 / nb), -one, one))
    turn = a2 * b1 - a1 * b2
    if (turn > a1 * type(a1)(0.0) and second == 1) or (turn < a1 * type(a1)(0.0) and second == 0):
        angle = type(a1)(2.0 * wp.pi) - angle
    return angle


@wp.func
def behind(e: vec4, side_1: wp.Float, side_2: wp.Float):
    """Whether the 2D direction (side_1, side_2) lies in the cone of the directions opposite to
    the ends e = (x0, y0, x1, y1) as seen from the origin: behind the circle from both."""
    u1 = -e[0]
    u2 = -e[1]
    v1 = -e[2]
    v2 = -e[3]
    turn = u1 * v2 - u2 * v1
    tolerance = type(u1)(WRAP_TOLERANCE)
    nu = wp.max(wp.sqrt(u1 * u1 + u2 * u2), tolerance)
    nv = wp.max(wp.sqrt(v1 * v1 + v2 * v2), tolerance)
    zero = u1 * type(u1)(0.0)
    return ((u1 * side_2 - u2 * side_1) * turn >= zero and (side_1 * v2 - side_2 * v1) * turn >= zero
            and side_1 * (u1 / nu + v1 / nv) + side_2 * (u2 / nu + v2 / nv) > zero)


@wp.func
def tangent_pair(e: vec4, radius: wp.Float, sign: wp.Float, sqrt0: wp.Float, sqrt1: wp.Float):
    """The tangent points (x0, y0, x1, y1) from the 2D ends e = (x0, y0, x1, y1) to the circle of
    ``radius`` about the origin that go round it in the sense of ``sign``."""
    r2 = radius * radius
    l0 = e[0] * e[0] + e[1] * e[1]
    l1 = e[2] * e[2] + e[3] * e[3]
    return wp.vector((e[0] * r2 + sign * radius * e[1] * sqrt0) / l0, (e[1] * r2 - sign * radius * e[0] * sqrt0) / l0,
                     (e[2] * r2 - sign * radius * e[3] * sqrt1) / l1, (e[3] * r2 + sign * radius * e[2] * sqrt1) / l1)


@wp.func
def pair_goodness(e: vec4, t: vec4, side_1: wp.Float, side_2: wp.Float, has_side: int):
    """How well tangent pair t suits: with a side direction, the nearer to it of the pair's
    farther tangent point, else the shorter chord; crossing legs rule a pair out."""
    good = -((t[0] - t[2]) * (t[0] - t[2]) + (t[1] - t[3]) * (t[1] - t[3]))
    if has_side != 0:
        good = wp.min(t[0] * side_1 + t[1] * side_2, t[2] * side_1 + t[3] * side_2)
    if segments_cross(e[0], e[1], t[0], t[1], e[2], e[3], t[2], t[3]):
        good = type(good)(-10000.0)
    return good


@wp.func
def circle_wrap(e: vec4, side_1: wp.Float, side_2: wp.Float, has_side: int, radius: wp.Float):
    """(arc length (m), or -1 where the path does not wrap; tangent points (x0, y0, x1, y1)) of the
    2D path between ends e = (x0, y0, x1, y1) around the circle of ``radius`` about the origin:
    it wraps where the straight segment would cut the circle, or with a side point (side_1,
    side_2) where that lies behind the circle from both ends (``behind``), by the tangent pair
    ``pair_goodness`` prefers: MuJoCo 4's choices, which this reproduces on each of 1,200 random
    sphere and cylinder cases (tests/test_tendons.py)."""
    zero = radius * type(radius)(0.0)
    one = type(radius)(1.0)
    none = wp.vector(zero, zero, zero, zero)
    l0 = e[0] * e[0] + e[1] * e[1]
    l1 = e[2] * e[2] + e[3] * e[3]
    r2 = radius * radius
    if l0 < r2 or l1 < r2 or radius < type(radius)(WRAP_TOLERANCE):
        return -one, none
    d1 = e[2] - e[0]
    d2 = e[3] - e[1]
    dd = d1 * d1 + d2 * d2
    if dd < type(radius)(WRAP_TOLERANCE):
        return -one, none
    a = wp.clamp(-(d1 * e[0] + d2 * e[1]) / dd, zero, one)
    n1 = a * d1 + e[0]
    n2 = a * d2 + e[1]
    if n1 * n1 + n2 * n2 > r2 and (has_side == 0 or not behind(e, side_1, side_2)):
        return -one, none
    sqrt0 = wp.sqrt(l0 - r2)
    sqrt1 = wp.sqrt(l1 - r2)
    first = tangent_pair(e, radius, one, sqrt0, sqrt1)
    second = tangent_pair(e, radius, -one, sqrt0, sqrt1)
    chosen = second
    which = int(1)
    if pair_goodness(e, first, side_1, side_2, has_side) > pair_goodness(e, second, side_1, side_2, has_side):
        chosen = first
        which = 0
    if segments_cross(e[0], e[1], chosen[0], chosen[1], e[2], e[3], chosen[2], chosen[3]):
        return -one, none
    return radius * arc_angle(chosen[0], chosen[1], chosen[2], chosen[3], which), chosen


@wp.func
def safe_unit(v: vec3, fallback: vec3):
    """v / |v|, or ``fallback`` for a vector shorter than the wrap tolerance."""
    n = wp.length(v)
    if n < type(n)(WRAP_TOLERANCE):
        return fallback
    return v / n


@wp.func
def wrap_points(kind: int, x0: vec3, x1: vec3, X_wrap: transform, radius: wp.Float, has_side: int, side: vec3):
    """(length along the wrap surface (m), or -1 where the path goes straight; world tangent points)
    of the path from x0 to x1 (world, m) around a sphere or cylinder (axis z) of ``radius`` at
    ``X_wrap``, with a side point ``side`` (world) where ``has_side``: the 2D circle wrap in the
    plane of the sphere's centre and both ends, or across the cylinder's axis with the height
    spread along the path in proportion to its length."""
    inverse = wp.transform_inverse(X_wrap)
    p0 = wp.transform_point(inverse, x0)
    p1 = wp.transform_point(inverse, x1)
    zero = radius * type(radius)(0.0)
    one = type(radius)(1.0)
    if wp.length(p0) < type(radius)(WRAP_TOLERANCE) or wp.length(p1) < type(radius)(WRAP_TOLERANCE):
        return -one, x0, x1
    axis_0 = wp.vector(one, zero, zero)
    axis_1 = wp.vector(zero, one, zero)
    if kind == WRAP_SPHERE:
        axis_0 = safe_unit(p0, axis_0)
        normal = wp.cross(p0, p1)
        if wp.length(normal) < type(radius)(WRAP_TOLERANCE):  # ends in line with the centre: any plane through them
            other = wp.vector(one, one, one)
            largest = int(0)
            if wp.abs(axis_0[1]) > wp.abs(axis_0[0]) and wp.abs(axis_0[1]) > wp.abs(axis_0[2]):
                largest = 1
            if wp.abs(axis_0[2]) > wp.abs(axis_0[0]) and wp.abs(axis_0[2]) > wp.abs(axis_0[1]):
                largest = 2
            other[largest] = zero
            normal = wp.cross(axis_0, other)
        normal = safe_unit(normal, wp.vector(zero, zero, one))
        axis_1 = safe_unit(wp.cross(normal, axis_0), axis_1)
    ends = wp.vector(wp.dot(p0, axis_0), wp.dot(p0, axis_1), wp.dot(p1, axis_0), wp.dot(p1, axis_1))
    side_1 = zero
    side_2 = zero
    if has_side != 0:
        s = wp.transform_point(inverse, side)
        s1 = wp.dot(s, axis_0)
        s2 = wp.dot(s, axis_1)
        scale = radius / wp.max(wp.sqrt(s1 * s1 + s2 * s2), type(radius)(WRAP_TOLERANCE))
        side_1 = s1 * scale
        side_2 = s2 * scale
    length, t = circle_wrap(ends, side_1, side_2, has_side, radius)
    if length < zero:
        return -one, x0, x1
    r0 = axis_0 * t[0] + axis_1 * t[1]
    r1 = axis_0 * t[2] + axis_1 * t[3]
    if kind == WRAP_CYLINDER:
        leg_0 = wp.sqrt((p0[0] - r0[0]) * (p0[0] - r0[0]) + (p0[1] - r0[1]) * (p0[1] - r0[1]))
        leg_1 = wp.sqrt((p1[0] - r1[0]) * (p1[0] - r1[0]) + (p1[1] - r1[1]) * (p1[1] - r1[1]))
        total = leg_0 + length + leg_1
        r0 = wp.vector(r0[0], r0[1], p0[2] + (p1[2] - p0[2]) * leg_0 / total)
        r1 = wp.vector(r1[0], r1[1], p0[2] + (p1[2] - p0[2]) * (leg_0 + length) / total)
        height = r1[2] - r0[2]
        length = wp.sqrt(length * length + height * height)
    return length, wp.transform_point(X_wrap, r0), wp.transform_point(X_wrap, r1)


@wp.func
def world_point(body: int, point: vec3, body_q: wp.array(dtype=transform)):
    """A point given in a body's frame (the world's for -1) in world coordinates (m)."""
    if body < 0:
        return point
    return wp.transform_point(body_q[body], point)


@wp.func
def point_slope(dof: int, body: int, x: vec3, body_joint: wp.array(dtype=int), body_origin: wp.array(dtype=vec3),
                joint_dfs_pos: wp.array(dtype=int), joint_dfs_end: wp.array(dtype=int),
                dof_joint: wp.array(dtype=int), dof_motion: wp.array(dtype=vec6)):
    """The velocity (m/s) of world point x fixed on ``body`` per unit rate of ``dof`` (zero for the
    world, a body without a joint, or a dof that does not move it)."""
    if body < 0 or body_joint[body] < 0:
        return x * type(x[0])(0.0)
    return bottom(point_motion(dof, joint_dfs_pos[body_joint[body]], x - body_origin[body], dof_joint, joint_dfs_pos,
                               joint_dfs_end, dof_motion))


@wp.func
def leg_slope(dof: int, body_from: int, x_from: vec3, body_to: int, x_to: vec3, body_joint: wp.array(dtype=int),
              body_origin: wp.array(dtype=vec3), joint_dfs_pos: wp.array(dtype=int), joint_dfs_end: wp.array(dtype=int),
              dof_joint: wp.array(dtype=int), dof_motion: wp.array(dtype=vec6)):
    """d|x_to - x_from| / dq_dof (m per unit dof) of a straight leg between points fixed on two
    bodies (zero for a leg of no length)."""
    u = safe_unit(x_to - x_from, x_from * type(x_from[0])(0.0))
    return wp.dot(u, point_slope(dof, body_to, x_to, body_joint, body_origin, joint_dfs_pos, joint_dfs_end, dof_joint,
                                 dof_motion)
                  - point_slope(dof, body_from, x_from, body_joint, body_origin, joint_dfs_pos, joint_dfs_end, dof_joint,
                                dof_motion))


@kernel
def spatial_tendon_jacobian(
    tendon_segment_start: wp.array(dtype=int),
    tendon_articulation: wp.array(dtype=int),
    segment_body: wp.array2d(dtype=int),
    segment_point: wp.array2d(dtype=vec3),
    segment_wrap_kind: wp.array(dtype=int),
    segment_wrap_body: wp.array(dtype=int),
    segment_wrap_transform: wp.array(dtype=transform),
    segment_wrap_radius: wp.array(dtype=wp.Float),
    segment_side_body: wp.array(dtype=int),
    segment_side_point: wp.array(dtype=vec3),
    body_joint: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    body_q_in: wp.array(dtype=transform),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    length_out: wp.array(dtype=wp.Float),
    rate_out: wp.array(dtype=wp.Float),
    jacobian_out: wp.array2d(dtype=wp.Float),
):
    """One thread per spatial tendon: its length (m), its Jacobian dL/dq_k over the dofs k of its
    articulation (columns from 0; the path's geometry computed once per segment) and its rate
    sum_k J_k qd_k (m/s), summed over the path's segments (``wrap_points``; a wrap's side point
    on ``segment_side_body``, < -1 for none) into zeroed arrays."""
    t = wp.tid()
    art = tendon_articulation[t]
    d0 = int(0)
    n = int(0)
    if art >= 0:
        d0 = articulation_dof_start[art]
        n = articulation_dof_start[art + 1] - d0
    for g in range(tendon_segment_start[t], tendon_segment_start[t + 1]):
        a = segment_body[g, 0]
        b = segment_body[g, 1]
        x0 = world_point(a, segment_point[g, 0], body_q_in)
        x1 = world_point(b, segment_point[g, 1], body_q_in)
        zero = x0[0] * type(x0[0])(0.0)
        arc = -zero - type(zero)(1.0)
        w0 = x1
        w1 = x1
        kind = segment_wrap_kind[g]
        via = segment_wrap_body[g]
        if kind != WRAP_NONE:
            side_body = segment_side_body[g]
            X_wrap = segment_wrap_transform[g]
            if via >= 0:
                X_wrap = body_q_in[via] * X_wrap
            arc, w0, w1 = wrap_points(kind, x0, x1, X_wrap, segment_wrap_radius[g], wp.where(side_body >= -1, 1, 0),
                                      world_point(side_body, segment_side_point[g], body_q_in))
        if arc < zero:  # straight from x0 on a to x1 on b: the second leg has no length
            w0 = x1
            w1 = x1
            via = b
            wp.atomic_add(length_out, t, wp.length(x1 - x0))
        else:  # x0 on a to w0 on the wrap's body, along its surface, w1 to x1 on b
            wp.atomic_add(length_out, t, wp.length(w0 - x0) + arc + wp.length(x1 - w1))
        for slot in range(n):
            k = d0 + slot
            column = (leg_slope(k, a, x0, via, w0, body_joint, body_origin, joint_dfs_pos, joint_dfs_end, dof_joint,
                                dof_motion_in)
                      + leg_slope(k, via, w1, b, x1, body_joint, body_origin, joint_dfs_pos, joint_dfs_end, dof_joint,
                                  dof_motion_in))
            wp.atomic_add(jacobian_out, t, slot, column)
            wp.atomic_add(rate_out, t, column * joint_qd_in[k])


@kernel
def spatial_tendon_forces(
    tendon_articulation: wp.array(dtype=int),
    tendon_stiffness: wp.array(dtype=wp.Float),
    tendon_spring_range: wp.array2d(dtype=wp.Float),
    tendon_damping: wp.array(dtype=wp.Float),
    tendon_drive_ke: wp.array(dtype=wp.Float),
    tendon_drive_kd: wp.array(dtype=wp.Float),
    tendon_drive_force_limit: wp.array(dtype=wp.Float),
    tendon_target_range: wp.array2d(dtype=wp.Float),
    articulation_dof_start: wp.array(dtype=int),
    length_in: wp.array(dtype=wp.Float),
    rate_in: wp.array(dtype=wp.Float),
    jacobian_in: wp.array2d(dtype=wp.Float),
    tendon_target: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
):
    """One thread per (spatial tendon, dof slot): J_k f added to the joint-space right-hand side,
    f (N) = the spring ke (l - L) towards the nearest length l of its rest range (none inside),
    - kd dL/dt, and the drive ke (target - L) - kd dL/dt with the control's target clamped to
    its range and the drive's force to +-its limit; all explicit, as MuJoCo's Euler step has
    them."""
    t, slot = wp.tid()
    art = tendon_articulation[t]
    if art >= 0:
        d0 = articulation_dof_start[art]
        if slot < articulation_dof_start[art + 1] - d0:
            length = length_in[t]
            rate = rate_in[t]
            rest = length  # the nearest length of the rest range (selected: Warp's clamp has no adjoint in its bounds)
            if length < tendon_spring_range[t, 0]:
                rest = tendon_spring_range[t, 0]
            if length > tendon_spring_range[t, 1]:
                rest = tendon_spring_range[t, 1]
            target = wp.clamp(tendon_target[t], tendon_target_range[t, 0], tendon_target_range[t, 1])
            limit = tendon_drive_force_limit[t]
            drive = wp.clamp(tendon_drive_ke[t] * (target - length) - tendon_drive_kd[t] * rate, -limit, limit)
            force = tendon_stiffness[t] * (rest - length) - tendon_damping[t] * rate + drive
            wp.atomic_add(rhs_out, d0 + slot, jacobian_in[t, slot] * force)
