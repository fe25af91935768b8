"""Soft-constraint rigid contact solved by Newton iterations: resting and incline physics,
implicit (IFT) gradients against unrolled ones and central differences, checkpointed
rollouts and many worlds."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff import Rollout, check_gradient
from wpsim.diff.losses import joint_state_loss
from wpsim.solvers import SoftContactOptions
from wpsim.solvers.soft_contact import contact_islands

G = 9.81


def incline_box(angle: float = 0.0, mu: float = 0.5, speed: float = 0.0, sink: float = 0.0, worlds: int = 1):
    """A 0.2 m, 4 kg box on a plane tilted by ``angle`` about x, ``sink`` m into it, moving
    down the slope at ``speed`` (m/s)."""
    single = wpsim.ModelBuilder()
    half_turn = (np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2))
    single.add_shape_plane(rot=half_turn, mu=mu)
    box = single.add_body()
    single.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=mu)
    normal = np.array([0.0, -np.sin(angle), np.cos(angle)])
    down = -np.array([0.0, np.cos(angle), np.sin(angle)])
    single.add_joint_free(box, pos=normal * (0.1 - sink), rot=half_turn, lin_vel=down * speed)
    if worlds == 1:
        return single.finalize(dtype=wp.float64, requires_grad=True)
    many = wpsim.ModelBuilder()
    many.replicate(single, worlds, spacing=(1.0, 0.0, 0.0))
    return many.finalize(dtype=wp.float64, requires_grad=True)


def run(model, steps, dt=1e-3, **options):
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**options))
    a, b = model.state(), model.state()
    path = []
    for _ in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
        path.append(a.joint_q.numpy().copy())
    assert solver.health().ok
    return np.array(path), solver


def test_resting_box_neither_sinks_nor_jitters():
    path, solver = run(incline_box(), 1000)
    z = path[:, 2]
    assert 0.099 < z[-1] < 0.1  # penetration below 1 mm
    assert np.ptp(z[500:]) < 1e-6  # at rest: no jitter
    assert np.abs(path[-1, :2]).max() < 1e-9
    assert solver.health().contact_iterations <= 5


@pytest.mark.parametrize("mu", [0.5, 0.1])
def test_box_on_incline_sticks_or_slides_with_the_analytic_acceleration(mu):
    angle = 0.3  # tan = 0.309
    path, _ = run(incline_box(angle, mu), 600)
    down = -np.array([0.0, np.cos(angle), np.sin(angle)])
    s = path[:, :3] @ down
    t = np.arange(len(s)) * 1e-3
    accel = 2.0 * np.polyfit(t[300:], s[300:], 2)[0]
    if mu > np.tan(angle):
        assert abs(s[-1] - s[300]) < 5e-4  # settled; a soft constraint creeps below 2 mm/s
    else:
        expected = G * (np.sin(angle) - mu * np.cos(angle))
        assert abs(accel - expected) / expected < 0.02


def sliding_scene():
    """A box sliding down a 0.3 rad incline with mu = 0.1, settled into its contacts."""
    return incline_box(0.3, 0.1, speed=0.4, sink=4.0e-4)


PUSH = (0.0, 0.0, 0.1, 0.5, -0.2, 0.0)
"""A small external wrench (torque N m, force N) on every body for the gradient tests."""


def loss_of(model, solver, steps=30, dt=1e-3, wrench=(0.0,) * 6):
    rng = np.random.default_rng(4)
    w_q = wp.array(rng.normal(size=model.joint_coord_count), dtype=wp.float64)
    w_qd = wp.array(rng.normal(size=model.joint_dof_count), dtype=wp.float64)
    state = model.state()
    control = model.control()
    control.body_f_ext.assign(np.tile(wrench, (model.body_count, 1)))

    def loss():
        final = wpsim.simulate(solver, state, steps, dt, control)
        return joint_state_loss(final, w_q, w_qd)

    return loss, state, control


def gradient_array(param: str, model, state, control) -> wp.array:
    """The array a gradient test differentiates: initial velocities, the external wrench
    (control) or a model array."""
    if param == "joint_qd":
        return state.joint_qd
    if param == "body_f_ext":
        return control.body_f_ext
    return getattr(model, param)


def assert_adjoints_agree(make_model, param: str, steps: int = 30, wrench=(0.0,) * 6, direction=None, seed: int = 1,
                          broad_phase: bool | None = None, **options):
    """Gradient of the test loss w.r.t. ``param`` (see ``gradient_array``) with the implicit
    and the unrolled adjoint: they agree within 1e-4 of the largest entry, and the implicit
    one matches central differences (eps 1e-6, float64) within 1e-4 along ``direction``
    (random from ``seed`` by default, scaled by the values for body mass). ``broad_phase``:
    the solver's; ``options``: more ``SoftContactOptions``."""
    grads = {}
    for adjoint in ("implicit", "unrolled"):
        model = make_model()
        solver = wpsim.SemiImplicitSolver(model, broad_phase=broad_phase,
                                          soft_contact=SoftContactOptions(adjoint=adjoint, tolerance=1e-13, **options))
        loss, state, control = loss_of(model, solver, steps=steps, wrench=wrench)
        array = gradient_array(param, model, state, control)
        tape = wp.Tape()
        with tape:
            value = loss()
        tape.backward(value)
        grads[adjoint] = array.grad.numpy().copy()
        if adjoint == "implicit":
            along = direction
            if along is None:
                along = np.random.default_rng(seed).normal(size=array.numpy().shape)
                if param == "body_mass":
                    along *= array.numpy()
            tape.zero()
            result = check_gradient(loss, array, eps=1e-6, direction=along, tol=1e-4)
            assert result.ok, (result.tape, result.fd, result.rel_error)
    scale = np.abs(grads["unrolled"]).max()
    assert scale > 0
    assert np.abs(grads["implicit"] - grads["unrolled"]).max() <= 1e-4 * scale


