"""Differentiable scalar losses of states; each returns (or adds into) a one-element array."""

from __future__ import annotations

import warp as wp

from .kernels import losses
from .kernels.generic import for_precision
from .model import State


def _scalar_type(arr: wp.array):
    """Scalar precision of a vector array."""
    return arr.dtype._wp_scalar_type_


def _loss_array(like: wp.array, loss: wp.array | None) -> wp.array:
    if loss is not None:
        return loss
    return wp.zeros(1, dtype=_scalar_type(like), device=like.device, requires_grad=like.requires_grad)


def squared_distance(
    points: wp.array, targets: wp.array, axis_weights=(1.0, 1.0, 1.0), loss: wp.array | None = None
) -> wp.array:
    """sum_i sum_k axis_weights[k] (points[i] - targets[i])[k]^2 (m^2), added into ``loss``
    (new if None). axis_weights (1, 1, 0) measures horizontal distance only (z up)."""
    if points.shape != targets.shape:
        raise ValueError(f"squared_distance: points {points.shape} and targets {targets.shape} differ in shape")
    loss = _loss_array(points, loss)
    real = _scalar_type(points)
    wp.launch(for_precision(losses.squared_distance_loss, real), dim=points.shape[0],
              inputs=[points, targets, wp.types.vector(3, real)(*axis_weights)], outputs=[loss], device=points.device)
    return loss


def linear_state_loss(state: State, weight_q: wp.array, weight_qd: wp.array, loss: wp.array | None = None) -> wp.array:
    """sum_i weight_q[i] . x_i + weight_qd[i] . v_i, added into ``loss`` (new if None)."""
    loss = _loss_array(state.particle_q, loss)
    real = _scalar_type(state.particle_q)
    wp.launch(for_precision(losses.linear_state_loss, real), dim=state.particle_q.shape[0],
              inputs=[state.particle_q, state.particle_qd, weight_q, weight_qd], outputs=[loss],
              device=state.particle_q.device)
    return loss
