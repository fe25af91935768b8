"""USD export of rollouts for digital-twin viewers (usdview, Omniverse, Blender).

``UsdRecorder`` collects frames of a rollout (host copies of the particle positions and body
poses) and writes them as one USD stage, ``.usd``/``.usdc`` (binary) or ``.usda`` (text) by
extension, atomically (a temporary file beside the target, then a rename). Layout:

    /World                     Xform, the default prim
      /World/world_<w>         Xform per recorded world (translated when side by side)
        particles              Points: particles in no triangle or tetrahedron, widths 2 r
        cloth                  Mesh: the world's triangles
        soft                   Mesh: the boundary faces of the world's tetrahedra
        <body name>            Xform per rigid body (body_<b> if unnamed; its index in the int attribute
                               wpsim:body): translate + orient time samples,
          shape_<s>            its collision shapes (Sphere, Cube scaled, Capsule, Mesh) in body frame
          visual_<k>           its drawn-only meshes (``ModelBuilder.add_visual_mesh``), purpose render
      /World/shapes            static collision shapes (Plane, Sphere, Cube, Capsule, Mesh) and
                               static drawn-only meshes
      /World/markers/<name>    Points with a display colour per marker set (``add_markers``):
                               targets, measured and simulated markers

Mesh topology and widths are written once; points, extents and body poses are
time-sampled (quaternions converted to USD's (w, x, y, z)), one time code per recorded frame: frame k (an integer counter) is time code k, and
timeCodesPerSecond = framesPerSecond = ``fps``. Stage metadata: upAxis (Y or Z),
metersPerUnit = 1 and kilogramsPerUnit = 1 (wpsim is SI), start/end time codes.

Several takes (e.g. one rollout per optimisation iteration) go into a variant set on
/World, so that a viewer scrubs through iterations, or one stage per take
(``write_takes``). ``pxr`` is imported only when a stage is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wpsim.core.geometry import boundary_faces
from wpsim.core.model import Model, State
from wpsim.core.tape import tape_paused
from wpsim.io.files import atomic_write
from wpsim.kernels.enums import SHAPE_BOX, SHAPE_CAPSULE, SHAPE_MESH, SHAPE_PLANE, SHAPE_SPHERE
from wpsim.solvers.kinematics import eval_fk

PLANE_HALF_SIZE = 10.0
"""Smallest half side (m) of the square drawn for an infinite ground plane; it grows to
1.5 times the farthest initial particle (worlds offset included)."""


class _Part:
    """A prim of one world: its kind ("particles", "cloth" or "soft", also its name), its
    sorted global particle indices and, for meshes, faces in indices local to those."""

    def __init__(self, kind: str, particles: np.ndarray, faces: np.ndarray | None = None):
        self.name = self.kind = kind
        self.particles = particles
        self.faces = None if faces is None else np.searchsorted(particles, faces)


def _check_identifier(what: str, name) -> str:
    """``name`` as a string if it is an identifier (a valid USD prim or variant name)."""
    name = str(name)
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise ValueError(f"{what} {name!r} must be an identifier (letters, digits, _)")
    return name


BODY_ATTRIBUTE = "wpsim:body"
"""Custom int attribute of a body's Xform prim: the body index in the model."""


