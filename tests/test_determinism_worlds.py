"""Determinism (bitwise-identical reruns, forward and backward) and many-worlds equivalence.

The test world has everything that couples particles: ground contact with friction, a static
sphere (owned by the world), a soft body, a spring and particle-particle contact (a column of
touching particles, one that falls onto the soft body, one that falls onto the sphere).
"""

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.diagnostics import energy_report

DT = 1.0e-3


def world_builder():
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.2)
    b.add_soft_grid((0.0, 0.0, 0.02), dim_x=2, dim_y=1, dim_z=1, cell_x=0.05, cell_y=0.05, cell_z=0.05,
                    density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=5.0, radius=0.005)
    b.add_shape_sphere(pos=(0.4, 0.01, 0.04), radius=0.04, ke=2.0e3, kd=1.0, mu=0.2)
    first = b.add_particles(
        [(0.25, 0.0, 0.03), (0.255, 0.004, 0.065), (0.245, -0.003, 0.1), (0.05, 0.025, 0.15), (0.4, 0.0, 0.12)],
        velocities=[(0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.0, 0.0, -0.5), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)],
        masses=0.01, radii=0.02,
    )[0]
    b.add_spring(first, first + 1, ke=50.0, kd=0.1)
    return b


def scene(num_worlds, spacing=(0.0, 0.0, 0.0)):
    """``num_worlds`` copies of the world; particle contact is a setting of the scene builder."""
    s = wpsim.ModelBuilder()
    s.set_particle_contact(True, ke=1.0e3, kd=1.0, mu=0.3, max_neighbors=8)
    s.replicate(world_builder(), num_worlds, spacing)
    return s


def run(model, num_steps):
    """Ping-pong rollout; returns the final state and each particle's largest neighbour count."""
    solver = wpsim.SemiImplicitSolver(model)
    a, b = model.state(), model.state()
    max_neighbors = np.zeros(model.particle_count, dtype=np.int64)
    for _ in range(num_steps):
        solver.step(a, b, None, DT)
        max_neighbors = np.maximum(max_neighbors, a.neighbor_count.numpy())
        a, b = b, a
    assert solver.health().ok, str(solver.health())
    return a, max_neighbors


# --------------------------------------------------------------------------- determinism
def forward_backward(dtype):
    """Build from scratch, roll out on the tape, backprop a loss; return every result."""
    model = scene(2, spacing=(0.5, 0.0, 0.0)).finalize(requires_grad=True, dtype=dtype)
    solver = wpsim.SemiImplicitSolver(model)
    state0 = model.state()
    targets = wp.array(model.particle_q.numpy() + np.array([0.05, 0.0, 0.02]), dtype=model.vec3)
    tape = wp.Tape()
    with tape:
        states = wpsim.simulate(solver, state0, 150, DT, keep_states=True)
        final = states[-1]
        loss = wpsim.diff.losses.squared_distance(final.particle_q, targets)
    tape.backward(loss=loss)
    out = {
        "q": final.particle_q.numpy().copy(),
        "qd": final.particle_qd.numpy().copy(),
        "loss": loss.numpy().copy(),
        # each step's broad phase writes its neighbour list into that step's input state
        "neighbors": np.stack([s.neighbor_count.numpy() for s in states[:-1]]),
    }
    for name, arr in (("q0", state0.particle_q), ("qd0", state0.particle_qd)):
        out["grad_" + name] = arr.grad.numpy().copy()
    for name in ("particle_mass", "spring_ke", "tet_mu", "tet_lambda", "shape_ke", "shape_mu", "pair_ke", "pair_mu"):
        out["grad_" + name] = getattr(model, name).grad.numpy().copy()
    assert solver.health().ok, str(solver.health())
    return out


