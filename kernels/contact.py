"""Contact geometry and the compliant contact force law (device functions only).

Shapes are described in their own frame: a plane is ``z = 0`` with normal +z, a sphere is
centred at the origin, a box is axis aligned with half extents ``size``, a capsule is the set
of points within ``size[0]`` of the segment from ``(0, 0, -size[1])`` to ``(0, 0, size[1])``.
"""

import warp as wp

from .enums import SHAPE_BOX, SHAPE_PLANE, SHAPE_SPHERE
from .generic import vec3


@wp.func
def box_sdf(p: vec3, half: vec3):
    """Signed distance (m) and outward unit normal of an axis-aligned box at local point p."""
    zero = p[0] * type(p[0])(0.0)
    q = wp.vector(wp.abs(p[0]) - half[0], wp.abs(p[1]) - half[1], wp.abs(p[2]) - half[2])
    outside = wp.vector(wp.max(q[0], zero), wp.max(q[1], zero), wp.max(q[2], zero))
    out_len = wp.length(outside)
    if out_len > zero:
        n = wp.vector(wp.sign(p[0]) * outside[0], wp.sign(p[1]) * outside[1], wp.sign(p[2]) * outside[2])
        return out_len, n / out_len
    # inside: the nearest face is the one with the largest (least negative) q
    axis = int(0)
    if q[1] > q[axis]:
        axis = 1
    if q[2] > q[axis]:
        axis = 2
    n = wp.vector(zero, zero, zero)
    n[axis] = wp.sign(p[axis])
    return q[axis], n


@wp.func
def shape_sdf(kind: int, p: vec3, size: vec3):
    """Signed distance (m) and outward unit normal of shape ``kind`` at local point p."""
    zero = p[0] * type(p[0])(0.0)
    one = type(p[0])(1.0)
    if kind == SHAPE_PLANE:
        return p[2], wp.vector(zero, zero, one)
    if kind == SHAPE_SPHERE:
        r = wp.length(p)
        if r > zero:
            return r - size[0], p / r
        return -size[0], wp.vector(zero, zero, one)
    if kind == SHAPE_BOX:
        return box_sdf(p, size)
    # capsule along local z
    c = wp.vector(zero, zero, wp.clamp(p[2], -size[1], size[1]))
    d = p - c
    r = wp.length(d)
    if r > zero:
        return r - size[0], d / r
    return -size[0], wp.vector(one, zero, zero)


@wp.func
def clamped_normal_force(penetration: wp.Float, x: wp.Float):
    """max(x, 0) while penetrating (penetration > 0), else 0."""
    zero = x * type(x)(0.0)
    if penetration > zero:
        return wp.max(x, zero)
    return zero


@wp.func
def normal_force_slope(penetration: wp.Float, x: wp.Float, scale: wp.Float):
    """d f_n / d x used by the backward pass: the logistic sigmoid(x / scale), the slope of
    the smoothed force scale * softplus(x / scale), or the hard slope when scale is 0."""
    zero = x * type(x)(0.0)
    one = type(x)(1.0)
    if scale > zero:
        return one / (one + wp.exp(-x / scale))
    if penetration > zero and x > zero:
        return one
    return zero


# Warp accepts a custom adjoint only on a function with concrete argument types, hence one
# overload per precision; both delegate to the generic functions above.
@wp.func
def normal_force(penetration: wp.float32, x: wp.float32, scale: wp.float32):
    """Normal contact force (N) from x = ke pen - kd v_n: hard forward, see ``normal_force_slope``."""
    return clamped_normal_force(penetration, x)


@wp.func_grad(normal_force)
def adj_normal_force_float32(penetration: wp.float32, x: wp.float32, scale: wp.float32, adj_ret: wp.float32):
    wp.adjoint[x] += adj_ret * normal_force_slope(penetration, x, scale)


@wp.func
def normal_force(penetration: wp.float64, x: wp.float64, scale: wp.float64):  # noqa: F811 (float64 overload)
    """Normal contact force (N) from x = ke pen - kd v_n: hard forward, see ``normal_force_slope``."""
    return clamped_normal_force(penetration, x)


@wp.func_grad(normal_force)
def adj_normal_force_float64(penetration: wp.float64, x: wp.float64, scale: wp.float64, adj_ret: wp.float64):
    wp.adjoint[x] += adj_ret * normal_force_slope(penetration, x, scale)


GRADIENT_REACH = wp.constant(6.0)
"""Contacts up to this many gradient widths apart are evaluated for the smoothed gradient."""


