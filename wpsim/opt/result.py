"""The outcome of an optimisation run: best parameters in physical units, history, costs;
serialisable to JSON and plotted to PNG."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class OptimizationResult:
    """What ``wpsim.opt.minimize`` found.

    labels, units: one per parameter entry; x0, x: initial and best physical values;
    loss0, loss: loss at x0 and at x; history: one dict per iteration ("iteration",
    "loss", "grad_norm" (of d loss / d z, the optimiser's vector; None without gradient),
    "x", and "backoffs" where non-finite trial points were backed off from); rollouts / gradients: forward rollouts and backward passes spent; wall_s: wall
    time (s); success: False if a non-finite loss stopped the run; converged: whether the
    optimiser's own stopping test was met (not an iteration or rollout limit); message: how
    it ended; no_gradient, warnings: as the Problem reported.
    """

    method: str
    labels: list
    units: list
    x0: np.ndarray
    x: np.ndarray
    loss0: float
    loss: float
    history: list = field(default_factory=list)
    rollouts: int = 0
    gradients: int = 0
    wall_s: float = 0.0
    success: bool = True
    converged: bool = False
    message: str = ""
    no_gradient: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def values(self) -> dict:
        """label -> best physical value."""
        return {label: float(v) for label, v in zip(self.labels, self.x)}

    def table(self) -> str:
        """Initial and best value of every parameter, with units, one line each."""
        width = max(len(label) for label in self.labels)
        lines = [f"{'parameter':<{width}}  {'initial':>12}  {'fitted':>12}  unit"]
        for label, a, b, unit in zip(self.labels, self.x0, self.x, self.units):
            lines.append(f"{label:<{width}}  {a:>12.6g}  {b:>12.6g}  {unit}")
        lines.append(f"loss {self.loss0:.6g} -> {self.loss:.6g} in {len(self.history) - 1} iterations, "
                     f"{self.rollouts} rollouts, {self.gradients} gradients, {self.wall_s:.1f} s ({self.method}: "
                     f"{self.message})")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-ready content (NaN and Inf become None)."""

        def num(v):
            return float(v) if v is not None and math.isfinite(v) else None

        return {
            "method": self.method,
            "parameters": [{"name": label, "unit": unit, "initial": num(a), "fitted": num(b)}
                           for label, unit, a, b in zip(self.labels, self.units, self.x0, self.x)],
            "loss_initial": num(self.loss0),
            "loss": num(self.loss),
            "history": [{"iteration": h["iteration"], "loss": num(h["loss"]), "grad_norm": num(h["grad_norm"]),
                         "x": [num(v) for v in h["x"]], **({"backoffs": h["backoffs"]} if "backoffs" in h else {})}
                        for h in self.history],
            "rollouts": self.rollouts,
            "gradients": self.gradients,
            "wall_s": self.wall_s,
            "success": self.success,
            "converged": self.converged,
            "message": self.message,
            "no_gradient": list(self.no_gradient),
            "warnings": list(self.warnings),
        }

    def save_json(self, path):
        """Write ``to_dict()`` as JSON, atomically; returns the path."""
        from wpsim.io.files import write_json

        return write_json(path, self.to_dict())

    def plot(self, path, title: str | None = None):
        """PNG of the loss per iteration and of every parameter's trace; returns the path."""
        from wpsim.io.plots import plot_optimization_history

        traces = {f"{label} ({unit})" if unit else label: [h["x"][i] for h in self.history]
                  for i, (label, unit) in enumerate(zip(self.labels, self.units))}
        losses = [math.nan if h["loss"] is None else h["loss"] for h in self.history]
        return plot_optimization_history(losses, traces, path,
                                         title or f"{self.method}: loss {self.loss0:.3g} -> {self.loss:.3g}")
