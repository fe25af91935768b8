"""Differentiable scalar losses of states; each returns (or adds into) a loss array (one
element unless the loss names slots)."""

from __future__ import annotations

import warp as wp

from wpsim.core.model import State
from wpsim.kernels import losses
from wpsim.kernels.generic import for_precision


def _scalar_type(arr: wp.array):
    """Scalar precision of a scalar, vector or transform array."""
    return getattr(arr.dtype, "_wp_scalar_type_", arr.dtype)


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


def joint_state_loss(state: State, weight_q: wp.array, weight_qd: wp.array | None = None,
                     loss: wp.array | None = None, slots_q: wp.array | None = None) -> wp.array:
    """sum_i weight_q[i] q_i + sum_j weight_qd[j] qd_j over joint coordinates and velocities
    (velocities skipped if ``weight_qd`` is None), added into ``loss`` (new if None);
    ``slots_q`` (int32, one per coordinate) names the entry of ``loss`` each coordinate's
    term goes to (default entry 0; the velocity terms go to entry 0)."""
    loss = _loss_array(state.joint_q, loss)
    kernel = for_precision(losses.weighted_sum_loss, state.joint_q.dtype)
    terms = [(state.joint_q, weight_q, slots_q)] + ([] if weight_qd is None else [(state.joint_qd, weight_qd, None)])
    for values, weights, slots in terms:
        n = values.shape[0]
        if values.shape != weights.shape:
            raise ValueError(f"joint_state_loss: weights {weights.shape} differ from values {values.shape}")
        if slots is not None and (slots.shape != (n,) or slots.dtype != wp.int32):
            raise ValueError(f"joint_state_loss: slots must be int32 of shape ({n},), got {slots.dtype} {slots.shape}")
        slots = _first_slot(n, values.device) if slots is None else slots
        wp.launch(kernel, dim=n, inputs=[values, weights, slots], outputs=[loss], device=values.device)
    return loss


def joint_tracking_loss(state: State, target_q: wp.array, weights: wp.array, loss: wp.array | None = None,
                        slots: wp.array | None = None, target_qd: wp.array | None = None,
                        weights_qd: wp.array | None = None) -> wp.array:
    """sum_i weights[i] (q_i - target_q[i])^2 + sum_j weights_qd[j] (qd_j - target_qd[j])^2
    over the joint coordinates and velocities of ``state`` (the quadratic counterpart of
    ``joint_state_loss``; velocities skipped if ``target_qd`` is None), added into ``loss``
    (new if None); weights in loss units per rad^2 (or m^2) and per (rad/s)^2 (or (m/s)^2),
    0 where a value is not measured. ``slots`` (int32, one per coordinate, e.g. its world)
    names the entry of ``loss`` each coordinate's term goes to (default entry 0; the
    velocity terms go to entry 0)."""
    if (target_qd is None) != (weights_qd is None):
        raise ValueError("joint_tracking_loss: give both target_qd and weights_qd, or neither")
    loss = _loss_array(state.joint_q, loss)
    kernel = for_precision(losses.weighted_squared_error_loss, state.joint_q.dtype)
    terms = [(state.joint_q, target_q, weights, slots)]
    terms += [] if target_qd is None else [(state.joint_qd, target_qd, weights_qd, None)]
    for values, targets, weight, slot in terms:
        n = values.shape[0]
        if targets.shape != values.shape or weight.shape != values.shape:
            raise ValueError(f"joint_tracking_loss: targets {targets.shape} and weights {weight.shape} must match the "
                             f"joint values {values.shape}")
        if slot is not None and (slot.shape != (n,) or slot.dtype != wp.int32):
            raise ValueError(f"joint_tracking_loss: slots must be int32 of shape ({n},), got {slot.dtype} {slot.shape}")
        slot = _first_slot(n, values.device) if slot is None else slot
        wp.launch(kernel, dim=n, inputs=[values, targets, weight, slot], outputs=[loss], device=values.device)
    return loss


_FIRST_SLOTS: dict = {}


def _first_slot(count: int, device) -> wp.array:
    """(count,) int32 zeros on ``device``, made once per size and device."""
    key = (count, str(device))
    if key not in _FIRST_SLOTS:
        _FIRST_SLOTS[key] = wp.zeros(count, dtype=wp.int32, device=device)
    return _FIRST_SLOTS[key]


def body_position_loss(state: State, bodies, targets: wp.array, loss: wp.array | None = None) -> wp.array:
    """sum_i |origin of body bodies[i] - targets[i]|^2 (m^2) from ``state.body_q``, added into
    ``loss`` (new if None). In a ``Rollout``'s loss these are the poses of the state's joint
    coordinates; elsewhere call ``wpsim.eval_fk`` first for a state no step started from."""
    index = wp.array(list(bodies), dtype=wp.int32, device=state.body_q.device)
    if targets.shape[0] != index.shape[0]:
        raise ValueError(f"body_position_loss: {index.shape[0]} bodies but {targets.shape[0]} targets")
    real = _scalar_type(state.body_q)
    loss = _loss_array(state.body_q, loss)
    wp.launch(for_precision(losses.body_position_loss, real), dim=index.shape[0],
              inputs=[state.body_q, index, targets], outputs=[loss], device=index.device)
    return loss
