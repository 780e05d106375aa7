"""`homiebot collect`: run the expert trajectories through the ROS 2 stack and write what really happened."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = ("replay every selected task's annotated trajectory through the simulation stack (resumable) and write the "
        "official layout with the real feedback and views; exit 1 when a step differs from its design")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot collect`."""
    from homiebot.commands._ray import add_ray_arguments
    from homiebot.conditions import add_conditions_argument

    parser.add_argument("--tasks", default="all", help="train, test, all, or task ids like 12,12_v1 (default: all)")
    parser.add_argument("--data", type=Path, default=Path("data"), help="designed tasks (default: data)")
    parser.add_argument("--out", type=Path, default=Path("collected"),
                        help="data folder to write the collected tasks to (default: collected)")
    parser.add_argument("--work", type=Path, help="raw runs, for resuming (default: <out>/runs)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel stacks, each on its own ROS_DOMAIN_ID")
    parser.add_argument("--no-variants", action="store_true", help="skip the variant folders (<id>_v<n>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one node parameter (repeatable)")
    add_conditions_argument(parser)
    add_ray_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Collect, write the tasks, and report the steps that differ from their design."""
    from rich.console import Console

    from homiebot.cli import UsageError
    from homiebot.commands._progress import print_untrusted, progress_bar
    from homiebot.commands._ray import ray_options
    from homiebot.collect import CollectConfig, CollectError, collect

    try:
        config = CollectConfig(tasks=args.tasks, data_dir=args.data, out=args.out,
                               work=args.work or args.out / "runs", jobs=args.jobs, variants=not args.no_variants,
                               overrides=tuple(args.overrides), conditions=args.conditions, ray=ray_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from error
    console = Console(stderr=True)
    with progress_bar(console, "tasks") as on_progress:
        try:
            differences = collect(config, report=lambda line: print_untrusted(console, line), on_progress=on_progress)
        except CollectError as error:
            raise UsageError(str(error)) from error
    for difference in differences:
        print(f"differs: {difference}")
    left_out = sorted({difference.task_id for difference in differences})
    print(f"collected into {config.out}; {len(differences)} step(s) differ from their design"
          + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    return 1 if differences else 0