@pytest.mark.parametrize("param", ["shape_mu", "body_mass", "joint_qd", "body_f_ext"])
def test_implicit_gradient_matches_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_scene, param, wrench=PUSH)


@pytest.mark.parametrize("scene", ["incline", "stack"])
def test_checkpointed_rollout_matches_full_bitwise(scene):
    results = []
    for mode in ("full", "checkpoint"):
        model = sliding_scene() if scene == "incline" else sliding_stack()
        solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
        w_q = wp.array(np.linspace(-1.0, 1.0, model.joint_coord_count), dtype=wp.float64)
        w_qd = wp.zeros(model.joint_dof_count, dtype=wp.float64)

        def loss_fn(k, state, loss):
            if k % 5 == 0:
                joint_state_loss(state, w_q, w_qd, loss)

        rollout = Rollout(solver, 20, 1e-3, loss_fn, mode=mode, segment_length=6)
        state = model.state()
        value = rollout.forward(state)
        rollout.backward()
        results.append((value, state.joint_qd.grad.numpy().copy(), model.shape_mu.grad.numpy().copy()))
    assert results[0][0] == results[1][0]
    assert np.abs(results[0][1]).max() > 0
    assert all(np.array_equal(a, b) for a, b in zip(results[0][1:], results[1][1:]))


def test_many_worlds_solve_independently():
    one, _ = run(sliding_scene(), 100)
    many, _ = run(incline_box(0.3, 0.1, speed=0.4, sink=4.0e-4, worlds=3), 100)
    per_world = many.reshape(100, 3, 7)  # free-joint coordinates are relative to each world's root frame
    assert np.abs(one[-1] - one[0]).max() > 0.01
    assert np.abs(per_world - one[:, None, :]).max() < 1e-9


