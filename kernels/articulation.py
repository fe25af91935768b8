"""Articulated rigid bodies in generalized coordinates: kinematics, joint-space dynamics
(composite-rigid-body mass matrix, recursive bias forces), dense Cholesky solve, and the
semi-implicit joint update.

Spatial vectors are 6-vectors (angular, linear) expressed in world axes at a reference
point O, the articulation's origin (``body_origin``: the world position of its root joint,
so robots far from the world origin keep their float32 precision): a twist is
(omega, v_O) with v_O the velocity of the body point at O; a wrench is (torque about O,
force). A spatial inertia is kept as its parts (mass m, first moment h = m c, rotational
inertia J about O), which add up directly over subtrees. Below, "origin" means O.

Joint coordinates (q) and velocities (qd) per joint type:
- free: q = (position 3, quaternion xyzw 4) of the child frame in the parent joint frame;
  qd = (linear velocity of the child origin in parent axes 3, angular velocity in child axes 3)
- ball: q = quaternion xyzw (4); qd = angular velocity in child axes (3)
- revolute: q = angle (rad); qd = rate (rad/s), about the joint axis
- prismatic: q = offset (m); qd = rate (m/s), along the joint axis
- fixed: none
Articulations are trees. Each body has exactly one joint (its parent joint). Joints are
visited in depth-first order (``dfs_joint``), so a subtree is a contiguous range of
positions.
"""

import warp as wp

from .enums import JOINT_BALL, JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE
from .generic import kernel, mat33, quat, transform, vec3

vec6 = wp.types.vector(6, wp.Float)


@wp.func
def spatial(w: vec3, v: vec3):
    """The 6-vector (w, v)."""
    return wp.vector(w[0], w[1], w[2], v[0], v[1], v[2])


@wp.func
def top(s: vec6):
    """Angular part of a spatial vector."""
    return wp.vector(s[0], s[1], s[2])


@wp.func
def bottom(s: vec6):
    """Linear part of a spatial vector."""
    return wp.vector(s[3], s[4], s[5])


@wp.func
def motion_cross(a: vec6, b: vec6):
    """Spatial motion cross product a x b (rate of change of motion b carried by twist a)."""
    w = top(a)
    return spatial(wp.cross(w, top(b)), wp.cross(w, bottom(b)) + wp.cross(bottom(a), top(b)))


@wp.func
def force_cross(a: vec6, f: vec6):
    """Spatial force cross product a x* f."""
    w = top(a)
    return spatial(wp.cross(w, top(f)) + wp.cross(bottom(a), bottom(f)), wp.cross(w, bottom(f)))


@wp.func
def inertia_times(m: wp.Float, h: vec3, J: mat33, s: vec6):
    """Spatial inertia (m, h, J) applied to twist s: momentum (J w + h x v, m v - h x w)."""
    w = top(s)
    v = bottom(s)
    return spatial(J * w + wp.cross(h, v), v * m - wp.cross(h, w))


@wp.func
def body_world_inertia(X: transform, m: wp.Float, com: vec3, inertia: mat33, origin: vec3):
    """First moment h (kg m) and rotational inertia J (kg m^2) about ``origin`` (world) of a
    body at pose X with mass m, centre of mass ``com`` and inertia about it (body axes)."""
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    c = wp.transform_point(X, com) - origin
    eye = wp.identity(3, dtype=type(m))
    J = R * inertia * wp.transpose(R) + (eye * wp.dot(c, c) - wp.outer(c, c)) * m
    return c * m, J


