"""Force / energy consistency of the elastic elements (float64).

For springs, cloth membrane triangles, bending hinges and tetrahedra (passive, volumetric
and fibre activation) the force the solver applies must be minus the gradient of the
energy that ``wpsim.diff.diagnostics.elastic_energy`` reports: the tape gradient of the energy
is compared with the forces of one step, and a central difference of the energy along a
random direction with the work of the forces. Rest states (and rigid motions of them) must
be force free.
"""

import contextlib

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.diagnostics import elastic_energy, tet_volume_ratios
from wpsim.diff.losses import linear_state_loss


def step_forces(model, q, qd=None, control=None):
    """Forces (P, 3) of one solver step from positions q (velocities qd, default 0)."""
    solver = wpsim.SemiImplicitSolver(model)
    state_in, state_out = model.state(requires_grad=False), model.state(requires_grad=False)
    state_in.particle_q.assign(q)
    if qd is not None:
        state_in.particle_qd.assign(qd)
    solver.step(state_in, state_out, control, 1.0e-4)
    return state_in.particle_f.numpy().copy()


def energy(model, q, control=None):
    state = model.state(requires_grad=False)
    state.particle_q.assign(q)
    return float(elastic_energy(model, state, control).numpy()[0])


def energy_gradient(model, q, control=None):
    """Tape gradient of the elastic energy w.r.t. the positions, and the energy."""
    state = model.state(requires_grad=True)
    state.particle_q.assign(q)
    tape = wp.Tape()
    with tape:
        e = elastic_energy(model, state, control)
    tape.backward(loss=e)
    return state.particle_q.grad.numpy().copy(), float(e.numpy()[0])


def check_consistency(model, q, control=None, rng=None, tol=1e-8, fd_tol=1e-6):
    """Assert tape grad(E) == -force (relative tol) and a central difference of E == -f.d."""
    rng = rng or np.random.default_rng(0)
    qd = rng.normal(0.0, 0.5, q.shape)  # kd = 0: velocities must not change the force
    f = step_forces(model, q, qd, control)
    grad, _ = energy_gradient(model, q, control)
    scale = np.linalg.norm(f)
    assert scale > 1e-3  # a configuration with real forces
    err = np.linalg.norm(grad + f) / scale
    assert err <= tol, err
    assert np.abs(grad + f).max() <= tol * np.abs(f).max()
    # independent of the tape: central difference of the energy along a random direction
    d = rng.normal(0.0, 1.0, q.shape)
    d *= 1e-3 * np.abs(q).max() / np.linalg.norm(d)
    eps = 1e-3
    fd = (energy(model, q + eps * d, control) - energy(model, q - eps * d, control)) / (2.0 * eps)
    work = -np.sum(f * d)
    assert abs(fd - work) <= fd_tol * abs(work), (fd, work)
    return err


