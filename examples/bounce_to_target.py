"""Differentiable optimisation: throw a soft cube so that it bounces and lands on a target.

The throw task (``wpsim.tasks.throw``), optimised by ``wpsim.apps.throw_demo.run_demo`` (also
``wpsim demo --task throw``): a 2x2x2-cell Neo-Hookean cube is thrown with an initial
velocity v0; the loss is the squared horizontal distance (m^2) between its centre of mass
after 0.8 s (one bounce on the ground) and a target spot, and ``wp.Tape`` differentiates it
through 800 steps of FEM and contact to update v0 by gradient descent. The time step (1 ms)
is the one ``wpsim.tasks.scene_library.bouncing_cube`` is documented as stable at: its
2 kN/m ground and 20 kPa material against its lightest (5 g) vertex give dt * omega of about
0.8 < 2.

Writes loss.png, trajectory.png and result.json.
"""

from __future__ import annotations

import sys

import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.apps.console import example_main
from wpsim.apps.throw_demo import run_demo
from wpsim.tasks.throw import DemoConfig


def main(argv=None) -> int:
    """Command line: --device, --out, --test (fewer iterations; asserts a 100x lower loss)."""

    def run(test, out, device):
        return run_demo(out, DemoConfig(iterations=8) if test else DemoConfig(), device=device)

    def check(result):
        if result["loss_reduction"] < 100.0:
            return f"the loss fell only {result['loss_reduction']:.3g}x (< 100x)"
        return None

    return example_main(__doc__, "bounce_to_target", "short run; fail unless the loss falls at least 100x",
                        run, check, argv)


if __name__ == "__main__":
    sys.exit(main())
