"""Scoring one run on its own: task progress, success, length, re-plans, per-step results (`score_run`).

Default (the paper's definitions): the run ends at its first End (later steps are ignored, with a warning); a run
that gave up has no End step (a trailing End of a gave_up run, written by older planners, is dropped); a re-plan
is a step that follows a failed step.

`--compat official` (the released notebooks): the run is the release's reconstruction
(`conversation.release_reconstruction`); a re-plan is counted as srr.ipynb does on the last round's history: a
failed history entry counts unless it is the history's last entry and the last output said End (so a failure
right before End is not counted, a failure followed by the last, non-End round is); SER and PLWSR also require the
run's last action to be End; L* is the number of info.txt lines containing "Subtask", as plw_sr.ipynb counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from emmoe_eval.conversation import release_reconstruction
from emmoe_eval.dataset import INFO_FILE, Task, TaskAttributes
from emmoe_core.json_text import TextFileError, read_text_file
from emmoe_eval.matching import KeypathMatcher
from emmoe_core.protocol import ERROR_CATEGORY, SUCCESS_FEEDBACK, classify_feedback
from emmoe_eval.runs import Run, Step

COMPAT_MODES: tuple[str, ...] = ("default", "official")
UNCLASSIFIED = "unclassified"
GAVE_UP = "gave_up"


@dataclass(frozen=True)
class ScoringConfig:
    """How runs are scored.

    Attributes:
        compat: "default" (the paper's definitions) or "official" (the released notebooks' quirks).
        bootstrap_resamples: resamples of tasks for the confidence intervals of SR and TP.
        confidence: confidence level of the intervals, in (0, 1).
        seed: seed of the bootstrap's random generator.
        srr_run: the run index SRR is computed on (srr.ipynb's `round`); None: all runs pooled.
        include_infrastructure_failures: score runs that ended with reason "error" or "cancelled" as failed runs instead of
            leaving them out (they are never the planner's result).
    """

    compat: str = "default"
    bootstrap_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0
    srr_run: str | None = None
    include_infrastructure_failures: bool = False

    def __post_init__(self) -> None:
        if self.compat not in COMPAT_MODES:
            raise ValueError(f"compat must be one of {', '.join(COMPAT_MODES)}, not {self.compat!r}")
        if self.bootstrap_resamples < 1:
            raise ValueError(f"bootstrap_resamples must be >= 1, not {self.bootstrap_resamples}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be between 0 and 1 (exclusive), not {self.confidence}")
        if self.srr_run is not None and not str(self.srr_run).strip():
            raise ValueError("srr_run must name a run index (e.g. '3') or be None for all runs")

    @property
    def official(self) -> bool:
        """Whether the released notebooks' behaviour is reproduced."""
        return self.compat == "official"


StepResult = tuple[str, bool, str | None]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """Everything the measures need to know about one scored run.

    Attributes:
        task_id: the task.
        run_id: the run.
        attributes: the task's attributes.
        task_progress: TP in [0, 1].
        success: counts as a success for SR (and for every metric in default mode).
        end_success: counts as a success for SER and PLWSR (official mode: also ends with End).
        ended: the run's last action is End (the agent's End; never a give-up).
        length: L, the number of scored steps (End included).
        expert_length: L*, the number of info.txt blocks.
        replans: re-plans (default: steps that follow a failed step; official: srr.ipynb's count).
        step_results: (action, success, error type) for each step whose outcome is known; the error type is an EMMOE
            code, "unclassified" for an unrecognised feedback string, None for a success.
        corrupt: the run file could not be read.
        end_reason: why the run ended (recorded, else "end" when its last step is End, else None).
    """

    task_id: str
    run_id: str
    attributes: tuple[str, ...]
    task_progress: float
    success: bool
    end_success: bool
    ended: bool
    length: int
    expert_length: int
    replans: int
    step_results: tuple[StepResult, ...]
    corrupt: bool = False
    end_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Per-run result as JSON (TP, success, ended, steps, replans, errors by type, end reason)."""
        errors = Counter(kind for _, succeeded, kind in self.step_results if not succeeded and kind is not None)
        return {"task_id": self.task_id, "run": self.run_id, "TP": self.task_progress, "success": self.success,
                "ended_with_end": self.ended, "steps": self.length, "expert_steps": self.expert_length,
                "replans": self.replans, "errors": dict(sorted(errors.items())), "corrupt": self.corrupt,
                "end_reason": self.end_reason}


def _agent_steps(run: Run) -> tuple[list[Step], list[str]]:
    """The run's steps without a gave_up run's trailing End (older planners faked one; it is not the agent's)."""
    if run.end_reason == GAVE_UP and run.steps and run.steps[-1].is_end:
        return run.steps[:-1], [f"task {run.task_id} run {run.run_id}: the run gave up; its trailing End step is not "
                                "the agent's End and is ignored"]
    return run.steps, []


def _scored(run: Run, config: ScoringConfig) -> tuple[list[Step], bool, list[str]]:
    """(scored steps, whether the run ended with the agent's End, warnings)."""
    if run.corrupt:
        return [], False, []
    steps, problems = _agent_steps(run)
    if config.official:
        reconstructed = release_reconstruction(steps, run.last_entry)
        return reconstructed, bool(steps) and len(reconstructed) == len(steps), problems
    for position, step in enumerate(steps):
        if step.is_end and position + 1 < len(steps):
            problems.append(f"task {run.task_id} run {run.run_id}: {len(steps) - position - 1} step(s) after End "
                            "ignored")
            return steps[:position + 1], True, problems
    return steps, bool(steps) and steps[-1].is_end, problems


def scored_steps(run: Run, config: ScoringConfig) -> tuple[list[Step], list[str]]:
    """The steps a run is scored on, and warnings.

    Default: the steps up to the first End. Official: the release's reconstruction (quirk 1). Corrupt runs: none.
    """
    steps, _, problems = _scored(run, config)
    return steps, problems


def release_replans(steps: Sequence[Step], said_end: bool) -> int:
    """srr.ipynb's re-plan count on a reconstructed run (history, plus End when the last entry said End).

    The notebook walks the history without the End it appends elsewhere, adding a placeholder entry when the last
    output did not say End, and counts the failed entries before the last one.
    """
    history = list(steps[:-1]) if said_end else list(steps)
    counted = history[:-1] if said_end else history
    return sum(1 for step in counted if not step.success)


@lru_cache(maxsize=1024)
def _subtask_lines(path: str, modified_ns: int) -> int:
    return sum(1 for line in read_text_file(path).split("\n") if "Subtask" in line)


def release_expert_length(task: Task) -> int:
    """L* as plw_sr.ipynb counts it: the lines of info.txt containing "Subtask" (the block count when unreadable)."""
    path = task.directory / INFO_FILE
    try:
        return _subtask_lines(str(path), path.stat().st_mtime_ns)
    except (OSError, TextFileError):
        return task.expert_length


def step_error_type(step: Step) -> str | None:
    """The error type of a failed step: its recorded error_type (the executor's, the owner), else the type its
    feedback string reads as (release logs record no type), else "unclassified".

    None for a success or when the outcome was not recorded (no feedback and no error type).
    """
    if step.success:
        return None
    if step.error_type in ERROR_CATEGORY:
        return step.error_type
    kind = classify_feedback(step.feedback)
    if kind is not None:
        return kind
    if step.feedback is None or step.feedback.strip() in ("", SUCCESS_FEEDBACK):
        return None
    return UNCLASSIFIED


def score_run(run: Run, task: Task, matcher: KeypathMatcher, config: ScoringConfig,
              attributes: TaskAttributes) -> tuple[RunOutcome, list[str]]:
    """Score one run of a task.

    Returns:
        (outcome, warnings).
    """
    steps, ended, problems = _scored(run, config)
    progress = matcher.progress(steps) if steps else 0.0
    complete = progress == 1.0
    if config.official:
        replans = release_replans(steps, ended)
    else:
        replans = sum(1 for previous in steps[:-1] if not previous.success)
    results: list[StepResult] = []
    for step in steps:
        kind = step_error_type(step)
        if step.success or kind is not None:
            results.append((step.action, step.success, kind))
    reason = run.end_reason if run.end_reason is not None else ("end" if ended else None)
    outcome = RunOutcome(
        task_id=run.task_id, run_id=run.run_id, attributes=attributes.of(run.task_id), task_progress=progress,
        success=complete, end_success=complete and (ended or not config.official), ended=ended, length=len(steps),
        expert_length=release_expert_length(task) if config.official else task.expert_length, replans=replans,
        step_results=tuple(results), corrupt=run.corrupt, end_reason=reason)
    return outcome, problems
