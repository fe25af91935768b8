"""Ray casting of a scene for headless images: one thread per pixel traces a camera ray
against the analytic shapes (planes with a checker, spheres, boxes, capsules), a triangle
mesh (``wp.Mesh``: cloth, soft-body surfaces, mesh shapes) and a set of spheres held in a
``wp.Bvh`` (free particles), and marker spheres drawn over everything; the nearest hit is shaded with a directional light, an ambient
term and a shadow ray towards the light.

Shapes use the narrow phase's conventions (``rigid_contact``): a plane's normal is its
local z, a box has half extents, a capsule has radius and half height along its local z.
"""

import warp as wp

from .enums import SHAPE_BOX, SHAPE_CAPSULE, SHAPE_PLANE, SHAPE_SPHERE

MISS = 1.0e30
"""Ray parameter of no hit."""


@wp.func
def ray_sphere(origin: wp.vec3, direction: wp.vec3, centre: wp.vec3, radius: float):
    """Nearest t > 0 where origin + t direction (unit) meets the sphere, else MISS."""
    oc = origin - centre
    b = wp.dot(oc, direction)
    c = wp.dot(oc, oc) - radius * radius
    disc = b * b - c
    t = float(MISS)
    if disc >= 0.0:
        root = wp.sqrt(disc)
        near = -b - root
        far = -b + root
        if near > 1.0e-6:
            t = near
        elif far > 1.0e-6:
            t = far
    return t


@wp.func
def ray_box(origin: wp.vec3, direction: wp.vec3, half: wp.vec3):
    """(t, local normal) of the nearest hit of a local-frame ray with the box |x_i| <= half_i."""
    t_near = float(-MISS)
    t_far = float(MISS)
    normal = wp.vec3(0.0)
    for axis in range(3):
        d = direction[axis]
        o = origin[axis]
        if wp.abs(d) < 1.0e-12:
            if wp.abs(o) > half[axis]:
                t_far = float(-1.0)
        else:
            t1 = (-half[axis] - o) / d
            t2 = (half[axis] - o) / d
            sign = float(-1.0)
            if t1 > t2:
                tmp = t1
                t1 = t2
                t2 = tmp
                sign = 1.0
            if t1 > t_near:
                t_near = t1
                normal = wp.vec3(0.0)
                normal[axis] = sign
            t_far = wp.min(t_far, t2)
    t = float(MISS)
    if t_near <= t_far and t_far > 1.0e-6:
        if t_near > 1.0e-6:
            t = t_near
    return t, normal


@wp.func
def ray_capsule(origin: wp.vec3, direction: wp.vec3, radius: float, half_height: float):
    """(t, local normal) of the nearest hit of a local-frame ray with the capsule around the
    segment z in [-half_height, half_height]."""
    t = float(MISS)
    normal = wp.vec3(0.0)
    # the cylinder
    a = direction[0] * direction[0] + direction[1] * direction[1]
    if a > 1.0e-12:
        b = origin[0] * direction[0] + origin[1] * direction[1]
        c = origin[0] * origin[0] + origin[1] * origin[1] - radius * radius
        disc = b * b - a * c
        if disc >= 0.0:
            tc = (-b - wp.sqrt(disc)) / a
            z = origin[2] + tc * direction[2]
            if tc > 1.0e-6 and wp.abs(z) <= half_height:
                t = tc
                p = origin + tc * direction
                normal = wp.normalize(wp.vec3(p[0], p[1], 0.0))
    # the end caps
    for end in range(2):
        centre = wp.vec3(0.0, 0.0, half_height * float(2 * end - 1))
        ts = ray_sphere(origin, direction, centre, radius)
        if ts < t:
            t = ts
            normal = wp.normalize(origin + ts * direction - centre)
    return t, normal


@wp.func
def checker(point: wp.vec3, pose: wp.transform, cell: float, distance: float, pixel_angle: float):
    """The grey of a plane's checker square at a world point seen from ``distance``: 0.8 or
    0.6, fading to their mean where a square spans less than about 4 pixels (no moire)."""
    local = wp.transform_point(wp.transform_inverse(pose), point)
    parity = (int(wp.floor(local[0] / cell)) + int(wp.floor(local[1] / cell))) % 2
    grey = 0.6
    if parity == 0:
        grey = 0.8
    pixels = cell / (distance * pixel_angle)
    fade = wp.clamp((8.0 - pixels) / 4.0, 0.0, 1.0)
    return grey + (0.7 - grey) * fade


@wp.func
def nearest_sphere(origin: wp.vec3, direction: wp.vec3, bvh: wp.uint64, centre_in: wp.array(dtype=wp.vec3),
                   radius_in: wp.array(dtype=float), max_t: float):
    """(t, index) of the nearest sphere of ``bvh`` hit before max_t (index -1 for none)."""
    best = max_t
    found = int(-1)
    query = wp.bvh_query_ray(bvh, origin, direction)
    index = int(0)
    while wp.bvh_query_next(query, index, best):
        t = ray_sphere(origin, direction, centre_in[index], radius_in[index])
        if t < best:
            best = t
            found = index
    return best, found


