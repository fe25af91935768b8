"""Every Warp kernel follows one argument convention (see ``wpsim.kernels``), checked from
its signature and its source; the checker is tested on deliberately bad kernels; and every
launch site passes the non-``_out`` arguments as ``inputs`` and the ``_out`` ones as
``outputs``."""

import ast
import functools
import importlib
import inspect
import pkgutil
import textwrap
from pathlib import Path

import pytest
import warp as wp

import wpsim
import wpsim.kernels
from wpsim.core.fields import CONTROL_FIELDS, MODEL_FIELDS
from wpsim.diff import GradientMonitor, clip_grad_norm, diagnostics, losses, nonfinite_grads
from wpsim.kernels import generic, particles

ROOT = Path(__file__).resolve().parents[1]
MODEL_NAMES = frozenset(spec.name for spec in MODEL_FIELDS)
CONTROL_NAMES = frozenset(spec.name for spec in CONTROL_FIELDS)
CLASS_NAMES = ("model", "state input", "control", "setting", "output")
"""Argument classes in the order they must appear in a signature."""


# ---------------------------------------------------------------------------- the checker
def argument_class(name: str, annotation) -> int | None:
    """Index in CLASS_NAMES of a kernel argument's class, or None for an array argument
    that fits none."""
    if not wp.types.is_array(annotation):
        return 3
    if name in MODEL_NAMES:
        return 0
    if name.endswith("_in"):
        return 1
    if name in CONTROL_NAMES:
        return 2
    if name.endswith("_out"):
        return 4
    return None


def _root_name(node) -> str | None:
    """The variable an indexed target starts from (``a`` in ``a[i, j]`` or ``a[i].x``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _resolve(node, namespace):
    """The object a called name (``f`` or ``module.f``) refers to in ``namespace``, or None."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, namespace), node.attr, None)
    return None


def _stored_roots(targets):
    """Root names of the indexed assignment targets (a bare name is a rebinding, not a write)."""
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _stored_roots(target.elts)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            yield _root_name(target)


def _python_functions(function: wp.Function) -> list:
    """The Python functions of a user ``@wp.func``: one per overload."""
    candidates = [function.func, *(o.func for o in getattr(function, "user_overloads", {}).values())]
    return list({id(f): f for f in candidates if f is not None}.values())


def _call_writes(call: ast.Call, namespace) -> set:
    """Names of the arrays a call writes: the first argument of ``wp.atomic_*``, or the
    arguments bound to parameters that a called ``@wp.func`` writes."""
    callee = _resolve(call.func, namespace)
    if not isinstance(callee, wp.Function):
        return set()
    if callee.is_builtin():
        return {_root_name(call.args[0])} if callee.key.startswith("atomic_") and call.args else set()
    written = set()
    for func in _python_functions(callee):
        bound = list(zip(inspect.signature(func).parameters, call.args))
        bound += [(keyword.arg, keyword.value) for keyword in call.keywords]
        writes = written_parameters(func)
        written.update(arg.id for param, arg in bound if param in writes and isinstance(arg, ast.Name))
    return written


