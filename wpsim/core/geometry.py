"""Host-side mesh geometry: rest frames, hinges, grid meshes, mass lumping, rotations."""

from __future__ import annotations

import numpy as np

from wpsim.kernels.quadratic_tets import TET_EDGES

DEGENERATE_RATIO = 1e-9
"""An element whose area (volume) is below this fraction of its longest edge squared
(cubed) is rejected as degenerate."""


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion given as (x, y, z, w)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def transform_multiply(a, b) -> np.ndarray:
    """The pose a * b (7,): b (position m, quaternion x, y, z, w) expressed in frame a."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    (x1, y1, z1, w1), (x2, y2, z2, w2) = a[3:], b[3:]
    quat = (w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2)
    return np.concatenate([a[:3] + quat_to_matrix(a[3:]) @ b[:3], quat])


def transform_inverse(a) -> np.ndarray:
    """The pose a^-1 (7,) of a pose a (position m, quaternion x, y, z, w)."""
    a = np.asarray(a, np.float64)
    conjugate = np.array([-a[3], -a[4], -a[5], a[6]])
    return np.concatenate([-(quat_to_matrix(a[3:]).T @ a[:3]), conjugate])


def transform_point(a, point) -> np.ndarray:
    """A point (m) given in frame a, expressed in a's parent frame."""
    a = np.asarray(a, np.float64)
    return quat_to_matrix(a[3:]) @ np.asarray(point, np.float64) + a[:3]


