"""Rigid bodies and joints for ``ModelBuilder``: tables, validation and the articulation
layout (depth-first order, coordinate and mass-matrix offsets) computed at finalize."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core import geometry
from wpsim.core import mass as mass_props
from wpsim.core.limits import require_memory
from wpsim.core.mass import principal_frames
from wpsim.core.tables import Table
from wpsim.core.validation import as_array, checked_solimp, checked_solref, require_finite, require_pose
from wpsim.kernels.enums import (
    JOINT_BALL,
    JOINT_COORD_COUNT,
    JOINT_DOF_COUNT,
    JOINT_FIXED,
    JOINT_FREE,
    JOINT_NAMES,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    MAX_COUPLING_POWER,
    MAX_COUPLING_TERMS,
    SHAPE_BOX,
    SHAPE_CAPSULE,
    SHAPE_MESH,
    SHAPE_PLANE,
    SHAPE_SPHERE,
)

_IDENTITY = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
NO_LIMIT = 1.0e30
NO_DRIVE = (0.0, 0.0, NO_LIMIT, 1.0)
"""(ke, kd, force limit, implicit) of a joint coupling without a drive (``set_coupling_drive``)."""
"""Limit value meaning "unlimited" (rad or m)."""


def _check_inertia(kind: str, index: int, mass: float, inertia: np.ndarray, strict: bool):
    """Symmetric inertia, positive semidefinite (``strict``: positive definite with mass > 0),
    and principal moments that a mass distribution can have: each at most the sum of the
    other two (I_x + I_y = 2 sum m z^2 + sum m (x^2 + y^2) >= I_z)."""
    if not np.allclose(inertia, inertia.T, atol=1e-12 + 1e-9 * np.abs(inertia).max()):
        raise ValueError(f"{kind} {index}: inertia tensor is not symmetric")
    eig = np.linalg.eigvalsh(inertia)
    if strict and (mass <= 0.0 or eig.min() <= 0.0):
        raise ValueError(
            f"{kind} {index}: mass {mass:g} kg and inertia eigenvalues {np.round(eig, 12).tolist()} kg m^2 must be "
            "positive (give mass/inertia or attach shapes with density)"
        )
    if eig.min() < -1e-12 * max(1.0, eig.max()):
        raise ValueError(f"{kind} {index}: inertia tensor is not positive definite (eigenvalues {eig.tolist()})")
    if eig[2] > (eig[0] + eig[1]) * (1.0 + 1e-9) + 1e-15:
        raise ValueError(f"{kind} {index}: principal moments {np.round(eig, 12).tolist()} kg m^2 break the triangle "
                         f"inequality (the largest, {eig[2]:.6g}, exceeds the sum of the other two, "
                         f"{eig[0] + eig[1]:.6g}): no rigid body has this inertia")


PAIR_LISTING_BYTES = 64
"""Bytes per candidate shape pair that finalize holds at its peak while listing the pairs
(``world_pairs`` and the rule that filters them; measured: about 56)."""
MAX_CANDIDATE_PAIRS = 2**31 - 1
"""The most candidate shape pairs (``world_pairs`` rows) a model may have: the pair rule runs
one kernel thread per pair, and thread indices are 32-bit."""


def check_candidate_pairs(shape_world: np.ndarray, shape_body: np.ndarray):
    """Refuse (``ValueError``) shapes whose candidate pairs (``world_pairs``, counted without
    listing them; two static shapes are never one) exceed ``MAX_CANDIDATE_PAIRS`` or the memory
    budget (``wpsim.core.limits``), naming the shape counts, the pairs and the bytes needed."""
    world, on_body = np.asarray(shape_world, dtype=np.int64), np.asarray(shape_body) >= 0
    shared = world < 0
    worlds = int(world.max(initial=-1)) + 1
    sizes = np.bincount(world[~shared], minlength=max(worlds, 1)).astype(object)
    body_sizes = np.bincount(world[~shared & on_body], minlength=max(worlds, 1)).astype(object)
    shared_count, shared_on_body = int(shared.sum()), int((shared & on_body).sum())
    count = int((sizes * body_sizes).sum()) + int(body_sizes.sum()) * shared_count + shared_on_body * len(world)
    largest = int(np.argmax(sizes))
    what = (f"{len(world):,} collision shapes ({int(sizes[largest]):,} in world {largest}, {shared_count:,} shared by "
            f"every world; {int(on_body.sum()):,} on bodies) make {count:,} candidate contact pairs")
    remedy = ("spread the shapes over more worlds (shapes of two worlds are never paired), merge a body's shapes "
              "into fewer, or leave out shapes that never touch (MJCF contype=\"0\" conaffinity=\"0\" keeps their mass "
              "without a shape)")
    if count > MAX_CANDIDATE_PAIRS:
        raise ValueError(f"{what}; at most {MAX_CANDIDATE_PAIRS:,} (MAX_CANDIDATE_PAIRS) are listed: {remedy}")
    require_memory(f"{what}; listing them", count * PAIR_LISTING_BYTES, remedy)


def world_pairs(shape_world: np.ndarray, shape_body: np.ndarray) -> np.ndarray:
    """(M, 2) ordered shape pairs (a, b), sorted, a on a body (two static shapes never touch),
    whose worlds may meet: both in one world, or either in world -1 (shared by all). Their count
    grows with the worlds, not their square, and static shapes add pairs with body shapes only."""
    world, on_body = np.asarray(shape_world, dtype=np.int64), np.asarray(shape_body) >= 0
    shared = np.flatnonzero(world < 0)
    own = np.flatnonzero(world >= 0)
    own = own[np.argsort(world[own], kind="stable")]
    own_on_body = own[on_body[own]]
    first = np.searchsorted(world[own], world[own_on_body], side="left")
    sizes = np.searchsorted(world[own], world[own_on_body], side="right") - first
    a = np.repeat(own_on_body, sizes)
    b = own[np.repeat(first, sizes) + np.arange(len(a)) - np.repeat(np.cumsum(sizes) - sizes, sizes)]
    shared_on_body = shared[on_body[shared]]
    a = np.concatenate([a, np.repeat(own_on_body, len(shared)), np.repeat(shared_on_body, len(own) + len(shared))])
    b = np.concatenate([b, np.tile(shared, len(own_on_body)),
                        np.tile(np.concatenate([own, shared]), len(shared_on_body))])
    order = np.lexsort((b, a))
    return np.stack([a[order], b[order]], axis=1).astype(np.int64).reshape(-1, 2)


class RigidBodyBuilder:
    """Bodies, joints and their coordinates; mixed into ``ModelBuilder``."""

    def _init_rigid(self):
        self.articulation_self_contact = False
        """Whether shapes of bodies in the same articulation collide (parent and child never do)."""
        self.excluded_body_pairs = set()
        """Pairs (a, b), a > b, of bodies whose shapes never collide (b = -1 is static geometry); see
        ``exclude_contact``."""
        self.joint_couplings: list[tuple] = []
        """(joints, coefficients, rest, time constant, damping ratio, ke, kd, impedance) of each
        joint coupling; see ``add_joint_coupling``."""
        self.body_connections: list[tuple] = []
        """(body a, point a, body b, point b, time constant, damping ratio, impedance) of each
        body connection; see ``add_body_connection``."""
        self.spatial_tendons: list[dict] = []
        """Segments, spring, damper and drive of each spatial tendon; see ``add_spatial_tendon``."""
        self.bodies = Table("body")
        self.joints = Table("joint")
        self.joint_coords = Table("joint coordinate")
        self.joint_dofs = Table("joint dof")

    @property
    def body_count(self) -> int:
        return self.bodies.count

    # ------------------------------------------------------------------ bodies
    def add_body(self, mass: float = 0.0, com=(0.0, 0.0, 0.0), inertia=None) -> int:
        """Add a rigid body (world 0) and return its index.

        mass (kg), com: centre of mass in the body frame (m), inertia: 3x3 tensor about the
        centre of mass in body axes (kg m^2), or 3 principal moments. Shapes added with a
        density add their mass properties. Its pose comes from its joint (``add_joint_*``).
        """
        index = self.bodies.count
        inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=np.float64)
        if inertia.shape == (3,):
            inertia = np.diag(inertia)
        if inertia.shape != (3, 3) or not np.isfinite(inertia).all():
            raise ValueError(f"body {index}: inertia must be a finite 3x3 tensor or 3 principal moments")
        _check_inertia("body", index, float(mass), inertia, strict=False)
        return self.bodies.append(1, body_mass=[mass], body_com=[com], body_inertia=[inertia], body_world=[0])

    def add_body_mass(self, body: int, mass: float, com=(0.0, 0.0, 0.0), inertia=None, pos=(0.0, 0.0, 0.0),
                      rot=_IDENTITY[3:]):
        """Add a part without a collision shape to ``body``: mass (kg), centre of mass (m,
        part frame), inertia about it (kg m^2, 3x3 or 3 principal moments, part axes);
        pos/rot place the part in the body frame (e.g. an MJCF geom that does not collide)."""
        if not (isinstance(body, (int, np.integer)) and 0 <= body < self.bodies.count):
            raise ValueError(f"body mass: body {body} does not exist ({self.bodies.count} bodies)")
        inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=np.float64)
        inertia = np.diag(inertia) if inertia.shape == (3,) else inertia
        if not (np.isfinite(mass) and mass >= 0.0) or inertia.shape != (3, 3) or not np.isfinite(inertia).all():
            raise ValueError(f"body {body}: added mass {mass} kg must be finite and >= 0 with a finite 3x3 inertia")
        _check_inertia("body", body, float(mass), inertia, strict=False)
        self._add_shape_mass(body, float(mass), com, inertia, require_pose("body", body, pos, rot))

    def _add_shape_mass(self, body: int, mass: float, com, inertia: np.ndarray, pose: np.ndarray):
        """Add a shape's mass properties (centre of mass ``com`` and central inertia in shape
        axes) to its body; ``pose`` places the shape in the body frame."""
        masses, coms, inertias = (self.bodies.array(n) for n in ("body_mass", "body_com", "body_inertia"))
        rotated = mass_props.shifted_inertia(mass, inertia, pose[3:], (0.0, 0.0, 0.0))
        centre = pose[:3] + geometry.quat_to_matrix(pose[3:]) @ np.asarray(com, dtype=np.float64)
        masses[body], coms[body], inertias[body] = mass_props.combine(
            masses[body], coms[body], inertias[body], mass, centre, rotated
        )

    # ------------------------------------------------------------------ joints
    def _add_joint(self, jtype, parent, child, parent_pos, parent_rot, child_pos, child_rot, axis, q, qd,
                   armature=0.0, damping=0.0, friction=0.0, stiffness=0.0, spring_ref=0.0, target_ke=0.0,
                   target_kd=0.0,
                   limit_lower=-NO_LIMIT,
                   limit_upper=NO_LIMIT, limit_ke=1.0e4, limit_kd=10.0) -> int:
        index = self.joints.count
        kind = f"{JOINT_NAMES[jtype]} joint"
        if not (isinstance(child, (int, np.integer)) and 0 <= child < self.bodies.count):
            raise ValueError(f"{kind} {index}: child body {child} does not exist ({self.bodies.count} bodies)")
        if not (isinstance(parent, (int, np.integer)) and -1 <= parent < self.bodies.count):
            raise ValueError(f"{kind} {index}: unknown parent body {parent} (-1 = world, {self.bodies.count} bodies)")
        children = self.joints.array("joint_child")
        if child in children:
            raise ValueError(f"{kind} {index}: body {child} already has a joint ({int(np.flatnonzero(children == child)[0])})")
        joint_parents = self.joints.array("joint_parent")
        # only a child that already carries bodies can have the parent below it (a cycle); the
        # walk up from the parent is skipped otherwise, so a long chain is added in linear time
        ancestor = parent if parent == child or child in joint_parents else -1
        parents = dict(zip(children.tolist(), joint_parents.tolist())) if ancestor >= 0 else {}
        while ancestor >= 0:
            if ancestor == child:
                raise ValueError(f"{kind} {index}: parent body {parent} is a descendant of child body {child} (cycle)")
            ancestor = parents.get(ancestor, -1)
        worlds = self.bodies.array("body_world")
        if parent >= 0 and worlds[parent] != worlds[child]:
            raise ValueError(f"{kind} {index}: parent and child bodies are in different worlds")
        axis = np.asarray(axis, dtype=np.float64)
        if axis.shape != (3,) or not np.isfinite(axis).all() or np.linalg.norm(axis) < 1e-9:
            raise ValueError(f"{kind} {index}: joint axis must be a non-zero 3-vector, got {axis.tolist()}")
        dofs = JOINT_DOF_COUNT[jtype]
        lower = np.broadcast_to(np.asarray(limit_lower, dtype=np.float64), (dofs,))
        upper = np.broadcast_to(np.asarray(limit_upper, dtype=np.float64), (dofs,))
        if np.isnan(lower).any() or np.isnan(upper).any() or (lower > upper).any():
            raise ValueError(f"{kind} {index}: joint limits lower {lower.tolist()} > upper {upper.tolist()}")
        q = as_array(f"{kind} {index} coordinates", np.atleast_1d(np.asarray(q, dtype=np.float64)).reshape(-1, 1)[:, 0],
                     (), JOINT_COORD_COUNT[jtype])
        require_finite(kind, "coordinates", q.reshape(1, -1), index)
        X_p = require_pose(kind, index, parent_pos, parent_rot)
        X_c = require_pose(kind, index, child_pos, child_rot)
        with self._all_or_nothing():
            if dofs:
                self.joint_dofs.append(
                    dofs, joint_qd=qd, joint_armature=armature, joint_damping=damping, joint_friction=friction,
                    joint_stiffness=stiffness,
                    joint_spring_ref=spring_ref, joint_target_ke=target_ke,
                    joint_target_kd=target_kd, joint_limit_lower=np.clip(lower, -NO_LIMIT, NO_LIMIT),
                    joint_limit_upper=np.clip(upper, -NO_LIMIT, NO_LIMIT), joint_limit_ke=limit_ke,
                    joint_limit_kd=limit_kd, joint_f_lower=-NO_LIMIT, joint_f_upper=NO_LIMIT,
                    joint_target_lower=-NO_LIMIT, joint_target_upper=NO_LIMIT, joint_drive_force_limit=NO_LIMIT,
                    joint_drive_implicit=1.0, joint_damping_implicit=1.0, joint_limit_solref=[(0.0, 0.0)], joint_limit_solimp=[(0.0,) * 5],
                    joint_friction_solref=[(0.0, 0.0)], joint_friction_solimp=[(0.0,) * 5],
                )
            if len(q):
                self.joint_coords.append(len(q), joint_q=q)
            self.joints.append(1, joint_type=[jtype], joint_parent=[parent], joint_child=[child], joint_X_p=[X_p],
                               joint_X_c=[X_c], joint_axis=[axis / np.linalg.norm(axis)])
        return index

    def add_joint_revolute(self, parent: int, child: int, axis=(0.0, 0.0, 1.0), parent_pos=(0.0, 0.0, 0.0),
                           parent_rot=_IDENTITY[3:], child_pos=(0.0, 0.0, 0.0), child_rot=_IDENTITY[3:],
                           q: float = 0.0, qd: float = 0.0, **dof) -> int:
        """Hinge of ``child`` on ``parent`` (-1 = world) about ``axis`` (joint frame).

        The joint frame sits at parent_pos/parent_rot in the parent body frame and at
        child_pos/child_rot in the child body frame. q (rad), qd (rad/s): initial angle and
        rate. Per-dof options: armature (kg m^2), damping (N m s/rad), friction (N m, dry joint
        friction -friction qd / sqrt(qd^2 + s^2), s the model's friction_smoothing), stiffness (N m/rad) and
        spring_ref (rad) of a joint spring -stiffness (q - spring_ref), target_ke/target_kd (PD
        drive gains), limit_lower/limit_upper (rad), limit_ke/limit_kd.
        """
        return self._add_joint(JOINT_REVOLUTE, parent, child, parent_pos, parent_rot, child_pos, child_rot, axis,
                               [q], qd, **dof)

    def add_joint_prismatic(self, parent: int, child: int, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 0.0),
                            parent_rot=_IDENTITY[3:], child_pos=(0.0, 0.0, 0.0), child_rot=_IDENTITY[3:],
                            q: float = 0.0, qd: float = 0.0, **dof) -> int:
        """Slider of ``child`` along ``axis`` (joint frame); q (m), qd (m/s); options as revolute
        (units N, N/m, N s/m, m)."""
        return self._add_joint(JOINT_PRISMATIC, parent, child, parent_pos, parent_rot, child_pos, child_rot, axis,
                               [q], qd, **dof)

    def add_joint_ball(self, parent: int, child: int, parent_pos=(0.0, 0.0, 0.0), parent_rot=_IDENTITY[3:],
                       child_pos=(0.0, 0.0, 0.0), child_rot=_IDENTITY[3:], q=_IDENTITY[3:],
                       qd=(0.0, 0.0, 0.0), armature=0.0, damping=0.0, friction=0.0) -> int:
        """Spherical joint; q: relative rotation quaternion (x, y, z, w), qd: angular
        velocity in child axes (rad/s); armature, damping and dry friction per dof. No drive or limits."""
        q = require_pose("ball joint", self.joints.count, (0, 0, 0), q)[3:]
        return self._add_joint(JOINT_BALL, parent, child, parent_pos, parent_rot, child_pos, child_rot,
                               (1.0, 0.0, 0.0), q, qd, armature=armature, damping=damping, friction=friction)

    def add_joint_free(self, child: int, parent: int = -1, pos=(0.0, 0.0, 0.0), rot=_IDENTITY[3:],
                       lin_vel=(0.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 0.0), damping=0.0) -> int:
        """Six-dof joint placing ``child`` at pos/rot (m, quaternion xyzw) in the parent
        frame (world by default); initial velocity of the body origin (m/s, parent axes) and
        angular velocity (rad/s, body axes)."""
        pose = require_pose("free joint", self.joints.count, pos, rot)
        return self._add_joint(JOINT_FREE, parent, child, (0, 0, 0), _IDENTITY[3:], (0, 0, 0), _IDENTITY[3:],
                               (1.0, 0.0, 0.0), pose, np.concatenate([lin_vel, ang_vel]), damping=damping)

    def add_joint_fixed(self, parent: int, child: int, parent_pos=(0.0, 0.0, 0.0), parent_rot=_IDENTITY[3:],
                        child_pos=(0.0, 0.0, 0.0), child_rot=_IDENTITY[3:]) -> int:
        """Weld ``child`` to ``parent`` (-1 = world) with the given joint frames."""
        return self._add_joint(JOINT_FIXED, parent, child, parent_pos, parent_rot, child_pos, child_rot,
                               (1.0, 0.0, 0.0), [], [])

    # ------------------------------------------------------------------ finalize
    def _rigid_layout(self) -> dict:
        """Articulation layout and body/joint/dof arrays for ``Model`` (see kernels.articulation)."""
        bodies, joints = self.bodies, self.joints
        nb, nj = bodies.count, joints.count
        child = joints.array("joint_child")
        parent = joints.array("joint_parent")
        jtype = joints.array("joint_type")
        body_joint = np.full(nb, -1, dtype=np.int64)
        body_joint[child] = np.arange(nj)
        has_children = np.zeros(nb, dtype=bool)
        has_children[parent[parent >= 0]] = True
        for b in range(nb):
            if body_joint[b] < 0:
                raise ValueError(f"body {b} has no joint: attach it with add_joint_free (floating) or another joint")
            # a massless body may be welded to its parent or carry other bodies (an
            # intermediate link of a universal joint): only a moving leaf must have mass
            leaf_moving = jtype[body_joint[b]] != JOINT_FIXED and not has_children[b]
            _check_inertia("body", b, float(bodies.array("body_mass")[b]), bodies.array("body_inertia")[b],
                           strict=leaf_moving)
        # depth-first order, articulation by articulation (roots in joint order)
        kids = {b: [] for b in range(-1, nb)}
        for j in range(nj):
            kids[int(parent[j])].append(j)
        dfs, dfs_end, art_start, art_of = [], np.zeros(nj, np.int64), [0], np.zeros(nj, np.int64)
        for a, root in enumerate(kids[-1]):  # iterative depth-first walk (chains may be long)
            stack = [(root, False)]
            while stack:
                j, done = stack.pop()
                if done:
                    dfs_end[j] = len(dfs)
                    continue
                art_of[j] = a
                dfs.append(j)
                stack.append((j, True))
                stack.extend((k, False) for k in reversed(kids[int(child[j])]))
            art_start.append(len(dfs))
        dfs = np.asarray(dfs, dtype=np.int64)
        dfs_pos = np.empty(nj, np.int64)
        dfs_pos[dfs] = np.arange(nj)
        q_count = np.array(JOINT_COORD_COUNT, dtype=np.int64)[jtype]
        d_count = np.array(JOINT_DOF_COUNT, dtype=np.int64)[jtype]
        added_q = np.concatenate([[0], np.cumsum(q_count)])
        added_d = np.concatenate([[0], np.cumsum(d_count)])
        q_order = np.concatenate([np.arange(added_q[j], added_q[j + 1]) for j in dfs]) if nj else np.zeros(0, np.int64)
        d_order = np.concatenate([np.arange(added_d[j], added_d[j + 1]) for j in dfs]) if nj else np.zeros(0, np.int64)
        q_start = np.empty(nj, np.int64)
        d_start = np.empty(nj, np.int64)
        q_start[dfs] = np.concatenate([[0], np.cumsum(q_count[dfs])])[:-1] if nj else []
        d_start[dfs] = np.concatenate([[0], np.cumsum(d_count[dfs])])[:-1] if nj else []
        dof_joint = np.repeat(dfs, d_count[dfs])
        art_dofs = [int(d_count[dfs[s:e]].sum()) for s, e in zip(art_start[:-1], art_start[1:])]
        art_dof_start = np.concatenate([[0], np.cumsum(art_dofs)]).astype(np.int64)
        art_H_start = np.concatenate([[0], np.cumsum(np.square(art_dofs))]).astype(np.int64)
        arrays = {
            **bodies.arrays(),
            **joints.arrays(),
            # coordinates and dofs were appended in joint order; the model lays them out depth first
            **{name: column[q_order] for name, column in self.joint_coords.arrays().items()},
            **{name: column[d_order] for name, column in self.joint_dofs.arrays().items()},
            "body_joint": body_joint,
            "body_origin": joints.array("joint_X_p")[body_joint[self._body_roots()], :3],
            "body_fluid_frame": principal_frames(bodies.array("body_inertia")),
            "joint_q_start": q_start,
            "joint_qd_start": d_start,
            "joint_articulation": art_of,
            "joint_dfs_pos": dfs_pos,
            "joint_dfs_end": dfs_end,
            "dfs_joint": dfs,
            "articulation_start": np.asarray(art_start, dtype=np.int64),
            "articulation_dof_start": art_dof_start,
            "articulation_H_start": art_H_start,
            "dof_joint": dof_joint,
            **self._coupling_arrays(d_start, art_of),
            **self._connection_arrays(art_of),
            **self._tendon_arrays(art_of, body_joint),
        }
        scalars = {
            "body_count": nb,
            "joint_count": nj,
            "joint_coord_count": int(q_count.sum()),
            "joint_dof_count": int(d_count.sum()),
            "articulation_count": len(art_start) - 1,
            "max_articulation_dofs": max(art_dofs, default=0),
            "articulation_H_size": int(art_H_start[-1]),
            "coupling_count": len(self.joint_couplings),
            "connection_count": len(self.body_connections),
            "tendon_count": len(self.spatial_tendons),
        }
        return arrays, scalars

    def _body_roots(self) -> np.ndarray:
        """Root body of each body's articulation (a body without a joint is its own root)."""
        up = np.arange(self.bodies.count)  # each body's parent body, a root itself
        child, parent = self.joints.array("joint_child"), self.joints.array("joint_parent")
        up[child[parent >= 0]] = parent[parent >= 0]
        for _ in range(max(self.bodies.count, 1).bit_length()):  # pointer doubling: log2(depth) passes
            higher = up[up]
            if np.array_equal(higher, up):
                break
            up = higher
        return up

    def exclude_contact(self, body_a: int, body_b: int):
        """Never let the shapes of two bodies collide (-1: the static shapes)."""
        for body in (body_a, body_b):
            if not (isinstance(body, (int, np.integer)) and -1 <= body < self.bodies.count):
                raise ValueError(f"exclude_contact: body {body} does not exist (-1 = static, {self.bodies.count} bodies)")
        if body_a == body_b:
            raise ValueError(f"exclude_contact: body {body_a} with itself (its shapes never collide with each other)")
        self.excluded_body_pairs.add((int(max(body_a, body_b)), int(min(body_a, body_b))))

    def add_joint_coupling(self, joints, coefs, rest: float = 0.0, time_constant: float = 0.0,
                           damping_ratio: float = 1.0, ke: float = 0.0, kd: float = 0.0,
                           impedance: float = 0.5, powers=None) -> int:
        """Hold a polynomial of hinge and slide coordinates, the coupling's length
        L = sum(coefs[k] q[joints[k]] ** powers[k]) (m or rad; powers 1 to 4, all 1 by default;
        a joint may appear once per power), near ``rest``: a spring-damper on L whose
        generalized force (dL/dq_j) f acts on each joint, f = K (rest - L) - D dL/dt, taken
        implicitly by the joint-space solve (stable for any stiffness). K and D are ``ke`` and
        ``kd`` plus, with ``time_constant`` T > 0 s, m / (T zeta)^2 and 2 m / T, where m is L's
        effective inertia at each step (from the mass-matrix diagonal) and zeta
        ``damping_ratio``: MuJoCo's solref, both scaled by d / (1 - d) with d ``impedance`` in
        (0, 1) (MuJoCo's solimp, which holds a constraint d / (1 - d) times tighter under a
        steady load than its solref alone; 0.5 scales by 1), or MuJoCo's whole solimp (dmin,
        dmax, width, midpoint, power; the spring takes dmin). Under the soft-constraint solve
        (``SoftContactOptions.equalities``) the time-constant part is instead a row of that solve
        with MuJoCo's equality law. Models a fixed tendon's spring (ke, kd) and a joint
        equality q1 = a0 + a1 q2 + a2 q2^2 (joints (1, 2, 2), coefs (1, -a1, -a2), powers
        (1, 1, 2), rest a0, a time constant). The joints must belong to one articulation
        (checked at finalize). Returns its index."""
        index = len(self.joint_couplings)
        joints = [int(j) for j in np.atleast_1d(joints)]
        coefs = [float(c) for c in np.atleast_1d(coefs)]
        powers = [1] * len(joints) if powers is None else [int(p) for p in np.atleast_1d(powers)]
        if len(joints) > MAX_COUPLING_TERMS:
            raise ValueError(f"joint coupling {index}: {len(joints)} terms; at most {MAX_COUPLING_TERMS}")
        terms = list(zip(joints, powers))
        if not joints or len(joints) != len(coefs) or len(powers) != len(joints) or len(set(terms)) != len(terms):
            raise ValueError(f"joint coupling {index}: give one coefficient and power per distinct (joint, power) "
                             f"term, got joints {joints}, coefficients {coefs} and powers {powers}")
        if not all(1 <= p <= MAX_COUPLING_POWER for p in powers):
            raise ValueError(f"joint coupling {index}: powers must be 1 to {MAX_COUPLING_POWER}, got {powers}")
        for j in joints:
            if not 0 <= j < self.joints.count or self.joints.array("joint_type")[j] not in (JOINT_REVOLUTE,
                                                                                             JOINT_PRISMATIC):
                raise ValueError(f"joint coupling {index}: joint {j} is not a hinge or slide joint of the builder")
        values = {"rest": rest, "time_constant": time_constant, "damping_ratio": damping_ratio, "ke": ke, "kd": kd}
        if not all(np.isfinite(v) for v in [*coefs, *values.values()]):
            raise ValueError(f"joint coupling {index}: coefficients and settings must be finite, got {coefs}, {values}")
        for name in ("time_constant", "ke", "kd"):
            if values[name] < 0.0:
                raise ValueError(f"joint coupling {index}: {name} must be >= 0, got {values[name]}")
        if not damping_ratio > 0.0:
            raise ValueError(f"joint coupling {index}: damping_ratio must be > 0, got {damping_ratio}")
        solimp = checked_solimp(f"joint coupling {index}", impedance)
        self.joint_couplings.append((tuple(joints), tuple(coefs), tuple(powers), float(rest), float(time_constant),
                                     float(damping_ratio), float(ke), float(kd), solimp, NO_DRIVE))
        return index

    def set_coupling_drive(self, coupling: int, ke: float, kd: float = 0.0, force_limit: float = np.inf,
                           implicit: bool = True):
        """A drive on joint coupling ``coupling``'s length L (an actuator on a fixed tendon): the
        force ke (target - L) - kd dL/dt (N or N m, clamped to +-``force_limit``) acts on each
        joint as dL/dq_j times it, with target the control's ``coupling_target``; explicit in
        position, in velocity implicit (``implicit``, MuJoCo's implicitfast) or explicit (its
        Euler). Gains in N/m and N s/m (N m/rad, N m s/rad for angles)."""
        if not (isinstance(coupling, (int, np.integer)) and 0 <= coupling < len(self.joint_couplings)):
            raise ValueError(f"set_coupling_drive: coupling {coupling} does not exist "
                             f"({len(self.joint_couplings)} couplings)")
        if not (np.isfinite(ke) and np.isfinite(kd) and ke >= 0.0 and kd >= 0.0 and force_limit > 0.0):
            raise ValueError(f"set_coupling_drive: coupling {coupling}: ke and kd must be finite and >= 0 and "
                             f"force_limit > 0, got {ke}, {kd}, {force_limit}")
        *settings, _ = self.joint_couplings[coupling]
        self.joint_couplings[coupling] = (*settings, (float(ke), float(kd), float(min(force_limit, NO_LIMIT)),
                                                      float(implicit)))

    def add_body_connection(self, body_a: int, point_a, body_b: int, point_b, time_constant: float = 0.02,
                            damping_ratio: float = 1.0, impedance: float = 0.5, rotation=None) -> int:
        """Hold ``point_a`` of ``body_a`` (body frame, m) at ``point_b`` of ``body_b`` (its frame;
        -1: a world point), a ball-joint loop closure (MJCF's connect equality): a spring-damper
        on the gap, stiffness m / (T zeta)^2 and damping 2 m / T with T ``time_constant`` (s),
        zeta ``damping_ratio`` and m the gap's effective mass at each step (from the mass-matrix
        diagonal), both scaled by d / (1 - d) with d ``impedance`` (a number or MuJoCo's solimp;
        see ``add_joint_coupling``), taken implicitly by the joint-space solve; under the
        soft-constraint solve (``SoftContactOptions.equalities``) a point connection is instead
        three rows of that solve with MuJoCo's equality law. With ``rotation`` (x, y, z, w), body_a's
        orientation in body_b's frame (the world's for -1), that orientation is held too, by
        the same law on the rotation away from it and its effective inertia: a weld (MJCF's
        weld equality). Both bodies must belong to one articulation (checked at finalize).
        Returns its index."""
        index = len(self.body_connections)
        for body in (body_a, body_b):
            if not (isinstance(body, (int, np.integer)) and -1 <= body < self.bodies.count):
                raise ValueError(f"body connection {index}: body {body} does not exist (-1 = world, "
                                 f"{self.bodies.count} bodies)")
        if body_a < 0 or body_a == body_b:
            raise ValueError(f"body connection {index}: connect a body ({body_a}) to another body or the world")
        points = [np.asarray(p, dtype=np.float64) for p in (point_a, point_b)]
        if any(p.shape != (3,) or not np.isfinite(p).all() for p in points):
            raise ValueError(f"body connection {index}: points must be 3 finite numbers (m), got {point_a}, {point_b}")
        if not (time_constant > 0.0 and damping_ratio > 0.0):
            raise ValueError(f"body connection {index}: time_constant and damping_ratio must be > 0, got "
                             f"{time_constant}, {damping_ratio}")
        solimp = checked_solimp(f"body connection {index}", impedance)
        held = np.array([0.0, 0.0, 0.0, 1.0]) if rotation is None else np.asarray(rotation, dtype=np.float64)
        if held.shape != (4,) or not np.isfinite(held).all() or not np.linalg.norm(held) > 0.0:
            raise ValueError(f"body connection {index}: rotation must be a quaternion (x, y, z, w), got {rotation}")
        self.body_connections.append((int(body_a), points[0], int(body_b), points[1], float(time_constant),
                                      float(damping_ratio), solimp, held / np.linalg.norm(held),
                                      int(rotation is not None)))
        return index

    def _connection_arrays(self, art_of: np.ndarray) -> dict:
        """The body connections as Model arrays (see ``wpsim.core.fields``)."""
        joint_of = {int(c): j for j, c in enumerate(self.joints.array("joint_child"))}
        for index, (a, _, b, *_) in enumerate(self.body_connections):
            arts = {int(art_of[joint_of[body]]) for body in (a, b) if body >= 0 and body in joint_of}
            if len(arts) != 1 or any(body >= 0 and body not in joint_of for body in (a, b)):
                raise ValueError(f"body connection {index}: bodies {a} and {b} do not belong to one articulation")
        rows = self.body_connections
        return {"connection_body": np.array([[r[0], r[2]] for r in rows], np.int64).reshape(-1, 2),
                "connection_point_a": np.array([r[1] for r in rows], np.float64).reshape(-1, 3),
                "connection_point_b": np.array([r[3] for r in rows], np.float64).reshape(-1, 3),
                "connection_time_constant": np.array([r[4] for r in rows], np.float64),
                "connection_damping_ratio": np.array([r[5] for r in rows], np.float64),
                "connection_solimp": np.array([r[6] for r in rows], np.float64).reshape(-1, 5),
                "connection_rotation": np.array([r[7] for r in rows], np.float64).reshape(-1, 4),
                "connection_holds_rotation": np.array([r[8] for r in rows], np.int64)}

    def _coupling_arrays(self, d_start: np.ndarray, art_of: np.ndarray) -> dict:
        """The couplings as Model arrays (see ``wpsim.core.fields``), their dofs in the
        model's depth-first layout."""
        starts, dofs, coefs, powers, settings, solimps, drives = [0], [], [], [], [], [], []
        for index, (joints, c, p, *rest, solimp, drive) in enumerate(self.joint_couplings):
            if len({int(art_of[j]) for j in joints}) != 1:
                raise ValueError(f"joint coupling {index}: joints {list(joints)} belong to different articulations")
            dofs += [int(d_start[j]) for j in joints]
            coefs += list(c)
            powers += list(p)
            starts.append(len(dofs))
            settings.append(rest)
            solimps.append(solimp)
            drives.append(drive)
        names = ("coupling_rest", "coupling_time_constant", "coupling_damping_ratio", "coupling_ke", "coupling_kd")
        settings = np.asarray(settings, dtype=np.float64).reshape(-1, len(names))
        drive_names = ("coupling_drive_ke", "coupling_drive_kd", "coupling_drive_force_limit", "coupling_drive_implicit")
        drives = np.asarray(drives, dtype=np.float64).reshape(-1, len(drive_names))
        return {"coupling_term_start": np.asarray(starts, np.int64), "coupling_term_dof": np.asarray(dofs, np.int64),
                "coupling_term_coef": np.asarray(coefs, np.float64), "coupling_term_power": np.asarray(powers, np.int64),
                "coupling_solimp": np.asarray(solimps, np.float64).reshape(-1, 5),
                **{name: settings[:, k].copy() for k, name in enumerate(names)},
                **{name: drives[:, k].copy() for k, name in enumerate(drive_names)}}

    def joint_offsets(self) -> tuple:
        """(joint types, first coordinate row, first dof row) of every joint in the builder's
        tables (``joint_coords``, ``joint_dofs``: in the order joints were added, not the
        model's depth-first layout)."""
        types = self.joints.array("joint_type").astype(np.int64)
        coords = np.concatenate([[0], np.cumsum(np.array(JOINT_COORD_COUNT)[types])])[:-1]
        dofs = np.concatenate([[0], np.cumsum(np.array(JOINT_DOF_COUNT)[types])])[:-1]
        return types, coords.astype(np.int64), dofs.astype(np.int64)

    def first_dof(self, joint: int) -> int:
        """The row of a joint's first dof in ``joint_dofs`` (see ``joint_offsets``)."""
        return int(self.joint_offsets()[2][joint])

    def first_coord(self, joint: int) -> int:
        """The row of a joint's first coordinate in ``joint_coords`` (see ``joint_offsets``)."""
        return int(self.joint_offsets()[1][joint])

    def set_control_range(self, joint: int, force=None, target=None, drive_force=None):
        """Clamp the controls of a hinge or slide joint (an actuator's range): ``force`` =
        (lower, upper) bounds its joint_f (N m or N), ``target`` = (lower, upper) its
        joint_target_q (rad or m), ``drive_force`` (N m or N, >= 0) the PD drive's force to
        +-drive_force; None leaves a range as it is (unbounded at first)."""
        dof = self._hinge_or_slide_dof("set_control_range", joint)
        for name, bounds in (("joint_f", force), ("joint_target", target)):
            if bounds is None:
                continue
            lower, upper = (float(v) for v in bounds)
            if not lower <= upper:
                raise ValueError(f"set_control_range: joint {joint}: {name} range [{lower:g}, {upper:g}] is empty")
            self.joint_dofs.array(f"{name}_lower")[dof] = max(lower, -NO_LIMIT)
            self.joint_dofs.array(f"{name}_upper")[dof] = min(upper, NO_LIMIT)
        if drive_force is not None:
            if not drive_force >= 0.0:
                raise ValueError(f"set_control_range: joint {joint}: drive_force must be >= 0, got {drive_force}")
            self.joint_dofs.array("joint_drive_force_limit")[dof] = min(float(drive_force), NO_LIMIT)

    def set_drive_damping_explicit(self, joint: int, explicit: bool = True):
        """Take the PD drive damping of hinge or slide ``joint`` explicitly in velocity (MuJoCo's
        Euler integrator: an actuator's kv acts on the step's starting velocity) or, with
        ``explicit=False``, implicitly (the default; MuJoCo's implicitfast)."""
        dof = self._hinge_or_slide_dof("set_drive_damping_explicit", joint)
        self.joint_dofs.array("joint_drive_implicit")[dof] = 0.0 if explicit else 1.0

    def set_joint_damping_explicit(self, joint: int, explicit: bool = True):
        """Take the damping of every dof of ``joint`` explicitly in velocity (MuJoCo's Euler with
        ``eulerdamp`` disabled: the damping force of the step's starting velocity) or, with
        ``explicit=False``, implicitly (the default)."""
        if not (isinstance(joint, (int, np.integer)) and 0 <= joint < self.joints.count):
            raise ValueError(f"set_joint_damping_explicit: joint {joint} does not exist ({self.joints.count} joints)")
        first = self.first_dof(joint)
        dofs = slice(first, first + JOINT_DOF_COUNT[self.joints.array("joint_type")[joint]])
        self.joint_dofs.array("joint_damping_implicit")[dofs] = 0.0 if explicit else 1.0

    def _hinge_or_slide_dof(self, caller: str, joint: int) -> int:
        """The dof of hinge or slide ``joint``; a ValueError naming ``caller`` otherwise."""
        if not 0 <= joint < self.joints.count:
            raise ValueError(f"{caller}: joint {joint} does not exist ({self.joints.count} joints)")
        if self.joints.array("joint_type")[joint] not in (JOINT_REVOLUTE, JOINT_PRISMATIC):
            raise ValueError(f"{caller}: joint {joint} is not a hinge or slide joint")
        return self.first_dof(joint)

    def set_collision_bits(self, shape: int, collision_type: int = 1, collision_mask: int = 1):
        """Collision filtering by bits (MJCF's contype / conaffinity): shapes a and b can touch
        only if ``type_a & mask_b`` or ``type_b & mask_a`` is non-zero. Every shape starts
        with type 1 and mask 1 (all collide)."""
        if not 0 <= shape < self.shapes.count:
            raise ValueError(f"set_collision_bits: shape {shape} does not exist ({self.shapes.count} shapes)")
        for name, bits in (("collision_type", collision_type), ("collision_mask", collision_mask)):
            if not (isinstance(bits, (int, np.integer)) and 0 <= bits < 2**31):
                raise ValueError(f"set_collision_bits: shape {shape}: {name} must be an integer in [0, 2^31), got {bits}")
        self.shapes.array("shape_collision_type")[shape] = collision_type
        self.shapes.array("shape_collision_mask")[shape] = collision_mask

    def set_shape_softness(self, shape: int, solref=(0.02, 1.0), solimp=(0.9, 0.95, 0.001, 0.5, 2.0),
                           solmix: float = 1.0, priority: int = 0):
        """The shape's own soft-constraint contact settings, as MuJoCo's geom solref, solimp,
        solmix and priority (defaults MuJoCo's): ``solref`` (time constant s, damping ratio), both
        > 0, or the direct form (-stiffness 1/s^2, -damping 1/s), both <= 0; ``solimp`` (dmin,
        dmax, width m, midpoint, power). A contact pair takes the settings of its
        higher-priority shape; at equal priority it mixes them with weights solmix_a / (solmix_a +
        solmix_b) (the direct form takes each entry's minimum). A shape without settings of its
        own contributes ``SoftContactOptions``' time constant, damping ratio and impedance curve
        with solmix 1 and priority 0. The penalty contact does not read them."""
        where = f"set_shape_softness: shape {shape}"
        if not (isinstance(shape, (int, np.integer)) and 0 <= shape < self.shapes.count):
            raise ValueError(f"set_shape_softness: shape {shape} does not exist ({self.shapes.count} shapes)")
        ref = checked_solref(where, solref)
        imp = checked_solimp(where, solimp)
        if not (np.isfinite(solmix) and solmix >= 0.0):
            raise ValueError(f"{where}: solmix must be finite and >= 0, got {solmix}")
        if not isinstance(priority, (int, np.integer)) or abs(priority) >= 2**31:
            raise ValueError(f"{where}: priority must be a 32-bit integer, got {priority!r}")
        self.shapes.array("shape_solref")[shape] = ref
        self.shapes.array("shape_solimp")[shape] = imp
        self.shapes.array("shape_solmix")[shape] = solmix
        self.shapes.array("shape_priority")[shape] = priority

    def set_shape_condim(self, shape: int, condim: int, torsional: float = 0.005, rolling: float = 0.0001):
        """The shape's soft-constraint contact dimensions, as MuJoCo's geom condim and friction[1:3]
        (defaults MuJoCo's): 1 frictionless (one normal row), 3 sliding friction (the four edges of
        the pyramid n +- mu t1, n +- mu t2), 4 and ``torsional`` friction (m) against spinning about
        the normal, 6 and ``rolling`` friction (m) against rolling about both tangents (2 (condim -
        1) pyramid edges per contact point). A pair takes its higher-priority shape's condim, else
        the larger, and mixes the coefficients as it mixes ``mu``. Shapes start at 3. The penalty
        contact does not read them."""
        where = f"set_shape_condim: shape {shape}"
        if not (isinstance(shape, (int, np.integer)) and 0 <= shape < self.shapes.count):
            raise ValueError(f"{where} does not exist ({self.shapes.count} shapes)")
        if condim not in (1, 3, 4, 6):
            raise ValueError(f"{where}: condim must be 1, 3, 4 or 6, got {condim!r}")
        for name, value in (("torsional", torsional), ("rolling", rolling)):
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"{where}: {name} friction must be finite and >= 0 m, got {value}")
        self.shapes.array("shape_condim")[shape] = condim
        self.shapes.array("shape_rotational_mu")[shape] = (torsional, rolling)

    def set_shape_margin(self, shape: int, margin: float):
        """The shape's soft-constraint contact ``margin`` (m), as MuJoCo's geom margin: a pair of
        shapes is in contact where its points are closer than the sum of the two margins, and its
        rows push them towards that distance, so a body rests that far above a surface. Shapes
        start at 0. The penalty contact does not read it."""
        where = f"set_shape_margin: shape {shape}"
        if not (isinstance(shape, (int, np.integer)) and 0 <= shape < self.shapes.count):
            raise ValueError(f"{where} does not exist ({self.shapes.count} shapes)")
        if not (np.isfinite(margin) and margin >= 0.0):
            raise ValueError(f"{where}: margin must be finite and >= 0 m, got {margin}")
        self.shapes.array("shape_margin")[shape] = margin

    def set_joint_softness(self, joint: int, solref_limit=(0.02, 1.0), solimp_limit=(0.9, 0.95, 0.001, 0.5, 2.0),
                           solref_friction=(0.02, 1.0), solimp_friction=(0.9, 0.95, 0.001, 0.5, 2.0)):
        """The soft-constraint settings of the joint's limit and friction-loss rows, as MuJoCo's
        joint solreflimit, solimplimit, solreffriction and solimpfriction (defaults MuJoCo's;
        solref as in ``set_shape_softness``). A limit row's impedance is solimp's curve at its
        violation, a friction row's at zero (dmin), as MuJoCo has them. Joints without
        settings of their own use ``SoftContactOptions``'. The penalty path does not read them."""
        where = f"set_joint_softness: joint {joint}"
        if not (isinstance(joint, (int, np.integer)) and 0 <= joint < self.joints.count):
            raise ValueError(f"{where} does not exist ({self.joints.count} joints)")
        first = self.first_dof(joint)
        dofs = slice(first, first + JOINT_DOF_COUNT[self.joints.array("joint_type")[joint]])
        settings = {kind: (checked_solref(f"{where} {kind}", solref), checked_solimp(f"{where} {kind}", solimp))
                    for kind, solref, solimp in (("limit", solref_limit, solimp_limit),
                                                 ("friction", solref_friction, solimp_friction))}
        for kind, (solref, solimp) in settings.items():  # all checked before any is written
            self.joint_dofs.array(f"joint_{kind}_solref")[dofs] = solref
            self.joint_dofs.array(f"joint_{kind}_solimp")[dofs] = solimp

    def _contact_filter(self) -> dict:
        """The candidate-pair rule's data as Model arrays (see ``wpsim.kernels.broad_phase``):
        each body's contact group (its articulation's root, or itself with
        ``articulation_self_contact``), whether it can move, whether it meets static shapes,
        and the sorted keys of the body pairs that never touch: a joint's parent and child
        (looking through massless bodies without shapes between them, such as the
        intermediate links of an MJCF body with several joints) and ``exclude_contact``
        pairs."""
        nb = max(self.bodies.count, 1)
        body = self.shapes.array("shape_body")
        parent, child = self.joints.array("joint_parent").copy(), self.joints.array("joint_child")
        parent_of = dict(zip(child.tolist(), parent.tolist()))
        real = np.isin(np.arange(self.bodies.count), body) | (self.bodies.array("body_mass") > 0.0)
        for j in range(len(parent)):
            while parent[j] >= 0 and not real[parent[j]]:
                parent[j] = parent_of.get(int(parent[j]), -1)
        linked = parent >= 0
        keys = [np.maximum(parent[linked], child[linked]) * nb + np.minimum(parent[linked], child[linked]),
                np.array([hi * nb + lo for hi, lo in self.excluded_body_pairs if lo >= 0], dtype=np.int64)]
        static_contact = np.ones(self.bodies.count, dtype=np.int64)
        static_contact[[hi for hi, lo in self.excluded_body_pairs if lo < 0]] = 0
        group = np.arange(self.bodies.count) if self.articulation_self_contact else self._body_roots()
        return {"body_contact_group": group.astype(np.int64), "body_moving": self._moving_bodies().astype(np.int64),
                "body_static_contact": static_contact,
                "contact_forbidden_key": np.unique(np.concatenate(keys).astype(np.int64))}

    def _contact_pairs(self, contact_filter: dict) -> dict:
        """Candidate shape pairs (N, 2) by the rule of ``kernels.broad_phase.may_touch`` (every
        body shape against every static shape of its world and every shape on another body
        of its world, less what ``contact_filter`` rules out), and what the per-step broad
        phase needs: the pairs with planes, the shapes it boxes (all but planes) and each
        shape's box in its frame (centre, half extents, m)."""
        from wpsim.kernels import broad_phase

        shapes = self.shapes
        kind, size = shapes.array("shape_kind"), shapes.array("shape_size")
        check_candidate_pairs(shapes.array("shape_world"), shapes.array("shape_body"))
        pairs = world_pairs(shapes.array("shape_world"), shapes.array("shape_body"))
        if len(pairs):
            inputs = [wp.array(shapes.array(name).astype(np.int32), dtype=int, device="cpu")
                       for name in ("shape_body", "shape_world", "shape_collision_type", "shape_collision_mask")]
            inputs += [wp.array(contact_filter[name].astype(np.int32), dtype=int, device="cpu")
                       for name in ("body_contact_group", "body_moving", "body_static_contact")]
            inputs.append(wp.array(contact_filter["contact_forbidden_key"], dtype=wp.int64, device="cpu"))
            inputs += [wp.array(side.astype(np.int32), dtype=int, device="cpu") for side in pairs.T]
            allowed = wp.zeros(len(pairs), dtype=wp.int8, device="cpu")
            wp.launch(broad_phase.allowed_pairs, dim=len(pairs), inputs=inputs, outputs=[allowed], device="cpu")
            pairs = pairs[allowed.numpy() != 0]
        centre, half = np.zeros((shapes.count, 3)), np.zeros((shapes.count, 3))
        points, starts, counts = (self.shape_points.array("shape_points"), shapes.array("shape_point_start"),
                                  shapes.array("shape_point_count"))
        for s in range(shapes.count):
            if kind[s] == SHAPE_SPHERE:
                half[s] = size[s, 0]
            elif kind[s] == SHAPE_CAPSULE:
                half[s] = (size[s, 0], size[s, 0], size[s, 0] + size[s, 1])
            elif kind[s] == SHAPE_BOX:
                half[s] = size[s]
            elif kind[s] == SHAPE_MESH:
                hull = points[starts[s]:starts[s] + counts[s]]
                centre[s], half[s] = (hull.max(0) + hull.min(0)) / 2, (hull.max(0) - hull.min(0)) / 2
        return {"contact_pair": pairs, "contact_plane_pair": pairs[kind[pairs[:, 1]] == SHAPE_PLANE].reshape(-1, 2),
                "contact_bvh_shape": np.flatnonzero(kind != SHAPE_PLANE).astype(np.int64),
                "shape_bound_centre": centre, "shape_bound_half": half}

    def _moving_bodies(self) -> np.ndarray:
        """(B,) whether each body can move: some joint between it and the world has dofs (a
        body welded to the world is as static as a static shape)."""
        parent_of = dict(zip(self.joints.array("joint_child").tolist(), self.joints.array("joint_parent").tolist()))
        dofs_of = {int(c): JOINT_DOF_COUNT[int(t)] for c, t in zip(self.joints.array("joint_child"),
                                                                  self.joints.array("joint_type"))}
        moving = np.zeros(self.bodies.count, dtype=bool)
        for body in range(self.bodies.count):
            b = body
            while b >= 0 and not moving[body]:
                moving[body] = dofs_of.get(b, 6) > 0  # a body without a joint is free
                b = parent_of.get(b, -1)
        return moving
