"""The EMMOE metrics (EMMOE.md section 4) as small registered measures with reset / update / get_metric.

A run is first scored on its own (`score_run` -> `RunOutcome`: task progress, success, length, re-plans, per-step
results); every registered measure then folds the outcomes of all runs into one value. `evaluate` does both and
returns the summary that `emmoe-eval score --json` prints.

Definitions (default, the paper's):
- TP of a run: max over the task's keypaths of matched/len, matching keypath nodes greedily, in order, against the
  run's successful steps only; actions compare exactly, targets and places through the alias table.
- A run is successful when TP = 1. A run ends at its first End (later steps are ignored, with a warning).
- SR and TP: pooled over all runs. SER = successful runs / runs whose last action is End.
  SRR = re-plans in successful runs / all re-plans (a re-plan is a step after a failed step).
  PLWSR = sum over successful runs of L*/max(L, L*) / all runs (L = steps incl. End, L* = info.txt blocks).
- A metric whose denominator is zero is None (null in JSON).
- A corrupt run file counts as a run with TP 0, no steps, not successful.

`--compat official` reproduces the released notebooks:
1. runs are reconstructed from the last round's history (the last executed subtask is lost; End is appended only
   when the last output contains "End"), see `conversation.release_reconstruction`; steps after End are kept;
2. SR counts TP = 1 alone, while SER and PLWSR also require the run's last action to be End;
3. a keypath target or place that the alias table does not know raises `ScoringError` (default: such a name only
   matches itself, after normalising);
4. the default split is train (applied by the CLI; an explicit --split wins).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from emmoe_eval.conversation import release_reconstruction
from emmoe_eval.dataset import Keypath, Task, TaskAttributes, default_task_attributes, task_sort_key
from emmoe_eval.names import AliasTable, default_alias_table, normalize
from emmoe_eval.protocol import ACTIONS, ERROR_CATEGORY, ERROR_TYPES, SUCCESS_FEEDBACK, classify_feedback
from emmoe_eval.runs import Run, Step

COMPAT_MODES: tuple[str, ...] = ("default", "official")
EXECUTED_ACTIONS: tuple[str, ...] = tuple(action for action in ACTIONS if action != "End")
EXECUTION_ERRORS: tuple[str, ...] = tuple(code for code in ERROR_TYPES if ERROR_CATEGORY[code] == "execution")
UNCLASSIFIED = "unclassified"


class ScoringError(ValueError):
    """The data cannot be scored in the requested mode (e.g. an unknown keypath target with --compat official)."""


@dataclass(frozen=True)
class ScoringConfig:
    """How runs are scored.

    Attributes:
        compat: "default" (the paper's definitions) or "official" (the released notebooks' quirks).
        bootstrap_resamples: resamples of tasks for the confidence intervals of SR and TP.
        confidence: confidence level of the intervals, in (0, 1).
        seed: seed of the bootstrap's random generator.
    """

    compat: str = "default"
    bootstrap_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.compat not in COMPAT_MODES:
            raise ValueError(f"compat must be one of {', '.join(COMPAT_MODES)}, not {self.compat!r}")
        if self.bootstrap_resamples < 1:
            raise ValueError(f"bootstrap_resamples must be >= 1, not {self.bootstrap_resamples}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be between 0 and 1 (exclusive), not {self.confidence}")

    @property
    def official(self) -> bool:
        """Whether the released notebooks' behaviour is reproduced."""
        return self.compat == "official"


# ---- per-run scoring ---------------------------------------------------------------------------------------------------

_NameKey = tuple[str, frozenset[str]]


class NameIndex:
    """Normalised form and canonical entries of each name, computed once per name.

    Two names match when they are equal after normalising or share a canonical entry (as `AliasTable.same`).
    """

    def __init__(self, table: AliasTable) -> None:
        self.table = table
        self._keys: dict[str, _NameKey] = {}

    def key(self, name: str) -> _NameKey:
        """The comparison key of a name."""
        found = self._keys.get(name)
        if found is None:
            found = (normalize(name), self.table.canonicals(name))
            self._keys[name] = found
        return found


def _same(first: _NameKey, second: _NameKey) -> bool:
    return first[0] == second[0] or not first[1].isdisjoint(second[1])


