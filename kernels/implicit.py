"""Backward-Euler residual and the vector/scalar operations of its Newton-Krylov solve.

Krylov scalars (dot products, step lengths) live in one-element device arrays, so an
unrolled solve is an ordinary sequence of recorded launches that Warp can differentiate.
"""

import warp as wp

from .generic import kernel, set_deterministic, vec3
from .particles import flag_fault

set_deterministic(__name__)


@kernel
def implicit_positions(particle_q_in: wp.array(dtype=vec3), velocity_in: wp.array(dtype=vec3), dt: wp.Float,
                       particle_q_out: wp.array(dtype=vec3)):
    """End-of-step positions of a backward-Euler step: x = x_n + dt v (m)."""
    i = wp.tid()
    particle_q_out[i] = particle_q_in[i] + velocity_in[i] * dt


@kernel
def implicit_residual(
    particle_mass: wp.array(dtype=wp.Float),
    gravity: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    velocity_in: wp.array(dtype=vec3),
    particle_f_in: wp.array(dtype=vec3),
    dt: wp.Float,
    residual_out: wp.array(dtype=vec3),
):
    """Mass-scaled backward-Euler residual (m/s): v - v_n - dt (f(x_n + dt v, v) / m + g);
    for a fixed particle (m = 0) simply v, which pins it in place."""
    i = wp.tid()
    m = particle_mass[i]
    v = velocity_in[i]
    if m > m * type(m)(0.0):
        residual_out[i] = v - particle_qd_in[i] - (particle_f_in[i] / m + gravity[0]) * dt
    else:
        residual_out[i] = v


@kernel
def finish_step(
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    velocity_in: wp.array(dtype=vec3),
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    particle_q_out: wp.array(dtype=vec3),
    particle_qd_out: wp.array(dtype=vec3),
    world_fault_step_out: wp.array(dtype=int),
):
    """Write the end state x = x_n + dt v, v; flag the world (earliest step) when it is
    non-finite or beyond max_coordinate (m) / max_speed (m/s)."""
    i = wp.tid()
    v = velocity_in[i]
    x = particle_q_in[i] + v * dt
    particle_q_out[i] = x
    particle_qd_out[i] = v
    flag_fault(x, v, particle_world[i], step, max_coordinate, max_speed, world_fault_step_out)


@kernel
def dot(a_in: wp.array(dtype=vec3), b_in: wp.array(dtype=vec3), result_out: wp.array(dtype=wp.Float)):
    """result_out[0] += sum_i a_in[i] . b_in[i] (result_out must start at zero)."""
    i = wp.tid()
    wp.atomic_add(result_out, 0, wp.dot(a_in[i], b_in[i]))


@kernel
def axpy(x_in: wp.array(dtype=vec3), y_in: wp.array(dtype=vec3), a: wp.Float, result_out: wp.array(dtype=vec3)):
    """result_out = x_in + a y_in with a host scalar a (result_out may be x_in)."""
    i = wp.tid()
    result_out[i] = x_in[i] + y_in[i] * a


@kernel
def axpy_device(x_in: wp.array(dtype=vec3), y_in: wp.array(dtype=vec3), a_in: wp.array(dtype=wp.Float),
                sign: wp.Float, result_out: wp.array(dtype=vec3)):
    """result_out = x_in + sign a_in[0] y_in with a device scalar a_in (result_out may be x_in)."""
    i = wp.tid()
    result_out[i] = x_in[i] + y_in[i] * (sign * a_in[0])


@kernel
def scaled_difference(a_in: wp.array(dtype=vec3), b_in: wp.array(dtype=vec3), c: wp.Float,
                      result_out: wp.array(dtype=vec3)):
    """result_out = c (a_in - b_in): the central-difference Jacobian-vector product."""
    i = wp.tid()
    result_out[i] = (a_in[i] - b_in[i]) * c


@kernel
def ratio(num_in: wp.array(dtype=wp.Float), den_in: wp.array(dtype=wp.Float), result_out: wp.array(dtype=wp.Float)):
    """result_out[0] = num_in[0] / den_in[0], or 0 when den_in[0] is 0 (Krylov breakdown: no update)."""
    d = den_in[0]
    if d != d * type(d)(0.0):
        result_out[0] = num_in[0] / d
    else:
        result_out[0] = d * type(d)(0.0)


@kernel
def bicgstab_direction(
    r_in: wp.array(dtype=vec3),
    p_in: wp.array(dtype=vec3),
    v_in: wp.array(dtype=vec3),
    rho_in: wp.array(dtype=wp.Float),
    rho_prev_in: wp.array(dtype=wp.Float),
    alpha_in: wp.array(dtype=wp.Float),
    omega_in: wp.array(dtype=wp.Float),
    result_out: wp.array(dtype=vec3),
):
    """BiCGSTAB search direction result_out = r + beta (p - omega v), beta = (rho/rho_prev)(alpha/omega),
    beta = 0 on breakdown (result_out may be p_in)."""
    i = wp.tid()
    zero = rho_in[0] * type(rho_in[0])(0.0)
    beta = zero
    w = omega_in[0]
    if rho_prev_in[0] != zero and w != zero:
        beta = (rho_in[0] / rho_prev_in[0]) * (alpha_in[0] / w)
    result_out[i] = r_in[i] + (p_in[i] - v_in[i] * w) * beta


@kernel
def bicgstab_update(
    x_in: wp.array(dtype=vec3),
    p_in: wp.array(dtype=vec3),
    s_in: wp.array(dtype=vec3),
    alpha_in: wp.array(dtype=wp.Float),
    omega_in: wp.array(dtype=wp.Float),
    result_out: wp.array(dtype=vec3),
):
    """BiCGSTAB iterate result_out = x + alpha p + omega s (result_out may be x_in)."""
    i = wp.tid()
    result_out[i] = x_in[i] + p_in[i] * alpha_in[0] + s_in[i] * omega_in[0]