@wp.func
def fluid_wrench(X: transform, m: wp.Float, com: vec3, inertia: mat33, frame: quat, twist: vec6, origin: vec3,
                 fluid: wp.array2d(dtype=wp.Float)):
    """(torque, force at the centre of mass) in world axes of the medium ``fluid`` (density
    kg/m^3, viscosity Pa s, wind m/s) on a body of mass m at pose X moving with ``twist`` about
    ``origin``, MuJoCo's inertia-box model: the box with the body's principal moments (axes
    ``frame`` in body axes) meets viscous drag as a sphere of its mean side d (torque -pi d^3
    viscosity w, force -3 pi d viscosity v, v relative to the wind) and quadratic drag of
    density on its faces, per principal axis; nothing below 1e-15 kg."""
    zero = m * type(m)(0.0)
    torque = wp.vector(zero, zero, zero)
    force = torque
    density = fluid[0, 0]
    viscosity = fluid[0, 1]
    if m >= type(m)(1.0e-15) and (density > zero or viscosity > zero):
        axes = wp.quat_to_matrix(frame)
        R = wp.quat_to_matrix(wp.transform_get_rotation(X)) * axes
        principal = wp.transpose(axes) * inertia * axes
        tiny = type(m)(1.0e-15)
        six = type(m)(6.0)
        box = wp.vector(wp.sqrt(wp.max(tiny, principal[1, 1] + principal[2, 2] - principal[0, 0]) / m * six),
                   wp.sqrt(wp.max(tiny, principal[0, 0] + principal[2, 2] - principal[1, 1]) / m * six),
                   wp.sqrt(wp.max(tiny, principal[0, 0] + principal[1, 1] - principal[2, 2]) / m * six))
        w = wp.transpose(R) * top(twist)
        v = wp.transpose(R) * (bottom(twist) + wp.cross(top(twist), wp.transform_point(X, com) - origin)
                               - wp.vector(fluid[0, 2], fluid[0, 3], fluid[0, 4]))
        diameter = (box[0] + box[1] + box[2]) / type(m)(3.0)
        pi = type(m)(wp.pi)
        torque = w * (-pi * diameter * diameter * diameter * viscosity)
        force = v * (-type(m)(3.0) * pi * diameter * viscosity)
        half = type(m)(0.5) * density
        force = force - wp.vector(half * box[1] * box[2] * wp.abs(v[0]) * v[0], half * box[0] * box[2] * wp.abs(v[1]) * v[1],
                             half * box[0] * box[1] * wp.abs(v[2]) * v[2])
        quartic = wp.vector(box[0] * box[0] * box[0] * box[0], box[1] * box[1] * box[1] * box[1],
                       box[2] * box[2] * box[2] * box[2])
        spin = density / type(m)(64.0)
        torque = torque - wp.vector(spin * box[0] * (quartic[1] + quartic[2]) * wp.abs(w[0]) * w[0],
                               spin * box[1] * (quartic[0] + quartic[2]) * wp.abs(w[1]) * w[1],
                               spin * box[2] * (quartic[0] + quartic[1]) * wp.abs(w[2]) * w[2])
        torque = R * torque
        force = R * force
    return spatial(torque, force)


@wp.func
def dof_count(jtype: int):
    """Number of velocity coordinates of a joint type."""
    if jtype == JOINT_FREE:
        return 6
    if jtype == JOINT_BALL:
        return 3
    if jtype == JOINT_FIXED:
        return 0
    return 1


@wp.func
def coord_count(jtype: int):
    """Number of position coordinates of a joint type."""
    if jtype == JOINT_FREE:
        return 7
    if jtype == JOINT_BALL:
        return 4
    if jtype == JOINT_FIXED:
        return 0
    return 1


@wp.func
def joint_motion(jtype: int, axis: vec3, q: wp.array(dtype=wp.Float), qs: int):
    """Transform of the child joint frame relative to the parent joint frame."""
    zero = axis[0] * type(axis[0])(0.0)
    origin = wp.vector(zero, zero, zero)
    if jtype == JOINT_REVOLUTE:
        return wp.transformation(origin, wp.quat_from_axis_angle(axis, q[qs]))
    if jtype == JOINT_PRISMATIC:
        return wp.transformation(axis * q[qs], wp.quat_identity(dtype=type(zero)))
    if jtype == JOINT_BALL:
        return wp.transformation(origin, wp.quaternion(q[qs], q[qs + 1], q[qs + 2], q[qs + 3]))
    if jtype == JOINT_FREE:
        return wp.transformation(
            wp.vector(q[qs], q[qs + 1], q[qs + 2]), wp.quaternion(q[qs + 3], q[qs + 4], q[qs + 5], q[qs + 6])
        )
    return wp.transformation(origin, wp.quat_identity(dtype=type(zero)))


@wp.func
def column_is_child_fixed(jtype: int, k: int):
    """Whether motion column k of a joint turns with the child (ball, free angular) rather
    than with the parent (revolute, prismatic, free linear)."""
    return jtype == JOINT_BALL or (jtype == JOINT_FREE and k >= 3)


