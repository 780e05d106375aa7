"""`emmoe-eval`: score EMMOE runs, write reports, score rosbags.

    emmoe-eval score --data DATA_DIR --runs EXP_DIR [--split train|test|all] [--compat official] [--srr-run N] [--json]
    emmoe-eval compare RUNS_A [RUNS_B] --data DATA_DIR [--reference [LABEL=]K/N ...] [--compat official] [--json]
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

from emmoe_core.closed_pipe import quiet_on_closed_pipe
from emmoe_core.names import AliasTableError, load_alias_table

from emmoe_eval.bag_recovery import unfinished_bag
from emmoe_eval.bags import STEPS_TOPIC, BagError, read_bag_runs, with_unfinished_bags
from emmoe_eval.compare import (DEFAULT_RESAMPLES, INDEPENDENCE_NOTE, REFERENCE_NOTE, CompareError, Comparison, Conditions,
                                ReferenceComparison, Side, compare_reference, compare_sides, format_interval,
                                parse_reference, read_conditions)
from emmoe_eval.dataset import DatasetError, Task, load_task_attributes, load_tasks, split_names
from emmoe_eval.experiments import SOURCES, ExperimentError, load_experiment
from emmoe_eval.metrics import COMPAT_MODES, HEADLINE, Evaluation, ScoringConfig, ScoringError, evaluate
from emmoe_eval.runs import Run

USER_ERRORS = (DatasetError, ExperimentError, ScoringError, BagError, AliasTableError, CompareError)
_MAX_WARNINGS = 20


def _add_scoring_options(parser: argparse.ArgumentParser, resamples: int = 1000) -> None:
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
    parser.add_argument("--resamples", type=int, default=resamples,
                        help=f"bootstrap resamples for the CIs (default {resamples})")
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

    compare = commands.add_parser(
        "compare", help="compare two experiments (B - A) on their common tasks, or one with published counts",
        description="Score RUNS_A and RUNS_B on their common tasks and print each headline metric of both, B - A, "
                    "a paired bootstrap CI over tasks, a paired sign-flip test over tasks and Fisher's exact test "
                    "on the successes; --reference compares RUNS_A's successes with a published count.")
    compare.add_argument("runs_a", type=Path, metavar="RUNS_A", help="the first experiment folder (the baseline)")
    compare.add_argument("runs_b", type=Path, nargs="?", default=None, metavar="RUNS_B",
                         help="the second experiment folder (optional with --reference)")
    compare.add_argument("--reference", action="append", default=[], metavar="[LABEL=]K/N",
                         help="a published success count to test RUNS_A against, e.g. 'paper HomieBot-7B SFT=6/30' "
                              "(repeatable)")
    compare.add_argument("--source", choices=SOURCES, default="auto", help="run file to read (default auto)")
    compare.add_argument("--json", action="store_true", help="print one JSON object (metrics as fractions in [0, 1])")
    _add_scoring_options(compare, resamples=DEFAULT_RESAMPLES)
    compare.set_defaults(handler=_compare)

    bag = commands.add_parser("score-bag", help="score rosbag2 files (MCAP or sqlite3) of StepRecords",
                              description=f"Score the runs recorded as StepRecord messages on {STEPS_TOPIC}.")
    bag.add_argument("bags", nargs="+", type=Path, metavar="BAG", help=".mcap or .db3 files, or bag folders")
    bag.add_argument("--topic", default=STEPS_TOPIC, help=f"topic of the StepRecords (default {STEPS_TOPIC})")
    bag.add_argument("--json", action="store_true", help="print one JSON object (metrics as fractions in [0, 1])")
    _add_scoring_options(bag)
    bag.set_defaults(handler=_score_bag)
    return parser


@quiet_on_closed_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run `emmoe-eval`; returns the exit status (a reader that went away: quietly, CLOSED_PIPE_STATUS)."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run parsed arguments of `build_parser`; returns the exit status (2 after a user mistake, told in one line)."""
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


def scoring_config(args: argparse.Namespace) -> ScoringConfig:
    """The scoring settings of the command line."""
    return ScoringConfig(compat=args.compat, bootstrap_resamples=args.resamples, seed=args.seed,
                         srr_run=args.srr_run, include_infrastructure_failures=args.include_infrastructure_failures)


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
    config = scoring_config(args)
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
    _note_conditions(evaluation, [args.runs], args)
    return _emit(evaluation, args)


def _score_bag(args: argparse.Namespace) -> int:
    missing = [str(path) for path in args.bags if not path.exists() and unfinished_bag(path) is None]
    if missing:
        raise BagError(f"no such bag: {', '.join(missing)}")
    bags, added = with_unfinished_bags(args.bags)
    found = read_bag_runs(bags, args.topic)
    evaluation = _score_runs(found.runs, args)
    evaluation.problems[:0] = added + found.problems
    # <exp>/<task>/<run>/episode.mcap: the experiment folders the bags were recorded in
    _note_conditions(evaluation, sorted({Path(bag).absolute().parents[2] for bag in bags}), args)
    return _emit(evaluation, args)


