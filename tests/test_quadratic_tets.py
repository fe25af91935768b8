"""Quadratic (10-node) tetrahedra: mesh building, forces against the energy, the patch test,
exact quadratic displacement fields, bending, mass lumping, surfaces and bad input (float64)."""

import numpy as np
import pytest
import warp as wp
from scipy.sparse.linalg import LinearOperator, cg
from test_fem_consistency import RIGID, check_consistency, energy, random_deformation, step_forces

import wpsim
from wpsim.core import geometry
from wpsim.diff.diagnostics import tet_volume_ratios
from wpsim.kernels.quadratic_tets import TET_EDGES


def block(order=2, dims=(2, 1, 1), fiber=(0.0, 0.0, 0.0), young=2.0e4, fixed=None):
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_grid((0.1, 0.2, 0.3), rot=(0.1, -0.2, 0.05, 0.97), dim_x=dims[0], dim_y=dims[1], dim_z=dims[2],
                    cell_x=0.1, cell_y=0.1, cell_z=0.1, density=1000.0, young_modulus=young, poisson_ratio=0.35,
                    fiber=fiber, order=order, fixed=fixed)
    return b


def test_edge_nodes_are_shared_midpoints_and_masses_positive():
    b = block(dims=(2, 2, 1))
    model = b.finalize(dtype=wp.float64)
    x = model.particle_q.numpy()
    tets, edges = model.tet_indices.numpy(), model.tet_edge_indices.numpy()
    grid_points = 3 * 3 * 2
    distinct_edges = len(np.unique(np.sort(np.concatenate([tets[:, list(e)] for e in TET_EDGES]), axis=1), axis=0))
    assert model.particle_count == grid_points + distinct_edges
    for k, (i, j) in enumerate(TET_EDGES):
        assert np.allclose(x[edges[:, k]], 0.5 * (x[tets[:, i]] + x[tets[:, j]]), atol=1e-15)
    mass = model.particle_mass.numpy()
    assert mass.min() > 0.0
    assert mass.sum() == pytest.approx(1000.0 * 0.2 * 0.2 * 0.1, rel=1e-12)
    # HRZ shares: a vertex gets 1/36 of each tet's mass, an edge node 4/27 of each tet on its edge
    volume = model.tet_rest_volume.numpy()
    expected = np.zeros(model.particle_count)
    np.add.at(expected, tets.ravel(), np.repeat(1000.0 * volume / 36.0, 4))
    np.add.at(expected, edges.ravel(), np.repeat(1000.0 * volume * 4.0 / 27.0, 6))
    assert np.allclose(mass, expected, rtol=1e-12)


def test_rest_and_rigid_motion_are_force_free():
    model = block().finalize(dtype=wp.float64)
    x = model.particle_q.numpy().copy()
    assert np.abs(step_forces(model, x)).max() <= 1e-10
    assert np.abs(step_forces(model, (x - x.mean(axis=0)) @ RIGID.T + np.array([0.5, 1.0, -2.0]))).max() <= 1e-10
    assert np.abs(step_forces(model, 1.01 * x)).max() > 1.0


@pytest.mark.parametrize("fiber", [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0)], ids=["volumetric", "fiber"])
def test_forces_are_minus_the_energy_gradient(fiber):
    """Activated quadratic tets with a different material in every tet; a curved (per-node
    random) deformation, not only an affine one."""
    model = block(fiber=fiber).finalize(dtype=wp.float64)
    rng = np.random.default_rng(21)
    model.tet_mu.assign(model.tet_mu.numpy() * rng.uniform(0.5, 2.0, model.tet_count))
    control = model.control()
    control.tet_activation.assign(rng.uniform(-0.3, 0.5, model.tet_count))
    q = random_deformation(model, rng, noise=0.005)
    check_consistency(model, q, control=control, rng=rng)


