"""Field specs: the one declaration of every Model, State and Control array.

Each ``FieldSpec`` gives a field's name, element kind, shape, SI unit and meaning; the
tables below are appended to the class docstrings of ``wpsim.core.model``, allocate the
arrays, drive precision conversion and ``requires_grad``, and (for Model fields) name the
``ModelBuilder`` table column that collects them.

Shape letters: P particles, S springs, T triangles, H bending hinges, E tetrahedra, G strain-smoothing domains,
C collision shapes, V mesh-shape contact points, F face planes of their hulls, I hull points (V and points along the
hulls' edges), N candidate rigid contact pairs (Y of them with planes, U shapes boxed by the broad phase,
Z body pairs that never touch),
L joint couplings, R their terms, X body connections, O spatial tendons, o their path segments,
W worlds, K particle-contact neighbours
per particle (0 when particle-particle contact is off), B rigid bodies, J joints,
Q joint coordinates, D joint dofs, A articulations, M mass-matrix entries (sum over
articulations of dofs^2). Joint coordinates and dofs are laid out depth first, articulation
by articulation (``joint_q_start``/``joint_qd_start`` give each joint's first entry).
Spatial vectors ("spatial": body_qd, body_f, body_f_ext) are (angular, linear) in world axes; a free
joint's six joint_qd entries are the other way round, (linear, angular), as MuJoCo's: see
``wpsim.core.spatial`` for both conventions and accessors that name the parts, and
``wpsim.kernels.articulation`` for every joint type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import warp as wp

from wpsim.kernels.enums import JOINT_NAMES, SHAPE_NAMES, kind_list


@dataclass(frozen=True)
class FieldSpec:
    """Declaration of one array field: name, element kind, shape, SI unit, meaning.

    For Model fields, ``table`` names the ``ModelBuilder`` table whose column of the same
    name collects the field (None: computed by ``finalize``), and ``check`` is what the
    builder requires of every appended value: "finite", "nonnegative", "positive" (all three
    imply finite) or None (values checked by the builder itself); integer fields are not
    checked (indices are validated where they are added).
    """

    name: str
    kind: str  # "real", "vec3", "spatial", "quat", "mat22", "mat33", "transform", "int" or "int64"
    shape: str
    unit: str
    doc: str
    differentiable: bool = True
    table: str | None = None
    check: str | None = "finite"

    @property
    def label(self) -> str:
        """The field's name without its element prefix ("spring_ke" -> "ke"), for messages
        that already name the element ("spring 3: negative ke")."""
        return self.name.split("_", 1)[-1]

    @property
    def trailing(self) -> tuple:
        """Per-row shape of the field's host array: the shape's letters after the first,
        then the element's own shape (e.g. (S, 2) int -> (2,), (C,) transform -> (7,))."""
        rest = tuple(int(d) for d in self.shape.strip("(,)").replace(" ", "").split(",")[1:])
        return rest + ELEMENT_SHAPES[self.kind]


ELEMENT_SHAPES = {"int": (), "int64": (), "real": (), "vec3": (3,), "spatial": (6,), "quat": (4,), "mat22": (2, 2),
                  "mat33": (3, 3), "transform": (7,)}
"""Host shape of one element of each field kind (quaternions xyzw; a transform is position
then quaternion)."""


def warp_dtype(kind: str, real):
    """Warp element type of a field kind at scalar precision ``real``."""
    if kind == "int":
        return wp.int32
    if kind == "int64":
        return wp.int64
    if kind == "real":
        return real
    if kind == "vec3":
        return wp.types.vector(3, real)
    if kind == "spatial":
        return wp.types.vector(6, real)
    if kind == "quat":
        return wp.types.quaternion(real)
    if kind == "mat22":
        return wp.types.matrix((2, 2), real)
    if kind == "mat33":
        return wp.types.matrix((3, 3), real)
    if kind == "transform":
        return wp.types.transformation(real)
    raise ValueError(f"unknown field kind {kind!r}")