def rotation(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * k @ k


RIGID = rotation((0.3, -0.5, 0.8), 1.1)


# --------------------------------------------------------------------------- springs
def spring_model():
    rng = np.random.default_rng(5)
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particles(rng.uniform(0.0, 0.3, (6, 3)), masses=0.1, radii=0.01)
    b.add_springs([(i, j) for i in range(6) for j in range(i + 1, 6)], ke=rng.uniform(10.0, 200.0, 15), kd=0.0)
    return b.finalize(dtype=wp.float64)


def test_springs_rest_and_energy_gradient():
    model = spring_model()
    x = model.particle_q.numpy().copy()
    assert np.abs(step_forces(model, x)).max() <= 1e-10
    assert np.abs(step_forces(model, x @ RIGID.T + 0.2)).max() <= 1e-10
    assert energy(model, x) == 0.0
    rng = np.random.default_rng(6)
    check_consistency(model, x + rng.normal(0.0, 0.03, x.shape), rng=rng)


# --------------------------------------------------------------------------- cloth
def cloth_model(tri_mu, tri_lambda, bend_ke):
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_cloth_grid(pos=(0.1, -0.2, 0.3), rot=(0.2, 0.1, 0.3, 0.9), dim_x=3, dim_y=2, cell_x=0.1, cell_y=0.1,
                     density=0.2, tri_mu=tri_mu, tri_lambda=tri_lambda, tri_kd=0.0, bend_ke=bend_ke, bend_kd=0.0)
    return b.finalize(dtype=wp.float64)


def test_cloth_membrane_rest_rigid_rotation_and_energy_gradient():
    model = cloth_model(tri_mu=50.0, tri_lambda=80.0, bend_ke=0.0)
    assert model.bend_count == 0 and model.tri_count == 12
    x = model.particle_q.numpy().copy()
    assert np.abs(step_forces(model, x)).max() <= 1e-10
    moved = (x - x.mean(axis=0)) @ RIGID.T + np.array([0.5, 1.0, -2.0])
    assert np.abs(step_forces(model, moved)).max() <= 1e-10
    assert abs(energy(model, moved)) <= 1e-12
    rng = np.random.default_rng(7)
    deformed = x @ np.array([[1.1, 0.05, 0.0], [0.0, 0.95, 0.1], [0.02, 0.0, 1.0]]).T + rng.normal(0.0, 0.01, x.shape)
    check_consistency(model, deformed, rng=rng)
    # a uniform 10% compression gives real forces: the zero-force bounds above are not vacuous
    assert np.abs(step_forces(model, 0.9 * x)).max() > 1.0


def test_cloth_bending_rest_rigid_rotation_and_energy_gradient():
    model = cloth_model(tri_mu=0.0, tri_lambda=0.0, bend_ke=0.05)
    assert model.bend_count > 0
    x = model.particle_q.numpy().copy()
    assert np.abs(step_forces(model, x)).max() <= 1e-10
    moved = (x - x.mean(axis=0)) @ RIGID.T + np.array([0.5, 1.0, -2.0])
    assert np.abs(step_forces(model, moved)).max() <= 1e-10
    rng = np.random.default_rng(8)
    corner = x[[0, 1, 4]]  # vertices (0, 0), (1, 0), (0, 1) of the 3x2-cell grid
    n = np.cross(corner[1] - corner[0], corner[2] - corner[0])
    n /= np.linalg.norm(n)
    assert np.abs((x - x[0]) @ n).max() < 1e-12  # n is the cloth normal
    bent = x + np.outer(rng.uniform(-0.03, 0.03, len(x)), n)  # out of plane: dihedral angles change
    check_consistency(model, bent, rng=rng)


def test_cloth_bending_angle_convention():
    """Single hinge: E = 1/2 ke (theta - theta_rest)^2 with the documented dihedral angle."""
    ke = 0.3
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particles([(0.0, 0.5, 0.0), (0.0, -0.5, 0.0), (0.0, 0.0, 0.0), (1.0, 0.0, 0.0)], masses=1.0, radii=0.01)
    b.add_bending_hinges([(0, 1, 2, 3)], ke=ke, kd=0.0)
    model = b.finalize(dtype=wp.float64)
    assert model.bend_rest_angle.numpy()[0] == pytest.approx(0.0, abs=1e-12)
    q = model.particle_q.numpy().copy()
    q[1] = (0.0, -0.5 * np.cos(0.4), 0.5 * np.sin(0.4))  # fold one wing by 0.4 rad about the edge
    assert energy(model, q) == pytest.approx(0.5 * ke * 0.4**2, rel=1e-12)
    check_consistency(model, q)


# --------------------------------------------------------------------------- tetrahedra
def soft_model(fiber=(0.0, 0.0, 0.0), dims=(2, 1, 1), strain_smoothing=False):
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_soft_grid((0.1, 0.2, 0.3), rot=(0.1, -0.2, 0.05, 0.97), dim_x=dims[0], dim_y=dims[1], dim_z=dims[2],
                    cell_x=0.1, cell_y=0.1, cell_z=0.1, density=1000.0, young_modulus=2.0e4, poisson_ratio=0.35,
                    kd=0.0, fiber=fiber, strain_smoothing=strain_smoothing)
    return b.finalize(dtype=wp.float64)


def random_deformation(model, rng, noise=0.01):
    x = model.particle_q.numpy().copy()
    A = np.eye(3) + rng.uniform(-0.15, 0.15, (3, 3))
    q = (x - x.mean(axis=0)) @ A.T + x.mean(axis=0) + rng.normal(0.0, noise, x.shape)
    state = model.state()
    state.particle_q.assign(q)
    assert tet_volume_ratios(model, state).min() > 0.3  # not inverted
    return q


def test_neo_hookean_zero_force_at_rest_and_under_rigid_motion():
    model = soft_model()
    x = model.particle_q.numpy().copy()
    f_rest = step_forces(model, x)
    assert np.abs(f_rest).max() <= 1e-10
    moved = (x - x.mean(axis=0)) @ RIGID.T + np.array([0.5, 1.0, -2.0])
    assert np.abs(step_forces(model, moved)).max() <= 1e-10
    # force scale of a 1% stretch, to show the 1e-10 bound is far below real forces
    assert np.abs(step_forces(model, 1.01 * x)).max() > 1.0


def test_neo_hookean_energy_gradient_is_minus_force():
    model = soft_model()
    rng = np.random.default_rng(9)
    check_consistency(model, random_deformation(model, rng), rng=rng)


def test_neo_hookean_energy_density_formula():
    """One tet: E = V (mu/2 (|F|^2 - 3) + l/2 (det F - alpha)^2), l = lambda + mu, alpha = 1 + mu/l."""
    E_mod, nu = 2.0e4, 0.35
    mu, lam = E_mod / (2 * (1 + nu)), E_mod * nu / ((1 + nu) * (1 - 2 * nu))
    rest = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])
    b = wpsim.ModelBuilder(gravity=0.0)
    b.add_particles(rest, masses=0.1, radii=0.01)
    b.add_tetrahedra([(0, 1, 2, 3)], mu=mu, lam=lam, kd=0.0)
    model = b.finalize(dtype=wp.float64)
    F = np.array([[1.1, 0.05, -0.02], [0.03, 0.9, 0.04], [0.0, -0.06, 1.05]])
    q = rest @ F.T
    lt = lam + mu
    alpha = 1.0 + mu / lt
    psi = 0.5 * mu * (np.sum(F * F) - 3.0) + 0.5 * lt * (np.linalg.det(F) - alpha) ** 2
    assert energy(model, q) == pytest.approx(psi * 0.1**3 / 6.0, rel=1e-12)
    psi_rest = 0.5 * lt * (1.0 - alpha) ** 2
    assert energy(model, rest) == pytest.approx(psi_rest * 0.1**3 / 6.0, rel=1e-12)
    check_consistency(model, q)