def test_patch_test_and_exact_quadratic_field():
    """A homogeneous deformation gives the linear block's forces on the vertices and energy;
    a quadratic displacement field (linear strain) is represented exactly: the energy from the
    4-point rule equals the exact integral of the small-strain energy of that field."""
    quadratic, linear = block(dims=(2, 2, 2)).finalize(dtype=wp.float64), block(1, (2, 2, 2)).finalize(dtype=wp.float64)
    A = np.eye(3) + np.random.default_rng(3).uniform(-0.1, 0.1, (3, 3))
    xq, xl = quadratic.particle_q.numpy(), linear.particle_q.numpy()
    centre = xl.mean(axis=0)
    assert energy(quadratic, (xq - centre) @ A.T) == pytest.approx(energy(linear, (xl - centre) @ A.T), rel=1e-12)
    # bending field u = eps (0, 0, x'^2) in the block's frame: strain linear in x', energy exact
    model = wpsim.ModelBuilder(gravity=0.0)
    model.add_soft_grid((0.0, 0.0, 0.0), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                        young_modulus=1.0e4, poisson_ratio=0.0, order=2)
    model = model.finalize(dtype=wp.float64)
    x = model.particle_q.numpy()
    eps = 1e-5
    u = np.zeros_like(x)
    u[:, 2] = eps * x[:, 0] ** 2
    # small strain: e_xz = eps x, energy = integral of mu (2 e_xz^2) = 2 mu eps^2 int x^2 dV
    mu = 1.0e4 / 2.0
    exact = 2.0 * mu * eps**2 * (0.2**3 / 3.0) * 0.1 * 0.1
    assert energy(model, x + u) - energy(model, x) == pytest.approx(exact, rel=1e-4)


def test_quadratic_tets_bend_where_linear_ones_lock():
    """A clamped 2-cell-thick beam pulled down at its tip by the same forces: the quadratic
    mesh deflects several times more than the linear one (which locks in bending), and within
    a few per cent of the quadratic mesh at twice the resolution."""

    def tip_deflection(order, cells):
        b = wpsim.ModelBuilder(gravity=0.0)
        n = 4 * cells
        b.add_soft_grid((0.0, 0.0, 0.0), dim_x=n, dim_y=cells, dim_z=cells, cell_x=0.4 / n, cell_y=0.04 / cells,
                        cell_z=0.04 / cells, young_modulus=1.0e6, poisson_ratio=0.3, order=order,
                        fixed=[i for i in range((n + 1) * (cells + 1) ** 2) if i % (n + 1) == 0])
        model = b.finalize(dtype=wp.float64)
        x = model.particle_q.numpy()
        tip = np.flatnonzero(np.isclose(x[:, 0], 0.4))
        free = np.flatnonzero(model.particle_mass.numpy() > 0)
        load = np.zeros_like(x)
        load[tip, 2] = -0.05 / len(tip)  # 0.05 N in all: a small deflection, linear elasticity
        solver = wpsim.SemiImplicitSolver(model)
        state_in, state_out = model.state(requires_grad=False), model.state(requires_grad=False)

        def force(q):
            state_in.particle_q.assign(q)
            solver.step(state_in, state_out, None, 1.0e-4)
            return state_in.particle_f.numpy()[free].ravel()

        def stiffness_times(v, h=1e-7):  # K v by a central difference of the forces at rest (step h m)
            size = np.linalg.norm(v)
            if size == 0.0:
                return np.zeros_like(v)
            d = np.zeros_like(x)
            d[free] = (h / size) * v.reshape(-1, 3)
            return -(force(x + d) - force(x - d)) * (size / (2.0 * h))

        K = LinearOperator((3 * len(free), 3 * len(free)), matvec=stiffness_times)
        u, info = cg(K, load[free].ravel(), rtol=1e-7, maxiter=3000)
        assert info == 0
        moved = np.zeros_like(x)
        moved[free] = u.reshape(-1, 3)
        return -moved[tip, 2].mean()

    linear, quadratic, fine = tip_deflection(1, 1), tip_deflection(2, 1), tip_deflection(2, 2)
    beam = 0.05 * 0.4**3 / (3.0 * 1.0e6 * 0.04**4 / 12.0)  # Euler-Bernoulli: 5.0 mm
    assert quadratic > 3.0 * linear
    assert abs(quadratic - fine) <= 0.05 * fine
    assert abs(fine - beam) <= 0.05 * beam, (linear, quadratic, fine, beam)


