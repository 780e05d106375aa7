"""`homiebot run`: run EMMOE tasks through the ROS 2 stack and print the EMMOE table."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run EMMOE tasks through the simulation stack (resumable) and print the EMMOE metrics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot run`."""
    from homiebot.commands._ray import add_ray_arguments
    from homiebot.conditions import add_conditions_argument
    from homiebot.run_config import PLANNERS
    from homiebot.setting import DEFAULT_SETTING, SETTINGS, add_perception_argument

    parser.add_argument("--tasks", default="test", help="train, test, all, or task ids like 91,93 (default: test)")
    parser.add_argument("--runs", type=int, default=3, help="runs per task (default: 3, as the benchmark)")
    parser.add_argument("--planner", choices=PLANNERS, default="homiebot",
                        help="planner backend (default: homiebot, the trained HomieBot-135M; smollm2 is it untuned)")
    parser.add_argument("--setting", choices=SETTINGS, default=DEFAULT_SETTING,
                        help="benchmark setting: background (privileged M3 skills) or no_background (sensor-only "
                             "skills on the chosen model's server; see homiebot.setting); default: %(default)s")
    add_conditions_argument(parser)
    add_perception_argument(parser)
    parser.add_argument("--out", type=Path, required=True, help="experiment folder, e.g. runs/my_exp")
    parser.add_argument("--data", type=Path, default=Path("data"), help="EMMOE data folder (default: data)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel stacks, each on its own ROS_DOMAIN_ID")
    parser.add_argument("--max-steps", type=int, default=20, help="planner steps per run (default: 20)")
    parser.add_argument("--model", default="", help="openai: model name; hf: local model folder; homiebot: an adapter folder other than models/homiebot-135m")
    parser.add_argument("--base-url", default="", help="openai: server URL (the key comes from OPENAI_API_KEY)")
    parser.add_argument("--config", type=Path, help="ROS parameter file (default: the installed emmoe_sim.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one node parameter (repeatable)")
    parser.add_argument("--run-timeout", type=float, default=1800.0, help="seconds before a run is cancelled")
    parser.add_argument("--show-nodes", action="store_true", help="print every node's log lines")
    parser.add_argument("--no-videos", action="store_true",
                        help="do not write the head-camera and third-person videos (MP4) of each subtask and run")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID of the stack (with --jobs 1; default: a free one, locked for the run)")
    parser.add_argument("--retries", type=int, default=0,
                        help="run a run again at once, up to this many times, when it ends without a planner result "
                             "(a node died, the planner server failed, a time-out); default 0: a rerun resumes them")
    add_ray_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the pending runs, then score the experiment folder."""
    from emmoe_eval import cli as emmoe_eval_cli
    from rich.console import Console

    from homiebot.cli import UsageError
    from homiebot.commands._progress import print_untrusted, with_progress
    from homiebot.commands._ray import ray_options
    from homiebot.conditions import scoring_arguments
    from homiebot.run_folders import without_result
    from homiebot.run_config import RunnerConfig, RunnerError
    from homiebot.runner import run_benchmark, select_tasks
    from homiebot.setting import SettingMismatch, describe

    try:
        config = RunnerConfig(tasks=args.tasks, out=args.out, runs=args.runs, planner=args.planner,
                              setting=args.setting, conditions=args.conditions, perception=args.perception,
                              data_dir=args.data, jobs=args.jobs,
                              max_steps=args.max_steps,
                              model=args.model, base_url=args.base_url, params_file=args.config,
                              overrides=tuple(args.overrides), run_timeout_s=args.run_timeout,
                              record_videos=not args.no_videos, retries=args.retries, domain_id=args.domain_id,
                              ray=ray_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from error
    console = Console(stderr=True)
    progress = with_progress(console, "runs", lambda report, on_progress: run_benchmark(
        config, report=report, on_progress=on_progress, echo_nodes=args.show_nodes), (RunnerError, SettingMismatch))
    for problem in progress.failed:
        print_untrusted(console, problem, "[yellow]warning[/yellow]: ")
    task_ids = select_tasks(args.data, args.tasks)
    status = emmoe_eval_cli.main(["score", "--data", str(args.data), "--runs", str(args.out),
                                  "--tasks", ",".join(task_ids), *scoring_arguments(args.conditions)])
    print(f"  {describe(args.setting, args.conditions, args.perception)}", flush=True)
    missing = without_result(args.out, task_ids, args.runs)
    if missing:
        print_untrusted(console, ", ".join(missing), f"[red]error[/red]: {len(missing)} run(s) have no planner result "
                        "(infrastructure failures, left out of the scores above; run the same command again to retry "
                        "them): ")
        return 1
    return status
