"""Reductions over gradient arrays (flat scalar views): non-finite counts, sums of squares,
in-place scaling. Diagnostics only: not differentiated."""

import warp as wp

from .generic import kernel, set_deterministic

set_deterministic(__name__)


@kernel(enable_backward=False)
def count_nonfinite(
    values_in: wp.array(dtype=wp.Float),
    width: int,
    slot: int,
    count_out: wp.array(dtype=int),
    first_out: wp.array(dtype=int),
):
    """Count elements (``width`` consecutive scalars each) holding NaN or Inf into
    count_out[slot]; first_out[slot] becomes the lowest such element index."""
    i = wp.tid()
    bad = int(0)
    for c in range(width):
        if not wp.isfinite(values_in[i * width + c]):
            bad = bad + 1
    if bad > 0:
        wp.atomic_add(count_out, slot, 1)
        wp.atomic_min(first_out, slot, i)


@kernel(enable_backward=False)
def sum_squares(values_in: wp.array(dtype=wp.Float), slot: int, total_out: wp.array(dtype=wp.float64)):
    """total_out[slot] += sum_i values_in[i]^2 (accumulated in float64)."""
    i = wp.tid()
    x = wp.float64(values_in[i])
    wp.atomic_add(total_out, slot, x * x)


@kernel(enable_backward=False)
def sum_squared_change(
    values_in: wp.array(dtype=wp.Float), before_in: wp.array(dtype=wp.Float), slot: int,
    total_out: wp.array(dtype=wp.float64),
):
    """total_out[slot] += sum_i (values_in[i] - before_in[i])^2 (accumulated in float64)."""
    i = wp.tid()
    x = wp.float64(values_in[i] - before_in[i])
    wp.atomic_add(total_out, slot, x * x)


@kernel(enable_backward=False)
def scale_to_norm(sum_squares_in: wp.array(dtype=wp.float64), max_norm: wp.float64,
                  values_out: wp.array(dtype=wp.Float)):
    """values_out *= max_norm / norm (in place) where norm = sqrt(sum_squares_in[0]) is finite
    and above max_norm."""
    i = wp.tid()
    norm = wp.sqrt(sum_squares_in[0])
    if norm > max_norm and wp.isfinite(norm):
        v = values_out[i]
        values_out[i] = v * type(v)(max_norm / norm)
