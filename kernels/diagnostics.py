"""Per-world diagnostics: kinetic and gravitational energy, linear momentum, centroids."""

import warp as wp

from .generic import kernel, set_deterministic, vec3

set_deterministic(__name__)


@kernel
def particle_energy(
    particle_mass: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    gravity: wp.array(dtype=vec3),
    particle_q: wp.array(dtype=vec3),
    particle_qd: wp.array(dtype=vec3),
    kinetic: wp.array(dtype=wp.Float),
    potential: wp.array(dtype=wp.Float),
):
    """Accumulate 1/2 m |v|^2 and the gravitational energy -m g.x (J) per world."""
    i = wp.tid()
    m = particle_mass[i]
    v = particle_qd[i]
    w = particle_world[i]
    wp.atomic_add(kinetic, w, type(m)(0.5) * m * wp.dot(v, v))
    wp.atomic_add(potential, w, -m * wp.dot(gravity[0], particle_q[i]))


@kernel
def particle_momentum(
    particle_mass: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q: wp.array(dtype=vec3),
    particle_qd: wp.array(dtype=vec3),
    linear: wp.array(dtype=vec3),
    angular: wp.array(dtype=vec3),
):
    """Accumulate linear momentum m v (kg m/s) and angular momentum x x m v (kg m^2/s) per world."""
    i = wp.tid()
    p = particle_qd[i] * particle_mass[i]
    wp.atomic_add(linear, particle_world[i], p)
    wp.atomic_add(angular, particle_world[i], wp.cross(particle_q[i], p))


@kernel
def weighted_centroid(
    particle_weight: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q: wp.array(dtype=vec3),
    centroid: wp.array(dtype=vec3),
):
    """Accumulate sum_i w_i x_i (m) per world; with weights summing to 1 this is a centroid."""
    i = wp.tid()
    wp.atomic_add(centroid, particle_world[i], particle_q[i] * particle_weight[i])