class KeypathMatcher:
    """Task progress of runs against one task's keypaths."""

    def __init__(self, task_id: str, keypaths: Sequence[Keypath], names: NameIndex, reject_unknown: bool = False) -> None:
        """Compile the keypaths.

        Args:
            task_id: for messages.
            keypaths: the task's keypaths.
            names: the shared name index.
            reject_unknown: raise for keypath names the alias table does not know (quirk 3).

        Raises:
            ScoringError: for an unknown name when `reject_unknown`, or when there are no keypaths.
        """
        if not keypaths:
            raise ScoringError(f"task {task_id}: no keypaths")
        self._names = names
        if reject_unknown:
            for path_number, keypath in enumerate(keypaths, start=1):
                for node_number, node in enumerate(keypath, start=1):
                    for name in (node.target, node.place):
                        if name and not names.table.knows(name):
                            raise ScoringError(
                                f"task {task_id}: keypath {path_number}, node {node_number} ({node}): {name!r} is not "
                                "in the alias table (the released notebooks fail here; drop --compat official to "
                                "count it as a plain name)")
        self._paths = [tuple((node.action, names.key(node.target), names.key(node.place)) for node in keypath)
                       for keypath in keypaths]

    def progress(self, steps: Iterable[Step]) -> float:
        """TP: the best fraction of a keypath matched greedily, in order, by the successful steps."""
        key = self._names.key
        done = [(step.action, key(step.target), key(step.place)) for step in steps if step.success]
        best = 0.0
        for path in self._paths:
            matched = 0
            length = len(path)
            for action, target, place in done:
                node_action, node_target, node_place = path[matched]
                if action == node_action and _same(node_target, target) and _same(node_place, place):
                    matched += 1
                    if matched == length:
                        break
            best = max(best, matched / length)
            if best == 1.0:
                break
        return best


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
        ended: the run's last action is End.
        length: L, the number of scored steps (End included).
        expert_length: L*, the number of info.txt blocks.
        replans: steps that follow a failed step.
        step_results: (action, success, error type) for each step whose outcome is known; the error type is an EMMOE
            code, "unclassified" for an unrecognised feedback string, None for a success.
        corrupt: the run file could not be read.
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

    def to_json(self) -> dict[str, Any]:
        """Per-run result as JSON (TP, success, ended, steps, replans, errors by type)."""
        errors = Counter(kind for _, succeeded, kind in self.step_results if not succeeded and kind is not None)
        return {"task_id": self.task_id, "run": self.run_id, "TP": self.task_progress, "success": self.success,
                "ended_with_end": self.ended, "steps": self.length, "expert_steps": self.expert_length,
                "replans": self.replans, "errors": dict(sorted(errors.items())), "corrupt": self.corrupt}


def scored_steps(run: Run, config: ScoringConfig) -> tuple[list[Step], list[str]]:
    """The steps a run is scored on, and warnings.

    Default: the steps up to the first End. Official: the release's reconstruction (quirk 1). Corrupt runs: none.
    """
    if run.corrupt:
        return [], []
    if config.official:
        return release_reconstruction(run.steps), []
    for position, step in enumerate(run.steps):
        if step.is_end and position + 1 < len(run.steps):
            return run.steps[:position + 1], [f"task {run.task_id} run {run.run_id}: {len(run.steps) - position - 1} "
                                              f"step(s) after End ignored"]
    return run.steps, []


def step_error_type(step: Step) -> str | None:
    """The error type of a failed step: from its feedback string, else its recorded error_type, else "unclassified".

    None for a success or when the outcome was not recorded (no feedback and no error type).
    """
    if step.success:
        return None
    kind = classify_feedback(step.feedback)
    if kind is not None:
        return kind
    if step.error_type in ERROR_CATEGORY:
        return step.error_type
    if step.feedback is None or step.feedback.strip() in ("", SUCCESS_FEEDBACK):
        return None
    return UNCLASSIFIED