@pytest.mark.parametrize("dtype", [wp.float32, wp.float64], ids=["float32", "float64"])
def test_reruns_are_bitwise_identical(dtype):
    first = forward_backward(dtype)
    second = forward_backward(dtype)
    assert first.keys() == second.keys()
    for key in first:
        assert np.array_equal(first[key], second[key]), key
    # the gradients are not trivially zero: contact, elastic and friction parameters all matter
    for key in ("grad_q0", "grad_qd0", "grad_spring_ke", "grad_tet_mu", "grad_shape_ke", "grad_pair_ke"):
        assert np.abs(first[key]).max() > 0.0, key
    assert first["neighbors"].max() >= 1  # particle-particle contacts happened
    assert first["q"][:, 2].min() < 0.02  # and ground contacts (particle radius 2 cm)


# --------------------------------------------------------------------------- many worlds
STEPS = 300


@pytest.fixture(scope="module")
def single_world():
    model = scene(1).finalize(dtype=wp.float64)
    final, neighbors = run(model, STEPS)
    # the reference world has particle-particle contacts and ground contact
    assert neighbors.max() >= 1
    assert final.particle_q.numpy()[:, 2].min() < 0.02  # particles at rest on the ground (r = 2 cm)
    return model, final, neighbors


@pytest.mark.parametrize(
    "spacing", [(1.0, 0.0, 0.0), (0.37, 0.61, 0.0)], ids=["spaced_x", "spaced_xy"]
)
def test_replicated_worlds_match_single_world(single_world, spacing):
    model1, final1, neighbors1 = single_world
    n = 4
    model = scene(n, spacing).finalize(dtype=wp.float64)
    assert model.num_worlds == n
    assert np.array_equal(model.particle_world.numpy(), np.repeat(np.arange(n), model1.particle_count))
    final, neighbors = run(model, STEPS)
    P = model1.particle_count
    offsets = np.arange(n)[:, None, None] * np.array(spacing)
    x = final.particle_q.numpy().reshape(n, P, 3) - offsets
    v = final.particle_qd.numpy().reshape(n, P, 3)
    x1, v1 = final1.particle_q.numpy(), final1.particle_qd.numpy()
    assert np.array_equal(x[0], x1) and np.array_equal(v[0], v1)  # world 0 has no offset: bitwise
    assert np.abs(x - x1).max() <= 2e-12  # rounding of coordinates offset by up to 3 m, over 300 steps
    assert np.abs(v - v1).max() <= 1e-10  # velocities of ~1e-3..1 m/s at rest/contact
    assert np.array_equal(neighbors.reshape(n, P), np.broadcast_to(neighbors1, (n, P)))
    e1, e = energy_report(model1, final1), energy_report(model, final)
    for key in ("kinetic", "gravity", "elastic", "total"):
        assert e[key].shape == (n,)
        assert np.abs(e[key] - e1[key][0]).max() <= 1e-12 * max(1.0, abs(e1[key][0])), key


@pytest.mark.parametrize("spacing", [(0.0, 0.0, 0.0), (0.007, 0.004, 0.0)], ids=["coincident", "overlapping"])
def test_overlapping_worlds_do_not_collide(single_world, spacing):
    """Copies placed on top of each other (2 cm particles 8 mm apart, or exactly coincident)
    evolve exactly as if alone: no particle sees a particle of another world."""
    model1, final1, neighbors1 = single_world
    n = 3
    model = scene(n, spacing).finalize(dtype=wp.float64)
    final, neighbors = run(model, STEPS)
    P = model1.particle_count
    x = final.particle_q.numpy().reshape(n, P, 3) - np.arange(n)[:, None, None] * np.array(spacing)
    assert np.abs(x - final1.particle_q.numpy()).max() <= 1e-12
    # neighbour lists hold the same-world contacts only
    assert np.array_equal(neighbors.reshape(n, P), np.broadcast_to(neighbors1, (n, P)))
    if not any(spacing):
        assert np.array_equal(x, np.broadcast_to(final1.particle_q.numpy(), (n, P, 3)))
