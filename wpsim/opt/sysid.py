"""Rigid-body system identification: fit the parameters of a robot file to a measured joint
trajectory and the torques applied during it.

The measured run (``wpsim.io.measurements``: ``q:``, optional ``qd:`` and ``tau:`` columns
named after the robot's 1-dof joints, and ``ctrl:`` columns named after its actuators:
motors' controls, which act times their gear, and position servos' targets) is resampled
onto the simulation grid (the robot file's time step unless another is given). The rollout
starts from the first sample (rates from ``qd:`` columns, else a one-sided difference of the
angles), applies the measured torques and controls step by step, and its loss is the mean squared joint-angle error (rad^2) over every
measured joint and step. Families of parameters (``FAMILIES``):

- "masses": the mass of every body with mass, its inertia scaled with it (a change of
  density; the centre of mass stays); log-space;
- "inertia": the full inertial parameters of every body with mass (mass, centre of mass,
  rotational inertia: ten per body) as log-Cholesky coordinates (``wpsim.opt.inertia``), so
  that every value the optimiser tries is a physically realisable body; not with "masses";
- "damping", "armature": of every 1-dof joint (N m s/rad, kg m^2 for hinges), >= 0;
- "friction": the dry friction (MuJoCo's frictionloss) of every measured 1-dof joint (N m for
  hinges, N for sliders), >= 0, as the friction-loss rows of the soft-constraint solve (the
  run then steps with it: ``prepare_run``);
- "stiffness": the spring stiffness of every measured 1-dof joint (N m/rad or N/m, MuJoCo's
  joint ``stiffness``, about the file's ``springref``), >= 0;
- "servo_gains": the position gain kp (N m/rad or N/m) and velocity gain kv (N m s/rad or
  N s/m) of every position servo on a measured joint, >= 0, its targets from the data's
  ``ctrl:<actuator>`` columns;
- "contact_friction": the sliding friction coefficient (MuJoCo's geom ``friction[0]``) of
  every shape on the robot that has a contact pair, >= 0; a pair takes its shapes' mix
  (MuJoCo's: the larger, or the higher priority's), so a shape's value counts only where it is
  its pairs' (the verdict names a value the data leave free);
- "initial_state": the measured joints' starting angles and rates (to absorb noise in the
  first sample).

``TrackingResiduals`` are the same errors as residuals for Gauss-Newton /
Levenberg-Marquardt (``wpsim.opt.least_squares``): the residual of measured joint j at step
k (every ``every`` steps) is ``sqrt(w) (q_j(k) - measured_j(k))`` with ``w`` one over the
number of residuals, so that ``r . r`` is the mean squared error over those steps (with
``every=1`` the loss of ``robot_problem``). Their Jacobian comes by default from one
unrecorded rollout of a copy of the run in n + 1 worlds (n parameters): world 0 at the
current values, each other with one parameter moved, forward differences in float64 (central
ones, 2n + 1 worlds, on request) (``MeasuredReplay``: the fused articulation step replays all steps in one launch).
With ``jacobian="adjoint"`` a row is the gradient of one residual instead; the rows come
from a copy of the run in B identical worlds whose world b's loss is the residual of row b
of the current block, seeded into that world's joint coordinate at that row's step: one
forward and one backward of the B-world rollout give B rows, and N residuals take
ceil(N / B) such passes.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from wpsim.core.validation import require_dt
from wpsim.diff import Rollout
from wpsim.diff.losses import joint_state_loss, joint_tracking_loss
from wpsim.io.measurements import MeasurementError, Trajectory
from wpsim.kernels.enums import JOINT_DOF_COUNT, JOINT_REVOLUTE
from wpsim.opt import inertia
from wpsim.opt.parameters import DerivedParameter, Parameter, ParameterSet
from wpsim.opt.problem import Problem
from wpsim.opt.replays import DIFFERENCE_STEPS, MeasuredReplay
from wpsim.opt.shooting import ShootingResiduals, shooting_window
from wpsim.opt.sysid_report import FittedRun, SysidResult, pooled_rms, replay
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

FAMILIES = ("masses", "inertia", "damping", "armature", "friction", "stiffness", "servo_gains", "contact_friction",
            "initial_state")
SOFT_FAMILIES = ("friction", "contact_friction")
"""Families a run steps with the soft-constraint solve to fit (``prepare_run``)."""
JACOBIANS = ("differences", "adjoint")
"""How ``TrackingResiduals`` computes its Jacobian (see there)."""
THREADED_WORLDS = 64
"""Worlds from which the differences Jacobian's rollout runs on every core (fewer: one thread;
its launch costs less wall time split, but more CPU time)."""
DIFFERENCES = ("forward", "central")
TYPICAL = {"joint_damping": 0.1, "joint_armature": 0.01, "joint_friction": 0.1, "joint_stiffness": 1.0,
           "joint_target_ke": 1.0, "joint_target_kd": 0.1}
"""Scale (physical size of one optimiser unit) of joint parameters whose initial value is
smaller: N m s/rad and kg m^2 for hinges."""
UNITS = {"damping": {True: "N m s/rad", False: "N s/m"}, "armature": {True: "kg m^2", False: "kg"},
         "friction": {True: "N m", False: "N"}, "stiffness": {True: "N m/rad", False: "N/m"},
         "kp": {True: "N m/rad", False: "N/m"}, "kv": {True: "N m s/rad", False: "N s/m"},
         "q0": {True: "rad", False: "m"}, "qd0": {True: "rad/s", False: "m/s"}}
"""Units of the joint families for a hinge (True) or a slider (False)."""


@dataclass
class RobotRun:
    """A robot model set up to replay a measured run.

    model: the Model (float64, with gradients) of ``worlds`` identical copies of the robot;
    joints: the measured 1-dof joints' names; coords / dofs: their joint-coordinate and dof
    indices in world 0 (world w's are offset by w times the per-world counts); hinges:
    whether each is revolute (else prismatic); dt (s) and steps: the grid;
    measured: (steps + 1, joints) angles on the grid (rad or m); joint_f: (steps, joint dofs)
    the measured torques of each step (``tau:`` columns, and motors' ``ctrl:`` times their
    gear); joint_target: (steps, joint dofs) the position servos' targets of each step (their
    ``ctrl:`` columns; rad or m), or None where no servo's control is measured; controls: one
    Control per step with them (made at first use: only recorded rollouts need them); state0:
    the initial State; body_names / joint_names: body / joint index -> name in the robot
    file; soft_contact: the ``SoftContactOptions`` of its steps (``solver``), or None for the
    penalty step; servos: the position servos on measured joints, (joint name, dof) each;
    held: (Control field, world-0 index, value) of the tendon servos' targets that a constant
    ``ctrl:`` column holds through the run (``control``).
    """

    model: object
    joints: list
    coords: np.ndarray
    dofs: np.ndarray
    hinges: list
    dt: float
    steps: int
    measured: np.ndarray
    joint_f: np.ndarray
    state0: object
    body_names: dict
    worlds: int = 1
    joint_names: dict = field(default_factory=dict)
    soft_contact: object = None
    joint_target: np.ndarray | None = None
    servos: list = field(default_factory=list)
    held: list = field(default_factory=list)
    _controls: list | None = None

    def solver(self, threads: int | None = None) -> SemiImplicitSolver:
        """A solver stepping the run's model as the fit does (``soft_contact``)."""
        return SemiImplicitSolver(self.model, soft_contact=self.soft_contact, threads=threads)

    @property
    def controls(self) -> list:
        """One Control per step holding that step's measured joint forces (``joint_f``), servo
        targets (``joint_target``) and held tendon targets (``held``)."""
        if self._controls is None:
            self._controls = []
            for k, forces in enumerate(self.joint_f):
                control = self.control()
                control.joint_f.assign(forces)
                if self.joint_target is not None:
                    control.joint_target_q.assign(self.joint_target[k])
                self._controls.append(control)
        return self._controls

    def world0_inertials(self) -> tuple:
        """(mass (B,) kg, centre of mass (B, 3) m, inertia (B, 3, 3) kg m^2) of world 0's bodies,
        float64 copies of the model's current values."""
        per_world = self.model.body_count // self.worlds
        return tuple(getattr(self.model, name).numpy().astype(np.float64)[:per_world]
                     for name in ("body_mass", "body_com", "body_inertia"))

    def body_inertials(self) -> dict:
        """Body name -> {"mass_kg", "com_m" (3,), "inertia_kg_m2" (3, 3) about the centre of
        mass} of every body with mass in world 0 (the model's current values)."""
        mass, com, rotational = self.world0_inertials()
        return {self.body_names.get(int(b), f"body{b}"): {"mass_kg": float(mass[b]), "com_m": com[b].tolist(),
                                                          "inertia_kg_m2": rotational[b].tolist()}
                for b in np.flatnonzero(mass > 0.0)}

    def control(self):
        """A Control (measured inputs, not parameters: no gradients) holding the ``held``
        tendon targets in every world, its other entries zero."""
        control = self.model.control(requires_grad=False)
        for name, index, value in self.held:
            values = getattr(control, name).numpy()
            values[self.world_rows([index], len(values))] = value
            getattr(control, name).assign(values)
        return control

    def input_arrays(self) -> tuple:
        """(joint forces, position targets or None) of every step as (steps, joint dofs) arrays
        of the model's precision, for ``SemiImplicitSolver.replay``."""
        model = self.model
        forces = wp.array(self.joint_f, dtype=model.dtype, device=model.device)
        targets = None if self.joint_target is None else wp.array(self.joint_target, dtype=model.dtype,
                                                                   device=model.device)
        return forces, targets

    def rms(self, simulated: np.ndarray) -> float:
        """RMS error (rad or m) of ``simulated`` (steps + 1, joints) against ``measured``."""
        return float(np.sqrt(np.mean((simulated - self.measured) ** 2)))

    def world_rows(self, rows: np.ndarray, count: int) -> np.ndarray:
        """World-0 ``rows`` of a table of ``count`` rows in all worlds -> the same rows in
        every world, world after world."""
        per = count // self.worlds
        return (np.asarray(rows)[None, :] + per * np.arange(self.worlds)[:, None]).ravel()

    def coordinate_worlds(self) -> wp.array:
        """(joint coordinates,) int32 world of every joint coordinate: the loss entry its
        terms go to."""
        count = self.model.joint_coord_count
        return wp.array(np.arange(count) // (count // self.worlds), dtype=wp.int32, device=self.model.device)


def prepare_run(builder, scene, data: Trajectory, dt: float | None = None, duration: float | None = None,
                device=None, worlds: int = 1, soft_constraints: bool = False) -> RobotRun:
    """A ``RobotRun`` of the imported robot (``builder``, ``scene``) replaying ``data``, in
    ``worlds`` identical copies (for a multi-start fit, ``wpsim.opt.multistart``). Where a
    joint has dry friction, shapes can touch (contact pairs), or ``soft_constraints`` asks (a
    family of ``SOFT_FAMILIES`` is fitted), the run steps with the soft-constraint solve of the
    file's settings (``scene.contact_settings``), as ``wpsim run`` steps robots: contact, joint
    limits and dry friction as its rows (friction-loss rows stick below the friction and slide
    at it as MuJoCo's frictionloss does, where the penalty step's smooth law creeps); otherwise
    with the penalty step."""
    if dt is None and not scene.timestep:
        raise ValueError("no time step: the robot file gives none; pass dt")
    dt = require_dt(scene.timestep if dt is None else dt)
    if int(worlds) != worlds or worlds < 1:
        raise ValueError(f"worlds must be an integer >= 1, got {worlds}")
    builder = builder.replicated(worlds) if worlds > 1 else builder
    model = builder.finalize(device=device, requires_grad=True, dtype=wp.float64)
    soft_contact = None
    if soft_constraints or model.contact_pair_count or (model.joint_friction.numpy() > 0.0).any():
        soft_contact = SoftContactOptions(**scene.contact_settings)
    types, q_start, qd_start = (a.numpy() for a in (model.joint_type, model.joint_q_start, model.joint_qd_start))
    one_dof = {name: j for name, j in scene.joints.items() if JOINT_DOF_COUNT[int(types[j])] == 1}
    for kind in ("q", "qd", "tau"):
        data.require(kind, one_dof, "1-dof joint of the robot")
    joints = data.names("q")
    if not joints:
        raise MeasurementError(f"{data.path}: no 'q:<joint>' column to fit to")
    unmeasured = [name for name, j in scene.joints.items() if JOINT_DOF_COUNT[int(types[j])] > 1]
    if unmeasured:
        warnings.warn(f"{data.path}: the robot's joint(s) {', '.join(unmeasured)} (free or ball) are not measured "
                      "(data give 1-dof joints only): each run starts them at the file's pose, at rest, and they "
                      "move unobserved; a floating base's pose is not fitted to yet", stacklevel=2)
    span = data.time[-1] - data.time[0]
    duration = span if duration is None else float(duration)
    if not 0.0 < duration <= span + 1e-9:
        raise MeasurementError(f"{data.path}: duration {duration:g} s is not within the data's {span:g} s")
    steps = int(np.floor(duration / dt + 1e-9))
    if steps < 1:
        raise ValueError(f"dt {dt:g} s is longer than the {duration:g} s of data fitted: no step to simulate")
    grid = data.resample(data.time[0] + dt * np.arange(steps + 1))
    coords = np.array([q_start[one_dof[j]] for j in joints])
    hinges = [int(types[one_dof[j]]) == JOINT_REVOLUTE for j in joints]
    dofs = np.array([qd_start[one_dof[j]] for j in joints])
    measured = np.stack([grid.channel("q", j) for j in joints], axis=1)
    body_names = {index: name for name, index in scene.bodies.items()}
    run = RobotRun(model, joints, coords, dofs, hinges, dt, steps, measured, np.zeros((steps, model.joint_dof_count)),
                   model.state(), body_names, worlds, {index: name for name, index in scene.joints.items()},
                   soft_contact)
    q, qd = run.state0.joint_q.numpy(), run.state0.joint_qd.numpy()
    q[run.world_rows(coords, len(q))] = np.tile(measured[0], worlds)
    measured_rates = data.names("qd")
    rates = [grid.channel("qd", j)[0] if j in measured_rates else (measured[1, i] - measured[0, i]) / dt
             for i, j in enumerate(joints)]
    qd[run.world_rows(dofs, len(qd))] = np.tile(rates, worlds)
    run.state0.joint_q.assign(q)
    run.state0.joint_qd.assign(qd)
    torques = [(run.world_rows([qd_start[one_dof[name]]], len(qd)), grid.channel("tau", name))
               for name in data.names("tau")]
    for rows, values in torques:
        run.joint_f[:, rows] = values[:steps, None]
    _measured_controls(run, scene, data, grid, qd_start)
    return run


def _measured_controls(run: RobotRun, scene, data: Trajectory, grid: Trajectory, qd_start: np.ndarray):
    """The ``ctrl:`` columns of ``data`` (``grid``: resampled) into ``run``: a motor's control
    times its gear added to its joint's forces, a position servo's (of gear 1) as its joint's
    target (``run.joint_target``), a tendon servo's held (``run.held``); and the position servos
    with a column on measured joints into ``run.servos``."""
    actuators = {a["name"]: a for a in scene.actuators}
    tendon_servos = {a["name"]: a for a in scene.tendon_actuators}
    data.require("ctrl", [*actuators, *tendon_servos], "actuator of the robot")
    joint_names = {index: name for name, index in scene.joints.items()}
    for name in data.names("ctrl"):
        if name in tendon_servos:
            run.held.append(_held_tendon_target(tendon_servos[name], grid.channel("ctrl", name)[:run.steps], data))
            continue
        actuator = actuators[name]
        if actuator["kind"] not in ("motor", "position"):
            raise MeasurementError(f"{data.path}: column 'ctrl:{name}': a {actuator['kind']} servo's control is not "
                                   "replayed (motors' and position servos' are)")
        if actuator["kind"] == "position" and actuator["gear"] != 1.0:
            raise MeasurementError(f"{data.path}: column 'ctrl:{name}': a position servo of gear {actuator['gear']:g} "
                                   "is not replayed (gear 1 only)")
        rows = run.world_rows([qd_start[actuator["joint"]]], len(run.state0.joint_qd))
        values = grid.channel("ctrl", name)[:run.steps, None]
        if actuator["kind"] == "motor":
            run.joint_f[:, rows] += actuator["gear"] * values
            continue
        if run.joint_target is None:
            run.joint_target = np.zeros_like(run.joint_f)
        run.joint_target[:, rows] = values
    commanded = set(data.names("ctrl"))
    blind = [a["name"] for a in scene.actuators if a["kind"] == "position" and a["name"] not in commanded]
    if blind and commanded:  # a file of torques only drives no servo: no warning then
        warnings.warn(f"{data.path}: no 'ctrl:' column for the position servo(s) {', '.join(blind)}: they hold a "
                      "target of 0 (MuJoCo's ctrl 0) and their gains are not fitted", stacklevel=3)
    measured = set(run.joints)
    run.servos = [(joint_names[a["joint"]], int(qd_start[a["joint"]])) for a in scene.actuators
                  if a["kind"] == "position" and a["name"] in commanded and joint_names.get(a["joint"]) in measured]


def _held_tendon_target(servo: dict, values: np.ndarray, data: Trajectory) -> tuple:
    """(Control field, index, target) of a tendon servo (``ImportedScene.tendon_actuators``)
    whose control ``values`` stay constant through the run (a gripper held open or closed)."""
    if np.ptp(values) > 0.0:
        raise MeasurementError(f"{data.path}: column 'ctrl:{servo['name']}': a tendon actuator's control that changes "
                               "during the run is not replayed (a constant one is)")
    target = servo["target_per_ctrl"] * float(values[0]) + servo["target_offset"]
    return ("coupling_target", servo["coupling"], target) if "coupling" in servo else ("tendon_target",
                                                                                      servo["tendon"], target)


def tracking_rollout(run: RobotRun, mode: str = "checkpoint") -> Rollout:
    """A rollout of ``run`` whose loss is the mean squared error (rad^2) of the measured
    joints' angles over steps 1..steps, one loss entry per world."""
    model, count = run.model, run.model.joint_coord_count
    measured = run.world_rows(run.coords, count)
    weights = np.zeros(count)
    weights[measured] = 1.0 / (run.steps * len(run.joints))
    weights = wp.array(weights, dtype=wp.float64, device=model.device)
    slots = run.coordinate_worlds()
    targets = []
    for k in range(run.steps + 1):
        q = np.zeros(count)
        q[measured] = np.tile(run.measured[k], run.worlds)
        targets.append(wp.array(q, dtype=wp.float64, device=model.device))

    def loss_fn(k, state, loss):
        if k > 0:
            joint_tracking_loss(state, targets[k], weights, loss=loss, slots=slots)

    return Rollout(run.solver(), run.steps, run.dt, loss_fn, control=run.controls, mode=mode,
                   loss_size=run.worlds)


def _mass_parameter(run: RobotRun) -> DerivedParameter:
    """The masses of every body with mass; inertias scale with them."""
    mass0, _, inertia0 = run.world0_inertials()
    bodies = np.flatnonzero(mass0 > 0.0)

    def build(masses):
        mass, inertia = mass0.copy(), inertia0.copy()
        mass[bodies] = masses
        inertia[bodies] *= (masses / mass0[bodies])[:, None, None]
        return {"model.body_mass": mass, "model.body_inertia": inertia}

    labels = tuple(f"{run.body_names.get(int(b), f'body{b}')}.mass" for b in bodies)
    return DerivedParameter("masses", mass0[bodies], build, labels=labels, units=("kg",) * len(bodies), log=True)


def _inertia_parameter(run: RobotRun) -> DerivedParameter:
    """Mass, centre of mass and inertia of every body with mass as its ten log-Cholesky
    coordinates; the unit of the lengths is the body's size (its largest exp(d))."""
    mass0, com0, inertia0 = run.world0_inertials()
    bodies = np.flatnonzero(mass0 > 0.0)
    names = [run.body_names.get(int(b), f"body{b}") for b in bodies]
    theta0 = [inertia.to_log_cholesky(mass0[b], com0[b], inertia0[b], name) for b, name in zip(bodies, names)]

    def build(theta):
        mass, com, rotational = mass0.copy(), com0.copy(), inertia0.copy()
        mass[bodies], com[bodies], rotational[bodies] = inertia.from_log_cholesky(np.reshape(theta, (-1, 10)))
        return {"model.body_mass": mass, "model.body_com": com, "model.body_inertia": rotational}

    scale = np.concatenate([[1.0] * 4 + [float(np.exp(t[1:4]).max())] * 6 for t in theta0])
    return DerivedParameter("inertia", np.concatenate(theta0), build,
                            labels=tuple(f"{name}.{c}" for name in names for c in inertia.COORDINATES),
                            units=inertia.UNITS * len(bodies), scale=scale)


def _contact_friction_parameters(run: RobotRun) -> list:
    """The sliding friction of every shape of world 0 on a body that has a contact pair, named
    after its body (and numbered where a body has several)."""
    model = run.model
    pairs = model.contact_pair.numpy().reshape(-1, 2)
    shape_body, mu = model.shape_body.numpy(), model.shape_mu.numpy()
    per_world = model.body_count // run.worlds
    shapes = [int(s) for s in np.unique(pairs) if 0 <= shape_body[s] < per_world]
    if not shapes:
        raise ValueError("contact_friction: no shape of the robot has a contact pair (none can touch anything)")
    bodies = [run.body_names.get(int(shape_body[s]), f"body{shape_body[s]}") for s in shapes]
    names = [f"{b}.mu" if bodies.count(b) == 1 else f"{b}.mu{bodies[:k].count(b)}" for k, b in enumerate(bodies)]
    return [Parameter("model.shape_mu", index=s, lower=0.0, name=name, unit="", scale=max(float(mu[s]), 0.1))
            for s, name in zip(shapes, names)]


def _servo_gain_parameters(run: RobotRun) -> list:
    """The position gain kp and velocity gain kv of every position servo on a measured joint
    (MuJoCo's position actuator: kp (ctrl - q) - kv qd), >= 0."""
    if not run.servos:
        raise ValueError("servo_gains: no position servo (MJCF <position>, or a <general> one of that law) with a "
                         f"'ctrl:' column acts on a measured joint ({', '.join(run.joints)})")
    hinge = dict(zip(run.joints, run.hinges))
    params = []
    for array, gain in (("joint_target_ke", "kp"), ("joint_target_kd", "kv")):
        values = getattr(run.model, array).numpy()
        params += [Parameter(f"model.{array}", index=dof, lower=0.0, name=f"{joint}.{gain}",
                             unit=UNITS[gain][hinge[joint]], scale=max(abs(float(values[dof])), TYPICAL[array]))
                   for joint, dof in run.servos]
    return params


def robot_parameters(run: RobotRun, families) -> list:
    """The declared parameters of ``families`` (see ``FAMILIES``) for ``run``."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise ValueError(f"unknown parameter famil{'ies' if len(unknown) > 1 else 'y'} {unknown or families}; "
                         f"choose from {', '.join(FAMILIES)}")
    if "masses" in families and "inertia" in families:
        raise ValueError("the families masses and inertia both set the bodies' masses: choose one (inertia fits "
                         "mass, centre of mass and inertia)")
    params = []
    for family in families:
        if family == "masses":
            params.append(_mass_parameter(run))
        elif family == "inertia":
            params.append(_inertia_parameter(run))
        elif family == "contact_friction":
            params += _contact_friction_parameters(run)
        elif family == "servo_gains":
            params += _servo_gain_parameters(run)
        elif family in ("damping", "armature", "friction", "stiffness"):
            field = f"joint_{family}"
            values = getattr(run.model, field).numpy()
            for joint, dof, hinge in zip(run.joints, run.dofs, run.hinges):
                params.append(Parameter(f"model.{field}", index=int(dof), lower=0.0, name=f"{joint}.{family}",
                                        unit=UNITS[family][hinge], scale=max(abs(float(values[dof])), TYPICAL[field])))
        else:
            for joint, coord, dof, hinge in zip(run.joints, run.coords, run.dofs, run.hinges):
                params.append(Parameter("state.joint_q", index=int(coord), scale=0.1, name=f"{joint}.q0",
                                        unit=UNITS["q0"][hinge]))
                params.append(Parameter("state.joint_qd", index=int(dof), scale=1.0, name=f"{joint}.qd0",
                                        unit=UNITS["qd0"][hinge]))
    return params


def robot_problem(run: RobotRun, families, mode: str = "checkpoint") -> Problem:
    """The Problem of fitting ``families`` of ``run``'s robot to its measured angles."""
    return Problem(tracking_rollout(run, mode), run.state0, robot_parameters(run, families), worlds=run.worlds)


class TrackingResiduals:
    """Residuals of ``families`` (``wpsim.opt.sysid.FAMILIES``) of a measured robot run.

    make_run: worlds -> a ``RobotRun`` of the run in that many worlds (e.g. a closure over
        ``import_robot`` and ``prepare_run``); called for 1 world (the residuals) and for
        ``batch`` worlds (the Jacobian).
    every: residuals at steps every, 2 every, ... (fewer rows, cheaper Jacobians).
    batch: worlds per adjoint Jacobian pass (at most the number of residuals).
    mode: the adjoint Jacobian rollout's ("full" or "checkpoint").
    jacobian: "differences" (default): every column of the Jacobian from one batched,
        unrecorded rollout in the model's float64 (n parameters): with ``differences``
        "forward" (default) n + 1 worlds, world 0 at x and world i + 1 with parameter i moved by
        ``DIFFERENCE_STEPS["forward"]`` of its scale (relative for log-space ones; towards the
        inside at a bound); "central": 2n + 1 worlds, worlds 2i + 1 and 2i + 2 moved up and
        down (a one-sided second-order formula where a bound is nearer than the step). Its
        cost does not grow with the residuals. "adjoint": rows from reverse-mode passes over blocks of ``batch``
        residuals as worlds (ceil(N / batch) forward + backward passes), exact to round-off.
    """

    def __init__(self, make_run, families, every: int = 1, batch: int = 64, mode: str = "full",
                 jacobian: str = "differences", differences: str = "forward"):
        if int(every) != every or every < 1:
            raise ValueError(f"every must be an integer >= 1, got {every}")
        if jacobian not in JACOBIANS:
            raise ValueError(f"unknown jacobian {jacobian!r}; expected one of {JACOBIANS}")
        if differences not in DIFFERENCES:
            raise ValueError(f"unknown differences {differences!r}; expected one of {DIFFERENCES}")
        self.differences = differences
        self.run: RobotRun = make_run(1)
        run = self.run
        self.steps = np.arange(every, run.steps + 1, every)
        if self.steps.size == 0:
            raise ValueError(f"every={every} leaves no residual in a run of {run.steps} steps")
        joints = len(run.joints)
        self.count = self.steps.size * joints
        self.weight = 1.0 / self.count
        self.families = list(families)
        self.params = ParameterSet(robot_parameters(run, self.families), {"model": run.model, "state": run.state0})
        self.batch = max(1, min(int(batch), self.count))
        self.jacobian_kind = jacobian
        self._replay = MeasuredReplay(run, threads=1)  # one world: one thread
        if jacobian == "adjoint":
            self._jacobian_problem(make_run(self.batch), every, mode)
        else:
            worlds = (2 if differences == "central" else 1) * self.params.size + 1
            wide = make_run(worlds)
            self._wide = MeasuredReplay(wide, None if worlds >= THREADED_WORLDS else 1)
            self._wide_params = ParameterSet(robot_parameters(wide, self.families),
                                             {"model": wide.model, "state": wide.state0}, worlds=worlds)
        self.rollouts = self.gradients = 0

    def _jacobian_problem(self, run: RobotRun, every: int, mode: str):
        """The B-world run, its seeds (one array per residual step) and the Problem whose
        per-world gradients are rows of the Jacobian."""
        model = run.model
        count = model.joint_coord_count
        self._coords = run.world_rows(run.coords, count).reshape(run.worlds, -1)  # (B, joints)
        self._seeds = [wp.zeros(count, dtype=wp.float64, device=model.device) for _ in self.steps]
        slots = run.coordinate_worlds()

        def loss_fn(k, state, loss):
            if k > 0 and k % every == 0:
                joint_state_loss(state, self._seeds[k // every - 1], None, loss, slots_q=slots)

        rollout = Rollout(run.solver(), run.steps, run.dt, loss_fn, control=run.controls, mode=mode,
                          loss_size=run.worlds)
        self._batch_problem = Problem(rollout, run.state0, robot_parameters(run, self.families),
                                      adjoint_growth_limit=None, worlds=run.worlds, warn_no_gradient=False)

    def values(self, x: np.ndarray) -> np.ndarray:
        """(N,) residuals (rad or m, weighted) at physical values x: rows step-major, the
        measured joints in order within a step (one unrecorded rollout)."""
        self.params.write(x)
        self.rollouts += 1
        simulated = self._replay.angles()[:, 0]
        return (np.sqrt(self.weight) * (simulated[self.steps] - self.run.measured[self.steps])).ravel()

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """(N, n) d residuals / d x at physical values x: by one batched rollout of n + 1 or
        2n + 1 worlds ("differences") or ceil(N / B) batched reverse-mode passes ("adjoint";
        the first one warns of parameters whose column is exactly zero)."""
        if self.jacobian_kind == "differences":
            return self._differences(np.asarray(x, dtype=np.float64))
        n, joints = self.params.size, len(self.run.joints)
        tiled = np.tile(np.asarray(x, dtype=np.float64), self.batch)
        rows = np.empty((self.count, n))
        for first in range(0, self.count, self.batch):
            block = np.arange(first, min(first + self.batch, self.count))
            seeds = np.zeros((self.steps.size, self._seeds[0].shape[0]))
            seeds[block // joints, self._coords[np.arange(block.size), block % joints]] = np.sqrt(self.weight)
            for array, values in zip(self._seeds, seeds):
                array.assign(values)
            grad = self._batch_problem.loss_and_grad(tiled)[1].reshape(self.batch, n)
            rows[block] = grad[: block.size]
            self.rollouts += 1
            self.gradients += 1
        dead = [label for label, column in zip(self.params.labels, rows.T) if not column.any()]
        if dead and self.gradients == -(-self.count // self.batch):  # the first Jacobian only
            warnings.warn(f"no gradient path to the residuals from {', '.join(dead)}: these parameters do not move "
                          "the measured joints (the data cannot determine them)", stacklevel=2)
        return rows

    def _differences(self, x: np.ndarray) -> np.ndarray:
        """The Jacobian at x by differences over the worlds of one rollout (see the class)."""
        params, n, central = self.params, self.params.size, self.differences == "central"
        step = DIFFERENCE_STEPS[self.differences] * np.where(params.log, np.abs(x), params.scale)
        # a step towards the inside where a bound is within it; central: one-sided second order there
        # (x, x + h, x + 2h with h of either sign)
        down = x - step < params.lower
        up = ~down & (x + step > params.upper)
        h = np.where(up, -step, step)
        one_sided = (down | up) if central else np.ones(n, dtype=bool)
        worlds = np.tile(x, (self._wide.run.worlds, 1))
        columns = np.arange(n)
        if central:
            worlds[2 * columns + 1, columns] += h
            worlds[2 * columns + 2, columns] += np.where(one_sided, 2.0 * h, -h)
        else:
            worlds[columns + 1, columns] += h
        self._wide_params.write(worlds.ravel())
        angles = self._wide.angles()[self.steps]  # (residual steps, worlds, joints)
        self.rollouts += 1
        r = np.sqrt(self.weight) * angles.transpose(1, 0, 2).reshape(len(worlds), -1)  # world -> rows
        if not central:
            return ((r[columns + 1] - r[0]) / h[:, None]).T
        plus, minus = r[2 * columns + 1], r[2 * columns + 2]
        centred = (plus - minus) / (2.0 * h[:, None])
        sided = (-3.0 * r[0] + 4.0 * plus - minus) / (2.0 * h[:, None])
        return np.where(one_sided[:, None], sided, centred).T


def identify(robot_file, data_file, families=("masses", "damping", "armature"), method: str | None = None,
             iterations: int = 60, duration: float | None = None, dt: float | None = None, zero_order: bool = False,
             mode: str = "checkpoint", progress: bool = True, device=None, starts: int = 1,
             residual_every: int = 1, batch: int = 64, jacobian: str = "differences", shooting: str = "auto",
             window: float | None = None) -> SysidResult:
    """Fit ``families`` of the robot in ``robot_file`` to the run in ``data_file`` (see the
    module docstring), or to several runs at once (a list of files: one set of parameters,
    every run replayed from its own first state with its own torques, their residuals stacked
    by ``wpsim.opt.several_runs.StackedResiduals``; least squares only, without
    ``initial_state``, ``starts`` or ``zero_order``, every run measuring the same joints), with ``method``: "least-squares" (the default with one start:
    Levenberg-Marquardt within the bounds, ``wpsim.opt.least_squares.projected_lm``, on the residuals every
    ``residual_every`` steps, their Jacobian by ``jacobian``: "differences", one batched
    rollout of n + 1 worlds, or "adjoint", rows ``batch`` at a time; see
    ``TrackingResiduals``) or one of ``wpsim.opt.minimize``'s (the default with several starts:
    "lbfgsb" on tape gradients). On the 9-parameter arm of ``wpsim bench --suite
    vs_mujoco_sysid`` least squares took 18 iterations and 0.45 CPU s where L-BFGS-B stopped at
    its 60-iteration cap after 31 s, with a worse fit. ``duration`` (s) uses the first part of
    the data (of each run) only; ``starts`` > 1 fits that many guesses (the declared one and
    random ones within the bounds) as worlds of one model and keeps the best
    (``wpsim.opt.multistart``; not with "least-squares"); ``zero_order`` also runs
    Nelder-Mead from the same start with the rollouts the gradient fit used; ``mode`` is the
    rollout's ("full" is faster for short runs, "checkpoint" keeps memory low for long
    ones). ``shooting`` ("auto", "single", "multiple"; least squares with the differences
    Jacobian): "multiple" fits windows of ``window`` s each replayed from the measured state
    (``wpsim.opt.shooting``; default window: ``shooting_window``'s, the shortest of the runs'), "auto" does so where
    ``shooting_window`` finds errors growing ``CHAOTIC_GROWTH``-fold within a run (a chaotic
    run) and ``initial_state`` is not fitted, and where one rollout of each whole run misses (a
    poor verdict) fits windows of ``FALLBACK_WINDOW_S`` from the start again, keeping them if
    their verdict is good (``result.missed`` the first fit). The fitted values stay in
    ``result.run.model`` (and in every ``result.runs[i].run.model``)."""

    from wpsim.io.measurements import load_trajectory
    from wpsim.io.robots import import_robot
    from wpsim.opt.least_squares import least_squares
    from wpsim.opt.minimize import METHODS, minimize
    from wpsim.opt.multistart import multistart
    from wpsim.opt.several_runs import StackedResiduals

    if method is None:
        method = "least-squares" if starts == 1 else "lbfgsb"
    if method not in (*METHODS, "least-squares"):
        raise ValueError(f"unknown method {method!r}; expected one of {(*METHODS, 'least-squares')}")
    if int(starts) != starts or starts < 1 or (starts > 1 and method == "least-squares"):
        raise ValueError(f"starts must be an integer >= 1 (1 with least-squares), got {starts}")
    files = [data_file] if isinstance(data_file, (str, os.PathLike)) else list(data_file)
    if not files:
        raise ValueError("no data file to fit to")
    families = list(families)
    if len(files) > 1:
        _check_several_runs(families, method, zero_order)
    datas = [load_trajectory(f) for f in files]

    def run_maker(data: Trajectory):
        def make_run(worlds: int = 1) -> RobotRun:
            builder, scene = import_robot(robot_file)
            return prepare_run(builder, scene, data, dt, duration, device, worlds,
                               soft_constraints=bool(set(SOFT_FAMILIES) & set(families)))

        return make_run

    makers = [run_maker(data) for data in datas]
    if jacobian not in JACOBIANS:
        raise ValueError(f"unknown jacobian {jacobian!r}; expected one of {JACOBIANS}")

    def residuals_of(make_run, window_steps: int | None):
        if window_steps is not None:  # a run shorter than the window is one window
            return ShootingResiduals(make_run, lambda run: robot_parameters(run, families), window_steps)
        if method == "least-squares":
            return TrackingResiduals(make_run, families, residual_every, batch, mode, jacobian)
        return None

    def fitted(window_steps: int | None) -> tuple:
        """(residuals or None, runs, replays before and after, fit, verdict) with windows of
        ``window_steps`` (None: one rollout of each whole run)."""
        parts = [residuals_of(make_run, window_steps) for make_run in makers]
        residuals = parts[0] if len(parts) == 1 else StackedResiduals(parts, [str(f) for f in files])
        runs = [makers[0]()] if residuals is None else [part.run for part in parts]
        before = [replay(run) for run in runs]
        if residuals is not None:
            fit = least_squares(residuals, iterations=iterations, progress=progress, method="lm")
        elif starts > 1:
            fit = multistart(robot_problem(makers[0](starts), families, mode), method=method, iterations=iterations,
                             progress=progress).best_fit()
            robot_problem(runs[0], families, mode).params.write(fit.x)  # the best world's values into the 1-world run
        else:
            fit = minimize(robot_problem(runs[0], families, mode), method, iterations=iterations, progress=progress)
        after = [replay(run) for run in runs]
        verdict = judge_fit(makers, families, fit, datas, runs, [a[0] for a in after], residuals, batch, mode,
                            jacobian)
        return runs, before, after, fit, verdict

    window_steps = _shooting_steps(makers, families, method, jacobian, shooting, window)
    runs, before, after, fit, verdict = fitted(window_steps)
    missed = None
    fallback = _fallback_window_steps(runs, families, method, jacobian, shooting, window_steps)
    if fallback is not None and not verdict.ok:  # one rollout of each whole run missed: windows, from the start again
        again = fitted(fallback)
        if again[4].ok:
            missed, window_steps = fit, fallback
            runs, before, after, fit, verdict = again
    baseline = None
    if zero_order:
        baseline = minimize(robot_problem(makers[0](), families, mode), "nelder-mead", iterations=100 * iterations,
                            max_rollouts=fit.rollouts, progress=progress)
    fitted_runs = [FittedRun(str(f), run, b[0], a[0], {"initial": b[1], "fitted": a[1]})
                   for f, run, b, a in zip(files, runs, before, after)]
    return SysidResult(str(robot_file), fitted_runs, families, fit, baseline, verdict,
                       None if window_steps is None else window_steps * runs[0].dt, missed)


def _check_several_runs(families, method: str, zero_order: bool):
    """Refuse what a fit to several runs does not do, saying why."""
    if method != "least-squares":
        raise ValueError(f"several runs are fitted by least squares only (method least-squares), not {method!r}")
    if "initial_state" in families:
        raise ValueError("initial_state with several runs: each run has its own first state; fit them with "
                         "shooting='multiple' (every window's starting state is fitted) instead")
    if zero_order:
        raise ValueError("the zero-order baseline fits one run; it is not run with several")


SHOOTING = ("auto", "single", "multiple")
"""``identify``'s choices of how the run is replayed in a fit."""


def _shooting_steps(makers, families, method: str, jacobian: str, shooting: str, window: float | None):
    """Steps per multiple-shooting window for ``identify`` (``makers``: each run's
    ``make_run``; the shortest of the runs' windows), or None for one rollout of each whole run."""
    if shooting not in SHOOTING:
        raise ValueError(f"unknown shooting {shooting!r}; expected one of {SHOOTING}")
    if window is not None and (not np.isfinite(window) or window <= 0.0):
        raise ValueError(f"window must be a positive time in s, got {window}")
    able = _windows_able(families, method, jacobian)
    if shooting == "single" or (shooting == "auto" and not able):
        return None
    if not able:
        raise ValueError("multiple shooting needs --method least-squares, --jacobian differences and no "
                         "initial_state family (each window starts from the measured state)")
    windows = []
    for make_run in makers:
        run = make_run(2)
        steps = shooting_window(run) if window is None else max(1, int(round(window / run.dt)))
        if window is not None and steps > run.steps:
            raise ValueError(f"window {window:g} s is longer than the {run.steps * run.dt:g} s fitted")
        if shooting == "multiple" or steps < run.steps:
            windows.append(steps)
    return min(windows) if windows else None


FALLBACK_WINDOW_S = 0.5
"""The windows (s) ``identify``'s "auto" fits when one rollout of the whole run missed: on the
friction-free arm of ``vs_mujoco_sysid`` from masses x0.5 and damping x0.3, where one rollout
stalls at 490 % error, 0.5 s windows recover every parameter within 2e-7 % (1 s: 4e-7 %)."""


def _fallback_window_steps(runs: list, families, method: str, jacobian: str, shooting: str,
                           window_steps: int | None) -> int | None:
    """Steps per window of ``identify``'s second try (``FALLBACK_WINDOW_S``) where "auto" fitted
    one rollout of each whole run (``runs``: their ``RobotRun``) and windows may be fitted
    (least squares, the differences Jacobian, no initial state), else None."""
    steps = max(1, int(round(FALLBACK_WINDOW_S / runs[0].dt)))
    able = _windows_able(families, method, jacobian)
    longest = max(run.steps for run in runs)
    return steps if shooting == "auto" and window_steps is None and able and steps < longest else None


def _windows_able(families, method: str, jacobian: str) -> bool:
    """Whether windows can be fitted: least squares with the differences Jacobian, the initial
    state not fitted (each window starts from the measured state)."""
    return method == "least-squares" and jacobian == "differences" and "initial_state" not in families


VERDICT_ROWS = 256
"""About how many residual rows the verdict's Jacobian takes (every k-th step, k chosen for
this many), when the fit itself used none."""


def judge_fit(makers, families, fit, datas: list, runs: list, simulated: list, residuals=None,
              batch: int = 64, mode: str = "checkpoint", jacobian: str = "differences"):
    """The ``wpsim.opt.verdict`` of ``fit`` to one or several runs (``makers``: each run's
    ``make_run``; ``datas``: its measurement; ``runs``: its ``RobotRun`` with the fitted
    values written; ``simulated``: its replay): the noise floor of the raw samples of the
    measured joints over the fitted spans (the runs' floors pooled by their samples), and the
    residual Jacobian at the fitted values (of ``residuals`` if the fit had them, else of
    residuals every k steps of the one run, ``VERDICT_ROWS`` rows or so)."""
    from wpsim.opt.several_runs import StackedResiduals
    from wpsim.opt.verdict import judge, noise_floor

    floors, samples = [], []
    for data, run, angles in zip(datas, runs, simulated):
        span = data.time <= data.time[0] + run.steps * run.dt + 1e-9
        floors.append(noise_floor(np.stack([data.channel("q", j)[span] for j in run.joints], axis=1)))
        samples.append(int(span.sum()))
    noise = float(np.sqrt(np.dot(np.square(floors), samples) / sum(samples)))
    if residuals is None:
        run = runs[0]
        every = max(1, int(np.ceil(run.steps * len(run.joints) / VERDICT_ROWS)))
        residuals = TrackingResiduals(makers[0], families, every, batch, mode, jacobian)
    x = np.asarray(fit.x, dtype=np.float64)
    r = residuals.values(x)
    first = residuals.parts[0] if isinstance(residuals, StackedResiduals) else residuals
    shooting = isinstance(first, ShootingResiduals)  # its windows' RMS: an open loop of a chaotic run diverges
    rms = float(np.sqrt(r @ r)) if shooting else pooled_rms(runs, simulated)
    return judge(residuals.params, x, r, residuals.jacobian(x), rms, noise, fit.message,
                 1 if shooting else int(first.steps[0]))
