"""Shape pairs: the finalize candidate list (built from the shape pairs whose worlds meet, not
all pairs), and pairs beyond face contact: boxes touching edge to edge, mesh hulls on mesh hulls."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.solvers import SoftContactOptions

HALF = 0.1
"""Half extent (m) of the test boxes."""
KE = 1.0e5
"""Contact stiffness (N/m) of the penalty tests."""


def quat_about(axis, angle: float) -> tuple:
    """(x, y, z, w) of a rotation by ``angle`` (rad) about a unit axis."""
    return (*(np.sin(angle / 2) * np.asarray(axis, dtype=float)), np.cos(angle / 2))


def edge_on_edge(crossing: float):
    """A box standing on one edge (turned 45 degrees about y; the edge along y, on top at
    z = HALF sqrt 2) and a free box balanced on it, turned 45 degrees about x (its lower edge
    along x) and then by ``crossing`` (rad) about z: the two edges cross at the origin's
    vertical. Returns (model, rest height of the free box's centre (m), its mass (kg))."""
    b = wpsim.ModelBuilder()
    contact = dict(ke=KE, kd=200.0, mu=0.5)
    b.add_shape_box(-1, hx=HALF, hy=HALF, hz=HALF, rot=quat_about((0.0, 1.0, 0.0), np.pi / 4), **contact)
    body = b.add_body()
    b.add_shape_box(body, hx=HALF, hy=HALF, hz=HALF, density=500.0, **contact)
    mass = float(b.bodies.array("body_mass")[0])
    rest = 2.0 * HALF * np.sqrt(2.0)
    turn = quat_about((0.0, 0.0, 1.0), crossing)
    tilt = quat_about((1.0, 0.0, 0.0), np.pi / 4)
    x1, y1, z1, w1 = turn
    x2, y2, z2, w2 = tilt
    rot = (w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
           w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2)
    b.add_joint_free(body, pos=(0.0, 0.0, rest - mass * 9.81 / KE), rot=rot)
    return b.finalize(dtype=wp.float64), rest, mass


@pytest.mark.parametrize("contact", ["penalty", "soft"])
@pytest.mark.parametrize("crossing", [0.0, 0.5])
def test_a_box_balanced_edge_on_edge_is_held_at_the_crossing(contact, crossing):
    """Two edges crossing at 90 degrees (or 90 - 29), the upper box balanced on the lower's
    edge: held at the crossing for 0.3 s, its centre within 0.2 mm of the analytic rest
    height (penalty: less the sink m g / ke of its one contact). Without edge-edge contact
    no corner of either box is near the other and the box fell through."""
    model, rest, mass = edge_on_edge(crossing)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions() if contact == "soft" else None)
    a, b = model.state(), model.state()
    for _ in range(300):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    q = a.joint_q.numpy()
    expected = rest - (mass * 9.81 / KE if contact == "penalty" else 0.0)
    assert abs(q[2] - expected) < 2e-4
    assert np.abs(q[:2]).max() < 1e-4


def bar_on_two_edges(slide: float):
    """A 0.4 m bar (half extents 0.2, HALF, HALF) turned 45 degrees about x, its lower edge
    along x resting across the upper edges (along y) of two boxes standing on edge at
    x = -+0.1 m, sliding along x at ``slide`` (m/s), mu 0.5. Returns (model, rest height
    of its centre (m), its mass (kg))."""
    b = wpsim.ModelBuilder()
    contact = dict(ke=KE, kd=200.0, mu=0.5)
    for x in (-0.1, 0.1):
        b.add_shape_box(-1, pos=(x, 0.0, 0.0), hx=HALF, hy=HALF, hz=HALF,
                        rot=quat_about((0.0, 1.0, 0.0), np.pi / 4), **contact)
    body = b.add_body()
    b.add_shape_box(body, hx=0.2, hy=HALF, hz=HALF, density=500.0, **contact)
    mass = float(b.bodies.array("body_mass")[0])
    rest = 2.0 * HALF * np.sqrt(2.0)
    b.add_joint_free(body, pos=(0.0, 0.0, rest - mass * 9.81 / (2 * KE)), rot=quat_about((1.0, 0.0, 0.0), np.pi / 4),
                     lin_vel=(slide, 0.0, 0.0))
    return b.finalize(dtype=wp.float64), rest, mass


