"""Time the planning tasks' rollouts on the staged and the fused soft-contact schedules, in one
run, and print JSON: per task, the best wall time of an unrecorded plan (``evaluate``) and of a
cost and gradient (a recorded rollout and its backward), each schedule, their ratio, and the
largest difference of states and gradients between the two.

    python benchmarks/task_schedules.py [--worlds 16] [--repeats 3]

Tasks: the finger spinner (finger and spinner: two articulations that one pair joins), the
box push (arm and box) and, where MuJoCo Menagerie's copies are installed, the Panda push
(arm, cube, fingers coupled by an equality). Every world stands in contact at the start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import numpy as np


def best(run, repeats: int) -> float:
    """Least wall time (s) of ``repeats`` calls of ``run``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def problems(worlds: int) -> dict:
    """{task: a function making its planning problem}, the Panda only where its file is installed."""
    from wpsim.tasks import box_push, finger_spin, panda_push

    made = {"finger_spin": lambda: finger_spin.make_problem(*finger_spin.initial_states(worlds, 0)),
            "box_push": lambda: box_push.make_problem(*box_push.initial_states(worlds, 0)[:2], 30)}
    try:
        panda_push.scene_path()
    except FileNotFoundError:
        return made
    x0, goals = panda_push.initial_states(worlds, 0)
    made["panda_push"] = lambda: panda_push.make_problem(x0, goals, 40)
    return made


def compare(make, repeats: int) -> dict:
    """The task's timings and differences on both schedules (``fused`` False, then None)."""
    from wpsim.solvers import SemiImplicitSolver

    found = {}
    for name, fused in (("staged", False), ("fused", None)):
        problem = make()
        options = problem.make_solver(problem.builder.finalize(dtype=problem.dtype)).soft_contact.options
        problem.make_solver = lambda model, f=fused: SemiImplicitSolver(model, soft_contact=options, fused=f)
        U = problem.initial_controls()
        problem.evaluate(U)
        _, X, gradient = problem.cost_and_gradient(U)
        found[name] = {"step": type(problem.plans.solver.fused).__name__,
                       "evaluate_s": best(lambda: problem.evaluate(U), repeats),
                       "cost_and_gradient_s": best(lambda: problem.cost_and_gradient(U), repeats),
                       "states": X, "gradient": gradient,
                       "steps": problem.steps * problem.substeps}
    staged, fused = found["staged"], found["fused"]
    return {"steps": staged["steps"], "staged_step": staged["step"], "fused_step": fused["step"],
            **{f"{k}_{side}": found[side][k] for k in ("evaluate_s", "cost_and_gradient_s") for side in found},
            "evaluate_speedup": staged["evaluate_s"] / fused["evaluate_s"],
            "cost_and_gradient_speedup": staged["cost_and_gradient_s"] / fused["cost_and_gradient_s"],
            "max_state_difference": float(np.abs(staged["states"] - fused["states"]).max()),
            "max_gradient_difference_relative": float(np.abs(staged["gradient"] - fused["gradient"]).max()
                                                      / np.abs(staged["gradient"]).max())}


def main(argv=None) -> int:
    """Compare the schedules on every task and print the JSON."""
    import warp as wp

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=16, help="plans (worlds) per task (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls, the best kept (default: %(default)s)")
    args = parser.parse_args(argv)
    wp.config.quiet = True
    with contextlib.redirect_stdout(sys.stderr):  # Warp's start-up and module-load lines: stdout keeps the JSON
        results = {task: compare(make, args.repeats) for task, make in problems(args.worlds).items()}
    print(json.dumps({"worlds": args.worlds, "repeats": args.repeats, "tasks": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
