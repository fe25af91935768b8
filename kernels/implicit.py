"""Backward-Euler residual and the vector/scalar operations of its Newton-Krylov solve.

Krylov scalars (dot products, step lengths) live in one-element device arrays, so an
unrolled solve is an ordinary sequence of recorded launches that Warp can differentiate.
"""

import warp as wp

from .generic import kernel, set_deterministic, vec3
from .particles import flag_fault

set_deterministic(__name__)


@kernel
def implicit_positions(particle_q: wp.array(dtype=vec3), velocity: wp.array(dtype=vec3), dt: wp.Float,
                       q_out: wp.array(dtype=vec3)):
    """End-of-step positions of a backward-Euler step: x = x_n + dt v (m)."""
    i = wp.tid()
    q_out[i] = particle_q[i] + velocity[i] * dt


@kernel
def implicit_residual(
    particle_mass: wp.array(dtype=wp.Float),
    gravity: wp.array(dtype=vec3),
    particle_qd: wp.array(dtype=vec3),
    velocity: wp.array(dtype=vec3),
    particle_f: wp.array(dtype=vec3),
    dt: wp.Float,
    residual: wp.array(dtype=vec3),
):
    """Mass-scaled backward-Euler residual (m/s): v - v_n - dt (f(x_n + dt v, v) / m + g);
    for a fixed particle (m = 0) simply v, which pins it in place."""
    i = wp.tid()
    m = particle_mass[i]
    v = velocity[i]
    if m > m * type(m)(0.0):
        residual[i] = v - particle_qd[i] - (particle_f[i] / m + gravity[0]) * dt
    else:
        residual[i] = v


@kernel
def finish_step(
    particle_q: wp.array(dtype=vec3),
    velocity: wp.array(dtype=vec3),
    particle_world: wp.array(dtype=int),
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    q_out: wp.array(dtype=vec3),
    qd_out: wp.array(dtype=vec3),
    world_fault_step: wp.array(dtype=int),
):
    """Write the end state x = x_n + dt v, v; flag the world (earliest step) when it is
    non-finite or beyond max_coordinate (m) / max_speed (m/s)."""
    i = wp.tid()
    v = velocity[i]
    x = particle_q[i] + v * dt
    q_out[i] = x
    qd_out[i] = v
    flag_fault(x, v, particle_world[i], step, max_coordinate, max_speed, world_fault_step)


@kernel
def dot(a: wp.array(dtype=vec3), b: wp.array(dtype=vec3), out: wp.array(dtype=wp.Float)):
    """out[0] += sum_i a[i] . b[i] (out must start at zero)."""
    i = wp.tid()
    wp.atomic_add(out, 0, wp.dot(a[i], b[i]))


@kernel
def axpy(x: wp.array(dtype=vec3), y: wp.array(dtype=vec3), a: wp.Float, out: wp.array(dtype=vec3)):
    """out = x + a y with a host scalar a (out may be x)."""
    i = wp.tid()
    out[i] = x[i] + y[i] * a


@kernel
def axpy_device(x: wp.array(dtype=vec3), y: wp.array(dtype=vec3), a: wp.array(dtype=wp.Float), sign: wp.Float,
                out: wp.array(dtype=vec3)):
    """out = x + sign a[0] y with a device scalar a (out may be x)."""
    i = wp.tid()
    out[i] = x[i] + y[i] * (sign * a[0])


@kernel
def scaled_difference(a: wp.array(dtype=vec3), b: wp.array(dtype=vec3), c: wp.Float, out: wp.array(dtype=vec3)):
    """out = c (a - b): the central-difference Jacobian-vector product."""
    i = wp.tid()
    out[i] = (a[i] - b[i]) * c


@kernel
def ratio(num: wp.array(dtype=wp.Float), den: wp.array(dtype=wp.Float), out: wp.array(dtype=wp.Float)):
    """out[0] = num[0] / den[0], or 0 when den[0] is 0 (Krylov breakdown: no update)."""
    d = den[0]
    if d != d * type(d)(0.0):
        out[0] = num[0] / d
    else:
        out[0] = d * type(d)(0.0)


@kernel
def bicgstab_direction(
    r: wp.array(dtype=vec3),
    p: wp.array(dtype=vec3),
    v: wp.array(dtype=vec3),
    rho: wp.array(dtype=wp.Float),
    rho_prev: wp.array(dtype=wp.Float),
    alpha: wp.array(dtype=wp.Float),
    omega: wp.array(dtype=wp.Float),
    out: wp.array(dtype=vec3),
):
    """BiCGSTAB search direction out = r + beta (p - omega v), beta = (rho/rho_prev)(alpha/omega),
    beta = 0 on breakdown (out may be p)."""
    i = wp.tid()
    zero = rho[0] * type(rho[0])(0.0)
    beta = zero
    w = omega[0]
    if rho_prev[0] != zero and w != zero:
        beta = (rho[0] / rho_prev[0]) * (alpha[0] / w)
    out[i] = r[i] + (p[i] - v[i] * w) * beta


@kernel
def bicgstab_update(
    x: wp.array(dtype=vec3),
    p: wp.array(dtype=vec3),
    s: wp.array(dtype=vec3),
    alpha: wp.array(dtype=wp.Float),
    omega: wp.array(dtype=wp.Float),
    out: wp.array(dtype=vec3),
):
    """BiCGSTAB iterate out = x + alpha p + omega s (out may be x)."""
    i = wp.tid()
    out[i] = x[i] + p[i] * alpha[0] + s[i] * omega[0]
