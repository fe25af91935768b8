"""The headless ray caster (wpsim.io.render): silhouettes of known geometry against their
projected areas and positions, every kind of geometry drawn, and the image and video
files it writes."""

import math

import numpy as np
import pytest
import warp as wp
from PIL import Image

import wpsim
from wpsim.io.render import BACKGROUND, Camera, SceneRenderer, image_strip, render_rollout, save_images

W, H, FOV = 320, 240, 40.0
FOCAL = (H / 2) / math.tan(math.radians(FOV) / 2)
"""Pixels per unit of the image plane at distance 1."""


def covered(image: np.ndarray) -> np.ndarray:
    """Pixels that are not the background."""
    background = (np.asarray(BACKGROUND) * 255 + 0.5).astype(np.uint8)
    return np.any(image != background, axis=-1)


def camera(eye, target=(0.0, 0.0, 0.0)) -> Camera:
    return Camera(eye, target, (0.0, 0.0, 1.0), FOV, W, H)


def sphere_scene(centre, radius, as_particle=False):
    builder = wpsim.ModelBuilder()
    if as_particle:
        builder.add_particle(centre, mass=1.0, radius=radius)
    else:
        builder.add_shape_sphere(pos=centre, radius=radius)
    return builder.finalize()


@pytest.mark.parametrize("as_particle", [False, True])
def test_sphere_silhouette_has_the_projected_area(as_particle):
    r, d = 0.3, 4.0
    model = sphere_scene((0.0, 0.0, 0.0), r, as_particle)
    image = SceneRenderer(model, W, H, camera((0.0, -d, 0.0))).render(model.state())
    expected = math.pi * (FOCAL * math.tan(math.asin(r / d))) ** 2
    assert abs(covered(image).sum() / expected - 1.0) < 0.02


def test_an_offset_sphere_appears_where_the_camera_projects_its_centre():
    centre = np.array([0.6, 0.5, -0.3])
    model = sphere_scene(centre, 0.1)
    cam = camera((0.0, -4.0, 0.0))
    mask = covered(SceneRenderer(model, W, H, cam).render(model.state()))
    rows, columns = np.nonzero(mask)
    centroid = np.array([columns.mean() + 0.5, rows.mean() + 0.5])
    assert np.linalg.norm(centroid - cam.project(centre)) < 1.0


def test_a_cloth_square_facing_the_camera_covers_its_projected_square():
    side, d = 1.0, 5.0
    builder = wpsim.ModelBuilder()
    half_turn_x = (math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4))  # local x-y plane -> world x-z
    builder.add_cloth_grid((-side / 2, 0.0, -side / 2), rot=half_turn_x, dim_x=4, dim_y=4, cell_x=side / 4,
                           cell_y=side / 4)
    model = builder.finalize()
    x = model.particle_q.numpy()
    assert np.ptp(x[:, 1]) < 1e-6 and np.ptp(x[:, 2]) == pytest.approx(side)  # in the plane y = 0
    image = SceneRenderer(model, W, H, camera((0.0, -d, 0.0))).render(model.state())
    assert abs(covered(image).sum() / (FOCAL * side / d) ** 2 - 1.0) < 0.02


def test_bodies_shapes_and_ground_are_drawn_shaded_and_with_shadows(tmp_path):
    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    for k, add in enumerate((lambda b: builder.add_shape_box(b, hx=0.1, hy=0.1, hz=0.1),
                             lambda b: builder.add_shape_capsule(b, radius=0.05, half_height=0.1),
                             lambda b: builder.add_shape_sphere(b, radius=0.1))):
        body = builder.add_body()
        add(body)
        builder.add_joint_free(body, pos=(0.4 * (k - 1), 0.0, 0.3))
    model = builder.finalize()
    renderer = SceneRenderer(model, W, H)
    renderer.frame([model.state()])
    image = renderer.render(model.state())
    assert covered(image).mean() > 0.9  # the ground fills most of the view
    for k in range(3):  # each body's colour is visible at its projected origin
        column, row = renderer.camera.project((0.4 * (k - 1), 0.0, 0.3)).astype(int)
        assert np.abs(image[row, column].astype(int) - image[0, 0].astype(int)).sum() > 30
    ground = image[covered(image)].astype(int).sum(axis=-1)
    assert ground.min() < 0.6 * np.median(ground)  # shadows are darker than the lit ground


