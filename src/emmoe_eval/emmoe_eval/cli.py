"""`emmoe-eval`: score EMMOE runs, write reports, score rosbags.

    emmoe-eval score --data DATA_DIR --runs EXP_DIR [--split train|test|all] [--compat official] [--srr-run N] [--json]
    emmoe-eval report EXP_DIR... --data DATA_DIR --out report/
    emmoe-eval score-bag BAG... --data DATA_DIR [--json]

User mistakes (missing folders, malformed files) print one `emmoe-eval: error: ...` line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emmoe_eval.bag_recovery import unfinished_bag
from emmoe_eval.bags import STEPS_TOPIC, BagError, read_bag_runs
from emmoe_eval.dataset import DatasetError, Task, load_task_attributes, load_tasks, split_names
from emmoe_eval.experiments import SOURCES, ExperimentError, load_experiment
from emmoe_eval.metrics import COMPAT_MODES, HEADLINE, Evaluation, ScoringConfig, ScoringError, evaluate
from emmoe_eval.names import AliasTableError, load_alias_table
from emmoe_eval.runs import Run

USER_ERRORS = (DatasetError, ExperimentError, ScoringError, BagError, AliasTableError)
_MAX_WARNINGS = 20


def _add_scoring_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path, metavar="DATA_DIR",
                        help="EMMOE data in the official layout: the folder holding train/ and test/ (or its parent)")
    parser.add_argument("--split", choices=("train", "test", "all"), default=None,
                        help="tasks to evaluate (default: all; with --compat official: train, as the release)")
    parser.add_argument("--compat", choices=COMPAT_MODES, default="default",
                        help="'official' reproduces the released notebooks' quirks (see docs/eval.md)")
    parser.add_argument("--tasks", default=None, metavar="ID,ID",
                        help="evaluate only these tasks of the split (e.g. 91,95,99; default: every task of it)")
    parser.add_argument("--attributes", type=Path, default=None, metavar="FILE",
                        help="task-attribute lists as JSON {attribute: [task ids]} (default: the release's lists)")
    parser.add_argument("--alias-table", type=Path, default=None, metavar="FILE",
                        help="alias table in the name_dict.txt format (default: the shipped copy)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for the CIs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--srr-run", default=None, metavar="N",
                        help="compute SRR on run index N only, as srr.ipynb does for its `round` (default: all runs "
                             "pooled; SRR_by_run always lists each index)")
    parser.add_argument("--include-infrastructure-failures", action="store_true",
                        help="score runs that ended with reason 'error' (infrastructure faults) as failed runs "
                             "instead of leaving them out")
    parser.add_argument("--verbose", action="store_true", help="print every warning, not only the first 20")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `emmoe-eval`."""
    parser = argparse.ArgumentParser(prog="emmoe-eval", description="EMMOE evaluation: metrics, reports, bag scoring.")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="score an experiment folder (<exp>/<task_id>/<run>/)",
                                description="Print SR, PLWSR, TP, SRR and SER (percent) of the runs in EXP_DIR.")
    score.add_argument("--runs", required=True, type=Path, metavar="EXP_DIR", help="the experiment folder")
    score.add_argument("--source", choices=SOURCES, default="auto",
                       help="run file to read: trajectory.jsonl, conversation.json, or auto (trajectory first)")
    score.add_argument("--json", action="store_true", help="print one JSON object (metrics as fractions in [0, 1])")
    _add_scoring_options(score)
    score.set_defaults(handler=_score)

    report = commands.add_parser("report", help="write an HTML report and a Markdown summary of experiments",
                                 description="Score one or more experiment folders and write OUT/index.html "
                                             "(self-contained) and OUT/summary.md with plots.")
    report.add_argument("experiments", nargs="+", type=Path, metavar="EXP_DIR", help="experiment folders")
    report.add_argument("--out", required=True, type=Path, help="output folder (created)")
    report.add_argument("--source", choices=SOURCES, default="auto", help="run file to read (default auto)")
    report.add_argument("--title", default="EMMOE evaluation report", help="report title")
    _add_scoring_options(report)
    report.set_defaults(handler=_report)

    bag = commands.add_parser("score-bag", help="score rosbag2 files (MCAP or sqlite3) of StepRecords",
                              description=f"Score the runs recorded as StepRecord messages on {STEPS_TOPIC}.")
    bag.add_argument("bags", nargs="+", type=Path, metavar="BAG", help=".mcap or .db3 files, or bag folders")
    bag.add_argument("--topic", default=STEPS_TOPIC, help=f"topic of the StepRecords (default {STEPS_TOPIC})")
    bag.add_argument("--json", action="store_true", help="print one JSON object (metrics as fractions in [0, 1])")
    _add_scoring_options(bag)
    bag.set_defaults(handler=_score_bag)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `emmoe-eval`; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
        return status
    except USER_ERRORS as error:
        print(f"emmoe-eval: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # invalid settings, e.g. --resamples 0
        print(f"emmoe-eval: error: {error}", file=sys.stderr)
        return 2


# ---- shared steps ----------------------------------------------------------------------------------------------------

def selected_split(args: argparse.Namespace) -> str:
    """The split to evaluate: the explicit --split, else train under --compat official (quirk 4), else all."""
    if args.split is not None:
        split: str = args.split
        return split
    return "train" if args.compat == "official" else "all"


def _score_runs(runs: list[Run], args: argparse.Namespace) -> Evaluation:
    """Evaluate the runs of the selected split; runs of tasks missing from the data are warned about."""
    split = selected_split(args)
    task_problems: list[str] = []
    every_task = load_tasks(args.data, "all", problems=task_problems)
    wanted = set(split_names(split))
    tasks: dict[str, Task] = {task_id: task for task_id, task in every_task.items() if task.split in wanted}
    if args.tasks is not None:
        chosen = [item.strip() for item in args.tasks.split(",") if item.strip()]
        absent = [task_id for task_id in chosen if task_id not in tasks]
        if absent:
            raise ValueError(f"--tasks: {', '.join(absent)} not among the {split} tasks of {args.data}")
        tasks = {task_id: tasks[task_id] for task_id in chosen}
    config = ScoringConfig(compat=args.compat, bootstrap_resamples=args.resamples, seed=args.seed,
                           srr_run=args.srr_run,
                           include_infrastructure_failures=args.include_infrastructure_failures)
    unknown = [run for run in runs if run.task_id not in every_task]
    evaluation = evaluate([run for run in runs if run.task_id in tasks], tasks, config,
                          attributes=load_task_attributes(args.attributes),
                          alias_table=load_alias_table(args.alias_table))
    evaluation.problems[:0] = task_problems + [
        f"task {run.task_id} run {run.run_id}: no such task (or a malformed one) in {args.data}; skipped"
        for run in unknown]
    summary = {"split": split, **evaluation.summary, "malformed_tasks": len(task_problems)}
    evaluation.summary = summary
    return evaluation


def _print_problems(problems: Sequence[str], verbose: bool) -> None:
    shown = problems if verbose else problems[:_MAX_WARNINGS]
    for problem in shown:
        print(f"warning: {problem}", file=sys.stderr)
    if len(problems) > len(shown):
        print(f"warning: ... and {len(problems) - len(shown)} more (use --verbose to see all)", file=sys.stderr)


def _emit(evaluation: Evaluation, args: argparse.Namespace) -> int:
    _print_problems(evaluation.problems, args.verbose)
    if args.json:
        print(json.dumps(evaluation.summary, indent=2))
    else:
        print(format_text(evaluation.summary))
    return 0


# ---- sub-commands ----------------------------------------------------------------------------------------------------

def _score(args: argparse.Namespace) -> int:
    experiment = load_experiment(args.runs, source=args.source)
    evaluation = _score_runs(experiment.runs, args)
    evaluation.problems[:0] = experiment.problems
    return _emit(evaluation, args)


def _score_bag(args: argparse.Namespace) -> int:
    missing = [str(path) for path in args.bags if not path.exists() and unfinished_bag(path) is None]
    if missing:
        raise BagError(f"no such bag: {', '.join(missing)}")
    found = read_bag_runs(args.bags, args.topic)
    evaluation = _score_runs(found.runs, args)
    evaluation.problems[:0] = found.problems
    return _emit(evaluation, args)


def _report(args: argparse.Namespace) -> int:
    from emmoe_eval.report import ExperimentResult, write_report

    results = []
    for directory in args.experiments:
        experiment = load_experiment(directory, source=args.source)
        evaluation = _score_runs(experiment.runs, args)
        _print_problems([f"{experiment.name}: {problem}" for problem in experiment.problems + evaluation.problems],
                        args.verbose)
        results.append(ExperimentResult(experiment, evaluation))
    tasks = load_tasks(args.data, "all", problems=[])  # the malformed ones were reported while scoring
    paths = write_report(results, tasks, args.out, title=args.title)
    for path in paths:
        print(path)
    return 0


# ---- text output -----------------------------------------------------------------------------------------------------

def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _range(bounds: list[float] | None) -> str:
    return "-" if bounds is None else f"{_percent(bounds[0])}-{_percent(bounds[1])}"


def format_text(summary: dict[str, Any]) -> str:
    """The paper-style tables (percent) of a score summary."""
    lines = [f"EMMOE scores: {summary['runs']} runs of {summary['tasks']} tasks "
             f"(split {summary.get('split', 'all')}, compat {summary['compat']})", ""]
    lines.append("  " + "".join(f"{name:>8}" for name in HEADLINE))
    lines.append("  " + "".join(f"{_percent(summary[name]):>8}" for name in HEADLINE) + "   (percent)")
    intervals = summary["confidence_intervals"]
    if intervals["SR"] is not None:
        level = round(100 * intervals["level"])
        lines.append(f"  {level}% bootstrap CI over tasks ({intervals['resamples']} resamples): "
                     f"SR {_percent(intervals['SR'][0])}-{_percent(intervals['SR'][1])}, "
                     f"TP {_percent(intervals['TP'][0])}-{_percent(intervals['TP'][1])}")
    by_run = summary.get("SRR_by_run") or {}
    if by_run:
        scope = f"run {summary['srr_run']} only" if summary.get("srr_run") else "all runs pooled"
        lines.append("  SRR by run index: " + ", ".join(f"{run}: {_percent(value)}" for run, value in by_run.items())
                     + f" (headline: {scope})")
    if summary["corrupt_runs"]:
        lines.append(f"  {summary['corrupt_runs']} run file(s) were corrupt and count as failed runs")
    lines.append(f"  infrastructure failures: {summary.get('infrastructure_failures', 0)} (runs that ended with "
                 "reason error; not planner results, left out)")
    if summary.get("malformed_tasks"):
        lines.append(f"  {summary['malformed_tasks']} malformed task folder(s) left out with their runs (see the "
                     "warnings)")
    reasons = summary.get("end_reasons") or {}
    if reasons:
        lines.append("  end reasons: " + ", ".join(f"{reason} {count}" for reason, count in reasons.items() if count))
    lines += ["", f"  {'Per attribute (Table 5)':<28}{'tasks':>6}{'runs':>6}{'SR':>8}{'TP':>8}"]
    for name, row in summary["per_attribute"].items():
        lines.append(f"  {name:<28}{row['tasks']:>6}{row['runs']:>6}{_percent(row['SR']):>8}{_percent(row['TP']):>8}")
    lines += ["", f"  {'Low-level actions (Table 4)':<28}{'steps':>6}{'execs':>6}{'SR':>8}{'SR*':>8}"
                  f"{'SR range':>14}{'P':>8}"]
    for action, row in summary["per_action"].items():
        lines.append(f"  {action:<28}{row['steps']:>6}{row['executions']:>6}{_percent(row['SR']):>8}"
                     f"{_percent(row['SR_paper']):>8}{_range(row['SR_range']):>14}{_percent(row['P']):>8}")
    lines.append("  SR: successes / executions; SR*: the paper's retry-adjusted s/(3f+2s); SR range: min-max over run "
                 "indices")
    lines += ["", f"  {'Errors by type (Figure 3)':<28}{'in successful runs':>20}{'in failed runs':>16}"]
    errors = [(kind, row) for kind, row in summary["errors"]["by_type"].items() if any(row.values())]
    for kind, row in errors:
        lines.append(f"  {kind:<28}{row['successful_runs']:>20}{row['failed_runs']:>16}")
    if not errors:
        lines.append("  (no failed steps)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
