"""Bad input is rejected at build time with a ValueError naming the element kind and index."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.geometry import grid_points, grid_tetrahedra


def particles(builder, n=4):
    return builder.add_particles(np.eye(4, 3)[:n] + 0.1 * np.arange(n)[:, None])


def test_negative_mass_names_the_particle():
    b = wpsim.ModelBuilder()
    particles(b, 2)
    with pytest.raises(ValueError, match=r"particle 3: negative mass -1 kg"):
        b.add_particles([[0, 0, 0], [1, 0, 0]], masses=[1.0, -1.0])
    assert b.particle_count == 2


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("q", {"positions": [[0.0, np.nan, 0.0]]}),
        ("qd", {"positions": [[0.0, 0.0, 0.0]], "velocities": [np.inf, 0.0, 0.0]}),
        ("radius", {"positions": [[0.0, 0.0, 0.0]], "radii": np.nan}),
        ("drag", {"positions": [[0.0, 0.0, 0.0]], "drag": -np.inf}),
    ],
)
def test_non_finite_particle_input(field, kwargs):
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=rf"particle 0: {field} is not finite"):
        b.add_particles(**kwargs)


def test_mismatched_shapes():
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match="mismatched array shapes"):
        b.add_particles([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], masses=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="mismatched array shapes"):
        b.add_particles([[0.0, 0.0]])
    particles(b)
    with pytest.raises(ValueError, match="mismatched array shapes"):
        b.add_springs([(0, 1), (1, 2)], ke=[1.0, 2.0, 3.0])


def test_spring_indices_out_of_range_and_repeated():
    b = wpsim.ModelBuilder()
    particles(b)
    b.add_spring(0, 1, ke=10.0)
    with pytest.raises(ValueError, match=r"spring 1: particle index out of range in \[2, 7\]"):
        b.add_springs([(2, 7)], ke=1.0)
    with pytest.raises(ValueError, match=r"spring 1: repeated particle index"):
        b.add_spring(2, 2, ke=1.0)
    with pytest.raises(ValueError, match=r"spring 1: negative ke"):
        b.add_spring(1, 2, ke=-1.0)
    assert b.springs.count == 1


def test_zero_area_triangle():
    b = wpsim.ModelBuilder()
    b.add_particles([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 1, 0]])
    b.add_triangles([(0, 1, 3)], mu=1.0, lam=1.0)
    with pytest.raises(ValueError, match=r"triangle 1: zero area \(particles \[0, 1, 2\]\)"):
        b.add_triangles([(0, 1, 2)], mu=1.0, lam=1.0)


def test_inverted_and_flat_tetrahedra():
    b = wpsim.ModelBuilder()
    b.add_particles([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    b.add_tetrahedra([(0, 1, 2, 3)], mu=1.0, lam=1.0)
    with pytest.raises(ValueError, match=r"tetrahedron 1: inverted"):
        b.add_tetrahedra([(0, 2, 1, 3)], mu=1.0, lam=1.0)
    with pytest.raises(ValueError, match=r"tetrahedron 1: zero volume"):
        b.add_tetrahedra([(0, 1, 2, 4)], mu=1.0, lam=1.0)


def test_inverted_tet_in_a_soft_mesh_adds_nothing():
    b = wpsim.ModelBuilder()
    tets = grid_tetrahedra(1, 1, 1)
    tets[3] = tets[3][[0, 2, 1, 3]]
    with pytest.raises(ValueError, match=r"tetrahedron 3: inverted"):
        b.add_soft_mesh(grid_points((2, 2, 2), (1, 1, 1)), tets, young_modulus=1e4, poisson_ratio=0.3)
    assert b.particle_count == 0 and b.tetrahedra.count == 0


@pytest.mark.parametrize("nu", [0.5, 0.7, -1.0, -1.5])
def test_poisson_ratio_outside_range(nu):
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=rf"tetrahedron 0: Poisson ratio {nu:g} outside \(-1, 0.5\)"):
        b.add_soft_grid(pos=(0, 0, 0), dim_x=1, dim_y=1, dim_z=1, young_modulus=1e4, poisson_ratio=nu)
    assert b.particle_count == 0


def test_failing_cloth_material_leaves_builder_unchanged():
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=r"triangle 0: negative mu"):
        b.add_cloth_grid(pos=(0, 0, 0), dim_x=2, dim_y=2, tri_mu=-1.0)
    assert b.particle_count == 0 and b.triangles.count == 0 and b.hinges.count == 0


def test_nan_in_mesh_vertices_and_material():
    b = wpsim.ModelBuilder()
    x = grid_points((2, 2, 2), (1, 1, 1))
    x[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"mesh vertex 5: position is not finite"):
        b.add_soft_mesh(x, grid_tetrahedra(1, 1, 1), mu=1e3, lam=1e3)
    with pytest.raises(ValueError, match=r"tetrahedron 0: Young's modulus is not finite"):
        b.add_soft_grid(pos=(0, 0, 0), dim_x=1, dim_y=1, dim_z=1, young_modulus=np.nan, poisson_ratio=0.3)
    assert b.particle_count == 0


def test_bending_hinge_and_fiber_checks():
    b = wpsim.ModelBuilder()
    b.add_particles([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match=r"bending hinge 0: particle index out of range"):
        b.add_bending_hinges([(0, 1, 2, 9)], ke=1.0)
    with pytest.raises(ValueError, match=r"tetrahedron 0: fiber direction must be unit or zero"):
        b.add_tetrahedra([(0, 1, 2, 3)], mu=1.0, lam=1.0, fiber=(2.0, 0.0, 0.0))


def test_shape_checks():
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match=r"shape 0: radius must be positive"):
        b.add_shape_sphere(radius=0.0)
    with pytest.raises(ValueError, match=r"shape 0: body 3 does not exist"):
        b.add_shape_box(body=3)
    with pytest.raises(ValueError, match=r"shape 0: negative mu"):
        b.add_ground_plane(mu=-0.1)
    with pytest.raises(ValueError, match=r"shape 0: rotation must be a non-zero quaternion"):
        b.add_shape_capsule(rot=(0.0, 0.0, 0.0, 0.0))
    assert b.shapes.count == 0


def test_builder_options_rejected():
    with pytest.raises(ValueError, match="up_axis"):
        wpsim.ModelBuilder(up_axis="w")
    b = wpsim.ModelBuilder()
    with pytest.raises(ValueError, match="dtype"):
        b.finalize(dtype=wp.float16)
    with pytest.raises(ValueError, match="max_neighbors"):
        b.set_particle_contact(True, max_neighbors=0)
    with pytest.raises(ValueError, match="soft body material missing"):
        b.add_soft_grid(pos=(0, 0, 0))
    with pytest.raises(ValueError, match="either young_modulus and poisson_ratio, or mu and lam"):
        b.add_soft_grid(pos=(0, 0, 0), young_modulus=1e4, mu=1.0, lam=1.0)


def test_a_model_without_particles_simulates():
    model = wpsim.ModelBuilder().finalize()
    final = wpsim.simulate(wpsim.SemiImplicitSolver(model), model.state(), 3, 1e-3)
    assert final.particle_q.shape == (0,)
