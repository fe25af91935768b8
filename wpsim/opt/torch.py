"""PyTorch bridge: simulation steps and rollouts as ``torch.autograd.Function``s.

``TorchStep`` is one differentiable step ``(state, controls, parameters) -> next state`` on
dicts of tensors keyed by field name, so a plain torch loop

    state = step.initial_state()
    for k in range(T):
        state = step(state, {"joint_f": policy(observe(state))})

trains a policy (or any torch parameter) end to end through the simulator. ``TorchRollout``
differentiates a whole horizon of controls ``[T, ...]`` through ``wpsim.diff.Rollout``
(checkpointed recompute by default), returning the trajectory ``[T + 1, ...]`` or the entries
of a Warp loss.

Memory is shared, not copied: inputs enter the kernels as ``wp.from_torch`` views of the
tensors, outputs are Warp arrays seen by torch through ``wp.to_torch``; a step reads nothing
back to the host (except the optional finiteness check of its inputs, one boolean).

Layouts. State and control tensors have the shape of their field (``joint_q`` (Q,),
``particle_q`` (P, 3), ``body_f_ext`` (B, 6), ...) or, with ``worlds=W``, a leading world axis:
``(W, rows / W, ...)`` (scalar fields ``(W, rows / W)``). Parameters (any differentiable Model
field, e.g. ``body_mass``, ``tet_mu``, ``joint_damping``) take either layout; their values are
written into the model's array on the device before the step runs (and restored to the
step's values for its backward, so parameters may change between steps of one graph).
Tensors must have the model's dtype (float32 or float64) and device and be contiguous.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import warp as wp

from wpsim.core.fields import CONTROL_FIELDS, DYNAMIC_STATE_FIELDS, MODEL_FIELDS, STATE_FIELDS
from wpsim.core.model import Control, State
from wpsim.diff.checkpoint import MODES, Rollout
from wpsim.kernels import losses
from wpsim.kernels.generic import for_precision

_CONTROL_SPECS = {spec.name: spec for spec in CONTROL_FIELDS}
_PARAMETER_SPECS = {spec.name: spec for spec in MODEL_FIELDS if spec.differentiable}
_STATE_SPECS = {spec.name: spec for spec in STATE_FIELDS}
_POOL_SIZE = 32  # States allocated together (one allocation per field)


def _invalid(tensor: torch.Tensor, check: str | None) -> torch.Tensor:
    """Where ``tensor`` breaks a Model field's ``check`` (a bool tensor): not finite, or below
    zero ("nonnegative"), or at or below zero ("positive")."""
    wrong = ~torch.isfinite(tensor)
    if check == "nonnegative":
        wrong |= tensor < 0
    elif check == "positive":
        wrong |= tensor <= 0
    return wrong


class _Field:
    """How one field's Warp array (rows of a Warp dtype) maps to torch tensors."""

    def __init__(self, label: str, name: str, wp_dtype, rows: int, worlds: int | None):
        self.label, self.name, self.wp_dtype, self.rows = label, name, wp_dtype, rows
        self.inner = tuple(getattr(wp_dtype, "_shape_", ()))
        self.flat_shape = (rows, *self.inner)
        self.world_shape = None
        if worlds is not None and rows % worlds == 0:
            self.world_shape = (worlds, rows // worlds, *self.inner)

    def torch_shape(self, worlds: int | None) -> tuple:
        """The tensor shape of this field in the bridge's layout."""
        if worlds is None:
            return self.flat_shape
        if self.world_shape is None:
            raise ValueError(f"{self.label}: the field's {self.rows} rows do not split into {worlds} worlds")
        return self.world_shape

    def view(self, tensor: torch.Tensor, grad: bool) -> wp.array:
        """A Warp array aliasing ``tensor`` (with a fresh zero gradient array if ``grad``)."""
        arr = wp.from_torch(tensor.detach().reshape(self.flat_shape), dtype=self.wp_dtype, requires_grad=False)
        if grad:
            arr.requires_grad = True
        return arr


def _split(names: tuple, tensors) -> tuple:
    """(states, controls, parameters) as (field, tensor) lists of one call's flat inputs."""
    state_names, control_names, param_names = names
    n_s, n_c = len(state_names), len(control_names)
    return (list(zip(state_names, tensors[:n_s])), list(zip(control_names, tensors[n_s:n_s + n_c])),
            list(zip(param_names, tensors[n_s + n_c:])))


def _tensor(arr: wp.array, shape: tuple) -> torch.Tensor:
    """A torch view of the Warp array ``arr`` in ``shape``."""
    return wp.to_torch(arr, requires_grad=False).reshape(shape)


class _Bridge:
    """What TorchStep and TorchRollout share: the model's fields, layouts and input checks."""

    def __init__(self, solver, dt: float, worlds: int | None, check_finite: bool):
        for attr in ("model", "step", "step_count"):
            if not hasattr(solver, attr):
                raise ValueError(f"solver has no attribute {attr!r} (needs model, step and step_count)")
        if not (dt > 0.0 and np.isfinite(dt)):
            raise ValueError(f"dt must be a positive number of seconds, got {dt}")
        model = solver.model
        if worlds is not None and (int(worlds) != worlds or worlds < 1):
            raise ValueError(f"worlds must be an integer >= 1 or None, got {worlds}")
        self.solver, self.model, self.dt = solver, model, float(dt)
        self.worlds = None if worlds is None else int(worlds)
        self.check_finite = check_finite
        self.torch_dtype = torch.float64 if model.dtype == wp.float64 else torch.float32
        self.torch_device = torch.device(wp.device_to_torch(model.device))
        reference = model.state(requires_grad=False)
        self._fields = {}
        for name in DYNAMIC_STATE_FIELDS:
            arr = getattr(reference, name)
            if arr.shape[0]:
                self._fields[name] = _Field(f"state[{name!r}]", name, arr.dtype, arr.shape[0], self.worlds)
        self.state_fields = tuple(self._fields)
        """The integrated state fields of this model (the keys of a state dict)."""
        for name in self.state_fields:
            self._fields[name].torch_shape(self.worlds)  # every state field must split into the worlds
        self._zero = model.control(requires_grad=False)
        for name, spec in _CONTROL_SPECS.items():
            arr = getattr(self._zero, name)
            self._fields[name] = _Field(f"control[{name!r}]", name, arr.dtype, arr.shape[0], self.worlds)
        for name in _PARAMETER_SPECS:
            arr = getattr(model, name)
            self._fields["model." + name] = _Field(f"parameters[{name!r}]", name, arr.dtype, arr.shape[0], self.worlds)

    # ------------------------------------------------------------------ input checks
    def _check(self, label: str, tensor, shapes: tuple, time_axis: int | None = None) -> torch.Tensor:
        """``tensor`` as a contiguous tensor of one of ``shapes`` with the model's dtype and
        device, or a ValueError naming ``label``."""
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{label} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device != self.torch_device:
            raise ValueError(f"{label} is on device {tensor.device}, the model on {self.torch_device}")
        if tensor.dtype != self.torch_dtype:
            raise ValueError(f"{label} has dtype {tensor.dtype}, the model {self.torch_dtype}")
        if tuple(tensor.shape) not in shapes:
            expected = " or ".join(str(s) for s in shapes)
            raise ValueError(f"{label} has shape {tuple(tensor.shape)}, expected {expected}")
        if not tensor.is_contiguous():
            raise ValueError(f"{label} is not contiguous (call .contiguous() on it)")
        return tensor

    def _check_values(self, labelled: list):
        """Raise a ValueError naming the first entry of the (label, tensor, field check) triples
        that is not finite, or negative ("nonnegative") or not positive ("positive") where the
        Model field's check says so; one host read when all pass."""
        if not self.check_finite or not labelled:
            return
        wrong = [_invalid(t.detach(), check) for _, t, check in labelled]
        bad = torch.stack([w.any() for w in wrong])
        if not bool(bad.any()):
            return
        k = int(torch.nonzero(bad)[0, 0])
        (label, tensor, check), index = labelled[k], tuple(int(i) for i in torch.nonzero(wrong[k])[0])
        value = float(tensor.detach()[index])
        what = "not finite" if not math.isfinite(value) else "negative" if check == "nonnegative" else "not positive"
        where = f" (world {index[0]})" if self.worlds is not None and tensor.dim() > 1 else ""
        raise ValueError(f"{label} is {what} at index {index}{where}: {value}")

    def _layout(self, key: str, time_steps: int | None = None) -> tuple:
        field = self._fields[key]
        shape = field.torch_shape(self.worlds)
        return shape if time_steps is None else (time_steps, *shape)

    def _unknown(self, kind: str, name, known) -> ValueError:
        return ValueError(f"unknown {kind} field {name!r}; expected one of {', '.join(sorted(known))}")

    def states(self, state: dict) -> list:
        """[(field, tensor)] of a state dict, checked."""
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict of tensors by field name, got {type(state).__name__}")
        unknown = set(state) - set(self.state_fields)
        if unknown:
            raise self._unknown("state", sorted(unknown)[0], self.state_fields)
        missing = [name for name in self.state_fields if name not in state]
        if missing:
            raise ValueError(f"state is missing the field {missing[0]!r} (a state holds {', '.join(self.state_fields)})")
        return [(name, self._check(f"state[{name!r}]", state[name], (self._layout(name),)))
                for name in self.state_fields]

    def controls(self, control: dict | None, time_steps: int | None = None) -> list:
        """[(field, tensor)] of a control dict (a ``[T, ...]`` sequence with ``time_steps``)."""
        control = {} if control is None else control
        if not isinstance(control, dict):
            raise ValueError(f"controls must be a dict of tensors by Control field name, got {type(control).__name__}")
        for name in control:
            if name not in _CONTROL_SPECS:
                raise self._unknown("control", name, _CONTROL_SPECS)
        label = "control" if time_steps is None else "controls"
        return [(name, self._check(f"{label}[{name!r}]", control[name], (self._layout(name, time_steps),)))
                for name in sorted(control)]

    def parameters(self, parameters: dict | None) -> list:
        """[(field, tensor)] of a parameter dict, in flat or world layout."""
        parameters = {} if parameters is None else parameters
        if not isinstance(parameters, dict):
            raise ValueError(f"parameters must be a dict of tensors by Model field name, got {type(parameters).__name__}")
        checked = []
        for name in sorted(parameters):
            if name not in _PARAMETER_SPECS:
                raise self._unknown("differentiable Model", name, _PARAMETER_SPECS)
            field = self._fields["model." + name]
            shapes = tuple(s for s in (field.flat_shape, field.world_shape) if s is not None)
            tensor = self._check(field.label, parameters[name], shapes)
            if tensor.requires_grad and getattr(self.model, name).grad is None:
                raise ValueError(f"{field.label} requires a gradient, but the model was finalized without "
                                 "gradients (ModelBuilder.finalize(requires_grad=True))")
            checked.append((name, tensor))
        return checked

    def inputs(self, states: list, controls: list, params: list, state_label: str, control_label: str) -> tuple:
        """(flat tensors, names) of a call's checked inputs, after the value checks (``_check_values``)."""
        self._check_values([(f"{state_label}[{n!r}]", t, "finite") for n, t in states]
                           + [(f"{control_label}[{n!r}]", t, "finite") for n, t in controls]
                           + [(f"parameters[{n!r}]", t, _PARAMETER_SPECS[n].check) for n, t in params])
        tensors = [t for _, t in states + controls + params]
        return tensors, tuple([n for n, _ in group] for group in (states, controls, params))

    def needs_recording(self, tensors: list) -> bool:
        """Whether autograd must see this call; refuses a model without gradient arrays."""
        recording = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if recording and not self.model.requires_grad:
            raise ValueError("an input requires a gradient, but the model was finalized without gradients "
                             "(ModelBuilder.finalize(requires_grad=True))")
        return recording

    # ------------------------------------------------------------------ Warp views
    def write_parameters(self, parameters: list):
        """Copy the parameter tensors into the model's arrays (on the device)."""
        for name, tensor in parameters:
            wp.copy(getattr(self.model, name), self._fields["model." + name].view(tensor, grad=False))

    def control_object(self, arrays: dict) -> Control:
        """A Control whose fields are ``arrays`` (field -> Warp array), zeros elsewhere."""
        control = Control.__new__(Control)
        for name in _CONTROL_SPECS:
            setattr(control, name, arrays.get(name, getattr(self._zero, name)))
        return control

    def state_object(self, views: dict, derived: State, requires_grad: bool) -> State:
        """A State whose integrated fields are ``views`` and whose derived fields (forces,
        body poses, neighbour lists) are ``derived``'s."""
        arrays = {spec: getattr(derived, spec) for spec in _STATE_SPECS}
        arrays.update(views)
        return State(self.model, requires_grad, arrays)

    def health(self):
        """The solver's health report (per-world blow-ups; synchronises)."""
        return self.solver.health()


class _StatePool:
    """Fresh States for successive steps, allocated ``_POOL_SIZE`` at a time."""

    def __init__(self, model, requires_grad: bool):
        self.model, self.requires_grad, self._free = model, requires_grad, []

    def take(self) -> State:
        if not self._free:
            self._free = State.batch(self.model, _POOL_SIZE, self.requires_grad)[::-1]
        return self._free.pop()


class _ModelValues:
    """Swap the parameter values a recorded call used back into the model for its backward."""

    def __init__(self, bridge: _Bridge, parameters: list):
        self.arrays = [getattr(bridge.model, name) for name, _ in parameters]
        self.used = [wp.clone(arr) for arr in self.arrays]
        self.shapes = [tensor.shape for _, tensor in parameters]

    def gradients(self) -> list:
        """The model arrays' gradients as tensors in the shapes the call's parameters had."""
        return [wp.to_torch(arr.grad, requires_grad=False).clone().reshape(shape)
                for arr, shape in zip(self.arrays, self.shapes)]

    def __enter__(self):
        self.current = [wp.clone(arr) for arr in self.arrays]
        for arr, used in zip(self.arrays, self.used):
            wp.copy(arr, used)
            arr.grad.zero_()
        return self

    def __exit__(self, *exc):
        for arr, current in zip(self.arrays, self.current):
            wp.copy(arr, current)


class TorchStep(_Bridge):
    """One differentiable simulation step on dicts of torch tensors.

    Args:
        solver: a wpsim solver (e.g. ``SemiImplicitSolver``) of a model finalized with
            ``requires_grad=True`` when gradients are wanted.
        dt: time step (s).
        worlds: None (flat layout: each tensor has its field's shape) or the model's number
            of replicated worlds W (tensors ``(W, rows / W, ...)``).
        check_finite: refuse non-finite inputs, and parameters that are negative (or not
            positive) where their Model field's check says so, with a ValueError naming the
            field, index and world (one boolean read back per call).

    ``step(state, control=None, parameters=None)`` returns the next state as a dict of the
    fields in ``state_fields``. Each call that autograd records keeps its own ``wp.Tape``
    until torch frees the graph; a call with no input requiring a gradient records nothing.
    A world that blows up is flagged in ``health()``; the next step then refuses its state.
    """

    def __init__(self, solver, dt: float, worlds: int | None = None, check_finite: bool = True):
        super().__init__(solver, dt, worlds, check_finite)
        self._pools = {grad: _StatePool(self.model, grad) for grad in (False, True)}

    def initial_state(self) -> dict:
        """The model's initial positions and velocities as a state dict (new tensors)."""
        state = self.model.state(requires_grad=False)
        return {name: _tensor(getattr(state, name), self._layout(name)).clone() for name in self.state_fields}

    def __call__(self, state: dict, control: dict | None = None, parameters: dict | None = None) -> dict:
        states, controls, params = self.states(state), self.controls(control), self.parameters(parameters)
        tensors, names = self.inputs(states, controls, params, "state", "control")
        if not self.needs_recording(tensors):
            outputs = self._forward(states, controls, params, None)[0]
        else:
            outputs = _StepFunction.apply(self, names, *tensors)
        return dict(zip(self.state_fields, outputs))

    def _forward(self, states: list, controls: list, params: list, tape: wp.Tape | None) -> tuple:
        """Run the step (recorded on ``tape`` if given); returns (outputs, Warp arrays)."""
        grad = tape is not None
        self.write_parameters(params)
        out = self._pools[grad].take()
        views = {name: self._fields[name].view(t, grad) for name, t in states}
        control_views = {name: self._fields[name].view(t, grad) for name, t in controls}
        state_in = self.state_object(views, out, grad)
        control_in = self.control_object(control_views)
        if tape is None:
            self.solver.step(state_in, out, control_in, self.dt)
        else:
            with tape:
                self.solver.step(state_in, out, control_in, self.dt)
        outputs = tuple(_tensor(getattr(out, name), self._layout(name)) for name in self.state_fields)
        return outputs, (views, control_views, out)


class _StepFunction(torch.autograd.Function):
    """Autograd node of one TorchStep call: forward records a tape, backward runs it."""

    @staticmethod
    def forward(ctx, step: TorchStep, names: tuple, *tensors):
        states, controls, params = _split(names, tensors)
        ctx.tape = wp.Tape()
        ctx.step, ctx.names = step, names
        outputs, ctx.arrays = step._forward(states, controls, params, ctx.tape)
        ctx.values = _ModelValues(step, params)
        ctx.save_for_backward(*tensors)  # torch then refuses a backward after an in-place change of an input
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        ctx.saved_tensors  # noqa: B018 -- raises if an input was modified in place since the forward
        step = ctx.step
        views, control_views, out = ctx.arrays
        state_names, control_names, _ = ctx.names
        with ctx.values:
            ctx.tape.zero()
            for arr in list(views.values()) + list(control_views.values()):
                arr.grad.zero_()
            for name, grad in zip(step.state_fields, grad_outputs):
                target = getattr(out, name).grad
                if grad is None:
                    target.zero_()
                else:
                    source = grad.to(step.torch_dtype).contiguous()
                    wp.copy(target, step._fields[name].view(source, grad=False))
            ctx.tape.backward()
            grads = [_tensor(views[n].grad, step._layout(n)).clone() for n in state_names]
            grads += [_tensor(control_views[n].grad, step._layout(n)).clone() for n in control_names]
            grads += ctx.values.gradients()
        return (None, None, *grads)


class TorchRollout(_Bridge):
    """A differentiable rollout of ``num_steps`` steps on torch tensors, through
    ``wpsim.diff.Rollout`` (its memory: checkpointed recompute by default).

    Args:
        solver, dt, worlds, check_finite: as for ``TorchStep``.
        num_steps: T >= 1.
        loss_fn: None, or a Warp loss ``loss_fn(k, state, loss)`` as for ``Rollout`` (it adds
            the term of state k, k = 0..T, into the ``loss_size`` entries of ``loss``).
        mode, segment_length: as for ``Rollout`` ("checkpoint" or "full").
        loss_size: entries of the loss (e.g. one per world).

    ``rollout(state0, controls=None, parameters=None)`` takes an initial state dict, controls
    as ``[T, ...]`` tensors per Control field (the control of step k is row k) and
    parameters as for ``TorchStep``. Without ``loss_fn`` it returns the trajectory, a dict of
    ``[T + 1, ...]`` tensors per state field (row k is state k); with it, the loss entries
    ``(loss_size,)``. The backward of a trajectory runs the rollout's backward once on the
    probe loss sum_k <upstream gradient_k, state_k>, so both modes cost one backward sweep.
    """

    def __init__(self, solver, num_steps: int, dt: float, loss_fn=None, mode: str = "checkpoint",
                 worlds: int | None = None, loss_size: int = 1, segment_length: int | None = None,
                 check_finite: bool = True):
        super().__init__(solver, dt, worlds, check_finite)
        if int(num_steps) != num_steps or num_steps < 1:
            raise ValueError(f"num_steps must be an integer >= 1, got {num_steps}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        if loss_fn is not None and not callable(loss_fn):
            raise ValueError("loss_fn must be None or callable as loss_fn(step, state, loss)")
        if loss_fn is None and loss_size != 1:
            raise ValueError("loss_size applies to a loss_fn; a trajectory rollout has none")
        self.num_steps, self.loss_fn, self.mode = int(num_steps), loss_fn, mode
        self.loss_size, self.segment_length = int(loss_size), segment_length

    def __call__(self, state0: dict, controls: dict | None = None, parameters: dict | None = None):
        states = self.states(state0)
        sequences = self.controls(controls, self.num_steps)
        params = self.parameters(parameters)
        tensors, names = self.inputs(states, sequences, params, "state0", "controls")
        if not self.needs_recording(tensors):
            run = _RecordedRollout(self, names, tensors, grad=False)
            return run.outputs()
        outputs = _RolloutFunction.apply(self, names, *tensors)
        if self.loss_fn is not None:
            return outputs[0]
        return dict(zip(self.state_fields, outputs))


class _RecordedRollout:
    """One TorchRollout call: its Warp views, its ``Rollout`` and its trajectory buffers."""

    def __init__(self, bridge: TorchRollout, names: tuple, tensors: list, grad: bool):
        states, sequences, self.params = _split(names, tensors)
        self.bridge, self.grad, model = bridge, grad, bridge.model
        bridge.write_parameters(self.params)
        self.values = _ModelValues(bridge, self.params) if grad else None
        self.views = {n: bridge._fields[n].view(t, grad) for n, t in states}
        self.state0 = bridge.state_object(self.views, State(model, grad), grad)
        self.sequences = {}
        for name, tensor in sequences:
            field = bridge._fields[name]
            flat = tensor.detach().reshape(bridge.num_steps, *field.flat_shape)
            arr = wp.from_torch(flat, dtype=field.wp_dtype, requires_grad=False)
            if grad:
                arr.requires_grad = True
            self.sequences[name] = arr
        controls = None
        if self.sequences:
            controls = [bridge.control_object({n: arr[k] for n, arr in self.sequences.items()})
                        for k in range(bridge.num_steps)]
        loss_fn, loss_size = bridge.loss_fn, bridge.loss_size
        if loss_fn is None:
            loss_fn, loss_size = self._probe, 1
            rows = bridge.num_steps + 1
            self.trajectory = {n: wp.zeros((rows, f.rows), dtype=f.wp_dtype, device=model.device)
                               for n, f in ((n, bridge._fields[n]) for n in bridge.state_fields)}
            self.weights = {n: wp.zeros_like(arr) for n, arr in self.trajectory.items()}
            self.slots = {n: wp.zeros(arr.shape[1], dtype=wp.int32, device=model.device)
                          for n, arr in self.trajectory.items() if n.startswith("joint")}
        self.rollout = Rollout(bridge.solver, bridge.num_steps, bridge.dt, loss_fn, control=controls,
                               mode=bridge.mode, segment_length=bridge.segment_length, loss_size=loss_size)
        self.rollout.forward(self.state0)

    def _probe(self, k: int, state: State, loss: wp.array):
        """Copy state k into the trajectory; add <weights[k], state k> to the loss."""
        model = self.bridge.model
        for name, store in self.trajectory.items():
            wp.copy(store[k], getattr(state, name))
        if "particle_q" in self.trajectory:
            wp.launch(for_precision(losses.linear_state_loss, model.dtype), dim=model.particle_count,
                      inputs=[state.particle_q, state.particle_qd, self.weights["particle_q"][k],
                              self.weights["particle_qd"][k]], outputs=[loss], device=model.device)
        for name, slots in self.slots.items():
            wp.launch(for_precision(losses.weighted_sum_loss, model.dtype), dim=slots.shape[0],
                      inputs=[getattr(state, name), self.weights[name][k], slots], outputs=[loss],
                      device=model.device)

    def outputs(self):
        """The loss entries, or the trajectory dict (torch views of Warp arrays)."""
        bridge = self.bridge
        if bridge.loss_fn is not None:
            return wp.to_torch(self.rollout.loss, requires_grad=False).clone()
        return {n: _tensor(arr, bridge._layout(n, bridge.num_steps + 1)) for n, arr in self.trajectory.items()}

    def backward(self, grad_outputs: tuple) -> list:
        """Gradients of the call's inputs for the upstream gradients of its outputs."""
        bridge = self.bridge
        loss_adjoint = None
        if bridge.loss_fn is not None:
            upstream = grad_outputs[0]
            loss_adjoint = wp.from_torch(upstream.to(bridge.torch_dtype).contiguous(), requires_grad=False)
        else:
            for name, upstream in zip(bridge.state_fields, grad_outputs):
                target = self.weights[name]
                if upstream is None:
                    target.zero_()
                else:
                    field = bridge._fields[name]
                    flat = upstream.to(bridge.torch_dtype).contiguous().reshape(bridge.num_steps + 1, *field.flat_shape)
                    wp.copy(target, wp.from_torch(flat, dtype=field.wp_dtype, requires_grad=False))
        with self.values as values:
            if not self.rollout._pending:  # a second backward of the same graph: run the forward again
                self.rollout.forward(self.state0)
            self.rollout.zero_grad()
            for arr in self.sequences.values():
                arr.grad.zero_()
            self.rollout.backward(loss_adjoint=loss_adjoint)
            grads = [_tensor(arr.grad, bridge._layout(n)).clone() for n, arr in self.views.items()]
            grads += [_tensor(arr.grad, bridge._layout(n, bridge.num_steps)).clone()
                      for n, arr in self.sequences.items()]
            grads += values.gradients()
        return grads


class _RolloutFunction(torch.autograd.Function):
    """Autograd node of one TorchRollout call."""

    @staticmethod
    def forward(ctx, bridge: TorchRollout, names: tuple, *tensors):
        ctx.run = _RecordedRollout(bridge, names, list(tensors), grad=True)
        ctx.save_for_backward(*tensors)
        outputs = ctx.run.outputs()
        return (outputs,) if bridge.loss_fn is not None else tuple(outputs.values())

    @staticmethod
    def backward(ctx, *grad_outputs):
        ctx.saved_tensors  # noqa: B018 -- raises if an input was modified in place since the forward
        return (None, None, *ctx.run.backward(grad_outputs))
