"""Markers (wpsim.diff.markers), the activation-schedule controller and shared parameters:
positions against hand computations, gradients against central differences in float64."""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.core.meshing import refine_tets, tet_quality
from wpsim.diff import Rollout, check_gradient
from wpsim.diff.losses import squared_distance
from wpsim.diff.markers import BodyMarkers, TetMarkers, locate_in_tets
from wpsim.opt import Parameter, Problem
from wpsim.solvers.controllers import ActivationSchedule


def soft_block():
    b = wpsim.ModelBuilder()
    b.add_soft_grid(pos=(0.0, 0.0, 0.3), dim_x=2, dim_y=1, dim_z=1, cell_x=0.05, cell_y=0.05, cell_z=0.05,
                    density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=1.0,
                    fiber=(1.0, 0.0, 0.0), fixed=[0])
    return b.finalize(dtype=wp.float64, requires_grad=True)


def test_tet_markers_follow_the_mesh_and_their_gradient_is_right():
    model = soft_block()
    points = [(0.03, 0.02, 0.32), (0.09, 0.04, 0.34)]
    markers = TetMarkers(model, ["a", "b"], points)
    assert np.allclose(markers.weights.sum(axis=1), 1.0) and (markers.weights >= -1e-12).all()
    state = model.state()
    assert markers.positions(state).numpy() == pytest.approx(np.array(points))
    solver = wpsim.SemiImplicitSolver(model)
    target = wp.array([(0.0, 0.0, 0.0), (0.1, 0.0, 0.2)], dtype=wp.vec3d)

    def loss():
        final = wpsim.simulate(solver, state, 30, 1e-3)
        return squared_distance(markers.positions(final), target)

    for param in (state.particle_qd, model.tet_mu):
        result = check_gradient(loss, param, eps=1e-6)
        assert result.ok, (param, result)
    with pytest.raises(ValueError, match="lies in no tetrahedron"):
        TetMarkers(model, ["out"], [(1.0, 0.0, 0.0)])
    with pytest.raises(ValueError, match="unique"):
        TetMarkers(model, ["a", "a"], points)


def test_body_markers_follow_the_bodies_and_their_gradient_is_right():
    b = wpsim.ModelBuilder()
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.2), inertia=(0.01, 0.01, 0.001))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), parent_pos=(0.0, 0.0, 1.0), q=0.3, damping=0.05)
    model = b.finalize(dtype=wp.float64, requires_grad=True)
    markers = BodyMarkers(model, ["tip"], [link], [(0.0, 0.0, -0.4)])
    state = model.state()
    tip = markers.positions(state).numpy()[0]
    assert tip == pytest.approx([0.0, 0.4 * np.sin(0.3), 1.0 - 0.4 * np.cos(0.3)])
    assert not state.body_q.numpy().any()  # the state's own poses are not touched
    solver = wpsim.SemiImplicitSolver(model)
    target = wp.array([(0.0, 0.2, 0.7)], dtype=wp.vec3d)

    def loss():
        final = wpsim.simulate(solver, state, 50, 1e-3)
        return squared_distance(markers.positions(final), target)

    for param in (state.joint_q, model.body_mass, model.joint_damping):
        result = check_gradient(loss, param, eps=1e-6)
        assert result.ok, (param, result)
    with pytest.raises(ValueError, match="body 3 does not exist"):
        BodyMarkers(model, ["x"], [3], [(0.0, 0.0, 0.0)])


def test_activation_schedule_gain_gradient_and_shared_damping():
    """The controller's gain and one damping value shared by every tet, as Problem
    parameters, against central differences of the problem's loss."""
    model = soft_block()
    steps = 40
    schedule = ActivationSchedule(model, -0.2 * np.ones((steps, model.tet_count)) * np.linspace(0, 1, steps)[:, None])
    markers = TetMarkers(model, ["end"], [(0.09, 0.025, 0.325)])
    target = wp.array([(0.08, 0.02, 0.33)], dtype=wp.vec3d)

    def loss_fn(k, state, loss):
        if k == steps:
            squared_distance(markers.positions(state), target, loss=loss)

    rollout = Rollout(wpsim.SemiImplicitSolver(model), steps, 1e-3, loss_fn, control=schedule, mode="checkpoint")
    problem = Problem(rollout, model.state(), [Parameter("controller.gain", name="gain"),
                                               Parameter("model.tet_kd", shared=True, name="damping")])
    assert problem.params.labels == ["gain", "damping"] and problem.params.units == ["", "Pa s"]
    x = problem.x0
    _, grad = problem.loss_and_grad(x)
    for i, eps in enumerate((1e-6, 1e-6)):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        fd = (problem.loss(up) - problem.loss(down)) / (2 * eps)
        assert grad[i] == pytest.approx(fd, rel=1e-5)
    problem.params.write(np.array([0.5, 3.0]))
    assert model.tet_kd.numpy() == pytest.approx(np.full(model.tet_count, 3.0))
    assert schedule.gain.numpy()[0] == 0.5
    model.tet_kd.assign(np.arange(model.tet_count, dtype=np.float64))
    with pytest.raises(ValueError, match="shared=True needs equal values"):
        Problem(rollout, model.state(), [Parameter("model.tet_kd", shared=True)])
    with pytest.raises(ValueError, match="the controller has no array 'gian'"):
        Problem(rollout, model.state(), [Parameter("controller.gian")])
    with pytest.raises(ValueError, match="must be \\(steps, 12 tets\\)"):
        ActivationSchedule(model, np.zeros((3, 5)))


def test_refined_mesh_is_the_same_solid():
    b = wpsim.ModelBuilder()
    b.add_soft_grid(pos=(0.0, 0.0, 0.0), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                    density=1.0, young_modulus=1e4, poisson_ratio=0.3)
    vertices, tets = b.particles.array("particle_q"), b.tetrahedra.array("tet_indices")
    fine_vertices, fine_tets = refine_tets(vertices, tets)
    coarse, fine = tet_quality(vertices, tets), tet_quality(fine_vertices, fine_tets)
    assert len(fine_tets) == 8 * len(tets) and fine["min_volume_m3"] > 0.0
    assert fine["volume_m3"] == pytest.approx(coarse["volume_m3"], rel=1e-12)
    # shared edges get one midpoint: 3 x 2 x 2 grid vertices -> 5 x 3 x 3
    assert len(fine_vertices) == 45
    # every fine vertex lies in the coarse mesh
    tet_index, weights = locate_in_tets(vertices, tets, fine_vertices)
    assert (weights >= -1e-12).all()