def test_many_worlds_of_stacks_are_separate_islands():
    one, _ = run(sliding_stack(), 100)
    many, solver = run(box_stack(2, mu=0.3, top_speed=0.4, worlds=3), 100)
    assert solver.soft_contact.island_count == 3 and solver.soft_contact.largest_island == 12
    per_world = many.reshape(100, 3, 14)
    assert np.abs(one[-1] - one[0]).max() > 0.01
    assert np.abs(per_world - one[:, None, :]).max() < 1e-9


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="adjoint"):
        wpsim.SemiImplicitSolver(sliding_scene(), soft_contact=SoftContactOptions(adjoint="exact"))
    with pytest.raises(ValueError, match="impedance"):
        wpsim.SemiImplicitSolver(sliding_scene(), soft_contact=SoftContactOptions(impedance=1.0))
    for bad in (dict(impedance_width=-1e-3), dict(impedance_width=1e-3, impedance_min=0.995),
                dict(impedance_width=1e-3, impedance_midpoint=1.0), dict(impedance_width=1e-3, impedance_power=0.5)):
        with pytest.raises(ValueError, match="impedance curve"):
            wpsim.SemiImplicitSolver(sliding_scene(), soft_contact=SoftContactOptions(**bad))


CURVE = dict(impedance_width=1e-3, impedance_min=0.0, impedance=0.95)
"""A MuJoCo solimp curve (0, 0.95, 1 mm, 0.5, 2): the contact force grows from zero at the surface."""


def dropped_sphere_height(speed: float, **options) -> float:
    """Height (m) after 0.15 s of a 0.1 m sphere dropped from 0.1 m above the ground at
    ``speed`` (m/s, downwards): it lands after about 0.1 s, at a step that moves with the speed."""
    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body()
    builder.add_shape_sphere(body, radius=0.1, density=500.0)
    builder.add_joint_free(body, pos=(0.0, 0.0, 0.2), lin_vel=(0.0, 0.0, -speed))
    model = builder.finalize(dtype=wp.float64)
    final = wpsim.simulate(wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**options)),
                           model.state(), 150, 1e-3)
    return float(final.joint_q.numpy()[2])


@pytest.mark.parametrize("options, continuous", [({}, False), (CURVE, True)])
def test_an_impedance_curve_makes_the_onset_of_contact_continuous(options, continuous):
    """Over speeds 1 to 1.02 m/s the landing step changes; the interval of the largest height
    change is cut in 10 twice. At one impedance the change stays (3e-4 m: the first contact step
    pushes at full stiffness); with the curve it shrinks with the interval (continuous)."""
    speeds = 1.0 + np.linspace(0.0, 0.02, 41)
    changes = []
    for _ in range(3):
        heights = np.array([dropped_sphere_height(v, **options) for v in speeds])
        jump = int(np.argmax(np.abs(np.diff(heights))))
        changes.append(abs(heights[jump + 1] - heights[jump]))
        speeds = np.linspace(speeds[jump], speeds[jump + 1], 11)
    if continuous:
        assert changes[2] < 0.05 * changes[0]  # Lipschitz: 1 % of the change over 1 % of the interval
    else:
        assert changes[2] > 0.5 * changes[0] > 1e-4


@pytest.mark.parametrize("param", ["joint_qd", "shape_mu"])
def test_impedance_curve_gradients_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_scene, param, wrench=PUSH, **CURVE)


def test_islands_join_the_articulations_that_touch():
    art_a = np.array([0, 2, 3, 5, 1])
    art_b = np.array([2, -1, 4, 5, 6])  # 0-2 touch, 2 on the ground, 3-4 touch, 5 touches itself, 1-6 may touch
    touching = np.array([True, True, True, True, False])
    assert contact_islands(7, art_a, art_b, touching).tolist() == [0, 1, 0, 2, 2, 3, 4]
    assert contact_islands(7, art_a, art_b).tolist() == [0, 1, 0, 2, 2, 3, 1]  # every candidate pair
    assert contact_islands(3, np.zeros(0, int), np.zeros(0, int)).tolist() == [0, 1, 2]


