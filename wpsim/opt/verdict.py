"""Whether a system-identification fit can be trusted.

A fit is judged on what a reader of its report needs, all from the fitted point:

- the residual against the data's noise floor: the RMS joint error of the fitted model
  against ``NOISE_MARGIN`` times the measurement noise estimated from the data itself
  (``noise_floor``: the spread of the raw samples' second differences);
- parameters that ended on a bound of theirs (a damping at 0);
- identifiability: the singular values of the residual Jacobian in the optimiser's
  coordinates (relative changes for log-space parameters), and the parameter combinations
  along which the data barely changes (``WEAK_DIRECTION`` of the largest singular value);
- 95 % confidence intervals from the Gauss-Newton covariance, under independent Gaussian
  noise of the residuals' size;
- the optimiser's full termination message, explained where scipy's is terse.

The fit "misses" when its RMS is above the margin or a parameter sits on a bound; the
command line then exits with status 1 and says why in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NOISE_MARGIN = 3.0
"""A fit misses when its RMS error is above this multiple of the data's noise floor."""
WEAK_DIRECTION = 1e-3
"""A parameter combination whose singular value is below this fraction of the largest is
reported as not determined by the data."""
Z95 = 1.959963984540054
"""The 97.5 % quantile of the standard normal: half-width of a 95 % interval in standard errors."""
MESSAGES = {
    "ABNORMAL": "the line search found no decrease along the search direction (scipy's ABNORMAL termination): the "
                "loss is rough or its gradient inaccurate at this point, as in a long or chaotic run",
}
"""Explanations of terse optimiser messages, by the message's first word."""


def noise_floor(samples: np.ndarray) -> float:
    """RMS over the columns of the measurement noise (the columns' unit) of ``samples``
    (N, joints), raw samples in time order: each column's noise from the median absolute
    second difference (1.4826 MAD / sqrt(6) for white noise, robust to the signal's own
    curvature where it is sampled finely). 0 with fewer than 3 samples."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.shape[0] < 3:
        return 0.0
    second = samples[2:] - 2.0 * samples[1:-1] + samples[:-2]
    sigma = 1.4826 * np.median(np.abs(second), axis=0) / np.sqrt(6.0)
    return float(np.sqrt(np.mean(sigma**2)))


def explain(message: str) -> str:
    """The optimiser's message, with an explanation where it is terse."""
    first = message.split(":")[0].split("_")[0].strip().upper()
    return f"{message.strip()} ({MESSAGES[first]})" if first in MESSAGES else message.strip()


@dataclass
class Verdict:
    """The judgement of a fit (see the module docstring). Angles in rad, values in the
    parameters' units; ``intervals`` maps a label to its 95 % (low, high); ``weak``
    lists the undetermined combinations as text; ``reasons`` why the fit misses (empty: it
    does not)."""

    rms: float
    noise: float
    at_bounds: list
    singular_values: list
    weak: list
    intervals: dict
    message: str
    residual_every: int
    reasons: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons

    def lines(self, units: dict) -> list:
        """The verdict as lines of text (``units``: label -> unit)."""
        out = [f"residual RMS {np.degrees(self.rms):.3g} deg against a noise floor of {np.degrees(self.noise):.3g} deg "
               f"in the data ({self.rms / self.noise:.3g}x)" if self.noise > 0.0 else
               f"residual RMS {np.degrees(self.rms):.3g} deg (too few samples to estimate the noise)"]
        if self.intervals:
            out.append(f"95 % confidence intervals (Gauss-Newton, residuals every {self.residual_every} steps):")
            out += [f"  {label:<24} [{low:.6g}, {high:.6g}] {units.get(label, '')}"
                    for label, (low, high) in self.intervals.items()]
        if self.singular_values:
            out.append("Jacobian singular values (relative): "
                       + ", ".join(f"{s / self.singular_values[0]:.2g}" for s in self.singular_values))
        out += [f"not determined by the data: {w}" for w in self.weak]
        out.append(f"optimiser: {self.message}")
        out.append("verdict: " + ("the fit matches the data to its noise" if self.ok else
                                  "POOR FIT: " + "; ".join(self.reasons)))
        return out

    def to_dict(self) -> dict:
        return {"ok": self.ok, "reasons": self.reasons, "rms_rad": self.rms, "noise_floor_rad": self.noise,
                "at_bounds": self.at_bounds, "singular_values": self.singular_values, "weak_combinations": self.weak,
                "confidence_intervals_95": {k: list(v) for k, v in self.intervals.items()},
                "residual_every": self.residual_every, "optimiser_message": self.message}


def judge(params, x: np.ndarray, residuals: np.ndarray, jacobian: np.ndarray, rms: float, noise: float,
          message: str, residual_every: int) -> Verdict:
    """The verdict of a fit at physical values ``x`` of ``params`` (a ``ParameterSet``):
    ``residuals`` (N,) and ``jacobian`` (N, n) d residuals / d x of the tracking residuals
    (any weighting: the covariance is scaled by their own spread), ``rms`` the fitted
    model's RMS error and ``noise`` the data's noise floor (rad or m)."""
    x = np.asarray(x, dtype=np.float64)
    labels = list(params.labels)
    reasons = []
    if not np.isfinite(rms):
        reasons.append("the fitted model's rollout is not finite")
    elif noise > 0.0 and rms > NOISE_MARGIN * noise:
        reasons.append(f"the RMS error {np.degrees(rms):.3g} deg is {rms / noise:.3g}x the data's noise floor "
                       f"{np.degrees(noise):.3g} deg (at most {NOISE_MARGIN:g}x expected)")
    span = np.maximum(np.abs(x), params.scale)
    at_bounds = [labels[i] for i in range(len(x))
                 if (np.isfinite(params.lower[i]) and x[i] - params.lower[i] <= 1e-6 * span[i])
                 or (np.isfinite(params.upper[i]) and params.upper[i] - x[i] <= 1e-6 * span[i])]
    if at_bounds:
        reasons.append(f"{', '.join(at_bounds)} ended on a bound")
    # the Jacobian in the optimiser's coordinates z (log-space: relative changes)
    jac_z = params.internal_gradient(x, np.asarray(jacobian, dtype=np.float64))
    weak, intervals, singular = [], {}, []
    if np.isfinite(jac_z).all() and jac_z.size:
        _, s, vt = np.linalg.svd(jac_z, full_matrices=False)
        singular = [float(v) for v in s]
        for value, direction in zip(s, vt):
            if s[0] > 0.0 and value < WEAK_DIRECTION * s[0]:
                top = np.argsort(-np.abs(direction))[:3]
                weak.append(" + ".join(f"{direction[i]:+.2f} {labels[i]}" for i in top if abs(direction[i]) > 0.1)
                            + f" (singular value {value / s[0]:.1e} of the largest)")
        dof = max(len(residuals) - len(x), 1)
        variance = float(np.dot(residuals, residuals)) / dof
        if s[-1] > 0.0:
            covariance = variance * (vt.T / s**2) @ vt
            half = Z95 * np.sqrt(np.maximum(np.diag(covariance), 0.0))
            z = params.to_internal(x)
            low, high = params.to_physical(z - half), params.to_physical(z + half)
            intervals = {label: (float(a), float(b)) for label, a, b in zip(labels, low, high)}
    return Verdict(float(rms), float(noise), at_bounds, singular, weak, intervals, explain(message),
                   int(residual_every), reasons)
