"""Forward kinematics of articulated bodies and the per-step articulation scratch arrays."""

from __future__ import annotations

from types import SimpleNamespace

import warp as wp

from wpsim.core.model import State
from wpsim.kernels import articulation
from wpsim.kernels.generic import for_precision
from wpsim.solvers.base import KernelLaunch


class ArticulationScratch:
    """Per-step intermediate arrays of the joint-space dynamics (see kernels.articulation).

    body_twist (B,) spatial, rad/s and m/s -- twist at the articulation origin
    body_bias_acc (B,) spatial, rad/s^2 and m/s^2 -- velocity-product acceleration (base at -g)
    dof_motion (D,) spatial -- world motion column of each dof
    body_h (B,) kg m, body_J (B,) kg m^2 -- each body's first moment and rotational inertia
        about its articulation origin; body_inertial_bias (B,) spatial, N m and N -- I a + v x* I v
    subtree_mass (B,) kg, subtree_h (B,) kg m, subtree_J (B,) kg m^2 -- composite inertia
    subtree_bias (B,) spatial, N m and N -- subtree bias wrench
    dof_subtree_force (D,) spatial, kg m^2 and kg m (per unit of the dof's rate) -- (I_c + dt D_c) S
        of each dof: its subtree's composite inertia and damping applied to its motion column
    body_damping, subtree_damping (B, 3) mat33 -- contact damping blocks (ww N m s, wv N s,
        vv N s/m) of each body and summed over its subtree
    mass_matrix, factor (M,) -- dense joint-space mass matrix per articulation, its Cholesky factor
    rhs (D,) N or N m -- generalized forces minus bias; qdd (D,) -- joint accelerations
    dof_inertia (D,) kg m^2 or kg -- the mass matrix diagonal before joint couplings
    connection_jacobian (X, max dofs) spatial, rad and m -- d(turn, gap)/dq of each body
        connection; connection_rate (X,) spatial, rad/s and m/s; connection_inverse_mass (X, 2)
        mat33, 1/(kg m^2) and 1/kg; connection_force (X,) spatial, N m and N; connection_slope
        (X, 2) mat33, N m s/rad and N s/m -- its implicit spring-dampers (see kernels.couplings)
    tendon_length (O,) m, tendon_rate (O,) m/s, tendon_jacobian (O, max dofs) m -- each spatial
        tendon's length, its rate and dL/dq (see kernels.tendons)
    adjoint (D,) -- scratch of the solve's backward
    with ``implicit_after_solve`` (MuJoCo's order of the implicit terms, ``kernels.implicit_terms``):
    damped_matrix, damped_factor (M,) -- the joint-space matrix with its implicit terms, its
    Cholesky factor; implicit (D,) kg m^2 or kg -- those terms; implicit_force (D,) N m or N,
    correction (D,) and implicit_accel (D,) -- the final solve's right-hand side, its
    solution and the step's accelerations; coupling_implicit (L,) kg or kg m^2 -- each joint
    coupling's implicit drive term dt kd (empty without)

    ``zero_damping``: another scratch whose (always zero) damping blocks this one shares,
    for steps without penalty contact against static shapes: a recorded step then keeps
    no damping blocks of its own (about half of an arm's per-step scratch).
    """

    def __init__(self, model, requires_grad: bool, zero_damping: ArticulationScratch | None = None,
                 implicit_after_solve: bool = False):
        def zeros(n, dtype, grad=requires_grad):
            return wp.zeros(n, dtype=dtype, device=model.device, requires_grad=grad)

        real = model.dtype
        spatial = wp.types.vector(6, real)
        nb, nd = model.body_count, model.joint_dof_count
        entries = model.articulation_H_size
        self.body_twist = zeros(nb, spatial)
        self.body_bias_acc = zeros(nb, spatial)
        self.dof_motion = zeros(nd, spatial)
        self.subtree_mass = zeros(nb, real)
        self.subtree_h = zeros(nb, wp.types.vector(3, real))
        self.subtree_J = zeros(nb, wp.types.matrix((3, 3), real))
        self.subtree_bias = zeros(nb, spatial)
        self.body_h = zeros(nb, wp.types.vector(3, real))
        self.body_J = zeros(nb, wp.types.matrix((3, 3), real))
        self.body_inertial_bias = zeros(nb, spatial)
        self.dof_subtree_force = zeros(nd, spatial)
        mat33 = wp.types.matrix((3, 3), real)
        if zero_damping is None:
            self.body_damping = zeros((nb, 3), mat33)
            self.subtree_damping = zeros((nb, 3), mat33)
        else:
            self.body_damping, self.subtree_damping = zero_damping.body_damping, zero_damping.subtree_damping
        self.mass_matrix = zeros(entries, real)
        self.rhs = zeros(nd, real)
        self.dof_inertia = zeros(nd, real)
        nx, slots = model.connection_count, max(model.max_articulation_dofs, 1)
        self.connection_jacobian = zeros((nx, slots), spatial)
        self.connection_rate = zeros(nx, spatial)
        self.connection_inverse_mass = zeros((nx, 2), mat33)
        self.connection_force = zeros(nx, spatial)
        self.connection_slope = zeros((nx, 2), mat33)
        self.tendon_length = zeros(model.tendon_count, real)
        self.tendon_rate = zeros(model.tendon_count, real)
        self.tendon_jacobian = zeros((model.tendon_count, slots), real)
        self.qdd = zeros(nd, real)
        self.factor = zeros(entries, real, False)
        self.adjoint = zeros(nd, real, False)
        after_entries, after_dofs = (entries, nd) if implicit_after_solve else (0, 0)
        self.damped_matrix = zeros(after_entries, real)
        self.damped_factor = zeros(after_entries, real, False)
        self.implicit = zeros(after_dofs, real)
        self.implicit_force = zeros(after_dofs, real)
        self.correction = zeros(after_dofs, real)
        self.implicit_accel = zeros(after_dofs, real)
        self.coupling_implicit = zeros(model.coupling_count if implicit_after_solve else 0, real)


