"""Controls set from schedules: per-step inputs scaled by a gain that may be optimised, and
joint drive references with PD torques."""

import warp as wp

from .enums import JOINT_PRISMATIC, JOINT_REVOLUTE
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


@wp.func
def sine_reference(
    schedule_in: wp.array2d(dtype=wp.Float), amplitude_in: wp.array(dtype=wp.Float), row: int, i: int,
    wave: wp.Float,
):
    """schedule_in[row, i] + amplitude_in[i] * wave: a dof's reference (rad or m, or its rate)."""
    return schedule_in[row, i] + amplitude_in[i] * wave


@kernel
def joint_pd_control(
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    dof_joint: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    target_q_in: wp.array2d(dtype=wp.Float),
    target_qd_in: wp.array2d(dtype=wp.Float),
    feedforward_in: wp.array2d(dtype=wp.Float),
    amplitude_in: wp.array(dtype=wp.Float),
    kp_in: wp.array(dtype=wp.Float),
    kd_in: wp.array(dtype=wp.Float),
    row: int,
    sine: wp.Float,
    sine_rate: wp.Float,
    joint_f_out: wp.array(dtype=wp.Float),
    joint_target_q_out: wp.array(dtype=wp.Float),
    joint_target_qd_out: wp.array(dtype=wp.Float),
):
    """One thread per dof i: the references q*_i = target_q_in[row, i] + amplitude_in[i] sine
    and qd*_i = target_qd_in[row, i] + amplitude_in[i] sine_rate (sine = sin(w t), sine_rate
    = w cos(w t)) into the drive targets, and the generalized force joint_f_out[i] =
    feedforward_in[row, i] + sum_k Kp_ik (q*_k - q_k) + Kd_ik (qd*_k - qd_k) over the 1-dof
    joints k of i's articulation, with the gain matrices laid out like the joint-space mass
    matrix (``articulation_H_start``)."""
    i = wp.tid()
    a = joint_articulation[dof_joint[i]]
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    gains = articulation_H_start[a] + (i - d0) * n
    tau = feedforward_in[row, i]
    for k in range(d0, d0 + n):
        jk = dof_joint[k]
        if joint_type[jk] == JOINT_REVOLUTE or joint_type[jk] == JOINT_PRISMATIC:
            error = sine_reference(target_q_in, amplitude_in, row, k, sine) - joint_q_in[joint_q_start[jk]]
            rate_error = sine_reference(target_qd_in, amplitude_in, row, k, sine_rate) - joint_qd_in[k]
            tau += kp_in[gains + k - d0] * error + kd_in[gains + k - d0] * rate_error
    joint_f_out[i] = tau
    joint_target_q_out[i] = sine_reference(target_q_in, amplitude_in, row, i, sine)
    joint_target_qd_out[i] = sine_reference(target_qd_in, amplitude_in, row, i, sine_rate)