@wp.func
def articulation_fk(
    a: int,
    articulation_start: wp.array(dtype=int),
    dfs_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_parent: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_X_p: wp.array(dtype=transform),
    joint_X_c: wp.array(dtype=transform),
    joint_axis: wp.array(dtype=vec3),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    gravity: wp.array(dtype=vec3),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    body_q_out: wp.array(dtype=transform),
    body_qd_out: wp.array(dtype=vec6),
    body_twist_out: wp.array(dtype=vec6),
    body_bias_acc_out: wp.array(dtype=vec6),
    dof_motion_out: wp.array(dtype=vec6),
):
    """Forward kinematics of articulation ``a`` (see ``articulation_kinematics``)."""
    for pos in range(articulation_start[a], articulation_start[a + 1]):
        j = dfs_joint[pos]
        parent = joint_parent[j]
        child = joint_child[j]
        X_j = joint_X_p[j]
        zero = X_j[0] * type(X_j[0])(0.0)
        zero3 = wp.vector(zero, zero, zero)
        v_parent = spatial(zero3, zero3)
        a_parent = spatial(zero3, -gravity[0])
        if parent >= 0:
            X_j = body_q_out[parent] * X_j
            v_parent = body_twist_out[parent]
            a_parent = body_bias_acc_out[parent]
        jtype = joint_type[j]
        qs = joint_q_start[j]
        ds = joint_qd_start[j]
        X_motion = joint_motion(jtype, joint_axis[j], joint_q_in, qs)
        X_after = X_j * X_motion
        X_child = X_after * wp.transform_inverse(joint_X_c[j])
        body_q_out[child] = X_child
        # world motion columns of this joint's dofs
        R_before = wp.transform_get_rotation(X_j)
        R_after = wp.transform_get_rotation(X_after)
        o = body_origin[child]
        p_after = wp.transform_get_translation(X_after) - o
        axis_w = wp.quat_rotate(R_before, joint_axis[j])
        v_child = v_parent
        n_dof = dof_count(jtype)
        for k in range(6):  # constant trip count: unrolled, so the accumulations stay differentiable
            if k >= n_dof:
                continue
            s = spatial(axis_w, wp.cross(p_after, axis_w))
            if jtype == JOINT_PRISMATIC:
                s = spatial(zero3, axis_w)
            if jtype == JOINT_BALL or jtype == JOINT_FREE:
                e = zero3
                e[k % 3] = type(zero)(1.0)
                if column_is_child_fixed(jtype, k):
                    a_w = wp.quat_rotate(R_after, e)
                    s = spatial(a_w, wp.cross(p_after, a_w))
                else:
                    s = spatial(zero3, wp.quat_rotate(R_before, e))
            dof_motion_out[ds + k] = s
            v_child = v_child + s * joint_qd_in[ds + k]
        a_child = a_parent
        for k in range(6):
            if k >= n_dof:
                continue
            rate = v_parent
            if column_is_child_fixed(jtype, k):
                rate = v_child
            a_child = a_child + motion_cross(rate, dof_motion_out[ds + k]) * joint_qd_in[ds + k]
        body_twist_out[child] = v_child
        body_bias_acc_out[child] = a_child
        w = top(v_child)
        offset = wp.transform_get_translation(X_child) - o
        body_qd_out[child] = spatial(w, bottom(v_child) + wp.cross(w, offset))


@kernel
def articulation_kinematics(
    articulation_start: wp.array(dtype=int),
    dfs_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_parent: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_X_p: wp.array(dtype=transform),
    joint_X_c: wp.array(dtype=transform),
    joint_axis: wp.array(dtype=vec3),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    body_origin: wp.array(dtype=vec3),
    gravity: wp.array(dtype=vec3),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    body_q_out: wp.array(dtype=transform),
    body_qd_out: wp.array(dtype=vec6),
    body_twist_out: wp.array(dtype=vec6),
    body_bias_acc_out: wp.array(dtype=vec6),
    dof_motion_out: wp.array(dtype=vec6),
):
    """Forward kinematics of one articulation per thread, root to leaves: body poses
    (body_q_out), body velocities (body_qd_out: world angular velocity, world velocity of the
    body origin), twists at the articulation origin, velocity-product accelerations (with the base
    accelerating at -gravity, so gravity enters the bias forces) and the world motion
    column of every joint dof."""
    articulation_fk(wp.tid(), articulation_start, dfs_joint, joint_type, joint_parent, joint_child, joint_X_p,
        joint_X_c, joint_axis, joint_q_start, joint_qd_start, body_origin, gravity, joint_q_in, joint_qd_in,
        body_q_out, body_qd_out, body_twist_out, body_bias_acc_out, dof_motion_out)


