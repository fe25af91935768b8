"""Regenerate the README's gallery: run examples in their short ``--test`` mode and keep the
frame strip each draws of its USD stage (``wpsim.io.usd_render.render_strip``).

Run from the repository root: ``python examples/gallery/make_gallery.py`` (a few minutes on a
CPU). Writes ``examples/gallery/<example>.png``, each a 4 x 2 strip of 240 x 180 frames.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
STRIPS = {  # example -> the strip it writes into its --out folder
    "cloth_drape": "drape_frames.png",
    "arm_reach": "reach_frames.png",
    "soft_stiffness_fit": "fit_frames.png",
}


def main() -> int:
    """Run each example and copy its strip here; the exit status is the first failure's."""
    for example, strip in STRIPS.items():
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run([sys.executable, str(EXAMPLES / f"{example}.py"), "--test", "--out", out],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{example} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                return done.returncode
            shutil.copyfile(Path(out) / strip, HERE / f"{example}.png")
            print(f"wrote {HERE / f'{example}.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
