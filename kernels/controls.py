"""Controls set from schedules: per-step inputs scaled by a gain that may be optimised."""

import warp as wp

from .generic import kernel


@kernel
def scaled_schedule(
    schedule_in: wp.array2d(dtype=wp.Float),
    gain_in: wp.array(dtype=wp.Float),
    step: int,
    values_out: wp.array(dtype=wp.Float),
):
    """values_out[i] = gain_in[0] * schedule_in[step, i]."""
    i = wp.tid()
    values_out[i] = gain_in[0] * schedule_in[step, i]