@wp.func
def start_body_wrench(
    b: int,
    body_mass: wp.array(dtype=wp.Float),
    body_com: wp.array(dtype=vec3),
    body_inertia: wp.array(dtype=mat33),
    body_origin: wp.array(dtype=vec3),
    body_fluid_frame: wp.array(dtype=quat),
    fluid: wp.array2d(dtype=wp.Float),
    body_q_in: wp.array(dtype=transform),
    body_twist_in: wp.array(dtype=vec6),
    body_bias_acc_in: wp.array(dtype=vec6),
    body_f_ext: wp.array(dtype=vec6),
    body_f_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
    body_h_out: wp.array(dtype=vec3),
    body_J_out: wp.array(dtype=mat33),
    body_inertial_bias_out: wp.array(dtype=vec6),
):
    """Start body ``b``'s wrench and damping blocks and fill its world inertia and inertial
    bias wrench (see ``init_body_wrenches``)."""
    X = body_q_in[b]
    m = body_mass[b]
    v = body_twist_in[b]
    f = body_f_ext[b] + fluid_wrench(X, m, body_com[b], body_inertia[b], body_fluid_frame[b], v, body_origin[b], fluid)
    c = wp.transform_point(X, body_com[b]) - body_origin[b]
    body_f_out[b] = spatial(top(f) + wp.cross(c, bottom(f)), bottom(f))
    zero = wp.outer(c, c) * type(c[0])(0.0)
    for k in range(3):
        body_damping_out[b, k] = zero
    h, J = body_world_inertia(X, m, body_com[b], body_inertia[b], body_origin[b])
    body_h_out[b] = h
    body_J_out[b] = J
    body_inertial_bias_out[b] = inertia_times(m, h, J, body_bias_acc_in[b]) + force_cross(v, inertia_times(m, h, J, v))


@kernel
def init_body_wrenches(
    body_mass: wp.array(dtype=wp.Float),
    body_com: wp.array(dtype=vec3),
    body_inertia: wp.array(dtype=mat33),
    body_origin: wp.array(dtype=vec3),
    body_fluid_frame: wp.array(dtype=quat),
    fluid: wp.array2d(dtype=wp.Float),
    body_q_in: wp.array(dtype=transform),
    body_twist_in: wp.array(dtype=vec6),
    body_bias_acc_in: wp.array(dtype=vec6),
    body_f_ext: wp.array(dtype=vec6),
    body_f_out: wp.array(dtype=vec6),
    body_damping_out: wp.array2d(dtype=mat33),
    body_h_out: wp.array(dtype=vec3),
    body_J_out: wp.array(dtype=mat33),
    body_inertial_bias_out: wp.array(dtype=vec6),
):
    """One thread per body: start its wrench (about its articulation origin) from the external
    wrench given as (torque, force at the centre of mass), both in world axes, plus the fluid's
    (``fluid_wrench``), and its contact
    damping blocks from zero; and its first moment h and rotational inertia J about the origin
    and its inertial bias wrench I a + v x* I v (gravity through the base acceleration,
    velocity products), which the subtree sums add up."""
    start_body_wrench(wp.tid(), body_mass, body_com, body_inertia, body_origin, body_fluid_frame, fluid, body_q_in,
        body_twist_in,
        body_bias_acc_in, body_f_ext, body_f_out, body_damping_out, body_h_out, body_J_out, body_inertial_bias_out)


@wp.func
def damping_times(ww: mat33, wv: mat33, vv: mat33, s: vec6):
    """Spatial damping matrix [[ww, wv], [wv^T, vv]] applied to twist s (a wrench)."""
    w = top(s)
    v = bottom(s)
    return spatial(ww * w + wv * v, wp.transpose(wv) * w + vv * v)