@functools.cache
def written_parameters(func) -> frozenset:
    """Parameters of a kernel's or ``@wp.func``'s Python function whose arrays it writes,
    directly or through the ``@wp.func`` functions it calls."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    written = set()
    for statement in ast.walk(node):
        if isinstance(statement, ast.Assign):
            written.update(_stored_roots(statement.targets))
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            written.update(_stored_roots([statement.target]))
        elif isinstance(statement, ast.Call):
            written.update(_call_writes(statement, func.__globals__))
    return frozenset(written & {a.arg for a in node.args.args})


def _class_violations(args: list) -> list:
    """Messages for unclassifiable arguments and classes out of order."""
    messages, highest = [], None
    for name, annotation in args:
        cls = argument_class(name, annotation)
        if cls is None:
            messages.append(f"argument '{name}' is an array but neither a Model field, *_in, a Control field "
                            f"nor *_out")
            continue
        if cls == 3 and name.endswith(("_in", "_out")):
            messages.append(f"argument '{name}' is a setting (not an array) but named like an array (*_in/*_out)")
        if highest is not None and cls < highest[1]:
            messages.append(f"argument '{name}' ({CLASS_NAMES[cls]}) comes after '{highest[0]}' "
                            f"({CLASS_NAMES[highest[1]]}); the order is {', '.join(CLASS_NAMES)}")
        elif highest is None or cls > highest[1]:
            highest = (name, cls)
    return messages


def _write_violations(arrays: list, written: frozenset) -> list:
    """Messages for written arrays that are not ``_out`` and ``_out`` arrays never written."""
    messages = []
    for name in arrays:
        if name in written and not name.endswith("_out"):
            messages.append(f"argument '{name}' is written but is not an *_out argument")
        if name.endswith("_out") and name not in written:
            messages.append(f"argument '{name}' is an *_out argument but is never written")
    return messages


def kernel_violations(kernel: wp.Kernel) -> list:
    """Every breach of the argument convention by ``kernel``, each message starting with
    ``file::kernel:``; empty when it follows the convention."""
    path = Path(inspect.getsourcefile(kernel.func)).resolve()
    where = f"{path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path}::{kernel.func.__name__}"
    args = [(arg.label, arg.type) for arg in kernel.adj.args]
    arrays = [name for name, annotation in args if wp.types.is_array(annotation)]
    messages = _class_violations(args) + _write_violations(arrays, written_parameters(kernel.func))
    return [f"{where}: {message}" for message in messages]


def wpsim_kernels() -> list:
    """Every kernel defined in a ``wpsim.kernels`` module."""
    found = []
    for info in pkgutil.iter_modules(wpsim.kernels.__path__):
        module = importlib.import_module(f"wpsim.kernels.{info.name}")
        found += [value for value in vars(module).values()
                  if isinstance(value, wp.Kernel) and value.func.__module__ == module.__name__]
    return found


def test_every_kernel_follows_the_convention():
    kernels = wpsim_kernels()
    assert len(kernels) > 40
    messages = [message for kernel in kernels for message in kernel_violations(kernel)]
    assert not messages, "\n".join(messages)


def test_every_kernel_module_compiles_with_uncapped_slp_vectorization():
    """Warp's cap on the SLP vectorizer's depth is dropped in both flag spellings (and only where
    it is set), and the module of every precision-generic kernel (``generic.kernel``) carries the
    resulting CPU flags."""
    assert generic.uncapped_cpu_flags("-march=native -mllvm=-slp-recursion-max-depth=4 -O3") == "-march=native -O3"
    assert generic.uncapped_cpu_flags("-mllvm -slp-recursion-max-depth=2 -march=native") == "-march=native"
    for flags in ("-march=native", "", None):
        assert generic.uncapped_cpu_flags(flags) is None
    if generic.CPU_FLAGS is None:
        pytest.skip("Warp's CPU flags set no SLP depth cap here")
    assert "slp-recursion-max-depth" not in generic.CPU_FLAGS
    for kernel in (k for k in wpsim_kernels() if hasattr(k, "precision_overloads")):
        assert kernel.module.options.get("cpu_compiler_flags") == generic.CPU_FLAGS, kernel.key


# ---------------------------------------------------------------------------- the checker, on bad kernels
@wp.func
def store(target: wp.array(dtype=float), i: int, value: float):
    target[i] = value


@wp.func
def store_through(values: wp.array(dtype=float), i: int):
    store(value=1.0, i=i, target=values)


@wp.kernel
def follows_the_convention(
    particle_mass: wp.array(dtype=float),
    particle_q_in: wp.array(dtype=wp.vec3),
    particle_f_ext: wp.array(dtype=wp.vec3),
    dt: float,
    particle_f_out: wp.array(dtype=wp.vec3),
    energy_out: wp.array(dtype=float),
    counter_out: wp.array(dtype=float),
):
    i = wp.tid()
    particle_f_out[i] = particle_f_ext[i] + particle_q_in[i] * particle_mass[i] * dt
    wp.atomic_add(energy_out, 0, dt)
    store_through(counter_out, i)


@wp.kernel
def writes_an_input(particle_q_in: wp.array(dtype=float), energy_out: wp.array(dtype=float)):
    i = wp.tid()
    particle_q_in[i] = 0.0
    energy_out[i] = 1.0


@wp.kernel
def never_writes_an_output(particle_q_in: wp.array(dtype=float), energy_out: wp.array(dtype=float)):
    i = wp.tid()
    x = particle_q_in[i] + energy_out[i]  # noqa: F841 (read only)


@wp.kernel
def outputs_before_inputs(energy_out: wp.array(dtype=float), particle_q_in: wp.array(dtype=float)):
    i = wp.tid()
    energy_out[i] = particle_q_in[i]


@wp.kernel
def unclassifiable_name(values: wp.array(dtype=float), energy_out: wp.array(dtype=float)):
    i = wp.tid()
    energy_out[i] = values[i]


@wp.kernel
def writes_through_a_func(total_in: wp.array(dtype=float), energy_out: wp.array(dtype=float)):
    i = wp.tid()
    store_through(total_in, i)
    energy_out[i] = 1.0


@wp.kernel
def writes_through_a_kernels_func(
    particle_q_in: wp.array(dtype=wp.vec3d), world_fault_step_in: wp.array(dtype=int), energy_out: wp.array(dtype=int)
):
    i = wp.tid()
    x = particle_q_in[i]
    particles.flag_fault(x, x, 0, 0, 1.0, 1.0, world_fault_step_in)
    energy_out[i] = 1


def test_the_checker_passes_a_kernel_that_follows_the_convention():
    assert kernel_violations(follows_the_convention) == []


@pytest.mark.parametrize("kernel, expected", [
    (writes_an_input, "writes_an_input: argument 'particle_q_in' is written but is not an *_out argument"),
    (never_writes_an_output, "never_writes_an_output: argument 'energy_out' is an *_out argument but is never"),
    (outputs_before_inputs, "outputs_before_inputs: argument 'particle_q_in' (state input) comes after 'energy_out'"),
    (unclassifiable_name, "unclassifiable_name: argument 'values' is an array but neither"),
    (writes_through_a_func, "writes_through_a_func: argument 'total_in' is written but is not an *_out"),
    (writes_through_a_kernels_func, "writes_through_a_kernels_func: argument 'world_fault_step_in' is written"),
])
def test_the_checker_reports_each_kind_of_violation(kernel, expected):
    messages = kernel_violations(kernel)
    assert len(messages) == 1 and messages[0].startswith(f"tests/test_kernel_signatures.py::{expected}"), messages


# ---------------------------------------------------------------------------- launch sites
def _particle_model(particle_contact: bool):
    """Springs on the ground, a cloth with bending hinges, an FEM block (with particle-particle
    contact: not for the implicit solver)."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane()
    chain = [b.add_particle((0.08 * k, 0.0, 0.04), mass=0.1) for k in range(3)]
    b.add_springs([(chain[0], chain[1]), (chain[1], chain[2])], ke=100.0, kd=0.1)
    b.add_cloth_grid(pos=(0.0, 0.5, 0.3), dim_x=2, dim_y=1, cell_x=0.1, cell_y=0.1, bend_ke=0.01, bend_kd=0.001)
    b.add_soft_grid(pos=(0.5, 0.0, 0.1), dim_x=1, dim_y=1, dim_z=1, young_modulus=1.0e4, poisson_ratio=0.3, kd=0.1)
    if particle_contact:
        b.set_particle_contact(True)
    return b.finalize(dtype=wp.float64, requires_grad=True)