def box_stack(boxes: int = 3, mu: float = 0.6, top_speed: float = 0.0, worlds: int = 1):
    """``boxes`` 0.2 m, 4 kg boxes stacked on the ground, each 0.1 mm into the one below; the
    top one sliding at ``top_speed`` (m/s) along x."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(mu=mu)
    for k in range(boxes):
        body = b.add_body()
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=mu)
        speed = top_speed if k == boxes - 1 else 0.0
        b.add_joint_free(body, pos=(0.0, 0.0, 0.1 + k * (0.2 - 1e-4) - 1e-4), lin_vel=(speed, 0.0, 0.0))
    if worlds > 1:
        many = wpsim.ModelBuilder()
        many.replicate(b, worlds, spacing=(1.0, 0.0, 0.0))
        b = many
    return b.finalize(dtype=wp.float64, requires_grad=True)


def test_box_stack_stands_still_as_one_island():
    path, solver = run(box_stack(), 1000)
    assert solver.soft_contact.island_count == 1 and solver.soft_contact.largest_island == 18
    z = path[:, [2, 9, 16]]
    assert np.abs(z[-1] - np.array([0.1, 0.3, 0.5])).max() < 1e-3  # each contact sinks below 1 mm
    assert np.ptp(z[500:], axis=0).max() < 1e-6  # at rest: no jitter
    assert np.abs(path[-1].reshape(3, 7)[:, :2]).max() < 1e-9  # no sideways drift
    assert solver.health().contact_iterations <= 5


def test_touching_bodies_fall_together_at_g():
    b = wpsim.ModelBuilder()
    for k in range(2):
        ball = b.add_body()
        b.add_shape_sphere(ball, radius=0.1)
        b.add_joint_free(ball, pos=(0.0, 0.0, 1.0 + k * (0.2 - 5e-4)))  # 0.5 mm overlap
    path, _ = run(b.finalize(dtype=wp.float64), 100)
    z = path[:, [2, 9]]
    steps = len(z)
    fall = z[-1].mean() - 1.0 - 0.5 * (0.2 - 5e-4)
    assert fall == pytest.approx(-G * 1e-6 * steps * (steps + 1) / 2, rel=1e-9)  # the pair's centre falls freely
    assert 0.2 - 1e-4 < z[-1, 1] - z[-1, 0] < 0.2 + 1e-3  # the overlap is pushed out, gently


def test_top_box_slides_on_the_lower_to_the_analytic_stopping_distance():
    mu, speed = 0.3, 0.6
    model = box_stack(2, mu=mu)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    a, b = model.state(), model.state()
    for k in range(700):  # settle for 0.3 s, then push the top box along x
        if k == 300:
            qd = a.joint_qd.numpy()
            qd[6] = speed
            a.joint_qd.assign(qd)
            start = a.joint_q.numpy().copy()
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    end = a.joint_q.numpy()
    travel = (end[7] - end[0]) - (start[7] - start[0])
    assert travel == pytest.approx(speed**2 / (2 * mu * G), rel=0.02)  # over the lower box's edge: both ends held
    assert abs(end[0] - start[0]) < 1e-3  # the lower box, held by the ground, barely moves
    assert np.abs(end[10:13]).max() < 1e-3  # the top box does not tip


def test_mesh_box_behaves_like_the_primitive_box():
    import trimesh

    paths = []
    for mesh in (False, True):
        single = wpsim.ModelBuilder()
        single.add_ground_plane(mu=0.1)
        body = single.add_body()
        if mesh:
            cube = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
            single.add_shape_mesh(body, cube.vertices, cube.faces, density=500.0, mu=0.1)
        else:
            single.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.1)
        single.add_joint_free(body, pos=(0.0, 0.0, 0.1 - 4e-4), lin_vel=(0.5, 0.0, 0.0), ang_vel=(0.0, 0.0, 1.0))
        paths.append(run(single.finalize(dtype=wp.float64), 300)[0])
    assert np.abs(paths[0][-1, 0] - paths[0][0, 0]) > 0.05
    assert np.abs(paths[1] - paths[0]).max() < 1e-8


def sliding_stack():
    """A box sliding at 0.4 m/s on another resting on the ground (mu = 0.3)."""
    return box_stack(2, mu=0.3, top_speed=0.4)


@pytest.mark.parametrize("param", ["shape_mu", "body_mass", "joint_qd", "body_f_ext"])
def test_body_body_gradients_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_stack, param, steps=20, wrench=PUSH, seed=2)


@pytest.mark.parametrize("param", ["shape_mu", "joint_qd"])
def test_gradients_through_the_broad_phase_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_stack, param, steps=20, wrench=PUSH, seed=2, broad_phase=True)


def swinging_onto_own_base(q0: float = 1.2):
    """An articulation touching itself: a base box sliding on a prismatic x joint carries a
    0.3 m pendulum (revolute about x at 0.4 m) whose welded end sphere (r 0.1 m) swings down
    onto the box's top face (z = 0.05 m) near angle 0.586 rad."""
    b = wpsim.ModelBuilder()
    b.articulation_self_contact = True
    base = b.add_body()
    b.add_shape_box(base, hx=0.2, hy=0.2, hz=0.05, density=500.0, mu=0.5)
    b.add_joint_prismatic(-1, base, axis=(1.0, 0.0, 0.0))
    rod = b.add_body(mass=1.0, com=(0.0, 0.0, -0.15), inertia=(0.01, 0.01, 0.001))
    b.add_joint_revolute(base, rod, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 0.4), q=q0)
    tip = b.add_body()
    b.add_shape_sphere(tip, radius=0.1, density=200.0, mu=0.5)
    b.add_joint_fixed(rod, tip, parent_pos=(0.0, 0.0, -0.3))
    return b.finalize(dtype=wp.float64, requires_grad=True)


