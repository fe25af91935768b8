"""Hostile input is refused before any work, with a ValueError (or, on the command line, one
line and exit status 2) naming the argument, field or element: solver entry points."""

from pathlib import Path

import numpy as np
import pytest
import warp as wp

import wpsim
from wpsim.diff.checkpoint import Rollout
from wpsim.io.mjcf import import_mjcf

ASSETS = Path(__file__).resolve().parents[1] / "assets"
DT = 1.0e-3


def particle_model(n: int, dtype=wp.float32):
    builder = wpsim.ModelBuilder()
    builder.add_particles(np.linspace(0.0, 1.0, 3 * n).reshape(n, 3) + 1.0)
    return builder.finalize(device="cpu", dtype=dtype)


def arm():
    builder, _ = import_mjcf(ASSETS / "arm_2link.xml")
    return builder.finalize(device="cpu")


def test_a_state_of_another_model_is_refused_naming_the_field():
    small, big = particle_model(10), particle_model(12)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 12 entries, the model has 10 particles"):
        wpsim.SemiImplicitSolver(small).step(big.state(), big.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries, the model has 12 particles"):
        wpsim.SemiImplicitSolver(big).step(small.state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_out.particle_q has 10 entries"):
        wpsim.SemiImplicitSolver(big).step(big.state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 12 entries, the model has 0 particles"):
        wpsim.SemiImplicitSolver(arm()).step(big.state(), big.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q has dtype vec3d, the model's is vec3f"):
        wpsim.SemiImplicitSolver(small).step(particle_model(10, wp.float64).state(), small.state(), None, DT)
    with pytest.raises(ValueError, match=r"state_in.particle_q is NoneType, not a Warp array"):
        wpsim.SemiImplicitSolver(small).step(None, small.state(), None, DT)


def test_a_control_of_the_wrong_size_is_refused():
    model = arm()
    solver = wpsim.SemiImplicitSolver(model)
    control = model.control()
    control.joint_f = wp.zeros(3, dtype=wp.float32, device="cpu")
    with pytest.raises(ValueError, match=r"control.joint_f has 3 entries, the model has 2 joint dofs"):
        solver.step(model.state(), model.state(), control, DT)
    with pytest.raises(ValueError, match=r"control.joint_f has 3 entries"):
        solver.advance(model.state(), control, DT, 4)
    with pytest.raises(ValueError, match=r"control.particle_f_ext has 4 entries, the model has 0 particles"):
        wpsim.simulate(solver, model.state(), 3, DT, control=particle_model(4).control())


def test_an_array_replaced_after_a_checked_step_is_checked_again():
    model = particle_model(12)
    solver = wpsim.SemiImplicitSolver(model)
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, DT)
    assert s0.checked_by is s1.checked_by is not None
    s0.particle_q = wp.zeros(10, dtype=wp.vec3, device="cpu")
    assert s0.checked_by is None
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries"):
        solver.step(s0, s1, None, DT)


@pytest.mark.parametrize("dt", [0.0, -1.0e-3, float("nan"), float("inf"), "0.001", None])
def test_a_bad_dt_is_refused_at_every_entry_point(dt):
    model = particle_model(4, wp.float64)
    state = model.state()
    for solver in (wpsim.SemiImplicitSolver(model), wpsim.ImplicitEulerSolver(model)):
        with pytest.raises(ValueError, match=r"dt must be"):
            solver.step(state, model.state(), None, dt)
        with pytest.raises(ValueError, match=r"dt must be"):
            solver.advance(state, None, dt, 2)
        with pytest.raises(ValueError, match=r"simulate: dt must be"):
            wpsim.simulate(solver, state, 2, dt)
        with pytest.raises(ValueError, match=r"dt must be"):
            Rollout(solver, 2, dt, lambda k, s, loss: None)
    np.testing.assert_array_equal(state.particle_q.numpy(), model.particle_q.numpy())


@pytest.mark.parametrize("steps", [-1, 2.5, "3", True])
def test_a_bad_step_count_is_refused(steps):
    model = particle_model(4)
    solver = wpsim.SemiImplicitSolver(model)
    with pytest.raises(ValueError, match=r"simulate: num_steps must be"):
        wpsim.simulate(solver, model.state(), steps, DT)
    with pytest.raises(ValueError, match=r"advance: steps must be"):
        solver.advance(model.state(), None, DT, steps)


def test_a_controller_rollout_checks_the_state_before_the_controller_runs():
    model, other = particle_model(12), particle_model(10)
    calls = []
    with pytest.raises(ValueError, match=r"state_in.particle_q has 10 entries"):
        wpsim.simulate(wpsim.SemiImplicitSolver(model), other.state(), 2, DT,
                       controller=lambda k, state, control: calls.append(k))
    assert calls == []