def built_by(table: str, *specs: FieldSpec) -> tuple:
    """``specs`` as columns of the builder table ``table``."""
    return tuple(replace(spec, table=table) for spec in specs)


def table_columns(table: str) -> tuple:
    """The Model field specs that the builder table ``table`` collects, in field order."""
    return tuple(spec for spec in MODEL_FIELDS if spec.table == table)


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
    *built_by(
        "particle",
        FieldSpec("particle_q", "vec3", "(P,)", "m", "initial particle positions (copied into model.state())"),
        FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "initial particle velocities"),
        FieldSpec("particle_mass", "real", "(P,)", "kg", "particle mass; 0 marks a fixed particle",
                  check="nonnegative"),
        FieldSpec("particle_radius", "real", "(P,)", "m", "contact radius", check="nonnegative"),
        FieldSpec("particle_drag", "real", "(P,)", "N s/m", "linear drag coefficient: force -drag * v",
                  check="nonnegative"),
        FieldSpec("particle_world", "int", "(P,)", "-", "world index of each particle", False),
    ),
    FieldSpec("gravity", "vec3", "(1,)", "m/s^2", "gravitational acceleration"),
    FieldSpec("fluid", "real", "(1, 5)", "kg/m^3, Pa s, m/s",
              "the medium the bodies move in (MuJoCo's option density, viscosity and wind): density, "
              "viscosity, wind velocity x y z; zero density and viscosity: none"),
    *built_by(
        "spring",
        FieldSpec("spring_indices", "int", "(S, 2)", "-", "particle pair of each spring", False),
        FieldSpec("spring_ke", "real", "(S,)", "N/m", "spring stiffness", check="nonnegative"),
        FieldSpec("spring_kd", "real", "(S,)", "N s/m", "spring damping", check="nonnegative"),
        FieldSpec("spring_rest_length", "real", "(S,)", "m", "spring rest length", check="nonnegative"),
    ),
    *built_by(
        "triangle",
        FieldSpec("tri_indices", "int", "(T, 3)", "-", "particles of each cloth triangle", False),
        FieldSpec("tri_rest_inv", "mat22", "(T,)", "1/m", "inverse rest edge matrix in the triangle's 2D frame"),
        FieldSpec("tri_rest_area", "real", "(T,)", "m^2", "rest area", check="positive"),
        FieldSpec("tri_mu", "real", "(T,)", "N/m", "membrane shear modulus (first Lame-style parameter)",
                  check="nonnegative"),
        FieldSpec("tri_lambda", "real", "(T,)", "N/m", "membrane area-stretch modulus (second Lame-style parameter)",
                  check="nonnegative"),
        FieldSpec("tri_kd", "real", "(T,)", "N s/m", "membrane damping on the strain rate", check="nonnegative"),
    ),
    *built_by(
        "bending hinge",
        FieldSpec("bend_indices", "int", "(H, 4)", "-", "hinge particles: two opposite vertices, then the shared edge",
                  False),
        FieldSpec("bend_rest_angle", "real", "(H,)", "rad", "rest dihedral angle"),
        FieldSpec("bend_ke", "real", "(H,)", "N m/rad^2", "bending stiffness", check="nonnegative"),
        FieldSpec("bend_kd", "real", "(H,)", "N m s/rad^2", "bending damping", check="nonnegative"),
    ),
    *built_by(
        "tetrahedron",
        FieldSpec("tet_indices", "int", "(E, 4)", "-", "particles of each tetrahedron (positive orientation)", False),
        FieldSpec("tet_rest_inv", "mat33", "(E,)", "1/m", "inverse rest edge matrix (rest shape)"),
        FieldSpec("tet_rest_volume", "real", "(E,)", "m^3", "rest volume", check="positive"),
        FieldSpec("tet_mu", "real", "(E,)", "Pa", "first Lame parameter mu (shear modulus)", check="positive"),
        FieldSpec("tet_lambda", "real", "(E,)", "Pa", "second Lame parameter lambda"),
        FieldSpec("tet_kd", "real", "(E,)", "Pa s", "damping on the Green strain rate", check="nonnegative"),
        FieldSpec("tet_fiber", "vec3", "(E,)", "-", "unit actuation fibre direction in rest space; 0 = volumetric"),
        FieldSpec("tet_smoothed", "int", "(E,)", "-",
                  "1: strain averaged over face domains with the smoothed tets it touches (wpsim.kernels.fem)", False),
        FieldSpec("tet_edge_indices", "int", "(E, 6)", "-",
                  "a quadratic tet's edge-midpoint particles, edges in wpsim.kernels.quadratic_tets.TET_EDGES order; "
                  "-1 for a linear tet", False),
    ),
    FieldSpec("tet_face_domain", "int", "(E, 4)", "-",
              "smoothing domain of each face (opposite vertex k) of a smoothed tet; -1 for an unsmoothed tet", False),
    FieldSpec("domain_tets", "int", "(G, 2)", "-",
              "the smoothed tets of each smoothing domain: the face's one or two tets (-1: a boundary face)", False),
    *built_by(
        "shape",
        FieldSpec("shape_kind", "int", "(C,)", "-", kind_list(SHAPE_NAMES), False),
        FieldSpec("shape_body", "int", "(C,)", "-", "body the shape is attached to; -1 = static world geometry", False),
        FieldSpec("shape_world", "int", "(C,)", "-", "world of the shape; -1 = shared by all worlds", False),
        FieldSpec("shape_transform", "transform", "(C,)", "m, quat xyzw",
                  "shape frame in its body's frame (world if static)"),
        FieldSpec("shape_size", "vec3", "(C,)", "m",
                  "sphere (r,-,-), box half extents, capsule (r, half height, -), mesh bounding-box half extents",
                  check="nonnegative"),
        FieldSpec("shape_ke", "real", "(C,)", "N/m", "contact stiffness", check="nonnegative"),
        FieldSpec("shape_kd", "real", "(C,)", "N s/m", "contact damping", check="nonnegative"),
        FieldSpec("shape_mu", "real", "(C,)", "-", "Coulomb friction coefficient", check="nonnegative"),
        FieldSpec("shape_point_start", "int", "(C,)", "-", "first contact point of a mesh shape in shape_points",
                  False),
        FieldSpec("shape_point_count", "int", "(C,)", "-",
                  "contact points of a mesh shape (its convex hull's vertices)", False),
        FieldSpec("shape_collision_type", "int", "(C,)", "-",
                  "collision bits of the shape: shapes a and b can touch if type_a & mask_b or type_b & mask_a", False),
        FieldSpec("shape_collision_mask", "int", "(C,)", "-", "the collision bits the shape accepts", False),
        FieldSpec("shape_solref", "real", "(C, 2)", "s, - (or 1/s^2, 1/s)",
                  "soft-constraint contact reference (MuJoCo's solref): time constant and damping ratio, or "
                  "-stiffness and -damping (direct form); 0 0: the solve's own settings (SoftContactOptions)"),
        FieldSpec("shape_solimp", "real", "(C, 5)", "-, -, m, -, -",
                  "soft-constraint contact impedance curve (MuJoCo's solimp): dmin, dmax, width, midpoint, power; "
                  "read only where shape_solref is set"),
        FieldSpec("shape_solmix", "real", "(C,)", "-",
                  "weight of the shape's solref and solimp where two shapes of equal priority mix",
                  check="nonnegative"),
        FieldSpec("shape_priority", "int", "(C,)", "-",
                  "contact priority: a pair takes the softness of its higher-priority shape unmixed", False),
        FieldSpec("shape_condim", "int", "(C,)", "-",
                  "soft-constraint contact dimensions (MuJoCo's condim): 1 frictionless, 3 sliding friction, "
                  "4 and torsional, 6 and rolling; a pair takes its higher-priority shape's, else the larger", False),
        FieldSpec("shape_rotational_mu", "real", "(C, 2)", "m, m",
                  "torsional and rolling friction coefficients (MuJoCo's friction[1:3]), read where a pair's "
                  "condim is 4 or 6", check="nonnegative"),
        FieldSpec("shape_margin", "real", "(C,)", "m",
                  "soft-constraint contact margin (MuJoCo's geom margin): a pair's points closer than the sum of "
                  "its shapes' margins are in contact, pushed apart towards that distance", check="nonnegative"),
    ),
    *built_by(
        "shape contact point",
        FieldSpec("shape_points", "vec3", "(V,)", "m", "contact points of mesh shapes in their shape frames"),
    ),
    FieldSpec("shape_plane_start", "int", "(C,)", "-", "first face plane of a mesh shape's contact hull", False),
    FieldSpec("shape_plane_count", "int", "(C,)", "-", "face planes of a mesh shape's contact hull (0: other kinds)",
              False),
    FieldSpec("shape_plane_normal", "vec3", "(F,)", "-",
              "outward unit normals of the hulls' face planes, shape frames (hull of shape_points, at finalize)"),
    FieldSpec("shape_plane_offset", "real", "(F,)", "m", "their offsets: n . x <= offset inside the hull"),
    FieldSpec("shape_hull_point_start", "int", "(C,)", "-", "first point of a mesh shape in shape_hull_points", False),
    FieldSpec("shape_hull_point_count", "int", "(C,)", "-", "a mesh shape's hull points (0: other kinds)", False),
    FieldSpec("shape_hull_points", "vec3", "(I,)", "m",
              "mesh shapes' contact points and points along their hulls' edges, shape frames: mesh-mesh contact"),
    FieldSpec("pair_ke", "real", "(1,)", "N/m", "particle-particle contact stiffness"),
    FieldSpec("pair_kd", "real", "(1,)", "N s/m", "particle-particle contact damping"),
    FieldSpec("pair_mu", "real", "(1,)", "-", "particle-particle friction coefficient"),
    FieldSpec("impact_restitution", "real", "(1,)", "-",
              "coefficient of restitution of particle impacts (with ModelBuilder.set_particle_impacts)"),
    FieldSpec("contact_pair", "int", "(N, 2)", "-", "candidate rigid shape pairs (body shape, other shape)", False),
    FieldSpec("contact_plane_pair", "int", "(Y, 2)", "-", "the candidate pairs whose second shape is a plane", False),
    FieldSpec("contact_bvh_shape", "int", "(U,)", "-", "the shapes the per-step broad phase boxes (all but planes)",
              False),
    FieldSpec("shape_bound_centre", "vec3", "(C,)", "m", "centre of each shape's box in its frame (broad phase)",
              False),
    FieldSpec("shape_bound_half", "vec3", "(C,)", "m", "half extents of that box", False),
    FieldSpec("body_contact_group", "int", "(B,)", "-",
              "bodies of one group never touch: an articulation's root (itself with articulation_self_contact)", False),
    FieldSpec("body_moving", "int", "(B,)", "-", "1 if some joint between the body and the world has dofs", False),
    FieldSpec("body_static_contact", "int", "(B,)", "-", "0 if the body never touches static shapes", False),
    FieldSpec("contact_forbidden_key", "int64", "(Z,)", "-",
              "sorted keys (larger * B + smaller) of the body pairs that never touch (joints, exclude_contact)",
              False),
    FieldSpec("coupling_term_start", "int", "(L + 1,)", "-",
              "joint couplings (ModelBuilder.add_joint_coupling): coupling c's terms are start[c] .. start[c + 1] - 1",
              False),
    FieldSpec("coupling_term_dof", "int", "(R,)", "-", "the dof of each coupling term", False),
    FieldSpec("coupling_term_coef", "real", "(R,)", "-",
              "the coefficient of each term: a coupling's length is sum(coef q^power) (m or rad)", False),
    FieldSpec("coupling_term_power", "int", "(R,)", "-", "the power of each term's coordinate (1 to 4)", False),
    FieldSpec("coupling_rest", "real", "(L,)", "m or rad", "the length each coupling is held at", False),
    FieldSpec("coupling_time_constant", "real", "(L,)", "s",
              "the coupling's stiffness as a time constant over its effective inertia (0: none)", False),
    FieldSpec("coupling_damping_ratio", "real", "(L,)", "-", "damping ratio of that time-constant spring", False),
    FieldSpec("coupling_solimp", "real", "(L, 5)", "-, -, m or rad, -, -",
              "MuJoCo's solimp (dmin, dmax, width, midpoint, power): a soft-constraint row's impedance at the "
              "coupling's violation; the spring-damper is scaled by dmin / (1 - dmin) (0.5: by 1)", False),
    FieldSpec("coupling_ke", "real", "(L,)", "N/m or N m/rad", "added stiffness of the coupling's length", False),
    FieldSpec("coupling_kd", "real", "(L,)", "N s/m or N m s/rad", "added damping of the coupling's length", False),
    FieldSpec("coupling_drive_ke", "real", "(L,)", "N/m or N m/rad",
              "position gain of the coupling's drive (an actuator on a fixed tendon): ke (target - L) - kd dL/dt",
              False),
    FieldSpec("coupling_drive_kd", "real", "(L,)", "N s/m or N m s/rad", "velocity gain of the coupling's drive",
              False),
    FieldSpec("coupling_drive_force_limit", "real", "(L,)", "N or N m",
              "the drive's force is clamped to +-this (then explicit)", False),
    FieldSpec("coupling_drive_implicit", "real", "(L,)", "-",
              "1: the drive's kd is implicit in velocity (MuJoCo's implicitfast), 0: explicit (its Euler)", False),
    FieldSpec("connection_body", "int", "(X, 2)", "-",
              "body connections (ModelBuilder.add_body_connection): the two bodies (-1: the world)", False),
    FieldSpec("connection_point_a", "vec3", "(X,)", "m", "the connected point in the first body's frame", False),
    FieldSpec("connection_point_b", "vec3", "(X,)", "m",
              "the point it is held at, in the second body's frame (the world's for -1)", False),
    FieldSpec("connection_time_constant", "real", "(X,)", "s",
              "the connection's stiffness as a time constant over its effective mass (0: none)", False),
    FieldSpec("connection_damping_ratio", "real", "(X,)", "-", "damping ratio of that time-constant spring", False),
    FieldSpec("connection_solimp", "real", "(X, 5)", "-, -, m, -, -",
              "MuJoCo's solimp (dmin, dmax, width, midpoint, power): a soft-constraint row's impedance at the "
              "gap's length; the spring-damper is scaled by dmin / (1 - dmin) (0.5: by 1)", False),
    FieldSpec("connection_rotation", "quat", "(X,)", "quat xyzw",
              "a weld's held orientation of the first body in the second body's frame (the world's for -1)", False),
    FieldSpec("connection_holds_rotation", "int", "(X,)", "-", "1: a weld (orientation held too), 0: a point connection",
              False),
    FieldSpec("tendon_segment_start", "int", "(O + 1,)", "-",
              "spatial tendons (ModelBuilder.add_spatial_tendon): tendon t's path segments are start[t] .. "
              "start[t + 1] - 1", False),
    FieldSpec("tendon_articulation", "int", "(O,)", "-", "the articulation a tendon acts on (-1: none moves it)",
              False),
    FieldSpec("tendon_stiffness", "real", "(O,)", "N/m", "stiffness of the tendon's spring"),
    FieldSpec("tendon_spring_range", "real", "(O, 2)", "m, m",
              "rest lengths of the spring: no force between them, towards the nearer outside"),
    FieldSpec("tendon_damping", "real", "(O,)", "N s/m", "damping of the tendon's length"),
    FieldSpec("tendon_drive_ke", "real", "(O,)", "N/m",
              "position gain of the tendon's drive (an actuator on it): ke (target - L) - kd dL/dt"),
    FieldSpec("tendon_drive_kd", "real", "(O,)", "N s/m", "velocity gain of the tendon's drive"),
    FieldSpec("tendon_drive_force_limit", "real", "(O,)", "N", "the drive's force is clamped to +-this", False),
    FieldSpec("tendon_target_range", "real", "(O, 2)", "m, m", "the drive's target is clamped to this range",
              False),
    FieldSpec("segment_body", "int", "(o, 2)", "-", "the bodies of each path segment's two ends (-1: the world)",
              False),
    FieldSpec("segment_point", "vec3", "(o, 2)", "m", "the segment's ends in their bodies' frames"),
    FieldSpec("segment_wrap_kind", "int", "(o,)", "-", "what the segment wraps around: 0 nothing, 1 a sphere, "
              "2 a cylinder (axis z)", False),
    FieldSpec("segment_wrap_body", "int", "(o,)", "-", "the body of the wrap (-1: the world)", False),
    FieldSpec("segment_wrap_transform", "transform", "(o,)", "m, quat xyzw", "the wrap's frame in its body's frame"),
    FieldSpec("segment_wrap_radius", "real", "(o,)", "m", "the wrap's radius"),
    FieldSpec("segment_side_body", "int", "(o,)", "-",
              "the body of the wrap's side point (MuJoCo's sidesite; -1: the world, -2: none)", False),
    FieldSpec("segment_side_point", "vec3", "(o,)", "m", "the side point in its body's frame"),
    *built_by(
        "body",
        FieldSpec("body_mass", "real", "(B,)", "kg", "body mass", check="nonnegative"),
        FieldSpec("body_com", "vec3", "(B,)", "m", "centre of mass in the body frame"),
        FieldSpec("body_inertia", "mat33", "(B,)", "kg m^2", "inertia about the centre of mass, body axes"),
        FieldSpec("body_world", "int", "(B,)", "-", "world index of each body", False),
    ),
    FieldSpec("body_origin", "vec3", "(B,)", "m", "reference point of spatial quantities: the world position of the "
              "body's articulation root joint (a constant)", False),
    FieldSpec("body_joint", "int", "(B,)", "-", "the joint whose child the body is", False),
    FieldSpec("body_fluid_frame", "quat", "(B,)", "quat xyzw",
              "principal axes of body_inertia in body axes, at finalize: the axes of the box the fluid forces "
              "take for the body (identity where the inertia is diagonal)", False),
    *built_by(
        "joint",
        FieldSpec("joint_type", "int", "(J,)", "-", kind_list(JOINT_NAMES), False),
        FieldSpec("joint_parent", "int", "(J,)", "-", "parent body; -1 = world", False),
        FieldSpec("joint_child", "int", "(J,)", "-", "child body", False),
        FieldSpec("joint_X_p", "transform", "(J,)", "m, quat xyzw",
                  "joint frame in the parent body frame (link offset)"),
        FieldSpec("joint_X_c", "transform", "(J,)", "m, quat xyzw", "joint frame in the child body frame"),
        FieldSpec("joint_axis", "vec3", "(J,)", "-", "unit axis of a revolute/prismatic joint in the joint frame",
                  False),
    ),
    FieldSpec("joint_q_start", "int", "(J,)", "-", "first coordinate of each joint in joint_q", False),
    FieldSpec("joint_qd_start", "int", "(J,)", "-", "first dof of each joint in joint_qd", False),
    FieldSpec("joint_articulation", "int", "(J,)", "-", "articulation of each joint", False),
    FieldSpec("joint_dfs_pos", "int", "(J,)", "-", "position of each joint in depth-first order", False),
    FieldSpec("joint_dfs_end", "int", "(J,)", "-", "end (exclusive) of the joint's subtree in depth-first order",
              False),
    FieldSpec("dfs_joint", "int", "(J,)", "-", "joint at each depth-first position", False),
    FieldSpec("articulation_start", "int", "(A+1,)", "-", "first depth-first position of each articulation", False),
    FieldSpec("articulation_dof_start", "int", "(A+1,)", "-", "first dof of each articulation", False),
    FieldSpec("articulation_H_start", "int", "(A+1,)", "-", "offset of each articulation's dense mass matrix", False),
    FieldSpec("dof_joint", "int", "(D,)", "-", "joint of each dof", False),
    *built_by(
        "joint coordinate",
        FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat", "initial joint coordinates (copied into model.state())"),
    ),
    *built_by(
        "joint dof",
        FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s", "initial joint velocities"),
        FieldSpec("joint_armature", "real", "(D,)", "kg m^2 or kg", "armature added to the mass matrix diagonal",
                  check="nonnegative"),
        FieldSpec("joint_damping", "real", "(D,)", "N m s/rad or N s/m",
                  "viscous joint damping (integrated implicitly)", check="nonnegative"),
        FieldSpec("joint_friction", "real", "(D,)", "N m or N",
                  "dry joint friction: the largest friction torque or force (smooth below the model's "
                  "friction_smoothing speed, implicit)", check="nonnegative"),
        FieldSpec("joint_stiffness", "real", "(D,)", "N m/rad or N/m",
                  "joint spring stiffness (revolute, prismatic; explicit)", check="nonnegative"),
        FieldSpec("joint_spring_ref", "real", "(D,)", "rad or m", "coordinate at which the joint spring is relaxed",
                  check=None),
        FieldSpec("joint_target_ke", "real", "(D,)", "N m/rad or N/m", "PD drive position gain (revolute, prismatic)",
                  check="nonnegative"),
        FieldSpec("joint_target_kd", "real", "(D,)", "N m s/rad or N s/m", "PD drive velocity gain (implicit)",
                  check="nonnegative"),
        FieldSpec("joint_limit_lower", "real", "(D,)", "rad or m", "lower joint limit (revolute, prismatic)",
                  check=None),
        FieldSpec("joint_limit_upper", "real", "(D,)", "rad or m", "upper joint limit", check=None),
        FieldSpec("joint_limit_ke", "real", "(D,)", "N m/rad or N/m", "limit spring stiffness", check="nonnegative"),
        FieldSpec("joint_limit_kd", "real", "(D,)", "N m s/rad or N s/m", "limit damping", check="nonnegative"),
        FieldSpec("joint_limit_solref", "real", "(D, 2)", "s, - (or 1/s^2, 1/s)",
                  "the limit row's solref in the soft-constraint solve (MuJoCo's solreflimit); 0 0: the solve's "
                  "own settings (SoftContactOptions)", False, check=None),
        FieldSpec("joint_limit_solimp", "real", "(D, 5)", "-, -, rad or m, -, -",
                  "the limit row's solimp (MuJoCo's solimplimit), read where joint_limit_solref is set", False,
                  check=None),
        FieldSpec("joint_friction_solref", "real", "(D, 2)", "s, - (or 1/s^2, 1/s)",
                  "the friction-loss row's solref (MuJoCo's solreffriction); 0 0: the solve's own settings", False,
                  check=None),
        FieldSpec("joint_friction_solimp", "real", "(D, 5)", "-, -, rad or m, -, -",
                  "the friction-loss row's solimp (MuJoCo's solimpfriction), read where joint_friction_solref is set",
                  False, check=None),
        FieldSpec("joint_f_lower", "real", "(D,)", "N m or N",
                  "the control's joint_f is clamped to [joint_f_lower, joint_f_upper] (an actuator's range)",
                  False, check=None),
        FieldSpec("joint_f_upper", "real", "(D,)", "N m or N", "upper bound of the control's joint_f", False,
                  check=None),
        FieldSpec("joint_target_lower", "real", "(D,)", "rad or m",
                  "the control's joint_target_q is clamped to [joint_target_lower, joint_target_upper]", False,
                  check=None),
        FieldSpec("joint_target_upper", "real", "(D,)", "rad or m", "upper bound of the control's joint_target_q",
                  False, check=None),
        FieldSpec("joint_drive_force_limit", "real", "(D,)", "N m or N",
                  "the PD drive's force is clamped to +-this (then explicit)", False, check="nonnegative"),
        FieldSpec("joint_drive_implicit", "real", "(D,)", "-",
                  "1: the PD drive's damping is implicit in velocity (as MuJoCo's implicitfast integrator takes "
                  "an actuator's kv); 0: explicit (as MuJoCo's Euler integrator takes it)", False, check="nonnegative"),
        FieldSpec("joint_damping_implicit", "real", "(D,)", "-",
                  "1: the joint damping is implicit in velocity (as MuJoCo's Euler with eulerdamp and its implicit "
                  "integrators take it); 0: explicit (MuJoCo's Euler with eulerdamp disabled)", False,
                  check="nonnegative"),
    ),
)

