"""The soft-contact Newton solve with its exact line search: tosses whose plain Newton
iterates cycled now converge, a solve stopped at its cap is reported (health, error,
warning on a tape), and random tosses converge, do not depend on the cap and have tape
gradients that match settled central differences (wpsim.tasks.contact_tosses)."""

import numpy as np
import pytest
import warp as wp

from wpsim import ContactNotConverged
from wpsim.tasks.contact_tosses import build, simulate, study


@pytest.mark.parametrize("seed", [26, 43, 51])
def test_tosses_whose_newton_iterates_cycled_converge(seed):
    """Without the line search these tosses had steps that reached even 200 iterations."""
    model, _, _ = build(seed)
    qd0 = model.state(requires_grad=False).joint_qd.numpy()
    _, solver = simulate(model, qd0, iterations=200)
    report = solver.health()
    assert report.ok, str(report)
    assert report.contact_iterations <= 10


def test_a_solve_stopped_at_its_cap_is_reported_raised_and_warned():
    model, _, _ = build(0)
    qd0 = model.state(requires_grad=False).joint_qd.numpy()
    _, solver = simulate(model, qd0, iterations=1)
    report = solver.health()
    assert not report.ok and list(report.unconverged_contact) == [0]
    failure = report.unconverged_contact[0]
    assert failure.steps > 0 and failure.worst_residual > failure.tolerance and failure.iterations == 1
    assert "world 0: the soft-contact solve did not converge" in str(report)
    solver.reset_health()
    assert solver.health().ok

    import wpsim
    from wpsim.solvers import SoftContactOptions

    strict = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(iterations=1,
                                                                             raise_on_nonconvergence=True))
    a, b = model.state(), model.state()
    a.joint_qd.assign(qd0)
    with pytest.raises(ContactNotConverged, match=r"step \d+, world 0: the soft-contact solve stopped after 1"):
        for _ in range(600):
            strict.step(a, b, None, 1e-3)
            a, b = b, a
    tape = wp.Tape()
    final = simulate(model, qd0, iterations=1, tape=tape)[0][-1].joint_q
    with pytest.warns(UserWarning, match="its adjoint assumes a converged solve"):  # the fused step's: at backward
        tape.backward(grads={final: wp.array(np.ones(final.shape[0]), dtype=final.dtype)})


def test_random_tosses_converge_and_match_central_differences():
    result = study(6, first_seed=100, report=lambda line: None)
    totals = result["totals"]
    assert totals["unconverged_steps"] == 0 and totals["most_iterations"] <= 20
    assert totals["largest_cap_difference"] < 1e-9
    disagreeing = [t["seed"] for t in result["tosses"] if t["settled"] and not t["agrees"]]
    assert not disagreeing, f"tape and settled central differences disagree for tosses {disagreeing}"
    assert totals["gradient_agreement_rate"] >= 5 / 6
    for toss in result["tosses"]:
        assert np.isfinite(toss["tape"]) and toss["tape"] != 0.0
