"""Differentiable optimisation: throw a soft cube so that it bounces and lands on a target.

The main job of wpsim (``wpsim.demo.run_demo``, also ``wpsim demo``): a 2x2x2-cell
Neo-Hookean cube is thrown with an initial velocity v0; the loss is the squared horizontal
distance (m^2) between its centre of mass after 0.8 s (one bounce on the ground) and a
target spot, and ``wp.Tape`` differentiates it through 800 steps of FEM and contact to
update v0 by gradient descent. The time step (1 ms) is the one ``wpsim.scenes.bouncing_cube``
is documented as stable at: its 2 kN/m ground and 20 kPa material against its lightest (5 g) vertex give
dt * omega of about 0.8 < 2.

Writes loss.png, trajectory.png and result.json.
"""

from __future__ import annotations

import argparse
import sys
import time

import warp as wp

wp.config.log_level = wp.LOG_WARNING

from wpsim.demo import DemoConfig, run_demo  # noqa: E402


def main(argv=None) -> int:
    """Command line: --device, --out, --test (fewer iterations; asserts a 100x lower loss)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0")
    parser.add_argument("--out", default="wpsim_out/bounce_to_target", help="output folder (default: %(default)s)")
    parser.add_argument("--test", action="store_true", help="short run; fail unless the loss falls at least 100x")
    args = parser.parse_args(argv)
    config = DemoConfig(iterations=8) if args.test else DemoConfig()
    start = time.perf_counter()
    result = run_demo(args.out, config, device=args.device)
    print(f"done in {time.perf_counter() - start:.1f} s")
    if args.test and result["loss_reduction"] < 100.0:
        raise SystemExit(f"test failed: the loss fell only {result['loss_reduction']:.3g}x (< 100x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
