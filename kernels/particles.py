"""Per-particle forces (drag, external force, contact) and symplectic Euler integration."""

import warp as wp

from .articulation import spatial, vec6
from .contact import compliant_contact_force, gradient_reach, shape_sdf
from .enums import SHAPE_MESH
from .generic import kernel, set_deterministic, transform, vec3
from .rigid_contact import point_velocity

set_deterministic(__name__)


@wp.func
def particle_shape_contacts(
    x: vec3,
    v: vec3,
    radius: wp.Float,
    world: int,
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_ke: wp.array(dtype=wp.Float),
    shape_kd: wp.array(dtype=wp.Float),
    shape_mu: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    gradient_width: wp.Float,
    dt_over_mass: wp.Float,
    body_q: wp.array(dtype=transform),
    body_qd: wp.array(dtype=vec6),
    body_origin: wp.array(dtype=vec3),
    body_f: wp.array(dtype=vec6),
):
    """Sum of contact forces (N) of the shapes of the particle's world on one particle. A
    shape on a rigid body moves with it (body_q, body_qd) and receives the reaction wrench
    (added into body_f, about the body's articulation origin) at the contact point. Mesh shapes are
    skipped (they have no signed distance here). With ``gradient_width`` w > 0 (m) shapes up
    to 6 w away are evaluated too (zero force, smoothed gradient; see ``compliant_contact_force``)."""
    f = v * type(radius)(0.0)
    reach = -gradient_reach(gradient_width)
    for s in range(shape_kind.shape[0]):
        sw = shape_world[s]
        if (sw == -1 or sw == world) and shape_kind[s] != SHAPE_MESH:
            b = shape_body[s]
            X = shape_transform[s]
            if b >= 0:
                X = body_q[b] * X
            q = wp.transform_get_rotation(X)
            p_local = wp.quat_rotate_inv(q, x - wp.transform_get_translation(X))
            dist, n_local = shape_sdf(shape_kind[s], p_local, shape_size[s])
            pen = radius - dist
            if pen > reach:
                n = wp.quat_rotate(q, n_local)
                at = x - n * radius
                contact = compliant_contact_force(
                    pen, n, v - point_velocity(b, at, body_q, body_qd), shape_ke[s], shape_kd[s], damping_depth,
                    shape_mu[s], friction_smoothing, dt_over_mass, gradient_width,
                )
                f = f + contact
                if b >= 0:
                    wp.atomic_sub(body_f, b, spatial(wp.cross(at - body_origin[b], contact), contact))
    return f


@wp.func
def dt_over_mass(dt: wp.Float, mass: wp.Float):
    """dt / m (s/kg), or 0 for a fixed particle (m = 0)."""
    if mass > type(mass)(0.0):
        return dt / mass
    return mass * type(mass)(0.0)


@kernel
def eval_particle_forces(
    particle_mass: wp.array(dtype=wp.Float),
    particle_radius: wp.array(dtype=wp.Float),
    particle_drag: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_ke: wp.array(dtype=wp.Float),
    shape_kd: wp.array(dtype=wp.Float),
    shape_mu: wp.array(dtype=wp.Float),
    pair_ke: wp.array(dtype=wp.Float),
    pair_kd: wp.array(dtype=wp.Float),
    pair_mu: wp.array(dtype=wp.Float),
    body_origin: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    neighbor_count_in: wp.array(dtype=int),
    neighbor_index_in: wp.array2d(dtype=int),
    body_q_in: wp.array(dtype=transform),
    body_qd_in: wp.array(dtype=vec6),
    particle_f_ext: wp.array(dtype=vec3),
    friction_smoothing: wp.Float,
    damping_depth: wp.Float,
    gradient_width: wp.Float,
    dt: wp.Float,
    particle_f_out: wp.array(dtype=vec3),
    body_f_out: wp.array(dtype=vec6),
):
    """Write each particle's drag, external and contact force (N) into particle_f_out; add the
    reactions of contacts with body shapes into body_f_out.

    One thread per particle gathers its shape contacts and its particle-pair contacts from
    the neighbour list, so particle forces need no atomics. This launch initialises
    particle_f_out; the element kernels of the same step accumulate into it afterwards.
    ``dt`` (s) bounds the friction slope for stability (see ``compliant_contact_force``);
    ``damping_depth`` (m) ramps the contact damping in (``onset_damping``); ``gradient_width``
    (m) > 0 smooths the contact gradient.
    """
    i = wp.tid()
    x = particle_q_in[i]
    v = particle_qd_in[i]
    r = particle_radius[i]
    own_rate = dt_over_mass(dt, particle_mass[i])
    zero = r * type(r)(0.0)
    f = particle_f_ext[i] - v * particle_drag[i]
    f = f + particle_shape_contacts(
        x, v, r, particle_world[i], shape_kind, shape_body, shape_world, shape_transform, shape_size,
        shape_ke, shape_kd, shape_mu, friction_smoothing, damping_depth, gradient_width, own_rate, body_q_in,
        body_qd_in, body_origin, body_f_out,
    )
    reach = -gradient_reach(gradient_width)
    if neighbor_index_in.shape[1] > 0:
        for k in range(neighbor_count_in[i]):
            j = neighbor_index_in[i, k]
            d = x - particle_q_in[j]
            dist = wp.length(d)
            pen = r + particle_radius[j] - dist
            if pen > reach and dist > zero:
                # relative motion is resisted by the pair's combined inverse mass
                rate = own_rate + dt_over_mass(dt, particle_mass[j])
                f = f + compliant_contact_force(
                    pen, d / dist, v - particle_qd_in[j], pair_ke[0], pair_kd[0], damping_depth, pair_mu[0],
                    friction_smoothing, rate, gradient_width,
                )
    particle_f_out[i] = f