def test_ten_node_files_in_any_edge_order_and_bad_input():
    """(E, 10) tets import with their edge nodes in any order (matched to the edge midpoints);
    curved or misnumbered ones, smoothing and a wrong order are refused naming the problem."""
    x = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
    vertices, edges = geometry.edge_midpoint_nodes(x, np.array([[0, 1, 2, 3]]))
    shuffled = np.concatenate([[0, 1, 2, 3], edges[0][[2, 0, 5, 1, 4, 3]]])
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_mesh(vertices, [shuffled], young_modulus=1e4, poisson_ratio=0.3)
    model = b.finalize(dtype=wp.float64)
    assert model.tet_edge_indices.numpy().tolist() == [edges[0].tolist()]
    curved = vertices.copy()
    curved[edges[0][0]] += (0.0, 0.0, 0.02)
    with pytest.raises(ValueError, match="tetrahedron 0: its nodes 4-9 .* are not the midpoints"):
        wpsim.ModelBuilder().add_soft_mesh(curved, [shuffled], young_modulus=1e4, poisson_ratio=0.3)
    with pytest.raises(ValueError, match="order must be 1 .* or 2"):
        wpsim.ModelBuilder().add_soft_mesh(vertices, [shuffled], young_modulus=1e4, poisson_ratio=0.3, order=1)
    with pytest.raises(ValueError, match="cannot be strain-smoothed"):
        block(dims=(1, 1, 1)).add_soft_mesh(x, [[0, 1, 2, 3]], young_modulus=1e4, poisson_ratio=0.3, order=2,
                                             strain_smoothing=True)
    b = wpsim.ModelBuilder()
    b.add_particles(vertices, masses=0.1, radii=0.01)
    swapped = edges[0][[1, 0, 2, 3, 4, 5]]  # the nodes of edges (0, 1) and (1, 2) exchanged
    with pytest.raises(ValueError, match="tetrahedron 0: edge node .* off the midpoint"):
        b.add_tetrahedra([[0, 1, 2, 3]], mu=1e4, lam=1e4, edge_nodes=[swapped])


def test_clamped_edge_nodes_and_replicated_worlds():
    """With order 2, an edge node is fixed where both its ends are; replicated worlds keep -1
    for linear tets and shift the edge nodes of quadratic ones."""
    b = block(dims=(2, 1, 1), fixed=[0, 3, 6, 9])  # the x = 0 face of the 3 x 2 x 2 grid
    model = b.finalize(dtype=wp.float64)
    x0 = model.particle_q.numpy()
    fixed = np.flatnonzero(model.particle_mass.numpy() == 0.0)
    face = np.flatnonzero(np.isin(np.arange(12), [0, 3, 6, 9]))
    assert set(face) <= set(fixed)
    plane = x0[face]  # every fixed node lies in the plane of the clamped face
    normal = np.cross(plane[1] - plane[0], plane[2] - plane[0])
    assert np.abs((x0[fixed] - plane[0]) @ normal).max() <= 1e-12 * np.linalg.norm(normal)
    assert len(fixed) == 4 + 5  # the face's 4 vertices and the midpoints of its 5 edges (4 sides, 1 diagonal)
    mixed = wpsim.ModelBuilder(gravity=0.0)
    mixed.add_builder(block(order=1))
    mixed.add_builder(block(order=2))
    both = wpsim.ModelBuilder(gravity=0.0)
    both.replicate(mixed, 2)
    model = both.finalize(dtype=wp.float64)
    edges = model.tet_edge_indices.numpy()
    per_world = model.tet_count // 2
    linear = block(order=1).tetrahedra.count
    assert (edges[:linear] == -1).all() and (edges[per_world:per_world + linear] == -1).all()
    shift = model.particle_count // 2
    assert (edges[per_world + linear:] == edges[linear:per_world] + shift).all()
    assert tet_volume_ratios(model, model.state()).min() == pytest.approx(1.0)