def score_run(run: Run, task: Task, matcher: KeypathMatcher, config: ScoringConfig,
              attributes: TaskAttributes) -> tuple[RunOutcome, list[str]]:
    """Score one run of a task.

    Returns:
        (outcome, warnings).
    """
    steps, problems = scored_steps(run, config)
    progress = matcher.progress(steps) if steps else 0.0
    ended = bool(steps) and steps[-1].is_end
    complete = progress == 1.0
    replans = sum(1 for previous in steps[:-1] if not previous.success)
    results: list[StepResult] = []
    for step in steps:
        kind = step_error_type(step)
        if step.success or kind is not None:
            results.append((step.action, step.success, kind))
    outcome = RunOutcome(
        task_id=run.task_id, run_id=run.run_id, attributes=attributes.of(run.task_id), task_progress=progress,
        success=complete, end_success=complete and (ended or not config.official), ended=ended, length=len(steps),
        expert_length=task.expert_length, replans=replans, step_results=tuple(results), corrupt=run.corrupt)
    return outcome, problems


# ---- measures ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MeasureContext:
    """What measures may depend on besides the outcomes."""

    config: ScoringConfig
    attribute_names: tuple[str, ...]


class Measure(ABC):
    """One aggregate metric over scored runs (habitat-lab style: reset, update per run, get_metric)."""

    uuid: ClassVar[str]

    def __init__(self, context: MeasureContext) -> None:
        self.context = context
        self.reset()

    @abstractmethod
    def reset(self) -> None:
        """Forget every run seen so far."""

    @abstractmethod
    def update(self, outcome: RunOutcome) -> None:
        """Add one scored run."""

    @abstractmethod
    def get_metric(self) -> Any:
        """The metric's value (JSON-serialisable)."""


MEASURES: dict[str, type[Measure]] = {}
_MeasureType = TypeVar("_MeasureType", bound=type[Measure])


def register_measure(cls: _MeasureType) -> _MeasureType:
    """Class decorator adding a measure to MEASURES under its uuid (the key in the summary)."""
    if cls.uuid in MEASURES:
        raise ValueError(f"a measure named {cls.uuid!r} is already registered")
    MEASURES[cls.uuid] = cls
    return cls


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


@register_measure
class SuccessRate(Measure):
    """SR: fraction of runs with TP = 1."""

    uuid = "SR"

    def reset(self) -> None:
        self.successes = 0
        self.runs = 0

    def update(self, outcome: RunOutcome) -> None:
        self.successes += outcome.success
        self.runs += 1

    def get_metric(self) -> float | None:
        return _ratio(self.successes, self.runs)


@register_measure
class PathLengthWeightedSuccessRate(Measure):
    """PLWSR (released form): sum over successful runs of L*/max(L, L*), divided by all runs."""

    uuid = "PLWSR"

    def reset(self) -> None:
        self.weights: list[float] = []
        self.runs = 0

    def update(self, outcome: RunOutcome) -> None:
        self.runs += 1
        if outcome.end_success:
            self.weights.append(outcome.expert_length / max(outcome.length, outcome.expert_length))

    def get_metric(self) -> float | None:
        return _ratio(math.fsum(self.weights), self.runs)


@register_measure
class TaskProgress(Measure):
    """TP averaged over all runs."""

    uuid = "TP"

    def reset(self) -> None:
        self.values: list[float] = []

    def update(self, outcome: RunOutcome) -> None:
        self.values.append(outcome.task_progress)

    def get_metric(self) -> float | None:
        return _ratio(math.fsum(self.values), len(self.values))


@register_measure
class SuccessReplanRate(Measure):
    """SRR: re-plans inside successful runs / re-plans in all runs."""

    uuid = "SRR"

    def reset(self) -> None:
        self.successful = 0
        self.total = 0

    def update(self, outcome: RunOutcome) -> None:
        self.total += outcome.replans
        if outcome.success:
            self.successful += outcome.replans

    def get_metric(self) -> float | None:
        return _ratio(self.successful, self.total)


@register_measure
class SuccessEndRate(Measure):
    """SER: successful runs / runs whose last action is End."""

    uuid = "SER"

    def reset(self) -> None:
        self.successful = 0
        self.ended = 0

    def update(self, outcome: RunOutcome) -> None:
        if outcome.ended:
            self.ended += 1
            self.successful += outcome.end_success

    def get_metric(self) -> float | None:
        return _ratio(self.successful, self.ended)