def test_articulation_resting_on_itself():
    model = swinging_onto_own_base()
    path, solver = run(model, 800)
    angle = np.abs(path[:, 1])
    assert solver.soft_contact.island_count == 1
    touching = np.arccos(0.25 / 0.3)
    depth = 0.3 * (np.cos(angle) - np.cos(touching))  # of the sphere in the box, m
    assert depth.max() < 0.01  # arriving at about 1.7 m/s, it sinks less than 1 cm
    assert np.abs(depth[-100:]).max() < 1e-3 and np.ptp(angle[-100:]) < 1e-6  # then rests on the box


def test_self_contact_gradients_match_unrolled_and_central_differences():
    assert_adjoints_agree(lambda: swinging_onto_own_base(0.6), "joint_qd", steps=20, direction=np.array([1.0, -0.5]))


def pendulum_on_limit(q0: float = 0.6, lower: float = 0.2):
    """A 1 kg, 0.3 m pendulum hinged about x whose lower limit (rad) keeps it from hanging
    straight down: gravity holds it against the limit. No penalty gains (limit_ke = 0)."""
    b = wpsim.ModelBuilder()
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.3), inertia=(0.001, 0.001, 0.001))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), q=q0, limit_lower=lower, limit_upper=2.0, limit_ke=0.0,
                         limit_kd=0.0)
    return b.finalize(dtype=wp.float64, requires_grad=True)


def test_joint_limit_is_a_soft_constraint_of_the_solve():
    path, _ = run(pendulum_on_limit(), 1000)
    q = path[:, 0]
    assert q.min() > 0.2 - 0.03  # arriving at 3.2 rad/s it passes the limit by about w tau / e = 0.023 rad
    assert abs(q[-1] - 0.2) < 1e-3 and np.ptp(q[-100:]) < 1e-7  # then rests on it
    free, _ = run(pendulum_on_limit(), 1000, joint_limits=False)  # penalty limit with zero gains: no limit
    assert free[:, 0].min() < -0.3


@pytest.mark.parametrize("param", ["joint_limit_lower", "joint_qd"])
def test_joint_limit_gradients_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(lambda: pendulum_on_limit(0.199, 0.2), param, steps=20, direction=np.ones(1))


