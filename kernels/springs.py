"""Damped linear springs between particle pairs."""

import warp as wp

from .generic import kernel, set_deterministic, vec3

set_deterministic(__name__)


@wp.func
def spring_force(xi: vec3, xj: vec3, vi: vec3, vj: vec3, ke: wp.Float, kd: wp.Float, rest: wp.Float):
    """Force (N) on particle i of a spring to j: (ke (l - rest) + kd dl/dt) along i->j."""
    d = xj - xi
    length = wp.length(d)
    if length > ke * type(ke)(0.0):
        direction = d / length
        magnitude = ke * (length - rest) + kd * wp.dot(direction, vj - vi)
        return direction * magnitude
    return d * type(ke)(0.0)


@kernel
def eval_springs(
    spring_indices: wp.array2d(dtype=int),
    spring_ke: wp.array(dtype=wp.Float),
    spring_kd: wp.array(dtype=wp.Float),
    spring_rest_length: wp.array(dtype=wp.Float),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    spring_activation: wp.array(dtype=wp.Float),
    particle_f_out: wp.array(dtype=vec3),
):
    """Accumulate each spring's equal and opposite forces (N) onto its two particles, at the
    rest length scaled by (1 + activation)."""
    s = wp.tid()
    i = spring_indices[s, 0]
    j = spring_indices[s, 1]
    rest = spring_rest_length[s] * (type(spring_rest_length[s])(1.0) + spring_activation[s])
    f = spring_force(
        particle_q_in[i], particle_q_in[j], particle_qd_in[i], particle_qd_in[j], spring_ke[s], spring_kd[s], rest,
    )
    wp.atomic_add(particle_f_out, i, f)
    wp.atomic_sub(particle_f_out, j, f)


@kernel
def spring_energy(
    spring_indices: wp.array2d(dtype=int),
    spring_ke: wp.array(dtype=wp.Float),
    spring_rest_length: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    spring_activation: wp.array(dtype=wp.Float),
    energy_out: wp.array(dtype=wp.Float),
):
    """Accumulate each spring's elastic energy 1/2 ke (l - rest)^2 (J) into its world's entry,
    rest being the rest length scaled by (1 + activation)."""
    s = wp.tid()
    i = spring_indices[s, 0]
    rest = spring_rest_length[s] * (type(spring_rest_length[s])(1.0) + spring_activation[s])
    stretch = wp.length(particle_q_in[spring_indices[s, 1]] - particle_q_in[i]) - rest
    wp.atomic_add(energy_out, particle_world[i], type(stretch)(0.5) * spring_ke[s] * stretch * stretch)