@pytest.mark.parametrize("fiber", [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0)], ids=["volumetric", "fiber"])
def test_activated_tetrahedra_energy_gradient_is_minus_force(fiber):
    model = soft_model(fiber=fiber)
    rng = np.random.default_rng(10)
    control = model.control()
    control.tet_activation.assign(rng.uniform(-0.3, 0.5, model.tet_count))
    q = random_deformation(model, rng)
    check_consistency(model, q, control=control, rng=rng)
    # the activation really enters the forces
    assert np.linalg.norm(step_forces(model, q, control=control) - step_forces(model, q)) > 1.0


@pytest.mark.parametrize(
    "fiber", [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0)], ids=["volumetric", "fiber"]
)
def test_activated_rest_shape_is_force_free(fiber):
    """With activation a the stress-free shape is F = Fa: (1 + a)^(1/3) I, or I + a d d^T."""
    a = 0.25
    model = soft_model(fiber=fiber)
    control = model.control()
    control.tet_activation.fill_(a)
    x = model.particle_q.numpy().copy()
    d = np.array(fiber)
    # the builder rotated the fibre with the body: use the model's fibre direction
    d = model.tet_fiber.numpy()[0] if d.any() else d
    Fa = np.eye(3) + a * np.outer(d, d) if d.any() else (1.0 + a) ** (1.0 / 3.0) * np.eye(3)
    q = (x - x[0]) @ Fa.T + x[0]
    assert np.abs(step_forces(model, q, control=control)).max() <= 1e-10
    assert np.abs(step_forces(model, x, control=control)).max() > 1.0  # the passive rest shape is not


