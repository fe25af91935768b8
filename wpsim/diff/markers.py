"""Markers: named points fixed in rigid bodies or embedded in soft bodies, whose world
positions are computed from a state on the tape, for losses against measured marker
trajectories (``wpsim.io.measurements`` ``marker:`` columns)."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.kernels import markers
from wpsim.kernels.generic import for_precision
from wpsim.solvers.kinematics import body_poses


def _named(names, count: int, what: str) -> list:
    names = list(names)
    if len(names) != count:
        raise ValueError(f"{count} {what} for {len(names)} marker names")
    if len(set(names)) != len(names):
        raise ValueError(f"marker names must be unique, got {names}")
    return names


class BodyMarkers:
    """Points ``points`` (M, 3) m in the frames of bodies ``bodies`` (M,)."""

    def __init__(self, model, names, bodies, points):
        bodies = np.asarray(bodies, dtype=np.int64).reshape(-1)
        points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        self.names = _named(names, len(bodies), "bodies")
        if len(points) != len(bodies) or not np.isfinite(points).all():
            raise ValueError(f"body markers need one finite point (3 values, m) per body, got {points.shape}")
        bad = np.flatnonzero((bodies < 0) | (bodies >= model.body_count))
        if bad.size:
            raise ValueError(f"marker {self.names[bad[0]]!r}: body {bodies[bad[0]]} does not exist "
                             f"({model.body_count} bodies)")
        self.model = model
        self._bodies = wp.array(bodies, dtype=wp.int32, device=model.device)
        self._points = wp.array(points, dtype=model.vec3, device=model.device)

    def positions(self, state) -> wp.array:
        """(M,) world positions (m) of the markers in ``state``, from its joint coordinates
        (forward kinematics into fresh arrays, so the state's own body poses are untouched);
        recorded on an active tape."""
        model = self.model
        grad = state.joint_q.requires_grad
        body_q = body_poses(model, state)[0]
        out = wp.zeros(len(self.names), dtype=model.vec3, device=model.device, requires_grad=grad)
        wp.launch(for_precision(markers.body_marker_positions, model.dtype), dim=len(self.names),
                  inputs=[self._bodies, self._points, body_q], outputs=[out], device=model.device)
        return out


def locate_in_tets(vertices: np.ndarray, tets: np.ndarray, points: np.ndarray, tolerance: float = 1e-9) -> tuple:
    """(tet index (M,), barycentric weights (M, 4)) of each point in the tet mesh
    (vertices (V, 3) m, tets (E, 4)): the tet whose smallest weight is largest, which must be
    >= -tolerance (the point lies in it); ValueError names a point outside the mesh."""
    x = np.asarray(vertices, dtype=np.float64)[np.asarray(tets)]  # (E, 4, 3)
    edges = np.transpose(x[:, 1:] - x[:, :1], (0, 2, 1))  # (E, 3, 3) columns x_i - x_0
    inverse = np.linalg.inv(edges)
    found_tets, found_weights = [], []
    for p in np.asarray(points, dtype=np.float64).reshape(-1, 3):
        w123 = np.einsum("eij,ej->ei", inverse, p - x[:, 0])
        weights = np.concatenate([1.0 - w123.sum(axis=1, keepdims=True), w123], axis=1)
        best = int(np.argmax(weights.min(axis=1)))
        if weights[best].min() < -tolerance:
            raise ValueError(f"point {p.tolist()} m lies in no tetrahedron (nearest: tet {best}, smallest "
                             f"barycentric weight {weights[best].min():.3g})")
        found_tets.append(best)
        found_weights.append(weights[best])
    return np.array(found_tets, dtype=np.int64), np.array(found_weights)


class TetMarkers:
    """Points ``points`` (M, 3) m of a soft body at rest, carried by the tetrahedra that
    contain them (barycentric weights in the model's rest particle positions; a quadratic
    tet's point moves with its ten nodes' shape functions)."""

    def __init__(self, model, names, points, tolerance: float = 1e-9):
        points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        self.names = _named(names, len(points), "points")
        tets, weights = locate_in_tets(model.particle_q.numpy(), model.tet_indices.numpy(), points, tolerance)
        self.model, self.tets, self.weights = model, tets, weights
        self._tets = wp.array(tets, dtype=wp.int32, device=model.device)
        self._weights = wp.array(weights, dtype=wp.types.vector(4, model.dtype), device=model.device)

    def positions(self, state) -> wp.array:
        """(M,) world positions (m) of the markers in ``state``; recorded on an active tape."""
        model = self.model
        out = wp.zeros(len(self.names), dtype=model.vec3, device=model.device,
                       requires_grad=state.particle_q.requires_grad)
        wp.launch(for_precision(markers.tet_marker_positions, model.dtype), dim=len(self.names),
                  inputs=[model.tet_indices, model.tet_edge_indices, self._tets, self._weights, state.particle_q],
                  outputs=[out],
                  device=model.device)
        return out
