"""Joint and shape kinds: their one definition. Kernels compare against these Warp
constants; host code (builder, importers, exporters) imports the same names.

Joint coordinates and dofs per kind are described in ``wpsim.kernels.articulation``;
shape frames and sizes in ``wpsim.kernels.contact``.
"""

import warp as wp

JOINT_FREE = wp.constant(0)
JOINT_BALL = wp.constant(1)
JOINT_REVOLUTE = wp.constant(2)
JOINT_PRISMATIC = wp.constant(3)
JOINT_FIXED = wp.constant(4)

JOINT_NAMES = ("free", "ball", "revolute", "prismatic", "fixed")
"""Name of each joint kind, indexed by its value."""
JOINT_COORD_COUNT = (7, 4, 1, 1, 0)
"""Joint coordinates (entries of joint_q) of each joint kind."""
JOINT_DOF_COUNT = (6, 3, 1, 1, 0)
"""Degrees of freedom (entries of joint_qd) of each joint kind."""

SHAPE_PLANE = wp.constant(0)
SHAPE_SPHERE = wp.constant(1)
SHAPE_BOX = wp.constant(2)
SHAPE_CAPSULE = wp.constant(3)
SHAPE_MESH = wp.constant(4)

SHAPE_NAMES = ("plane", "sphere", "box", "capsule", "mesh")
"""Name of each shape kind, indexed by its value."""


def kind_list(names) -> str:
    """"0 free, 1 ball, ..." for documentation and messages."""
    return ", ".join(f"{value} {name}" for value, name in enumerate(names))


MAX_COUPLING_TERMS = wp.constant(8)
"""Terms one joint coupling may combine at most (``ModelBuilder.add_joint_coupling``)."""
MAX_COUPLING_POWER = wp.constant(4)
"""Highest power of a coordinate in a joint coupling (MJCF's polycoef is quartic)."""

