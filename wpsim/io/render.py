"""Headless pictures of a rollout: shaded images from a Warp ray caster (``kernels.render``)
on the CPU or a GPU, no GL needed; GIF, PNG frames, an image strip, or MP4 when
``imageio-ffmpeg`` is installed.

``SceneRenderer(model)`` gathers what a state shows once: collision shapes (planes with a
checker, spheres, boxes, capsules, meshes), cloth triangles and soft-body surfaces as one
triangle mesh, and free particles as spheres. ``render(state)`` places them (body poses from
the joint coordinates) and returns an (H, W, 3) uint8 image. The default camera
(``frame_camera``) looks down at the scene's bounding box from a diagonal so that all of it
is in view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.core.geometry import boundary_faces, quat_to_matrix, transform_multiply
from wpsim.kernels import render as kernels
from wpsim.kernels.enums import SHAPE_CAPSULE, SHAPE_MESH, SHAPE_PLANE, SHAPE_SPHERE

PALETTE = np.array([(0.85, 0.33, 0.25), (0.25, 0.55, 0.85), (0.95, 0.7, 0.2), (0.4, 0.7, 0.35), (0.6, 0.4, 0.75),
                    (0.3, 0.75, 0.75)])
"""Colours of bodies, in turn (RGB in [0, 1])."""
SOFT_COLOR, CLOTH_COLOR, PARTICLE_COLOR, GROUND_COLOR = (0.9, 0.5, 0.35), (0.35, 0.6, 0.9), (0.3, 0.7, 0.45), (1, 1, 1)
"""Colours of soft-body surfaces, cloth, free particles and planes (times their checker)."""
BACKGROUND = (0.93, 0.95, 0.98)
VIDEO_SUFFIXES = (".gif", ".mp4")


@dataclass
class Camera:
    """A pinhole camera: ``eye`` looking at ``target`` (m), ``up`` the world's up direction,
    ``fov_deg`` the vertical field of view, ``width`` x ``height`` pixels."""

    eye: tuple
    target: tuple
    up: tuple = (0.0, 0.0, 1.0)
    fov_deg: float = 40.0
    width: int = 640
    height: int = 480

    def basis(self) -> tuple:
        """(forward, right, up) unit vectors of the image plane."""
        forward = np.asarray(self.target, np.float64) - np.asarray(self.eye, np.float64)
        if not np.linalg.norm(forward) > 0.0:
            raise ValueError("camera eye and target coincide")
        forward /= np.linalg.norm(forward)
        right = np.cross(forward, np.asarray(self.up, np.float64))
        if np.linalg.norm(right) < 1e-9:  # looking along up: any right will do
            right = np.cross(forward, np.roll(np.asarray(self.up, np.float64), 1))
        right /= np.linalg.norm(right)
        return forward, right, np.cross(right, forward)

    def project(self, point) -> np.ndarray:
        """(column, row) pixel coordinates (continuous; pixel centres at +0.5) of a world point."""
        forward, right, up = self.basis()
        rel = np.asarray(point, np.float64) - np.asarray(self.eye, np.float64)
        depth = rel @ forward
        tan_half = math.tan(math.radians(self.fov_deg) / 2.0)
        x = (rel @ right) / depth / (tan_half * self.width / self.height)
        y = (rel @ up) / depth / tan_half
        return np.array([(x + 1.0) * self.width / 2.0, (1.0 - y) * self.height / 2.0])


def frame_camera(lower, upper, up_axis: int = 2, width: int = 640, height: int = 480, fov_deg: float = 40.0,
                 view=(1.0, -1.6, 0.9)) -> Camera:
    """A camera that sees the box [lower, upper] (m) whole, from the direction ``view``
    (in the frame x, y, up) towards its centre."""
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    centre, radius = 0.5 * (lower + upper), max(0.5 * np.linalg.norm(upper - lower), 1e-3)
    up = np.zeros(3)
    up[up_axis] = 1.0
    axes = [a for a in range(3) if a != up_axis]
    direction = np.zeros(3)
    direction[axes[0]], direction[axes[1]], direction[up_axis] = view
    direction /= np.linalg.norm(direction)
    half = math.radians(fov_deg) / 2.0
    narrow = min(half, math.atan(math.tan(half) * width / height))
    distance = radius / math.sin(narrow) * 1.05
    return Camera(tuple(centre + distance * direction), tuple(centre), tuple(up), fov_deg, int(width), int(height))


@dataclass
class Frame:
    """What one picture shows, in world coordinates (m) and RGB colours in [0, 1].

    shape_kind (S,): ``SHAPE_PLANE``, ``SHAPE_SPHERE``, ``SHAPE_BOX`` or ``SHAPE_CAPSULE``;
    shape_pose (S, 7): position, quaternion x, y, z, w; shape_size (S, 3): sphere (r, -, -),
    box half extents, capsule (r, half height along local z, -); shape_color (S, 3);
    points (P, 3) and faces (F, 3): one triangle mesh, face_color (F, 3); sphere_centre
    (N, 3), sphere_radius (N,), sphere_color (N, 3).
    """

    shape_kind: np.ndarray
    shape_pose: np.ndarray
    shape_size: np.ndarray
    shape_color: np.ndarray
    points: np.ndarray
    faces: np.ndarray
    face_color: np.ndarray
    sphere_centre: np.ndarray
    sphere_radius: np.ndarray
    sphere_color: np.ndarray

    def bounds(self) -> tuple:
        """(lower, upper) corners (m) of everything but the planes ((-1, 1) cube if empty)."""
        corners = [self.points] if len(self.points) else []
        if len(self.sphere_centre):
            corners += [self.sphere_centre - self.sphere_radius[:, None], self.sphere_centre + self.sphere_radius[:, None]]
        for kind, pose, size in zip(self.shape_kind, self.shape_pose, self.shape_size):
            if kind != SHAPE_PLANE:
                reach = {SHAPE_SPHERE: size[0], SHAPE_CAPSULE: size[0] + size[1]}.get(int(kind), np.linalg.norm(size))
                corners.append(pose[:3] + np.array([[-reach] * 3, [reach] * 3]))
        if not corners:
            return np.full(3, -1.0), np.full(3, 1.0)
        stacked = np.concatenate(corners)
        return stacked.min(axis=0), stacked.max(axis=0)


def _sphere_rows(markers: dict) -> tuple:
    """(centres (N, 3), radii (N,), colours (N, 3)) of marker sets name -> (points (N, 3) m,
    RGB colour, radius m)."""
    centres, radii, colors = [np.zeros((0, 3))], [np.zeros(0)], [np.zeros((0, 3))]
    for name, (points, color, radius) in markers.items():
        points = np.asarray(points, np.float64).reshape(-1, 3)
        if not np.isfinite(points).all() or not radius > 0.0:
            raise ValueError(f"marker set {name!r}: positions must be finite and the radius > 0 m")
        centres.append(points)
        radii.append(np.full(len(points), radius))
        colors.append(np.tile(color, (len(points), 1)))
    return np.concatenate(centres), np.concatenate(radii), np.concatenate(colors)


class Painter:
    """Draws ``Frame``s on ``device`` with the ray caster; keeps the triangle mesh between
    frames of one topology (refitted, not rebuilt)."""

    def __init__(self, device=None):
        self.device = wp.get_device(device)
        self._mesh, self._faces, self._bvhs = None, None, []

    def draw(self, frame: Frame, camera: Camera, markers: dict | None = None) -> np.ndarray:
        """(camera.height, camera.width, 3) uint8 image of ``frame``, with ``markers``: name ->
        (points (N, 3) m, RGB colour in [0, 1], radius m) drawn as spheres over everything."""
        vec3 = lambda values: wp.array(np.asarray(values, np.float32).reshape(-1, 3), dtype=wp.vec3,  # noqa: E731
                                       device=self.device)
        self._bvhs = []  # the sphere BVHs live until the next draw
        scene = kernels.Scene()
        scene.shape_kind = wp.array(np.asarray(frame.shape_kind, np.int32), dtype=int, device=self.device)
        scene.shape_pose = wp.array(np.asarray(frame.shape_pose, np.float32).reshape(-1, 7), dtype=wp.transform,
                                    device=self.device)
        scene.shape_size, scene.shape_color = vec3(frame.shape_size), vec3(frame.shape_color)
        scene.mesh, scene.face_color = self._mesh_id(frame), vec3(frame.face_color)
        spheres = (frame.sphere_centre, frame.sphere_radius, frame.sphere_color)
        (scene.sphere_centre, scene.sphere_radius, scene.sphere_color, scene.spheres) = self._sphere_set(*spheres)
        (scene.marker_centre, scene.marker_radius, scene.marker_color,
         scene.markers) = self._sphere_set(*_sphere_rows(markers or {}))
        lower, upper = frame.bounds()
        scene.checker_cell = float(max(np.max(upper - lower), 0.05)) / 2.0
        forward, right, up = camera.basis()
        light = np.asarray(camera.up, np.float64) * 2.0 + right * 0.6 - forward * 0.5
        image = wp.zeros((camera.height, camera.width), dtype=wp.vec3, device=self.device)
        wp.launch(kernels.render_pixels, dim=(camera.height, camera.width), device=self.device,
                  inputs=[scene, wp.vec3(*camera.eye), wp.vec3(*forward), wp.vec3(*right), wp.vec3(*up),
                          math.tan(math.radians(camera.fov_deg) / 2.0), camera.width, camera.height,
                          wp.vec3(*(light / np.linalg.norm(light))), wp.vec3(*BACKGROUND)],
                  outputs=[image])
        return (np.clip(image.numpy(), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

    def _mesh_id(self, frame: Frame) -> wp.uint64:
        """The id of the frame's triangle mesh (0 without triangles)."""
        if len(frame.faces) == 0:
            return wp.uint64(0)
        points = wp.array(np.asarray(frame.points, np.float32), dtype=wp.vec3, device=self.device)
        faces = np.asarray(frame.faces, np.int32)
        if self._mesh is None or not np.array_equal(self._faces, faces):
            self._faces = faces
            self._mesh = wp.Mesh(points=points, indices=wp.array(faces.ravel(), dtype=int, device=self.device))
        else:
            self._mesh.points.assign(points)
            self._mesh.refit()
        return wp.uint64(self._mesh.id)

    def _sphere_set(self, centres, radii, colors) -> tuple:
        """(centres, radii, colours, BVH id or 0) on the device."""
        centres = np.asarray(centres, np.float32).reshape(-1, 3)
        radii = np.asarray(radii, np.float32).reshape(-1)
        arrays = (wp.array(centres, dtype=wp.vec3, device=self.device), wp.array(radii, dtype=float, device=self.device),
                  wp.array(np.asarray(colors, np.float32).reshape(-1, 3), dtype=wp.vec3, device=self.device))
        if len(centres) == 0:
            return (*arrays, wp.uint64(0))
        bvh = wp.Bvh(wp.array(centres - radii[:, None], dtype=wp.vec3, device=self.device),
                     wp.array(centres + radii[:, None], dtype=wp.vec3, device=self.device))
        self._bvhs.append(bvh)
        return (*arrays, wp.uint64(bvh.id))


