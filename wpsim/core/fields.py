"""Field specs: the one declaration of every Model, State and Control array.

Each ``FieldSpec`` gives a field's name, element kind, shape, SI unit and meaning; the
tables below are appended to the class docstrings of ``wpsim.core.model``, allocate the
arrays, drive precision conversion and ``requires_grad``, and (for Model fields) name the
``ModelBuilder`` table column that collects them.

Shape letters: P particles, S springs, T triangles, H bending hinges, E tetrahedra,
C collision shapes, V mesh-shape contact points, N candidate rigid contact pairs, W worlds, K particle-contact neighbours
per particle (0 when particle-particle contact is off), B rigid bodies, J joints,
Q joint coordinates, D joint dofs, A articulations, M mass-matrix entries (sum over
articulations of dofs^2). Joint coordinates and dofs are laid out depth first, articulation
by articulation (``joint_q_start``/``joint_qd_start`` give each joint's first entry).
Spatial vectors ("spatial") are (angular, linear), see ``wpsim.kernels.articulation``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from wpsim.kernels.enums import JOINT_NAMES, SHAPE_NAMES, kind_list


@dataclass(frozen=True)
class FieldSpec:
    """Declaration of one array field: name, element kind, shape, SI unit, meaning."""

    name: str
    kind: str  # "real", "vec3", "spatial", "mat22", "mat33", "transform" or "int"
    shape: str
    unit: str
    doc: str
    differentiable: bool = True



def warp_dtype(kind: str, real):
    """Warp element type of a field kind at scalar precision ``real``."""
    if kind == "int":
        return wp.int32
    if kind == "real":
        return real
    if kind == "vec3":
        return wp.types.vector(3, real)
    if kind == "spatial":
        return wp.types.vector(6, real)
    if kind == "mat22":
        return wp.types.matrix((2, 2), real)
    if kind == "mat33":
        return wp.types.matrix((3, 3), real)
    if kind == "transform":
        return wp.types.transformation(real)
    raise ValueError(f"unknown field kind {kind!r}")



def numpy_real(real):
    """NumPy scalar type matching the Warp scalar type ``real``."""
    return np.float64 if real == wp.float64 else np.float32



def field_table(title: str, specs) -> str:
    """Render field specs as a docstring section."""
    lines = [f"\n    {title}:"]
    for s in specs:
        lines.append(f"        {s.name}: {s.shape} {s.kind}, {s.unit} -- {s.doc}")
    return "\n".join(lines) + "\n"



MODEL_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "initial particle positions (copied into model.state())"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "initial particle velocities"),
    FieldSpec("particle_mass", "real", "(P,)", "kg", "particle mass; 0 marks a fixed particle"),
    FieldSpec("particle_radius", "real", "(P,)", "m", "contact radius"),
    FieldSpec("particle_drag", "real", "(P,)", "N s/m", "linear drag coefficient: force -drag * v"),
    FieldSpec("particle_world", "int", "(P,)", "-", "world index of each particle", False),
    FieldSpec("gravity", "vec3", "(1,)", "m/s^2", "gravitational acceleration"),
    FieldSpec("spring_indices", "int", "(S, 2)", "-", "particle pair of each spring", False),
    FieldSpec("spring_ke", "real", "(S,)", "N/m", "spring stiffness"),
    FieldSpec("spring_kd", "real", "(S,)", "N s/m", "spring damping"),
    FieldSpec("spring_rest_length", "real", "(S,)", "m", "spring rest length"),
    FieldSpec("tri_indices", "int", "(T, 3)", "-", "particles of each cloth triangle", False),
    FieldSpec("tri_rest_inv", "mat22", "(T,)", "1/m", "inverse rest edge matrix in the triangle's 2D frame"),
    FieldSpec("tri_rest_area", "real", "(T,)", "m^2", "rest area"),
    FieldSpec("tri_mu", "real", "(T,)", "N/m", "membrane shear modulus (first Lame-style parameter)"),
    FieldSpec("tri_lambda", "real", "(T,)", "N/m", "membrane area-stretch modulus (second Lame-style parameter)"),
    FieldSpec("tri_kd", "real", "(T,)", "N s/m", "membrane damping on the strain rate"),
    FieldSpec("bend_indices", "int", "(H, 4)", "-", "hinge particles: two opposite vertices, then the shared edge", False),
    FieldSpec("bend_rest_angle", "real", "(H,)", "rad", "rest dihedral angle"),
    FieldSpec("bend_ke", "real", "(H,)", "N m/rad^2", "bending stiffness"),
    FieldSpec("bend_kd", "real", "(H,)", "N m s/rad^2", "bending damping"),
    FieldSpec("tet_indices", "int", "(E, 4)", "-", "particles of each tetrahedron (positive orientation)", False),
    FieldSpec("tet_rest_inv", "mat33", "(E,)", "1/m", "inverse rest edge matrix (rest shape)"),
    FieldSpec("tet_rest_volume", "real", "(E,)", "m^3", "rest volume"),
    FieldSpec("tet_mu", "real", "(E,)", "Pa", "first Lame parameter mu (shear modulus)"),
    FieldSpec("tet_lambda", "real", "(E,)", "Pa", "second Lame parameter lambda"),
    FieldSpec("tet_kd", "real", "(E,)", "Pa s", "damping on the Green strain rate"),
    FieldSpec("tet_fiber", "vec3", "(E,)", "-", "unit actuation fibre direction in rest space; 0 = volumetric"),
    FieldSpec("shape_kind", "int", "(C,)", "-", kind_list(SHAPE_NAMES), False),
    FieldSpec("shape_body", "int", "(C,)", "-", "body the shape is attached to; -1 = static world geometry", False),
    FieldSpec("shape_world", "int", "(C,)", "-", "world of the shape; -1 = shared by all worlds", False),
    FieldSpec("shape_transform", "transform", "(C,)", "m, quat xyzw", "shape frame in its body's frame (world if static)"),
    FieldSpec("shape_size", "vec3", "(C,)", "m",
              "sphere (r,-,-), box half extents, capsule (r, half height, -), mesh bounding-box half extents"),
    FieldSpec("shape_ke", "real", "(C,)", "N/m", "contact stiffness"),
    FieldSpec("shape_kd", "real", "(C,)", "N s/m", "contact damping"),
    FieldSpec("shape_mu", "real", "(C,)", "-", "Coulomb friction coefficient"),
    FieldSpec("shape_point_start", "int", "(C,)", "-", "first contact point of a mesh shape in shape_points", False),
    FieldSpec("shape_point_count", "int", "(C,)", "-", "contact points of a mesh shape (its convex hull's vertices)",
              False),
    FieldSpec("shape_points", "vec3", "(V,)", "m", "contact points of mesh shapes in their shape frames"),
    FieldSpec("pair_ke", "real", "(1,)", "N/m", "particle-particle contact stiffness"),
    FieldSpec("pair_kd", "real", "(1,)", "N s/m", "particle-particle contact damping"),
    FieldSpec("pair_mu", "real", "(1,)", "-", "particle-particle friction coefficient"),
    FieldSpec("contact_pair", "int", "(N, 2)", "-", "candidate rigid shape pairs (body shape, other shape)", False),
    FieldSpec("body_mass", "real", "(B,)", "kg", "body mass"),
    FieldSpec("body_com", "vec3", "(B,)", "m", "centre of mass in the body frame"),
    FieldSpec("body_inertia", "mat33", "(B,)", "kg m^2", "inertia about the centre of mass, body axes"),
    FieldSpec("body_world", "int", "(B,)", "-", "world index of each body", False),
    FieldSpec("body_origin", "vec3", "(B,)", "m", "reference point of spatial quantities: the world position of the "
              "body's articulation root joint (a constant)", False),
    FieldSpec("body_joint", "int", "(B,)", "-", "the joint whose child the body is", False),
    FieldSpec("joint_type", "int", "(J,)", "-", kind_list(JOINT_NAMES), False),
    FieldSpec("joint_parent", "int", "(J,)", "-", "parent body; -1 = world", False),
    FieldSpec("joint_child", "int", "(J,)", "-", "child body", False),
    FieldSpec("joint_X_p", "transform", "(J,)", "m, quat xyzw", "joint frame in the parent body frame (link offset)"),
    FieldSpec("joint_X_c", "transform", "(J,)", "m, quat xyzw", "joint frame in the child body frame"),
    FieldSpec("joint_axis", "vec3", "(J,)", "-", "unit axis of a revolute/prismatic joint in the joint frame", False),
    FieldSpec("joint_q_start", "int", "(J,)", "-", "first coordinate of each joint in joint_q", False),
    FieldSpec("joint_qd_start", "int", "(J,)", "-", "first dof of each joint in joint_qd", False),
    FieldSpec("joint_articulation", "int", "(J,)", "-", "articulation of each joint", False),
    FieldSpec("joint_dfs_pos", "int", "(J,)", "-", "position of each joint in depth-first order", False),
    FieldSpec("joint_dfs_end", "int", "(J,)", "-", "end (exclusive) of the joint's subtree in depth-first order", False),
    FieldSpec("dfs_joint", "int", "(J,)", "-", "joint at each depth-first position", False),
    FieldSpec("articulation_start", "int", "(A+1,)", "-", "first depth-first position of each articulation", False),
    FieldSpec("articulation_dof_start", "int", "(A+1,)", "-", "first dof of each articulation", False),
    FieldSpec("articulation_H_start", "int", "(A+1,)", "-", "offset of each articulation's dense mass matrix", False),
    FieldSpec("dof_joint", "int", "(D,)", "-", "joint of each dof", False),
    FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat", "initial joint coordinates (copied into model.state())"),
    FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s", "initial joint velocities"),
    FieldSpec("joint_armature", "real", "(D,)", "kg m^2 or kg", "armature added to the mass matrix diagonal"),
    FieldSpec("joint_damping", "real", "(D,)", "N m s/rad or N s/m", "viscous joint damping (integrated implicitly)"),
    FieldSpec("joint_target_ke", "real", "(D,)", "N m/rad or N/m", "PD drive position gain (revolute, prismatic)"),
    FieldSpec("joint_target_kd", "real", "(D,)", "N m s/rad or N s/m", "PD drive velocity gain (implicit)"),
    FieldSpec("joint_limit_lower", "real", "(D,)", "rad or m", "lower joint limit (revolute, prismatic)"),
    FieldSpec("joint_limit_upper", "real", "(D,)", "rad or m", "upper joint limit"),
    FieldSpec("joint_limit_ke", "real", "(D,)", "N m/rad or N/m", "limit spring stiffness"),
    FieldSpec("joint_limit_kd", "real", "(D,)", "N m s/rad or N s/m", "limit damping"),
)



STATE_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "particle positions"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "particle velocities"),
    FieldSpec("particle_f", "vec3", "(P,)", "N", "forces of the step that starts from this state (solver output)"),
    FieldSpec("neighbor_count", "int", "(P,)", "-", "contact neighbours found for the step from this state", False),
    FieldSpec("neighbor_index", "int", "(P, K)", "-", "those neighbours' particle indices", False),
    FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat", "joint coordinates"),
    FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s", "joint velocities"),
    FieldSpec("body_q", "transform", "(B,)", "m, quat xyzw", "body poses (forward kinematics of joint_q)"),
    FieldSpec("body_qd", "spatial", "(B,)", "rad/s, m/s", "world angular velocity, world velocity of the body origin"),
    FieldSpec("body_f", "spatial", "(B,)", "N m, N",
              "applied + contact wrench about body_origin, of the step from this state"),
)



DYNAMIC_STATE_FIELDS = ("particle_q", "particle_qd", "joint_q", "joint_qd")
"""The state fields a step integrates; everything else in a State is derived from them."""



CONTROL_FIELDS = (
    FieldSpec("tet_activation", "real", "(E,)", "-", "signed actuation (see wpsim.kernels.fem), >= -0.9"),
    FieldSpec("particle_f_ext", "vec3", "(P,)", "N", "external force applied to each particle"),
    FieldSpec("joint_f", "real", "(D,)", "N m or N", "generalized force on each joint dof"),
    FieldSpec("joint_target_q", "real", "(D,)", "rad or m", "PD drive position target (revolute, prismatic dofs)"),
    FieldSpec("joint_target_qd", "real", "(D,)", "rad/s or m/s", "PD drive velocity target"),
    FieldSpec("body_f_ext", "spatial", "(B,)", "N m, N", "external (torque, force at the centre of mass), world axes"),
)
