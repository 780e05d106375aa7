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
    from homiebot.setting import DEFAULT_SETTING, SETTINGS

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
    dagger = parser.add_argument_group("on-policy collection (--dagger)")
    dagger.add_argument("--dagger", action="store_true",
                        help="run the student planner (HomieBot-135M, or --model) on the train tasks with the "
                             "re-planning expert answering every step too; write <out>/rows/*.jsonl (its prompts with "
                             "the expert's answers) for `homiebot data dagger`")
    dagger.add_argument("--model", default="", help="--dagger: the student's adapter folder (default: the shipped one)")
    dagger.add_argument("--beta", type=float, default=0.0,
                        help="--dagger: probability that a step executes the expert's answer (default: 0)")
    dagger.add_argument("--seed", type=int, default=0, help="--dagger: seed of the beta draws (default: 0)")
    dagger.add_argument("--exclude", default="", help="--dagger: task ids kept out, with their variants (the "
                                                      "validation tasks), e.g. 7,34,63")
    dagger.add_argument("--setting", choices=SETTINGS, default=DEFAULT_SETTING,
                        help="--dagger: background (M3 skills, default) or no_background (sensor-only skills)")


def run(args: argparse.Namespace) -> int:
    """Collect, write the tasks, and report the steps that differ from their design."""
    from rich.console import Console

    from homiebot.cli import UsageError
    from homiebot.commands._progress import with_progress
    from homiebot.commands._ray import ray_options
    from homiebot.collect import CollectConfig, CollectError, collect

    if args.dagger:
        return _run_dagger(args)
    try:
        config = CollectConfig(tasks=args.tasks, data_dir=args.data, out=args.out,
                               work=args.work or args.out / "runs", jobs=args.jobs, variants=not args.no_variants,
                               overrides=tuple(args.overrides), conditions=args.conditions, ray=ray_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from error
    differences = with_progress(Console(stderr=True), "tasks", lambda report, on_progress: collect(
        config, report=report, on_progress=on_progress), (CollectError,))
    for difference in differences:
        print(f"differs: {difference}")
    left_out = sorted({difference.task_id for difference in differences})
    print(f"collected into {config.out}; {len(differences)} step(s) differ from their design"
          + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    return 1 if differences else 0


def _run_dagger(args: argparse.Namespace) -> int:
    """`homiebot collect --dagger`: the round's runs and rows."""
    from rich.console import Console

    from homiebot.cli import UsageError
    from homiebot.collect import CollectError, DaggerCollectConfig, collect_dagger
    from homiebot.commands._progress import with_progress
    from homiebot.commands._ray import ray_options

    try:
        config = DaggerCollectConfig(
            out=args.out, tasks=args.tasks if args.tasks != "all" else "train", data_dir=args.data, model=args.model,
            beta=args.beta, seed=args.seed, exclude=tuple(item.strip() for item in args.exclude.split(",") if item.strip()),
            jobs=args.jobs, setting=args.setting, conditions=args.conditions, overrides=tuple(args.overrides),
            ray=ray_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from error
    chosen = with_progress(Console(stderr=True), "runs", lambda report, on_progress: collect_dagger(
        config, report=report, on_progress=on_progress), (CollectError,))
    print(f"on-policy rows of {len(chosen)} tasks in {config.rows_dir}; build the training data with "
          f"`homiebot data dagger --rows {config.rows_dir} --sft <SFT dataset> --out <dataset>`")
    return 0
