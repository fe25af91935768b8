"""The fused soft-constraint contact step (one launch per step, no read-back): bitwise the
staged schedule's results, its health kept on the device per world, and a float32 stance
that converges in a few iterations."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from wpsim.bench.scene_speed import count_launches
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
from wpsim.solvers.fused_soft_contact import FusedSoftContactStep

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def quadruped(worlds: int, dtype, hip_turn: float = 0.2) -> tuple:
    """(model, the file's time step, its contact settings) of ``worlds`` quadrupeds, each world's
    front-left hip turned by its own angle in [-hip_turn, hip_turn] rad so that the worlds differ
    (one world: -hip_turn)."""
    builder, scene = import_mjcf(ASSETS / "quadruped.xml")
    model = builder.replicated(worlds).finalize(device="cpu", dtype=dtype)
    q = model.joint_q.numpy().reshape(worlds, -1)
    q[:, 7] = np.linspace(-hip_turn, hip_turn, worlds)  # front-left hip
    model.joint_q.assign(q.reshape(-1))
    return model, float(scene.timestep), scene.contact_settings


def run(solver, model, dt: float, steps: int):
    a, b = model.state(), model.state()
    for _ in range(steps):
        solver.step(a, b, None, dt)
        a, b = b, a
    return a


@pytest.mark.parametrize("dtype, warm_start", [(wp.float32, True), (wp.float64, True), (wp.float32, False)])
def test_fused_step_is_bitwise_the_staged_schedule(dtype, warm_start):
    model, dt, settings = quadruped(3, dtype)
    finals, records = [], []
    for fused in (False, True):
        solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings, warm_start=warm_start),
                                    fused=fused)
        assert isinstance(solver.fused, FusedSoftContactStep) == fused
        final = run(solver, model, dt, 500)  # the feet land after ~150 steps
        finals.append((final.joint_q.numpy(), final.joint_qd.numpy(), final.joint_qdd_warm_start.numpy()))
        records.append((solver.health().contact_iterations, solver.soft_contact.active_contacts()))
        assert solver.health().ok
    for staged, fused in zip(*finals):
        np.testing.assert_array_equal(staged, fused)
    assert records[0] == records[1] and records[0][0] >= 2 and records[0][1] >= 8


def test_the_solve_visits_only_the_pairs_in_contact():
    """On its feet, each quadruped's solve walks its foot-ground pairs in contact, not its 13
    pairs (the others are apart: their rows add nothing): both schedules list exactly the
    pairs with a slot in contact, in the same order."""
    model, dt, settings = quadruped(2, wp.float32)
    listed = []
    for fused, prefix in ((False, ""), (True, "fused_")):
        solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings), fused=fused)
        run(solver, model, dt, 400)
        contact = solver.soft_contact
        pairs = contact.pairs
        in_contact = contact._last_in_contact.numpy()
        first, end = pairs.row_bounds
        touching = [p for p in range(pairs.count) if in_contact[first[p]:end[p]].any()]
        starts = pairs.articulation_pair_start.numpy()
        counts = contact._buffers[prefix + "touching_pair_count"].numpy()
        entries = contact._buffers[prefix + "touching_pairs"].numpy()
        lists = [sorted(entries[starts[a]:starts[a] + counts[a]]) for a in range(model.articulation_count)]
        assert sorted(p for entry in lists for p in entry) == touching
        assert pairs.count == 26 and 2 <= len(touching) <= 8
        listed.append(lists)
    assert listed[0] == listed[1]


def test_fused_step_is_one_launch_without_read_back(monkeypatch):
    model, dt, settings = quadruped(1, wp.float32)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings), threads=1)
    a, b = model.state(), model.state()
    solver.step(a, b, None, dt)
    reads = []
    original = wp.array.numpy
    monkeypatch.setattr(wp.array, "numpy", lambda self: reads.append(self) or original(self))
    assert count_launches(lambda: solver.step(b, a, None, dt)) == 1
    assert reads == []


def stance_iterations(solver, state, dt: float, steps: int) -> list:
    """Newton iterations of each of ``steps`` single steps from ``state`` (in place)."""
    per_step = []
    for _ in range(steps):
        solver.reset_health()
        solver.advance(state, None, dt, 1)
        per_step.append(solver.health().contact_iterations)
    return per_step


@pytest.mark.parametrize("hip_turn", [0.2, 0.0])
def test_float32_stance_converges_in_few_iterations(hip_turn):
    """Standing on its feet in float32 (the default precision) for 2 s, with a hip turned (the
    robot still rocks, 0.08 rad/s) or at rest: no unconverged step; the median step takes at
    most 3 Newton iterations from the unconstrained accelerations (14 % of steps ran the cap of
    20 before the tolerance was precision-aware), no more from the warm start (measured with the
    hip turned: 3 and 2), and 1 at rest."""
    model, dt, settings = quadruped(1, wp.float32, hip_turn)
    medians = {}
    for warm_start in (False, True):
        solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings, warm_start=warm_start))
        state = model.state()
        solver.advance(state, None, dt, 4000)
        report = solver.health()
        assert report.ok and not report.unconverged_contact, str(report)
        assert solver.soft_contact.active_contacts() == 4
        per_step = stance_iterations(solver, state, dt, 200)
        assert max(per_step) <= 5
        medians[warm_start] = np.median(per_step)
        assert abs(state.joint_q.numpy()[2] - 0.43) < 0.01  # the torso stands at its height
    assert medians[False] <= 3 and medians[True] <= medians[False]
    if hip_turn == 0.0:
        assert medians[True] == 1


@pytest.mark.parametrize("scale", [0.0, 1.0, 1e4])
def test_warm_started_step_finds_the_cold_solution(scale):
    """From a standing state whose warm start is the last step's accelerations (scale 1), zero,
    or far off (1e4 times them, reversed): one step lands where the solve from the
    unconstrained accelerations does, to the convergence tolerance, in no more iterations."""
    model, dt, settings = quadruped(1, wp.float32, 0.0)
    cold = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings, warm_start=False))
    warm = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings))
    state = model.state()
    cold.advance(state, None, dt, 1500)
    state.joint_qdd_warm_start.assign(state.joint_qdd_warm_start.numpy() * (-scale if scale > 1 else scale))
    results = []
    for solver in (cold, warm):
        start = model.state()
        start.assign(state)
        solver.reset_health()
        solver.advance(start, None, dt, 1)
        results.append((start.joint_qd.numpy(), start.joint_qdd_warm_start.numpy(), solver.health().contact_iterations))
    (qd_cold, accel_cold, its_cold), (qd_warm, accel_warm, its_warm) = results
    assert its_warm <= its_cold
    bound = cold.soft_contact._tolerance * (1.0 + np.abs(accel_cold).max())
    assert np.abs(accel_warm - accel_cold).max() <= bound
    assert np.abs(qd_warm - qd_cold).max() <= dt * bound


def test_fused_step_reports_an_unconverged_world_from_the_device():
    model, dt, settings = quadruped(2, wp.float32)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings, iterations=1))
    assert solver.fused is not None
    run(solver, model, dt, 400)
    report = solver.health()
    assert not report.ok and sorted(report.unconverged_contact) == [0, 1]
    for entry in report.unconverged_contact.values():
        assert 0 < entry.first_step < 400 and 0 < entry.steps <= 400
        assert entry.worst_residual > entry.tolerance and entry.iterations == 1
    assert report.contact_iterations == 1
    solver.reset_health()
    assert solver.health().ok


def test_a_model_without_a_joint_dof_steps_in_every_schedule(tmp_path):
    """A robot file of fixed links alone (as pybullet_data's cube and table: 49 of its files)
    steps under soft-constraint and penalty contact, staged and fused (the fused soft step
    read its empty arrays and crashed the process; the staged step raised AttributeError on
    its launch of no threads)."""
    from wpsim.tasks.robot_scene import robot_scene

    path = tmp_path / "block.urdf"
    path.write_text('<robot name="block"><link name="base"><inertial><mass value="1"/>'
                    '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
                    '<collision><origin xyz="0 0 0.05"/><geometry><box size="0.2 0.2 0.2"/></geometry>'
                    '</collision></link></robot>')
    builder, scene = robot_scene(path)
    model = builder.finalize(device="cpu", dtype=wp.float32)
    assert model.joint_dof_count == 0 and model.shape_count >= 2
    for soft in (SoftContactOptions(**scene.contact_settings), None):
        for fused in (False, None):
            solver = SemiImplicitSolver(model, soft_contact=soft, fused=fused)
            a, b = model.state(), model.state()
            solver.step(a, b, None, 1e-3)
            solver.advance(b, None, 1e-3, 5)
            assert solver.health().ok
            np.testing.assert_array_equal(b.body_q.numpy(), a.body_q.numpy())  # nothing moves


def recorded_gradients(model, settings: dict, fused: bool, start, dt: float, steps: int) -> tuple:
    """The tape gradients of a weighted sum of the final joint state of ``steps`` recorded steps
    from ``start`` with respect to the start state, the position targets, and the bodies' masses
    and the shapes' friction, and the tape's entries per step."""
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings), fused=fused)
    control = model.control(requires_grad=True)
    control.joint_target_q.assign(control.joint_target_q.numpy() + 0.05)
    states = [model.state(requires_grad=True) for _ in range(steps + 1)]
    states[0].assign(start)
    tape = wp.Tape()
    with tape:
        for k in range(steps):
            solver.step(states[k], states[k + 1], control, dt)
    final = states[-1]
    rng = np.random.default_rng(0)
    tape.backward(grads={final.joint_q: wp.array(rng.normal(size=final.joint_q.shape[0]), dtype=final.joint_q.dtype),
                         final.joint_qd: wp.array(rng.normal(size=final.joint_qd.shape[0]), dtype=final.joint_q.dtype)})
    grads = tuple(a.grad.numpy().copy() for a in (states[0].joint_q, states[0].joint_qd, control.joint_target_q,
                                                     model.body_mass, model.shape_mu))
    tape.zero()
    model.body_mass.grad.zero_()
    model.shape_mu.grad.zero_()
    assert solver.health().ok
    return grads, len(tape.launches) / steps


def test_recorded_fused_steps_have_the_staged_gradients():
    """A recorded fused step runs its one launch and replays the staged schedule at that
    solution in its backward: 40 recorded steps of two quadrupeds standing on their feet (every
    step in contact) give the staged path's gradients of the start state, the position targets,
    the masses and the friction coefficients, to round-off, with one tape entry per step."""
    builder, scene = import_mjcf(ASSETS / "quadruped.xml")
    model = builder.replicated(2).finalize(device="cpu", dtype=wp.float64, requires_grad=True)
    dt, settings = float(scene.timestep), scene.contact_settings
    start = model.state()
    SemiImplicitSolver(model, soft_contact=SoftContactOptions(**settings)).advance(start, None, dt, 400)
    (staged, staged_entries), (fused, fused_entries) = (recorded_gradients(model, settings, f, start, dt, 40)
                                                        for f in (False, True))
    for name, a, b in zip(("joint_q", "joint_qd", "joint_target_q", "body_mass", "shape_mu"), staged, fused):
        assert np.abs(a).max() > 1e-6, name  # every family gets a gradient through the contact
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12 * np.abs(a).max(), err_msg=name)
    assert fused_entries == 1 and staged_entries > 5


def finger_plans(fused, worlds: int = 4) -> tuple:
    """(cost, states, gradient) of finger-spin plans (finger and spinner: two articulations that
    one contact pair joins, so each world is one island of 3 dofs) whose first half pushes the
    bar and whose second pulls the finger back off it, and the problem's solver."""
    from wpsim.tasks import finger_spin

    x0, targets = finger_spin.initial_states(worlds, 0)
    problem = finger_spin.make_problem(x0, targets, steps=16)
    problem.make_solver = lambda model: SemiImplicitSolver(model, soft_contact=SoftContactOptions(time_constant=0.05),
                                                           fused=fused)
    U = np.zeros((worlds, 16, 2))
    U[:, :8] = 0.05 * np.sign(targets - x0[:, finger_spin.SPINNER])[:, None, None]
    U[:, 8:] = -U[:, :8]
    cost, states = problem.evaluate(U)
    _, _, gradient = problem.cost_and_gradient(U)
    return cost, states, gradient, problem


def test_articulations_joined_by_contact_are_one_island_of_the_fused_step():
    """The finger and its spinner are stepped together by one thread of the fused step; the
    plans' states and gradients are the staged schedule's to the solve's tolerance (the staged
    islands split while the finger is off the bar) through contact made and broken."""
    from wpsim.tasks import finger_spin

    staged, fused = finger_plans(False), finger_plans(None)
    assert isinstance(fused[3].plans.solver.fused, FusedSoftContactStep)
    assert staged[3].plans.solver.fused is None
    spinner_turn = np.abs(staged[1][:, -1, finger_spin.SPINNER] - staged[1][:, 0, finger_spin.SPINNER])
    assert spinner_turn.min() > 0.02  # the finger pushed the bar
    np.testing.assert_allclose(fused[1], staged[1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fused[0], staged[0], rtol=1e-9)
    np.testing.assert_allclose(fused[2], staged[2], rtol=0, atol=1e-7 * np.abs(staged[2]).max())


def test_a_contact_island_of_articulations_apart_in_the_model_is_stepped_staged():
    """Articulations 0 and 2 that may touch, with articulation 1 between them in the model: the
    fused step would need the island's dofs reordered, so the staged schedule steps it, saying why."""
    from wpsim.core.builder import ModelBuilder

    builder = ModelBuilder()
    for k in range(3):
        body = builder.add_body()
        builder.add_shape_sphere(body, radius=0.1)
        builder.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0), parent_pos=(0.3 * k, 0.0, 0.0))
    builder.exclude_contact(0, 1)
    builder.exclude_contact(1, 2)
    model = builder.finalize(device="cpu", dtype=wp.float64)
    options = SoftContactOptions()
    assert SemiImplicitSolver(model, soft_contact=options).fused is None
    with pytest.raises(ValueError, match="not consecutive in the model"):
        SemiImplicitSolver(model, soft_contact=options, fused=True)


def test_joint_couplings_are_stepped_by_the_fused_step(tmp_path):
    """A hinge chain held by a quadratic joint equality (MuJoCo's law, a row folded into the
    joint-space system): the fused step takes it, its states are bitwise the staged schedule's
    over 300 steps, and its recorded gradients are the staged path's."""
    from test_equality_rows import CHAIN, JOINT

    path = tmp_path / "chain.xml"
    path.write_text(CHAIN.format(equalities=JOINT))
    builder, scene = import_mjcf(path)
    model = builder.finalize(device="cpu", dtype=wp.float64, requires_grad=True)
    assert model.coupling_count == 1
    options = SoftContactOptions(**scene.contact_settings, equalities=True)
    finals, grads = [], []
    for fused in (False, True):
        solver = SemiImplicitSolver(model, soft_contact=options, fused=fused)
        assert isinstance(solver.fused, FusedSoftContactStep) == fused
        states = [model.state(requires_grad=True) for _ in range(301)]
        states[0].joint_qd.assign([0.4, -0.3, 0.2])
        tape = wp.Tape()
        with tape:
            for k in range(300):
                solver.step(states[k], states[k + 1], None, float(scene.timestep))
        tape.backward(grads={states[-1].joint_q: wp.array([1.0, -2.0, 0.5], dtype=wp.float64)})
        finals.append(states[-1].joint_q.numpy().copy())
        grads.append((states[0].joint_q.grad.numpy().copy(), states[0].joint_qd.grad.numpy().copy()))
        tape.zero()
    assert np.abs(finals[0] - states[0].joint_q.numpy()).max() > 0.05  # the chain swings
    np.testing.assert_array_equal(finals[1], finals[0])
    for staged, fused in zip(*grads):
        np.testing.assert_allclose(fused, staged, rtol=1e-12, atol=1e-14)
    assert np.abs(grads[0][1]).max() > 1e-3
