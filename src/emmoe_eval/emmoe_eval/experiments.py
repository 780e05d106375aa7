"""Find and read the runs of an experiment folder: `<exp>/<task_id>/<run>/{trajectory.jsonl|conversation.json}`.

A run folder's run.json (written by this project's recorder) gives the run's end reason for either file.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from emmoe_eval.conversation import CONVERSATION_FILE, read_conversation_run
from emmoe_eval.dataset import task_sort_key
from emmoe_eval.runs import TRAJECTORY_FILE, Run, read_trajectory, run_end

SOURCES: tuple[str, ...] = ("auto", "trajectory", "conversation")


class ExperimentError(ValueError):
    """The experiment folder cannot be used (missing, not a folder)."""


@dataclass
class Experiment:
    """The runs found in one experiment folder.

    Attributes:
        name: the folder's name.
        directory: the folder.
        runs: every run found, in task then run order.
        problems: warnings (folders without a run file, tasks skipped, ...).
    """

    name: str
    directory: Path
    runs: list[Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_experiment(directory: Path | str, source: str = "auto", task_ids: Collection[str] | None = None) -> Experiment:
    """Read every run of an experiment folder.

    Args:
        directory: `<exp>`, holding `<task_id>/<run>/` folders.
        source: "trajectory" or "conversation" to read only that file; "auto" prefers trajectory.jsonl.
        task_ids: read only these tasks (others are skipped silently).

    Raises:
        ExperimentError: when the folder does not exist or `source` is unknown.
    """
    directory = Path(directory)
    if source not in SOURCES:
        raise ExperimentError(f"unknown run source {source!r}; expected one of {', '.join(SOURCES)}")
    if not directory.is_dir():
        raise ExperimentError(f"{directory}: no such experiment folder")
    experiment = Experiment(directory.resolve().name, directory)
    task_dirs = sorted((entry for entry in directory.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
                       key=lambda entry: task_sort_key(entry.name))
    for task_dir in task_dirs:
        if task_ids is not None and task_dir.name not in task_ids:
            continue
        run_dirs = sorted((entry for entry in task_dir.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
                          key=lambda entry: task_sort_key(entry.name))
        for run_dir in run_dirs:
            run = _read_run_dir(run_dir, source)
            if run is None:
                experiment.problems.append(f"{run_dir}: no {_wanted(source)}; not a run, skipped")
            else:
                experiment.runs.append(run)
    return experiment


def _wanted(source: str) -> str:
    return {"auto": f"{TRAJECTORY_FILE} or {CONVERSATION_FILE}", "trajectory": TRAJECTORY_FILE,
            "conversation": CONVERSATION_FILE}[source]


def _read_run_dir(run_dir: Path, source: str) -> Run | None:
    """The run of a run folder, None when it has no run file. A run file that is there but unusable (a directory, a
    FIFO, a symlink loop in its place) is read, and reported as corrupt, rather than replaced by the other file."""
    trajectory = run_dir / TRAJECTORY_FILE
    conversation = run_dir / CONVERSATION_FILE
    if source in ("auto", "trajectory") and os.path.lexists(trajectory):
        return read_trajectory(trajectory, run_dir.parent.name, run_dir.name)
    if source in ("auto", "conversation") and os.path.lexists(conversation):
        run = read_conversation_run(conversation, run_dir.parent.name, run_dir.name)
        run.end_reason, run.error_msg = run_end(run_dir, None, str(conversation), run.problems)
        return run
    return None
