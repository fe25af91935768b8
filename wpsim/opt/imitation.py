"""Policies distilled from a planner by imitation (behaviour cloning) in PyTorch.

``fit_imitation`` trains an ``MLPPolicy`` on (observation, control) pairs of a teacher,
e.g. the states and controls of batched full-horizon iLQR plans: the observations are
standardised (mean and std of the data), the controls are mapped to [-1, 1] by their
bounds, and full-batch Adam minimises the mean squared error. The result,
``ImitationPolicy``, maps observations (numpy, any batch) to controls clipped to the bounds;
it is what ``wpsim.opt.mpc.RecedingHorizon`` takes as its nominal policy (through a
function of the plan step and the state that builds the observation). Imports torch at
the top: import this module explicitly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from wpsim.opt.policies import MLPPolicy


@dataclass
class ImitationPolicy:
    """An MLP from standardised observations to controls scaled to their bounds.

    network: the ``MLPPolicy``; mean, std: (no,) the observations' standardisation;
    lower, upper: (nu,) the control bounds; losses: the training loss per epoch (mean
    squared error in bound-scaled units); wall_s: training time (s).
    """

    network: MLPPolicy
    mean: np.ndarray
    std: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    losses: list = field(default_factory=list)
    wall_s: float = 0.0

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """Controls (rows, nu) of observations (rows, no), within the bounds."""
        dtype = self.network.net[0].weight.dtype
        with torch.no_grad():
            scaled = torch.as_tensor((np.asarray(observations) - self.mean) / self.std, dtype=dtype)
            action = self.network(scaled).double().numpy()
        half, middle = 0.5 * (self.upper - self.lower), 0.5 * (self.upper + self.lower)
        return np.clip(middle + half * action, self.lower, self.upper)


def fit_imitation(observations: np.ndarray, controls: np.ndarray, lower, upper, hidden: tuple = (64, 64),
                  epochs: int = 2000, lr: float = 3e-3, seed: int = 0) -> ImitationPolicy:
    """Behaviour cloning of (observations (N, no), controls (N, nu)) within bounds lower,
    upper (nu,) by full-batch Adam over ``epochs`` (learning rate ``lr``); ValueError for
    non-finite data or controls outside the bounds."""
    obs, u = np.asarray(observations, dtype=np.float64), np.asarray(controls, dtype=np.float64)
    lower, upper = (np.broadcast_to(np.asarray(b, dtype=np.float64), (u.shape[-1],)).copy() for b in (lower, upper))
    if obs.ndim != 2 or u.ndim != 2 or len(obs) != len(u) or len(obs) == 0:
        raise ValueError(f"fit_imitation needs observations (N, no) and controls (N, nu) with N >= 1, got "
                         f"{obs.shape} and {u.shape}")
    for name, data in (("observations", obs), ("controls", u)):
        bad = np.argwhere(~np.isfinite(data))
        if bad.size:
            raise ValueError(f"fit_imitation: {name}[{bad[0][0]}, {bad[0][1]}] is not finite")
    bad = np.argwhere((u < lower) | (u > upper))
    if bad.size:
        i, j = bad[0]
        raise ValueError(f"fit_imitation: controls[{i}, {j}] = {u[i, j]} is outside its bounds "
                         f"[{lower[j]}, {upper[j]}]")
    if int(epochs) != epochs or epochs < 1 or not lr > 0.0:
        raise ValueError(f"fit_imitation needs epochs >= 1 and lr > 0, got {epochs} and {lr}")
    started = time.perf_counter()
    mean, std = obs.mean(axis=0), obs.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    x = torch.as_tensor((obs - mean) / std, dtype=torch.float32)
    y = torch.as_tensor((u - 0.5 * (upper + lower)) / (0.5 * (upper - lower)), dtype=torch.float32)
    network = MLPPolicy(obs.shape[1], u.shape[1], hidden=hidden, seed=seed)
    optimiser = torch.optim.Adam(network.parameters(), lr=lr)
    losses = []
    for _ in range(int(epochs)):
        optimiser.zero_grad()
        loss = torch.mean((network(x) - y) ** 2)
        loss.backward()
        optimiser.step()
        losses.append(loss.detach().item())
    return ImitationPolicy(network, mean, std, lower, upper, losses, time.perf_counter() - started)
