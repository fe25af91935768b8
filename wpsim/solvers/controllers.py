"""Controllers for ``wpsim.diff.Rollout``: callables ``controller(k, state, control)`` that
fill a step's Control with recorded launches, so gradients reach what they read."""

from __future__ import annotations

import itertools

import numpy as np
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS
from wpsim.kernels import controls
from wpsim.kernels.generic import for_precision


def step_controls(model, field: str, steps: int) -> tuple:
    """A per-step table of one Control field and the Controls that read it: (table
    (steps, n) with gradients, one Control per step whose ``field`` is that step's row). The
    rows are views, so the gradient of every step lands in ``table.grad``; fill the table
    (``table.assign``) before each rollout."""
    spec = next((s for s in CONTROL_FIELDS if s.name == field), None)
    if spec is None:
        raise ValueError(f"step_controls: no Control field {field!r}; known: {[s.name for s in CONTROL_FIELDS]}")
    count = getattr(model.control(), field).shape[0]
    table = wp.zeros((steps, count), dtype=model.dtype, device=model.device, requires_grad=True)
    controls = []
    for k in range(steps):
        control = model.control(requires_grad=False)
        setattr(control, field, table[k])
        controls.append(control)
    return table, controls


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


def _gain_blocks(model, gains, name: str) -> np.ndarray:
    """(articulation_H_size,) blocks of a (D,) diagonal or (D, D) gain matrix, laid out like
    the joint-space mass matrix; entries coupling dofs of different articulations are refused."""
    dofs = model.joint_dof_count
    gains = np.zeros(dofs) if gains is None else np.asarray(gains, dtype=np.float64)
    if gains.shape == (dofs,):
        gains = np.diag(gains)
    if gains.shape != (dofs, dofs) or not np.isfinite(gains).all():
        raise ValueError(f"{name} must be finite, ({dofs},) or ({dofs}, {dofs}) for the model's dofs, got "
                         f"{gains.shape}")
    starts = model.articulation_dof_start.numpy()
    blocks, inside = [], np.zeros_like(gains, dtype=bool)
    for d0, d1 in itertools.pairwise(starts):
        blocks.append(gains[d0:d1, d0:d1].ravel())
        inside[d0:d1, d0:d1] = True
    if np.any(gains[~inside] != 0.0):
        raise ValueError(f"{name} couples dofs of different articulations")
    return np.concatenate(blocks) if blocks else np.zeros(0)