def _rigid_model():
    """A free box resting on the ground, and a pendulum whose sphere touches the ground."""
    b = wpsim.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body()
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=500.0)
    b.add_joint_free(box, pos=(0.0, 0.0, 0.099))
    link = b.add_body(mass=1.0, com=(0.0, 0.0, -0.5), inertia=(0.02, 0.02, 0.02))
    b.add_joint_revolute(-1, link, axis=(1.0, 0.0, 0.0), parent_pos=(1.0, 0.0, 1.04), q=0.1)
    b.add_shape_sphere(link, pos=(0.0, 0.0, -1.0), radius=0.05)
    return b.finalize(dtype=wp.float64, requires_grad=True)


def _recorded_rollout(solver, steps: int = 2, dt: float = 1e-3):
    """A rollout recorded on a tape with a loss on its final state, differentiated; returns
    the initial and the final state."""
    model = solver.model
    control = model.control()
    control.tet_activation.fill_(0.1)
    state = model.state()
    tape = wp.Tape()
    with tape:
        final = wpsim.simulate(solver, state, steps, dt, control)
        if model.body_count:
            wpsim.eval_fk(model, final)
            loss = losses.body_position_loss(final, [0], wp.zeros(1, dtype=wp.vec3d, requires_grad=True))
            losses.joint_state_loss(final, wp.clone(final.joint_q), wp.clone(final.joint_qd), loss)
        else:
            loss = losses.squared_distance(final.particle_q, wp.zeros_like(final.particle_q))
            losses.linear_state_loss(final, wp.clone(final.particle_q), wp.clone(final.particle_qd), loss)
    tape.backward(loss)
    return state, final


