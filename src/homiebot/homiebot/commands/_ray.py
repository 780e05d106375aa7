"""The `--ray` options that `homiebot run` and `homiebot collect` share."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from homiebot.run_config import RayOptions


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """`--ray [ADDRESS]` and its resource options."""
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="fan the runs out as Ray tasks: no ADDRESS starts a private Ray instance on this machine "
                             "(127.0.0.1 only); 'auto' joins the cluster `ray start` made here; HOST:PORT a head node")
    parser.add_argument("--ray-cpus-per-run", type=float, default=1.0,
                        help="CPUs Ray reserves for each run's stack (default: 1)")
    parser.add_argument("--ray-gpus-per-run", type=float, default=0.0,
                        help="GPUs Ray reserves for each run, for an hf planner on GPU nodes (default: 0)")
    parser.add_argument("--ray-shared-out", action="store_true",
                        help="--out is on a file system every Ray node mounts at the same path: workers write there "
                             "directly instead of sending the run files back")


def ray_options(args: argparse.Namespace) -> RayOptions | None:
    """The RayOptions of the parsed arguments (None without --ray)."""
    if args.ray is None:
        return None
    from homiebot.run_config import RayOptions

    return RayOptions(address=args.ray, cpus_per_run=args.ray_cpus_per_run, gpus_per_run=args.ray_gpus_per_run,
                      shared_out=args.ray_shared_out)
