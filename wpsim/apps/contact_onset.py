"""Command line of the contact-onset study (``wpsim.tasks.contact_onset``): impacts at their
time of impact against the analytic continuous-time derivative, and damping that ramps in
with depth against central differences.

``python -m wpsim.apps.contact_onset [--out FILE.json]`` prints the figures.
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp

from wpsim.tasks import contact_onset


def main(argv=None) -> int:
    """Command line: --out FILE.json."""
    parser = argparse.ArgumentParser(prog="python -m wpsim.apps.contact_onset",
                                     description=contact_onset.__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    wp.config.quiet = True
    result = contact_onset.study()
    print(f"two-ball shot, exact derivative {contact_onset.SHOT_EXACT:.4f} s; worst relative error over two "
          "step-grid periods:")
    for key, row in result["shot"].items():
        print(f"  {key:22s} tape {row['worst_tape_error'] * 100:8.2f} %   loss slope {row['worst_slope_error'] * 100:8.2f} %")
    print("bounce with impacts, worst relative error of the tape derivative:")
    for key, row in result["bounce"].items():
        print(f"  {key:22s} {row['worst_tape_error'] * 100:6.2f} %")
    print(f"cloth landing, central differences along +z at eps {contact_onset.CLOTH_EPS} m/s:")
    for key, row in result["cloth"].items():
        print(f"  {key:22s} tape {row['tape']:+.5f}; differences {np.round(row['central_differences'], 5).tolist()}; "
              f"spread {row['fd_spread'] * 100:.1f} %")
    if args.out:
        from wpsim.io.files import write_json

        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
