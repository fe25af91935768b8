"""The full-inertia family of system identification: log-Cholesky coordinates of the
pseudo-inertia (``wpsim.opt.inertia``), their Jacobian, and a fit of a 3-D arm whose
identified model predicts data it was not fitted to."""

import numpy as np
import pytest
from test_sysid_jacobian import write_sine_run

from wpsim.io.measurements import load_trajectory
from wpsim.io.robots import import_robot
from wpsim.opt import inertia
from wpsim.opt.replays import MeasuredReplay
from wpsim.opt.sysid import TrackingResiduals, identify, prepare_run


def arm_xml(mass_scale: float = 1.0, shift: float = 0.0) -> str:
    """Three links on hinges about z, y and x, centres of mass off the axes, full inertias;
    ``mass_scale`` and ``shift`` (m, along the links) make a wrong start."""
    return f"""<mujoco model="arm3d"><option timestep="0.002" gravity="0 0 -9.81"/><worldbody>
<body name="upper" pos="0 0 1"><joint name="j1" type="hinge" axis="0 0 1" damping="0.05"/>
<inertial pos="{0.12 + shift} 0.02 -0.01" mass="{1.5 * mass_scale}" fullinertia="0.02 0.03 0.025 0.002 -0.001 0.003"/>
<body name="fore" pos="0.25 0 0"><joint name="j2" type="hinge" axis="0 1 0" damping="0.03"/>
<inertial pos="{0.1 - shift} -0.015 0.02" mass="{0.8 * mass_scale}"
 fullinertia="0.006 0.01 0.008 -0.0008 0.0005 0.001"/>
<body name="hand" pos="0.2 0 0"><joint name="j3" type="hinge" axis="1 0 0" damping="0.02"/>
<inertial pos="0.03 0.04 -0.02" mass="{0.4 * mass_scale}" fullinertia="0.002 0.0015 0.0018 0.0002 -0.0001 0.0003"/>
</body></body></body></worldbody></mujoco>"""


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """(start file, data file): 1 s of the true arm driven by three sines, made by wpsim."""
    folder = tmp_path_factory.mktemp("arm3d")
    (folder / "truth.xml").write_text(arm_xml())
    (folder / "start.xml").write_text(arm_xml(0.7, 0.03))
    write_sine_run(folder / "truth.xml", folder / "data.csv", 1.5)
    return folder / "start.xml", folder / "data.csv"


def test_log_cholesky_round_trip_and_every_vector_is_a_real_body():
    rng = np.random.default_rng(3)
    rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    inertia_c = rotation @ np.diag([0.02, 0.03, 0.045]) @ rotation.T  # 0.045 <= 0.02 + 0.03
    theta = inertia.to_log_cholesky(1.7, [0.1, -0.05, 0.2], inertia_c)
    mass, com, back = inertia.from_log_cholesky(theta)
    assert mass == pytest.approx(1.7, rel=1e-12) and np.exp(2 * theta[0]) == pytest.approx(1.7, rel=1e-12)
    np.testing.assert_allclose(com, [0.1, -0.05, 0.2], atol=1e-14)
    np.testing.assert_allclose(theta[7:], com, atol=1e-14)
    np.testing.assert_allclose(back, inertia_c, atol=1e-14)
    for _ in range(200):
        mass, com, inertia_c = inertia.from_log_cholesky(rng.normal(scale=2.0, size=10))
        moments = np.sort(np.linalg.eigvalsh(inertia_c))
        assert mass > 0 and moments[0] > 0 and moments[2] <= (moments[0] + moments[1]) * (1 + 1e-9)
    with pytest.raises(ValueError, match="link7: .* not physically realisable"):
        inertia.to_log_cholesky(1.0, [0, 0, 0], np.diag([0.01, 0.01, 0.05]), "link7")


def test_inertia_jacobian_by_differences_matches_the_tape(arm):
    """30 coordinates of 3 bodies, 0.2 s; the first link's d3 and t3 (its z extent and centre
    of mass along its own hinge axis) have no effect, so their columns are zero in both."""
    start, data = arm
    trajectory = load_trajectory(data)

    def make_run(worlds=1):
        builder, scene = import_robot(start)
        return prepare_run(builder, scene, trajectory, None, 0.2, "cpu", worlds)

    adjoint = TrackingResiduals(make_run, ["inertia"], every=5, jacobian="adjoint")
    central = TrackingResiduals(make_run, ["inertia"], every=5, jacobian="differences", differences="central")
    x = adjoint.params.x0
    with pytest.warns(UserWarning, match="no gradient path to the residuals from upper.d3, upper.t3:"):
        tape = adjoint.jacobian(x)
    jac = central.jacobian(x)
    norms = np.linalg.norm(tape, axis=0)
    dead = [adjoint.params.labels.index(label) for label in ("upper.d3", "upper.t3")]
    assert (norms[dead] == 0).all() and np.abs(jac[:, dead]).max() < 1e-12 * np.abs(jac).max()
    live = norms > 0
    assert live.sum() == 28
    assert (np.linalg.norm(jac - tape, axis=0)[live] / norms[live]).max() < 1e-6


def test_fitted_inertias_predict_the_part_of_the_run_they_were_not_fitted_to(arm):
    """Fitted on the first 0.6 s from masses x0.7 and centres of mass moved 3 cm, the arm
    replays all 1 s to round-off: the data determine the combinations that move it, and the
    verdict names the ones they do not."""
    start, data = arm
    result = identify(start, data, ["inertia"], duration=0.6, progress=False, device="cpu")
    assert result.rms(result.simulated_before) > np.radians(1.0)
    assert result.rms(result.simulated_after) < 1e-9
    assert any("not determined by the data" in line for line in result.verdict.lines({}))
    bodies = result.to_dict()["bodies"]
    assert set(bodies) == {"upper", "fore", "hand"}
    builder, scene = import_robot(start)
    whole = prepare_run(builder, scene, load_trajectory(data), None, None, "cpu")
    for name in ("body_mass", "body_com", "body_inertia"):
        getattr(whole.model, name).assign(getattr(result.run.model, name).numpy())
    predicted = MeasuredReplay(whole).angles()[:, 0]
    assert whole.steps == 500 and whole.rms(predicted) < 1e-8
    with pytest.raises(ValueError, match="masses and inertia both set"):
        identify(start, data, ["masses", "inertia"], progress=False, device="cpu")
