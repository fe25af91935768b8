"""Forward simulation: a cloth falls onto a sphere, drapes over it and settles on the ground.

A 1.2 m x 1.2 m cloth (0.5 kg/m^2, membrane moduli 20 N/m, weak bending) is released flat
0.15 m above the top of a sphere of radius 0.25 m that rests on the ground. It falls, wraps over the
sphere, and its corners fold down onto the ground. Contact with the sphere and the ground is
compliant with Coulomb friction; light air drag (1.5 N s/m per m^2 of cloth) lets it come to
rest. Self-collision is not modelled. The run is forward only (no tape), stepping two
States in turn.

Writes drape.png (3D view of the settled cloth over the sphere; kinetic energy over time),
drape.usd (the cloth, the sphere and the ground, 50 frames per second) and result.json with the drape checks that ``--test`` asserts: the cloth on top of the
sphere rests on its surface, nothing penetrates it by more than 3 mm, some of the cloth
lies on the ground, the simulation is healthy and the kinetic energy has died down.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim import ModelBuilder, SemiImplicitSolver
from wpsim.apps.console import example_main
from wpsim.diff import diagnostics
from wpsim.io.files import write_json
from wpsim.io.plots import save_figure
from wpsim.io.progress import progress_line
from wpsim.io.usd_export import UsdRecorder
from wpsim.io.usd_render import render_strip

SPHERE_CENTRE, SPHERE_RADIUS = np.array([0.0, 0.0, 0.25]), 0.25  # m
CLOTH_SIZE, DROP_HEIGHT, DENSITY = 1.2, 0.65, 0.5  # m, m, kg/m^2
MEMBRANE_MU = MEMBRANE_LAMBDA = 20.0  # N/m
MEMBRANE_KD = 0.01  # N s/m
CONTACT_KE, CONTACT_KD, CONTACT_MU = 100.0, 0.05, 0.3  # N/m, N s/m, -
AIR_DRAG = 1.5  # N s/m per m^2 of cloth
RADIUS = 0.008  # m, contact radius of the cloth vertices
SURFACE_TOLERANCE = 0.002  # m, how far above the sphere a vertex "resting" on it may be
MAX_PENETRATION = 0.003  # m
MAX_KINETIC_ENERGY = 1e-4  # J: mean speed below 2 cm/s for the 0.72 kg cloth
USD_FPS = 50.0  # frames per second of drape.usd


@dataclass
class DrapeConfig:
    """Settings of the drape simulation."""

    cells: int = 32  # per side
    duration_s: float = 4.0
    dt: float = 1e-3
    report_every_s: float = 0.5

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return int(round(self.duration_s / self.dt))


def build(config: DrapeConfig, device=None):
    """The sphere, the ground and the cloth as a finalized Model (with air drag)."""
    builder = ModelBuilder()
    contact = dict(ke=CONTACT_KE, kd=CONTACT_KD, mu=CONTACT_MU)
    builder.add_ground_plane(**contact)
    builder.add_shape_sphere(pos=tuple(SPHERE_CENTRE), radius=SPHERE_RADIUS, **contact)
    cell = CLOTH_SIZE / config.cells
    corner = (-0.5 * CLOTH_SIZE, -0.5 * CLOTH_SIZE, DROP_HEIGHT)
    builder.add_cloth_grid(pos=corner, dim_x=config.cells, dim_y=config.cells, cell_x=cell, cell_y=cell,
                           density=DENSITY, tri_mu=MEMBRANE_MU, tri_lambda=MEMBRANE_LAMBDA, tri_kd=MEMBRANE_KD,
                           bend_ke=1e-4, bend_kd=1e-6, radius=RADIUS)
    model = builder.finalize(device=device)
    # drag proportional to the area each vertex stands for (its mass / areal density)
    model.particle_drag.assign(model.particle_mass.numpy() / DENSITY * AIR_DRAG)
    return model


def check_time_step(model, dt: float):
    """Print the explicit-step stability margins for the lightest (corner) vertex.

    Its fastest mode combines membrane stiffness ~ lambda + 2 mu (N/m) with the contact
    stiffness ke: omega^2 ~ (lambda + 2 mu + ke) / m_min, and dt * omega must stay below 2;
    the dampers (contact kd, membrane kd, air drag) must satisfy kd dt / m_min < 2.
    """
    mass = model.particle_mass.numpy()
    m_min = float(mass.min())
    omega = np.sqrt((MEMBRANE_LAMBDA + 2.0 * MEMBRANE_MU + CONTACT_KE) / m_min)
    damping = (CONTACT_KD + MEMBRANE_KD) * dt / m_min + AIR_DRAG / DENSITY * dt
    print(f"{len(mass)} vertices, lightest {m_min * 1e3:.3f} g; dt = {dt * 1e3:.1f} ms: dt*omega_max = "
          f"{dt * omega:.2f} (< 2), kd*dt/m = {damping:.2f} (< 2)")


def drape_checks(model, state) -> dict:
    """Contact and rest measures of the settled cloth (m, J) and whether each passes."""
    x = state.particle_q.numpy().astype(np.float64)
    surface_gap = np.linalg.norm(x - SPHERE_CENTRE, axis=1) - SPHERE_RADIUS - RADIUS  # < 0: penetration
    above = (np.linalg.norm(x[:, :2] - SPHERE_CENTRE[:2], axis=1) < 0.7 * SPHERE_RADIUS) & (x[:, 2] > SPHERE_CENTRE[2])
    kinetic = float(diagnostics.energy_report(model, state)["kinetic"][0])
    checks = {
        "vertices_above_sphere": int(above.sum()),
        "largest_lift_above_sphere_m": float(surface_gap[above].max()) if above.any() else np.inf,
        "max_penetration_m": float(max(-surface_gap.min(), 0.0)),
        "vertices_on_ground": int((x[:, 2] < RADIUS + SURFACE_TOLERANCE).sum()),
        "kinetic_energy_j": kinetic,
    }
    lift = checks["largest_lift_above_sphere_m"]
    checks["rests_on_sphere"] = checks["vertices_above_sphere"] > 0 and lift < SURFACE_TOLERANCE
    checks["no_penetration"] = checks["max_penetration_m"] < MAX_PENETRATION
    checks["reaches_ground"] = checks["vertices_on_ground"] > 0
    checks["at_rest"] = kinetic < MAX_KINETIC_ENERGY
    return checks


def run(config: DrapeConfig, out_dir, device=None) -> dict:
    """Simulate, check the drape, write drape.png and result.json into out_dir; return the result."""
    model = build(config, device)
    check_time_step(model, config.dt)
    solver = SemiImplicitSolver(model)
    state, scratch = model.state(), model.state()
    every = int(round(config.report_every_s / config.dt))
    frame_every = int(round(1.0 / (USD_FPS * config.dt)))
    recorder = UsdRecorder(model, fps=1.0 / (frame_every * config.dt))
    recorder.record(state)
    times, energies = [0.0], [float(diagnostics.energy_report(model, state)["kinetic"][0])]
    for k in range(1, config.steps + 1):
        solver.step(state, scratch, None, config.dt)
        state, scratch = scratch, state
        if k % frame_every == 0:
            recorder.record(state)
        if k % 10 == 0:
            times.append(k * config.dt)
            energies.append(float(diagnostics.energy_report(model, state)["kinetic"][0]))
        if k % every == 0:
            lowest = state.particle_q.numpy()[:, 2].min()
            progress_line(k // every, config.steps // every, f"t = {k * config.dt:.2f} s   kinetic energy "
                          f"{energies[-1]:.2e} J   lowest vertex z = {lowest:.3f} m")
    health = solver.health()
    checks = drape_checks(model, state)
    result = {"config": asdict(config), "healthy": health.ok, "health": str(health), **checks}
    out = Path(out_dir)
    write_json(out / "result.json", result)
    _plot(out / "drape.png", model, state, times, energies)
    recorder.write(out / "drape.usd")
    render_strip(out / "drape.usd", out / "drape_frames.png")
    print(f"health: {health}; kinetic energy {checks['kinetic_energy_j']:.2e} J (limit {MAX_KINETIC_ENERGY:.0e} J)")
    print(f"{checks['vertices_above_sphere']} vertices on top of the sphere, at most "
          f"{checks['largest_lift_above_sphere_m'] * 1e3:.2f} mm off its surface "
          f"(limit {SURFACE_TOLERANCE * 1e3:.0f} mm); "
          f"deepest penetration {checks['max_penetration_m'] * 1e3:.2f} mm (limit {MAX_PENETRATION * 1e3:.0f} mm); "
          f"{checks['vertices_on_ground']} vertices on the ground")
    print(f"wrote {out / 'drape.png'}, {out / 'drape.usd'} ({recorder.frame_count} frames), {out / 'result.json'}")
    return result


def _plot(path, model, state, times, energies):
    """3D view of the cloth over the sphere, and the kinetic energy over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 5), layout="constrained")
    ax = fig.add_subplot(1, 2, 1, projection="3d")
    x = state.particle_q.numpy()
    ax.plot_trisurf(x[:, 0], x[:, 1], x[:, 2], triangles=model.tri_indices.numpy(), cmap="viridis",
                    edgecolor=(0, 0, 0, 0.15), linewidth=0.2)
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    unit = (np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v))
    sphere = [c + SPHERE_RADIUS * f for c, f in zip(SPHERE_CENTRE, unit)]
    ax.plot_wireframe(*sphere, color="tab:red", linewidth=0.4, alpha=0.6)
    half = 0.5 * CLOTH_SIZE
    ax.set(xlim=(-half, half), ylim=(-half, half), zlim=(0, 2 * SPHERE_RADIUS + 0.05),
           xlabel="x (m)", ylabel="y (m)", zlabel="z (m)", title=f"Cloth at t = {times[-1]:.1f} s")
    ax.set_box_aspect((2 * half, 2 * half, 2 * SPHERE_RADIUS + 0.05))
    ax.view_init(elev=25, azim=-60)
    energy = fig.add_subplot(1, 2, 2)
    energy.semilogy(times, energies)
    energy.axhline(MAX_KINETIC_ENERGY, color="k", linestyle=":", label="'at rest' limit")
    energy.set(xlabel="time (s)", ylabel="kinetic energy (J)", title="Settling")
    energy.legend(fontsize=8)
    energy.grid(True, which="both", alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)


def main(argv=None) -> int:
    """Command line: --device, --out, --test (coarser cloth; asserts the drape checks)."""

    def check(result):
        checks = ("healthy", "rests_on_sphere", "no_penetration", "reaches_ground", "at_rest")
        failed = [name for name in checks if not result[name]]
        return ", ".join(failed) or None

    return example_main(
        __doc__, "cloth_drape", "coarser, shorter run; fail unless the cloth drapes",
        lambda test, out, device: run(DrapeConfig(cells=24, duration_s=3.0) if test else DrapeConfig(), out, device),
        check, argv,
    )


if __name__ == "__main__":
    sys.exit(main())
