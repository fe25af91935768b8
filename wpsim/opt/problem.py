"""An optimisation problem: a loss over a differentiable rollout and the declared parameters
it is minimised over, evaluated as a function of the flat parameter vector."""

from __future__ import annotations

import math
import warnings

import numpy as np

from wpsim.core.health import SimulationError
from wpsim.core.model import Control
from wpsim.diff.grad_health import ADJOINT_GROWTH_LIMIT, adjoint_growth, growth_message
from wpsim.opt.parameters import ParameterSet


class NonFiniteLoss(SimulationError):
    """The loss or its gradient is NaN or Inf at some parameter values (named in the message)."""


class Problem:
    """Minimise the loss of ``rollout`` from ``state0`` over ``parameters``.

    Args:
        rollout: a ``wpsim.diff.Rollout`` (full or checkpointed) whose ``loss_fn`` defines
            the loss.
        state0: the initial State (its arrays may be parameters: "state.<field>").
        parameters: ``Parameter`` / ``DerivedParameter`` list (see ``wpsim.opt.parameters``).
        control: the Control that "control.<field>" parameters name (default: the rollout's
            single Control, if it has one).
        controller: the object whose arrays "controller.<array>" parameters name (default:
            the rollout's controller, e.g. a ``wpsim.solvers.controllers.ActivationSchedule``).
        worlds: K > 1 declares every parameter once per world of a model of K identical
            worlds (``ParameterSet``); the rollout's loss then has one entry per world
            (``Rollout(loss_size=K)``, each world's terms in its own entry), and since the
            worlds are independent the gradient of the summed loss w.r.t. one world's
            values is that world's own gradient (used by ``wpsim.opt.multistart``).

    ``loss(x)`` and ``loss_and_grad(x)`` take physical parameter values (``x0`` is the
    initial vector). The first gradient also checks the adjoint: a parameter whose gradient
    is exactly zero is reported in ``no_gradient`` (it has no path to the loss there), and
    an adjoint that grows by more than ``adjoint_growth_limit`` (None: no check) back along
    the rollout, beyond what the loss terms explain (``wpsim.diff.adjoint_growth``), is reported in ``warnings`` with the state range and the remedies
    ``Rollout`` offers.
    """

    def __init__(self, rollout, state0, parameters, control: Control | None = None, controller=None,
                 adjoint_growth_limit: float | None = ADJOINT_GROWTH_LIMIT, worlds: int = 1,
                 warn_no_gradient: bool = True):
        if worlds > 1 and rollout.loss_size != worlds:
            raise ValueError(f"a problem over {worlds} worlds needs a rollout with one loss entry per world "
                             f"(Rollout(loss_size={worlds})), got loss_size={rollout.loss_size}")
        if worlds > 1 and rollout.model.num_worlds != worlds:
            raise ValueError(f"a problem over {worlds} worlds needs a model of {worlds} worlds, got "
                             f"{rollout.model.num_worlds}")
        if control is None:
            controls = rollout.user_controls()
            control = controls[0] if len(controls) == 1 else None
        controller = controller if controller is not None else rollout.controller
        self.rollout, self.state0 = rollout, state0
        self.adjoint_growth_limit = adjoint_growth_limit
        self.warn_no_gradient = warn_no_gradient
        """Whether a parameter without a gradient path at the first gradient is warned about
        (not for rows of a Jacobian, whose single residuals need not depend on every parameter)."""
        owners = {"model": rollout.model, "state": state0, "control": control, "controller": controller}
        self.params = ParameterSet(parameters, owners, worlds)
        self.rollouts = 0
        """Forward rollouts run so far."""
        self.gradients = 0
        """Backward passes run so far."""
        self.no_gradient: list = []
        self.warnings: list = []

    @property
    def x0(self) -> np.ndarray:
        """Initial physical parameter values."""
        return self.params.x0.copy()

    def _forward(self, x: np.ndarray) -> float:
        self.params.write(x)
        refresh = getattr(self.rollout.solver, "refresh_inverse_weights", None)
        if refresh is not None and self.params.writes_model:
            refresh()  # derived from the model's masses and armature (SemiImplicitSolver.refresh_inverse_weights)
        self.rollouts += 1
        loss = self.rollout.forward(self.state0)
        if not math.isfinite(loss):
            raise NonFiniteLoss(f"the loss is {loss} at {self.params.describe(x)}")
        return loss

    def world_losses(self) -> np.ndarray:
        """(worlds,) loss of each world at the last evaluation."""
        return self.rollout.losses()

    def loss(self, x) -> float:
        """The loss at physical parameter values ``x`` (one rollout, no backward)."""
        return self._forward(np.asarray(x, dtype=np.float64))

    def loss_and_grad(self, x) -> tuple:
        """(loss, d loss / d x) at physical parameter values ``x`` (one rollout and its backward)."""
        x = np.asarray(x, dtype=np.float64)
        self.rollout.zero_grad()
        self.params.zero_grad()
        loss = self._forward(x)
        first = self.gradients == 0
        report = self.rollout.backward(diagnostics=first)
        self.gradients += 1
        grad = self.params.gradient(x)
        if not np.isfinite(grad).all():
            bad = [label for label, g in zip(self.params.labels, grad) if not math.isfinite(g)]
            raise NonFiniteLoss(f"the gradient w.r.t. {', '.join(bad)} is not finite at {self.params.describe(x)}")
        if first:
            self._check_first_gradient(grad, report)
        return loss, grad

    def _check_first_gradient(self, grad: np.ndarray, report):
        self.no_gradient = [label for label, g in zip(self.params.labels, grad) if g == 0.0]
        if self.no_gradient and self.warn_no_gradient:
            self._warn(f"no gradient path to the loss from {', '.join(self.no_gradient)} (gradient exactly 0 at the "
                       "initial values): these parameters will not move under a gradient method")
        growth = None if self.adjoint_growth_limit is None else adjoint_growth(report, self.adjoint_growth_limit)
        if growth is not None:
            self._warn(growth_message(growth, self.adjoint_growth_limit))

    def _warn(self, message: str):
        self.warnings.append(message)
        warnings.warn(message, stacklevel=3)