class SceneRenderer:
    """Images of the states of ``model`` (see the module docstring), ``width`` x ``height``
    pixels, or the size of ``camera`` when one is given; ``camera`` None frames each
    ``render`` call's scene, or use ``frame(states)`` once for a steady view."""

    def __init__(self, model, width: int = 640, height: int = 480, camera: Camera | None = None):
        if camera is not None:
            width, height = camera.width, camera.height
        if width < 1 or height < 1:
            raise ValueError(f"image size must be at least 1 x 1 pixels, got {width} x {height}")
        self.model, self.width, self.height, self.camera = model, int(width), int(height), camera
        self.painter = Painter(model.device)
        kinds, bodies = model.shape_kind.numpy(), model.shape_body.numpy()
        self._shape_rows = np.flatnonzero(kinds != SHAPE_MESH)
        self._shape_color = np.array([GROUND_COLOR if kinds[s] == SHAPE_PLANE else PALETTE[max(bodies[s], 0) % len(PALETTE)]
                                      for s in self._shape_rows], dtype=np.float64).reshape(-1, 3)
        self._surfaces()

    def _surfaces(self):
        """The triangle soup (particle surfaces, then mesh shapes in their shape frames) and
        the free particles."""
        m = self.model
        tris = m.tri_indices.numpy().reshape(-1, 3)
        tets = m.tet_indices.numpy().reshape(-1, 4)
        edge_nodes = m.tet_edge_indices.numpy().reshape(-1, 6)
        soft = boundary_faces(tets, edge_nodes) if len(tets) else np.zeros((0, 3), np.int64)
        faces = [tris, soft]
        colors = [np.tile(CLOTH_COLOR, (len(tris), 1)), np.tile(SOFT_COLOR, (len(soft), 1))]
        in_surface = np.zeros(m.particle_count, bool)
        in_surface[tris.ravel()] = True
        in_surface[tets.ravel()] = True
        in_surface[edge_nodes[edge_nodes >= 0]] = True
        self._free = np.flatnonzero(~in_surface)
        self._mesh_shapes = []  # (shape, first point in the soup, local vertices)
        start = m.particle_count
        bodies = m.shape_body.numpy()
        for shape, (vertices, mesh_faces) in sorted(m.shape_meshes.items()):
            self._mesh_shapes.append((shape, start, np.asarray(vertices, np.float64)))
            faces.append(np.asarray(mesh_faces) + start)
            colors.append(np.tile(PALETTE[max(bodies[shape], 0) % len(PALETTE)], (len(mesh_faces), 1)))
            start += len(vertices)
        self._visual_meshes = []  # (body, pose in its frame, first point in the soup, local vertices)
        for body, pose, vertices, mesh_faces in m.visual_meshes:
            self._visual_meshes.append((body, pose, start, np.asarray(vertices, np.float64)))
            faces.append(np.asarray(mesh_faces) + start)
            colors.append(np.tile(PALETTE[max(body, 0) % len(PALETTE)], (len(mesh_faces), 1)))
            start += len(vertices)
        self._soup_points = start
        self._faces = np.concatenate(faces).astype(np.int64).reshape(-1, 3)
        self._face_color = np.concatenate(colors).reshape(-1, 3)

    def _body_poses(self, state) -> np.ndarray:
        """(B, 7) world poses of the bodies of ``state`` (from its joint coordinates)."""
        from wpsim.solvers.kinematics import eval_fk

        return eval_fk(self.model, state).body_q.numpy().astype(np.float64).reshape(-1, 7)

    def _poses(self, state) -> np.ndarray:
        """(C, 7) world poses of every shape (static ones as given)."""
        m = self.model
        local = m.shape_transform.numpy().astype(np.float64).reshape(-1, 7)
        if m.body_count == 0:
            return local
        body_q = self._body_poses(state)
        bodies = m.shape_body.numpy()
        return np.array([transform_multiply(body_q[b], x) if b >= 0 else x for b, x in zip(bodies, local)])

    def frame_of(self, state) -> Frame:
        """The ``Frame`` ``state`` shows (body poses from its joint coordinates)."""
        m = self.model
        poses = self._poses(state)
        particles = state.particle_q.numpy().astype(np.float64).reshape(-1, 3)
        points = np.empty((self._soup_points, 3))
        points[: m.particle_count] = particles
        for shape, start, vertices in self._mesh_shapes:
            pose = poses[shape]
            points[start:start + len(vertices)] = vertices @ quat_to_matrix(pose[3:]).T + pose[:3]
        body_q = self._body_poses(state) if self._visual_meshes else None
        for body, local, start, vertices in self._visual_meshes:
            pose = transform_multiply(body_q[body], local) if body >= 0 else local
            points[start:start + len(vertices)] = vertices @ quat_to_matrix(pose[3:]).T + pose[:3]
        return Frame(m.shape_kind.numpy()[self._shape_rows], poses[self._shape_rows],
                     m.shape_size.numpy().astype(np.float64)[self._shape_rows], self._shape_color, points, self._faces,
                     self._face_color, particles[self._free], m.particle_radius.numpy().astype(np.float64)[self._free],
                     np.tile(PARTICLE_COLOR, (self._free.size, 1)))

    def bounds(self, state) -> tuple:
        """(lower, upper) corners (m) of what ``state`` shows, planes left out."""
        return self.frame_of(state).bounds()

    def frame(self, states) -> Camera:
        """Fix the camera to one that sees every state of ``states`` whole."""
        self.camera = camera_for([self.frame_of(state) for state in states], self.model.up_axis, self.width,
                                 self.height)
        return self.camera

    def render(self, state, markers: dict | None = None) -> np.ndarray:
        """(height, width, 3) uint8 image of ``state``, with ``markers``: name -> (points
        (N, 3) m, RGB colour in [0, 1], radius m) drawn as spheres over everything."""
        frame = self.frame_of(state)
        camera = self.camera or camera_for([frame], self.model.up_axis, self.width, self.height)
        return self.painter.draw(frame, camera, markers)


