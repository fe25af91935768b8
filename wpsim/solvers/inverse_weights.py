"""MuJoCo's inverse weights at the reference pose (its body_invweight0 and dof_invweight0):
constant effective inverse masses from which the soft-constraint solve can weigh its rows as
MuJoCo does (``SoftContactOptions.regularisation = "mujoco"``)."""

from __future__ import annotations

import numpy as np

from wpsim.core.geometry import transform_point
from wpsim.kernels.enums import JOINT_BALL, JOINT_FREE, JOINT_PRISMATIC

TINY = 1e-15
"""MuJoCo's smallest positive value: an inverse weight below it counts as none."""


def reference_inverse_weights(model, mass_matrix: np.ndarray, dof_motion: np.ndarray,
                              body_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((B, 2) every body's translational (1/kg) and rotational (1/(kg m^2)) inverse weight,
    (D,) every dof's (1/kg or 1/(kg m^2))) at one joint state, from its joint-space mass matrix
    (M,) without damping terms, the dofs' world motion columns (D, 6) and the body poses
    (B, 7): the means of the diagonals of J M^-1 J^T for the body's centre of mass (J's linear
    rows) and rotation (its angular rows), one weight standing in for the other where it is
    below ``TINY``, 0 for a body no dof moves; a free joint's translational and rotational dofs
    share the means of their diagonal blocks of M^-1, a ball joint's dofs theirs, every other
    dof has its diagonal entry; but a slide dof whose row of M is diagonal (a slider of MuJoCo's
    "simple" bodies) has 1 / (M_kk less its armature), as MuJoCo's dof_invweight0 has it."""
    host = {name: getattr(model, name).numpy() for name in (
        "articulation_dof_start", "articulation_H_start", "body_joint", "joint_articulation", "joint_dfs_pos",
        "joint_dfs_end", "dof_joint", "joint_type", "body_com", "body_origin", "joint_armature")}
    body_weights = np.zeros((model.body_count, 2))
    dof_weights = np.zeros(model.joint_dof_count)
    dof_start, h_start = host["articulation_dof_start"], host["articulation_H_start"]
    body_art = host["joint_articulation"][host["body_joint"]] if model.body_count else np.zeros(0, int)
    for art in range(model.articulation_count):
        d0, n = int(dof_start[art]), int(dof_start[art + 1] - dof_start[art])
        if n == 0:
            continue
        block = mass_matrix[h_start[art]:h_start[art] + n * n].reshape(n, n)
        full = np.tril(block) + np.tril(block, -1).T
        inverse = np.linalg.inv(full)
        dofs = np.arange(d0, d0 + n)
        joints = host["dof_joint"][dofs]
        motion = dof_motion[dofs]  # (n, 6): angular, linear at the articulation origin
        for b in np.flatnonzero(body_art == art):
            position = host["joint_dfs_pos"][host["body_joint"][b]]
            moves = (host["joint_dfs_pos"][joints] <= position) & (position < host["joint_dfs_end"][joints])
            if not moves.any():
                continue
            com = transform_point(body_q[b], host["body_com"][b]) - host["body_origin"][b]
            jacobian = np.zeros((6, n))
            jacobian[:3, moves] = (motion[moves, 3:] + np.cross(motion[moves, :3], com)).T
            jacobian[3:, moves] = motion[moves, :3].T
            weighted = jacobian @ inverse @ jacobian.T
            tran, rot = np.trace(weighted[:3, :3]) / 3.0, np.trace(weighted[3:, 3:]) / 3.0
            if tran < TINY < rot:
                tran = rot
            elif rot < TINY < tran:
                rot = tran
            body_weights[b] = tran, rot
        diagonal = np.diag(inverse).copy()
        for k in range(n):
            alone = np.count_nonzero(full[k]) == 1 and full[k, k] > host["joint_armature"][d0 + k]
            if host["joint_type"][joints[k]] == JOINT_PRISMATIC and alone:
                diagonal[k] = 1.0 / (full[k, k] - host["joint_armature"][d0 + k])
        for j in np.unique(joints):
            local = np.flatnonzero(joints == j)
            if host["joint_type"][j] == JOINT_FREE:
                dof_weights[d0 + local[:3]] = diagonal[local[:3]].mean()
                dof_weights[d0 + local[3:]] = diagonal[local[3:]].mean()
            elif host["joint_type"][j] == JOINT_BALL:
                dof_weights[d0 + local] = diagonal[local].mean()
            else:
                dof_weights[d0 + local] = diagonal[local]
    return body_weights, dof_weights