def two_boxes(yaw: float = 0.0, offset=(0.0, 0.0)):
    """Two equal 0.2 m boxes stacked on the ground, the top one turned by ``yaw`` (rad) about
    the vertical and shifted by ``offset`` (m): their faces touch along an octagon or a
    rectangle whose corners are corners of neither box."""
    b = wpsim.ModelBuilder()
    contact = dict(ke=1.0e5, kd=100.0, mu=0.6)
    b.add_ground_plane(**contact)
    for k in range(2):
        body = b.add_body()
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=500.0, **contact)
        rot = (0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)) if k else (0.0, 0.0, 0.0, 1.0)
        b.add_joint_free(body, pos=(offset[0] * k, offset[1] * k, 0.1 + 0.2 * k - 1e-4 * (k + 1)), rot=rot)
    return b.finalize(dtype=wp.float64)


@pytest.mark.parametrize("contact", ["penalty", "soft"])
@pytest.mark.parametrize("yaw, offset", [(0.1, (0.0, 0.0)), (np.pi / 4, (0.0, 0.0)), (0.0, (0.05, 0.05))])
def test_turned_or_offset_box_stays_on_the_other(contact, yaw, offset):
    model = two_boxes(yaw, offset)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions() if contact == "soft" else None)
    a, b = model.state(), model.state()
    for _ in range(1000):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    top = a.joint_q.numpy().reshape(2, 7)[1]
    assert abs(top[2] - 0.3) < 1e-3  # held by the edge crossings (without them it fell through)
    assert np.abs(top[3:5]).max() < 1e-3  # and not tipping
    assert np.abs(top[:2] - offset).max() < 1e-3


def test_tape_zero_clears_the_contact_point_gradient():
    import trimesh

    b = wpsim.ModelBuilder()
    b.add_ground_plane(mu=0.3)
    body = b.add_body()
    cube = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
    b.add_shape_mesh(body, cube.vertices, cube.faces, density=500.0, mu=0.3)
    b.add_joint_free(body, pos=(0.0, 0.0, 0.1 - 2e-4), lin_vel=(0.3, 0.0, 0.0))
    model = b.finalize(dtype=wp.float64, requires_grad=True)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
    loss, _, _ = loss_of(model, solver, steps=10)
    tape = wp.Tape()
    with tape:
        value = loss()
    grads = []
    for _ in range(2):
        tape.backward(value)
        grads.append(model.shape_points.grad.numpy().copy())
        tape.zero()
    assert np.abs(grads[0]).max() > 0 and np.array_equal(grads[0], grads[1])
    assert not model.shape_points.grad.numpy().any()


