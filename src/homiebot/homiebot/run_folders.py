"""What an experiment folder holds: which runs of a selection have a planner result (`<out>/<task>/<run>/score.json`
whose end reason is not an infrastructure fault or a cancel), so `homiebot run` runs only the others."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from emmoe_eval.runs import NOT_PLANNER_RESULTS

SCORE_FILE = "score.json"


def pending_runs(out: Path, task_ids: Sequence[str], runs: int) -> list[tuple[str, int]]:
    """The (task, run) pairs without a finished, scored run folder, and those that ended without a benchmark result
    (an infrastructure fault or a cancel: emmoe_eval.runs.NOT_PLANNER_RESULTS)."""
    return [(task_id, run) for task_id in task_ids for run in range(1, runs + 1)
            if not has_planner_result(out / task_id / str(run) / SCORE_FILE)]


def has_planner_result(score_file: Path) -> bool:
    """Whether a run's score.json exists and holds a planner result (an unreadable one does not)."""
    try:
        score = json.loads(score_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(score, dict) and score.get("end_reason") not in NOT_PLANNER_RESULTS


def without_result(out: Path, task_ids: Sequence[str], runs: int) -> list[str]:
    """`task T run R` for every run of the selection that has no planner result yet (not run, or an
    infrastructure failure)."""
    return [f"task {task_id} run {run}" for task_id, run in pending_runs(out, task_ids, runs)]