class UsdRecorder:
    """Frames of a rollout of ``model``, written as a USD stage.

    Args:
        model: the Model whose states are recorded.
        fps: frames per second of the recording (1 / (dt * steps between frames)).
        world: record only this world index, or all worlds (None).
        world_spacing: offset (m) between consecutive worlds when all are recorded side by
            side; None keeps them where they are (e.g. when ``replicate`` already spaced them).
        body_names: body index -> name (e.g. the links of an imported robot file,
            ``ImportedScene.bodies`` inverted); a body's prim is named after it, made a valid
            USD identifier and unique among the world's prims. Unnamed bodies are ``body_<b>``.
    """

    def __init__(self, model: Model, fps: float, world: int | None = None, world_spacing=None,
                 body_names: dict | None = None):
        if not fps > 0.0:
            raise ValueError(f"fps must be > 0, got {fps}")
        if model.up_axis == 0:
            raise ValueError("USD stages are Y-up or Z-up; this model is X-up")
        if world is not None and not 0 <= world < model.num_worlds:
            raise ValueError(f"world {world} does not exist (the model has {model.num_worlds})")
        self.model, self.fps, self.world = model, float(fps), world
        self.world_spacing = None if world_spacing is None else np.asarray(world_spacing, dtype=np.float64)
        self._radius = model.particle_radius.numpy().astype(np.float64)
        self._parts = self._world_parts()
        self._shapes, self._body_shapes = self._shape_rows()
        self._bodies = {w: np.flatnonzero(model.body_world.numpy() == w) for w in self._parts}
        self._body_prims = self._body_prim_names(body_names or {})
        self._plane_half = self._plane_half_size()
        self.markers: dict[str, dict] = {}
        """Marker sets per take name: marker name -> (positions (F or 1, M, 3) m, radius m,
        colour (3,) RGB in [0, 1])."""
        self.takes: dict[str, list] = {}
        """Recorded frames per take name: lists of (particle positions (P, 3) in m, body
        poses (B, 7): position in m, quaternion x, y, z, w), float64."""
        self._take = None

    def _world_parts(self) -> dict:
        """world index -> list of _Part."""
        m = self.model
        world_of = m.particle_world.numpy()
        tris = m.tri_indices.numpy().reshape(-1, 3)
        tets = np.concatenate([m.tet_indices.numpy().reshape(-1, 4), m.tet_edge_indices.numpy().reshape(-1, 6)], axis=1)
        in_mesh = np.zeros(m.particle_count, dtype=bool)
        in_mesh[tris.ravel()] = True
        in_mesh[tets[tets >= 0]] = True
        worlds = range(m.num_worlds) if self.world is None else [self.world]
        parts = {}
        for w in worlds:
            found = []
            free = np.flatnonzero((world_of == w) & ~in_mesh)
            if free.size:
                found.append(_Part("particles", free))
            for name, elements, faces_of in (("cloth", tris, lambda e: e),
                                             ("soft", tets, lambda e: boundary_faces(e[:, :4], e[:, 4:]))):
                mine = elements[world_of[elements[:, 0]] == w] if len(elements) else elements
                if len(mine):
                    faces = faces_of(mine)
                    found.append(_Part(name, np.unique(faces), faces))
            parts[w] = found
        return parts

    def _body_prim_names(self, names: dict) -> dict:
        """body index -> prim name: its sanitised name, unique within its world."""
        from pxr import Tf

        prims = {}
        for w, bodies in self._bodies.items():
            taken = {part.name for part in self._parts[w]}
            for b in bodies:
                stem = Tf.MakeValidIdentifier(str(names[int(b)])) if int(b) in names else f"body_{b}"
                name, n = stem, 1
                while name in taken:
                    n += 1
                    name = f"{stem}_{n}"
                taken.add(name)
                prims[int(b)] = name
        return prims

    def _shape_rows(self) -> tuple:
        """Rows (index, kind, world, transform (7,), size (3,)) of the recorded static shapes
        (body -1), and the same rows of each body's shapes by body."""
        m = self.model
        rows = zip(m.shape_kind.numpy(), m.shape_world.numpy(), m.shape_transform.numpy(), m.shape_size.numpy(),
                   m.shape_body.numpy())
        static, on_body = [], {}
        for i, (k, w, x, s, b) in enumerate(rows):
            row = (i, int(k), int(w), np.asarray(x, np.float64), np.asarray(s, np.float64))
            if b >= 0:
                on_body.setdefault(int(b), []).append(row)
            elif self.world is None or w in (-1, self.world):
                static.append(row)
        return static, on_body

    def begin_take(self, name: str):
        """Start a new take (a variant when written); frames recorded next belong to it."""
        name = _check_identifier("take name", name)
        if name in self.takes:
            raise ValueError(f"take {name!r} exists already")
        self.takes[name] = []
        self.markers[name] = {}
        self._take = name

    def add_markers(self, name: str, positions, radius: float = 2.0e-3, color=(1.0, 0.55, 0.1)):
        """Markers of the current take, written as the Points prim /World/markers/<name>
        (a target, measured or simulated marker positions): ``positions`` (M, 3) m fixed for
        the take, or (frames, M, 3) m, one row per frame the take records; ``radius`` (m)
        and ``color`` (RGB in [0, 1]) are the points' size and display colour."""
        _check_identifier("marker set name", name)
        points = np.asarray(positions, dtype=np.float64)
        if points.ndim == 2:
            points = points[None]
        if points.ndim != 3 or points.shape[2] != 3 or points.shape[1] == 0 or not np.isfinite(points).all():
            raise ValueError(f"markers {name!r}: positions must be finite (M, 3) or (frames, M, 3) m, "
                             f"got shape {np.shape(positions)}")
        if not radius > 0.0:
            raise ValueError(f"markers {name!r}: radius must be > 0 m, got {radius}")
        if self._take is None:
            self.begin_take("rollout")
        self.markers[self._take][name] = (points, float(radius), np.clip(np.asarray(color, np.float64), 0.0, 1.0))

    def record(self, state: State):
        """Append one frame: the particle positions and body poses of ``state`` (read back to
        the host; body poses are recomputed from the joint coordinates, off any tape)."""
        q = state.particle_q.numpy().astype(np.float64)
        if q.shape != (self.model.particle_count, 3):
            raise ValueError(f"state has {q.shape[0]} particles, the recorded model {self.model.particle_count}")
        if not np.isfinite(q).all():
            bad = int(np.flatnonzero(~np.isfinite(q).all(axis=1))[0])
            raise ValueError(f"particle {bad} has a non-finite position; not recording the frame")
        poses = np.zeros((0, 7))
        if self.model.body_count:
            with tape_paused():
                eval_fk(self.model, state)
            poses = state.body_q.numpy().astype(np.float64)
            if not np.isfinite(poses).all():
                bad = int(np.flatnonzero(~np.isfinite(poses).all(axis=1))[0])
                raise ValueError(f"body {bad} has a non-finite pose; not recording the frame")
        if self._take is None:
            self.begin_take("rollout")
        self.takes[self._take].append((q, poses))

    @property
    def frame_count(self) -> int:
        """Frames of the current take."""
        return len(self.takes[self._take]) if self._take else 0

    # ------------------------------------------------------------------ writing
    def write(self, path, variant_set: str = "iteration") -> Path:
        """Write all takes to the stage at ``path``: a single take directly, several as the
        variants of ``variant_set`` on /World (the last take selected)."""
        takes = {k: v for k, v in self.takes.items() if v}
        if not takes:
            raise ValueError("nothing recorded: call record(state) before write()")
        return self._write(Path(path), takes, variant_set)

    def write_takes(self, directory, stem: str = "rollout", suffix: str = ".usd") -> list:
        """Write one stage per take, ``directory/<stem>_<take><suffix>``; returns the paths."""
        paths = []
        for name, frames in self.takes.items():
            if frames:
                paths.append(self._write(Path(directory) / f"{stem}_{name}{suffix}", {name: frames}, None))
        if not paths:
            raise ValueError("nothing recorded: call record(state) before write_takes()")
        return paths

    def _write(self, path: Path, takes: dict, variant_set: str | None) -> Path:
        if path.suffix not in (".usd", ".usda", ".usdc"):
            raise ValueError(f"{path}: a USD stage must end in .usd, .usda or .usdc")
        from pxr import Usd, UsdGeom, UsdPhysics

        stage = Usd.Stage.CreateInMemory()
        UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z if self.model.up_axis == 2 else UsdGeom.Tokens.y)
        UsdGeom.SetStageMetersPerUnit(stage, 1.0)
        UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
        stage.SetTimeCodesPerSecond(self.fps)
        stage.SetFramesPerSecond(self.fps)
        stage.SetStartTimeCode(0)
        stage.SetEndTimeCode(max(len(f) for f in takes.values()) - 1)
        root = UsdGeom.Xform.Define(stage, "/World")
        stage.SetDefaultPrim(root.GetPrim())
        prims = self._define_prims(stage)
        self._define_shapes(stage)
        marker_prims = self._define_markers(stage, takes)
        if variant_set is None or len(takes) == 1:
            name, frames = next(iter(takes.items()))
            self._author_frames(prims, frames)
            self._author_markers(marker_prims, name, len(frames))
        else:
            variants = root.GetPrim().GetVariantSets().AddVariantSet(variant_set)
            for name, frames in takes.items():
                variants.AddVariant(name)
                variants.SetVariantSelection(name)
                with variants.GetVariantEditContext():
                    self._author_frames(prims, frames)
                    self._author_markers(marker_prims, name, len(frames))
        def export(tmp):
            if not stage.GetRootLayer().Export(str(tmp)):
                raise OSError(f"{path}: USD could not write the stage")

        return atomic_write(path, export)

    def _define_markers(self, stage, takes: dict) -> dict:
        """Points prims of the marker sets of ``takes`` (widths and colour of the first take
        that has the set); returns name -> prim."""
        from pxr import Gf, UsdGeom, Vt

        prims = {}
        for take in takes:
            for name, (points, radius, color) in self.markers.get(take, {}).items():
                if name in prims:
                    continue
                prim = UsdGeom.Points.Define(stage, f"/World/markers/{name}")
                prim.CreateWidthsAttr(Vt.FloatArray([2.0 * radius] * points.shape[1]))
                prim.SetWidthsInterpolation(UsdGeom.Tokens.vertex)
                prim.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*color)]))
                prims[name] = prim
        return prims

    def _author_markers(self, prims: dict, take: str, frames: int):
        """The take's marker positions: a default value (fixed markers) or one time sample
        per frame."""
        from pxr import Vt

        for name, (points, _, _) in self.markers.get(take, {}).items():
            attr = prims[name].GetPointsAttr()
            if len(points) == 1:
                attr.Set(Vt.Vec3fArray.FromNumpy(points[0].astype(np.float32)))
                continue
            if len(points) != frames:
                raise ValueError(f"markers {name!r} of take {take!r} have {len(points)} frames, the take {frames}")
            for k, frame in enumerate(points):
                attr.Set(Vt.Vec3fArray.FromNumpy(frame.astype(np.float32)), k)

    def _world_offset(self, w: int) -> np.ndarray:
        if self.world_spacing is None or self.world is not None:
            return np.zeros(3)
        return self.world_spacing * w

    def _define_prims(self, stage) -> list:
        """Define the per-world prims with their constant attributes; returns (prim, part)."""
        from pxr import Gf, UsdGeom, Vt

        out = []
        for w, parts in self._parts.items():
            xform = UsdGeom.Xform.Define(stage, f"/World/world_{w}")
            offset = self._world_offset(w)
            if offset.any():
                xform.AddTranslateOp().Set(Gf.Vec3d(*offset))
            for part in parts:
                path = f"/World/world_{w}/{part.name}"
                if part.kind == "particles":
                    prim = UsdGeom.Points.Define(stage, path)
                    prim.CreateWidthsAttr(Vt.FloatArray((2.0 * self._radius[part.particles]).tolist()))
                    prim.SetWidthsInterpolation(UsdGeom.Tokens.vertex)
                else:
                    prim = UsdGeom.Mesh.Define(stage, path)
                    prim.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(part.faces)))
                    prim.CreateFaceVertexIndicesAttr(Vt.IntArray(part.faces.ravel().tolist()))
                    prim.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
                    prim.CreateDoubleSidedAttr(part.kind == "cloth")
                out.append((prim, part))
            for b in self._bodies[w]:
                out.append((self._define_body(stage, f"/World/world_{w}/{self._body_prims[int(b)]}", b), int(b)))
        return out

    def _define_body(self, stage, path: str, body: int):
        """An Xform for ``body`` holding its shapes (transforms relative to the body)."""
        from pxr import Sdf, UsdGeom

        xform = UsdGeom.Xform.Define(stage, path)
        xform.GetPrim().CreateAttribute(BODY_ATTRIBUTE, Sdf.ValueTypeNames.Int, custom=True).Set(int(body))
        xform.AddTranslateOp()
        xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble)
        for i, kind, _, transform, size in self._body_shapes.get(int(body), []):
            self._define_shape(stage, f"{path}/shape_{i}", i, kind, transform, size)
        self._define_visuals(stage, path, int(body))
        return xform

    def _define_visuals(self, stage, path: str, body: int):
        """The drawn-only meshes of ``body`` (-1: static, in world frame) as Mesh prims
        ``visual_<k>`` under ``path``, with purpose "render"."""
        from pxr import UsdGeom

        for k, (owner, pose, vertices, faces) in enumerate(self.model.visual_meshes):
            if owner == body:
                prim = define_shape(stage, f"{path}/visual_{k}", SHAPE_MESH, pose, np.zeros(3), (vertices, faces))
                prim.CreatePurposeAttr(UsdGeom.Tokens.render)

    def _author_frames(self, prims: list, frames: list):
        """Time samples of points, extents and body poses, time code k for frame k."""
        from pxr import Gf, Vt

        for prim, part in prims:
            if isinstance(part, int):  # a body: translate and orient ops
                translate, orient = prim.GetOrderedXformOps()
                for k, (_, poses) in enumerate(frames):
                    x, y, z, w = poses[part, 3:]
                    translate.Set(Gf.Vec3d(*poses[part, :3]), k)
                    orient.Set(Gf.Quatd(float(w), float(x), float(y), float(z)), k)
                continue
            points_attr, extent_attr = prim.GetPointsAttr(), prim.GetExtentAttr()
            if not extent_attr:
                extent_attr = prim.CreateExtentAttr()
            pad = self._radius[part.particles].max() if part.kind == "particles" else 0.0
            for k, (q, _) in enumerate(frames):
                points = q[part.particles]
                points_attr.Set(Vt.Vec3fArray.FromNumpy(points.astype(np.float32)), k)
                lo, hi = points.min(axis=0) - pad, points.max(axis=0) + pad
                extent_attr.Set(Vt.Vec3fArray.FromNumpy(np.stack([lo, hi]).astype(np.float32)), k)

    def _plane_half_size(self) -> float:
        """Half side (m) of the drawn ground plane: covers every recorded world's start."""
        q = self.model.particle_q.numpy().astype(np.float64)
        world_of = self.model.particle_world.numpy()
        reach = [np.abs(q[world_of == w] + self._world_offset(w)).max() for w in self._parts if (world_of == w).any()]
        return max([PLANE_HALF_SIZE] + [1.5 * r for r in reach])

    def _define_shapes(self, stage):
        """Static collision shapes under /World/shapes, in world frame (quaternion x, y, z, w)."""
        from pxr import UsdGeom

        if not self._shapes and not any(body < 0 for body, *_ in self.model.visual_meshes):
            return
        UsdGeom.Scope.Define(stage, "/World/shapes")
        for i, kind, world, transform, size in self._shapes:
            offset = self._world_offset(world) if world >= 0 else np.zeros(3)
            placed = np.concatenate([transform[:3] + offset, transform[3:]])
            self._define_shape(stage, f"/World/shapes/shape_{i}", i, kind, placed, size)
        self._define_visuals(stage, "/World/shapes", -1)

    def _define_shape(self, stage, path: str, index: int, kind: int, transform: np.ndarray, size: np.ndarray):
        """Collision shape ``index`` as a prim at ``transform`` in its parent's frame."""
        return define_shape(stage, path, kind, transform, size, self.model.shape_meshes.get(index),
                            self._plane_half)