STATE_FIELDS = (
    FieldSpec("particle_q", "vec3", "(P,)", "m", "particle positions"),
    FieldSpec("particle_qd", "vec3", "(P,)", "m/s", "particle velocities"),
    FieldSpec("particle_f", "vec3", "(P,)", "N", "forces of the step that starts from this state (solver output)"),
    FieldSpec("neighbor_count", "int", "(P,)", "-", "contact neighbours found for the step from this state", False),
    FieldSpec("neighbor_index", "int", "(P, K)", "-", "those neighbours' particle indices", False),
    FieldSpec("joint_q", "real", "(Q,)", "m, rad, quat",
              "joint coordinates; a free joint's 7 are (position of the child origin in the parent frame, "
              "quaternion xyzw), a ball joint's 4 a quaternion xyzw"),
    FieldSpec("joint_qd", "real", "(D,)", "m/s, rad/s",
              "joint velocities; a free joint's 6 are (linear, angular): the velocity of the child origin in "
              "parent axes, then the angular velocity in child axes (wpsim.core.spatial.free_joint_velocity)"),
    FieldSpec("joint_qdd_warm_start", "real", "(D,)", "m/s^2, rad/s^2",
              "the soft-constraint contact solve's joint accelerations at the step that produced this state, "
              "where the next step's solve starts (zero in a new state and under other solvers)", False),
    FieldSpec("body_q", "transform", "(B,)", "m, quat xyzw", "body poses (forward kinematics of joint_q)"),
    FieldSpec("body_qd", "spatial", "(B,)", "rad/s, m/s",
              "(angular, linear): world angular velocity, then the world velocity of the body frame's origin "
              "(wpsim.core.spatial.body_velocity)"),
    FieldSpec("body_f", "spatial", "(B,)", "N m, N",
              "(torque, force): applied + contact wrench about body_origin, world axes, of the step from this state"),
)


