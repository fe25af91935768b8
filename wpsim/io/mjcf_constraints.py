"""The MJCF reader's closed kinematic relations (``wpsim.io.mjcf``): ``<equality>`` joint,
connect and weld constraints and ``<tendon><fixed>`` springs, as the builder's joint couplings
and body connections."""

from __future__ import annotations

import math

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import transform_inverse, transform_multiply, transform_point
from wpsim.io.scene_parsing import MUJOCO_SOLREF
from wpsim.kernels.enums import JOINT_PRISMATIC, JOINT_REVOLUTE

IDENTITY_QUAT = np.array([0.0, 0.0, 0.0, 1.0])
"""The rotation that turns nothing (x, y, z, w)."""


class ConstraintReader:
    """The equality and fixed-tendon part of the MJCF reader (mixed into ``mjcf._Reader``,
    whose ``scene``, ``tree``, ``world_pose``, ``numbers``, ``solimp_of``, ``bounded``,
    ``drive_damping_explicit``, ``tendon_couplings`` and ``fail`` it uses)."""

    def one_dof_joint(self, b: ModelBuilder, element, key: str) -> int:
        """The hinge or slide joint an element names in ``key`` (a SceneFileError otherwise)."""
        name = element.get(key)
        if name not in self.scene.joints:
            self.fail(element, f"{key}: unknown joint \"{name}\"")
        joint = self.scene.joints[name]
        if b.joints.array("joint_type")[joint] not in (JOINT_REVOLUTE, JOINT_PRISMATIC):
            self.fail(element, f"{key}: joint \"{name}\" is not a hinge or slide joint")
        return joint

    def softness_of(self, equality) -> tuple:
        """(time constant s, damping ratio, solimp) of an equality: its solref (the
        time-constant form; another is listed and MuJoCo's default 0.02 1 used) and solimp
        (``solimp_of``; the spring-dampers of the penalty path hold its dmin, MuJoCo's
        impedance at zero violation, at every violation)."""
        time_constant, ratio = self.numbers(equality, "solref", 2, MUJOCO_SOLREF)
        if min(time_constant, ratio) <= 0.0:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                equality, "solref", equality.get("solref"), "is not honoured: only the time-constant form (> 0); "
                                                             "0.02 1 is used"))
            time_constant, ratio = MUJOCO_SOLREF
        return float(time_constant), float(ratio), self.solimp_of(equality)

    def add_equalities(self, b: ModelBuilder, root):
        """``<equality><joint joint1 joint2 polycoef solref solimp>``, q1 - q1_0 = a0 + a1 x +
        a2 x^2 + a3 x^3 + a4 x^4 with x = q2 - q2_0 (q_0: the file's reference pose; no joint2:
        q1 - q1_0 = a0), as a joint coupling in powers of q2 (the polynomial expanded about
        q2 = 0) with solref's time constant and damping ratio (``ModelBuilder.add_joint_coupling``)."""
        for equality in (e for section in root.findall("equality") for e in section.findall("joint")):
            poly = self.numbers(equality, "polycoef", 5, (0.0, 1.0, 0.0, 0.0, 0.0))
            time_constant, ratio, solimp = self.softness_of(equality)
            first = self.one_dof_joint(b, equality, "joint1")
            q0 = b.joint_coords.array("joint_q")
            joints, coefs, powers, rest = [first], [1.0], [1], q0[b.first_coord(first)] + poly[0]
            if equality.get("joint2") is not None:
                second = self.one_dof_joint(b, equality, "joint2")
                # sum_p a_p (q2 - r)^p = sum_k q2^k sum_{p >= k} a_p C(p, k) (-r)^(p - k)
                shift = -q0[b.first_coord(second)]
                expanded = [sum(poly[p] * math.comb(p, k) * shift ** (p - k) for p in range(k, 5)) for k in range(5)]
                rest += expanded[0] - poly[0]  # expanded[0] includes a0
                for power in range(1, 5):
                    if expanded[power] != 0.0:
                        joints.append(second)
                        coefs.append(-expanded[power])
                        powers.append(power)
            try:
                b.add_joint_coupling(joints, coefs, rest=rest, time_constant=time_constant, damping_ratio=ratio,
                                     impedance=solimp, powers=powers)
            except ValueError as error:
                self.fail(equality, str(error))

    def add_connections(self, b: ModelBuilder, root):
        """``<equality><connect body1 body2 anchor>`` and ``<weld body1 body2 anchor relpose>``
        as body connections (``ModelBuilder.add_body_connection``) with the equality's solref
        and solimp. A connect holds body1's anchor (its frame) where it is in the reference
        pose, on body2 (the world if absent). A weld holds body2's anchor (its frame) at
        relpose's position in body1's frame and body2's orientation in body1's frame at
        relpose's quaternion; where that quaternion is 0 (the default), both as they are in
        the reference pose (MuJoCo's semantics). ``site1``/``site2`` forms and a weld's ``torquescale`` other than 1
        are listed as not honoured."""
        for tag in ("connect", "weld"):
            for equality in (e for section in root.findall("equality") for e in section.findall(tag)):
                if equality.get("body1") is None:
                    self.scene.unhonoured.append(self.tree.unhonoured_here(
                        equality, note="is not honoured: only the body1/body2 form"))
                    continue
                if tag == "weld" and float(equality.get("torquescale", "1")) != 1.0:
                    self.scene.unhonoured.append(self.tree.unhonoured_here(
                        equality, "torquescale", equality.get("torquescale"),
                        "is not honoured: the rotation is held with the equality's solref alone"))
                bodies = []
                for key in ("body1", "body2"):
                    name = equality.get(key, "world")
                    if name != "world" and name not in self.scene.bodies:
                        self.fail(equality, f"{key}: unknown body \"{name}\"")
                    bodies.append(-1 if name == "world" else self.scene.bodies[name])
                try:
                    *ends, rotation = self.connection_of(equality, tag, bodies)
                    b.add_body_connection(*ends, *self.softness_of(equality), rotation=rotation)
                except ValueError as error:
                    self.fail(equality, str(error))

    def connection_of(self, equality, tag: str, bodies: list) -> tuple:
        """(body_a, point_a, body_b, point_b, rotation) of a connect or weld equality between
        ``bodies`` (body1, body2; -1: the world), for ``ModelBuilder.add_body_connection``."""
        poses = [self.world_pose[body] if body >= 0 else np.array([0.0, 0.0, 0.0, *IDENTITY_QUAT]) for body in bodies]
        if tag == "connect":
            anchor = self.numbers(equality, "anchor", 3)
            if anchor is None:
                self.fail(equality, "needs an anchor")
            held = transform_point(transform_inverse(poses[1]), transform_point(poses[0], anchor))
            return bodies[0], anchor, bodies[1], held, None
        anchor = self.numbers(equality, "anchor", 3, (0.0, 0.0, 0.0))
        relpose = self.numbers(equality, "relpose", 7, (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0))
        if np.any(relpose[3:] != 0.0):  # body2's orientation in body1's frame (wxyz), and where body2's anchor is held
            relative = np.concatenate([relpose[:3], relpose[4:], relpose[3:4]])
            point = relpose[:3]
        else:  # the reference pose: body2's anchor held where it is in body1's frame
            relative = transform_multiply(transform_inverse(poses[0]), poses[1])
            point = transform_point(relative, anchor)
        if bodies[0] < 0:  # welded to the world through body1: body2 held at relpose in the world
            return bodies[1], anchor, -1, point, relative[3:]
        return bodies[0], point, bodies[1], anchor, transform_inverse(relative)[3:]

    def add_fixed_tendons(self, b: ModelBuilder, root):
        """``<tendon><fixed stiffness damping springlength>``: length sum(coef q), a joint
        coupling with that spring, for a tendon with a spring or an actuator on it (which
        ``add_tendon_actuator`` then drives; ``tendon_couplings``: name -> coupling). A
        tendon's limits are listed as not honoured."""
        actuators = root.find("actuator")
        actuated = set() if actuators is None else {a.get("tendon") for a in actuators if a.get("tendon")}
        for tendon in (t for section in root.findall("tendon") for t in section.findall("fixed")):
            ke = float(self.numbers(tendon, "stiffness", 1, (0.0,))[0])
            kd = float(self.numbers(tendon, "damping", 1, (0.0,))[0])
            if ke == 0.0 and kd == 0.0 and tendon.get("name") not in actuated:
                continue
            terms = tendon.findall("joint")
            joints = [self.one_dof_joint(b, term, "joint") for term in terms]
            coefs = [float(self.numbers(term, "coef", 1, (np.nan,))[0]) for term in terms]
            if not terms or np.isnan(coefs).any():
                self.fail(tendon, "a fixed tendon needs <joint joint=... coef=...> terms, each with a coef")
            q0 = b.joint_coords.array("joint_q")
            rest = self.numbers(tendon, "springlength", (1, 2), (-1.0,))[0]
            if rest < 0.0:  # MuJoCo: -1 means the length in the reference pose
                rest = sum(c * q0[b.first_coord(j)] for j, c in zip(joints, coefs))
            try:
                self.tendon_couplings[tendon.get("name")] = b.add_joint_coupling(joints, coefs, rest=float(rest),
                                                                                 ke=ke, kd=kd)
            except ValueError as error:
                self.fail(tendon, str(error))

    def add_tendon_actuator(self, b: ModelBuilder, actuator, gain: float, bias: np.ndarray):
        """An actuator on a fixed tendon, force g ctrl + b0 + b1 L + b2 dL/dt (``gain`` g,
        ``bias`` b) with b1 < 0 and b2 <= 0 (a position servo), as its coupling's drive
        (``ModelBuilder.set_coupling_drive``: ke = -b1, kd = -b2, its kd implicit as the file's
        integrator takes an actuator's, the force range if symmetric), recorded in
        ``ImportedScene.tendon_actuators`` with the target length per unit of control g / ke
        and at zero control b0 / ke. Actuators on other tendons, of other laws or with a gear
        other than 1 are dropped and listed."""
        name = actuator.get("tendon")
        coupling = self.tendon_couplings.get(name)
        gear = float(self.numbers(actuator, "gear", (1, 6), (1.0,))[0])
        reason = None
        if coupling is None and name not in self.spatial_tendons:
            reason = f"is dropped: tendon \"{name}\" is not a fixed or spatial tendon of the file"
        elif not (bias[1] < 0.0 and bias[2] <= 0.0) or gear != 1.0:
            reason = (f"is dropped: only a position servo (biasprm b0 b1 b2 with b1 < 0, b2 <= 0) of gear 1 drives a "
                      f"tendon (biasprm {bias.tolist()}, gear {gear:g})")
        if reason is not None:
            self.scene.unhonoured.append(self.tree.unhonoured_here(actuator, "tendon", name, reason))
            return
        forces = self.bounded(actuator, "force")
        limit = np.inf
        if forces is not None and np.isclose(-forces[0], forces[1]):
            limit = float(forces[1])
        elif forces is not None:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                actuator, "forcerange", actuator.get("forcerange"), "is not honoured: not symmetric"))
        if coupling is None:
            self.drive_spatial_tendon(b, actuator, self.spatial_tendons[name], gain, bias, limit)
            return
        if self.bounded(actuator, "ctrl") is not None:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                actuator, "ctrlrange", actuator.get("ctrlrange"),
                "is not honoured: a tendon drive's target (Control.coupling_target) is not clamped"))
        ke, kd = -float(bias[1]), -float(bias[2])
        b.set_coupling_drive(coupling, ke, kd, limit, implicit=not self.drive_damping_explicit)
        self.scene.tendon_actuators.append({
            "name": actuator.get("name") or f"actuator{len(self.scene.actuators) + len(self.scene.tendon_actuators)}",
            "coupling": coupling, "target_per_ctrl": gain / ke, "target_offset": float(bias[0]) / ke})