def test_passive_tetrahedra_keep_the_activation_gradient():
    """At activation exactly 0 a volumetric tet skips the power (1 + a)^(-1/3) but keeps its
    derivative: tape gradients w.r.t. every tet's activation, of the elastic energy and of a
    step's velocities, equal central differences."""
    model = soft_model()
    rng = np.random.default_rng(14)
    q = random_deformation(model, rng)
    weight_qd = wp.array(rng.normal(0.0, 1.0, (model.particle_count, 3)), dtype=model.vec3)
    weight_q = wp.zeros_like(weight_qd)

    def measures(activation, record=False):
        """(elastic energy J, velocity probe after one step m/s), and with ``record`` their tape
        gradients w.r.t. the activations."""
        control = model.control(requires_grad=record)
        control.tet_activation.assign(activation)
        state_in, state_out = model.state(requires_grad=record), model.state(requires_grad=record)
        state_in.particle_q.assign(q)
        tape = wp.Tape()
        with tape:
            e = elastic_energy(model, state_in, control)
            wpsim.SemiImplicitSolver(model).step(state_in, state_out, control, 1.0e-3)
            probe = linear_state_loss(state_out, weight_q, weight_qd)
        values = (float(e.numpy()[0]), float(probe.numpy()[0]))
        if not record:
            return values
        grads = []
        for loss in (e, probe):
            tape.backward(loss=loss)
            grads.append(control.tet_activation.grad.numpy().copy())
            tape.zero()
        return values, grads

    zero = np.zeros(model.tet_count)
    _, grads = measures(zero, record=True)
    eps = 1.0e-6
    for k in range(model.tet_count):
        step = np.zeros(model.tet_count)
        step[k] = eps
        fd = (np.array(measures(step)) - np.array(measures(-step))) / (2.0 * eps)
        for grad, central in zip(grads, fd):
            assert grad[k] == pytest.approx(central, rel=1e-6, abs=1e-9 * np.abs(grad).max())
    assert all(np.abs(grad).max() > 0.0 for grad in grads)


