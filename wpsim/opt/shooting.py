"""Multiple shooting for system identification: a long (or chaotic) measured run cut into
windows, each replayed from the measured state at its start, all windows the worlds of one
unrecorded replay.

One open-loop rollout of a chaotic motion (an arm swinging over the top) amplifies any error
in the parameters or the first sample exponentially: the loss over 2 s is a landscape of
local minima, and least squares from a wrong start lands in one of them. A window short
enough that errors grow by at most ``GROWTH`` over it keeps the residuals nearly linear in
the parameters. Each window's starting angles and rates are fitted with the parameters
(from a local polynomial fit of the measured angles, Savitzky-Golay, ``SMOOTHING_S`` either
side), so that noise in the measured states does not bias the fit.

``ShootingResiduals`` are residuals for ``wpsim.opt.least_squares`` like
``wpsim.opt.sysid.TrackingResiduals`` (the measured joints' angle errors at every step, rows
step-major within a window, windows in order, weighted so that r . r is the mean squared
error over the run), with a forward-difference Jacobian from one replay of
(1 + n + 2 joints) x windows worlds. ``shooting_window`` picks the window from how fast a small change of the
first state grows in the replay at the current parameters (the growth that the adjoint of a
single-shooting fit would suffer): windows only where it grows ``CHAOTIC_GROWTH``-fold within
the run, each as long as it takes to grow ``GROWTH``-fold.
"""

from __future__ import annotations

import numpy as np

from wpsim.opt.parameters import ParameterSet
from wpsim.opt.replays import DIFFERENCE_STEPS, MeasuredReplay

GROWTH = 10.0
"""Largest growth of a change of the window's first state over one window."""
CHAOTIC_GROWTH = 1000.0
"""Growth within the whole run from which ``shooting_window`` cuts it into windows: a
pendulum's phase drift grows a change a few hundred-fold over seconds (a damped 3-link arm
from a wrong start: 320x in 2.5 s) and one rollout still fits it; an arm swinging over the
top grows it 10,000-fold in 2 s."""
MIN_WINDOW_S = 0.05
"""Shortest window (s) ``shooting_window`` picks: shorter ones leave too little motion in a window."""
SMOOTHING_S = 0.02
"""Half-width (s) of the local cubic fit giving the windows' starting angles and rates."""
PROBE = 1e-6
"""Change (rad or m) of every measured joint's first angle by which ``shooting_window`` probes the growth."""


def smoothed_states(measured: np.ndarray, dt: float) -> tuple:
    """(angles, rates) (steps + 1, joints) of a local cubic fit (Savitzky-Golay, ``SMOOTHING_S``
    either side, at least 2 samples) of ``measured`` angles sampled every ``dt`` s."""
    from scipy.signal import savgol_filter

    half = max(2, int(round(SMOOTHING_S / dt)))
    length = min(2 * half + 1, len(measured) - (1 - len(measured) % 2))
    if length < 5:
        raise ValueError(f"multiple shooting needs at least 5 samples, got {len(measured)}")
    angles = savgol_filter(measured, length, 3, axis=0, mode="interp")
    rates = savgol_filter(measured, length, 3, deriv=1, delta=dt, axis=0, mode="interp")
    return angles, rates


def _window_rows(table: np.ndarray, windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray, window: int,
                 hold: bool) -> np.ndarray:
    """(window, per-world columns x worlds) rows of ``table`` (steps, per-world columns) from the
    start of window ``windows[w]`` in world w; past a window's end zeros, or with ``hold`` its
    last row."""
    per = table.shape[1]
    out = np.zeros((window, per * len(windows)))
    for world, w in enumerate(windows):
        rows = table[starts[w]:starts[w] + lengths[w]]
        out[: lengths[w], world * per:(world + 1) * per] = rows
        if hold:
            out[lengths[w]:, world * per:(world + 1) * per] = rows[-1]
    return out


def _window_inputs(run, windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray, window: int, base):
    """Make ``run`` (a RobotRun of ``len(windows)`` worlds) replay, in world w, ``base``'s
    measured forces and servo targets from the start of window ``windows[w]`` (past its end no
    force, the last target)."""
    run.joint_f = _window_rows(base.joint_f, windows, starts, lengths, window, hold=False)
    run.joint_target = (None if base.joint_target is None else
                        _window_rows(base.joint_target, windows, starts, lengths, window, hold=True))
    run.steps = window


