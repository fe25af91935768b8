"""The soft-finger calibration task behind ``wpsim demo`` (``wpsim.tasks.finger_calibration``):
its data files match its model, and its difference Jacobian is the same spread over threads."""

from dataclasses import replace

import numpy as np
import pytest

from wpsim.io.measurements import load_trajectory
from wpsim.tasks import finger_calibration as finger


def test_the_exact_run_is_the_calibrated_model_at_the_true_parameters():
    """``soft_finger_markers_same.csv`` is the calibrated finger (quadratic tets) at ``TRUTH``:
    a stale file, or a model changed without the data, shows here."""
    calibration = finger.FingerCalibration(load_trajectory(finger.DATA["same"]), finger.FingerConfig(), workers=1)
    simulated = calibration.simulate(finger.TRUTH)
    assert np.abs(simulated - calibration.measured).max() < 1e-9
    assert np.ptp(calibration.measured[:, :, 2]) > 0.02  # the finger curls: markers rise by centimetres


def test_the_converged_reference_differs_from_the_calibrated_mesh_by_its_noise():
    """The fine reference's markers lie within the camera noise of the calibrated mesh's at
    the true parameters (the mesh is converged), and its first sample is the rest pose."""
    config = finger.FingerConfig()
    exact = finger.FingerCalibration(load_trajectory(finger.DATA["same"]), config, workers=1).measured
    noisy = finger.FingerCalibration(load_trajectory(finger.DATA["fine"]), config, workers=1).measured
    rms = finger.rms_mm(noisy, exact)
    assert finger.NOISE_RMS_MM * 0.9 < rms < finger.NOISE_RMS_MM * 1.1, rms


@pytest.mark.parametrize("workers", [2, 3])
def test_the_jacobian_spread_over_threads_is_the_serial_one(workers):
    config = replace(finger.FingerConfig(), duration_s=0.02)
    data = load_trajectory(finger.DATA["same"])
    serial = finger.FingerCalibration(data, config, workers=1).residuals
    spread = finger.FingerCalibration(data, config, workers=workers).residuals
    x = np.array([finger.FingerConfig().initial[name] for name in serial.params.labels])
    jacobian = serial.jacobian(x)
    np.testing.assert_array_equal(spread.jacobian(x), jacobian)
    assert spread.rollouts == 1 + len(x) and spread.gradients == 1
    column = 3  # the gain: against central differences of the residuals
    step = np.zeros_like(x)
    step[column] = 1e-4 * x[column]
    central = (serial.values(x + step) - serial.values(x - step)) / (2.0 * step[column])
    np.testing.assert_allclose(jacobian[:, column], central, rtol=1e-3, atol=1e-6 * np.abs(central).max())


def test_the_difference_jacobian_gives_the_tape_gradient_of_the_mean_squared_marker_distance():
    """2 J^T r of the residuals equals the tape gradient (checkpointed rollout) of the mean
    squared marker distance at the declared parameters: the Jacobian is the derivative of the
    loss the task states, through the Lame parameters and the controller's gain alike."""
    import warp as wp

    from wpsim.diff import Rollout
    from wpsim.diff.losses import squared_distance
    from wpsim.opt.problem import Problem
    from wpsim.solvers import SemiImplicitSolver

    config = replace(finger.FingerConfig(), duration_s=0.02)
    calibration = finger.FingerCalibration(load_trajectory(finger.DATA["fine"]), config, workers=1)
    run = calibration.runs[0]
    frames = config.steps // config.frame_every
    targets = [wp.array(frame, dtype=wp.vec3d) for frame in calibration.measured]
    weight = 1.0 / (frames * len(finger.MARKERS))

    def loss_fn(k, state, loss):
        if k > 0 and k % config.frame_every == 0:
            squared_distance(run.markers.positions(state), targets[k // config.frame_every],
                             axis_weights=(weight,) * 3, loss=loss)

    rollout = Rollout(SemiImplicitSolver(run.model), config.steps, config.dt, loss_fn, control=run.schedule,
                      mode="checkpoint")
    problem = Problem(rollout, run.model.state(), run.parameters)
    x = problem.x0
    loss, gradient = problem.loss_and_grad(x)
    r = calibration.residuals.values(x)
    assert loss == pytest.approx(float(r @ r), rel=1e-12)
    np.testing.assert_allclose(2.0 * calibration.residuals.jacobian(x).T @ r, gradient, rtol=1e-4)
