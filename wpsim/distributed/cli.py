"""``python -m wpsim.distributed.cli``: the multi-node recipe as commands.

- ``head [--port P] [--num-cpus N] [--num-gpus G] [--dry-run]``: start the Ray head node here
  (``ray start --head``);
- ``join ADDRESS [--num-cpus N] [--num-gpus G] [--dry-run]``: join this node to the cluster
  whose head is at ADDRESS (host:port; ``ray start --address``);
- ``check [--address A] [--workers W] [--gpus-per-worker G] [--cpus-per-worker C] [--windows S]
  [--duration T]``:
  connect (A: "auto" on a cluster node, host:port, or ray://host:port for a client; none:
  a local Ray), start W workers (G GPUs each: 1 puts one actor on each GPU) on the S windows
  of the arm's measured run (``assets/``, or ``--robot`` / ``--data`` at paths every node
  can read), print where each worker runs, and compare the pool's loss and gradient with
  the in-process ones.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[2] / "assets"
ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-]+:(\d{1,5})$")


def _address(text: str) -> str:
    """An argparse type: "auto", host:port or ray://host:port with a port in 1..65535."""
    match = ADDRESS.match(text)
    if text != "auto" and not (match and 1 <= int(match.group(2)) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto', host:port or ray://host:port (port 1-65535)")
    return text


def _count(minimum: int, maximum: int | None = None):
    """An argparse type: an integer >= ``minimum`` (and <= ``maximum``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is above {maximum}")
        return value
    return parse


def _amount(text: str) -> float:
    """An argparse type: a number of GPUs (or CPUs) >= 0; fractions share one."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of the three commands."""
    parser = argparse.ArgumentParser(prog="python -m wpsim.distributed.cli",
                                     description="wpsim on a Ray cluster: start nodes, check workers")
    commands = parser.add_subparsers(dest="command", required=True)
    head = commands.add_parser("head", help="start the Ray head node on this machine")
    head.add_argument("--port", type=_count(1, 65535), default=6379, help="the head's port (default: %(default)s)")
    join = commands.add_parser("join", help="join this machine to a cluster")
    join.add_argument("address", type=_address, help="the head's host:port")
    for node in (head, join):
        node.add_argument("--num-cpus", type=_count(1), default=None, help="CPUs Ray may use here (default: all)")
        node.add_argument("--num-gpus", type=_count(0), default=None, help="GPUs Ray may use here (default: all)")
        node.add_argument("--dry-run", action="store_true", help="print the ray command instead of running it")
    check = commands.add_parser("check", help="start workers on the cluster and compare a gradient")
    check.add_argument("--address", type=_address, default=None, help="the cluster (default: a local Ray)")
    check.add_argument("--workers", type=_count(1), default=2, help="Ray actors (default: %(default)s)")
    check.add_argument("--gpus-per-worker", type=_amount, default=0.0, help="GPUs per actor (default: 0, CPU)")
    check.add_argument("--cpus-per-worker", type=_amount, default=1.0, help="CPUs per actor (default: 1)")
    check.add_argument("--windows", type=_count(1), default=4, help="shards: windows of the run (default: 4)")
    check.add_argument("--duration", type=float, default=0.2, help="seconds of the run used (default: 0.2)")
    check.add_argument("--robot", type=Path, default=ASSETS / "arm_2link.xml", help="robot file")
    check.add_argument("--data", type=Path, default=ASSETS / "arm_2link_sysid.csv", help="measured run")
    return parser


def ray_start_command(args: argparse.Namespace) -> list:
    """The ``ray start`` command line of a parsed ``head`` or ``join`` command."""
    command = ["ray", "start"]
    command += ["--head", f"--port={args.port}"] if args.command == "head" else [f"--address={args.address}"]
    if args.num_cpus is not None:
        command.append(f"--num-cpus={args.num_cpus}")
    if args.num_gpus is not None:
        command.append(f"--num-gpus={args.num_gpus}")
    return command


def check(args: argparse.Namespace) -> dict:
    """Run the ``check`` command: worker placement and the largest relative gradient
    difference between the pool and this process (0 on identical devices)."""
    import numpy as np
    import warp as wp

    from wpsim.distributed.pool import LocalPool, WorkerPool
    from wpsim.distributed.sysid import window_scenes

    wp.config.log_level = wp.LOG_WARNING

    scenes = window_scenes(args.robot, args.data, windows=args.windows, duration=args.duration)
    with WorkerPool(scenes, args.workers, address=args.address, gpus_per_worker=args.gpus_per_worker,
                    cpus_per_worker=args.cpus_per_worker) as pool:
        x = pool.space["x0"] * 1.1
        loss, grad = pool.value_and_grad(x)
        workers = pool.worker_info()
    ref_loss, ref_grad = LocalPool(scenes, "cpu").value_and_grad(x)
    difference = float(np.max(np.abs(grad - ref_grad)) / max(np.max(np.abs(ref_grad)), 1e-300))
    return {"workers": workers, "loss": loss, "in_process_loss": ref_loss, "gradient_difference": difference}


def main(argv=None) -> int:
    """Parse ``argv`` and run the command; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "check":
        found = check(args)
        for w, info in enumerate(found["workers"]):
            print(f"worker {w}: host {info['host']}, pid {info['pid']}, device {info['device']}")
        print(f"loss {found['loss']:.12g} (in-process {found['in_process_loss']:.12g}); largest relative gradient "
              f"difference {found['gradient_difference']:.3g}")
        return 0
    command = ray_start_command(args)
    print(" ".join(command))
    return 0 if args.dry_run else subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
