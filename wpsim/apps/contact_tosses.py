"""Command line of the random-toss study of soft-constraint contact
(``wpsim.tasks.contact_tosses``): convergence, cap independence and tape gradients against
central differences.

``python -m wpsim.apps.contact_tosses [--count 100] [--out FILE.json]`` prints one line per
toss and the totals.
"""

from __future__ import annotations

import argparse

import warp as wp

from wpsim.tasks import contact_tosses


def main(argv=None) -> int:
    """Command line: --count, --first-seed, --out."""
    parser = argparse.ArgumentParser(prog="python -m wpsim.apps.contact_tosses",
                                     description=contact_tosses.__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="tosses (default: %(default)s)")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first toss (default: 0)")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    wp.config.quiet = True
    result = contact_tosses.study(args.count, args.first_seed)
    if args.out:
        from wpsim.io.files import write_json

        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
