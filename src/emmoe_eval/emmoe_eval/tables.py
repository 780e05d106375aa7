"""The EMMOE tables as registered measures: per attribute (Table 5), per action (Table 4), errors by type
(Figure 3, Tables H3-H6), per task, and bootstrap confidence intervals of SR and TP.

Table 4 as the paper computes it (scripts/metrics/analysis.ipynb): an action's executions are its steps that passed
the pre-checks and ran a skill (a success, or an execution failure: E1/E2/E3, and under --compat official also any
unrecognised feedback, as the notebook counts every failure that is not F/L/D). P is the action's share of all
execution failures. Success rates, all beside each other:
- `SR`: pooled successes / executions (this project's);
- `SR_by_run`, `SR_range`: per run index s/(s+f), and its min and max (the notebook's Table 6 "SR_range"; under
  --compat official a run index without executions counts 0, as the notebook's max(0.001, s+f) gives);
- `SR_retry`: the retry-adjusted rates the notebook prints, s/(3f+s), s/(3f+2s), s/(3f+3s) (a failed execution is 3
  attempts); the paper's Table 4 numbers are s/(3f+2s), also given as `SR_paper`;
- `SR_retry_range`: min and max over run indices of s/(3f+s).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from emmoe_eval.dataset import task_sort_key
from emmoe_eval.measures import Measure, ratio, register_measure
from emmoe_core.protocol import ACTIONS, ERROR_CATEGORY, ERROR_TYPES
from emmoe_eval.scoring import UNCLASSIFIED, RunOutcome

EXECUTED_ACTIONS: tuple[str, ...] = tuple(action for action in ACTIONS if action != "End")
EXECUTION_ERRORS: tuple[str, ...] = tuple(code for code in ERROR_TYPES if ERROR_CATEGORY[code] == "execution")
RETRY_FORMS: dict[str, int] = {"3f+s": 1, "3f+2s": 2, "3f+3s": 3}
PAPER_RETRY_FORM = "3f+2s"


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
                       "SR": ratio(sum(run.success for run in runs), len(runs)),
                       "TP": ratio(math.fsum(run.task_progress for run in runs), len(runs))}
                for name, runs in self.runs.items()}


@register_measure
class PerAction(Measure):
    """Table 4: per action, success rates of its executions and its share of execution failures (see the module)."""

    uuid = "per_action"

    def reset(self) -> None:
        self.successes: Counter[str] = Counter()
        self.execution_errors: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.run_successes: dict[str, Counter[str]] = defaultdict(Counter)
        self.run_failures: dict[str, Counter[str]] = defaultdict(Counter)

    def update(self, outcome: RunOutcome) -> None:
        official = self.context.config.official
        run_successes = self.run_successes[outcome.run_id]
        run_failures = self.run_failures[outcome.run_id]
        for action, succeeded, kind in outcome.step_results:
            if action not in EXECUTED_ACTIONS:
                continue
            self.attempts[action] += 1
            if succeeded:
                self.successes[action] += 1
                run_successes[action] += 1
                continue
            self.errors[action] += 1
            if kind in EXECUTION_ERRORS or (official and kind == UNCLASSIFIED):
                self.execution_errors[action] += 1
                run_failures[action] += 1

    def _by_run(self, action: str, weight: int | None) -> dict[str, float | None]:
        """Per run index: s/(s+f) (weight None) or s/(3f+weight*s)."""
        official = self.context.config.official
        rates: dict[str, float | None] = {}
        for run in sorted(self.run_successes, key=task_sort_key):
            wins, losses = self.run_successes[run][action], self.run_failures[run][action]
            denominator = wins + losses if weight is None else 3 * losses + weight * wins
            rates[run] = (wins / denominator if denominator else 0.0) if official else ratio(wins, denominator)
        return rates

    def get_metric(self) -> dict[str, dict[str, Any]]:
        total_execution_errors = sum(self.execution_errors.values())
        table = {}
        for action in EXECUTED_ACTIONS:
            wins, losses = self.successes[action], self.execution_errors[action]
            retry = {form: ratio(wins, 3 * losses + weight * wins) for form, weight in RETRY_FORMS.items()}
            by_run = self._by_run(action, None)
            table[action] = {"steps": self.attempts[action], "errors": self.errors[action],
                             "executions": wins + losses, "successes": wins, "execution_errors": losses,
                             "SR": ratio(wins, wins + losses), "P": ratio(losses, total_execution_errors),
                             "SR_paper": retry[PAPER_RETRY_FORM], "SR_retry": retry, "SR_by_run": by_run,
                             "SR_range": _span(by_run.values()),
                             "SR_retry_range": _span(self._by_run(action, RETRY_FORMS["3f+s"]).values())}
        return table


def _span(values: Any) -> list[float] | None:
    """[min, max] of the defined values, None when there are none."""
    known = [value for value in values if value is not None]
    return [min(known), max(known)] if known else None


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
            table[task_id] = {"runs": len(runs), "SR": ratio(sum(run.success for run in runs), len(runs)),
                              "TP": ratio(math.fsum(run.task_progress for run in runs), len(runs)),
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
