"""The spatial-vector conventions of rigid bodies, and accessors whose names say which part
is which.

Two layouts meet in a State, each fixed by the kernels (``wpsim.kernels.articulation``):

- Body quantities are spatial vectors **(angular, linear)** in world axes: ``body_qd`` =
  (angular velocity, velocity of the body frame's origin, the translation of ``body_q``),
  ``body_f`` = (torque, force) about the articulation's reference point ``model.body_origin``,
  ``body_f_ext`` = (torque, force at the centre of mass).
- A free joint's six ``joint_qd`` entries are **(linear, angular)**: the velocity of the
  child body's origin in parent axes (world axes for a floating base), then the angular
  velocity in child (body) axes, as MuJoCo's free joint; its seven ``joint_q`` entries are
  (position of the child origin in the parent frame, quaternion xyzw).

The slices below index those layouts, and ``body_velocity`` / ``free_joint_velocity`` return
(and ``set_free_joint_velocity`` takes) the parts by name, so that a script never depends on
remembering the order. They read and write host copies (one device synchronisation each).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from wpsim.kernels.enums import JOINT_FREE

BODY_ANGULAR = slice(0, 3)
"""The angular part of a body spatial vector (``body_qd``, ``body_f``, ``body_f_ext``)."""
BODY_LINEAR = slice(3, 6)
"""The linear part of a body spatial vector (``body_qd``: velocity of the body frame's origin; a force)."""
FREE_LINEAR = slice(0, 3)
"""The linear entries of a free joint's six ``joint_qd`` entries (from its ``joint_qd_start``)."""
FREE_ANGULAR = slice(3, 6)
"""The angular entries of a free joint's six ``joint_qd`` entries (from its ``joint_qd_start``)."""


class Velocity(NamedTuple):
    """Linear (m/s) and angular (rad/s) velocity, each a (3,) float64 array; the docstring of
    the function that returns it says at which point and in which axes."""

    linear: np.ndarray
    angular: np.ndarray


def _index(count: int, i: int, what: str) -> int:
    """``i`` as a checked index below ``count``."""
    if int(i) != i or not 0 <= i < count:
        raise ValueError(f"{what} {i} does not exist (the model has {count})")
    return int(i)


def body_velocity(model, state, body: int) -> Velocity:
    """World-axes velocity of ``body``'s frame origin and its angular velocity, from
    ``state.body_qd`` (filled by a step, or ``wpsim.eval_fk``)."""
    twist = state.body_qd.numpy()[_index(model.body_count, body, "body")].astype(np.float64)
    return Velocity(twist[BODY_LINEAR], twist[BODY_ANGULAR])


def _free_dofs(model, joint: int) -> slice:
    """The six ``joint_qd`` entries of free joint ``joint``."""
    j = _index(model.joint_count, joint, "joint")
    if int(model.joint_type.numpy()[j]) != JOINT_FREE:
        raise ValueError(f"joint {j} is not a free joint")
    start = int(model.joint_qd_start.numpy()[j])
    return slice(start, start + 6)


def free_joint_velocity(model, state, joint: int) -> Velocity:
    """A free joint's velocity from ``state.joint_qd``: linear, of the child origin in parent
    axes; angular, in child axes."""
    qd = state.joint_qd.numpy()[_free_dofs(model, joint)].astype(np.float64)
    return Velocity(qd[FREE_LINEAR], qd[FREE_ANGULAR])


def set_free_joint_velocity(model, state, joint: int, linear=None, angular=None):
    """Write a free joint's velocity into ``state.joint_qd``: ``linear`` (m/s, of the child
    origin in parent axes) and/or ``angular`` (rad/s, child axes); a part left None is kept."""
    dofs = _free_dofs(model, joint)
    qd = state.joint_qd.numpy().copy()
    for part, values in ((FREE_LINEAR, linear), (FREE_ANGULAR, angular)):
        if values is not None:
            values = np.asarray(values, dtype=np.float64)
            if values.shape != (3,) or not np.isfinite(values).all():
                raise ValueError(f"free joint {joint}: a velocity part must be 3 finite numbers, got {values}")
            qd[dofs][part] = values
    state.joint_qd.assign(qd)