@wp.func
def subtree_sums(
    b: int,
    body_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dfs_joint: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    body_h_in: wp.array(dtype=vec3),
    body_J_in: wp.array(dtype=mat33),
    body_inertial_bias_in: wp.array(dtype=vec6),
    body_f_in: wp.array(dtype=vec6),
    body_damping_in: wp.array2d(dtype=mat33),
    dt: wp.Float,
    subtree_mass_out: wp.array(dtype=wp.Float),
    subtree_h_out: wp.array(dtype=vec3),
    subtree_J_out: wp.array(dtype=mat33),
    subtree_bias_out: wp.array(dtype=vec6),
    subtree_damping_out: wp.array2d(dtype=mat33),
    dof_subtree_force_out: wp.array(dtype=vec6),
):
    """Composite inertia, bias wrench and damping of body ``b``'s subtree and the subtree
    force columns of its joint's dofs (see ``subtree_inertia_and_bias``)."""
    j = body_joint[b]
    # accumulators start from constants: a loop-mutated variable must not feed an
    # expression outside the loop, whose adjoint would read the variable's final value
    m_sum = type(body_mass[b])(0.0)
    zero3 = wp.vector(m_sum, m_sum, m_sum)
    h_sum = zero3
    J_sum = wp.outer(zero3, zero3)
    ww = J_sum
    wv = J_sum
    vv = J_sum
    f_sum = spatial(zero3, zero3)
    for pos in range(joint_dfs_pos[j], joint_dfs_end[j]):
        d = joint_child[dfs_joint[pos]]
        f_sum += body_inertial_bias_in[d] - body_f_in[d]
        m_sum += body_mass[d]
        h_sum += body_h_in[d]
        J_sum += body_J_in[d]
        ww += body_damping_in[d, 0]
        wv += body_damping_in[d, 1]
        vv += body_damping_in[d, 2]
    subtree_mass_out[b] = m_sum
    subtree_h_out[b] = h_sum
    subtree_J_out[b] = J_sum
    subtree_bias_out[b] = f_sum
    subtree_damping_out[b, 0] = ww
    subtree_damping_out[b, 1] = wv
    subtree_damping_out[b, 2] = vv
    # the columns read the sums back from the arrays: a loop-mutated variable's adjoint
    # outside its loop would see the variable's value before the loop
    ds = joint_qd_start[j]
    n_dof = dof_count(joint_type[j])
    for k in range(6):  # constant trip count: unrolled
        if k < n_dof:
            s = dof_motion_in[ds + k]
            inertia = inertia_times(subtree_mass_out[b], subtree_h_out[b], subtree_J_out[b], s)
            damping = damping_times(subtree_damping_out[b, 0], subtree_damping_out[b, 1], subtree_damping_out[b, 2], s)
            dof_subtree_force_out[ds + k] = inertia + damping * dt


@kernel
def subtree_inertia_and_bias(
    body_joint: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    dfs_joint: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    body_mass: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    body_h_in: wp.array(dtype=vec3),
    body_J_in: wp.array(dtype=mat33),
    body_inertial_bias_in: wp.array(dtype=vec6),
    body_f_in: wp.array(dtype=vec6),
    body_damping_in: wp.array2d(dtype=mat33),
    dt: wp.Float,
    subtree_mass_out: wp.array(dtype=wp.Float),
    subtree_h_out: wp.array(dtype=vec3),
    subtree_J_out: wp.array(dtype=mat33),
    subtree_bias_out: wp.array(dtype=vec6),
    subtree_damping_out: wp.array2d(dtype=mat33),
    dof_subtree_force_out: wp.array(dtype=vec6),
):
    """One thread per body: the composite spatial inertia of the body's subtree, the sum
    of its bodies' inertial bias wrenches minus their applied and contact wrenches (the
    wrench the parent joint must transmit at zero acceleration), the sum of its bodies'
    contact damping blocks, and for each dof of the body's joint its subtree force column
    (I_c + dt D_c) S (composite inertia I_c, damping D_c, motion column S), which the
    joint-space rows dot with the other dofs' columns."""
    subtree_sums(wp.tid(), body_joint, joint_type, joint_qd_start, joint_dfs_pos, joint_dfs_end, dfs_joint,
        joint_child, body_mass, dof_motion_in, body_h_in, body_J_in, body_inertial_bias_in, body_f_in,
        body_damping_in, dt, subtree_mass_out, subtree_h_out, subtree_J_out, subtree_bias_out, subtree_damping_out,
        dof_subtree_force_out)


@wp.func
def joint_drive(
    jtype: int, q: wp.Float, qd: wp.Float, target_q: wp.Float, target_qd: wp.Float, ke: wp.Float,
    kd: wp.Float, force_limit: wp.Float,
):
    """(force (N or N m), velocity slope) of a 1-dof joint's PD drive, the force clamped to
    +-force_limit; the slope, kd while the drive is not clamped and 0 while it is, is what the
    joint-space solve takes implicitly."""
    force = q * type(q)(0.0)
    slope = force
    if jtype == JOINT_REVOLUTE or jtype == JOINT_PRISMATIC:
        force = ke * (target_q - q) + kd * (target_qd - qd)
        slope = kd
        if force > force_limit:
            force = force_limit
            slope = q * type(q)(0.0)
        if force < -force_limit:
            force = -force_limit
            slope = q * type(q)(0.0)
    return force, slope