@pytest.mark.parametrize("dtype", [wp.float32, wp.float64])
def test_unrecorded_steps_of_passive_tetrahedra_are_bitwise_the_recorded_steps(dtype):
    """Unrecorded CPU steps launch ``eval_tetrahedra_unrecorded``, where a tet at activation 0
    skips its active deformation: 30 steps of damped volumetric, fibre and strain-smoothed tets
    on the ground, every other one passive, are bitwise the recorded steps (whose kernel takes
    every tet through its active deformation), and the activations act."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.3)
    for k, (fiber, smoothed) in enumerate((((0.0, 0.0, 0.0), False), ((0.6, 0.8, 0.0), False),
                                           ((0.0, 0.0, 0.0), True))):
        b.add_soft_grid((0.3 * k, 0.0, 0.001), dim_x=2, dim_y=1, dim_z=1, cell_x=0.05, cell_y=0.05, cell_z=0.05,
                        density=500.0, young_modulus=2.0e4, poisson_ratio=0.3, kd=2.0, radius=0.005, fiber=fiber,
                        strain_smoothing=smoothed)
    model = b.finalize(device="cpu", dtype=dtype)
    every_other = np.where(np.arange(model.tet_count) % 2 == 0, 0.0, np.linspace(-0.3, 0.4, model.tet_count))

    def run(activation, recorded):
        """Final positions and velocities (m, m/s) and the solver."""
        control = model.control()
        control.tet_activation.assign(activation)
        solver = wpsim.SemiImplicitSolver(model)
        states = [model.state(requires_grad=False) for _ in range(31)]
        with wp.Tape() if recorded else contextlib.nullcontext():
            for k in range(30):
                solver.step(states[k], states[k + 1], control, 2.0e-4)
        return np.concatenate([states[-1].particle_q.numpy(), states[-1].particle_qd.numpy()]), solver

    unrecorded, solver = run(every_other, recorded=False)
    launched = {launch.command.kernel.key for plan in solver._prepared_particles._plans.values()
                for launch in plan.launches()}
    assert any(key.startswith("eval_tetrahedra_unrecorded") for key in launched), launched
    np.testing.assert_array_equal(run(every_other, recorded=True)[0], unrecorded)
    assert np.abs(unrecorded - run(np.zeros(model.tet_count), recorded=False)[0]).max() > 1.0e-6


# ------------------------------------------------------------- strain-smoothed tetrahedra
def test_smoothing_domains_are_the_faces_of_smoothed_tets():
    """A 2x1x1 grid (12 tets): every face of a smoothed tet is one domain, shared faces once."""
    model = soft_model(strain_smoothing=True)
    tets, domains = model.tet_indices.numpy(), model.domain_tets.numpy()
    faces = {tuple(sorted(t[list(f)])) for t in tets for f in ((1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1))}
    assert model.domain_count == len(faces) == len(domains)
    face_domain = model.tet_face_domain.numpy()
    for t, row in enumerate(face_domain):
        for k, d in enumerate(row):
            face = sorted(np.delete(tets[t], k))
            assert t in domains[d]
            other = [u for u in domains[d] if u not in (t, -1)]
            assert all(sorted(set(face) & set(tets[u])) == face for u in other)
    assert (domains[:, 1] >= 0).sum() == len(faces) - len(wpsim.core.geometry.boundary_faces(tets))
    assert model.tet_face_domain.numpy().min() >= 0 and soft_model().domain_count == 0


@pytest.mark.parametrize("fiber", [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0)], ids=["volumetric", "fiber"])
def test_smoothed_tetrahedra_energy_gradient_is_minus_force(fiber):
    """Forces of smoothed tets (activated, with a different material in every tet) are minus
    the gradient of their domain energy, and differ from the unsmoothed forces."""
    model = soft_model(fiber=fiber, dims=(2, 2, 1), strain_smoothing=True)
    rng = np.random.default_rng(12)
    model.tet_mu.assign(model.tet_mu.numpy() * rng.uniform(0.5, 2.0, model.tet_count))
    model.tet_lambda.assign(model.tet_lambda.numpy() * rng.uniform(0.5, 2.0, model.tet_count))
    control = model.control()
    control.tet_activation.assign(rng.uniform(-0.3, 0.5, model.tet_count))
    q = random_deformation(model, rng)
    check_consistency(model, q, control=control, rng=rng)
    plain = soft_model(fiber=fiber, dims=(2, 2, 1))
    plain.tet_mu.assign(model.tet_mu.numpy())
    plain.tet_lambda.assign(model.tet_lambda.numpy())
    difference = step_forces(model, q, control=control) - step_forces(plain, q, control=control)
    assert np.linalg.norm(difference) > 1e-2 * np.linalg.norm(step_forces(plain, q, control=control))


def test_smoothed_tetrahedra_pass_the_patch_test():
    """Under a homogeneous deformation every domain sees the tets' own F: forces and energy
    equal those of plain tets; the rest shape and rigid motions are force free."""
    model, plain = soft_model(dims=(2, 2, 2), strain_smoothing=True), soft_model(dims=(2, 2, 2))
    x = model.particle_q.numpy().copy()
    A = np.eye(3) + np.random.default_rng(3).uniform(-0.1, 0.1, (3, 3))
    q = (x - x.mean(axis=0)) @ A.T
    f, f_plain = step_forces(model, q), step_forces(plain, q)
    assert np.abs(f_plain).max() > 1.0
    assert np.abs(f - f_plain).max() <= 1e-9 * np.abs(f_plain).max()
    assert energy(model, q) == pytest.approx(energy(plain, q), rel=1e-12)
    assert np.abs(step_forces(model, x)).max() <= 1e-10
    assert np.abs(step_forces(model, (x - x.mean(axis=0)) @ RIGID.T + 0.3)).max() <= 1e-10


def test_smoothed_and_plain_bodies_in_one_model_do_not_share_domains():
    """Two blocks that touch (shared vertices are not possible across bodies, so they only
    share the model): the smoothed one gets domains, the plain one keeps its own stress."""
    b = wpsim.ModelBuilder(gravity=0.0)
    for offset, smooth in ((0.0, True), (0.5, False)):
        b.add_soft_grid((offset, 0.0, 0.0), dim_x=2, dim_y=1, dim_z=1, cell_x=0.1, cell_y=0.1, cell_z=0.1,
                        density=1000.0, young_modulus=2.0e4, poisson_ratio=0.35, strain_smoothing=smooth)
    model = b.finalize(dtype=wp.float64)
    face_domain = model.tet_face_domain.numpy()
    assert (face_domain[:12] >= 0).all() and (face_domain[12:] == -1).all()
    assert model.domain_count == soft_model(strain_smoothing=True).domain_count
    rng = np.random.default_rng(4)
    q = model.particle_q.numpy() + rng.normal(0.0, 0.01, (model.particle_count, 3))
    check_consistency(model, q, rng=rng)
