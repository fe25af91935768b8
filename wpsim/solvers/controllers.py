"""Controllers for ``wpsim.diff.Rollout``: callables ``controller(k, state, control)`` that
fill a step's Control with recorded launches, so gradients reach what they read."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.kernels import controls
from wpsim.kernels.generic import for_precision


class ActivationSchedule:
    """Tet activations from a schedule times a gain: ``control.tet_activation`` of step k is
    ``gain * schedule[k]``.

    Args:
        model: the Model stepped.
        schedule: (T, E) activations (dimensionless, see ``wpsim.kernels.fem``) per step and tet.
        gain: initial gain (dimensionless); ``gain`` is a one-element array with gradients
            when the model has them (a parameter "controller.gain" of ``wpsim.opt``).
    """

    def __init__(self, model, schedule, gain: float = 1.0):
        schedule = np.asarray(schedule, dtype=np.float64)
        if schedule.ndim != 2 or schedule.shape[1] != model.tet_count:
            raise ValueError(f"activation schedule must be (steps, {model.tet_count} tets), got {schedule.shape}")
        if not np.isfinite(schedule).all():
            raise ValueError("activation schedule holds non-finite values")
        self.model, self.steps = model, schedule.shape[0]
        self.schedule = wp.array(schedule, dtype=model.dtype, device=model.device)
        self.gain = wp.array([gain], dtype=model.dtype, device=model.device, requires_grad=model.requires_grad)
        self._kernel = for_precision(controls.scaled_schedule, model.dtype)

    def __call__(self, k: int, state, control):
        """Fill ``control.tet_activation`` for step ``k``."""
        if not 0 <= k < self.steps:
            raise ValueError(f"step {k} is outside the activation schedule's {self.steps} steps")
        wp.launch(self._kernel, dim=self.model.tet_count, inputs=[self.schedule, self.gain, k],
                  outputs=[control.tet_activation], device=self.model.device)