class JointPDController:
    """Joint drive references and PD torques: at step k (time t = k dt, row r = k of the
    schedules, or 0 for one-row schedules held for every step), per dof i

        q*_i  = target_q[r, i]  + amplitude_i sin(2 pi f t)            (rad or m)
        qd*_i = target_qd[r, i] + amplitude_i 2 pi f cos(2 pi f t)     (rad/s or m/s)
        control.joint_target_q = q*, control.joint_target_qd = qd*    (the model's drive
            gains joint_target_ke / joint_target_kd act on them: position / velocity servos)
        control.joint_f = feedforward[r] + kp (q* - q) + kd (qd* - qd)   (N m or N)

    with kp, kd matrices over the dofs (coupling only 1-dof joints of one articulation).

    Args:
        model: the Model stepped.
        dt: the time step (s).
        target_q, target_qd, feedforward: (T, D) or (D,) schedules (None: zeros).
        kp, kd: (D,) diagonal or (D, D) gains (N m/rad and N m s/rad, or N/m and N s/m;
            None: zeros, no PD torque).
        amplitude: (D,) sine amplitude (rad or m; None: no sine), frequency: f (Hz).
    Every array is an attribute with gradients when the model has them (``wpsim.opt``
    parameters "controller.kp", ...).
    """

    def __init__(self, model, dt: float, target_q=None, target_qd=None, feedforward=None, kp=None, kd=None,
                 amplitude=None, frequency: float = 0.0):
        if not dt > 0.0 or not np.isfinite(frequency) or frequency < 0.0:
            raise ValueError(f"dt must be > 0 s and frequency >= 0 Hz, got {dt} and {frequency}")
        dofs, grad = model.joint_dof_count, model.requires_grad
        schedules = {}
        for name, values in (("target_q", target_q), ("target_qd", target_qd), ("feedforward", feedforward)):
            values = np.zeros((1, dofs)) if values is None else np.asarray(values, dtype=np.float64)
            values = values.reshape(1, -1) if values.ndim == 1 else values
            if values.ndim != 2 or values.shape[1] != dofs or len(values) == 0 or not np.isfinite(values).all():
                raise ValueError(f"{name} must be finite, (steps, {dofs} dofs) or ({dofs},), got {values.shape}")
            schedules[name] = values
        self.steps = max(len(v) for v in schedules.values())
        if any(len(v) not in (1, self.steps) for v in schedules.values()):
            raise ValueError(f"schedules of different lengths {[len(v) for v in schedules.values()]}")
        amplitude = np.zeros(dofs) if amplitude is None else np.asarray(amplitude, dtype=np.float64)
        if amplitude.shape != (dofs,) or not np.isfinite(amplitude).all():
            raise ValueError(f"amplitude must be finite and ({dofs},), got {amplitude.shape}")

        def array(values):
            return wp.array(np.ascontiguousarray(values), dtype=model.dtype, device=model.device, requires_grad=grad)

        self.model, self.dt, self.frequency = model, float(dt), float(frequency)
        self.target_q, self.target_qd, self.feedforward = (array(schedules[n]) for n in schedules)
        self.amplitude = array(amplitude)
        self.kp, self.kd = array(_gain_blocks(model, kp, "kp")), array(_gain_blocks(model, kd, "kd"))
        self._kernel = for_precision(controls.joint_pd_control, model.dtype)

    def __call__(self, k: int, state, control):
        """Fill ``control.joint_f``, ``joint_target_q`` and ``joint_target_qd`` for step ``k``
        from ``state``'s joint coordinates and velocities."""
        if k < 0 or (self.steps > 1 and k >= self.steps):
            raise ValueError(f"step {k} is outside the controller's {self.steps}-step schedule")
        model = self.model
        row = 0 if self.steps == 1 else k
        omega = 2.0 * np.pi * self.frequency
        wave, rate = np.sin(omega * k * self.dt), omega * np.cos(omega * k * self.dt)
        wp.launch(self._kernel, dim=model.joint_dof_count,
                  inputs=[model.joint_type, model.joint_q_start, model.joint_articulation, model.articulation_dof_start,
                          model.articulation_H_start, model.dof_joint, state.joint_q, state.joint_qd, self.target_q,
                          self.target_qd, self.feedforward, self.amplitude, self.kp, self.kd, row, model.real(wave),
                          model.real(rate)],
                  outputs=[control.joint_f, control.joint_target_q, control.joint_target_qd], device=model.device)


def effective_inertia(model, state, dofs) -> tuple:
    """(M (n, n), qdd (n,)) of the joint dofs ``dofs`` at ``state``'s pose with every other dof
    free to move: M^-1 (s^2 / kg m^2 or s^2 / kg) holds their velocity responses to unit
    impulses on them, qdd (rad/s^2 or m/s^2) their accelerations at rest (joint velocities
    zeroed) under gravity, penalty contact and limit forces alone, so -M qdd is the
    generalized force (N m or N) that holds them still there. Measured with n + 1
    semi-implicit steps of 1 us from copies of ``state`` (not recorded)."""
    from wpsim.solvers.semi_implicit import SemiImplicitSolver

    dofs = np.asarray(dofs, dtype=np.int64)
    if dofs.size == 0:
        return np.zeros((0, 0)), np.zeros(0)
    dt, impulse = 1.0e-6, 1.0e-6  # s and N m s (or N s): tau = 1 N m over the step
    solver = SemiImplicitSolver(model)
    start, out = model.state(requires_grad=False), model.state(requires_grad=False)
    control = model.control(requires_grad=False)
    responses = []
    for k in (None, *dofs):
        start.assign(state)
        start.joint_qd.zero_()
        f = np.zeros(model.joint_dof_count)
        if k is not None:
            f[k] = impulse / dt
        control.joint_f.assign(f)
        solver.step(start, out, control, dt)
        responses.append(out.joint_qd.numpy().astype(np.float64)[dofs])
    rest = responses[0]
    inverse = (np.array(responses[1:]) - rest).T / impulse
    inertia = np.linalg.inv(0.5 * (inverse + inverse.T))
    return 0.5 * (inertia + inertia.T), rest / dt
