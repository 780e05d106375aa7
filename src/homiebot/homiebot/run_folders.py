"""What an experiment folder holds: which runs of a selection have a planner result (`<out>/<task>/<run>/score.json`
whose end reason is not an infrastructure fault or a cancel: emmoe_eval.runs.planner_result), so `homiebot run`
runs only the others.

A run folder without score.json has no result: the evaluator writes it last, after the run's end, and removes it
when it starts recording a run again, so a run whose recording was cut (a killed evaluator) has none either.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from emmoe_eval.runs import SCORE_FILE, planner_result


def pending_runs(out: Path, task_ids: Sequence[str], runs: int) -> list[tuple[str, int]]:
    """The (task, run) pairs without a finished, scored run folder, and those that ended without a benchmark result
    (an infrastructure fault or a cancel: emmoe_eval.runs.NOT_PLANNER_RESULTS)."""
    return [(task_id, run) for task_id in task_ids for run in range(1, runs + 1)
            if not has_planner_result(out / task_id / str(run) / SCORE_FILE)]


def has_planner_result(score_file: Path) -> bool:
    """Whether a run's score.json exists and holds a planner result (an unusable one does not)."""
    return planner_result(score_file)[0]


def without_result(out: Path, task_ids: Sequence[str], runs: int) -> list[str]:
    """`task T run R` for every run of the selection that has no planner result yet (not run, or an
    infrastructure failure); an unusable score.json is named after it: `task T run R (<file>: why)`."""
    missing = []
    for task_id, run in pending_runs(out, task_ids, runs):
        problem = planner_result(out / task_id / str(run) / SCORE_FILE)[1]
        missing.append(f"task {task_id} run {run}" + (f" ({problem})" if problem else ""))
    return missing