def camera_for(frames, up_axis: int, width: int, height: int) -> Camera:
    """``frame_camera`` for the bounds of all ``frames``."""
    corners = np.array([corner for frame in frames for corner in frame.bounds()])
    return frame_camera(corners.min(axis=0), corners.max(axis=0), up_axis, width, height)


def image_strip(images, columns: int = 4) -> np.ndarray:
    """The images (equal sizes) tiled in rows of ``columns``, white where a row is short."""
    images = list(images)
    if not images:
        raise ValueError("no images to tile")
    h, w, _ = images[0].shape
    rows = math.ceil(len(images) / columns)
    strip = np.full((rows * h, min(columns, len(images)) * w, 3), 255, np.uint8)
    for k, image in enumerate(images):
        r, c = divmod(k, columns)
        strip[r * h:(r + 1) * h, c * w:(c + 1) * w] = image
    return strip


def save_images(path, images, fps: float = 30.0) -> Path:
    """Write ``images`` (uint8 (H, W, 3)) atomically: one PNG (a single image, or a strip of
    several), a GIF or an MP4 (needs imageio-ffmpeg) at ``fps``, or a folder of numbered
    PNGs when ``path`` has no suffix. Returns the path."""
    from PIL import Image

    from wpsim.io.files import atomic_write

    images, path = list(images), Path(path)
    if not images:
        raise ValueError(f"{path}: no frames to write")
    suffix = path.suffix.lower()
    if suffix == "":
        path.mkdir(parents=True, exist_ok=True)
        for k, image in enumerate(images):
            atomic_write(path / f"frame_{k:05d}.png", lambda tmp, im=image: Image.fromarray(im).save(tmp, "PNG"))
        return path
    if suffix == ".png":
        picture = images[0] if len(images) == 1 else image_strip(images)
        return atomic_write(path, lambda tmp: Image.fromarray(picture).save(tmp, "PNG"))
    if suffix == ".gif":
        frames = [Image.fromarray(image) for image in images]
        duration = max(int(round(1000.0 / fps)), 20)
        return atomic_write(path, lambda tmp: frames[0].save(tmp, "GIF", save_all=True, append_images=frames[1:],
                                                             duration=duration, loop=0))
    if suffix == ".mp4":
        return atomic_write(path, lambda tmp: _write_mp4(tmp, images, fps))
    raise ValueError(f"{path}: unknown image or video type {suffix!r}; use .png, .gif, .mp4 or a folder")


def _write_mp4(path, images, fps: float):
    try:
        import imageio_ffmpeg
    except ImportError as error:
        raise ValueError("writing .mp4 needs imageio-ffmpeg (pip install imageio-ffmpeg); .gif and .png need "
                         "nothing more") from error
    h, w, _ = images[0].shape
    writer = imageio_ffmpeg.write_frames(str(path), (w, h), fps=fps, macro_block_size=1, output_params=["-f", "mp4"])
    writer.send(None)
    for image in images:
        writer.send(np.ascontiguousarray(image))
    writer.close()


def render_rollout(model, states, path, fps: float = 30.0, width: int = 480, height: int = 360) -> Path:
    """Render ``states`` (one camera framing them all) and write them with ``save_images``."""
    states = list(states)
    renderer = SceneRenderer(model, width, height)
    renderer.frame(states)
    return save_images(path, [renderer.render(state) for state in states], fps)