@pytest.mark.parametrize("contact, still", [("penalty", 0.1), ("soft", 1e-3)])
def test_a_bar_sliding_on_two_edges_stops_after_v2_over_2_mu_g(contact, still):
    """The bar slides along its edge over two crossing edges at 0.5 m/s (mu 0.5; friction
    moves load from one crossing to the other, their sum stays m g): it stops after
    v^2 / (2 mu g) = 25.5 mm, at its rest height. With soft-constraint contact it is then
    still (speeds under 1e-3); on penalty springs it keeps rocking between the two
    crossings at up to ``still`` (m/s, rad/s)."""
    model, rest, mass = bar_on_two_edges(0.5)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions() if contact == "soft" else None)
    a, b = model.state(), model.state()
    for _ in range(300):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    q, qd = a.joint_q.numpy(), a.joint_qd.numpy()
    expected = rest - (mass * 9.81 / (2 * KE) if contact == "penalty" else 0.0)
    assert q[0] == pytest.approx(0.5**2 / (2 * 0.5 * 9.81), rel=0.03)
    assert abs(q[2] - expected) < 2e-4
    assert np.abs(qd).max() < still


def two_mesh_boxes(yaw: float, offset=(0.0, 0.0)):
    """Two 0.2 m cube meshes stacked on the ground, the top one turned by ``yaw`` (rad) about
    the vertical and shifted by ``offset`` (m), as ``test_soft_contact.two_boxes`` does with
    box primitives."""
    import trimesh

    cube = trimesh.creation.box(extents=(2 * HALF, 2 * HALF, 2 * HALF))
    b = wpsim.ModelBuilder()
    contact = dict(ke=KE, kd=100.0, mu=0.6)
    b.add_ground_plane(**contact)
    for k in range(2):
        body = b.add_body()
        b.add_shape_mesh(body, cube.vertices, cube.faces, density=500.0, **contact)
        b.add_joint_free(body, pos=(offset[0] * k, offset[1] * k, HALF + 2 * HALF * k - 1e-4 * (k + 1)),
                         rot=quat_about((0.0, 0.0, 1.0), yaw * k))
    return b.finalize(dtype=wp.float64)


@pytest.mark.parametrize("contact", ["penalty", "soft"])
@pytest.mark.parametrize("yaw, offset", [(0.0, (0.0, 0.0)), (0.3, (0.0, 0.0)), (np.pi / 4, (0.0, 0.0)),
                                         (0.0, (0.05, 0.05))])
def test_a_mesh_cube_stands_on_another_turned_or_offset(contact, yaw, offset):
    """A cube mesh on another for 1 s: turned, no corner of either is over the other's face
    (their overlap's corners are edge crossings), yet it stays within 1.5 mm of its rest
    height (3 mm turned 45 degrees: the crossings are found at the points along the edges,
    0.05 m apart), upright and in place. Without mesh-mesh contact it fell through."""
    model = two_mesh_boxes(yaw, offset)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions() if contact == "soft" else None)
    a, b = model.state(), model.state()
    for _ in range(1000):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    top = a.joint_q.numpy().reshape(2, 7)[1]
    assert abs(top[2] - 3 * HALF) < (3e-3 if yaw > 0.5 else 1.5e-3)
    assert np.abs(top[3:5]).max() < 1e-3
    assert np.abs(top[:2] - offset).max() < 1e-3


# ---------------------------------------------------------------- broad phase
def box_pile(side: int, layers: int, spacing: float):
    """``scene_library.box_pile`` in float64."""
    from wpsim.tasks.scene_library import box_pile as pile

    return pile(side, layers, HALF, spacing).finalize(dtype=wp.float64)


@pytest.mark.parametrize("contact", ["penalty", "soft"])
def test_the_broad_phase_tests_few_pairs_and_steps_exactly_as_every_pair(contact):
    """A 4 x 4 x 2 pile of turned boxes that overlap their neighbours (and burst apart) and
    stand on the layer below: over 0.3 s the broad phase hands the narrow phase under a
    quarter (soft-constraint contact, which parts the boxes more slowly: a half) of the 528
    candidate pairs per step, and the rollout equals the one that tests
    every pair each step (the same contacts in the same order; with soft-constraint contact
    the same islands)."""
    model = box_pile(4, 2, spacing=0.205)
    assert model.contact_pair_count == 32 * 31 // 2 + 32
    finals, tested = [], []
    for broad in (True, False):
        solver = wpsim.SemiImplicitSolver(model, broad_phase=broad,
                                          soft_contact=SoftContactOptions() if contact == "soft" else None)
        a, b = model.state(), model.state()
        for step in range(300):
            solver.step(a, b, None, 1e-3)
            a, b = b, a
            if broad and step % 50 == 0:
                tested.append(solver.broad_phase.tested)
        assert solver.health().ok
        finals.append(a.joint_q.numpy())
    assert max(tested) < model.contact_pair_count / (4 if contact == "penalty" else 2)  # soft: 188 at 50 ms
    assert tested[0] > 32 + 16 + 24  # at the start: the ground, the layer below, the 24 neighbour pairs
    start = model.state().joint_q.numpy().reshape(-1, 7)
    assert np.abs(finals[0].reshape(-1, 7)[:, :2] - start[:, :2]).max() > 1e-3  # neighbours pushed apart
    assert np.abs(finals[0] - finals[1]).max() < 1e-12