def define_shape(stage, path: str, kind: int, transform: np.ndarray, size: np.ndarray, mesh: tuple | None = None,
                 plane_half_size: float = PLANE_HALF_SIZE):
    """A collision shape prim (Plane, Sphere, Cube scaled to its half extents, Capsule along
    z, Mesh from ``mesh`` = (vertices, faces)) at ``transform`` (position, quaternion x, y,
    z, w) in its parent's frame; returns the prim."""
    from pxr import Gf, UsdGeom, Vt

    if kind == SHAPE_PLANE:
        prim = UsdGeom.Plane.Define(stage, path)
        prim.CreateAxisAttr(UsdGeom.Tokens.z)
        prim.CreateWidthAttr(2.0 * plane_half_size)
        prim.CreateLengthAttr(2.0 * plane_half_size)
    elif kind == SHAPE_SPHERE:
        prim = UsdGeom.Sphere.Define(stage, path)
        prim.CreateRadiusAttr(float(size[0]))
    elif kind == SHAPE_BOX:
        prim = UsdGeom.Cube.Define(stage, path)
        prim.CreateSizeAttr(2.0)
    elif kind == SHAPE_CAPSULE:
        prim = UsdGeom.Capsule.Define(stage, path)
        prim.CreateAxisAttr(UsdGeom.Tokens.z)
        prim.CreateRadiusAttr(float(size[0]))
        prim.CreateHeightAttr(float(2.0 * size[1]))
    elif kind == SHAPE_MESH:
        vertices, faces = mesh
        prim = UsdGeom.Mesh.Define(stage, path)
        prim.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(vertices.astype(np.float32)))
        prim.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(faces)))
        prim.CreateFaceVertexIndicesAttr(Vt.IntArray(faces.ravel().tolist()))
        extent = np.stack([vertices.min(axis=0), vertices.max(axis=0)]).astype(np.float32)
        prim.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(extent))
        prim.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    else:
        raise ValueError(f"{path}: unknown shape kind {kind}")
    prim.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*transform[:3]))
    x, y, z, w = transform[3:]
    prim.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(float(w), float(x), float(y), float(z)))
    if kind == SHAPE_BOX:
        prim.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*size.astype(float)))
    return prim


def write_rollouts(path, model: Model, takes: dict, fps: float, **recorder_options) -> Path:
    """Write one stage with a take per entry of ``takes`` (name -> sequence of States, one
    per frame): a single take directly, several as the variants of the set "iteration".
    ``recorder_options`` go to ``UsdRecorder`` (world, world_spacing, body_names)."""
    recorder = UsdRecorder(model, fps, **recorder_options)
    for name, states in takes.items():
        recorder.begin_take(name)
        for state in states:
            recorder.record(state)
    return recorder.write(path)