def test_surface_follows_the_edge_nodes():
    """A quadratic tet's boundary face splits into four triangles at its edge nodes, keeping
    the outward orientation."""
    x = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
    vertices, edges = geometry.edge_midpoint_nodes(x, np.array([[0, 1, 2, 3]]))
    faces = geometry.boundary_faces([[0, 1, 2, 3]], edges)
    assert faces.shape == (16, 3)
    centre = vertices[:4].mean(axis=0)
    for tri in vertices[faces]:
        normal = np.cross(tri[1] - tri[0], tri[2] - tri[0])
        assert normal @ (tri.mean(axis=0) - centre) > 0
    area = sum(np.linalg.norm(np.cross(t[1] - t[0], t[2] - t[0])) / 2 for t in vertices[faces])
    flat = sum(np.linalg.norm(np.cross(t[1] - t[0], t[2] - t[0])) / 2 for t in x[geometry.boundary_faces([[0, 1, 2, 3]])])
    assert area == pytest.approx(flat, rel=1e-12)
    assert (geometry.boundary_faces([[0, 1, 2, 3]], [[-1] * 6]) == geometry.boundary_faces([[0, 1, 2, 3]])).all()


def test_refined_surface_is_closed_and_encloses_the_volume():
    """The split faces of a quadratic block close up across tets (shared edge nodes), and
    enclose the tets' volume."""
    model = block(dims=(3, 2, 2)).finalize(dtype=wp.float64)
    x = model.particle_q.numpy()
    faces = geometry.boundary_faces(model.tet_indices.numpy(), model.tet_edge_indices.numpy())
    edges = {}
    for f in faces:
        for a, b in ((f[0], f[1]), (f[1], f[2]), (f[2], f[0])):
            edges[a, b] = edges.get((a, b), 0) + 1
    assert all(count == 1 and edges.get((b, a)) == 1 for (a, b), count in edges.items())
    volume = np.einsum("ij,ij->i", x[faces[:, 0]], np.cross(x[faces[:, 1]], x[faces[:, 2]])).sum() / 6.0
    assert volume == pytest.approx(0.3 * 0.2 * 0.2, rel=1e-12)


def test_markers_follow_the_quadratic_field():
    """A marker inside a quadratic tet moves as the quadratic displacement field moves its
    point (a linear tet would interpolate the vertices only)."""
    from wpsim.diff.markers import TetMarkers

    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_grid((0.0, 0.0, 0.0), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    young_modulus=1.0e4, poisson_ratio=0.3, order=2)
    model = b.finalize(dtype=wp.float64)
    points = np.array([[0.03, 0.04, 0.05], [0.17, 0.06, 0.02], [0.11, 0.09, 0.08]])
    markers = TetMarkers(model, ["a", "b", "c"], points)

    def field(p):
        return p + np.stack([0.1 * p[:, 1] ** 2, -0.2 * p[:, 0] * p[:, 2], 0.3 * p[:, 0] ** 2], axis=1)

    state = model.state()
    state.particle_q.assign(field(model.particle_q.numpy()))
    assert np.abs(markers.positions(state).numpy() - field(points)).max() <= 1e-14


def test_usd_stage_holds_the_refined_surface(tmp_path):
    from test_usd import read_stage

    from wpsim.io.usd_export import write_rollouts

    model = block(dims=(2, 1, 1)).finalize()
    path = write_rollouts(tmp_path / "quadratic.usda", model, {"rest": [model.state()] * 4}, fps=30.0)
    meshes = [p for p in read_stage(path)["prims"].values() if p["type"] == "Mesh" and "counts" in p]
    faces = geometry.boundary_faces(model.tet_indices.numpy(), model.tet_edge_indices.numpy())
    assert [len(m["counts"]) for m in meshes] == [len(faces)] and len(faces) == 4 * 20