@register_measure
class RunCount(Measure):
    """Number of runs scored."""

    uuid = "runs"

    def reset(self) -> None:
        self.runs = 0

    def update(self, outcome: RunOutcome) -> None:
        self.runs += 1

    def get_metric(self) -> int:
        return self.runs


@register_measure
class TaskCount(Measure):
    """Number of distinct tasks with at least one run."""

    uuid = "tasks"

    def reset(self) -> None:
        self.task_ids: set[str] = set()

    def update(self, outcome: RunOutcome) -> None:
        self.task_ids.add(outcome.task_id)

    def get_metric(self) -> int:
        return len(self.task_ids)


@register_measure
class CorruptRunCount(Measure):
    """Number of runs whose file could not be read (scored as failed)."""

    uuid = "corrupt_runs"

    def reset(self) -> None:
        self.corrupt = 0

    def update(self, outcome: RunOutcome) -> None:
        self.corrupt += outcome.corrupt

    def get_metric(self) -> int:
        return self.corrupt


@register_measure
class PerAttribute(Measure):
    """Table 5: SR and TP of the runs of tasks with each attribute."""

    uuid = "per_attribute"

    def reset(self) -> None:
        self.runs: dict[str, list[RunOutcome]] = {name: [] for name in self.context.attribute_names}

    def update(self, outcome: RunOutcome) -> None:
        for name in outcome.attributes:
            self.runs.setdefault(name, []).append(outcome)

    def get_metric(self) -> dict[str, dict[str, Any]]:
        return {name: {"tasks": len({run.task_id for run in runs}), "runs": len(runs),
                       "SR": _ratio(sum(run.success for run in runs), len(runs)),
                       "TP": _ratio(math.fsum(run.task_progress for run in runs), len(runs))}
                for name, runs in self.runs.items()}


@register_measure
class PerAction(Measure):
    """Table 4: per action, success rate of its executions and its share of execution errors (E1-E3).

    An execution is a step that passed the pre-checks and ran its skill: a success or an E1/E2/E3 failure.
    """

    uuid = "per_action"

    def reset(self) -> None:
        self.successes: Counter[str] = Counter()
        self.execution_errors: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def update(self, outcome: RunOutcome) -> None:
        for action, succeeded, kind in outcome.step_results:
            if action not in EXECUTED_ACTIONS:
                continue
            self.attempts[action] += 1
            if succeeded:
                self.successes[action] += 1
            else:
                self.errors[action] += 1
                if kind in EXECUTION_ERRORS:
                    self.execution_errors[action] += 1

    def get_metric(self) -> dict[str, dict[str, Any]]:
        total_execution_errors = sum(self.execution_errors.values())
        table = {}
        for action in EXECUTED_ACTIONS:
            executions = self.successes[action] + self.execution_errors[action]
            table[action] = {"steps": self.attempts[action], "errors": self.errors[action],
                             "executions": executions, "successes": self.successes[action],
                             "execution_errors": self.execution_errors[action],
                             "SR": _ratio(self.successes[action], executions),
                             "P": _ratio(self.execution_errors[action], total_execution_errors)}
        return table


@register_measure
class ErrorStatistics(Measure):
    """Figure 3 / Tables H3-H6: failed steps by error type and category, split by successful and failed runs."""

    uuid = "errors"

    def reset(self) -> None:
        self.counts: dict[str, Counter[str]] = {"successful_runs": Counter(), "failed_runs": Counter()}

    def update(self, outcome: RunOutcome) -> None:
        bucket = self.counts["successful_runs" if outcome.success else "failed_runs"]
        for _, succeeded, kind in outcome.step_results:
            if not succeeded and kind is not None:
                bucket[kind] += 1

    def get_metric(self) -> dict[str, Any]:
        kinds = (*ERROR_TYPES, UNCLASSIFIED)
        by_type = {kind: {bucket: counts[kind] for bucket, counts in self.counts.items()} for kind in kinds}
        categories = sorted(set(ERROR_CATEGORY.values()), key=list(ERROR_CATEGORY.values()).index)
        by_category = {category: {bucket: sum(counts[code] for code in ERROR_TYPES if ERROR_CATEGORY[code] == category)
                                  for bucket, counts in self.counts.items()} for category in categories}
        totals = {bucket: sum(counts.values()) for bucket, counts in self.counts.items()}
        return {"by_type": by_type, "by_category": by_category, "total": totals}


