"""Plots written as PNG files (matplotlib, imported when a figure is drawn)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from wpsim.core.fields import STATE_FIELDS
from wpsim.diff.grad_health import GradientReport
from wpsim.io.files import atomic_write


def save_figure(fig, path) -> Path:
    """Save a matplotlib figure atomically (format from the extension)."""
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))


def plot_gradient_norms(report: GradientReport, path, title: str | None = None):
    """Write a PNG of the per-state adjoint norms of every state field that has one (and
    tracked step contributions) against the step index, log-scale y, atomically; returns
    the path. Zero norms are not drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    states = np.arange(report.num_steps + 1)
    units = {spec.name: spec.unit for spec in STATE_FIELDS}
    series = [(f"|dL/d {name}_k| (loss per {units[name]})", states, values)
              for name, values in report.adjoint_norms.items() if np.any(np.asarray(values) > 0.0)]
    series += [(f"step k's part of |dL/d {name}|", states[:-1], values)
               for name, values in report.step_contributions.items()]
    for label, x, y in series:
        y = np.where(np.asarray(y) > 0.0, y, np.nan)
        ax.plot(x, y, label=label, linewidth=1.0)
    ax.set_yscale("log")
    ax.set_xlabel("state / step index k (steps)")
    ax.set_ylabel("gradient norm (loss units per unit of the variable)")
    if report.truncation_window:
        ax.set_title(title or f"adjoint norms, truncation window {report.truncation_window} steps")
    else:
        ax.set_title(title or "adjoint norms")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def plot_optimization_history(losses, traces: dict, path, title: str = "optimisation"):
    """PNG of an optimisation run: the loss per iteration (log scale) on top and, below, each
    parameter's value per iteration (label -> values, labels with units) in a grid of
    ceil(sqrt(count)) columns, each panel titled with its (wrapped) label; returns the path."""
    import textwrap

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(traces)
    columns = max(1, math.ceil(math.sqrt(count)))
    rows = math.ceil(count / columns)
    fig = Figure(figsize=(max(7.0, 3.4 * columns), 3.0 + 2.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1 + rows, columns, height_ratios=[1.4] + [1.0] * rows)
    iterations = np.arange(len(losses))
    positive = np.where(np.asarray(losses, dtype=np.float64) > 0.0, losses, np.nan)
    top = fig.add_subplot(grid[0, :])
    top.plot(iterations, positive, marker=".", linewidth=1.0)
    top.set_yscale("log")
    top.set(ylabel="loss", xlabel="iteration", title=title)
    top.grid(True, which="both", alpha=0.3)
    for i, (label, values) in enumerate(traces.items()):
        ax = fig.add_subplot(grid[1 + i // columns, i % columns])
        ax.plot(iterations, values, marker=".", linewidth=1.0)
        ax.set_title(textwrap.fill(label, 50 if columns > 1 else 100), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        if i + columns >= count:  # nothing below it
            ax.set_xlabel("iteration", fontsize=8)
    return save_figure(fig, path)


def plot_joint_tracking(time, measured, simulated: dict, joints: list, path, title: str = "joint trajectories"):
    """PNG of measured joint angles (time (N,) s, measured (N, J)) against simulated ones
    (label -> (N, J)), one panel per joint, and the error of each simulation; returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(joints)
    fig = Figure(figsize=(8.0, 2.2 * (count + 1)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(count + 1, 1, sharex=True, squeeze=False)[:, 0]
    for j, (ax, joint) in enumerate(zip(axes, joints)):
        ax.plot(time, measured[:, j], color="black", linewidth=2.0, alpha=0.5, label="measured")
        for label, values in simulated.items():
            ax.plot(time, values[:, j], linewidth=1.0, label=label)
        ax.set_ylabel(f"{joint} (rad)", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].set_title(title)
    axes[0].legend(fontsize=8)
    for label, values in simulated.items():
        error = np.sqrt(np.mean((values - measured) ** 2, axis=1))
        axes[-1].semilogy(time, np.maximum(error, 1e-12), linewidth=1.0, label=label)
    axes[-1].set_ylabel("RMS error (rad)", fontsize=8)
    axes[-1].set_xlabel("time (s)")
    axes[-1].grid(True, which="both", alpha=0.3)
    axes[-1].legend(fontsize=8)
    return save_figure(fig, path)


def plot_marker_tracking(time, measured, simulated: dict, names: list, path, title: str = "markers"):
    """PNG of measured marker heights (time (N,) s, positions (N, M, 3) m) against simulated
    ones (label -> (N, M, 3)), one panel per marker, and the RMS marker distance of each
    simulation over time (mm); returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(names)
    columns = 2
    rows = (count + 1) // columns + 1
    fig = Figure(figsize=(10.0, 2.3 * rows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, sharex=True, squeeze=False)
    for m, name in enumerate(names):
        ax = axes[m // columns, m % columns]
        ax.plot(time, measured[:, m, 2] * 1e3, "k.", markersize=3, label="measured")
        for label, values in simulated.items():
            ax.plot(time, values[:, m, 2] * 1e3, linewidth=1.2, label=label)
        ax.set_ylabel(f"{name} z (mm)", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title)
    error_ax = axes[-1, 0]
    for label, values in simulated.items():
        error = np.sqrt(np.mean(np.sum((values - measured) ** 2, axis=-1), axis=1)) * 1e3
        error_ax.plot(time, error, linewidth=1.2, label=label)
    error_ax.set_ylabel("RMS marker error (mm)", fontsize=8)
    error_ax.legend(fontsize=7)
    error_ax.grid(True, alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    for m in range(count, (rows - 1) * columns):
        axes[m // columns, m % columns].set_visible(False)
    axes[-1, 1].set_visible(False)
    return save_figure(fig, path)
