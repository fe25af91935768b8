"""MuJoCo's order of a step's implicit terms around the soft-constraint solve: the solve's cost
uses the joint-space matrix without the dt terms that make damping, drive damping and
friction implicit (``articulation.dof_laws``), and the step's accelerations come from one
more solve with them, a = (M + I)^-1 (tau + f_c) = a_c - (M + I)^-1 (I a_c), with f_c the
constraint forces and a_c the solve's accelerations (M a_c = tau + f_c), I the diagonal of
implicit terms. (wpsim's own order keeps I in the solve's matrix, so the constraint forces
see the damped dynamics.)"""

import warp as wp

from .articulation import dof_laws
from .generic import kernel


@wp.func
def implicit_term(
    i: int,
    dof_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_damping: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    joint_stiffness: wp.array(dtype=wp.Float),
    joint_spring_ref: wp.array(dtype=wp.Float),
    joint_target_ke: wp.array(dtype=wp.Float),
    joint_target_kd: wp.array(dtype=wp.Float),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_limit_ke: wp.array(dtype=wp.Float),
    joint_limit_kd: wp.array(dtype=wp.Float),
    joint_target_lower: wp.array(dtype=wp.Float),
    joint_target_upper: wp.array(dtype=wp.Float),
    joint_drive_force_limit: wp.array(dtype=wp.Float),
    joint_drive_implicit: wp.array(dtype=wp.Float),
    joint_damping_implicit: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    dt: wp.Float,
):
    """Dof i's implicit terms on the joint-space diagonal (kg m^2 or kg, ``dof_laws``)."""
    j = dof_joint[i]
    qd = joint_qd_in[i]
    unused, implicit = dof_laws(i, joint_type[j], joint_q_in[joint_q_start[j]], qd, qd * type(qd)(0.0), joint_damping,
                                joint_friction, joint_stiffness, joint_spring_ref, joint_target_ke, joint_target_kd,
                                joint_limit_lower, joint_limit_upper, joint_limit_ke, joint_limit_kd,
                                joint_target_lower, joint_target_upper, joint_drive_force_limit,
                                joint_drive_implicit, joint_damping_implicit, joint_target_q, joint_target_qd,
                                friction_smoothing, dt)
    return implicit


@kernel
def split_implicit_terms(
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_damping: wp.array(dtype=wp.Float),
    joint_friction: wp.array(dtype=wp.Float),
    joint_stiffness: wp.array(dtype=wp.Float),
    joint_spring_ref: wp.array(dtype=wp.Float),
    joint_target_ke: wp.array(dtype=wp.Float),
    joint_target_kd: wp.array(dtype=wp.Float),
    joint_limit_lower: wp.array(dtype=wp.Float),
    joint_limit_upper: wp.array(dtype=wp.Float),
    joint_limit_ke: wp.array(dtype=wp.Float),
    joint_limit_kd: wp.array(dtype=wp.Float),
    joint_target_lower: wp.array(dtype=wp.Float),
    joint_target_upper: wp.array(dtype=wp.Float),
    joint_drive_force_limit: wp.array(dtype=wp.Float),
    joint_drive_implicit: wp.array(dtype=wp.Float),
    joint_damping_implicit: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    damped_matrix_in: wp.array(dtype=wp.Float),
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    dt: wp.Float,
    matrix_out: wp.array(dtype=wp.Float),
    implicit_out: wp.array(dtype=wp.Float),
):
    """One thread per dof i: row i of the joint-space matrix (``assemble_joint_space``'s, in
    ``damped_matrix_in``) without its implicit terms on the diagonal (``dof_laws``), into
    matrix_out, and those terms (kg m^2 or kg) into implicit_out."""
    i = wp.tid()
    a = joint_articulation[dof_joint[i]]
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    row = articulation_H_start[a] + (i - d0) * n
    implicit = implicit_term(i, dof_joint, joint_type, joint_q_start, joint_damping, joint_friction, joint_stiffness,
                             joint_spring_ref, joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper,
                             joint_limit_ke, joint_limit_kd, joint_target_lower, joint_target_upper,
                             joint_drive_force_limit, joint_drive_implicit, joint_damping_implicit, joint_q_in,
                             joint_qd_in, joint_target_q, joint_target_qd, friction_smoothing, dt)
    for k in range(n):
        value = damped_matrix_in[row + k]
        if k == i - d0:
            value = value - implicit
        matrix_out[row + k] = value
    implicit_out[i] = implicit


@kernel
def implicit_force(implicit_in: wp.array(dtype=wp.Float), accel_in: wp.array(dtype=wp.Float),
                   force_out: wp.array(dtype=wp.Float)):
    """One thread per dof: I_i a_i, the implicit terms' force at the solve's accelerations."""
    i = wp.tid()
    force_out[i] = implicit_in[i] * accel_in[i]


@kernel
def corrected_accelerations(accel_in: wp.array(dtype=wp.Float), correction_in: wp.array(dtype=wp.Float),
                            accel_out: wp.array(dtype=wp.Float)):
    """One thread per dof: a_c - (M + I)^-1 (I a_c), the step's accelerations."""
    i = wp.tid()
    accel_out[i] = accel_in[i] - correction_in[i]
