"""Benchmark suite ``vs_mujoco``: wpsim against MuJoCo (CPU) on the robot files of ``assets/``.

The same MJCF file is imported with ``wpsim.io.mjcf.import_mjcf`` and loaded with
``mujoco.MjModel.from_xml_path``; both use the file's time step, start from the same pose
(the arm's hinges at 0.3 rad, the quadruped as in the file) and get zero controls
(the arm 0.1 N m in the gradient rollouts, see ``ROBOTS``). Three comparisons, each measured in one run
(best of ``repeats`` after a warm-up, the two sides' runs taking turns, ``best_times``):

- ``single``: steps/s of one world, ``solver.step`` (unrecorded, float32) against a Python
  loop of ``mujoco.mj_step``;
- ``worlds``: world-steps/s of W = 1, 64, 256, 1,024 worlds (quick: 1, 64), one wpsim model
  holding W replicated worlds stepped unrecorded, against ``mujoco.rollout.rollout`` of W
  rollouts on ``os.cpu_count()`` threads, the same step count on both sides;
- ``gradient``: the gradient of the loss sum(hinge joint positions^2) of the final state of a
  T-step rollout w.r.t. every control of every step of every world: a ``wp.Tape`` forward +
  backward over one model of W worlds against, per world, ``mujoco.mjd_transitionFD`` at every
  step (forward differences) chained backwards, lambda_t = A_t^T lambda_{t+1},
  grad u_t = B_t^T lambda_{t+1} (one thread). Controls: ``joint_f`` for motors (the arm),
  ``joint_target_q`` for position actuators (the quadruped), MuJoCo's ``ctrl`` for both.

``time_ratio`` records are always wpsim wall time / MuJoCo wall time for the same work
(below 1: wpsim is faster). Every record's params carry ``cores`` (``os.cpu_count()``), the
MuJoCo version and the device. Without ``mujoco`` the suite returns one record saying it was
skipped and why. wpsim steps robots as ``wpsim run`` does: contact and joint limits as soft
constraints (``SoftContactOptions()``, gradients by the implicit adjoint). The two simulators'
constraint models and integrators still differ (semi-implicit Euler against MuJoCo's Euler with
implicit damping), so the speeds compare like-sized work, not identical trajectories; the gradient records' params
carry ``grad_diff_vs_mujoco``, max |wpsim - MuJoCo| / max |MuJoCo| over world 0's gradient.
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
does (soft-constraint contact and joint limits, staged launches); ``fused``: penalty contact
and limit springs, the fused articulation step (``advance`` for unrecorded runs); ``staged``:
the same penalty model in the staged launches (on CUDA only: it measures where one thread per
articulation stops paying, ``CUDA_MAX_DOFS``). Each is compared with the MuJoCo run measured
beside it."""


def suite_config(quick: bool, cuda: bool = False) -> dict:
    """Horizons, repeats, and by variant the world counts of the speed comparisons
    (``worlds``) and of the gradient comparisons (``grad_worlds``). On CUDA the fused and
    staged steps go up to 16,384 worlds; the soft variant stops at 64 (its staged step reads
    each step's contact islands back to the host, so large batches measure that read-back)."""
    one_and_64 = {"fused": (1, 64), "soft": (1, 64)}
    if quick:
        return {"steps": 20, "worlds": one_and_64, "grad_steps": 10, "grad_worlds": one_and_64, "repeats": 1}
    if cuda:
        many = (1, 64, 4096, 16384)
        worlds = {"fused": many, "staged": many, "soft": (1, 64)}
    else:
        worlds = {"fused": (1, 64, 256, 1024), "soft": (1, 64, 256, 1024)}
    return {"steps": 200, "worlds": worlds, "grad_steps": 200, "grad_worlds": one_and_64, "repeats": 3}


