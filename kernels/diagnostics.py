"""Per-world diagnostics: kinetic and gravitational energy, linear momentum, centroids."""

import warp as wp

from .generic import kernel, set_deterministic, vec3

set_deterministic(__name__)


@kernel
def particle_energy(
    particle_mass: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    gravity: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    kinetic_out: wp.array(dtype=wp.Float),
    potential_out: wp.array(dtype=wp.Float),
):
    """Accumulate 1/2 m |v|^2 and the gravitational energy -m g.x (J) per world."""
    i = wp.tid()
    m = particle_mass[i]
    v = particle_qd_in[i]
    w = particle_world[i]
    wp.atomic_add(kinetic_out, w, type(m)(0.5) * m * wp.dot(v, v))
    wp.atomic_add(potential_out, w, -m * wp.dot(gravity[0], particle_q_in[i]))


@kernel
def particle_momentum(
    particle_mass: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    linear_out: wp.array(dtype=vec3),
    angular_out: wp.array(dtype=vec3),
):
    """Accumulate linear momentum m v (kg m/s) and angular momentum x x m v (kg m^2/s) per world."""
    i = wp.tid()
    p = particle_qd_in[i] * particle_mass[i]
    wp.atomic_add(linear_out, particle_world[i], p)
    wp.atomic_add(angular_out, particle_world[i], wp.cross(particle_q_in[i], p))


@kernel
def weighted_centroid(
    particle_world: wp.array(dtype=int),
    particle_weight_in: wp.array(dtype=wp.Float),
    particle_q_in: wp.array(dtype=vec3),
    centroid_out: wp.array(dtype=vec3),
):
    """Accumulate sum_i w_i x_i (m) per world; with weights summing to 1 this is a centroid."""
    i = wp.tid()
    wp.atomic_add(centroid_out, particle_world[i], particle_q_in[i] * particle_weight_in[i])
