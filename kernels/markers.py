"""World positions of markers: points fixed in rigid bodies or embedded in tetrahedra."""

import warp as wp

from .generic import kernel, transform, vec3
from .quadratic_tets import quadratic_shape_value, tet_node

vec4 = wp.types.vector(4, wp.Float)


@kernel
def body_marker_positions(
    marker_body_in: wp.array(dtype=int),
    marker_point_in: wp.array(dtype=vec3),
    body_q_in: wp.array(dtype=transform),
    marker_q_out: wp.array(dtype=vec3),
):
    """marker_q_out[i] = the body-frame point marker_point_in[i] of body marker_body_in[i] in world (m)."""
    i = wp.tid()
    marker_q_out[i] = wp.transform_point(body_q_in[marker_body_in[i]], marker_point_in[i])


@kernel
def tet_marker_positions(
    tet_indices: wp.array2d(dtype=int),
    tet_edge_indices: wp.array2d(dtype=int),
    marker_tet_in: wp.array(dtype=int),
    marker_weights_in: wp.array(dtype=vec4),
    particle_q_in: wp.array(dtype=vec3),
    marker_q_out: wp.array(dtype=vec3),
):
    """marker_q_out[i] = the point at barycentric coordinates marker_weights_in[i] of
    tetrahedron marker_tet_in[i] (m): the combination of its vertices, or of a quadratic tet's
    ten nodes by their shape functions."""
    i = wp.tid()
    t = marker_tet_in[i]
    w = marker_weights_in[i]
    if tet_edge_indices[t, 0] >= 0:
        q = particle_q_in[tet_indices[t, 0]] * quadratic_shape_value(0, w)
        for node in range(1, 10):
            q = q + particle_q_in[tet_node(t, node, tet_indices, tet_edge_indices)] * quadratic_shape_value(node, w)
        marker_q_out[i] = q
    else:
        marker_q_out[i] = (particle_q_in[tet_indices[t, 0]] * w[0] + particle_q_in[tet_indices[t, 1]] * w[1]
                           + particle_q_in[tet_indices[t, 2]] * w[2] + particle_q_in[tet_indices[t, 3]] * w[3])