def test_islands_follow_the_contacts_of_each_step():
    """Staged steps: two boxes resting apart are two islands; a third dropped onto one of them
    joins it when they touch; each step gives the motion of one island of every candidate pair
    (as the fused step solves them)."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(mu=0.5)
    for pos in ((0.0, 0.0, 0.0999), (0.6, 0.0, 0.0999), (0.6, 0.05, 0.305)):
        body = b.add_body()
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=500.0, mu=0.5)
        b.add_joint_free(body, pos=pos)
    model = b.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(tolerance=1e-13), fused=False)
    together = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(iterations=30, fixed_iterations=True))
    assert together.fused is not None  # three free bodies that may touch: one island of the fused step
    a, b_ = model.state(), model.state()
    c, d = model.state(), model.state()
    counts = []
    for _ in range(120):
        solver.step(a, b_, None, 1e-3)
        together.step(c, d, None, 1e-3)
        a, b_, c, d = b_, a, d, c
        counts.append((solver.soft_contact.island_count, solver.soft_contact.largest_island))
    assert counts[0] == (3, 6) and counts[-1] == (2, 12)  # the top box lands after about 30 ms
    assert together.soft_contact.island_count == 1 and together.soft_contact.largest_island == 18
    assert np.abs(a.joint_q.numpy() - c.joint_q.numpy()).max() < 1e-9
    assert solver.health().ok


def tumbling_shapes(worlds: int = 1):
    """A box, a capsule, a sphere and a mesh tetrahedron dropped turned, spinning and close
    to each other onto the ground; each lands on a corner or an end first."""
    import trimesh

    b = wpsim.ModelBuilder()
    b.add_ground_plane(mu=0.6)
    rng = np.random.default_rng(3)
    tetra = trimesh.Trimesh(vertices=0.12 * np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]),
                            faces=[[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]])
    for k, add in enumerate((
            lambda body: b.add_shape_box(body, hx=0.1, hy=0.05, hz=0.08, density=500.0, mu=0.6),
            lambda body: b.add_shape_capsule(body, radius=0.04, half_height=0.1, density=500.0, mu=0.6),
            lambda body: b.add_shape_sphere(body, radius=0.07, density=500.0, mu=0.6),
            lambda body: b.add_shape_mesh(body, tetra.vertices, tetra.faces, density=500.0, mu=0.6))):
        body = b.add_body()
        add(body)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(0.5, 2.5)
        rot = (*(np.sin(angle / 2) * axis), np.cos(angle / 2))
        b.add_joint_free(body, pos=(0.3 * k, 0.02 * k, 0.25 + 0.05 * k), rot=rot, lin_vel=(-0.5 * k, 0.0, -0.5),
                         ang_vel=tuple(rng.normal(size=3) * 3.0))
    return b.finalize(dtype=wp.float64)


def test_shapes_apart_by_their_bounds_skip_the_narrow_phase_without_missing_a_contact():
    """Pairs whose bounding spheres are apart (``bound_gap`` > 0) skip the narrow phase: a
    tumbling box, capsule, sphere and mesh land and bump into each other exactly as when every
    pair runs the narrow phase at every step (bounds made huge)."""
    paths, contacts = [], []
    for inflate in (False, True):
        model = tumbling_shapes()
        if inflate:
            model.shape_bound_half.assign(np.full((model.shape_count, 3), 1e3))
        solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions())
        a, b = model.state(), model.state()
        path, touching = [], []
        for _ in range(600):
            solver.step(a, b, None, 1e-3)
            a, b = b, a
            path.append(a.joint_q.numpy().copy())
            touching.append(solver.soft_contact.active_contacts())
        assert solver.health().ok
        paths.append(np.array(path))
        contacts.append(touching)
    assert contacts[0] == contacts[1]
    assert max(contacts[0]) >= 4 and contacts[0][0] == 0  # all in the air first, then landed
    assert np.abs(paths[0][-1, 2::7] - paths[0][0, 2::7]).min() > 0.1  # each fell
    np.testing.assert_array_equal(paths[0], paths[1])


def test_islands_too_large_for_their_dense_solve_are_refused(monkeypatch):
    """An island (articulations whose bodies touch, one dense Hessian) beyond
    MAX_ARTICULATION_DOFS is refused naming its dofs: with fixed_iterations, whose steps solve
    every candidate island, when the solver is built; otherwise at the step whose contacts
    join it; within the limit the same stack steps."""
    import wpsim.solvers.soft_contact as soft

    monkeypatch.setattr(soft, "MAX_ARTICULATION_DOFS", 12)
    stack = box_stack(3)
    with pytest.raises(ValueError, match="largest island .* has 18 dofs"):
        wpsim.SemiImplicitSolver(stack, soft_contact=SoftContactOptions(fixed_iterations=True, iterations=3))
    solver = wpsim.SemiImplicitSolver(stack, soft_contact=SoftContactOptions(), fused=False)
    with pytest.raises(ValueError, match="largest island .* has 18 dofs"):
        solver.step(stack.state(), stack.state(), None, 1e-3)
    monkeypatch.setattr(soft, "MAX_ARTICULATION_DOFS", 18)
    path, _ = run(box_stack(3), 5)
    assert np.isfinite(path).all()
