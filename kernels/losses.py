"""Scalar losses of simulation states, accumulated into a one-element array."""

import warp as wp

from .generic import kernel, set_deterministic, transform, vec3

set_deterministic(__name__)


@kernel
def squared_distance_loss(
    points: wp.array(dtype=vec3),
    targets: wp.array(dtype=vec3),
    axis_weights: vec3,
    loss: wp.array(dtype=wp.Float),
):
    """loss += sum_k axis_weights[k] * (points[i] - targets[i])[k]^2 (m^2)."""
    i = wp.tid()
    d = points[i] - targets[i]
    wp.atomic_add(loss, 0, wp.dot(wp.cw_mul(d, d), axis_weights))


@kernel
def linear_state_loss(
    particle_q: wp.array(dtype=vec3),
    particle_qd: wp.array(dtype=vec3),
    weight_q: wp.array(dtype=vec3),
    weight_qd: wp.array(dtype=vec3),
    loss: wp.array(dtype=wp.Float),
):
    """loss += sum_i weight_q[i] . x_i + weight_qd[i] . v_i (a generic probe of a state)."""
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(weight_q[i], particle_q[i]) + wp.dot(weight_qd[i], particle_qd[i]))


@kernel
def weighted_sum_loss(values: wp.array(dtype=wp.Float), weights: wp.array(dtype=wp.Float), loss: wp.array(dtype=wp.Float)):
    """loss += sum_i weights[i] * values[i]."""
    i = wp.tid()
    wp.atomic_add(loss, 0, weights[i] * values[i])


@kernel
def body_position_loss(
    body_q: wp.array(dtype=transform),
    bodies: wp.array(dtype=int),
    targets: wp.array(dtype=vec3),
    loss: wp.array(dtype=wp.Float),
):
    """loss += |origin of body bodies[i] - targets[i]|^2 (m^2)."""
    i = wp.tid()
    d = wp.transform_get_translation(body_q[bodies[i]]) - targets[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))
