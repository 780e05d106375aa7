"""The EMMOE metrics (EMMOE.md section 4): score every run, then fold the outcomes into the summary.

A run is first scored on its own (`scoring.score_run` -> `RunOutcome`: task progress, success, length, re-plans,
per-step results); every registered measure (`measures`, `tables`) then folds the outcomes of all runs into one
value. `evaluate` does both and returns the summary that `emmoe-eval score --json` prints. This module is the public
entry point: it re-exports the names of `matching`, `scoring`, `measures` and `tables`.

Definitions (default, the paper's):
- TP of a run: max over the task's keypaths of matched/len, matching keypath nodes greedily, in order, against the
  run's successful steps only; actions compare exactly, targets and places on the executor's resolved identity
  when recorded, else through the alias table (rules in `matching`).
- A run is successful when TP = 1. A run ends at its first End (later steps are ignored, with a warning). A run
  that gave up has no End step: no End credit, not in SER's denominator.
- SR and TP: pooled over all runs. SER = successful runs / runs whose last action is End.
  SRR = re-plans in successful runs / all re-plans (a re-plan is a step after a failed step); `SRR_by_run` gives
  each run index's own SRR.
  PLWSR = sum over successful runs of L*/max(L, L*) / all runs (L = steps incl. End, L* = info.txt blocks).
- A metric whose denominator is zero is None (null in JSON).
- A corrupt run file counts as a run with TP 0, no steps, not successful.
- Runs that ended with reason "error" or "cancelled" (an infrastructure fault, a cancel) are not the planner's result: they are left out of
  every metric and counted as `infrastructure_failures` (`ScoringConfig.include_infrastructure_failures` scores
  them as failed runs instead).

`--compat official` reproduces the released notebooks:
1. runs are reconstructed from the last round's history (the last executed subtask is lost; End is appended only
   when the last entry contains "End"), see `conversation.release_reconstruction`; steps after End are kept;
2. SR counts TP = 1 alone, while SER and PLWSR also require the run's last action to be End;
3. a keypath target or place that the release's table does not know raises `ScoringError`; names are matched
   through that table exactly as the notebooks do (one canonical per alias, the last listing wins);
4. the default split is train (applied by the CLI; an explicit --split wins);
5. re-plans are counted as srr.ipynb does, and `srr_run` selects the one run index it evaluates (its `round`);
6. only run indices 1, 2 and 3 are read (the notebooks loop over `range(1, 4)`); other runs are skipped;
7. Table 4 counts every failure that is not a format, logical or distance error as an execution failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emmoe_eval.dataset import Task, TaskAttributes, default_task_attributes
from emmoe_eval.matching import KeypathMatcher, NameIndex, ScoringError, release_name_table
from emmoe_eval.measures import MEASURES, Measure, MeasureContext, register_measure
from emmoe_core.names import AliasTable, default_alias_table
from emmoe_eval.runs import Run
from emmoe_eval.scoring import (COMPAT_MODES, UNCLASSIFIED, RunOutcome, ScoringConfig, StepResult, release_replans,
                                score_run, scored_steps, step_error_type)
from emmoe_eval.tables import EXECUTED_ACTIONS, EXECUTION_ERRORS, PAPER_RETRY_FORM, RETRY_FORMS

__all__ = ["COMPAT_MODES", "EXECUTED_ACTIONS", "EXECUTION_ERRORS", "HEADLINE", "MEASURES", "OFFICIAL_RUN_IDS",
           "PAPER_RETRY_FORM", "RETRY_FORMS", "UNCLASSIFIED", "Evaluation", "KeypathMatcher", "Measure",
           "MeasureContext", "NameIndex", "RunOutcome", "ScoringConfig", "ScoringError", "StepResult", "evaluate",
           "make_matchers", "register_measure", "release_name_table", "release_replans", "score_run", "scored_steps",
           "step_error_type"]

OFFICIAL_RUN_IDS: tuple[str, ...] = ("1", "2", "3")


# ---- evaluation ----------------------------------------------------------------------------------------------------

@dataclass
class Evaluation:
    """The result of `evaluate`.

    Attributes:
        summary: the headline metrics (HEADLINE), "runs", "tasks", "corrupt_runs", "infrastructure_failures",
            "compat", then every other measure's value under its uuid.
        outcomes: each scored run.
        problems: warnings (runs of unknown tasks, tasks without runs, corrupt files, ...).
    """

    summary: dict[str, Any]
    outcomes: list[RunOutcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


HEADLINE: tuple[str, ...] = ("SR", "PLWSR", "TP", "SRR", "SER")


def make_matchers(config: ScoringConfig, alias_table: AliasTable | None = None) -> Callable[[Task], KeypathMatcher]:
    """A function giving each task's compiled keypath matcher (built once per task), in the config's mode."""
    names = NameIndex(alias_table or default_alias_table())
    cache: dict[str, KeypathMatcher] = {}

    def matcher(task: Task) -> KeypathMatcher:
        if task.task_id not in cache:
            cache[task.task_id] = KeypathMatcher(task.task_id, task.keypaths, names, official=config.official)
        return cache[task.task_id]

    return matcher


def evaluate(runs: Iterable[Run], tasks: Mapping[str, Task], config: ScoringConfig | None = None,
             attributes: TaskAttributes | None = None, alias_table: AliasTable | None = None) -> Evaluation:
    """Score runs against their tasks and aggregate every registered measure.

    Args:
        runs: the runs; a run whose task is not in `tasks` is skipped with a warning.
        tasks: the evaluated tasks by id (the selected split).
        config: scoring settings (default: the paper's definitions).
        attributes: task attributes (default: the release's lists shipped with emmoe_eval).
        alias_table: the alias table (default: the shipped name_dict.txt).

    Runs that ended with reason "error" or "cancelled" are counted in "infrastructure_failures" and left out (unless
    `config.include_infrastructure_failures`); in official mode runs with an index other than 1-3 are skipped.

    Raises:
        ScoringError: in official mode, for keypath names the alias table does not know.
    """
    config = config or ScoringConfig()
    attributes = attributes or default_task_attributes()
    matcher_for = make_matchers(config, alias_table)
    context = MeasureContext(config, tuple(attributes.members))
    measures = [measure_type(context) for measure_type in MEASURES.values()]
    evaluation = Evaluation(summary={})
    seen: set[str] = set()
    failures = 0
    for run in runs:
        evaluation.problems.extend(run.problems)
        if run.infrastructure_failure and not config.include_infrastructure_failures:
            failures += 1
            detail = f": {run.error_msg}" if run.error_msg else ""
            evaluation.problems.append(f"task {run.task_id} run {run.run_id}: infrastructure failure{detail}; not a "
                                       "planner result, left out of every metric")
            continue
        if config.official and run.run_id not in OFFICIAL_RUN_IDS:
            evaluation.problems.append(f"task {run.task_id} run {run.run_id}: the released notebooks read runs 1-3 "
                                       "only; skipped under --compat official")
            continue
        task = tasks.get(run.task_id)
        if task is None:
            evaluation.problems.append(f"task {run.task_id} run {run.run_id}: the task is not among the evaluated "
                                       "tasks (unknown id or another split); skipped")
            continue
        seen.add(run.task_id)
        outcome, problems = score_run(run, task, matcher_for(task), config, attributes)
        evaluation.problems.extend(problems)
        evaluation.outcomes.append(outcome)
        for measure in measures:
            measure.update(outcome)
    missing = [task_id for task_id in tasks if task_id not in seen]
    if missing:
        evaluation.problems.append(f"{len(missing)} task(s) of the selection have no runs: {', '.join(missing)}")
    if config.srr_run is not None and all(outcome.run_id != config.srr_run for outcome in evaluation.outcomes):
        evaluation.problems.append(f"SRR is computed on run {config.srr_run} only, and no run has that index")
    values = {measure.uuid: measure.get_metric() for measure in measures}
    ordered = [*HEADLINE, "runs", "tasks", "corrupt_runs"]
    evaluation.summary = {key: values[key] for key in ordered}
    evaluation.summary["infrastructure_failures"] = failures
    evaluation.summary["compat"] = config.compat
    evaluation.summary["srr_run"] = config.srr_run
    evaluation.summary.update({key: value for key, value in values.items() if key not in ordered})
    return evaluation
