"""Spatial tendons of ``ModelBuilder``: paths through points on bodies, wrapping around spheres
and cylinders, with a spring, a damper and a drive on their length (``wpsim.kernels.tendons``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wpsim.core.rigid_builder import NO_LIMIT
from wpsim.kernels.tendons import WRAP_CYLINDER, WRAP_SPHERE

NO_SIDE = -2
"""``segment_side_body`` of a wrap without a side point."""

WRAP_KINDS = {"sphere": int(WRAP_SPHERE), "cylinder": int(WRAP_CYLINDER)}


@dataclass(frozen=True)
class TendonWrap:
    """A sphere or cylinder (axis z of its frame, infinite) a spatial tendon wraps around: on
    ``body`` (-1: the world) at ``pos`` (m) and ``rot`` (quaternion xyzw) in its frame, of
    ``radius`` (m); ``side`` = (body, point in its frame, m) picks the side the path passes on
    (MuJoCo's sidesite), None: the shorter way, and only where the straight path would cut it."""

    body: int
    pos: tuple
    rot: tuple
    radius: float
    kind: str = "cylinder"
    side: tuple | None = None


class SpatialTendonBuilder:
    """Spatial tendons; mixed into ``ModelBuilder``."""

    def add_spatial_tendon(self, path, stiffness: float = 0.0, damping: float = 0.0, rest_length=0.0) -> int:
        """A tendon along ``path``: points (body, point in its frame (m); body -1: the world) and,
        between two points, ``TendonWrap`` objects it wraps around. Its length L (m) carries a
        spring of ``stiffness`` (N/m) towards ``rest_length`` (m; or (lower, upper): no force
        inside that range) and a damper of ``damping`` (N s/m), acting as J^T f on the dofs of
        the one articulation its bodies belong to (checked at finalize), explicitly. Returns
        its index."""
        index = len(self.spatial_tendons)
        where = f"spatial tendon {index}"
        points, segments = [], []
        pending = None
        for k, item in enumerate(path):
            if isinstance(item, TendonWrap):
                if pending is not None or not points:
                    raise ValueError(f"{where}: path item {k}: a wrap must lie between two points")
                pending = self._checked_wrap(where, k, item)
                continue
            body, point = self._checked_point(where, k, item)
            if points:
                segments.append((points[-1], (body, point), pending))
            points.append((body, point))
            pending = None
        if pending is not None or len(points) < 2:
            raise ValueError(f"{where}: a path needs two points at least and must end at a point")
        rest = np.atleast_1d(np.asarray(rest_length, dtype=np.float64))
        if rest.size == 1:
            rest = np.repeat(rest, 2)
        if rest.size != 2 or not np.all(np.isfinite(rest)) or rest[0] > rest[1]:
            raise ValueError(f"{where}: rest_length must be a finite length or range (lower <= upper), "
                             f"got {rest_length!r}")
        for name, value in (("stiffness", stiffness), ("damping", damping)):
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"{where}: {name} must be finite and >= 0, got {value}")
        self.spatial_tendons.append({"segments": segments, "stiffness": float(stiffness), "damping": float(damping),
                                     "rest": tuple(float(r) for r in rest),
                                     "drive": (0.0, 0.0, NO_LIMIT, -NO_LIMIT, NO_LIMIT)})
        return index

    def set_tendon_drive(self, tendon: int, ke: float, kd: float = 0.0, force_limit: float = np.inf,
                         target_range=(-np.inf, np.inf)):
        """A drive on spatial tendon ``tendon``'s length L: the force ke (target - L) - kd dL/dt
        (N, clamped to +-``force_limit``), explicit, with target the control's ``tendon_target``
        (m) clamped to ``target_range`` (an actuator's ctrlrange). Gains in N/m and N s/m."""
        if not (isinstance(tendon, (int, np.integer)) and 0 <= tendon < len(self.spatial_tendons)):
            raise ValueError(f"set_tendon_drive: spatial tendon {tendon} does not exist "
                             f"({len(self.spatial_tendons)} tendons)")
        lower, upper = (float(np.clip(v, -NO_LIMIT, NO_LIMIT)) for v in target_range)
        if not (np.isfinite(ke) and np.isfinite(kd) and ke >= 0.0 and kd >= 0.0 and force_limit > 0.0
                and lower <= upper):
            raise ValueError(f"set_tendon_drive: spatial tendon {tendon}: ke and kd must be finite and >= 0, "
                             f"force_limit > 0 and the target range ordered, got {ke}, {kd}, {force_limit}, "
                             f"{target_range}")
        self.spatial_tendons[tendon]["drive"] = (float(ke), float(kd), float(min(force_limit, NO_LIMIT)), lower, upper)

    def _checked_point(self, where: str, k: int, item) -> tuple:
        """(body, point) of path item ``k``, validated."""
        try:
            body, point = item
            point = np.asarray(point, dtype=np.float64).reshape(3)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: path item {k} must be (body, (x, y, z)) or a TendonWrap, got {item!r}") from None
        if not (isinstance(body, (int, np.integer)) and -1 <= body < self.bodies.count) or not np.all(
                np.isfinite(point)):
            raise ValueError(f"{where}: path item {k}: body {body!r} does not exist or the point is not finite")
        return int(body), tuple(float(v) for v in point)

    def _checked_wrap(self, where: str, k: int, wrap: TendonWrap) -> tuple:
        """(kind, body, transform (7,), radius, side body, side point) of a wrap, validated."""
        if wrap.kind not in WRAP_KINDS:
            raise ValueError(f"{where}: path item {k}: wrap kind must be one of {sorted(WRAP_KINDS)}, "
                             f"got {wrap.kind!r}")
        if not (np.isfinite(wrap.radius) and wrap.radius > 0.0):
            raise ValueError(f"{where}: path item {k}: the wrap's radius must be finite and > 0, got {wrap.radius}")
        body, pos = self._checked_point(where, k, (wrap.body, wrap.pos))
        rot = np.asarray(wrap.rot, dtype=np.float64).reshape(4)
        if not (np.all(np.isfinite(rot)) and np.linalg.norm(rot) > 0.0):
            raise ValueError(f"{where}: path item {k}: the wrap's rotation must be a finite non-zero quaternion")
        side_body, side_point = NO_SIDE, (0.0, 0.0, 0.0)
        if wrap.side is not None:
            side_body, side_point = self._checked_point(where, k, wrap.side)
        return (WRAP_KINDS[wrap.kind], body, (*pos, *(rot / np.linalg.norm(rot))), float(wrap.radius), side_body,
                side_point)

    def _tendon_arrays(self, art_of: np.ndarray, body_joint: np.ndarray) -> dict:
        """The spatial tendons as Model arrays (see ``wpsim.core.fields``), each on the one
        articulation of its moving bodies (-1 where all its points are on the world)."""
        starts, arts, segment_rows = [0], [], []
        for index, tendon in enumerate(self.spatial_tendons):
            bodies = {b for (a, _), (c, _), wrap in tendon["segments"] for b in (a, c, *(wrap[1:2] if wrap else ()))}
            found = {int(art_of[body_joint[b]]) for b in bodies if b >= 0}
            if len(found) > 1:
                raise ValueError(f"spatial tendon {index}: its bodies {sorted(b for b in bodies if b >= 0)} do not "
                                 f"belong to one articulation")
            arts.append(found.pop() if found else -1)
            segment_rows += tendon["segments"]
            starts.append(len(segment_rows))
        none = (0, -1, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0), 0.0, NO_SIDE, (0.0, 0.0, 0.0))
        wraps = [wrap or none for _, _, wrap in segment_rows]
        tendons = self.spatial_tendons
        return {
            "tendon_segment_start": np.asarray(starts, np.int64),
            "tendon_articulation": np.asarray(arts, np.int64),
            "tendon_stiffness": np.array([t["stiffness"] for t in tendons], np.float64),
            "tendon_damping": np.array([t["damping"] for t in tendons], np.float64),
            "tendon_spring_range": np.array([t["rest"] for t in tendons], np.float64).reshape(-1, 2),
            **{name: np.array([t["drive"][k] for t in tendons], np.float64)
               for k, name in enumerate(("tendon_drive_ke", "tendon_drive_kd", "tendon_drive_force_limit"))},
            "tendon_target_range": np.array([t["drive"][3:] for t in tendons], np.float64).reshape(-1, 2),
            "segment_body": np.array([[a[0], b[0]] for a, b, _ in segment_rows], np.int64).reshape(-1, 2),
            "segment_point": np.array([[a[1], b[1]] for a, b, _ in segment_rows], np.float64).reshape(-1, 2, 3),
            "segment_wrap_kind": np.array([w[0] for w in wraps], np.int64),
            "segment_wrap_body": np.array([w[1] for w in wraps], np.int64),
            "segment_wrap_transform": np.array([w[2] for w in wraps], np.float64).reshape(-1, 7),
            "segment_wrap_radius": np.array([w[3] for w in wraps], np.float64),
            "segment_side_body": np.array([w[4] for w in wraps], np.int64),
            "segment_side_point": np.array([w[5] for w in wraps], np.float64).reshape(-1, 3),
        }


def shifted_tendon(tendon: dict, body_shift: int, offset) -> dict:
    """A copy of spatial tendon ``tendon`` (``SpatialTendonBuilder.spatial_tendons``) for a world
    whose bodies come ``body_shift`` later and whose static points move by ``offset`` (m)."""

    def point(body: int, where) -> tuple:
        if body >= 0:
            return body + body_shift, where
        return body, tuple(float(v) for v in np.asarray(where) + offset)

    def wrap(row):
        if row is None:
            return None
        kind, body, pose, radius, side_body, side_point = row
        pose = (*point(body, pose[:3])[1], *pose[3:]) if body < 0 else pose
        side_body, side_point = (side_body, side_point) if side_body == NO_SIDE else point(side_body, side_point)
        return kind, body + body_shift if body >= 0 else body, pose, radius, side_body, side_point

    segments = [(point(*a), point(*b), wrap(w)) for a, b, w in tendon["segments"]]
    return {**tendon, "segments": segments}
