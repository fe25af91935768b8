"""System identification from several measured runs of one robot: every run replayed from its
own first state with its own inputs, all fitted with one set of parameters.

A single run rarely excites every parameter: an arm swung by its shoulder alone says little
of its wrist's damping, a run at rest none of the friction. ``StackedResiduals`` joins the
residual objects of several runs (``wpsim.opt.sysid.TrackingResiduals`` or
``wpsim.opt.shooting.ShootingResiduals``, one per run, the same parameter families of the
same robot file) into one for ``wpsim.opt.least_squares``: the runs' rows one after
another, each run's scaled so that r . r is the mean squared error over every row of every
run (a run counts by its number of rows, so a long run weighs more than a short one), the
Jacobian stacked alike.
"""

from __future__ import annotations

import numpy as np


class SharedParameters:
    """The ``ParameterSet`` of several residual objects with equal labels, read from the first
    and written into all (each run's model holds its own copy of the parameters)."""

    def __init__(self, sets: list):
        self.sets = list(sets)

    def __getattr__(self, name):
        return getattr(self.sets[0], name)

    def write(self, x: np.ndarray):
        """Write physical values x into every run's model."""
        for params in self.sets:
            params.write(x)


class StackedResiduals:
    """Residuals of several runs fitted with shared parameters (module docstring).

    parts: one residual object per run (``params``, ``values``, ``jacobian``, ``count``,
    ``rollouts``, ``gradients``, ``run``); names: each run's name (its data file), for errors.
    """

    def __init__(self, parts: list, names: list):
        if len(parts) < 2:
            raise ValueError(f"StackedResiduals joins at least 2 runs, got {len(parts)}")
        first = parts[0]
        for part, name in zip(parts[1:], names[1:]):
            if list(part.run.joints) != list(first.run.joints):
                raise ValueError(f"{name}: measures the joints {list(part.run.joints)}, the first run "
                                 f"{list(first.run.joints)}: every run must measure the same joints, in the same "
                                 "column order")
            if list(part.params.labels) != list(first.params.labels):
                raise ValueError(f"{name}: its fit has the parameters {list(part.params.labels)}, the first run's "
                                 f"{list(first.params.labels)}: every run must give the same inputs (ctrl: columns "
                                 "of the same servos)")
        self.parts = list(parts)
        self.params = SharedParameters([part.params for part in parts])
        counts = np.array([part.count for part in parts], dtype=np.float64)
        self.count = int(counts.sum())
        self._scales = np.sqrt(counts / self.count)  # each part's rows are weighted by 1 / its own count

    @property
    def run(self):
        """The first run's ``RobotRun``."""
        return self.parts[0].run

    @property
    def rollouts(self) -> int:
        return sum(part.rollouts for part in self.parts)

    @property
    def gradients(self) -> int:
        return sum(part.gradients for part in self.parts)

    def values(self, x: np.ndarray) -> np.ndarray:
        """(N,) residuals of every run at physical values x, run after run."""
        return np.concatenate([scale * part.values(x) for scale, part in zip(self._scales, self.parts)])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """(N, n) d residuals / d x, the runs' Jacobians stacked."""
        return np.concatenate([scale * part.jacobian(x) for scale, part in zip(self._scales, self.parts)])
