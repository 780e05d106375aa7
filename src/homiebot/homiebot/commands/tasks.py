"""`homiebot tasks build`: write the simulator's EMMOE task folders from their definitions."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "build data/<split>/<id>/{scene.json,keypath.json,info.txt} from a task definition file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot tasks`."""
    parser.add_argument("action", choices=["build"], help="what to do")
    parser.add_argument("--definitions", type=Path, default=Path("data/tasks/emmoe_test.yaml"),
                        help="task definition YAML (default: %(default)s)")
    parser.add_argument("--data", type=Path, default=Path("data"), help="data folder holding train/ and test/")
    parser.add_argument("--split", choices=["train", "test"], default="test", help="split folder to write")


def run(args: argparse.Namespace) -> int:
    """Validate the definitions and write the task folders."""
    from homiebot.benchmark_tasks import TaskDefinitionError, build_tasks, load_definitions
    from homiebot.cli import UsageError

    try:
        written = build_tasks(load_definitions(args.definitions), args.data, args.split)
    except TaskDefinitionError as error:
        raise UsageError(str(error)) from error
    for directory in written:
        print(f"wrote {directory}")
    return 0