def _note_conditions(evaluation: Evaluation, experiments: Sequence[Path], args: argparse.Namespace) -> None:
    """Name the conditions the experiment's runs were made under (its setting.json) in the summary, and warn when
    paper-condition runs are not scored as the paper conditions score (--compat official)."""
    conditions = read_conditions(experiments[0]) if len(experiments) == 1 else Conditions()
    evaluation.summary["conditions"] = conditions.describe()
    if conditions.problem:
        evaluation.problems.insert(0, conditions.problem)
    if conditions.conditions == "paper" and args.compat != "official":
        evaluation.problems.insert(0, f"{experiments[0]} holds runs made under conditions paper, which score with "
                                      "--compat official (homiebot run does)")


def _side(directory: Path, args: argparse.Namespace) -> tuple[Side, Evaluation]:
    """Load and score one experiment of a comparison (its warnings printed, prefixed with its name)."""
    experiment = load_experiment(directory, source=args.source)
    evaluation = _score_runs(experiment.runs, args)
    conditions = read_conditions(directory)
    problems = experiment.problems + evaluation.problems + ([conditions.problem] if conditions.problem else [])
    _print_problems([f"{experiment.name}: {problem}" for problem in problems], args.verbose)
    return Side(experiment.name, tuple(evaluation.outcomes), conditions), evaluation


def _compare(args: argparse.Namespace) -> int:
    references = [parse_reference(text) for text in args.reference]
    if args.runs_b is None and not references:
        raise CompareError("compare needs RUNS_B, a --reference, or both")
    first, evaluation = _side(args.runs_a, args)
    comparison = compare_sides(first, _side(args.runs_b, args)[0], scoring_config(args)) if args.runs_b else None
    against = [compare_reference(first, reference) for reference in references]
    if args.json:
        print(json.dumps({"split": evaluation.summary["split"], "compat": evaluation.summary["compat"],
                          "comparison": comparison.to_json() if comparison else None,
                          "references": [item.to_json() for item in against],
                          "notes": [INDEPENDENCE_NOTE, *([REFERENCE_NOTE] if against else [])]}, indent=2))
    else:
        print(format_comparison(first, comparison, against, evaluation.summary))
    return 0


def _report(args: argparse.Namespace) -> int:
    from emmoe_eval.report import ExperimentResult, write_report

    results = []
    for directory in args.experiments:
        experiment = load_experiment(directory, source=args.source)
        evaluation = _score_runs(experiment.runs, args)
        result = ExperimentResult(experiment, evaluation)
        unreadable = [result.conditions.problem] if result.conditions.problem else []
        _print_problems([f"{experiment.name}: {problem}"
                         for problem in experiment.problems + evaluation.problems + unreadable], args.verbose)
        results.append(result)
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


def format_comparison(first: Side, comparison: Comparison | None, against: Sequence[ReferenceComparison],
                      summary: dict[str, Any]) -> str:
    """The text of `emmoe-eval compare`: metrics side by side, B - A with its CI, the tests and verdicts."""
    scope = f"split {summary['split']}, compat {summary['compat']}; metrics in percent"
    if comparison is None:
        lines = [f"EMMOE comparison: A against published counts ({scope})",
                 f"  A: {first.name} ({len(first.outcomes)} runs; {first.conditions.describe()})"]
    else:
        lines = [f"EMMOE comparison: B - A on {len(comparison.task_ids)} common task(s) ({scope})"]
        lines += [f"  {label}: {name} ({runs} runs; {conditions.describe()})"
                  for label, name, runs, conditions in zip("AB", (comparison.first, comparison.second),
                                                           comparison.runs, comparison.conditions)]
        lines += [f"  warning: {warning}" for warning in comparison.warnings()]
        lines += ["", f"  {'metric':<8}{'A':>8}{'B':>8}{'B - A':>9}   95% CI of B - A"]
        for name in HEADLINE:
            difference = comparison.differences[name]
            shift = "-" if difference is None else f"{100 * difference:+.2f}"
            lines.append(f"  {name:<8}{_percent(comparison.metrics[0][name]):>8}"
                         f"{_percent(comparison.metrics[1][name]):>8}{shift:>9}   "
                         f"{format_interval(comparison.intervals[name])}")
        lines += ["", f"  CIs: paired percentile bootstrap over the common tasks ({comparison.resamples} resamples, "
                      f"seed {comparison.seed}); successes A {comparison.successes[0]}/{comparison.runs[0]}, "
                      f"B {comparison.successes[1]}/{comparison.runs[1]} runs",
                  f"  paired sign-flip test on the per-task success rate: {comparison.sign_flip.nonzero_tasks} task(s) "
                  f"differ, {comparison.sign_flip.method}",
                  f"  {comparison.verdict()}", f"  note: {INDEPENDENCE_NOTE}"]
    if against:
        lines += ["", "  Against published counts (all of A's scored runs):"]
        lines += [f"  {item.verdict()}" for item in against]
        lines.append(f"  note: {REFERENCE_NOTE}")
    return "\n".join(lines)


def format_text(summary: dict[str, Any]) -> str:
    """The paper-style tables (percent) of a score summary."""
    lines = [f"EMMOE scores: {summary['runs']} runs of {summary['tasks']} tasks "
             f"(split {summary.get('split', 'all')}, compat {summary['compat']}"
             + (f"; {summary['conditions']}" if summary.get("conditions") else "") + ")", ""]
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