def convex_hull_planes_and_edges(points, max_edge_points: int = 128) -> tuple:
    """The convex hull of ``points`` (N, 3): its face planes, outward unit normals (F, 3) and
    offsets (F,) (m) with n . x <= offset inside (coplanar facets merged), and points along
    its feature edges (edges between faces that are not coplanar), up to 3 per edge at even
    spacing and at most ``max_edge_points`` in all (fewer per edge on hulls with many edges,
    none on hulls with more edges than that: their vertices are dense already)."""
    from scipy.spatial import ConvexHull

    x = np.asarray(points, dtype=np.float64)
    hull = ConvexHull(x)
    equations = hull.equations  # n . x + c <= 0 inside
    scale = max(float(np.abs(x).max()), 1e-12)
    keys = np.round(np.concatenate([equations[:, :3], equations[:, 3:] / scale], axis=1), 9)
    _, first = np.unique(keys, axis=0, return_index=True)
    planes = equations[np.sort(first)]
    edges = set()
    for facet, (simplex, neighbours) in enumerate(zip(hull.simplices, hull.neighbors)):
        for k, other in enumerate(neighbours):  # the edge opposite vertex k borders facet `other`
            if other > facet and np.dot(equations[facet, :3], equations[other, :3]) < 1.0 - 1e-9:
                edges.add(tuple(sorted((int(simplex[(k + 1) % 3]), int(simplex[(k + 2) % 3])))))
    per_edge = min(3, max_edge_points // max(len(edges), 1))
    t = np.arange(1, per_edge + 1) / (per_edge + 1)
    along = [x[i] + np.outer(t, x[j] - x[i]) for i, j in sorted(edges)] if per_edge else []
    return planes[:, :3].copy(), -planes[:, 3].copy(), np.concatenate([np.zeros((0, 3)), *along])


def quat_between(a, b) -> np.ndarray:
    """Unit quaternion (x, y, z, w) rotating unit vector a onto unit vector b."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = np.cross(a, b)
    d = float(np.dot(a, b))
    if d < -1.0 + 1e-12:  # opposite: rotate by pi about any axis orthogonal to a
        axis = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(axis) < 1e-6:
            axis = np.cross(a, [0.0, 1.0, 0.0])
        axis /= np.linalg.norm(axis)
        return np.array([*axis, 0.0])
    q = np.array([*c, 1.0 + d])
    return q / np.linalg.norm(q)


def _longest_edge(x: np.ndarray, elements: np.ndarray) -> np.ndarray:
    k = elements.shape[1]
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    return np.max([np.linalg.norm(x[elements[:, a]] - x[elements[:, b]], axis=1) for a, b in pairs], axis=0)


def triangle_rest_frames(x: np.ndarray, tris: np.ndarray, first_index: int = 0):
    """Inverse rest edge matrices (T, 2, 2) in each triangle's own 2D frame and areas (T,)."""
    e1 = x[tris[:, 1]] - x[tris[:, 0]]
    e2 = x[tris[:, 2]] - x[tris[:, 0]]
    normal = np.cross(e1, e2)
    area = 0.5 * np.linalg.norm(normal, axis=1)
    bad = np.flatnonzero(area <= DEGENERATE_RATIO * _longest_edge(x, tris) ** 2)
    if bad.size:
        i = bad[0]
        raise ValueError(f"triangle {first_index + i}: zero area (particles {tris[i].tolist()})")
    len1 = np.linalg.norm(e1, axis=1)
    u = e1 / len1[:, None]
    v = np.cross(normal / (2.0 * area[:, None]), u)
    Dm = np.zeros((len(tris), 2, 2))
    Dm[:, 0, 0] = len1
    Dm[:, 0, 1] = np.einsum("ij,ij->i", e2, u)
    Dm[:, 1, 1] = np.einsum("ij,ij->i", e2, v)
    return np.linalg.inv(Dm), area


def tet_rest_frames(x: np.ndarray, tets: np.ndarray, first_index: int = 0):
    """Inverse rest edge matrices (E, 3, 3) and rest volumes (E,); rejects inverted or flat tets."""
    Dm = np.stack([x[tets[:, k]] - x[tets[:, 0]] for k in (1, 2, 3)], axis=2)
    volume = np.linalg.det(Dm) / 6.0
    flat = np.abs(volume) <= DEGENERATE_RATIO * _longest_edge(x, tets) ** 3
    bad = np.flatnonzero(flat | (volume < 0))
    if bad.size:
        i = bad[0]
        what = "zero volume" if flat[i] else f"inverted (signed rest volume {volume[i]:.3g} m^3)"
        raise ValueError(f"tetrahedron {first_index + i}: {what} (particles {tets[i].tolist()})")
    return np.linalg.inv(Dm), volume


def hinges_from_triangles(tris: np.ndarray) -> np.ndarray:
    """Bending hinges (B, 4) = (opposite A, opposite B, edge start, edge end) of interior edges.

    Triangle A = (opposite A, edge start, edge end) and triangle B = (opposite B, edge end,
    edge start) in winding order, matching ``wpsim.kernels.cloth.dihedral_angle``.
    """
    directed = {}
    for tri in tris:
        for k in range(3):
            a, b, c = int(tri[k]), int(tri[(k + 1) % 3]), int(tri[(k + 2) % 3])
            directed[(b, c)] = a
    hinges = []
    for (p, q), opposite_a in directed.items():
        opposite_b = directed.get((q, p))
        if opposite_b is not None and p < q:
            hinges.append((opposite_a, opposite_b, p, q))
    return np.array(hinges, dtype=np.int64).reshape(-1, 4)


def dihedral_angles(x: np.ndarray, hinges: np.ndarray) -> np.ndarray:
    """Signed dihedral angles (rad) of hinges, same convention as the bending kernel."""
    x0, x1, x2, x3 = (x[hinges[:, k]] for k in range(4))
    n1 = np.cross(x2 - x0, x3 - x0)
    n2 = np.cross(x3 - x1, x2 - x1)
    n1 /= np.linalg.norm(n1, axis=1, keepdims=True)
    n2 /= np.linalg.norm(n2, axis=1, keepdims=True)
    e = (x3 - x2) / np.linalg.norm(x3 - x2, axis=1, keepdims=True)
    return np.arctan2(np.einsum("ij,ij->i", np.cross(n1, n2), e), np.einsum("ij,ij->i", n1, n2))


def grid_points(counts, spacing) -> np.ndarray:
    """Vertices of a regular grid, x fastest: counts (nx, ny[, nz]) points, spacing per axis."""
    axes = [np.arange(n, dtype=np.float64) * h for n, h in zip(counts, spacing)]
    mesh = np.meshgrid(*axes, indexing="ij")
    pts = np.stack([m.transpose().ravel() for m in mesh], axis=1)
    if pts.shape[1] == 2:
        pts = np.hstack([pts, np.zeros((len(pts), 1))])
    return pts


def grid_triangles(nx: int, ny: int) -> np.ndarray:
    """Counter-clockwise triangles (2 per cell) of an nx x ny cell grid of (nx+1)(ny+1) points."""
    tris = []
    for j in range(ny):
        for i in range(nx):
            a = j * (nx + 1) + i
            b, c, d = a + 1, a + nx + 1, a + nx + 2
            tris += [(a, b, d), (a, d, c)]
    return np.array(tris, dtype=np.int64)


_CUBE_TETS = ((0, 1, 3, 7), (0, 1, 7, 5), (0, 5, 7, 4), (0, 3, 2, 7), (0, 2, 6, 7), (0, 6, 4, 7))


def grid_tetrahedra(nx: int, ny: int, nz: int) -> np.ndarray:
    """Positively oriented tetrahedra (6 per cell, conforming) of an nx x ny x nz cell grid."""
    px, py = nx + 1, ny + 1
    tets = []
    for k in range(nz):
        for j in range(ny):
            for i in range(nx):
                corner = [
                    (k + dz) * px * py + (j + dy) * px + (i + dx)
                    for dz in (0, 1) for dy in (0, 1) for dx in (0, 1)
                ]
                tets += [tuple(corner[c] for c in tet) for tet in _CUBE_TETS]
    return np.array(tets, dtype=np.int64)


def lumped_masses(count: int, elements: np.ndarray, measures: np.ndarray, density) -> np.ndarray:
    """Particle masses (kg): each element's density * measure shared equally by its vertices."""
    mass = np.zeros(count)
    share = np.broadcast_to(np.asarray(density, dtype=np.float64), measures.shape) * measures / elements.shape[1]
    for k in range(elements.shape[1]):
        np.add.at(mass, elements[:, k], share)
    return mass


TET_FACES = ((1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1))
"""Vertex triples of a positively oriented tetrahedron's faces, counter-clockwise seen from outside."""


def face_smoothing_domains(tets: np.ndarray, smoothed: np.ndarray) -> tuple:
    """Strain-smoothing domains of the tets (E, 4) flagged ``smoothed`` (E,): one per face of
    a smoothed tet, shared with the smoothed tet across it. Returns (tet_face_domain (E, 4):
    the domain of face k, opposite vertex k, -1 for unsmoothed tets; domain_tets (G, 2): the
    domain's tets, -1 second for a face with one smoothed tet). Raises ValueError naming a
    face that three or more tets share."""
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    chosen = np.flatnonzero(np.asarray(smoothed, dtype=bool))
    face_domain = -np.ones((len(tets), 4), dtype=np.int64)
    if chosen.size == 0:
        return face_domain, np.zeros((0, 2), dtype=np.int64)
    keys = np.sort(np.stack([tets[chosen][:, list(f)] for f in TET_FACES], axis=1), axis=2).reshape(-1, 3)
    _, domain, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    if (counts > 2).any():
        face = keys[np.flatnonzero(counts[domain] > 2)[0]]
        raise ValueError(f"tetrahedron face {tuple(int(v) for v in face)} is shared by {counts.max()} tetrahedra "
                         "(at most 2 in a valid mesh)")
    face_domain[chosen] = domain.reshape(-1, 4)
    order = np.argsort(domain, kind="stable")
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    owner = chosen[order // 4]
    domain_tets = np.stack([owner[first], np.where(counts == 2, owner[np.minimum(first + 1, len(owner) - 1)], -1)],
                           axis=1)
    return face_domain, domain_tets


def boundary_faces(tets: np.ndarray, edge_nodes: np.ndarray | None = None) -> np.ndarray:
    """Faces (F, 3) used by exactly one tetrahedron of ``tets`` (E, 4), oriented outward. With
    ``edge_nodes`` (E, 6; -1 rows for linear tets), a quadratic tet's face is split at its
    edge nodes into four triangles, so that the surface follows the curved element."""
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    faces = np.concatenate([tets[:, list(f)] for f in TET_FACES])
    keys = np.sort(faces, axis=1)
    _, first, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
    chosen = np.sort(first[counts == 1])
    if edge_nodes is None or not len(chosen):
        return faces[chosen]
    edge_nodes = np.asarray(edge_nodes, dtype=np.int64).reshape(-1, 6)
    owner, face = chosen % len(tets), chosen // len(tets)
    out = []
    for t, k, (a, b, c) in zip(owner, face, faces[chosen]):
        if edge_nodes[t, 0] < 0:
            out.append((a, b, c))
            continue
        i, j, l = TET_FACES[k]
        ab, bc, ca = (edge_nodes[t, _EDGE_OF[frozenset(e)]] for e in ((i, j), (j, l), (l, i)))
        out += [(a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca)]
    return np.array(out, dtype=np.int64).reshape(-1, 3)


_EDGE_OF = {frozenset(e): k for k, e in enumerate(TET_EDGES)}
"""The index in ``TET_EDGES`` of each vertex pair of a tetrahedron."""


def edge_midpoint_nodes(x: np.ndarray, tets: np.ndarray) -> tuple:
    """Edge nodes for quadratic tets: (positions (V + M, 3) m: ``x`` then the midpoints of the M
    distinct edges of ``tets`` (E, 4); edge nodes (E, 6), indices into those positions, in
    ``TET_EDGES`` order). Tets sharing an edge share its node."""
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    pairs = np.sort(np.stack([tets[:, list(e)] for e in TET_EDGES], axis=1), axis=2)
    unique, inverse = np.unique(pairs.reshape(-1, 2), axis=0, return_inverse=True)
    midpoints = 0.5 * (x[unique[:, 0]] + x[unique[:, 1]])
    return np.concatenate([x, midpoints]), inverse.reshape(-1, 6) + len(x)


MIDPOINT_TOLERANCE = 1e-3
"""How far (a fraction of its edge's length) a quadratic tet's edge node may sit from the
midpoint of the edge: farther, the element is curved, which wpsim's quadratic tets are not."""


def ordered_edge_nodes(x: np.ndarray, nodes: np.ndarray, first_index: int = 0) -> tuple:
    """(vertices (E, 4), edge nodes (E, 6) in ``TET_EDGES`` order) of 10-node tets ``nodes``
    (E, 10): four vertices, then six edge nodes in any file's order, each matched to the edge
    whose midpoint it sits at. ValueError names a tet whose edge node is at no edge's midpoint."""
    nodes = np.asarray(nodes, dtype=np.int64).reshape(-1, 10)
    vertices = nodes[:, :4]
    midpoints = np.stack([0.5 * (x[vertices[:, i]] + x[vertices[:, j]]) for i, j in TET_EDGES], axis=1)
    lengths = np.stack([np.linalg.norm(x[vertices[:, i]] - x[vertices[:, j]], axis=1) for i, j in TET_EDGES], axis=1)
    given = x[nodes[:, 4:]]
    distance = np.linalg.norm(given[:, :, None, :] - midpoints[:, None, :, :], axis=3) / lengths[:, None, :]
    match = distance.argmin(axis=2)
    bad = np.flatnonzero((np.sort(match, axis=1) != np.arange(6)).any(axis=1)
                         | (distance.min(axis=2) > MIDPOINT_TOLERANCE).any(axis=1))
    if bad.size:
        t = bad[0]
        raise ValueError(f"tetrahedron {first_index + t}: its nodes 4-9 ({nodes[t, 4:].tolist()}) are not the midpoints "
                         f"of its six edges (curved or misnumbered quadratic tets are not supported)")
    edge_nodes = np.empty_like(nodes[:, 4:])
    np.put_along_axis(edge_nodes, match, nodes[:, 4:], axis=1)
    return vertices, edge_nodes


def check_edge_nodes(x: np.ndarray, tets: np.ndarray, edge_nodes: np.ndarray, first_index: int = 0):
    """Raise ValueError naming the first quadratic tet (rows of ``edge_nodes`` >= 0) whose edge
    node is not at its edge's midpoint (``MIDPOINT_TOLERANCE``) or is one of its vertices."""
    quadratic = np.flatnonzero(edge_nodes[:, 0] >= 0)
    if (edge_nodes[quadratic] < 0).any():
        t = quadratic[np.flatnonzero((edge_nodes[quadratic] < 0).any(axis=1))[0]]
        raise ValueError(f"tetrahedron {first_index + t}: edge nodes must be all six particles or all -1")
    for k, (i, j) in enumerate(TET_EDGES):
        a, b, m = x[tets[quadratic, i]], x[tets[quadratic, j]], x[edge_nodes[quadratic, k]]
        off = np.linalg.norm(m - 0.5 * (a + b), axis=1) / np.linalg.norm(b - a, axis=1)
        bad = np.flatnonzero(off > MIDPOINT_TOLERANCE)
        if bad.size:
            t = quadratic[bad[0]]
            raise ValueError(f"tetrahedron {first_index + t}: edge node {edge_nodes[t, k]} is {off[bad[0]]:.3g} of its "
                             f"edge's length off the midpoint of particles {tets[t, i]} and {tets[t, j]} (quadratic tets "
                             "must be straight-edged)")


QUADRATIC_MASS_SHARES = (1.0 / 36.0, 4.0 / 27.0)
"""Mass of a quadratic tet on each vertex and on each edge node, as fractions of its mass: the
diagonal of its consistent mass matrix (6 and 32 / 420) scaled to the total (HRZ lumping),
positive where summing rows would give the vertices negative masses."""


def quadratic_lumped_masses(count: int, tets: np.ndarray, edge_nodes: np.ndarray, volumes: np.ndarray,
                            density) -> np.ndarray:
    """Particle masses (kg) of quadratic tets: each tet's density * volume shared by
    ``QUADRATIC_MASS_SHARES``."""
    mass = np.zeros(count)
    element = np.broadcast_to(np.asarray(density, dtype=np.float64), volumes.shape) * volumes
    vertex_share, edge_share = QUADRATIC_MASS_SHARES
    for k in range(4):
        np.add.at(mass, tets[:, k], element * vertex_share)
    for k in range(6):
        np.add.at(mass, edge_nodes[:, k], element * edge_share)
    return mass


def _lathe(profile: np.ndarray, segments: int) -> tuple:
    """(vertices, faces) of the closed surface swept by a (radius, z) profile from the bottom
    pole (radius 0) to the top pole (radius 0) about the z axis; faces point outward."""
    angles = 2.0 * np.pi * np.arange(segments) / segments
    rings = profile[1:-1]
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    ring_points = np.concatenate([np.column_stack([r * circle, np.full(segments, z)]) for r, z in rings])
    vertices = np.vstack([[0.0, 0.0, profile[0, 1]], ring_points, [0.0, 0.0, profile[-1, 1]]])
    top, k = len(vertices) - 1, np.arange(segments)
    nxt = (k + 1) % segments
    faces = [np.column_stack([np.zeros(segments, int), 1 + nxt, 1 + k])]  # bottom fan
    for i in range(len(rings) - 1):
        a, b = 1 + i * segments, 1 + (i + 1) * segments
        faces += [np.column_stack([a + k, a + nxt, b + nxt]), np.column_stack([a + k, b + nxt, b + k])]
    last = 1 + (len(rings) - 1) * segments
    faces.append(np.column_stack([last + k, last + nxt, np.full(segments, top)]))  # top fan
    return vertices, np.concatenate(faces).astype(np.int64)


def primitive_surface(kind: str, size, segments: int = 24) -> tuple:
    """(vertices (V, 3) m, faces (F, 3)) of a closed, outward-facing triangle surface of a
    primitive about its own frame, for drawing: "sphere" (radius), "ellipsoid" (semi-axes),
    "capsule" and "cylinder" (radius, half length of the axis or cylinder along z), "box"
    (half extents)."""
    size = np.asarray(size, dtype=np.float64)
    if kind == "box":
        corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * size[:3]
        faces = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                 [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
        return corners, np.array(faces, np.int64)
    if kind == "cylinder":
        r, h = size[0], size[1]
        return _lathe(np.array([[0.0, -h], [r, -h], [r, h], [0.0, h]]), segments)
    half = size[1] if kind == "capsule" else 0.0
    theta = np.linspace(-0.5 * np.pi, 0.5 * np.pi, segments // 2 + 1)
    arc = np.column_stack([np.cos(theta), np.sin(theta)])
    arc[[0, -1], 0] = 0.0
    if kind == "capsule":
        lower, upper = arc[: len(arc) // 2 + 1], arc[len(arc) // 2:]
        profile = np.vstack([lower * size[0] - [0.0, half], upper * size[0] + [0.0, half]])
        return _lathe(profile, segments)
    if kind in ("sphere", "ellipsoid"):
        radii = np.broadcast_to(size[:3] if kind == "ellipsoid" else size[:1], (3,))
        vertices, faces = _lathe(arc, segments)
        return vertices * radii, faces
    raise ValueError(f"primitive_surface: unknown kind {kind!r}")