@wp.struct
class Scene:
    """What a ray can hit: analytic shapes (kind, world pose, size, colour per shape), spheres
    (centre, radius, colour; ``spheres`` their BVH id, 0 for none), a triangle mesh (id, 0
    for none; one colour per face), marker spheres drawn over everything (``markers`` their
    BVH id), and the plane checker's square size (m)."""

    shape_kind: wp.array(dtype=int)
    shape_pose: wp.array(dtype=wp.transform)
    shape_size: wp.array(dtype=wp.vec3)
    shape_color: wp.array(dtype=wp.vec3)
    sphere_centre: wp.array(dtype=wp.vec3)
    sphere_radius: wp.array(dtype=float)
    sphere_color: wp.array(dtype=wp.vec3)
    spheres: wp.uint64
    mesh: wp.uint64
    face_color: wp.array(dtype=wp.vec3)
    marker_centre: wp.array(dtype=wp.vec3)
    marker_radius: wp.array(dtype=float)
    marker_color: wp.array(dtype=wp.vec3)
    markers: wp.uint64
    checker_cell: float


@wp.func
def trace(origin: wp.vec3, direction: wp.vec3, scene: Scene, pixel_angle: float):
    """(t, world normal facing the ray, colour) of the nearest hit in ``scene`` (markers
    aside), t = MISS for none; ``pixel_angle`` (rad) fades the checker far away."""
    best = float(MISS)
    normal = wp.vec3(0.0)
    color = wp.vec3(0.0)
    for s in range(scene.shape_kind.shape[0]):
        kind = scene.shape_kind[s]
        pose = scene.shape_pose[s]
        size = scene.shape_size[s]
        inverse = wp.transform_inverse(pose)
        o = wp.transform_point(inverse, origin)
        d = wp.transform_vector(inverse, direction)
        t = float(MISS)
        n = wp.vec3(0.0)
        if kind == SHAPE_PLANE:
            if wp.abs(d[2]) > 1.0e-12:
                tp = -o[2] / d[2]
                if tp > 1.0e-6:
                    t = tp
                    n = wp.vec3(0.0, 0.0, 1.0)
        elif kind == SHAPE_SPHERE:
            t = ray_sphere(o, d, wp.vec3(0.0), size[0])
            if t < float(MISS):
                n = wp.normalize(o + t * d)
        elif kind == SHAPE_BOX:
            t, n = ray_box(o, d, size)
        elif kind == SHAPE_CAPSULE:
            t, n = ray_capsule(o, d, size[0], size[1])
        if t < best:
            best = t
            normal = wp.transform_vector(pose, n)
            color = scene.shape_color[s]
            if kind == SHAPE_PLANE:
                color = color * checker(origin + t * direction, pose, scene.checker_cell, t, pixel_angle)
    if scene.mesh != wp.uint64(0):
        hit = wp.mesh_query_ray(scene.mesh, origin, direction, best)
        if hit.result:
            best = hit.t
            normal = wp.normalize(hit.normal)
            color = scene.face_color[hit.face]
    if scene.spheres != wp.uint64(0):
        ts, index = nearest_sphere(origin, direction, scene.spheres, scene.sphere_centre, scene.sphere_radius, best)
        if index >= 0:
            best = ts
            normal = wp.normalize(origin + ts * direction - scene.sphere_centre[index])
            color = scene.sphere_color[index]
    if wp.dot(normal, direction) > 0.0:
        normal = -normal
    return best, normal, color


@wp.kernel(enable_backward=False)
def render_pixels(
    scene: Scene,
    eye: wp.vec3,
    forward: wp.vec3,
    right: wp.vec3,
    up: wp.vec3,
    tan_half_fov: float,
    width: int,
    height: int,
    light: wp.vec3,
    background: wp.vec3,
    image_out: wp.array2d(dtype=wp.vec3),
):
    """One thread per pixel (row, column) of a pinhole camera at ``eye`` (vertical field of
    view 2 atan(tan_half_fov), square pixels): the shaded colour (RGB in [0, 1]) of the
    nearest hit, lit by the unit direction towards the light with ambient 0.4 and a shadow
    ray; ``background`` where the ray hits nothing. Marker spheres are drawn over
    everything, so points inside a body stay visible."""
    row, column = wp.tid()
    aspect = float(width) / float(height)
    x = (2.0 * (float(column) + 0.5) / float(width) - 1.0) * tan_half_fov * aspect
    y = (1.0 - 2.0 * (float(row) + 0.5) / float(height)) * tan_half_fov
    direction = wp.normalize(forward + x * right + y * up)
    if scene.markers != wp.uint64(0):
        tm, index = nearest_sphere(eye, direction, scene.markers, scene.marker_centre, scene.marker_radius,
                                   float(MISS))
        if index >= 0:
            n = wp.normalize(eye + tm * direction - scene.marker_centre[index])
            image_out[row, column] = scene.marker_color[index] * (0.5 + 0.5 * wp.max(wp.dot(n, light), 0.0))
            return
    pixel_angle = 2.0 * tan_half_fov / float(height)
    t, normal, color = trace(eye, direction, scene, pixel_angle)
    if t >= float(MISS):
        image_out[row, column] = background
        return
    point = eye + t * direction + 1.0e-4 * normal
    lit = wp.max(wp.dot(normal, light), 0.0)
    if lit > 0.0:
        shadow, n2, c2 = trace(point, light, scene, pixel_angle)
        if shadow < float(MISS):
            lit = 0.0
    image_out[row, column] = color * (0.4 + 0.6 * lit)
