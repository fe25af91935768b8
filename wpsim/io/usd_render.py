"""Pictures of a USD stage: the geometry prims of a stage (the ones wpsim writes: Mesh,
Points (in their display colour), Sphere, Cube, Capsule, Plane, at every time code) read back into
``wpsim.io.render.Frame``s and drawn by the same ray caster.

A prim's world transform comes from its xform ops at each time code; a Cube is a box of
half extents size / 2 times its scale, a Capsule is turned so that its axis is the ray
caster's local z, a Plane is infinite. Colours: soft-body surfaces, cloth and particles as
in ``wpsim.io.render``; the shapes of body b (the prim whose ``wpsim:body`` attribute is b)
in b's palette colour. A stage
with the variant set ``iteration`` (several takes, ``UsdRecorder.write``) shows one take.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.io.render import (
    CLOTH_COLOR,
    GROUND_COLOR,
    PALETTE,
    PARTICLE_COLOR,
    SOFT_COLOR,
    Frame,
    Painter,
    camera_for,
    save_images,
)
from wpsim.io.usd_export import BODY_ATTRIBUTE
from wpsim.kernels.enums import SHAPE_BOX, SHAPE_CAPSULE, SHAPE_PLANE, SHAPE_SPHERE

TAKE_SET = "iteration"
"""Variant set of the takes in a stage that ``UsdRecorder`` wrote."""


def open_stage(path, take: str | None = None):
    """(stage, chosen take or None) of the USD file ``path``, with take ``take`` selected
    (default: the last one) when the stage has several."""
    from pxr import Usd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        stage = Usd.Stage.Open(str(path))
    except Exception:  # USD raises its own error type with internal text
        stage = None
    if stage is None:
        raise ValueError(f"{path}: cannot be read as a USD stage")
    world = stage.GetDefaultPrim() or stage.GetPrimAtPath("/World")
    sets = world.GetVariantSets() if world else None
    if sets is None or not sets.HasVariantSet(TAKE_SET):
        if take is not None:
            raise ValueError(f"{path}: the stage has no takes (variant set {TAKE_SET!r}); drop --take")
        return stage, None
    variants = sets.GetVariantSet(TAKE_SET)
    names = variants.GetVariantNames()
    chosen = names[-1] if take is None else take
    if chosen not in names:
        raise ValueError(f"{path}: no take {chosen!r}; the stage has {', '.join(names)}")
    variants.SetVariantSelection(chosen)
    return stage, chosen


def _decompose(matrix) -> tuple:
    """(position (3,), quaternion x, y, z, w, scale (3,)) of a USD world matrix."""
    from pxr import Gf

    transform = Gf.Transform(matrix)
    quat = transform.GetRotation().GetQuat()
    imaginary = quat.GetImaginary()
    return (np.array(transform.GetTranslation()), np.array([*imaginary, quat.GetReal()]),
            np.array(transform.GetScale()))


def _apply(matrix, points: np.ndarray) -> np.ndarray:
    """(N, 3) points moved by a USD matrix (row vectors: p M)."""
    m = np.array(matrix, np.float64)
    return points @ m[:3, :3] + m[3, :3]


def _body_color(prim) -> np.ndarray:
    """Palette colour of the body above ``prim`` (its index in ``BODY_ATTRIBUTE``; white for
    static shapes)."""
    while prim and prim.GetPath().pathString != "/":
        body = prim.GetAttribute(BODY_ATTRIBUTE)
        if body and body.HasValue():
            return PALETTE[int(body.Get()) % len(PALETTE)]
        prim = prim.GetParent()
    return np.array(GROUND_COLOR, np.float64)


_CAPSULE_TURN = {"X": (0.0, np.sqrt(0.5), 0.0, np.sqrt(0.5)), "Y": (-np.sqrt(0.5), 0.0, 0.0, np.sqrt(0.5)),
                 "Z": (0.0, 0.0, 0.0, 1.0)}
"""Quaternion (x, y, z, w) turning local z onto a USD capsule's axis."""


