"""Regenerate the robot descriptions of this folder as MJCF and URDF from one table per
robot (run from the repository root: ``python assets/make_robots.py``). The robots are
this project's own: a cart-pole, a 2-link and a 7-link arm, and a small quadruped.

Every link has an explicit inertial (mass, centre of mass, principal moments along the
link axes), so both formats describe the same dynamics; collision shapes are boxes,
spheres and capsules (URDF has no capsule: it gets a cylinder of the same radius and
overall length, which wpsim imports as that capsule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wpsim.io.files import atomic_write

HERE = Path(__file__).resolve().parent


@dataclass
class Link:
    """One body and the joint to its parent (SI units, radians)."""

    name: str
    parent: str | None  # None: attached to the world
    joint: str  # "hinge", "slide", "free" or "fixed"
    origin: tuple = (0.0, 0.0, 0.0)  # joint position in the parent frame (world for roots)
    axis: tuple = (0.0, 0.0, 1.0)
    limits: tuple | None = None
    damping: float = 0.0
    mass: float = 1.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = (0.01, 0.01, 0.01)  # principal moments about the com, link axes
    shapes: list = field(default_factory=list)  # ("box", half extents, centre) | ("sphere", r, centre) |
    # ("capsule", (r, from, to))
    motor: str | None = None  # "motor" or "position"
    kp: float = 0.0


def _v(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def mjcf(name: str, links: list, ground: bool, timestep: float) -> str:
    """The robot as an MJCF document (Euler integrator, z up, angles in radians)."""
    children = {}
    for link in links:
        children.setdefault(link.parent, []).append(link)

    def body(link: Link, depth: int) -> list:
        pad = "  " * depth
        out = [f'{pad}<body name="{link.name}" pos="{_v(link.origin)}">']
        if link.joint == "free":
            out.append(f'{pad}  <freejoint name="{link.name}_joint"/>')
        elif link.joint != "fixed":
            limits = "" if link.limits is None else f' range="{_v(link.limits)}"'
            out.append(f'{pad}  <joint name="{link.name}_joint" type="{link.joint}" axis="{_v(link.axis)}"{limits}'
                       f' damping="{link.damping:g}"/>')
        out.append(f'{pad}  <inertial pos="{_v(link.com)}" mass="{link.mass:g}" diaginertia="{_v(link.inertia)}"/>')
        for kind, size, *where in link.shapes:
            if kind == "capsule":
                radius, start, end = size
                out.append(f'{pad}  <geom type="capsule" size="{radius:g}" fromto="{_v(start)} {_v(end)}"/>')
            elif kind == "box":
                out.append(f'{pad}  <geom type="box" size="{_v(size)}" pos="{_v(where[0])}"/>')
            else:
                out.append(f'{pad}  <geom type="sphere" size="{size:g}" pos="{_v(where[0])}"/>')
        for child in children.get(link.name, []):
            out += body(child, depth + 1)
        out.append(f"{pad}</body>")
        return out

    lines = [f'<mujoco model="{name}">', '  <compiler angle="radian"/>',
             f'  <option timestep="{timestep:g}" gravity="0 0 -9.81"/>', "  <worldbody>"]
    if ground:
        lines.append('    <geom name="ground" type="plane" size="5 5 0.1"/>')
    for root in children[None]:
        lines += body(root, 2)
    lines.append("  </worldbody>")
    motors = [link for link in links if link.motor]
    if motors:
        lines.append("  <actuator>")
        for link in motors:
            gain = f' kp="{link.kp:g}"' if link.motor == "position" else ' gear="1"'
            lines.append(f'    <{link.motor} name="{link.name}_{link.motor}" joint="{link.name}_joint"{gain}/>')
        lines.append("  </actuator>")
    lines.append("</mujoco>")
    return "\n".join(lines) + "\n"


def urdf(name: str, links: list) -> str:
    """The robot as a URDF document (a root on a free joint becomes a "floating" joint)."""
    lines = [f'<robot name="{name}">', '  <link name="world"/>']
    for link in links:
        i = link.inertia
        lines += [f'  <link name="{link.name}">', "    <inertial>", f'      <origin xyz="{_v(link.com)}"/>',
                  f'      <mass value="{link.mass:g}"/>',
                  f'      <inertia ixx="{i[0]:g}" iyy="{i[1]:g}" izz="{i[2]:g}" ixy="0" ixz="0" iyz="0"/>',
                  "    </inertial>"]
        for kind, size, *where in link.shapes:
            lines.append("    <collision>")
            if kind == "capsule":
                import numpy as np

                radius, start, end = (np.asarray(s, dtype=float) for s in size)
                axis = end - start
                length = float(np.linalg.norm(axis))
                # a cylinder along z, turned onto the segment (here always along a link axis)
                rpy = {0: "0 1.5707963 0", 1: "-1.5707963 0 0", 2: "0 0 0"}[int(np.argmax(np.abs(axis)))]
                lines += [f'      <origin xyz="{_v((start + end) / 2)}" rpy="{rpy}"/>',
                          f'      <geometry><cylinder radius="{float(radius):g}" length="{length + 2 * float(radius):g}"/>'
                          "</geometry>"]
            elif kind == "box":
                lines += [f'      <origin xyz="{_v(where[0])}"/>',
                          f'      <geometry><box size="{_v([2 * s for s in size])}"/></geometry>']
            else:
                lines += [f'      <origin xyz="{_v(where[0])}"/>', f'      <geometry><sphere radius="{size:g}"/></geometry>']
            lines.append("    </collision>")
        lines.append("  </link>")
    for link in links:
        kind = {"hinge": "revolute" if link.limits else "continuous", "slide": "prismatic", "free": "floating",
                "fixed": "fixed"}[link.joint]
        lines += [f'  <joint name="{link.name}_joint" type="{kind}">', f'    <parent link="{link.parent or "world"}"/>',
                  f'    <child link="{link.name}"/>', f'    <origin xyz="{_v(link.origin)}"/>']
        if link.joint in ("hinge", "slide"):
            lines.append(f'    <axis xyz="{_v(link.axis)}"/>')
            if link.limits:
                lines.append(f'    <limit lower="{link.limits[0]:g}" upper="{link.limits[1]:g}" effort="100" velocity="10"/>')
            lines.append(f'    <dynamics damping="{link.damping:g}"/>')
        lines.append("  </joint>")
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def cartpole() -> list:
    return [
        Link("cart", None, "slide", (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), mass=1.0, inertia=(0.1, 0.1, 0.1),
             shapes=[("box", (0.2, 0.1, 0.05), (0.0, 0.0, 0.0))], motor="motor"),
        Link("pole", "cart", "hinge", (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), mass=0.2, com=(0.0, 0.0, 0.5),
             inertia=(0.02, 0.02, 0.001), shapes=[("capsule", (0.02, (0, 0, 0), (0, 0, 1.0)))]),
    ]


def arm(links: int) -> list:
    """A hanging arm: link k turns about x (even k) or y (odd k), 0.3 m links for 2 links,
    0.15 m for more; motors on every joint."""
    length = 0.3 if links <= 2 else 0.15
    out, parent, origin = [], None, (0.0, 0.0, 1.5)
    for k in range(links):
        mass = 1.0 / (k + 1)
        lateral = mass * length * length / 12.0
        axis = (1.0, 0.0, 0.0) if k % 2 == 0 else (0.0, 1.0, 0.0)
        out.append(Link(f"link{k + 1}", parent, "hinge", origin, axis, limits=(-2.5, 2.5), damping=0.05,
                        mass=mass, com=(0.0, 0.0, -length / 2), inertia=(lateral, lateral, 1e-3 * mass),
                        shapes=[("capsule", (0.03, (0, 0, 0), (0, 0, -length)))], motor="motor"))
        parent, origin = f"link{k + 1}", (0.0, 0.0, -length)
    return out


def quadruped() -> list:
    """A box torso on a free joint and four legs of three hinges (hip abduction, hip
    flexion, knee), position actuators on all 12."""
    out = [Link("torso", None, "free", (0.0, 0.0, 0.45), mass=4.0, inertia=(0.016, 0.086, 0.096),
                shapes=[("box", (0.25, 0.1, 0.05), (0.0, 0.0, 0.0))])]
    for name, sx, sy in (("fl", 1, 1), ("fr", 1, -1), ("hl", -1, 1), ("hr", -1, -1)):
        out += [
            Link(f"{name}_hip", "torso", "hinge", (0.2 * sx, 0.12 * sy, 0.0), (1.0, 0.0, 0.0), (-0.8, 0.8),
                 mass=0.2, inertia=(1e-4, 1e-4, 1e-4), motor="position", kp=200.0),
            Link(f"{name}_thigh", f"{name}_hip", "hinge", (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), (-1.5, 1.5),
                 mass=0.4, com=(0.0, 0.0, -0.1), inertia=(1.4e-3, 1.4e-3, 1e-4),
                 shapes=[("capsule", (0.025, (0, 0, 0), (0, 0, -0.2)))], motor="position", kp=200.0),
            Link(f"{name}_shin", f"{name}_thigh", "hinge", (0.0, 0.0, -0.2), (0.0, 1.0, 0.0), (-2.5, 0.0),
                 mass=0.25, com=(0.0, 0.0, -0.1), inertia=(9e-4, 9e-4, 5e-5),
                 shapes=[("capsule", (0.02, (0, 0, 0), (0, 0, -0.2))), ("sphere", 0.03, (0.0, 0.0, -0.2))],
                 motor="position", kp=200.0),
        ]
    return out


ROBOTS = {
    "cartpole": (cartpole, False, 0.002),
    "arm_2link": (lambda: arm(2), False, 0.001),
    "arm_7link": (lambda: arm(7), False, 0.001),
    "quadruped": (quadruped, True, 0.0005),
}


def main():
    """Write <robot>.xml (MJCF) and <robot>.urdf for every robot."""
    for name, (make, ground, timestep) in ROBOTS.items():
        links = make()
        for suffix, text in ((".xml", mjcf(name, links, ground, timestep)), (".urdf", urdf(name, links))):
            atomic_write(HERE / f"{name}{suffix}", lambda tmp, t=text: Path(tmp).write_text(t))
            print(f"wrote assets/{name}{suffix}")


if __name__ == "__main__":
    main()