def test_files_it_writes(tmp_path):
    small = Camera((0.0, -4.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), FOV, 64, 48)
    frames = []
    for z in (-0.2, 0.0, 0.2):  # three different frames (a GIF merges equal ones)
        model = sphere_scene((0.0, 0.0, z), 0.3)
        frames.append(SceneRenderer(model, camera=small).render(model.state()))
    gif = save_images(tmp_path / "clip.gif", frames, fps=10)
    with Image.open(gif) as opened:
        assert opened.n_frames == 3 and opened.size == (64, 48)
    strip = save_images(tmp_path / "strip.png", frames)
    with Image.open(strip) as opened:
        assert opened.size == (192, 48)
    folder = save_images(tmp_path / "frames", frames)
    assert sorted(p.name for p in folder.iterdir()) == ["frame_00000.png", "frame_00001.png", "frame_00002.png"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    mp4 = save_images(tmp_path / "clip.mp4", frames, fps=10)
    reader = imageio_ffmpeg.read_frames(str(mp4))
    assert next(reader)["size"] == (64, 48) and sum(1 for _ in reader) == 3
    with pytest.raises(ValueError, match=r"clip.avi: unknown image or video type '.avi'"):
        save_images(tmp_path / "clip.avi", frames)
    assert image_strip(frames, columns=2).shape == (96, 128, 3)


def test_rollout_file(tmp_path):
    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    builder.add_particle((0.0, 0.0, 1.0), mass=1.0, radius=0.1)
    model = builder.finalize(dtype=wp.float64)
    states = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 40, 0.01, keep_states=True)
    path = render_rollout(model, states[::10], tmp_path / "fall.gif", width=80, height=60)
    with Image.open(path) as opened:
        assert opened.n_frames == 5
        first = np.asarray(opened.convert("RGB"))
        opened.seek(4)
        last = np.asarray(opened.convert("RGB"))
    assert np.abs(first.astype(int) - last.astype(int)).sum() > 0  # the particle moved in view


def test_markers_inside_a_body_are_drawn_over_it():
    builder = wpsim.ModelBuilder()
    builder.add_shape_box(hx=0.5, hy=0.5, hz=0.5)
    model = builder.finalize()
    cam = camera((0.0, -4.0, 0.0))
    renderer = SceneRenderer(model, camera=cam)
    plain = renderer.render(model.state())
    marked = renderer.render(model.state(), {"inside": ([(0.2, 0.0, 0.1)], (0.0, 0.0, 1.0), 0.05)})
    changed = np.any(plain != marked, axis=-1)
    rows, columns = np.nonzero(changed)
    assert np.linalg.norm([columns.mean() + 0.5, rows.mean() + 0.5] - cam.project((0.2, 0.0, 0.1))) < 1.0
    assert marked[rows, columns, 2].min() > marked[rows, columns, 0].max()  # blue
    with pytest.raises(ValueError, match="marker set 'bad': positions must be finite"):
        renderer.render(model.state(), {"bad": ([(np.nan, 0.0, 0.0)], (1.0, 0.0, 0.0), 0.05)})