@wp.func
def joint_limit(jtype: int, q: wp.Float, qd: wp.Float, lower: wp.Float, upper: wp.Float, ke: wp.Float, kd: wp.Float):
    """(force (N or N m), stiffness, damping) of a 1-dof joint's limit spring-damper while q is
    past a bound; zeros otherwise. The joint-space solve takes the stiffness and damping
    implicitly, so the limit is stable whatever the link inertia and step."""
    engaged = q * type(q)(0.0)
    bound = q
    if jtype == JOINT_REVOLUTE or jtype == JOINT_PRISMATIC:
        if q < lower:
            engaged = type(q)(1.0)
            bound = lower
        if q > upper:
            engaged = type(q)(1.0)
            bound = upper
    return engaged * (ke * (bound - q) - kd * qd), engaged * ke, engaged * kd


@wp.func
def dry_friction(limit: wp.Float, qd: wp.Float, smoothing: wp.Float):
    """Smooth dry friction of a dof, -limit qd / sqrt(qd^2 + s^2) (N m or N), and the minus
    slope of it in qd (N m s/rad or N s/m), which the joint-space solve treats implicitly."""
    norm = wp.sqrt(qd * qd + smoothing * smoothing)
    return -limit * qd / norm, limit * smoothing * smoothing / (norm * norm * norm)


@wp.func
def dof_laws(
    i: int,
    jtype: int,
    q: wp.Float,
    qd: wp.Float,
    force: wp.Float,
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
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    dt: wp.Float,
):
    """(tau, implicit) of dof i at coordinate q and rate qd: the applied ``force`` plus its
    drive, spring, limit, damping and dry friction (N m or N), and what they add to the
    joint-space diagonal to be implicit, dt * (damping, where it is implicit + drive kd while
    unclamped, where the drive is implicit + friction slope + limit kd) + dt^2 * limit ke
    (kg m^2 or kg). An
    engaged limit acts at the step's end position q + dt qd' (its -dt k qd term)."""
    friction, friction_slope = dry_friction(joint_friction[i], qd, friction_smoothing)
    limit, limit_k, limit_c = joint_limit(jtype, q, qd, joint_limit_lower[i], joint_limit_upper[i], joint_limit_ke[i],
                                          joint_limit_kd[i])
    target = wp.clamp(joint_target_q[i], joint_target_lower[i], joint_target_upper[i])
    drive, drive_c = joint_drive(jtype, q, qd, target, joint_target_qd[i], joint_target_ke[i], joint_target_kd[i],
                                 joint_drive_force_limit[i])
    spring = q * type(q)(0.0)
    if jtype == JOINT_REVOLUTE or jtype == JOINT_PRISMATIC:
        spring = joint_stiffness[i] * (joint_spring_ref[i] - q)
    implicit = dt * (joint_damping[i] * joint_damping_implicit[i] + drive_c * joint_drive_implicit[i]
                     + friction_slope + limit_c)
    implicit += dt * dt * limit_k
    tau = force - joint_damping[i] * qd + friction + limit - dt * limit_k * qd + drive + spring
    return tau, implicit


@wp.func
def joint_space_row(
    i: int,
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    joint_armature: wp.array(dtype=wp.Float),
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
    joint_f_lower: wp.array(dtype=wp.Float),
    joint_f_upper: wp.array(dtype=wp.Float),
    joint_target_lower: wp.array(dtype=wp.Float),
    joint_target_upper: wp.array(dtype=wp.Float),
    joint_drive_force_limit: wp.array(dtype=wp.Float),
    joint_drive_implicit: wp.array(dtype=wp.Float),
    joint_damping_implicit: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    dof_subtree_force_in: wp.array(dtype=vec6),
    subtree_bias_in: wp.array(dtype=vec6),
    joint_f: wp.array(dtype=wp.Float),
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    dt: wp.Float,
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    dof_inertia_out: wp.array(dtype=wp.Float),
):
    """Row ``i`` of the joint-space system (see ``assemble_joint_space``)."""
    j = dof_joint[i]
    a = joint_articulation[j]
    d0 = articulation_dof_start[a]
    n = articulation_dof_start[a + 1] - d0
    row = articulation_H_start[a] + (i - d0) * n
    s_i = dof_motion_in[i]
    pos_j = joint_dfs_pos[j]
    qd = joint_qd_in[i]
    jtype = joint_type[j]
    q = joint_q_in[joint_q_start[j]]
    tau, implicit = dof_laws(i, jtype, q, qd, wp.clamp(joint_f[i], joint_f_lower[i], joint_f_upper[i]),
                             joint_damping, joint_friction, joint_stiffness, joint_spring_ref, joint_target_ke,
                             joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke, joint_limit_kd,
                             joint_target_lower, joint_target_upper, joint_drive_force_limit, joint_drive_implicit, joint_damping_implicit,
                             joint_target_q, joint_target_qd, friction_smoothing, dt)
    force_i = dof_subtree_force_in[i]
    for k in range(d0, d0 + n):
        jk = dof_joint[k]
        pos_k = joint_dfs_pos[jk]
        value = s_i[0] * type(s_i[0])(0.0)
        if pos_j <= pos_k and pos_k < joint_dfs_end[j]:  # k's joint in j's subtree
            value = wp.dot(s_i, dof_subtree_force_in[k])
        elif pos_k <= pos_j and pos_j < joint_dfs_end[jk]:  # j's joint in k's subtree (I_c, D_c symmetric)
            value = wp.dot(dof_motion_in[k], force_i)
        if k == i:
            value += joint_armature[i] + implicit
            dof_inertia_out[i] = value
        mass_matrix_out[row + k - d0] = value
    rhs_out[i] = tau - wp.dot(s_i, subtree_bias_in[joint_child[j]])


