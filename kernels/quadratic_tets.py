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
def barycentric_gradient(k: int, Dm_inv: mat33):
    """Rest-space gradient (1/m) of barycentric coordinate ``k`` of a tetrahedron."""
    if k == 0:
        return -wp.vector(Dm_inv[0, 0] + Dm_inv[1, 0] + Dm_inv[2, 0], Dm_inv[0, 1] + Dm_inv[1, 1] + Dm_inv[2, 1],
                          Dm_inv[0, 2] + Dm_inv[1, 2] + Dm_inv[2, 2])
    return wp.vector(Dm_inv[k - 1, 0], Dm_inv[k - 1, 1], Dm_inv[k - 1, 2])


@wp.func
def quadrature_coordinate(k: int, point: int, like: wp.Float):
    """Barycentric coordinate ``k`` of quadrature point ``point`` (at the precision of ``like``)."""
    if k == point:
        return type(like)(QUADRATURE_NEAR)
    return type(like)(QUADRATURE_FAR)


@wp.func
def quadratic_shape_gradient(node: int, point: int, Dm_inv: mat33):
    """Rest-space gradient (1/m) of the shape function of ``node`` (0-9) at quadrature point ``point`` (0-3)."""
    one = type(Dm_inv[0, 0])(1.0)
    if node < 4:
        li = quadrature_coordinate(node, point, one)
        return barycentric_gradient(node, Dm_inv) * (type(one)(4.0) * li - one)
    i = _edge_first[node - 4]
    j = _edge_second[node - 4]
    return (barycentric_gradient(i, Dm_inv) * quadrature_coordinate(j, point, one)
            + barycentric_gradient(j, Dm_inv) * quadrature_coordinate(i, point, one)) * type(one)(4.0)


@wp.func
def quadratic_shape_value(node: int, weights: wp.types.vector(4, wp.Float)):
    """Shape function of ``node`` (0-9) at barycentric coordinates ``weights``."""
    if node < 4:
        return weights[node] * (type(weights[0])(2.0) * weights[node] - type(weights[0])(1.0))
    return type(weights[0])(4.0) * weights[_edge_first[node - 4]] * weights[_edge_second[node - 4]]


@wp.func
def quadratic_tet_deformation(t: int, point: int, tet_indices: wp.array2d(dtype=int),
                              tet_edge_indices: wp.array2d(dtype=int), Dm_inv: mat33, x: wp.array(dtype=vec3)):
    """F = sum_a x_a (x) grad N_a of quadratic tet ``t`` at quadrature point ``point`` for node
    values ``x`` (taken relative to vertex 0: the gradients sum to zero, and the differences
    keep float32 precise far from the origin)."""
    x0 = x[tet_indices[t, 0]]
    F = wp.outer(x[tet_indices[t, 1]] - x0, quadratic_shape_gradient(1, point, Dm_inv))
    for node in range(2, 10):
        F = F + wp.outer(x[tet_node(t, node, tet_indices, tet_edge_indices)] - x0,
                         quadratic_shape_gradient(node, point, Dm_inv))
    return F