def kinematics_launch(model, state, scratch: ArticulationScratch) -> KernelLaunch:
    """The launch filling ``state.body_q``/``body_qd`` and the scratch twists, bias
    accelerations and motion columns from ``state.joint_q``/``joint_qd``."""
    return KernelLaunch(
        for_precision(articulation.articulation_kinematics, model.dtype),
        model.articulation_count,
        [
            model.articulation_start, model.dfs_joint, model.joint_type, model.joint_parent, model.joint_child,
            model.joint_X_p, model.joint_X_c, model.joint_axis, model.joint_q_start, model.joint_qd_start,
            model.body_origin, model.gravity, state.joint_q, state.joint_qd,
        ],
        [state.body_q, state.body_qd, scratch.body_twist, scratch.body_bias_acc, scratch.dof_motion],
    )


def launch_kinematics(model, state, scratch: ArticulationScratch):
    """Run ``kinematics_launch`` (recorded on an active tape)."""
    kinematics_launch(model, state, scratch).run(model.device)


def eval_fk(model, state):
    """Fill the body poses and velocities of ``state`` from its joint coordinates and
    velocities; returns ``state``.

    A step fills these for the state it starts from; call this for a state no step starts
    from (a new ``model.state()``, the last state of a rollout) before reading
    ``body_q``/``body_qd``. Recorded on an active ``wp.Tape``, so losses on body poses are
    differentiable; call it at most once per state while recording. A ``PosedState`` (what a
    ``Rollout`` hands its loss and controller) computes its own: this only makes sure it has.
    """
    if isinstance(state, PosedState):
        state.body_q  # noqa: B018 -- computed once, when first read
    elif model.body_count:  # the motion scratch only: no dense joint-space matrices
        launch_kinematics(model, state, motion_scratch(model, state.joint_q.requires_grad))
    return state


def motion_scratch(model, requires_grad: bool) -> SimpleNamespace:
    """The scratch arrays forward kinematics writes besides the poses: body twists, bias
    accelerations and dof motion columns."""
    spatial = wp.types.vector(6, model.dtype)

    def zeros(n):
        return wp.zeros(n, dtype=spatial, device=model.device, requires_grad=requires_grad)

    return SimpleNamespace(body_twist=zeros(model.body_count), body_bias_acc=zeros(model.body_count),
                           dof_motion=zeros(model.joint_dof_count))


def body_poses(model, state) -> tuple:
    """(body_q, body_qd) of ``state`` from its joint coordinates and velocities, by forward
    kinematics into fresh arrays (the state's own are untouched); recorded on an active tape,
    so gradients reach ``joint_q`` and ``joint_qd``."""
    poses, _ = posed(model, state, state.joint_q.requires_grad)
    return poses.body_q, poses.body_qd


def posed(model, state, requires_grad: bool) -> tuple:
    """(poses, motion scratch) of ``state`` by forward kinematics into fresh arrays (recorded on
    an active tape): poses holds its joint_q and joint_qd and the new body_q and body_qd, the
    scratch its dof motion columns (``motion_scratch``)."""
    spatial = wp.types.vector(6, model.dtype)

    def zeros(n, dtype):
        return wp.zeros(n, dtype=dtype, device=model.device, requires_grad=requires_grad)

    nb = model.body_count
    poses = SimpleNamespace(joint_q=state.joint_q, joint_qd=state.joint_qd,
                            body_q=zeros(nb, wp.types.transformation(model.dtype)), body_qd=zeros(nb, spatial))
    scratch = motion_scratch(model, requires_grad)
    if nb:
        kinematics_launch(model, poses, scratch).run(model.device)
    return poses, scratch


_POSE_FIELDS = ("body_q", "body_qd")


class PosedState(State):
    """``state`` with body poses and velocities that are those of its joint coordinates and
    velocities: ``body_q``/``body_qd`` are computed by ``body_poses`` when first read
    (recorded on the tape active then); every other field is the state's own array.

    A state's own body poses are filled by the step that starts from it, so a loss or a
    controller that reads them before that step (as in a ``Rollout``) would see stale ones.
    """

    def __init__(self, model, state: State):
        super().__init__(model, state.requires_grad, {name: array for name, array in vars(state).items()
                                                      if name in State.field_names and name not in _POSE_FIELDS})
        self.model = model

    def __getattr__(self, name):
        if name not in _POSE_FIELDS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.__dict__.update(zip(_POSE_FIELDS, body_poses(self.model, self)))
        return self.__dict__[name]