@kernel
def assemble_joint_space(
    dof_joint: wp.array(dtype=int),
    joint_articulation: wp.array(dtype=int),
    articulation_dof_start: wp.array(dtype=int),
    articulation_H_start: wp.array(dtype=int),
    joint_type: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_dfs_pos: wp.array(dtype=int),
    joint_dfs_end: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    joint_armature: wp.array(dtype=wp.Float),
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
    joint_f_lower: wp.array(dtype=wp.Float),
    joint_f_upper: wp.array(dtype=wp.Float),
    joint_target_lower: wp.array(dtype=wp.Float),
    joint_target_upper: wp.array(dtype=wp.Float),
    joint_drive_force_limit: wp.array(dtype=wp.Float),
    joint_drive_implicit: wp.array(dtype=wp.Float),
    joint_damping_implicit: wp.array(dtype=wp.Float),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    dof_motion_in: wp.array(dtype=vec6),
    dof_subtree_force_in: wp.array(dtype=vec6),
    subtree_bias_in: wp.array(dtype=vec6),
    joint_f: wp.array(dtype=wp.Float),
    joint_target_q: wp.array(dtype=wp.Float),
    joint_target_qd: wp.array(dtype=wp.Float),
    friction_smoothing: wp.Float,
    dt: wp.Float,
    mass_matrix_out: wp.array(dtype=wp.Float),
    rhs_out: wp.array(dtype=wp.Float),
    dof_inertia_out: wp.array(dtype=wp.Float),
):
    """One thread per dof i: row i of the articulation's joint-space matrix
    H_ik = S_i^T (I_c + dt D_c) S_k (I_c: composite inertia, D_c: contact damping of the
    deeper joint's subtree: the dot of the shallower dof's motion column with the deeper
    one's subtree force column), plus armature, dt * (damping + drive kd while the drive is not
    force-clamped) and, past a limit, dt * limit kd + dt^2 * limit ke on the diagonal,
    and the right-hand side tau_i - S_i^T (subtree bias wrench) with tau from the control
    (joint_f and joint_target_q clamped to their ranges, the drive force to its limit),
    drives, joint springs, limits, damping and dry friction. The dt terms make joint damping,
    drive damping, dry joint friction (its slope, ``dry_friction``), engaged limits
    (``joint_limit``, also implicit in position) and contact damping and friction implicit
    in velocity (a linearly implicit Euler step). ``dof_inertia_out``: the diagonal, for
    ``wpsim.kernels.couplings``."""
    joint_space_row(wp.tid(), dof_joint, joint_articulation, articulation_dof_start, articulation_H_start, joint_type,
        joint_child, joint_dfs_pos, joint_dfs_end, joint_q_start, joint_qd_start, joint_armature, joint_damping,
        joint_friction, joint_stiffness, joint_spring_ref, joint_target_ke, joint_target_kd, joint_limit_lower,
        joint_limit_upper, joint_limit_ke, joint_limit_kd, joint_f_lower, joint_f_upper, joint_target_lower,
        joint_target_upper, joint_drive_force_limit, joint_drive_implicit, joint_damping_implicit, joint_q_in, joint_qd_in, dof_motion_in, dof_subtree_force_in,
        subtree_bias_in, joint_f, joint_target_q, joint_target_qd, friction_smoothing, dt, mass_matrix_out, rhs_out,
        dof_inertia_out)