def stage_frame(stage, time: float) -> Frame:
    """The ``Frame`` of ``stage``'s geometry at time code ``time``."""
    from pxr import Usd, UsdGeom

    from wpsim.core.geometry import transform_multiply

    cache = UsdGeom.XformCache(time)
    shapes, points, faces, face_colors, spheres = [], [], [], [], []
    count = 0
    for prim in stage.Traverse(Usd.TraverseInstanceProxies()):
        if not prim.IsA(UsdGeom.Gprim) or UsdGeom.Imageable(prim).ComputeVisibility(time) == UsdGeom.Tokens.invisible:
            continue
        matrix = cache.GetLocalToWorldTransform(prim)
        position, quat, scale = _decompose(matrix)
        pose = np.concatenate([position, quat])
        if prim.IsA(UsdGeom.Mesh):
            mesh = UsdGeom.Mesh(prim)
            local = np.asarray(mesh.GetPointsAttr().Get(time), np.float64).reshape(-1, 3)
            counts = np.asarray(mesh.GetFaceVertexCountsAttr().Get(time) or [], np.int64)
            indices = np.asarray(mesh.GetFaceVertexIndicesAttr().Get(time) or [], np.int64)
            world = _apply(matrix, local)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            tris = [(indices[s], indices[s + k], indices[s + k + 1]) for s, n in zip(starts, counts)
                    for k in range(1, n - 1)]
            color = {"soft": SOFT_COLOR, "cloth": CLOTH_COLOR}.get(prim.GetName(), _body_color(prim))
            points.append(world)
            faces.append(np.asarray(tris, np.int64).reshape(-1, 3) + count)
            face_colors.append(np.tile(color, (len(tris), 1)))
            count += len(world)
        elif prim.IsA(UsdGeom.Points):
            geom = UsdGeom.Points(prim)
            local = np.asarray(geom.GetPointsAttr().Get(time) or [], np.float64).reshape(-1, 3)
            if not len(local):  # e.g. a marker set that this take does not have
                continue
            widths = np.asarray(geom.GetWidthsAttr().Get(time) or [0.02], np.float64)
            world = _apply(matrix, local)
            radii = np.broadcast_to(widths, (len(world),)) * 0.5 * scale.max()
            shown = geom.GetDisplayColorAttr().Get(time)
            color = np.asarray(shown[0], np.float64) if shown else np.asarray(PARTICLE_COLOR, np.float64)
            spheres.append((world, radii, np.tile(color, (len(world), 1))))
        elif prim.IsA(UsdGeom.Sphere):
            radius = UsdGeom.Sphere(prim).GetRadiusAttr().Get(time) * scale.max()
            shapes.append((SHAPE_SPHERE, pose, (radius, 0.0, 0.0), _body_color(prim)))
        elif prim.IsA(UsdGeom.Cube):
            half = 0.5 * UsdGeom.Cube(prim).GetSizeAttr().Get(time) * scale
            shapes.append((SHAPE_BOX, pose, half, _body_color(prim)))
        elif prim.IsA(UsdGeom.Capsule):
            capsule = UsdGeom.Capsule(prim)
            turned = transform_multiply(pose, np.array([0.0, 0.0, 0.0, *_CAPSULE_TURN[capsule.GetAxisAttr().Get()]]))
            size = (capsule.GetRadiusAttr().Get(time) * scale.max(), 0.5 * capsule.GetHeightAttr().Get(time) * scale.max(),
                    0.0)
            shapes.append((SHAPE_CAPSULE, turned, size, _body_color(prim)))
        elif prim.IsA(UsdGeom.Plane):
            axis = UsdGeom.Plane(prim).GetAxisAttr().Get()
            turned = transform_multiply(pose, np.array([0.0, 0.0, 0.0, *_CAPSULE_TURN[axis]]))
            shapes.append((SHAPE_PLANE, turned, (0.0, 0.0, 0.0), np.array(GROUND_COLOR, np.float64)))
    centres = np.concatenate([c for c, _, _ in spheres]) if spheres else np.zeros((0, 3))
    radii = np.concatenate([r for _, r, _ in spheres]) if spheres else np.zeros(0)
    colors = np.concatenate([c for _, _, c in spheres]) if spheres else np.zeros((0, 3))
    return Frame(np.array([s[0] for s in shapes], np.int64), np.array([s[1] for s in shapes]).reshape(-1, 7),
                 np.array([s[2] for s in shapes], np.float64).reshape(-1, 3),
                 np.array([s[3] for s in shapes], np.float64).reshape(-1, 3),
                 np.concatenate(points) if points else np.zeros((0, 3)),
                 np.concatenate(faces) if faces else np.zeros((0, 3), np.int64),
                 np.concatenate(face_colors) if face_colors else np.zeros((0, 3)), centres, radii, colors)


def stage_times(stage, fps: float | None = None) -> tuple:
    """(time codes, frames per second): the time codes to draw for a video at ``fps`` frames
    per second of the stage's time, frame j being the time code nearest to start + j
    (time codes per second / fps); None, or a rate above the stage's time codes per second,
    draws every time code at the stage's rate."""
    if fps is not None and not (np.isfinite(fps) and fps > 0.0):
        raise ValueError(f"fps must be a finite rate > 0 frames/s, got {fps}")
    start, end, per_second = stage.GetStartTimeCode(), stage.GetEndTimeCode(), stage.GetTimeCodesPerSecond()
    fps = per_second if fps is None or fps >= per_second else float(fps)
    codes_per_frame = per_second / fps
    count = int(np.floor((end - start) / codes_per_frame + 1e-9)) + 1
    return [float(t) for t in start + np.rint(np.arange(count) * codes_per_frame)], fps


def render_stage(path, out, take: str | None = None, width: int = 480, height: int = 360, fps: float | None = 30.0,
                 device=None, count: int | None = None) -> dict:
    """Render the stage ``path`` (one camera framing every frame) into ``out``
    (``save_images``: .gif, .mp4, .png strip or a folder) as a video at ``fps`` frames per
    second of the stage's time, its time codes resampled (``stage_times``; None: every time
    code); with ``count``, ``count`` time codes evenly spaced from the first to the last
    instead (e.g. for a strip). Returns {"out", "frames", "fps", "take"}."""
    from pxr import UsdGeom

    if count is not None and (int(count) != count or count < 1):
        raise ValueError(f"count must be an integer >= 1, got {count}")
    stage, chosen = open_stage(path, take)
    times, fps = stage_times(stage, fps)
    if count is not None:
        times = sorted({float(t) for t in np.linspace(times[0], times[-1], int(count)).round()})
        spacing = (times[-1] - times[0]) / max(len(times) - 1, 1) or 1.0
        fps = stage.GetTimeCodesPerSecond() / spacing
    frames = [stage_frame(stage, t) for t in times]
    up = {"Z": 2, "Y": 1}.get(str(UsdGeom.GetStageUpAxis(stage)), 2)
    camera = camera_for(frames, up, width, height)
    painter = Painter(device)
    written = save_images(out, [painter.draw(frame, camera) for frame in frames], fps)
    return {"out": str(written), "frames": len(frames), "fps": fps, "take": chosen}


def render_strip(path, out, take: str | None = None, count: int = 8, width: int = 240, height: int = 180) -> dict:
    """An image strip (``out`` a .png) of ``count`` evenly spaced frames of a take of the
    stage ``path``: what an example shows beside its plots."""
    return render_stage(path, out, take, width, height, fps=None, count=count)
