"""Unrecorded replays of a measured robot run (a ``wpsim.opt.sysid.RobotRun``: its model,
first state and table of measured joint forces) for system identification's difference
Jacobians (``wpsim.opt.sysid``, ``wpsim.opt.shooting``)."""

from __future__ import annotations

import numpy as np

DIFFERENCE_STEPS = {"forward": 1.5e-8, "central": 1e-5}
"""Steps of the "differences" Jacobian, in units of each parameter's scale (relative for
log-space parameters): forward (n + 1 worlds) about sqrt(eps), an error of about 1e-8
relative; central (2n + 1 worlds) about eps^(1/3), an error of about 1e-10 relative."""


class MeasuredReplay:
    """Unrecorded replays of a ``RobotRun`` with the model's current parameters:
    ``SemiImplicitSolver.replay`` of the measured joint forces and servo targets (one launch per rollout with
    the fused articulation step), from ``run.state0``; ``threads``: the solver's (default
    every core: less wall time for many worlds, a little more CPU time)."""

    def __init__(self, run, threads: int | None = None):
        self.run = run
        model = run.model
        self.solver = run.solver(threads)
        self.forces, self.targets = run.input_arrays()
        self.control = run.control()
        self.state = model.state(requires_grad=False)
        self.columns = run.world_rows(run.coords, model.joint_coord_count).reshape(run.worlds, -1)

    def angles(self) -> np.ndarray:
        """(steps + 1, worlds, joints) the measured joints' simulated angles (rad or m)."""
        self.state.assign(self.run.state0)
        self.solver.refresh_inverse_weights()  # the parameters just written may change them
        q = self.solver.replay(self.state, self.forces, self.run.dt, self.control,
                               joint_target_steps=self.targets)[0].numpy()
        return q[:, self.columns]
