"""Particle impacts resolved at their time of impact (symplectic Euler with impact events).

Within the step in which a particle would reach a static shape's surface or another particle,
the straight drift of symplectic Euler is cut at the time of impact t* (exact for two spheres
on straight paths; for a shape, the linear interpolation of its signed distance at both ends
of the step): the velocity the particle has at t* (the step's velocity
less the acceleration of the remaining dt - t*) gets the impact's velocity jump, and the rest
of the drift uses the changed velocity. A contact that begins a little earlier or later then
changes the state only a little, unlike a penalty spring, whose first sample moves with the
step grid.
"""

import warp as wp

from .contact import shape_sdf
from .enums import SHAPE_MESH
from .generic import kernel, set_deterministic, transform, vec3
from .particles import flag_fault, step_velocity

set_deterministic(__name__)


@wp.func
def impact_velocity_jump(v_rel: vec3, n: vec3, restitution: wp.Float, mu: wp.Float, smoothing: wp.Float):
    """Velocity jump (m/s) of an impact with relative velocity v_rel along the unit normal n
    (pointing to the particle): the normal velocity reversed and scaled by the restitution,
    the slip reduced by Coulomb friction (impulse up to mu times the normal one, slip speed
    smoothed below ``smoothing`` m/s)."""
    one = type(mu)(1.0)
    vn = wp.dot(n, v_rel)
    normal_jump = -(one + restitution) * vn
    vt = v_rel - n * vn
    slip = wp.sqrt(wp.dot(vt, vt) + smoothing * smoothing)
    return n * normal_jump - vt * wp.min(one, mu * normal_jump / slip)


@wp.func
def cut_fraction(gap_start: wp.Float, gap_end: wp.Float):
    """Fraction of the step (0..1) at which a gap (m) that is open at its start and closed at
    its end reaches zero, or -1 when the step has no such crossing."""
    zero = gap_start * type(gap_start)(0.0)
    if gap_start >= zero and gap_end < zero:
        return gap_start / (gap_start - gap_end)
    return zero - type(gap_start)(1.0)


@wp.func
def sphere_cut_fraction(d: vec3, drift: vec3, reach: wp.Float):
    """Fraction of the step (0..1) at which two spheres whose centres are ``d`` (m) apart at
    its start, and move apart by ``drift`` (m) over it along straight paths, first come within
    ``reach`` (m, the sum of their radii), or -1 when they do not in this step (or already
    overlap at its start)."""
    zero = reach * type(reach)(0.0)
    none = zero - type(reach)(1.0)
    c = wp.dot(d, d) - reach * reach
    b = wp.dot(d, drift)
    a = wp.dot(drift, drift)
    if c < zero or b >= zero or a <= zero:
        return none
    disc = b * b - a * c
    if disc < zero:
        return none
    frac = c / (-b + wp.sqrt(disc))  # the smaller root of a f^2 + 2 b f + c, without cancellation
    if frac > type(reach)(1.0):
        return none
    return frac


@kernel
def integrate_particles_with_impacts(
    particle_mass: wp.array(dtype=wp.Float),
    particle_radius: wp.array(dtype=wp.Float),
    particle_world: wp.array(dtype=int),
    shape_kind: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_transform: wp.array(dtype=transform),
    shape_size: wp.array(dtype=vec3),
    shape_mu: wp.array(dtype=wp.Float),
    pair_mu: wp.array(dtype=wp.Float),
    impact_restitution: wp.array(dtype=wp.Float),
    gravity: wp.array(dtype=vec3),
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    particle_f_in: wp.array(dtype=vec3),
    neighbor_count_in: wp.array(dtype=int),
    neighbor_index_in: wp.array2d(dtype=int),
    friction_smoothing: wp.Float,
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    particle_q_out: wp.array(dtype=vec3),
    particle_qd_out: wp.array(dtype=vec3),
    world_fault_step_out: wp.array(dtype=int),
):
    """Symplectic Euler (as ``integrate_particles``) with impacts against static shapes of the
    particle's world (not meshes) and, through the neighbour lists, other particles, each cut
    at its time of impact (module docstring). A pair's jump is shared by mass (a fixed
    particle counts as infinitely heavy); every impact of a particle in one step is taken
    from the step's own velocities (Jacobi). Flags faults like ``integrate_particles``."""
    i = wp.tid()
    m = particle_mass[i]
    x = particle_q_in[i]
    r = particle_radius[i]
    world = particle_world[i]
    zero = m * type(m)(0.0)
    e = impact_restitution[0]
    v, a = step_velocity(m, particle_qd_in[i], particle_f_in[i], gravity[0], dt)
    jump = v * zero
    shift = v * zero
    if m > zero:
        x_end = x + v * dt
        for s in range(shape_kind.shape[0]):
            sw = shape_world[s]
            if shape_body[s] < 0 and shape_kind[s] != SHAPE_MESH and (sw == -1 or sw == world):
                X = shape_transform[s]
                q = wp.transform_get_rotation(X)
                origin = wp.transform_get_translation(X)
                gap_start, _n_start = shape_sdf(shape_kind[s], wp.quat_rotate_inv(q, x - origin), shape_size[s])
                gap_end, _n_end = shape_sdf(shape_kind[s], wp.quat_rotate_inv(q, x_end - origin), shape_size[s])
                frac = cut_fraction(gap_start - r, gap_end - r)
                if frac >= zero:
                    rest = dt * (type(m)(1.0) - frac)
                    at = x + v * (dt * frac)
                    _gap_at, n_at = shape_sdf(shape_kind[s], wp.quat_rotate_inv(q, at - origin), shape_size[s])
                    n = wp.quat_rotate(q, n_at)
                    v_impact = v - a * rest
                    if wp.dot(n, v_impact) < zero:
                        dv = impact_velocity_jump(v_impact, n, e, shape_mu[s], friction_smoothing)
                        jump = jump + dv
                        shift = shift + dv * rest
        pairs = int(0)
        if neighbor_index_in.shape[1] > 0:
            pairs = neighbor_count_in[i]
        for k in range(pairs):
            j = neighbor_index_in[i, k]
            mj = particle_mass[j]
            vj, aj = step_velocity(mj, particle_qd_in[j], particle_f_in[j], gravity[0], dt)
            apart = x - particle_q_in[j]
            frac = sphere_cut_fraction(apart, (v - vj) * dt, r + particle_radius[j])
            if frac >= zero:
                rest = dt * (type(m)(1.0) - frac)
                d = apart + (v - vj) * (dt * frac)
                dist = wp.length(d)
                if dist > zero:
                    n = d / dist
                    v_impact = (v - a * rest) - (vj - aj * rest)
                    if wp.dot(n, v_impact) < zero:
                        share = type(m)(1.0)
                        if mj > zero:
                            share = mj / (m + mj)
                        dv = impact_velocity_jump(v_impact, n, e, pair_mu[0], friction_smoothing) * share
                        jump = jump + dv
                        shift = shift + dv * rest
        x = x_end + shift
        v = v + jump
    particle_q_out[i] = x
    particle_qd_out[i] = v
    flag_fault(x, v, world, step, max_coordinate, max_speed, world_fault_step_out)