# ---------------------------------------------------------------------------- both sides
class MujocoSide:
    """The MuJoCo model of one robot file, its start state and index maps."""

    def __init__(self, path: Path, hinge_start: float | None = None):
        import mujoco

        self.mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(path))
        self.data = mujoco.MjData(self.model)
        m = self.model
        hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        self.hinge_qpos = np.array([m.jnt_qposadr[j] for j in hinges], dtype=np.int64)
        self.hinge_dof = np.array([m.jnt_dofadr[j] for j in hinges], dtype=np.int64)
        self.actuated_dof = np.array([m.jnt_dofadr[m.actuator_trnid[a, 0]] for a in range(m.nu)], dtype=np.int64)
        self.kinds = ["motor" if m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE else "position"
                      for a in range(m.nu)]
        self.start_qpos = m.qpos0.copy()
        if hinge_start is not None:
            self.start_qpos[self.hinge_qpos] = hinge_start
        free = [m.jnt_qposadr[j] for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self.copied_qpos = np.concatenate([self.hinge_qpos, *[np.arange(a, a + 3) for a in free]]).astype(np.int64)
        """Coordinates wpsim takes from ``start_qpos``: hinge angles and free-joint positions."""
        self.dt = float(m.opt.timestep)

    def reset(self, data=None):
        data = self.data if data is None else data
        self.mj.mj_resetData(self.model, data)
        data.qpos[:] = self.start_qpos
        self.mj.mj_forward(self.model, data)
        return data

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
        control = np.zeros((worlds, steps, self.model.nu))
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
    """wpsim models of one robot file: ``worlds`` replicated worlds, float32."""

    def __init__(self, path: Path, mujoco_side: MujocoSide):
        from wpsim.io.mjcf import import_mjcf

        self.builder, self.scene = import_mjcf(path)
        self.dt = float(self.scene.timestep)
        self.mjs = mujoco_side
        kinds = {a["kind"] for a in self.scene.actuators}
        if len(kinds) != 1:
            raise ValueError(f"{path}: mixed actuator kinds {kinds}")
        self.control_field = {"motor": "joint_f", "position": "joint_target_q"}[kinds.pop()]

    def model(self, device, worlds: int, requires_grad: bool = False, dtype=wp.float32, variant: str = "soft"):
        """(model, solver) of ``worlds`` worlds; ``variant`` (see ``VARIANTS``) picks the contact
        model and step."""
        from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

        model = self.builder.replicated(worlds).finalize(device=device, requires_grad=requires_grad, dtype=dtype)
        nq, nv = model.joint_coord_count // worlds, model.joint_dof_count // worlds
        if (nq, nv) != (self.mjs.model.nq, self.mjs.model.nv):
            raise ValueError(f"wpsim has {nq} coordinates / {nv} dofs per world, MuJoCo {self.mjs.model.nq} / "
                             f"{self.mjs.model.nv}")
        q = model.joint_q.numpy().reshape(worlds, nq)
        q[:, self.mjs.copied_qpos] = self.mjs.start_qpos[self.mjs.copied_qpos]
        model.joint_q.assign(q.reshape(-1))
        if variant == "soft":
            return model, SemiImplicitSolver(model, soft_contact=SoftContactOptions())
        return model, SemiImplicitSolver(model, fused=variant == "fused")

    def step_runner(self, model, solver):
        """(run(n): n unrecorded steps from the start state -- one ``advance`` with the fused
        step --, launches of one step)."""
        from wpsim.bench.scene_speed import count_launches

        dt = self.dt

        def run(n: int):
            if solver.fused is not None:
                return solver.advance(model.state(requires_grad=False), None, dt, n)
            states = [model.state(requires_grad=False), model.state(requires_grad=False)]
            for _ in range(n):
                solver.step(states[0], states[1], None, dt)
                states.reverse()
            return states[0]

        run(2)
        a, b = model.state(requires_grad=False), model.state(requires_grad=False)
        return run, count_launches(lambda: solver.step(a, b, None, dt))

    def gradient_runner(self, model, solver, steps: int, controls: np.ndarray | None = None):
        """A function returning the (steps, worlds, nu) tape gradient of the final-state loss
        and the loss; ``controls`` (steps, nu) drive every world (default zeros)."""
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
            with tape:
                final = simulate(solver, state0, steps, self.dt, control=lambda k: controls[k])
                loss = joint_tracking_loss(final, target, weight)
            tape.backward(loss=loss)
            grad = forces.grad.numpy().reshape(steps, worlds, nv)[:, :, self.mjs.actuated_dof]
            return grad, float(loss.numpy()[0])

        return run


# ---------------------------------------------------------------------------- measurements
def _finite(state) -> bool:
    return bool(np.isfinite(state.joint_q.numpy()).all())


def measure_steps(ws: WpsimSide, device, worlds: int, steps: int, repeats: int, mujoco_run, variant: str) -> dict:
    """Best wall times of ``steps`` steps of ``worlds`` wpsim worlds and of ``mujoco_run()``."""
    model, solver = ws.model(device, worlds, variant=variant)
    run, launches = ws.step_runner(model, solver)
    (wp_s, mj_s), (final, _) = best_times([lambda: run(steps), mujoco_run], repeats, device)
    return {"wpsim_s": wp_s, "mujoco_s": mj_s, "launches": launches, "finite": _finite(final),
            "fused": solver.fused is not None}


def measure_gradient(ws: WpsimSide, mjs: MujocoSide, device, worlds: int, steps: int, repeats: int,
                     control: float, variant: str) -> dict:
    model, solver = ws.model(device, worlds, requires_grad=True, variant=variant)
    controls = np.full((steps, mjs.model.nu), control)
    run = ws.gradient_runner(model, solver, steps, controls)

    def mujoco_all():
        return [mjs.fd_chain_gradient(steps, controls) for _ in range(worlds)]

    (wp_s, mj_s), ((wp_grad, loss), mj_grads) = best_times([run, mujoco_all], repeats, device)
    mj_grad = mj_grads[0]  # the reference of one world
    scale = max(float(np.abs(mj_grad).max()), 1e-30)
    return {"wpsim_s": wp_s, "mujoco_s": mj_s, "loss": loss,
            "finite": bool(np.isfinite(wp_grad).all()),
            "max_abs_diff_over_max": float(np.abs(wp_grad[:, 0] - mj_grad).max() / scale),
            "worlds_agree": bool(np.allclose(wp_grad, wp_grad[:, :1], rtol=1e-3, atol=1e-6 * scale))}


# ---------------------------------------------------------------------------- the suite
def vs_mujoco_suite(device=None, quick: bool = False, robots: dict | None = None) -> list[dict]:
    """Suite ``vs_mujoco`` (see the module docstring); ``robots``: as ``ROBOTS`` (default: it)."""
    device = wp.get_device(device)
    try:
        import mujoco
        import mujoco.rollout  # noqa: F401
    except ImportError as error:
        progress(f"{SUITE}: skipped ({error})")
        return skipped_record(SUITE, device, f"mujoco is not installed ({error})")
    config = suite_config(quick, device.is_cuda)
    repeats = config["repeats"]
    records = []
    for case, (filename, hinge_start, control) in (ROBOTS if robots is None else robots).items():
        start = time.perf_counter()
        mjs = MujocoSide(ASSETS / filename, hinge_start)
        ws = WpsimSide(ASSETS / filename, mjs)
        base = {"robot": filename, "dt": ws.dt, "cores": os.cpu_count(), "mujoco": mujoco.__version__,
                "device": str(device), "precision": "float32", "repeats": repeats,
                "actuators": mjs.model.nu, "wpsim_control": ws.control_field}

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
            steps = config["grad_steps"]
            for worlds in config["grad_worlds"].get(variant, ()):
                found = measure_gradient(ws, mjs, device, worlds, steps, repeats, control, variant)
                common = {"worlds": worlds, "steps": steps, "wpsim_finite": found["finite"], "loss": found["loss"],
                          "grad_diff_vs_mujoco": found["max_abs_diff_over_max"], "worlds_agree": found["worlds_agree"],
                          "mujoco_threads": 1, "fd": "forward", "control": control}
                rec("wall_s", found["wpsim_s"], mode=f"{name}_tape", per_world_s=found["wpsim_s"] / worlds, **common)
                rec("wall_s", found["mujoco_s"], mode=f"mujoco_fd_chain vs {name}",
                    per_world_s=found["mujoco_s"] / worlds, **common)
                rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"gradient {name}/mujoco", **common)
                progress(f"{SUITE}/{case} gradient W={worlds} T={steps}: {name} tape {found['wpsim_s'] * 1e3:.1f} "
                         f"ms, FD chain {found['mujoco_s'] * 1e3:.1f} ms (diff {found['max_abs_diff_over_max']:.2g})")
        progress(f"{SUITE}/{case}: {time.perf_counter() - start:.1f} s")
    return records