@register_measure
class PerTask(Measure):
    """Per task: runs, SR, TP, and each run's result (in run order)."""

    uuid = "per_task"

    def reset(self) -> None:
        self.runs: dict[str, list[RunOutcome]] = defaultdict(list)

    def update(self, outcome: RunOutcome) -> None:
        self.runs[outcome.task_id].append(outcome)

    def get_metric(self) -> dict[str, dict[str, Any]]:
        table = {}
        for task_id in sorted(self.runs, key=task_sort_key):
            runs = sorted(self.runs[task_id], key=lambda run: task_sort_key(run.run_id))
            table[task_id] = {"runs": len(runs), "SR": _ratio(sum(run.success for run in runs), len(runs)),
                              "TP": _ratio(math.fsum(run.task_progress for run in runs), len(runs)),
                              "run_results": [run.to_json() for run in runs]}
        return table


@register_measure
class BootstrapIntervals(Measure):
    """Percentile bootstrap confidence intervals of SR and TP, resampling tasks (with all their runs)."""

    uuid = "confidence_intervals"

    def reset(self) -> None:
        self.per_task: dict[str, list[RunOutcome]] = defaultdict(list)

    def update(self, outcome: RunOutcome) -> None:
        self.per_task[outcome.task_id].append(outcome)

    def get_metric(self) -> dict[str, Any]:
        config = self.context.config
        result: dict[str, Any] = {"level": config.confidence, "resamples": config.bootstrap_resamples,
                                  "seed": config.seed, "unit": "task", "SR": None, "TP": None}
        if not self.per_task:
            return result
        task_ids = sorted(self.per_task, key=task_sort_key)
        runs = np.array([len(self.per_task[task]) for task in task_ids], dtype=np.float64)
        successes = np.array([sum(run.success for run in self.per_task[task]) for task in task_ids], dtype=np.float64)
        progress = np.array([math.fsum(run.task_progress for run in self.per_task[task]) for task in task_ids])
        generator = np.random.default_rng(config.seed)
        picks = generator.integers(0, len(task_ids), size=(config.bootstrap_resamples, len(task_ids)))
        run_totals = runs[picks].sum(axis=1)
        tail = (1.0 - config.confidence) / 2.0
        for name, values in (("SR", successes), ("TP", progress)):
            low, high = np.quantile(values[picks].sum(axis=1) / run_totals, [tail, 1.0 - tail])
            result[name] = [float(low), float(high)]
        return result


# ---- evaluation ----------------------------------------------------------------------------------------------------

@dataclass
class Evaluation:
    """The result of `evaluate`.

    Attributes:
        summary: the headline metrics (HEADLINE), "runs", "tasks", "corrupt_runs", "compat", then every other
            measure's value under its uuid.
        outcomes: each scored run.
        problems: warnings (runs of unknown tasks, tasks without runs, corrupt files, ...).
    """

    summary: dict[str, Any]
    outcomes: list[RunOutcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


HEADLINE: tuple[str, ...] = ("SR", "PLWSR", "TP", "SRR", "SER")


def make_matchers(config: ScoringConfig, alias_table: AliasTable | None = None) -> Callable[[Task], KeypathMatcher]:
    """A function giving each task's compiled keypath matcher (built once per task)."""
    names = NameIndex(alias_table or default_alias_table())
    cache: dict[str, KeypathMatcher] = {}

    def matcher(task: Task) -> KeypathMatcher:
        if task.task_id not in cache:
            cache[task.task_id] = KeypathMatcher(task.task_id, task.keypaths, names, reject_unknown=config.official)
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
    for run in runs:
        evaluation.problems.extend(run.problems)
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
    values = {measure.uuid: measure.get_metric() for measure in measures}
    ordered = [*HEADLINE, "runs", "tasks", "corrupt_runs"]
    evaluation.summary = {key: values[key] for key in ordered}
    evaluation.summary["compat"] = config.compat
    evaluation.summary.update({key: value for key, value in values.items() if key not in ordered})
    return evaluation