def _diagnose(model, state, final):
    """Energy, momentum, centroid and element reports, then gradient health checks."""
    diagnostics.energy_report(model, final, model.control())
    diagnostics.momentum_report(model, final)
    diagnostics.centroids(model, final, diagnostics.mass_weights(model))
    diagnostics.tet_volume_ratios(model, final)
    assert nonfinite_grads({"particle_q": state.particle_q}) == []
    clip_grad_norm({"particle_q": state.particle_q, "tet_mu": model.tet_mu}, 1.0e-6)
    monitor = GradientMonitor(1, model.device, {"tet_mu": model.tet_mu}, state)
    monitor.before_step()
    monitor.state_adjoint(0, state)
    monitor.after_step(0)


def _representative_runs():
    """Short rollouts exercising every solver path, their backward passes and the diagnostics."""
    model = _particle_model(particle_contact=True)
    state, final = _recorded_rollout(wpsim.SemiImplicitSolver(model))
    _diagnose(model, state, final)
    for soft_contact in (None, wpsim.SoftContactOptions()):
        _recorded_rollout(wpsim.SemiImplicitSolver(_rigid_model(), soft_contact=soft_contact))
    for adjoint in ("implicit", "unrolled"):
        _recorded_rollout(wpsim.ImplicitEulerSolver(_particle_model(particle_contact=False), adjoint=adjoint))


def _kernel_key(kernel: wp.Kernel) -> str:
    return f"{kernel.func.__module__}.{kernel.func.__name__}"


def test_every_launch_passes_the_outputs_as_outputs(monkeypatch):
    """During representative runs (forward and backward, penalty and soft contact, both
    implicit adjoints, diagnostics, losses and gradient health), each wpsim kernel launch has
    as many inputs as non-``_out`` arguments and as many outputs as ``_out`` ones."""
    launched, mismatches = set(), []
    original = wp.launch

    def checked_launch(kernel, dim, inputs=(), outputs=(), *args, **kwargs):
        if kernel.func.__module__.startswith("wpsim.kernels"):
            names = [arg.label for arg in kernel.adj.args]
            n_out = sum(name.endswith("_out") for name in names)
            if (len(inputs), len(outputs)) != (len(names) - n_out, n_out):
                mismatches.append(f"{_kernel_key(kernel)}: {len(inputs)} inputs and {len(outputs)} outputs for "
                                  f"{len(names) - n_out} non-_out and {n_out} _out arguments")
            launched.add(_kernel_key(kernel))
        return original(kernel, dim, inputs, outputs, *args, **kwargs)

    monkeypatch.setattr(wp, "launch", checked_launch)
    _representative_runs()
    assert not mismatches, "\n".join(sorted(set(mismatches)))
    never = sorted({_kernel_key(kernel) for kernel in wpsim_kernels()} - launched)
    assert len(launched) >= 45, f"only {len(launched)} kernels launched; never launched: {never}"
