"""Benchmark suite ``vs_newton``: wpsim against NVIDIA Newton (same Warp, CPU) on like scenes.

Every scene is stepped by both simulators from the same start state, with the same size, time
step and horizon, unrecorded and in float32; each side's steps/s is the best of ``repeats``
timed runs of ``steps`` steps after a warm-up run (kernel loading), the two sides' runs taking
turns (``best_times``), so that the machine's speed changes during the comparison reach both.
Scenes (quick: 64 particles, an 8x8 cloth, a 3x3x3-cell block, 10 steps):

- ``particles``: 1,000 particles (10 g, radius 2 cm) dropped in a loose column onto the ground
  (``scene_library.particles_on_ground``), with particle-particle contact, dt = 1 ms;
- ``cloth``: a 1 m x 1 m cloth of 32x32 cells (0.5 kg/m^2) released unstretched in the x-z
  plane, hanging from its two top corners (``pinned_cloth``): membrane triangles and bending
  hinges, no contact, dt = 0.5 ms (at 1 ms it blows up on both sides);
- ``soft_block``: a 10x10x10-cell Neo-Hookean block (6,000 tets, E = 50 kPa, nu = 0.3,
  1000 kg/m^3) resting on the ground (``scene_library.soft_block`` released from one particle
  radius), dt = 0.2 ms;
- ``arm_7`` and ``quadruped_12``: ``assets/arm_7link.xml`` (hinges at 0.3 rad) and
  ``assets/quadruped.xml`` (the file's pose) at the file's time step, zero controls.

wpsim steps the first three with ``SemiImplicitSolver(model)`` and the robots with
``SemiImplicitSolver(model, fused=True)`` (penalty contact and limit springs, one ``advance``
launch for all steps, see ``vs_mujoco``'s ``fused`` variant). Newton 1.8 steps the first three
with ``SolverSemiImplicit`` and the robots, imported with ``ModelBuilder.add_mjcf``, with
``SolverFeatherstone``; a Newton step is ``state.clear_forces()``, ``CollisionPipeline.collide``
(scenes with shapes) and ``solver.step``, as its examples do. The Newton particle scenes are
built from the wpsim builder's own tables (``newton_particle_model``), so positions, masses,
radii, elements and their rest shapes are the same. What still differs:

- contact: both use penalty springs with the same ke (N/m), kd (N s/m) and mu (Newton's
  particle-shape values are the mean of ``Model.soft_contact_*`` and the shape's, both set to
  wpsim's). wpsim's damping ramps in over the first 1 mm of penetration and its Coulomb
  friction is smoothed below 1 cm/s; Newton's friction is min(kf |v_t|, mu f_n), with kf set to
  mu m g / 1 cm/s (the slope wpsim's friction has for the mean particle's weight). Newton finds
  particle-ground contacts in its collision pipeline (1 cm detection gap), wpsim in its step;
  particle pairs by a hash grid on both sides (wpsim at most 16 neighbours per particle);
- cloth: the membrane energies are the same (Newton's ``tri_ke``, ``tri_ka`` = wpsim's mu,
  lambda); Newton damps dF/dt and the area rate, wpsim the Green strain rate; bending has the
  same ke, kd but Newton's discrete-shell force scales with the edge length. Newton's
  triangle-particle self-contact (``enable_tri_contact``) is off, as wpsim has none;
- soft block: both stable Neo-Hookean with the same Lame parameters and kd = 5 Pa s, in
  different forms: wpsim mu/2 (I_C - 3) + (lambda + mu)/2 (J - alpha)^2, Newton (Smith et al.
  2018) mu F (1 - 1/(I_C + 1)) + lambda (J - alpha); Newton's particle hash grid is off (the
  scene has no particle contact, as in wpsim);
- robots: Newton's importer gives its own shape materials; ke, kd and mu are set to wpsim's
  (1e4 N/m, 100 N s/m, 1), kf stays Newton's 1e3 N s/m. Contact within the articulation is
  filtered on both sides (Newton: one filter pair per two body shapes; its
  ``enable_self_collisions=False`` would filter the file's ground plane too). Joint damping,
  limit stiffness (1e4 N m/rad) and the quadruped's position gains (200 N m/rad) come from the
  file on both sides; the limit damping is the file's 10 N m s/rad in wpsim and
  ``NEWTON_LIMIT_KD`` = 1 N m s/rad in Newton (10 blows its quadruped up at touch-down).
  wpsim's joint-space solve treats joint damping, drive and limit springs and contact damping
  and friction linearly implicitly, in one fused launch; Newton's Featherstone applies them as
  explicit forces and builds and factors the joint-space mass matrix in several launches per
  step, and its collision pipeline runs every step (shape-ground pairs, 10 cm detection gap).

Records per scene: ``steps_per_s`` (modes ``wpsim`` and ``newton``), ``time_ratio`` (mode
``wpsim/newton``): wpsim steps/s / Newton steps/s (above 1: wpsim is faster), and
``launches_per_step`` of both sides (kernel launches of one step, wpsim's as ``advance`` takes
it: with the element forces split over threads, one launch per element kind and thread;
counted as in ``scene_speed.count_launches``). wpsim's fused robot step is one launch, and
``advance`` runs all ``steps`` steps in one launch, which is most of its lead on the robots. Params also carry
``final_max_abs_diff``: the largest difference between the two sides' final particle positions
(m) or joint coordinates (m or rad) (the particle pile is chaotic; the other scenes end within
a few mm), ``cores``, the Newton version, both solvers and whether each side's final state is
finite. Without ``newton`` the suite returns one record saying it was skipped and why.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import warp as wp

from wpsim.bench.records import best_times, progress, record, skipped_record
from wpsim.core.builder import ModelBuilder
from wpsim.core.geometry import grid_points, grid_triangles
from wpsim.kernels.enums import JOINT_REVOLUTE, SHAPE_PLANE
from wpsim.tasks import scene_library

SUITE = "vs_newton"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
ROBOTS = {"arm_7": ("arm_7link.xml", 0.3), "quadruped_12": ("quadruped.xml", None)}
"""Case name -> (MJCF file in ``assets/``, start angle (rad) of every hinge; None: the file's pose)."""
PARTICLE_DT = {"particles": 1.0e-3, "cloth": 5.0e-4, "soft_block": 2.0e-4}
"""Time step (s) of each particle scene, the one its builder documents as stable."""
NEWTON_LIMIT_KD = 1.0
"""Largest joint-limit damping (N m s/rad) Newton's robots get: Featherstone applies it explicitly,
and the files' 10 N m s/rad makes the quadruped's shins blow up at touch-down (kd dt / I > 2)."""
GRAVITY = 9.81
"""Magnitude (m/s^2) of the gravity used for Newton's friction slope kf (see the module docstring)."""


def suite_config(quick: bool) -> dict:
    """Scene sizes, horizon (steps) and repeats of a suite run."""
    if quick:
        return {"particles": 64, "cloth": 8, "cells": 3, "steps": 10, "repeats": 1}
    return {"particles": 1000, "cloth": 32, "cells": 10, "steps": 500, "repeats": 5}


# ---------------------------------------------------------------------------- scenes
def pinned_cloth(dim: int = 32, size: float = 1.0, height: float = 1.0) -> ModelBuilder:
    """A ``size`` x ``size`` (m) cloth of dim x dim cells hanging in the x-z plane from its two top
    corners at ``height`` (m) (0.5 kg/m^2, mu = lambda = 50 N/m). Stable at dt = 5e-4 s (dim = 32;
    at 1e-3 s the corners' strain makes it blow up within 0.3 s)."""
    cell = size / dim
    grid = grid_points((dim + 1, dim + 1), (cell, cell))
    x = np.stack([grid[:, 0], np.zeros(len(grid)), height - grid[:, 1]], axis=1)
    b = ModelBuilder()
    b.add_cloth_mesh(x, grid_triangles(dim, dim), density=0.5, tri_mu=50.0, tri_lambda=50.0, tri_kd=0.01,
                     bend_ke=1.0e-4, bend_kd=1.0e-6, radius=0.2 * cell, fixed=[0, dim])
    return b


def particle_scenes(config: dict) -> dict:
    """Case name -> (wpsim builder, dt (s)) of the particle scenes at ``config``'s sizes."""
    cells = config["cells"]
    builders = {
        "particles": scene_library.particles_on_ground(config["particles"]),
        "cloth": pinned_cloth(config["cloth"]),
        "soft_block": scene_library.soft_block(cells, height=0.25 * 0.02),  # bottom particles touch the ground
    }
    return {name: (b, PARTICLE_DT[name]) for name, b in builders.items()}


# ---------------------------------------------------------------------------- Newton side
def _ground(b: ModelBuilder) -> dict | None:
    """The ground plane's height (m), ke, kd and mu, or None; other shapes are refused."""
    kinds = b.shapes.array("shape_kind")
    if len(kinds) == 0:
        return None
    if len(kinds) > 1 or int(kinds[0]) != int(SHAPE_PLANE) or b.up_axis != 2:
        raise ValueError("newton_particle_model: only one z-up ground plane is supported")
    pose = b.shapes.array("shape_transform")[0]
    return {"height": float(pose[2]), "ke": float(b.shapes.array("shape_ke")[0]),
            "kd": float(b.shapes.array("shape_kd")[0]), "mu": float(b.shapes.array("shape_mu")[0])}


def newton_particle_model(b: ModelBuilder, device):
    """A Newton model of ``b``'s particles, triangles, hinges, tets and ground plane, with the
    same values (see the module docstring for the contact parameters)."""
    import newton

    gravity = np.asarray(b.up_vector) * b.gravity if np.ndim(b.gravity) == 0 else np.asarray(b.gravity)
    nb = newton.ModelBuilder(gravity=tuple(gravity))
    mass = b.particles.array("particle_mass")
    nb.add_particles(pos=b.particles.array("particle_q").tolist(), vel=b.particles.array("particle_qd").tolist(),
                     mass=mass.tolist(), radius=b.particles.array("particle_radius").tolist())
    tri = b.triangles.array("tri_indices")
    if len(tri):
        nb.add_triangles(tri[:, 0], tri[:, 1], tri[:, 2], tri_ke=b.triangles.array("tri_mu").tolist(),
                         tri_ka=b.triangles.array("tri_lambda").tolist(), tri_kd=b.triangles.array("tri_kd").tolist(),
                         tri_drag=[0.0] * len(tri), tri_lift=[0.0] * len(tri))
    hinge = b.hinges.array("bend_indices")
    if len(hinge):
        nb.add_edges(hinge[:, 0], hinge[:, 1], hinge[:, 2], hinge[:, 3], rest=b.hinges.array("bend_rest_angle"),
                     edge_ke=b.hinges.array("bend_ke"), edge_kd=b.hinges.array("bend_kd"))
    for (i, j, k, l), mu, lam, kd in zip(b.tetrahedra.array("tet_indices"), b.tetrahedra.array("tet_mu"),
                                         b.tetrahedra.array("tet_lambda"), b.tetrahedra.array("tet_kd")):
        nb.add_tetrahedron(int(i), int(j), int(k), int(l), k_mu=float(mu), k_lambda=float(lam), k_damp=float(kd))
    ground = _ground(b)
    moving = mass[mass > 0]
    if ground is not None:
        kf = ground["mu"] * float(moving.mean()) * GRAVITY / b.friction_smoothing
        cfg = newton.ModelBuilder.ShapeConfig(ke=ground["ke"], kd=ground["kd"], kf=kf, mu=ground["mu"])
        nb.add_ground_plane(height=ground["height"], cfg=cfg)
    model = nb.finalize(device=device)
    if ground is not None:
        model.soft_contact_ke, model.soft_contact_kd = ground["ke"], ground["kd"]
        model.soft_contact_kf, model.soft_contact_mu = kf, ground["mu"]
    if b.particle_contact:
        model.particle_ke, model.particle_kd, model.particle_mu = b.pair_ke, b.pair_kd, b.pair_mu
        model.particle_kf = b.pair_mu * float(moving.mean()) * GRAVITY / b.friction_smoothing
    else:
        model.particle_grid = None  # no particle-particle contact, as in wpsim
    return model


def newton_robot_model(path: Path, hinge_start: float | None, wpsim_builder: ModelBuilder, device):
    """A Newton model of the MJCF file ``path`` (``add_mjcf``): its shapes' ke, kd, mu set to wpsim's,
    no contact within the articulation, limit damping at most ``NEWTON_LIMIT_KD``, every hinge at
    ``hinge_start`` (rad; None: the file's pose)."""
    import newton

    nb = newton.ModelBuilder()
    nb.add_mjcf(str(path))  # its enable_self_collisions=False would also filter the file's ground plane
    on_bodies = [shape for shape in range(nb.shape_count) if nb.shape_body[shape] >= 0]
    for a, shape in enumerate(on_bodies):  # as wpsim: no contact within an articulation
        for other in on_bodies[a + 1:]:
            nb.add_shape_collision_filter_pair(shape, other)
    for name in ("ke", "kd", "mu"):
        values = np.unique(wpsim_builder.shapes.array(f"shape_{name}"))
        if len(values) != 1:
            raise ValueError(f"{path.name}: shapes with different {name} {values}")
        getattr(nb, f"shape_material_{name}")[:] = [float(values[0])] * nb.shape_count
    nb.joint_limit_kd[:] = [min(kd, NEWTON_LIMIT_KD) for kd in nb.joint_limit_kd]
    if hinge_start is not None:
        for joint, kind in enumerate(nb.joint_type):
            if kind == newton.JointType.REVOLUTE:
                nb.joint_q[nb.joint_q_start[joint]] = hinge_start
    return nb.finalize(device=device)


class NewtonRunner:
    """Unrecorded Newton steps of one model from its start state: clear forces, collide (when
    the model has shapes), ``solver.step``; ``run(n)`` returns the final state."""

    def __init__(self, model, solver, dt: float):
        import newton

        self.model, self.solver, self.dt = model, solver, dt
        self.start = model.state()
        if model.joint_count:
            newton.eval_fk(model, model.joint_q, model.joint_qd, self.start)
        self.states = [model.state(), model.state()]
        self.control = model.control()
        self.pipeline = newton.CollisionPipeline(model) if model.shape_count else None
        self.contacts = self.pipeline.contacts() if self.pipeline else None

    def step(self, state_in, state_out):
        """One step from ``state_in`` into ``state_out``."""
        state_in.clear_forces()
        if self.pipeline is not None:
            self.pipeline.collide(state_in, self.contacts)
        self.solver.step(state_in, state_out, self.control, self.contacts, self.dt)

    def run(self, n: int):
        """``n`` steps from the start state."""
        a, b = self.states
        a.assign(self.start)
        for _ in range(n):
            self.step(a, b)
            a, b = b, a
        return a


# ---------------------------------------------------------------------------- wpsim side
class WpsimRunner:
    """Unrecorded wpsim steps of one model from its start state with ``solver.advance``."""

    def __init__(self, model, solver, dt: float):
        self.model, self.solver, self.dt = model, solver, dt
        self.start = model.state(requires_grad=False)
        self.state = model.state(requires_grad=False)

    def run(self, n: int):
        """``n`` steps from the start state (one launch with the fused articulation step)."""
        self.state.assign(self.start)
        return self.solver.advance(self.state, None, self.dt, n)

    def launches(self) -> int:
        """Kernel launches of one step as ``run`` takes it (``advance`` of one step)."""
        from wpsim.bench.scene_speed import count_launches

        state = self.model.state(requires_grad=False)
        return count_launches(lambda: self.solver.advance(state, None, self.dt, 1))


def wpsim_robot_model(path: Path, hinge_start: float | None, device):
    """(wpsim builder, model with every hinge at ``hinge_start`` rad, time step s) of an MJCF file."""
    from wpsim.io.mjcf import import_mjcf

    builder, scene = import_mjcf(path)
    model = builder.finalize(device=device)
    if hinge_start is not None:
        q = model.joint_q.numpy()
        q[model.joint_q_start.numpy()[model.joint_type.numpy() == int(JOINT_REVOLUTE)]] = hinge_start
        model.joint_q.assign(q)
    return builder, model, float(scene.timestep)


# ---------------------------------------------------------------------------- measurements
def _finite(*arrays) -> bool:
    return all(bool(np.isfinite(a.numpy()).all()) for a in arrays if a is not None and a.size)


def compare(wps: WpsimRunner, nwt: NewtonRunner, steps: int, repeats: int, device) -> dict:
    """Both sides' best times of ``steps`` steps, launches per step, finiteness and the largest
    difference of their final particle positions (m; robots: joint coordinates, m or rad)."""
    from wpsim.bench.scene_speed import count_launches

    (wp_s, nw_s), (wp_final, nw_final) = best_times([lambda: wps.run(steps), lambda: nwt.run(steps)], repeats,
                                                    device)
    wp_q = wp_final.particle_q if wps.model.particle_count else wp_final.joint_q
    nw_q = nw_final.particle_q if wps.model.particle_count else nw_final.joint_q
    diff = float(np.abs(wp_q.numpy() - nw_q.numpy()).max())
    a, b = nwt.states
    return {"wpsim_s": wp_s, "newton_s": nw_s, "final_max_abs_diff": diff, "wpsim_launches": wps.launches(),
            "newton_launches": count_launches(lambda: nwt.step(a, b)),
            "wpsim_finite": _finite(wp_final.particle_q, wp_final.joint_q),
            "newton_finite": _finite(nw_final.particle_q, nw_final.joint_q)}


# ---------------------------------------------------------------------------- the suite
def _records(case: str, found: dict, steps: int, params: dict) -> list[dict]:
    """The records of one compared scene."""
    base = {**params, "steps": steps, "wpsim_finite": found["wpsim_finite"], "newton_finite": found["newton_finite"],
            "final_max_abs_diff": found["final_max_abs_diff"]}
    return [
        record(SUITE, case, {**base, "mode": "wpsim"}, "steps_per_s", steps / found["wpsim_s"]),
        record(SUITE, case, {**base, "mode": "newton"}, "steps_per_s", steps / found["newton_s"]),
        record(SUITE, case, {**base, "mode": "wpsim/newton"}, "time_ratio", found["newton_s"] / found["wpsim_s"]),
        record(SUITE, case, {**base, "mode": "wpsim"}, "launches_per_step", found["wpsim_launches"]),
        record(SUITE, case, {**base, "mode": "newton"}, "launches_per_step", found["newton_launches"]),
    ]


def vs_newton_suite(device=None, quick: bool = False) -> list[dict]:
    """Suite ``vs_newton`` (see the module docstring)."""
    device = wp.get_device(device)
    try:
        import newton
    except ImportError as error:
        progress(f"{SUITE}: skipped ({error})")
        return skipped_record(SUITE, device, f"newton is not installed ({error})")
    from wpsim.solvers import SemiImplicitSolver

    config = suite_config(quick)
    steps, repeats = config["steps"], config["repeats"]
    common = {"cores": os.cpu_count(), "newton": newton.__version__, "device": str(device), "precision": "float32",
              "repeats": repeats}
    records = []

    def report(case, found, params, start):
        records.extend(_records(case, found, steps, {**common, **params}))
        progress(f"{SUITE}/{case}: wpsim {steps / found['wpsim_s']:.0f} steps/s, newton "
                 f"{steps / found['newton_s']:.0f} steps/s, ratio {found['newton_s'] / found['wpsim_s']:.2f} "
                 f"({time.perf_counter() - start:.1f} s)")

    for case, (builder, dt) in particle_scenes(config).items():
        start = time.perf_counter()
        model = builder.finalize(device=device)
        nmodel = newton_particle_model(builder, device)
        wps = WpsimRunner(model, SemiImplicitSolver(model), dt)
        nwt = NewtonRunner(nmodel, newton.solvers.SolverSemiImplicit(nmodel, enable_tri_contact=False), dt)
        found = compare(wps, nwt, steps, repeats, device)
        params = {"particles": model.particle_count, "triangles": model.tri_count, "tets": model.tet_count,
                  "particle_contact": bool(builder.particle_contact), "dt": dt,
                  "wpsim_solver": "SemiImplicitSolver", "newton_solver": "SolverSemiImplicit"}
        report(case, found, params, start)
    for case, (filename, hinge_start) in ROBOTS.items():
        start = time.perf_counter()
        builder, model, dt = wpsim_robot_model(ASSETS / filename, hinge_start, device)
        nmodel = newton_robot_model(ASSETS / filename, hinge_start, builder, device)
        if (nmodel.joint_coord_count, nmodel.joint_dof_count) != (model.joint_coord_count, model.joint_dof_count):
            raise ValueError(f"{filename}: Newton has {nmodel.joint_coord_count} coordinates / {nmodel.joint_dof_count}"
                             f" dofs, wpsim {model.joint_coord_count} / {model.joint_dof_count}")
        wps = WpsimRunner(model, SemiImplicitSolver(model, fused=True), dt)
        nwt = NewtonRunner(nmodel, newton.solvers.SolverFeatherstone(nmodel), dt)
        found = compare(wps, nwt, steps, repeats, device)
        params = {"robot": filename, "bodies": model.body_count, "joint_dofs": model.joint_dof_count, "worlds": 1,
                  "dt": dt, "hinge_start": hinge_start, "wpsim_solver": "SemiImplicitSolver(fused=True)",
                  "newton_solver": "SolverFeatherstone"}
        report(case, found, params, start)
    return records
