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
    rows) and rotation (its angular rows), either 0 where it is (MuJoCo 4.0.1 keeps a body
    turning about its centre of mass at (0, rot), measured; it substitutes neither for the
    other), 0 for a body no dof moves, but (1 / mass, 0) for a body of MuJoCo's "simple" kind
    that only slides (``slides_only``); a free joint's translational and rotational dofs
    share the means of their diagonal blocks of M^-1, a ball joint's dofs theirs, every other
    dof has its diagonal entry; but a slide dof whose row of M is diagonal (a slider of MuJoCo's
    "simple" bodies) has 1 / (M_kk less its armature), as MuJoCo's dof_invweight0 has it."""
    host = {name: getattr(model, name).numpy() for name in (
        "articulation_dof_start", "articulation_H_start", "body_joint", "joint_articulation", "joint_dfs_pos",
        "joint_dfs_end", "dof_joint", "joint_type", "body_com", "body_origin", "joint_armature", "body_mass",
        "joint_parent", "joint_child")}
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
            if slides_only(host, b, joints[moves], motion[moves]):
                body_weights[b] = 1.0 / max(host["body_mass"][b], TINY), 0.0
                continue
            weighted = jacobian @ inverse @ jacobian.T
            body_weights[b] = np.trace(weighted[:3, :3]) / 3.0, np.trace(weighted[3:, 3:]) / 3.0
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



def slides_only(host: dict, body: int, joints: np.ndarray, motion: np.ndarray) -> bool:
    """Whether ``body`` is what MuJoCo's compiler calls a simple body that only slides (its
    ``body_simple`` 2, whose inverse weights are 1 / mass and 0): every dof that moves it is a
    slide along a world axis (``motion``: their (angular, linear) world columns) of its own
    joints (the joints of one MJCF body become a chain of massless bodies ending in it: the
    slides of a parent with a mass are another body's), its centre of mass is its origin, and no
    body hangs from it."""
    if not (host["joint_type"][joints] == JOINT_PRISMATIC).all():
        return False
    children = host["joint_child"][joints]
    if ((children != body) & (host["body_mass"][children] > 0.0)).any():
        return False
    aligned = (np.abs(motion[:, 3:]) > 1e-12).sum(axis=1) == 1
    return bool(aligned.all() and not np.abs(host["body_com"][body]).any() and not (host["joint_parent"] == body).any())