@wp.func
def flag_fault(x: vec3, v: vec3, world: int, step: int, max_coordinate: wp.Float, max_speed: wp.Float,
               world_fault_step: wp.array(dtype=int)):
    """Record ``step`` as the world's earliest fault when a particle's new position x (m) or
    velocity v (m/s) is non-finite or beyond max_coordinate / max_speed."""
    # NaN compares false, so finiteness is tested explicitly
    if not (wp.isfinite(x) and wp.isfinite(v)) or wp.length(x) > max_coordinate or wp.length(v) > max_speed:
        wp.atomic_min(world_fault_step, world, step)


@wp.func
def step_velocity(mass: wp.Float, v: vec3, f: vec3, g: vec3, dt: wp.Float):
    """The step's velocity v + dt (f / m + g) (m/s) and acceleration (m/s^2); zero for a fixed particle."""
    zero = mass * type(mass)(0.0)
    if mass > zero:
        a = f / mass + g
        return v + a * dt, a
    return v * zero, v * zero


@kernel
def integrate_particles(
    particle_mass: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    gravity: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    particle_f_in: wp.array(dtype=vec3),
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    particle_q_out: wp.array(dtype=vec3),
    particle_qd_out: wp.array(dtype=vec3),
    world_fault_step_out: wp.array(dtype=int),
):
    """Symplectic Euler: v' = v + dt (f/m + g), x' = x + dt v'; fixed particles (m = 0) stay.

    Flags the particle's world in world_fault_step_out (earliest step index) when the new
    state is non-finite or exceeds max_coordinate (m) / max_speed (m/s).
    """
    i = wp.tid()
    x = particle_q_in[i]
    v, _acceleration = step_velocity(particle_mass[i], particle_qd_in[i], particle_f_in[i], gravity[0], dt)
    x = x + v * dt
    particle_q_out[i] = x
    particle_qd_out[i] = v
    flag_fault(x, v, particle_world[i], step, max_coordinate, max_speed, world_fault_step_out)


@kernel(enable_backward=False)
def build_neighbor_lists(
    particle_radius: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    grid: wp.uint64,
    query_radius: wp.Float,
    margin: wp.Float,
    neighbor_count_out: wp.array(dtype=int),
    neighbor_index_out: wp.array2d(dtype=int),
    overflow_out: wp.array(dtype=int),
):
    """Broad phase (not differentiated): list the same-world particles within ``margin`` (m)
    of touching particle i, in increasing index order (the first K found when more are near)."""
    i = wp.tid()
    x = particle_q_in[i]
    r = particle_radius[i]
    world = particle_world[i]
    capacity = neighbor_index_out.shape[1]
    count = int(0)
    query = wp.hash_grid_query(grid, x, query_radius)
    j = int(0)
    while wp.hash_grid_query_next(query, j):
        if j != i and particle_world[j] == world:
            if wp.length(x - particle_q_in[j]) < r + particle_radius[j] + margin:
                if count < capacity:
                    slot = count
                    while slot > 0 and neighbor_index_out[i, slot - 1] > j:
                        neighbor_index_out[i, slot] = neighbor_index_out[i, slot - 1]
                        slot -= 1
                    neighbor_index_out[i, slot] = j
                    count += 1
                else:
                    wp.atomic_max(overflow_out, 0, i + 1)
    neighbor_count_out[i] = count


@kernel(enable_backward=False)
def flag_moved_particles(
    particle_anchor_in: wp.array(dtype=int),
    particle_q_in: wp.array(dtype=vec3),
    reference_q_in: wp.array(dtype=vec3),
    distance: wp.Float,
    moved_out: wp.array(dtype=int),
):
    """Set moved_out[0] to 1 when a particle's displacement from its reference position, relative to
    that of its anchor particle, is longer than ``distance`` (m) or not finite."""
    i = wp.tid()
    a = particle_anchor_in[i]
    moved = (particle_q_in[i] - reference_q_in[i]) - (particle_q_in[a] - reference_q_in[a])
    if not (wp.length(moved) <= distance):
        moved_out[0] = 1


@kernel(enable_backward=False)
def add_force_rows(share_f_out: wp.array2d(dtype=vec3), particle_f_out: wp.array(dtype=vec3)):
    """Add each row of ``share_f_out`` (K, P) (N; the element forces of one thread's share) into
    particle_f_out (P,), in row order, and zero the rows for the next step (unrecorded steps only)."""
    i = wp.tid()
    f = particle_f_out[i]
    zero = type(f[0])(0.0)
    for k in range(share_f_out.shape[0]):
        f = f + share_f_out[k, i]
        share_f_out[k, i] = wp.vector(zero, zero, zero)
    particle_f_out[i] = f