DYNAMIC_STATE_FIELDS = ("particle_q", "particle_qd", "joint_q", "joint_qd")
"""The state fields a step integrates; everything else in a State is derived from them."""

STORED_STATE_FIELDS = DYNAMIC_STATE_FIELDS + ("joint_qdd_warm_start",)
"""What a step reads of its start state: the integrated fields and the contact solve's warm
start (which carries no gradient: the solve's solution does not depend on where it starts).
Copies of a state (``State.assign``) and checkpoints keep these, so a re-run steps bitwise the same."""


CONTROL_FIELDS = (
    FieldSpec("tet_activation", "real", "(E,)", "-", "signed actuation (see wpsim.kernels.fem), >= -0.9"),
    FieldSpec("spring_activation", "real", "(S,)", "-",
              "relative rest-length change: the spring's rest length is spring_rest_length * (1 + activation) "
              "(< 0 contracts)"),
    FieldSpec("particle_f_ext", "vec3", "(P,)", "N", "external force applied to each particle"),
    FieldSpec("joint_f", "real", "(D,)", "N m or N", "generalized force on each joint dof"),
    FieldSpec("joint_target_q", "real", "(D,)", "rad or m", "PD drive position target (revolute, prismatic dofs)"),
    FieldSpec("joint_target_qd", "real", "(D,)", "rad/s or m/s", "PD drive velocity target"),
    FieldSpec("coupling_target", "real", "(L,)", "m or rad", "target length of each joint coupling's drive"),
    FieldSpec("tendon_target", "real", "(O,)", "m", "target length of each spatial tendon's drive"),
    FieldSpec("body_f_ext", "spatial", "(B,)", "N m, N", "external (torque, force at the centre of mass), world axes"),
)
