"""Reductions over gradient arrays (flat scalar views): non-finite counts, sums of squares,
in-place scaling. Diagnostics only: not differentiated."""

import warp as wp

from .generic import kernel, set_deterministic

set_deterministic(__name__)


@kernel(enable_backward=False)
def count_nonfinite(
    values: wp.array(dtype=wp.Float),
    width: int,
    slot: int,
    count: wp.array(dtype=int),
    first: wp.array(dtype=int),
):
    """Count elements (``width`` consecutive scalars each) holding NaN or Inf into count[slot];
    first[slot] becomes the lowest such element index."""
    i = wp.tid()
    bad = int(0)
    for c in range(width):
        if not wp.isfinite(values[i * width + c]):
            bad = bad + 1
    if bad > 0:
        wp.atomic_add(count, slot, 1)
        wp.atomic_min(first, slot, i)


@kernel(enable_backward=False)
def sum_squares(values: wp.array(dtype=wp.Float), slot: int, out: wp.array(dtype=wp.float64)):
    """out[slot] += sum_i values[i]^2 (accumulated in float64)."""
    i = wp.tid()
    x = wp.float64(values[i])
    wp.atomic_add(out, slot, x * x)


@kernel(enable_backward=False)
def sum_squared_change(
    values: wp.array(dtype=wp.Float), before: wp.array(dtype=wp.Float), slot: int, out: wp.array(dtype=wp.float64)
):
    """out[slot] += sum_i (values[i] - before[i])^2 (accumulated in float64)."""
    i = wp.tid()
    x = wp.float64(values[i] - before[i])
    wp.atomic_add(out, slot, x * x)


@kernel(enable_backward=False)
def scale_to_norm(sum_squares: wp.array(dtype=wp.float64), max_norm: wp.float64, values: wp.array(dtype=wp.Float)):
    """values *= max_norm / norm where norm = sqrt(sum_squares[0]) is finite and above max_norm."""
    i = wp.tid()
    norm = wp.sqrt(sum_squares[0])
    if norm > max_norm and wp.isfinite(norm):
        v = values[i]
        values[i] = v * type(v)(max_norm / norm)