class _WindowReplay:
    """Replays of every window in each of several settings (parameter values and window
    starting states), all as the worlds (setting-major) of one unrecorded replay."""

    def __init__(self, owner, make_run, settings: int):
        windows = len(owner.starts)
        self.run = make_run(settings * windows)
        _window_inputs(self.run, np.tile(np.arange(windows), settings), owner.starts, owner.lengths, owner.window,
                       owner.run)
        self.params = ParameterSet(owner.parameters(self.run),
                                   {"model": self.run.model, "state": self.run.state0}, worlds=settings * windows)
        self.replay = MeasuredReplay(self.run, threads=1)
        self.owner, self.settings = owner, settings

    def angles(self, values: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(settings, N) residuals with parameter values (settings, n) and window starting
        states (settings, windows, 2 joints: angles then rates)."""
        run, windows = self.run, len(self.owner.starts)
        self.params.write(np.repeat(values, windows, axis=0).ravel())
        q, qd = run.state0.joint_q.numpy(), run.state0.joint_qd.numpy()
        joints = len(run.coords)
        q[run.world_rows(run.coords, len(q))] = states[..., :joints].ravel()
        qd[run.world_rows(run.dofs, len(qd))] = states[..., joints:].ravel()
        run.state0.joint_q.assign(q)
        run.state0.joint_qd.assign(qd)
        return self.owner.residuals_of(self.replay.angles())


class ShootingResiduals:
    """Multiple-shooting residuals of the ``parameters`` of a measured robot run (module docstring).

    make_run: worlds -> a ``RobotRun`` of the run in that many worlds (as for
        ``TrackingResiduals``); parameters: a ``RobotRun`` -> the declared parameters of its
        model (e.g. ``wpsim.opt.sysid.robot_parameters`` of some families; not its initial
        state: every window's is fitted here); window: steps per window (the last one may be
        shorter; a run of fewer steps is one window).

    Each window's starting angles and rates are fitted too, but not shown to the optimiser
    (variable projection): for given parameters, ``values`` fits every window's starting
    state by ``STATE_ITERATIONS`` Gauss-Newton steps (from the smoothed measurement,
    ``smoothed_states``; a window that no state fits stays infinite, which the optimiser refuses), and ``jacobian`` is the parameters' Jacobian with the part that the
    starting states could absorb projected out, window by window.
    """

    STATE_ITERATIONS = 3
    """Gauss-Newton steps of the windows' starting states per ``values`` (a window whose error
    grows goes back and takes a quarter of the step next time)."""
    STATE_STEP = 1e-7
    """Difference step of a starting angle (rad or m) or rate (per s)."""

    def __init__(self, make_run, parameters, window: int):
        self.run = base = make_run(1)
        if int(window) < 1:
            raise ValueError(f"window must be at least 1 step, got {window}")
        window = min(int(window), base.steps)  # a run no longer than the window is one window
        self.window, self.parameters = window, parameters
        self.starts = np.arange(0, base.steps, window)
        self.lengths = np.minimum(window, base.steps - self.starts)
        self.params = ParameterSet(parameters(base), {"model": base.model, "state": base.state0})
        n, joints = self.params.size, len(base.joints)
        # rows: window-major, then step k = 1..lengths[w], then joint; measured at starts[w] + k
        w, k = np.nonzero(np.arange(1, window + 1)[None, :] <= self.lengths[:, None])
        self._rows = (k + 1, w)
        self._measured = base.measured[self.starts[w] + k + 1]
        self._blocks = np.concatenate([[0], np.cumsum(self.lengths * joints)])
        self.count = self._measured.size
        self.weight = 1.0 / self.count
        self._step = DIFFERENCE_STEPS["forward"]
        angles, rates = smoothed_states(base.measured, base.dt)
        self._smoothed = np.concatenate([angles[self.starts], rates[self.starts]], axis=1)  # (windows, 2 joints)
        self._state_replay = _WindowReplay(self, make_run, 1 + 2 * joints)
        self._full_replay = _WindowReplay(self, make_run, 1 + n + 2 * joints)
        self._fitted = None  # (x, window states, residuals) of the last values()
        self.rollouts = self.gradients = 0

    def residuals_of(self, angles: np.ndarray) -> np.ndarray:
        """(settings, N) residuals from replayed angles (window + 1, settings x windows, joints)."""
        windows = len(self.starts)
        settings = angles.shape[1] // windows
        k, w = self._rows
        by_setting = angles.reshape(angles.shape[0], settings, windows, -1)[k, :, w]  # (rows, settings, joints)
        return np.sqrt(self.weight) * (by_setting - self._measured[:, None, :]).transpose(1, 0, 2).reshape(settings, -1)

    def _state_settings(self, states: np.ndarray) -> np.ndarray:
        """(1 + 2 joints, windows, 2 joints) the states, then each coordinate moved in every window."""
        moved = np.repeat(states[None], 1 + states.shape[1], axis=0)
        coordinates = np.arange(states.shape[1])
        moved[coordinates + 1, :, coordinates] += self.STATE_STEP
        return moved

    def _state_columns(self, r: np.ndarray) -> list:
        """Per window, d residuals / d starting state (rows of the window, 2 joints) from the
        residuals of ``_state_settings`` (rows 0 and 1 .. 2 joints of ``r``)."""
        d = (r[1:] - r[0]) / self.STATE_STEP
        return [d[:, lo:hi].T for lo, hi in zip(self._blocks[:-1], self._blocks[1:])]

    def values(self, x: np.ndarray) -> np.ndarray:
        """(N,) residuals (rad or m, weighted) at physical values x, every window's starting
        state fitted (``STATE_ITERATIONS`` replays of every window in 1 + 2 joints settings)."""
        x = np.asarray(x, dtype=np.float64)
        if self._fitted is not None and np.array_equal(self._fitted[0], x):
            return self._fitted[2]
        self.params.write(x)
        states, trial = self._smoothed.copy(), self._smoothed.copy()
        windows, settings = len(self.starts), 1 + states.shape[1]
        residuals = np.full(self.count, np.inf)
        norms, steps, scale = np.full(windows, np.inf), np.zeros_like(states), np.ones(windows)
        blocks = list(zip(self._blocks[:-1], self._blocks[1:]))
        for _ in range(self.STATE_ITERATIONS + 1):
            r = self._state_replay.angles(np.tile(x, (settings, 1)), self._state_settings(trial))
            self.rollouts += 1
            columns = self._state_columns(r)
            for w, (lo, hi) in enumerate(blocks):
                with np.errstate(over="ignore", invalid="ignore"):  # a diverged window: inf or nan, refused
                    norm = float(np.linalg.norm(r[0, lo:hi]))
                if np.isfinite(norm) and norm <= norms[w] and np.isfinite(columns[w]).all():
                    states[w], norms[w], residuals[lo:hi], scale[w] = trial[w], norm, r[0, lo:hi], 1.0
                    steps[w] = np.linalg.lstsq(columns[w], r[0, lo:hi], rcond=None)[0]
                else:  # worse (or diverged): back to the last state, a shorter step
                    scale[w] *= 0.25
            trial = states - scale[:, None] * steps
        self._fitted = (x, states, residuals)
        return residuals

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """(N, n) d residuals / d x at the fitted window states, by forward differences (one
        replay of every window in 1 + n + 2 joints settings), less the part the starting
        states absorb (each window's rows projected off its state columns)."""
        params, x = self.params, np.asarray(x, dtype=np.float64)
        self.values(x)
        states = self._fitted[1]
        n = params.size
        h = self._step * np.where(params.log, np.abs(x), params.scale)
        h = np.where(x + h > params.upper, -h, h)
        values = np.tile(x, (1 + n + states.shape[1], 1))
        values[np.arange(n) + 1, np.arange(n)] += h
        moved = self._state_settings(states)
        all_states = np.concatenate([moved[:1], np.repeat(moved[:1], n, axis=0), moved[1:]])
        r = self._full_replay.angles(values, all_states)
        self.rollouts += 1
        self.gradients += 1
        jacobian = ((r[1:n + 1] - r[0]) / h[:, None]).T
        state_columns = self._state_columns(np.concatenate([r[:1], r[n + 1:]]))
        for lo, hi, columns in zip(self._blocks[:-1], self._blocks[1:], state_columns):
            basis = np.linalg.qr(columns)[0]
            jacobian[lo:hi] -= basis @ (basis.T @ jacobian[lo:hi])
        self.params.write(x)
        return jacobian


def shooting_window(run, growth: float = GROWTH, chaotic: float = CHAOTIC_GROWTH) -> int:
    """Steps per window for multiple shooting of ``run`` (a 2-world ``RobotRun``) at its
    model's current parameters: until a change of ``PROBE`` in the first angles (alternating
    signs) grows ``growth``-fold in the replay, at least ``MIN_WINDOW_S``; ``run.steps`` (one
    window: single shooting) if it never grows ``chaotic``-fold within the run."""
    if run.worlds != 2:
        raise ValueError(f"shooting_window needs a run of 2 worlds, got {run.worlds}")
    q = run.state0.joint_q.numpy()
    rows = run.world_rows(run.coords, len(q)).reshape(2, -1)[1]
    q[rows] += PROBE * (-1.0) ** np.arange(len(rows))
    run.state0.joint_q.assign(q)
    angles = MeasuredReplay(run, threads=1).angles()  # (steps + 1, 2, joints)
    change = np.abs(angles[:, 1] - angles[:, 0]).max(axis=1)
    if change.max() < chaotic * PROBE:
        return run.steps
    grown = np.flatnonzero(change > growth * PROBE)
    return int(min(run.steps, max(grown[0], round(MIN_WINDOW_S / run.dt))))
