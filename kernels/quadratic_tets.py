"""Quadratic (10-node) tetrahedra: shape functions and quadrature.

A quadratic tet has its four vertices and one node at the midpoint of each edge, in the
order of ``TET_EDGES``. Its rest shape is straight-edged (the edge nodes at the midpoints of
the rest edges), so the map from barycentric to rest coordinates is affine and the rest
edge matrix Dm of the vertices, with its inverse and the rest volume, describes it as it
describes a linear tet. With barycentric coordinates l0..l3 (their rest-space gradients:
the rows of Dm^-1 for l1, l2, l3, minus their sum for l0), the shape functions are
    vertex i:     N = li (2 li - 1),    grad N = (4 li - 1) grad li,
    edge (i, j):  N = 4 li lj,          grad N = 4 (li grad lj + lj grad li),
and the deformation gradient at a point is F = sum_a x_a (x) grad N_a: linear across the
element, so it bends where a linear tet can only shear. Element integrals use the
symmetric 4-point rule (point q at barycentric coordinate ``QUADRATURE_NEAR`` towards vertex
q, ``QUADRATURE_FAR`` towards the others, weight volume / 4), exact for quadratic
integrands: the stiffness of small strains is integrated exactly.
"""

import warp as wp

from .generic import mat33, vec3

TET_EDGES = ((0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))
"""The vertex pairs of a tetrahedron's edges: the order of a quadratic tet's edge nodes."""

QUADRATURE_NEAR = 0.5854101966249685
"""Barycentric coordinate of quadrature point q towards vertex q: (5 + 3 sqrt 5) / 20."""
QUADRATURE_FAR = 0.1381966011250105
"""Barycentric coordinate of quadrature point q towards each other vertex: (5 - sqrt 5) / 20."""

_edge_first = wp.constant(wp.types.vector(6, wp.int32)(*(i for i, _ in TET_EDGES)))
_edge_second = wp.constant(wp.types.vector(6, wp.int32)(*(j for _, j in TET_EDGES)))


@wp.func
def tet_node(t: int, node: int, tet_indices: wp.array2d(dtype=int), tet_edge_indices: wp.array2d(dtype=int)):
    """Particle of node ``node`` of tet ``t``: vertices 0-3, then the edge nodes 4-9."""
    if node < 4:
        return tet_indices[t, node]
    return tet_edge_indices[t, node - 4]


@wp.func
def quadrature_point(point: int, like: wp.Float):
    """Barycentric coordinates of quadrature point ``point`` (0-3), at the precision of ``like``."""
    near = type(like)(QUADRATURE_NEAR)
    far = type(like)(QUADRATURE_FAR)
    return wp.vector(wp.where(point == 0, near, far), wp.where(point == 1, near, far), wp.where(point == 2, near, far),
                     wp.where(point == 3, near, far))


@wp.func
def quadratic_shape_value(node: int, weights: wp.types.vector(4, wp.Float)):
    """Shape function of ``node`` (0-9) at barycentric coordinates ``weights``."""
    if node < 4:
        return weights[node] * (type(weights[0])(2.0) * weights[node] - type(weights[0])(1.0))
    return type(weights[0])(4.0) * weights[_edge_first[node - 4]] * weights[_edge_second[node - 4]]


@wp.func
def quadratic_node_offsets(t: int, tet_indices: wp.array2d(dtype=int), tet_edge_indices: wp.array2d(dtype=int),
                           x: wp.array(dtype=vec3)):
    """The node values of quadratic tet ``t`` relative to vertex 0 (a shift the deformation
    does not see, which keeps float32 precise far from the origin), as the rows of three
    matrices: vertices 1-3, edge nodes 0-2 and edge nodes 3-5 (``TET_EDGES`` order)."""
    x0 = x[tet_indices[t, 0]]
    vertices = wp.matrix_from_rows(x[tet_indices[t, 1]] - x0, x[tet_indices[t, 2]] - x0, x[tet_indices[t, 3]] - x0)
    edges_a = wp.matrix_from_rows(x[tet_edge_indices[t, 0]] - x0, x[tet_edge_indices[t, 1]] - x0,
                                  x[tet_edge_indices[t, 2]] - x0)
    edges_b = wp.matrix_from_rows(x[tet_edge_indices[t, 3]] - x0, x[tet_edge_indices[t, 4]] - x0,
                                  x[tet_edge_indices[t, 5]] - x0)
    return vertices, edges_a, edges_b


@wp.func
def quadratic_deformation(vertices: mat33, edges_a: mat33, edges_b: mat33, l: wp.types.vector(4, wp.Float),
                          Dm_inv: mat33):
    """F = sum_a x_a (x) grad N_a at barycentric coordinates ``l`` of a quadratic tet whose
    node values are ``quadratic_node_offsets``: with y_k = dx/dl_k (vertex k times 4 l_k - 1,
    plus 4 l_j times the edge node between k and j), F = [y1 - y0, y2 - y0, y3 - y0] Dm^-1."""
    one = type(l[0])(1.0)
    four = type(l[0])(4.0)
    y0 = (edges_a[0] * l[1] + edges_a[2] * l[2] + edges_b[0] * l[3]) * four
    y1 = vertices[0] * (four * l[1] - one) + (edges_a[0] * l[0] + edges_a[1] * l[2] + edges_b[1] * l[3]) * four
    y2 = vertices[1] * (four * l[2] - one) + (edges_a[2] * l[0] + edges_a[1] * l[1] + edges_b[2] * l[3]) * four
    y3 = vertices[2] * (four * l[3] - one) + (edges_b[0] * l[0] + edges_b[1] * l[1] + edges_b[2] * l[2]) * four
    return wp.matrix_from_cols(y1 - y0, y2 - y0, y3 - y0) * Dm_inv


@wp.func
def quadratic_point_forces(stress_rows: mat33, l: wp.types.vector(4, wp.Float)):
    """Nodal forces of one quadrature point whose weighted stress, mapped to the barycentric
    rates (rows g1-g3 of w Dm^-1 P^T; g0 = -(g1 + g2 + g3)), is ``stress_rows``: vertex i gets
    g_i (4 l_i - 1), edge node (i, j) 4 (g_i l_j + g_j l_i). Returns vertex 0's force and
    three matrices of rows laid out as ``quadratic_node_offsets``."""
    one = type(l[0])(1.0)
    four = type(l[0])(4.0)
    g1 = stress_rows[0]
    g2 = stress_rows[1]
    g3 = stress_rows[2]
    g0 = -(g1 + g2 + g3)
    vertices = wp.matrix_from_rows(g1 * (four * l[1] - one), g2 * (four * l[2] - one), g3 * (four * l[3] - one))
    edges_a = wp.matrix_from_rows((g0 * l[1] + g1 * l[0]) * four, (g1 * l[2] + g2 * l[1]) * four,
                                  (g0 * l[2] + g2 * l[0]) * four)
    edges_b = wp.matrix_from_rows((g0 * l[3] + g3 * l[0]) * four, (g1 * l[3] + g3 * l[1]) * four,
                                  (g2 * l[3] + g3 * l[2]) * four)
    return g0 * (four * l[0] - one), vertices, edges_a, edges_b
