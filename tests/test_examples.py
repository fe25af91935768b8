"""Every example runs in its short ``--test`` mode (which asserts its result) and writes its plots
and its USD stage."""

import subprocess
import sys
from pathlib import Path

import pytest
from pxr import Usd

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
OUTPUTS = {
    "arm_reach": ["reach.png", "reach.usd", "reach_frames.png"],
    "arm_residual": ["heldout_00.png", "analytic_fit.png", "residual_training.png"],
    "arm_sysid": ["tracking.png", "history.png", "rollouts.usd", "rollouts.png", "calibrated.usda", "sysid.json"],
    "billiards": ["shot.png", "sweep.png", "billiards.usd", "billiards_frames.png"],
    "bounce_to_target": ["loss.png", "trajectory.png", "rollout.usd", "rollout_frames.png"],
    "box_push": ["plans.png", "plans.usd", "plans_frames.png"],
    "box_push_mpc": ["mpc.png", "mpc.usd", "mpc_frames.png"],
    "box_toss_friction": ["path.png", "history.png", "box_toss.usd", "box_toss_frames.png"],
    "cartpole_swingup": ["training.png", "swingup.usd", "swingup_frames.png"],
    "cloth_drape": ["drape.png", "drape.usd", "drape_frames.png"],
    "cloth_drag": ["drag.png", "drag.usd", "drag_frames.png"],
    "cloth_throw": ["throw.png", "throw.usd", "throw_frames.png"],
    "finger_spin": ["plans.png", "plans.usd", "plans_frames.png"],
    "panda_push": ["plans.png", "plans.usd", "plans_frames.png"],
    "long_horizon_swing": ["optimisation.png", "gradient_norms.png", "swing.usd", "swing_frames.png"],
    "pendulum_swingup": ["swingup.png", "swingup.usd", "swingup_frames.png"],
    "quadruped_accelerate": ["plans.png", "plans.usd", "plans_frames.png"],
    "soft_crawler": ["crawl.png", "crawl.usd"],
    "soft_crawler_codesign": ["codesign.png", "codesign.usd"],
    "soft_crawler_policy": ["crawl_training.png"],
    "soft_stiffness_fit": ["fit.png", "fit.usd", "fit_frames.png"],
    "spring_walker": ["walk.png", "walk.usd", "walk_frames.png"],
}


def test_every_example_is_listed():
    """A new example must say which plots and stages it writes."""
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(OUTPUTS)


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_example(script, tmp_path):
    """The example's --test run succeeds and writes non-empty plots, a USD stage with frames
    (opened here with pxr) and result.json."""
    proc = subprocess.run(
        [sys.executable, str(script), "--test", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,  # the slowest, box_toss_friction --test: 60 s alone
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    for name in OUTPUTS.get(script.stem, []):
        output = tmp_path / name
        assert output.is_file() and output.stat().st_size > 0, f"{script.name} did not write {name}"
        if output.suffix == ".usd":
            stage = Usd.Stage.Open(str(output))
            assert stage.GetDefaultPrim().GetPath() == "/World" and stage.GetEndTimeCode() > 0, name
    assert (tmp_path / "result.json").is_file()