@wp.func
def integrate_rotation(rot: quat, w_local: vec3, dt: wp.Float):
    """Rotation after turning at body-axes angular velocity w_local for dt (exponential map)."""
    d = w_local * dt
    angle_sq = wp.dot(d, d)
    half = type(dt)(0.5)
    scale = half - angle_sq / type(dt)(48.0)
    cos_half = type(dt)(1.0) - angle_sq / type(dt)(8.0)
    if angle_sq > type(dt)(1.0e-8):
        angle = wp.sqrt(angle_sq)
        scale = wp.sin(half * angle) / angle
        cos_half = wp.cos(half * angle)
    turn = wp.quaternion(d[0] * scale, d[1] * scale, d[2] * scale, cos_half)
    return wp.normalize(rot * turn)


@wp.func
def integrate_joint(
    j: int,
    joint_type: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    qdd_in: wp.array(dtype=wp.Float),
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    joint_q_out: wp.array(dtype=wp.Float),
    joint_qd_out: wp.array(dtype=wp.Float),
    world_fault_step_out: wp.array(dtype=int),
):
    """Semi-implicit update of joint ``j`` (see ``integrate_joints``). Every coordinate and
    velocity is read before it is written, so the update may run in place (``joint_q_out`` the
    array ``joint_q_in``, ``joint_qd_out`` the array ``joint_qd_in``)."""
    jtype = joint_type[j]
    qs = joint_q_start[j]
    ds = joint_qd_start[j]
    bad = int(0)
    if jtype == JOINT_REVOLUTE or jtype == JOINT_PRISMATIC:
        joint_q_out[qs] = joint_q_in[qs] + dt * (joint_qd_in[ds] + dt * qdd_in[ds])
    if jtype == JOINT_FREE:
        for k in range(3):
            joint_q_out[qs + k] = joint_q_in[qs + k] + dt * (joint_qd_in[ds + k] + dt * qdd_in[ds + k])
    if jtype == JOINT_BALL or jtype == JOINT_FREE:
        r = qs
        w = ds
        if jtype == JOINT_FREE:
            r = qs + 3
            w = ds + 3
        rot = wp.quaternion(joint_q_in[r], joint_q_in[r + 1], joint_q_in[r + 2], joint_q_in[r + 3])
        omega = wp.vector(joint_qd_in[w], joint_qd_in[w + 1], joint_qd_in[w + 2])
        omega = omega + wp.vector(qdd_in[w], qdd_in[w + 1], qdd_in[w + 2]) * dt
        new_rot = integrate_rotation(rot, omega, dt)
        for k in range(4):
            joint_q_out[r + k] = new_rot[k]
    for k in range(dof_count(jtype)):
        v = joint_qd_in[ds + k] + dt * qdd_in[ds + k]
        joint_qd_out[ds + k] = v
        if not wp.isfinite(v) or wp.abs(v) > max_speed:
            bad = 1
    for k in range(coord_count(jtype)):
        x = joint_q_out[qs + k]
        if not wp.isfinite(x) or wp.abs(x) > max_coordinate:
            bad = 1
    if bad != 0:
        wp.atomic_min(world_fault_step_out, body_world[joint_child[j]], step)


@kernel
def integrate_joints(
    joint_type: wp.array(dtype=int),
    joint_child: wp.array(dtype=int),
    joint_q_start: wp.array(dtype=int),
    joint_qd_start: wp.array(dtype=int),
    body_world: wp.array(dtype=int),
    joint_q_in: wp.array(dtype=wp.Float),
    joint_qd_in: wp.array(dtype=wp.Float),
    qdd_in: wp.array(dtype=wp.Float),
    dt: wp.Float,
    step: int,
    max_coordinate: wp.Float,
    max_speed: wp.Float,
    joint_q_out: wp.array(dtype=wp.Float),
    joint_qd_out: wp.array(dtype=wp.Float),
    world_fault_step_out: wp.array(dtype=int),
):
    """One thread per joint: semi-implicit Euler, qd' = qd + dt qdd_in, then q' from qd'
    (quaternions turned by the exponential map and renormalised). Flags the world's fault
    step when a new value is non-finite or beyond max_coordinate / max_speed."""
    integrate_joint(wp.tid(), joint_type, joint_child, joint_q_start, joint_qd_start, body_world, joint_q_in,
        joint_qd_in, qdd_in, dt, step, max_coordinate, max_speed, joint_q_out, joint_qd_out, world_fault_step_out)
