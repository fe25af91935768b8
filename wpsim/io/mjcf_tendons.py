"""MJCF ``<tendon><spatial>``: paths through sites wrapping around sphere and cylinder geoms, as
the builder's spatial tendons (``ModelBuilder.add_spatial_tendon``), and position servos on them
(``ModelBuilder.set_tendon_drive``)."""

from __future__ import annotations

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.core.tendon_builder import TendonWrap

WRAPPABLE = ("sphere", "cylinder")


class SpatialTendonReader:
    """The spatial-tendon part of the MJCF reader (mixed into ``mjcf._Reader``, whose ``sites``,
    ``wrap_geoms``, ``numbers``, ``bounded``, ``fail``, ``scene`` and ``tree`` it uses)."""

    def add_spatial_tendons(self, b: ModelBuilder, root) -> list:
        """Each ``<spatial stiffness damping springlength>`` of sites and wrapping ``<geom geom
        sidesite>`` as a spatial tendon (``spatial_tendons``: name -> index); returns the indices
        of tendons with a spring whose rest length the file leaves to the reference pose (MuJoCo's
        springlength -1). Limits, friction loss, armature and pulleys are listed as not
        honoured (a tendon with a pulley is dropped)."""
        at_reference = []
        for tendon in (t for section in root.findall("tendon") for t in section.findall("spatial")):
            path = self.tendon_path(tendon)
            for key in ("frictionloss", "armature"):
                if float(self.numbers(tendon, key, 1, (0.0,))[0]) != 0.0:
                    self.scene.unhonoured.append(self.tree.unhonoured_here(tendon, key, tendon.get(key)))
            if self.bounded(tendon, "") is not None:
                self.scene.unhonoured.append(self.tree.unhonoured_here(
                    tendon, "range", tendon.get("range"), "is not honoured: spatial tendon limits are not rows yet"))
            if path is None:
                continue
            stiffness = float(self.numbers(tendon, "stiffness", 1, (0.0,))[0])
            damping = float(self.numbers(tendon, "damping", 1, (0.0,))[0])
            if damping > 0.0 and not self.drive_damping_explicit:
                self.scene.unhonoured.append(self.tree.unhonoured_here(
                    tendon, "damping", tendon.get("damping"),
                    "acts explicitly (MuJoCo's implicitfast takes a tendon's damping implicitly)"))
            rest = self.numbers(tendon, "springlength", (1, 2), (-1.0,))
            given = rest[0] >= 0.0
            try:
                index = b.add_spatial_tendon(path, stiffness, damping, rest if given else 0.0)
            except ValueError as error:
                self.fail(tendon, str(error).split(": ", 1)[-1])
            self.spatial_tendons[tendon.get("name") or f"tendon{index}"] = index
            if stiffness > 0.0 and not given:
                at_reference.append(index)
        return at_reference

    def tendon_path(self, tendon) -> list | None:
        """The path of a ``<spatial>``: (body, point) per site, a ``TendonWrap`` per geom; None
        (listed) for a path with a pulley."""
        path = []
        for item in tendon:
            if not isinstance(item.tag, str):
                continue
            if item.tag == "pulley":
                self.scene.unhonoured.append(self.tree.unhonoured_here(
                    item, None, None, "is not honoured: the tendon with it is dropped"))
                return None
            name = item.get(item.tag)
            if item.tag == "site":
                if name not in self.sites:
                    self.fail(item, f"unknown site \"{name}\"")
                path.append(self.sites[name])
            elif item.tag == "geom":
                if name not in self.wrap_geoms:
                    self.fail(item, f"unknown geom \"{name}\"")
                body, gtype, pos, rot, size = self.wrap_geoms[name]
                if gtype not in WRAPPABLE:
                    self.fail(item, f"geom \"{name}\" is a {gtype}: a tendon wraps spheres and cylinders")
                side = item.get("sidesite")
                if side is not None and side not in self.sites:
                    self.fail(item, f"unknown sidesite \"{side}\"")
                side_site = None if side is None else self.sites[side]
                if side_site is not None and side_site[0] == body and np.linalg.norm(
                        np.asarray(side_site[1]) - pos) < size[0]:
                    self.scene.unhonoured.append(self.tree.unhonoured_here(
                        item, "sidesite", side, "is not honoured: a side site inside its geom (MuJoCo wraps inside)"))
                path.append(TendonWrap(body, tuple(pos), tuple(rot), float(size[0]), gtype, side_site))
        return path

    def drive_spatial_tendon(self, b: ModelBuilder, actuator, index: int, gain: float, bias, limit: float):
        """A position servo (force g ctrl + b0 + b1 L + b2 dL/dt, b1 < 0) on spatial tendon
        ``index``: its drive with ke = -b1, kd = -b2 and target (g ctrl + b0) / ke, the control
        range (ctrlrange) mapped onto the target's; recorded in ``ImportedScene.tendon_actuators``."""
        ke, kd = -float(bias[1]), -float(bias[2])
        controls = self.bounded(actuator, "ctrl")
        targets = (-np.inf, np.inf) if controls is None else tuple(sorted((gain * c + float(bias[0])) / ke
                                                                          for c in controls))
        if kd > 0.0 and not self.drive_damping_explicit:
            self.scene.unhonoured.append(self.tree.unhonoured_here(
                actuator, "kv", actuator.get("kv"), "acts explicitly on a spatial tendon (MuJoCo's implicitfast "
                                                    "takes it implicitly)"))
        b.set_tendon_drive(index, ke, kd, limit, targets)
        self.scene.tendon_actuators.append({
            "name": actuator.get("name") or f"actuator{len(self.scene.actuators) + len(self.scene.tendon_actuators)}",
            "tendon": index, "target_per_ctrl": gain / ke, "target_offset": float(bias[0]) / ke})


def reference_rest_lengths(builder: ModelBuilder, tendons: list):
    """Set the springs of spatial ``tendons`` to rest at their lengths in the builder's reference
    pose (MuJoCo's springlength -1), measured on a float64 copy of the model."""
    import warp as wp

    from wpsim.solvers.tendons import tendon_kinematics

    model = builder.finalize(dtype=wp.float64, requires_grad=False)
    lengths = tendon_kinematics(model, model.state())[0]
    for index in tendons:
        builder.spatial_tendons[index]["rest"] = (float(lengths[index]),) * 2
