"""Scalar losses of simulation states, accumulated into a one-element array."""

import warp as wp

from .generic import kernel, set_deterministic, transform, vec3

set_deterministic(__name__)


@kernel
def squared_distance_loss(
    points_in: wp.array(dtype=vec3),
    targets_in: wp.array(dtype=vec3),
    axis_weights: vec3,
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out += sum_k axis_weights[k] * (points_in[i] - targets_in[i])[k]^2 (m^2)."""
    i = wp.tid()
    d = points_in[i] - targets_in[i]
    wp.atomic_add(loss_out, 0, wp.dot(wp.cw_mul(d, d), axis_weights))


@kernel
def linear_state_loss(
    particle_q_in: wp.array(dtype=vec3),
    particle_qd_in: wp.array(dtype=vec3),
    weight_q_in: wp.array(dtype=vec3),
    weight_qd_in: wp.array(dtype=vec3),
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out += sum_i weight_q_in[i] . x_i + weight_qd_in[i] . v_i (a generic probe of a state)."""
    i = wp.tid()
    wp.atomic_add(loss_out, 0, wp.dot(weight_q_in[i], particle_q_in[i]) + wp.dot(weight_qd_in[i], particle_qd_in[i]))


@kernel
def weighted_sum_loss(
    values_in: wp.array(dtype=wp.Float),
    weights_in: wp.array(dtype=wp.Float),
    slots_in: wp.array(dtype=wp.int32),
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out[slots_in[i]] += weights_in[i] * values_in[i]."""
    i = wp.tid()
    wp.atomic_add(loss_out, slots_in[i], weights_in[i] * values_in[i])


@kernel
def body_position_loss(
    body_q_in: wp.array(dtype=transform),
    bodies_in: wp.array(dtype=int),
    targets_in: wp.array(dtype=vec3),
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out += |origin of body bodies_in[i] - targets_in[i]|^2 (m^2)."""
    i = wp.tid()
    d = wp.transform_get_translation(body_q_in[bodies_in[i]]) - targets_in[i]
    wp.atomic_add(loss_out, 0, wp.dot(d, d))


@kernel
def weighted_squared_error_loss(
    values_in: wp.array(dtype=wp.Float),
    targets_in: wp.array(dtype=wp.Float),
    weights_in: wp.array(dtype=wp.Float),
    slots_in: wp.array(dtype=wp.int32),
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out[slots_in[i]] += weights_in[i] * (values_in[i] - targets_in[i])^2."""
    i = wp.tid()
    d = values_in[i] - targets_in[i]
    wp.atomic_add(loss_out, slots_in[i], weights_in[i] * d * d)


@kernel
def weighted_vector_error_loss(
    values_in: wp.array(dtype=vec3),
    targets_in: wp.array(dtype=vec3),
    weights_in: wp.array(dtype=vec3),
    slots_in: wp.array(dtype=wp.int32),
    loss_out: wp.array(dtype=wp.Float),
):
    """loss_out[slots_in[i]] += sum_k weights_in[i][k] * (values_in[i] - targets_in[i])[k]^2."""
    i = wp.tid()
    d = values_in[i] - targets_in[i]
    wp.atomic_add(loss_out, slots_in[i], wp.dot(weights_in[i], wp.cw_mul(d, d)))
