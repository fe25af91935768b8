"""Benchmark suite ``render``: wall time of one 640 x 480 frame of the headless ray caster
(``wpsim.io.render``) for the demo's soft finger (984 tets, its surface as one triangle mesh)
and the quadruped (13 bodies of boxes, capsules and spheres on the ground), after a
warm-up frame that loads the kernels and builds the mesh."""

from __future__ import annotations

import warp as wp

from wpsim.bench.records import progress, record, timed

WIDTH, HEIGHT = 640, 480


def _scenes(device):
    """name -> (model, state) of the benchmarked scenes."""
    from wpsim.tasks import finger_calibration as finger
    from wpsim.tasks.robot_scene import robot_scene

    vertices, tets = finger.load_mesh()
    finger_model = finger.build_finger(vertices, tets, 1.0e5, 0.3, 10.0, device=device, requires_grad=False)
    builder, _ = robot_scene(finger.ASSETS / "quadruped.xml")
    robot = builder.finalize(device=device, dtype=wp.float64)
    return {"soft finger": finger_model, "quadruped": robot}


def render_suite(device, quick: bool) -> list:
    """Seconds per frame of each scene (best of 3 frames, 1 when ``quick``)."""
    from wpsim.io.render import SceneRenderer

    records = []
    for name, model in _scenes(device).items():
        state = model.state(requires_grad=False)
        renderer = SceneRenderer(model, WIDTH, HEIGHT)
        renderer.frame([state])
        renderer.render(state)  # warm-up: kernels, BVHs
        best = min(timed(lambda: renderer.render(state), device)[0] for _ in range(1 if quick else 3))
        progress(f"render {name}: {best * 1e3:.1f} ms per {WIDTH}x{HEIGHT} frame")
        records.append(record("render", name, {"width": WIDTH, "height": HEIGHT, "device": str(device)}, "wall_s",
                              best))
    return records
