"""The aggregate EMMOE metrics as small registered measures with reset / update / get_metric (habitat-lab style).

Every registered measure folds the `RunOutcome`s of all scored runs into one value under its uuid in the summary.
This module holds the base class, the registry and the headline measures (SR, PLWSR, TP, SRR, SER) and counts;
`tables` holds the per-attribute, per-action, error, per-task and bootstrap tables. A metric whose denominator is
zero is None (null in JSON).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from emmoe_eval.dataset import task_sort_key
from emmoe_eval.runs import END_REASONS
from emmoe_eval.scoring import RunOutcome, ScoringConfig

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


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, None when the denominator is zero."""
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
        return ratio(self.successes, self.runs)


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
        return ratio(math.fsum(self.weights), self.runs)


@register_measure
class TaskProgress(Measure):
    """TP averaged over all runs."""

    uuid = "TP"

    def reset(self) -> None:
        self.values: list[float] = []

    def update(self, outcome: RunOutcome) -> None:
        self.values.append(outcome.task_progress)

    def get_metric(self) -> float | None:
        return ratio(math.fsum(self.values), len(self.values))


@register_measure
class SuccessReplanRate(Measure):
    """SRR: re-plans inside successful runs / re-plans in all runs (of one run index when `srr_run` is set)."""

    uuid = "SRR"

    def reset(self) -> None:
        self.successful: Counter[str] = Counter()
        self.total: Counter[str] = Counter()

    def update(self, outcome: RunOutcome) -> None:
        self.total[outcome.run_id] += outcome.replans
        if outcome.success:
            self.successful[outcome.run_id] += outcome.replans

    def get_metric(self) -> float | None:
        run = self.context.config.srr_run
        if run is not None:
            return ratio(self.successful[run], self.total[run])
        return ratio(sum(self.successful.values()), sum(self.total.values()))


@register_measure
class SuccessReplanRateByRun(SuccessReplanRate):
    """SRR of each run index on its own (what srr.ipynb computes for its `round`)."""

    uuid = "SRR_by_run"

    def get_metric(self) -> dict[str, float | None]:  # type: ignore[override]
        return {run: ratio(self.successful[run], self.total[run]) for run in sorted(self.total, key=task_sort_key)}

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
        return ratio(self.successful, self.ended)


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
class EndReasonCount(Measure):
    """Scored runs by end reason ("unknown" when neither recorded nor inferable)."""

    uuid = "end_reasons"

    def reset(self) -> None:
        self.counts: Counter[str] = Counter()

    def update(self, outcome: RunOutcome) -> None:
        self.counts[outcome.end_reason or "unknown"] += 1

    def get_metric(self) -> dict[str, int]:
        return {reason: self.counts[reason] for reason in (*END_REASONS, "unknown")}