@wp.func
def gradient_reach(width: wp.Float):
    """How far apart (m) contacts are still evaluated with gradient width ``width`` (m)."""
    return type(width)(GRADIENT_REACH) * width


@wp.func
def onset_damping(kd: wp.Float, penetration: wp.Float, damping_depth: wp.Float):
    """Contact damping coefficient (N s/m) at a penetration (m): ``kd`` once the penetration
    reaches ``damping_depth`` (m), before that ``kd u (2 - u)`` with u = pen / depth: growing
    linearly from 0 at first touch (Hunt-Crossley style, so the force is continuous at
    contact onset) and joining ``kd`` with zero slope; plain ``kd`` when ``damping_depth`` is 0."""
    zero = kd * type(kd)(0.0)
    one = type(kd)(1.0)
    if damping_depth > zero:
        u = wp.clamp(penetration / damping_depth, zero, one)
        return kd * u * (type(kd)(2.0) - u)
    return kd


@wp.func
def normal_force_and_slip(penetration: wp.Float, normal: vec3, rel_vel: vec3, ke: wp.Float, kd: wp.Float,
                          gradient_width: wp.Float):
    """Normal force f_n (N, spring-damper ``ke * pen - kd * v_n`` through ``normal_force``;
    ``kd`` as from ``onset_damping``) and the tangential slip velocity v_t (m/s) of a contact."""
    vn = wp.dot(normal, rel_vel)
    return normal_force(penetration, ke * penetration - kd * vn, ke * gradient_width), rel_vel - normal * vn


@wp.func
def friction_force(fn: wp.Float, vt: vec3, mu: wp.Float, friction_smoothing: wp.Float, dt_over_mass: wp.Float):
    """Smooth Coulomb friction (N) ``-mu * f_n * v_t / sqrt(|v_t|^2 + s^2)`` with
    s^2 = smoothing^2 + (mu f_n dt / m)^2 (see ``compliant_contact_force``)."""
    stick_speed = mu * fn * dt_over_mass
    smoothing_sq = friction_smoothing * friction_smoothing + stick_speed * stick_speed
    return vt * (-mu * fn / wp.sqrt(wp.dot(vt, vt) + smoothing_sq))


@wp.func
def compliant_contact_force(
    penetration: wp.Float,
    normal: vec3,
    rel_vel: vec3,
    ke: wp.Float,
    kd: wp.Float,
    damping_depth: wp.Float,
    mu: wp.Float,
    friction_smoothing: wp.Float,
    dt_over_mass: wp.Float,
    gradient_width: wp.Float,
):
    """Contact force (N) on a body penetrating by ``penetration`` (m) along ``normal``.

    Normal: spring-damper ``ke * pen - kd * v_n``, clamped at zero (no adhesion) and zero
    when not penetrating; with ``damping_depth`` > 0 (m) the damping ramps up over that
    depth (``onset_damping``). Friction: smooth Coulomb ``-mu * f_n * v_t / sqrt(|v_t|^2 + s^2)``,
    differentiable for every velocity, with s^2 = smoothing^2 + (mu f_n dt / m)^2: the
    second term keeps the near-sticking slope below m / dt, so the explicit step cannot
    reverse the sliding velocity and make friction chatter (``dt_over_mass`` = dt / m, 0 for
    fixed bodies).

    Hard contact, soft gradient: with ``gradient_width`` w > 0 (m) the forward force is
    unchanged but the backward differentiates the smoothed normal force
    ke w softplus((ke pen - kd v_n) / (ke w)) instead (see ``normal_force``); a caller may
    then also evaluate contacts that are up to a few w apart, whose forward force is zero.
    """
    fn, vt = normal_force_and_slip(penetration, normal, rel_vel, ke, onset_damping(kd, penetration, damping_depth),
                                   gradient_width)
    return normal * fn + friction_force(fn, vt, mu, friction_smoothing, dt_over_mass)


@wp.func
def contact_velocity_slopes(fn: wp.Float, vt: vec3, kd: wp.Float, mu: wp.Float, friction_smoothing: wp.Float):
    """Damping slopes (N s/m) of a contact with normal force ``fn`` and slip ``vt``, without
    the dt/m bound: normal kd while the normal force is positive, tangential
    mu f_n / sqrt(|v_t|^2 + s^2) (the largest slope of smooth Coulomb friction). A solver
    treats the force's velocity dependence implicitly with them."""
    zero = fn * type(fn)(0.0)
    kn = zero
    if fn > zero:
        kn = kd
    return kn, mu * fn / wp.sqrt(wp.dot(vt, vt) + friction_smoothing * friction_smoothing)