def test_a_stage_renders_like_the_rollout_it_records(tmp_path):
    from wpsim.io.usd_export import UsdRecorder
    from wpsim.io.usd_render import open_stage, render_stage, stage_frame

    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    builder.add_particle((0.3, 0.0, 0.5), mass=1.0, radius=0.05)
    builder.add_cloth_grid((-0.4, -0.2, 0.6), dim_x=2, dim_y=2, cell_x=0.2, cell_y=0.2)
    for k, add in enumerate((lambda b: builder.add_shape_box(b, hx=0.1, hy=0.05, hz=0.08),
                             lambda b: builder.add_shape_capsule(b, radius=0.04, half_height=0.1),
                             lambda b: builder.add_shape_sphere(b, radius=0.07))):
        body = builder.add_body()
        add(body)
        builder.add_joint_free(body, pos=(0.3 * (k - 1), 0.2, 0.25), rot=(0.2, 0.1, 0.3, 0.92))
    model = builder.finalize(dtype=wp.float64)
    states = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 20, 5e-4, keep_states=True)
    recorder = UsdRecorder(model, fps=20.0)
    for state in states[::10]:
        recorder.record(state)
    stage_path = recorder.write(tmp_path / "scene.usda")
    renderer = SceneRenderer(model, 160, 120)
    cam = renderer.frame([states[10]])
    direct = renderer.render(states[10])
    stage, _ = open_stage(stage_path)
    via_usd = renderer.painter.draw(stage_frame(stage, 1.0), cam)
    differ = np.any(np.abs(direct.astype(int) - via_usd.astype(int)) > 8, axis=-1)
    assert differ.mean() < 0.01, f"{differ.mean():.3%} of the pixels differ"
    summary = render_stage(stage_path, tmp_path / "scene.gif", width=80, height=60)
    assert summary["frames"] == 3 and summary["fps"] == 20.0
    with pytest.raises(ValueError, match="has no takes"):
        render_stage(stage_path, tmp_path / "x.gif", take="fitted")


def test_a_stages_markers_are_drawn_in_their_colour(tmp_path):
    from wpsim.io.usd_export import UsdRecorder
    from wpsim.io.usd_render import open_stage, stage_frame

    builder = wpsim.ModelBuilder()
    builder.add_particle((0.0, 0.0, 0.5), mass=1.0, radius=0.05)
    model = builder.finalize()
    recorder = UsdRecorder(model, fps=10.0)
    recorder.record(model.state())
    recorder.add_markers("target", [[0.4, 0.0, 0.5]], radius=0.03, color=(0.9, 0.1, 0.1))
    stage, _ = open_stage(recorder.write(tmp_path / "target.usda"))
    frame = stage_frame(stage, 0.0)
    target = np.flatnonzero(np.isclose(frame.sphere_centre[:, 0], 0.4))
    assert len(target) == 1 and frame.sphere_radius[target[0]] == pytest.approx(0.03)
    np.testing.assert_allclose(frame.sphere_color[target[0]], (0.9, 0.1, 0.1), atol=1e-6)
    image = SceneRenderer(model, 120, 90).painter.draw(frame, camera((0.2, -2.0, 0.5), (0.2, 0.0, 0.5)))
    red = (image[..., 0] > 150) & (image[..., 1] < 80) & (image[..., 2] < 80)
    assert red.sum() > 10  # the target shows as a red disc


def test_a_stage_recorded_at_500_time_codes_per_second_becomes_a_30_fps_video(tmp_path):
    """A stage of one time code per 2 ms step plays at 30 frames per second by default: frame
    j is the time code nearest j / 30 s; a rate above the stage's draws every time code."""
    from PIL import Image

    from wpsim.io.usd_export import UsdRecorder
    from wpsim.io.usd_render import open_stage, render_stage, stage_times

    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    builder.add_particle((0.0, 0.0, 0.5), mass=1.0, radius=0.05)
    model = builder.finalize()
    recorder = UsdRecorder(model, fps=500.0)
    for state in wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 100, 2e-3, keep_states=True):
        recorder.record(state)  # 101 time codes: 0.2 s
    path = recorder.write(tmp_path / "fall.usda")
    stage, _ = open_stage(path)
    assert stage_times(stage, 30.0) == ([0.0, 17.0, 33.0, 50.0, 67.0, 83.0, 100.0], 30.0)
    assert stage_times(stage, 1000.0) == ([float(k) for k in range(101)], 500.0)
    summary = render_stage(path, tmp_path / "fall.gif", width=32, height=24)
    assert summary["frames"] == 7 and summary["fps"] == 30.0
    with Image.open(tmp_path / "fall.gif") as gif:
        assert gif.n_frames == 7 and abs(gif.info["duration"] - 1000.0 / 30.0) < 10.0  # ms; GIF counts 10 ms
    with pytest.raises(ValueError, match="fps must be a finite rate > 0"):
        render_stage(path, tmp_path / "x.gif", fps=0.0)
