"""Random tosses under soft-constraint contact: does every step converge, does the result
depend on the iteration cap, and does the tape gradient match converged central differences?

Each toss is a box or a capsule (alternately) of random size, dropped from 0.25-0.5 m with
a random orientation, velocity (|v_i| < 1 m/s) and spin (|w_i| < 5 rad/s) onto ground of
friction 0.1-1.0, simulated for 0.6 s at 1 ms in float64 with ``SoftContactOptions()``.
Per toss:

- convergence: steps whose solve stopped at the default cap above its tolerance
  (``solver.health()``), and the most Newton iterations a step used;
- cap independence: the largest difference of the final joint coordinates and velocities
  between caps 50 and 200;
- gradient: d (final position . u) / d (initial velocity . v) for random unit u, v, from the
  tape (implicit adjoint) and from central differences at eps = 1e-3 ... 1e-7 m/s; the
  differences have settled where two consecutive eps agree within 1 %, and the toss passes
  if the tape is within 1 % of a settled difference.

``python -m wpsim.apps.contact_tosses [--count 100] [--out FILE.json]`` prints one line per
toss and the totals.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass

import numpy as np
import warp as wp

from wpsim.core.builder import ModelBuilder
from wpsim.solvers import SemiImplicitSolver, SoftContactOptions

STEPS, DT = 600, 1e-3
EPS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
"""Central-difference steps of the initial velocity (m/s)."""
AGREEMENT = 0.01


@dataclass
class Toss:
    """The outcome of one toss (see the module docstring)."""

    seed: int
    shape: str
    friction: float
    unconverged_steps: int
    most_iterations: int
    cap_difference: float
    tape: float
    central: list
    settled: bool
    agrees: bool


def build(seed: int):
    """(model, shape name, friction) of toss ``seed``."""
    rng = np.random.default_rng(seed)
    mu = float(rng.uniform(0.1, 1.0))
    builder = ModelBuilder()
    builder.add_ground_plane(mu=mu)
    body = builder.add_body()
    if seed % 2 == 0:
        shape = "box"
        builder.add_shape_box(body, hx=rng.uniform(0.05, 0.15), hy=rng.uniform(0.05, 0.15), hz=rng.uniform(0.03, 0.1),
                              density=500.0, mu=mu)
    else:
        shape = "capsule"
        builder.add_shape_capsule(body, radius=rng.uniform(0.03, 0.08), half_height=rng.uniform(0.05, 0.15),
                                  density=500.0, mu=mu)
    q = rng.normal(size=4)
    builder.add_joint_free(body, pos=(0.0, 0.0, rng.uniform(0.25, 0.5)), rot=tuple(q / np.linalg.norm(q)),
                           lin_vel=tuple(rng.uniform(-1.0, 1.0, 3)), ang_vel=tuple(rng.uniform(-5.0, 5.0, 3)))
    return builder.finalize(dtype=wp.float64, requires_grad=True), shape, mu


def simulate(model, qd0: np.ndarray, iterations: int = 20, tape: wp.Tape | None = None):
    """(final State, solver) from the model's initial pose with initial joint rates ``qd0``
    (recorded on ``tape`` if given)."""
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(iterations=iterations))
    states = [model.state(requires_grad=tape is not None) for _ in range(STEPS + 1)]
    states[0].joint_qd.assign(qd0)
    with tape if tape is not None else contextlib.nullcontext():
        for k in range(STEPS):
            solver.step(states[k], states[k + 1], None, DT)
    return states, solver


def final_position(states) -> np.ndarray:
    """(3,) final position of the body's joint origin (m)."""
    return states[-1].joint_q.numpy()[:3].astype(np.float64)


def run_toss(seed: int) -> Toss:
    """Toss ``seed``: convergence, cap independence and the gradient check."""
    model, shape, mu = build(seed)
    rng = np.random.default_rng(10_000 + seed)
    u, v = (w / np.linalg.norm(w) for w in rng.normal(size=(2, 3)))
    qd0 = model.state(requires_grad=False).joint_qd.numpy().astype(np.float64)
    direction = np.zeros_like(qd0)
    direction[:3] = v  # the linear-velocity dofs of the free joint (then the angular ones)
    states, solver = simulate(model, qd0)
    health = solver.health()
    low = simulate(model, qd0, iterations=50)[0][-1]
    high = simulate(model, qd0, iterations=200)[0][-1]
    cap_difference = float(max(np.abs(low.joint_q.numpy() - high.joint_q.numpy()).max(),
                               np.abs(low.joint_qd.numpy() - high.joint_qd.numpy()).max()))
    tape = wp.Tape()
    states = simulate(model, qd0, tape=tape)[0]
    position = states[-1].joint_q
    seed_grad = np.zeros(position.shape[0])
    seed_grad[:3] = u
    tape.backward(grads={position: wp.array(seed_grad, dtype=wp.float64)})
    tape_value = float(states[0].joint_qd.grad.numpy() @ direction)
    central = [float((final_position(simulate(model, qd0 + eps * direction)[0]) -
                      final_position(simulate(model, qd0 - eps * direction)[0])) @ u / (2.0 * eps)) for eps in EPS]

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= AGREEMENT * max(abs(b), 1e-9)

    settled = [close(a, b) for a, b in zip(central, central[1:])]
    agrees = any(s and close(tape_value, c) for s, c in zip(settled, central))
    unconverged = sum(entry.steps for entry in health.unconverged_contact.values())
    return Toss(seed, shape, mu, unconverged, health.contact_iterations, cap_difference, tape_value, central,
                any(settled), agrees)


def study(count: int, first_seed: int = 0, report=print) -> dict:
    """Run ``count`` tosses and return the totals and every toss (dicts)."""
    tosses = []
    for seed in range(first_seed, first_seed + count):
        toss = run_toss(seed)
        tosses.append(toss)
        report(f"toss {seed:>3} {toss.shape:<7} mu {toss.friction:.2f}: {toss.unconverged_steps} unconverged steps, "
               f"<= {toss.most_iterations} iterations, caps 50/200 differ by {toss.cap_difference:.2e}; "
               f"tape {toss.tape:+.6g}, central {', '.join(f'{c:+.6g}' for c in toss.central)} "
               f"({'agree' if toss.agrees else 'settled, disagree' if toss.settled else 'not settled'})")
    totals = {
        "tosses": count,
        "unconverged_steps": sum(t.unconverged_steps for t in tosses),
        "most_iterations": max(t.most_iterations for t in tosses),
        "largest_cap_difference": max(t.cap_difference for t in tosses),
        "gradient_agreement_rate": sum(t.agrees for t in tosses) / count,
        "exceptions": [{"seed": t.seed, "settled": t.settled} for t in tosses if not t.agrees],
    }
    report(f"{count} tosses: {totals['unconverged_steps']} unconverged steps, at most {totals['most_iterations']} "
           f"iterations, caps 50/200 differ by at most {totals['largest_cap_difference']:.2e}; tape within 1 % of "
           f"settled central differences in {totals['gradient_agreement_rate'] * 100:.0f} % of the tosses")
    return {"totals": totals, "tosses": [asdict(t) for t in tosses]}
