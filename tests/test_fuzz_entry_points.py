"""Fuzzing the Python entry points (issue 45 item 7): ``solver.step``, ``solver.advance`` and
``wpsim.simulate`` given States and Controls of another model, arrays of the wrong length,
dtype or kind, and bad ``dt`` or step counts either run (when everything fits the model) or
raise a ValueError naming the argument, before anything is launched (the input state is
unchanged); never another exception.

``WPSIM_FUZZ_EXAMPLES`` sets the examples per test (see tests/fuzz_support.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import warp as wp
from fuzz_support import Table, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import wpsim
from wpsim.io.mjcf import import_mjcf

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TABLE = Table("test_fuzz_entry_points")
NAMES = ("dt", "state_in", "state_out", "control", "num_steps", "steps")


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    TABLE.emit()


@pytest.fixture(scope="module")
def models() -> dict:
    """Small models: particles (3 and 5, float32; 3 in float64) and the 2-link arm."""
    def particles(n, dtype=wp.float32):
        builder = wpsim.ModelBuilder()
        builder.add_particles(np.linspace(0.0, 1.0, 3 * n).reshape(n, 3) + 1.0)
        return builder.finalize(device="cpu", dtype=dtype)

    return {"p3": particles(3), "p5": particles(5), "p3d": particles(3, wp.float64),
            "arm": import_mjcf(ASSETS / "arm_2link.xml")[0].finalize(device="cpu")}


def _spoil(data, obj, label: str):
    """Replace one array field of ``obj`` (a State or Control) by a wrong one, or leave it."""
    fields = [k for k, v in vars(obj).items() if isinstance(v, wp.array)]
    if not fields or data.draw(st.booleans(), label=f"{label} spoiled?"):
        return ""
    name = data.draw(st.sampled_from(fields), label=f"{label} field")
    arr = getattr(obj, name)
    kind = data.draw(st.sampled_from(("longer", "shorter", "dtype", "numpy", "None", "list")), label=f"{label} how")
    if kind == "longer":
        value = wp.zeros(arr.shape[0] + 1, dtype=arr.dtype, device="cpu")
    elif kind == "shorter":
        value = wp.zeros(max(arr.shape[0] - 1, 0), dtype=arr.dtype, device="cpu")
    elif kind == "dtype":
        value = wp.zeros(arr.shape[0], dtype=wp.int32 if arr.dtype != wp.int32 else wp.float32, device="cpu")
    elif kind == "numpy":
        value = arr.numpy()
    elif kind == "list":
        value = arr.numpy().tolist()
    else:
        value = None
    setattr(obj, name, value)
    return f"{label}.{name} {kind}"


@fuzz_settings()
@given(data=st.data())
def test_fuzzed_solver_arguments_run_or_are_refused_naming_the_argument(models, data):
    name = data.draw(st.sampled_from(sorted(models)), label="model")
    model = models[name]
    solver_kind = data.draw(st.sampled_from(("semi-implicit", "implicit")) if name != "arm" else
                            st.just("semi-implicit"), label="solver")
    solver = (wpsim.SemiImplicitSolver if solver_kind == "semi-implicit" else wpsim.ImplicitEulerSolver)(model)
    other = lambda: models[data.draw(st.sampled_from(sorted(models)), label="other model")]  # noqa: E731
    state_in = (model if data.draw(st.booleans(), label="own state_in") else other()).state()
    state_out = (model if data.draw(st.booleans(), label="own state_out") else other()).state()
    control = data.draw(st.sampled_from(("none", "own", "other")), label="control")
    control = None if control == "none" else (model if control == "own" else other()).control()
    spoiled = [_spoil(data, state_in, "state_in"), _spoil(data, state_out, "state_out")]
    if control is not None:
        spoiled.append(_spoil(data, control, "control"))
    dt = data.draw(st.sampled_from((1e-3, 1e-4, 0.0, -1e-3, float("nan"), float("inf"), "0.001", None, True,
                                    np.float32(1e-3), 1e300)), label="dt")
    steps = data.draw(st.sampled_from((2, 1, 0, -1, 2.5, "3", True, np.int64(2))), label="steps")
    entry = data.draw(st.sampled_from(("step", "advance", "simulate")), label="entry")
    before = state_in.particle_q.numpy().copy() if isinstance(state_in.particle_q, wp.array) else None
    described = f"{entry} on {name} ({solver_kind}), dt={dt!r}, steps={steps!r}, {[s for s in spoiled if s]}"
    try:
        if entry == "step":
            solver.step(state_in, state_out, control, dt)
        elif entry == "advance":
            solver.advance(state_in, control, dt, steps)
        else:
            wpsim.simulate(solver, state_in, steps, dt, control=control)
        category = "passed"
    except ValueError as error:
        named = any(n in str(error) for n in NAMES)
        unchanged = before is None or np.array_equal(before, state_in.particle_q.numpy())
        category = "named error" if named and unchanged else "unnamed error"
        described += f": {error}"
    except wpsim.SimulationError as error:  # a blow-up reported (e.g. dt 1e300), by name
        category, described = "named error", described + f": {type(error).__name__}: {error}"
    except Exception as error:  # noqa: BLE001 - the category this suite is looking for
        category, described = "crash/traceback", described + f": {type(error).__name__}: {error}"
    TABLE.add(f"entry {entry}", category, described)
    assert category in ("named error", "passed"), described