def test_a_broad_phase_past_its_capacity_says_so():
    model = box_pile(4, 1, spacing=0.205)
    solver = wpsim.SemiImplicitSolver(model, broad_phase=True, contact_pair_capacity=20)  # 16 with the ground, 4 more
    a, b = model.state(), model.state()
    for _ in range(5):
        solver.step(a, b, None, 1e-3)
        a, b = b, a
    report = solver.health()
    assert report.dropped_contact_pairs > 0 and not report.ok
    assert "contact_pair_capacity" in str(report)
    with pytest.raises(ValueError, match="below the 16 pairs with planes"):
        wpsim.SemiImplicitSolver(model, broad_phase=True, contact_pair_capacity=10)


def test_candidate_pairs_are_the_rule_over_every_ordered_pair(monkeypatch):
    """The candidate list built from ``world_pairs`` (same world, or world -1) equals the one of
    the rule applied to every ordered shape pair, for replicated worlds with a shared ground
    and a shared static box; ``world_pairs`` grows with the worlds, not their square."""
    from wpsim.core import rigid_builder

    one = wpsim.ModelBuilder()
    for k in range(2):
        body = one.add_body()
        one.add_shape_box(body, hx=HALF, hy=HALF, hz=HALF, density=500.0)
        one.add_shape_sphere(body, pos=(0.0, 0.0, HALF), radius=0.05, density=500.0)
        one.add_joint_free(body, pos=(0.3 * k, 0.0, HALF))
    builder = one.replicated(4)
    builder.add_ground_plane()
    builder.add_shape_box(-1, pos=(0.0, 0.0, 1.0), hx=HALF, hy=HALF, hz=HALF)
    found = builder.finalize().contact_pair.numpy()
    world_pairs = rigid_builder.world_pairs

    def every_pair(world, body):
        n = len(world)
        return np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij"), axis=-1).reshape(-1, 2)

    monkeypatch.setattr(rigid_builder, "world_pairs", every_pair)
    expected = builder.finalize().contact_pair.numpy()
    assert len(found) > 0 and np.array_equal(found, expected)
    worlds = np.repeat(np.arange(1000), 5)
    assert len(world_pairs(np.concatenate([worlds, [-1]]), np.arange(5001))) == 1000 * 25 + 2 * 5000 + 1


def test_a_pairs_jacobian_columns_are_the_dofs_that_move_its_bodies():
    """A free base with two hinged legs, each with a foot; the feet may touch the ground and
    each other (self contact). A foot's rows have columns for the base's six dofs and its own
    leg's hinges only; two feet of one articulation share the union of both lists on both
    sides; the ground (static) has none."""
    from wpsim.solvers.soft_contact import pair_columns

    b = wpsim.ModelBuilder()
    b.articulation_self_contact = True
    b.add_shape_plane()
    base = b.add_body()
    b.add_shape_box(base, hx=HALF, hy=HALF, hz=HALF, density=500.0)
    b.add_joint_free(base, pos=(0.0, 0.0, 1.0))
    feet = []
    for side in (-1.0, 1.0):
        thigh = b.add_body()
        b.add_joint_revolute(base, thigh, axis=(0.0, 1.0, 0.0), parent_pos=(side * 0.3, 0.0, 0.0))
        foot = b.add_body()
        b.add_joint_revolute(thigh, foot, axis=(0.0, 1.0, 0.0), parent_pos=(0.0, 0.0, -0.2))
        b.add_shape_sphere(foot, pos=(0.0, 0.0, -0.2), radius=0.03, density=500.0)
        feet.append(foot)
    model = b.finalize(device="cpu")
    pairs = model.contact_pair.numpy().reshape(-1, 2)
    shape_body = model.shape_body.numpy()
    columns, counts = pair_columns(model, pairs, shape_body)
    assert columns.shape[2] == 10  # the self-contact union: 6 base dofs and both legs' two hinges
    leg = {feet[0]: [6, 7], feet[1]: [8, 9]}
    seen = set()
    for (a, b_shape), cols, n in zip(pairs, columns, counts):
        body_a, body_b = shape_body[a], shape_body[b_shape]
        if body_a in leg and body_b < 0:
            assert n.tolist() == [8, 0] and cols[0, :8].tolist() == [*range(6), *leg[body_a]]
            assert (cols[1] == -1).all()
            seen.add("ground")
        if body_a in leg and body_b in leg:
            assert n.tolist() == [10, 10] and cols[0].tolist() == cols[1].tolist() == list(range(10))
            seen.add("feet")
    assert seen == {"ground", "feet"}
