"""Compare two scored experiments (or one with a published count): paired bootstrap CIs and exact tests.

Runs of one task are not independent samples (three greedy runs of a task are near-duplicates), so the unit of
comparison is the task: both experiments are scored on their common tasks (at least one scored run in each), the
bootstrap resamples tasks with all their runs (the same tasks for both sides), and the test that decides is an exact
paired sign-flip permutation test over tasks on the per-task difference in success rate. Fisher's exact test on the
pooled successes / runs treats runs as independent and is given for reference; against a published count
(`--reference K/N`, which gives pooled counts only) Fisher's test and an exact binomial test are all there is.

Every headline metric is a ratio of sums pooled over runs (`TaskCounts`: SR = successes / runs, PLWSR = sum of
L*/max(L, L*) over end-successful runs / runs, TP = sum of TP / runs, SRR = re-plans in successful runs / re-plans,
SER = end-successful runs / runs ending with End), so a resample recomputes each from its tasks' pooled sums.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from emmoe_eval.dataset import task_sort_key
from emmoe_core.json_text import decode_json, read_text_file
from emmoe_eval.metrics import HEADLINE, RunOutcome
from emmoe_eval.scoring import ScoringConfig

SETTING_FILE = "setting.json"
DEFAULT_SETTING = "background"
DEFAULT_CONDITIONS = "reliable"
DEFAULT_RESAMPLES = 10_000
MONTE_CARLO_FLIPS = 200_000
EXACT_SUPPORT_LIMIT = 2 ** 20
LEVEL = 0.95
INDEPENDENCE_NOTE = ("Runs of one task are not independent samples (three greedy runs of a task are near-duplicates), "
                     "so the paired sign-flip test over tasks decides; Fisher's test pools runs as if independent "
                     "and is shown for reference only.")
REFERENCE_NOTE = ("A published count gives pooled runs only: Fisher's and the binomial test treat runs as independent, "
                  "which overstates the evidence when runs of a task are near-duplicates.")
_REFERENCE = re.compile(r"^\s*(?:(?P<label>\S.*?)\s*=\s*)?(?P<k>\d+)\s*/\s*(?P<n>\d+)\s*$")


class CompareError(ValueError):
    """The comparison cannot be made (no common tasks, a malformed --reference)."""


# ---- inputs --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Conditions:
    """How an experiment's runs were made, from `<exp>/setting.json`.

    Attributes:
        setting: "background" or "no_background" (the stack's benchmark setting); background when not recorded.
        conditions: "reliable" or "paper"; reliable when not recorded.
        recorded: whether setting.json was read.
        problem: why setting.json could not be read (None when it was read or is absent).
    """

    setting: str = DEFAULT_SETTING
    conditions: str = DEFAULT_CONDITIONS
    recorded: bool = False
    problem: str | None = None

    def describe(self) -> str:
        """One phrase: 'setting background, conditions reliable' (marked when not recorded)."""
        return f"setting {self.setting}, conditions {self.conditions}" + ("" if self.recorded else " (not recorded)")


def read_conditions(directory: Path) -> Conditions:
    """The setting and conditions recorded in `directory/setting.json` (defaults without the file)."""
    path = Path(directory) / SETTING_FILE
    if not path.exists():
        return Conditions()
    try:
        recorded = decode_json(read_text_file(path))
        if not isinstance(recorded, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        return Conditions(problem=f"{path}: unreadable ({error}); assuming {DEFAULT_SETTING}, {DEFAULT_CONDITIONS}")
    return Conditions(str(recorded.get("setting", DEFAULT_SETTING)),
                      str(recorded.get("conditions", DEFAULT_CONDITIONS)), recorded=True)


@dataclass(frozen=True)
class Side:
    """One experiment of a comparison: its name, scored runs and conditions."""

    name: str
    outcomes: tuple[RunOutcome, ...]
    conditions: Conditions = field(default_factory=Conditions)

    def task_ids(self) -> set[str]:
        """The tasks with at least one scored run."""
        return {outcome.task_id for outcome in self.outcomes}


@dataclass(frozen=True)
class Reference:
    """A published success count: `successes` of `runs` (e.g. the paper's 6/30)."""

    label: str
    successes: int
    runs: int

    @property
    def rate(self) -> float:
        """successes / runs."""
        return self.successes / self.runs


def parse_reference(text: str) -> Reference:
    """Parse `[LABEL=]K/N` (0 <= K <= N, N >= 1); the label defaults to 'reference'.

    Raises:
        CompareError: any other text.
    """
    match = _REFERENCE.match(text)
    if match is None or int(match["n"]) < 1 or int(match["k"]) > int(match["n"]):
        raise CompareError(f"--reference {text!r}: expected [LABEL=]K/N with 0 <= K <= N and N >= 1, "
                           "e.g. 'paper HomieBot-7B SFT=6/30'")
    return Reference(match["label"] or "reference", int(match["k"]), int(match["n"]))


# ---- pooled counts and the paired bootstrap ----------------------------------------------------------------------

@dataclass(frozen=True)
class TaskCounts:
    """Per task (in `task_ids` order), the pooled numerator and denominator of every headline metric."""

    task_ids: tuple[str, ...]
    numerators: dict[str, np.ndarray]
    denominators: dict[str, np.ndarray]

    @property
    def successes(self) -> np.ndarray:
        """Successful runs per task."""
        return self.numerators["SR"]

    @property
    def runs(self) -> np.ndarray:
        """Scored runs per task."""
        return self.denominators["SR"]

    def metric(self, name: str) -> float | None:
        """The metric over all tasks, None when its denominator is zero."""
        denominator = float(self.denominators[name].sum())
        return float(self.numerators[name].sum()) / denominator if denominator else None

    def resampled(self, name: str, picks: np.ndarray) -> np.ndarray:
        """The metric on each row of task indices in `picks` (NaN where its denominator is zero)."""
        numerators = self.numerators[name][picks].sum(axis=1)
        denominators = self.denominators[name][picks].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(denominators > 0, numerators / np.where(denominators > 0, denominators, 1.0), np.nan)


def task_counts(outcomes: Iterable[RunOutcome], task_ids: Sequence[str], srr_run: str | None = None) -> TaskCounts:
    """Pool the outcomes of each task of `task_ids` into the sums behind SR, PLWSR, TP, SRR and SER.

    Args:
        outcomes: scored runs; runs of other tasks are ignored.
        task_ids: the tasks, in the order of the arrays.
        srr_run: count re-plans of this run index only (as `ScoringConfig.srr_run`); None: all runs.
    """
    index = {task_id: number for number, task_id in enumerate(task_ids)}
    numerators = {name: np.zeros(len(task_ids)) for name in HEADLINE}
    denominators = {name: np.zeros(len(task_ids)) for name in HEADLINE}
    for outcome in outcomes:
        if outcome.task_id not in index:
            continue
        task = index[outcome.task_id]
        for name in ("SR", "PLWSR", "TP"):
            denominators[name][task] += 1
        numerators["SR"][task] += outcome.success
        numerators["TP"][task] += outcome.task_progress
        if outcome.end_success:
            numerators["PLWSR"][task] += outcome.expert_length / max(outcome.length, outcome.expert_length)
        if srr_run is None or outcome.run_id == srr_run:
            denominators["SRR"][task] += outcome.replans
            numerators["SRR"][task] += outcome.replans if outcome.success else 0
        if outcome.ended:
            denominators["SER"][task] += 1
            numerators["SER"][task] += outcome.end_success
    return TaskCounts(tuple(task_ids), numerators, denominators)


def paired_bootstrap(first: TaskCounts, second: TaskCounts, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     level: float = LEVEL) -> dict[str, list[float] | None]:
    """Percentile CIs of second - first for every headline metric, resampling the (shared) tasks with replacement.

    Each resample draws the same tasks for both experiments and recomputes every metric from the pooled sums of its
    tasks' runs; a resample where a metric is undefined on either side (zero denominator) is left out of that
    metric's interval, and a metric undefined in every resample has None.
    """
    if first.task_ids != second.task_ids:
        raise ValueError("paired_bootstrap needs the counts of the same tasks in the same order")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, not {resamples}")
    picks = np.random.default_rng(seed).integers(0, len(first.task_ids), size=(resamples, len(first.task_ids)))
    tail = (1.0 - level) / 2.0
    intervals: dict[str, list[float] | None] = {}
    for name in HEADLINE:
        differences = second.resampled(name, picks) - first.resampled(name, picks)
        defined = differences[~np.isnan(differences)]
        intervals[name] = ([float(bound) for bound in np.quantile(defined, [tail, 1.0 - tail])]
                           if defined.size else None)
    return intervals


# ---- exact tests -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignFlipTest:
    """A paired sign-flip permutation test: `p` (two-sided), tasks with a nonzero difference, how it was computed."""

    p: float
    nonzero_tasks: int
    method: str

    def to_json(self) -> dict[str, Any]:
        """As JSON."""
        return {"p": self.p, "nonzero_tasks": self.nonzero_tasks, "method": self.method}


def sign_flip_test(differences: Sequence[Fraction], seed: int = 0, flips: int = MONTE_CARLO_FLIPS,
                   exact_limit: int = EXACT_SUPPORT_LIMIT) -> SignFlipTest:
    """Two-sided p of |sum of differences| under random sign flips of each task's difference.

    Exact (all 2^m sign assignments of the m nonzero differences, counted by their sum) while the number of distinct
    partial sums stays within `exact_limit`, which always holds for m <= 20 when the limit is 2^20 and for any m when
    every task has the same number of runs; otherwise a seeded Monte Carlo estimate over `flips` random assignments,
    (hits + 1) / (flips + 1).
    """
    nonzero = [difference for difference in differences if difference != 0]
    if not nonzero:
        return SignFlipTest(1.0, 0, "exact")
    scale = math.lcm(*(difference.denominator for difference in nonzero))
    values = [int(difference * scale) for difference in nonzero]
    observed = abs(sum(values))
    sums: Counter[int] = Counter({0: 1})
    for value in values:
        shifted: Counter[int] = Counter()
        for total, count in sums.items():
            shifted[total + value] += count
            shifted[total - value] += count
        if len(shifted) > exact_limit:
            return _monte_carlo_sign_flip(values, observed, seed, flips)
        sums = shifted
    hits = sum(count for total, count in sums.items() if abs(total) >= observed)
    return SignFlipTest(float(Fraction(hits, 2 ** len(values))), len(values), f"exact over 2^{len(values)} sign flips")


def _monte_carlo_sign_flip(values: Sequence[int], observed: int, seed: int, flips: int) -> SignFlipTest:
    generator = np.random.default_rng(seed)
    vector = np.array(values, dtype=np.float64)
    hits, left = 0, flips
    while left:
        batch = min(left, 10_000)
        signs = 2.0 * generator.integers(0, 2, size=(batch, len(values))) - 1.0
        hits += int(np.count_nonzero(np.abs(signs @ vector) >= observed))
        left -= batch
    return SignFlipTest((hits + 1) / (flips + 1), len(values), f"Monte Carlo, {flips} random sign flips, seed {seed}")


def fisher_exact(successes_a: int, runs_a: int, successes_b: int, runs_b: int) -> float:
    """Two-sided Fisher exact test of successes_a/runs_a against successes_b/runs_b.

    The p-value sums the hypergeometric probabilities of every table with the observed margins that is at most as
    probable as the observed one (exact integer arithmetic, as scipy.stats.fisher_exact).
    """
    if not (0 <= successes_a <= runs_a and 0 <= successes_b <= runs_b):
        raise ValueError("successes must lie between 0 and the number of runs")
    total, successes = runs_a + runs_b, successes_a + successes_b
    weights = {x: math.comb(successes, x) * math.comb(total - successes, runs_a - x)
               for x in range(max(0, successes - runs_b), min(successes, runs_a) + 1)}
    observed = weights[successes_a]
    return float(Fraction(sum(weight for weight in weights.values() if weight <= observed), math.comb(total, runs_a)))


@dataclass(frozen=True)
class BinomialTest:
    """Exact binomial test of k successes in n runs against a rate: two-sided and both one-sided p-values."""

    two_sided: float
    greater: float
    less: float

    def to_json(self) -> dict[str, float]:
        """As JSON."""
        return {"two_sided": self.two_sided, "greater": self.greater, "less": self.less}


def binomial_test(successes: int, runs: int, rate: Fraction) -> BinomialTest:
    """Exact binomial test (two-sided: probabilities at most the observed one, as scipy.stats.binomtest)."""
    if not 0 <= successes <= runs or not 0 <= rate <= 1:
        raise ValueError("successes must lie between 0 and runs, and the rate between 0 and 1")
    probabilities = [math.comb(runs, x) * rate ** x * (1 - rate) ** (runs - x) for x in range(runs + 1)]
    observed = probabilities[successes]
    return BinomialTest(float(sum(p for p in probabilities if p <= observed)), float(sum(probabilities[successes:])),
                        float(sum(probabilities[:successes + 1])))


# ---- the comparisons -------------------------------------------------------------------------------------------------

def _significance(p: float) -> str:
    return "significant at 95 %" if p < 1.0 - LEVEL else "not significant at 95 %"


def format_p(p: float) -> str:
    """A p-value for text: two decimals from 0.1 up, two significant digits below."""
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def _points(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.2f}" if sign else f"{100 * value:.2f}"


def format_interval(bounds: Sequence[float] | None) -> str:
    """A CI of a difference in points: '-6.67 to +26.67'."""
    return "-" if bounds is None else f"{_points(bounds[0], True)} to {_points(bounds[1], True)}"


@dataclass(frozen=True)
class Comparison:
    """Experiment `second` against `first` on their common tasks.

    Attributes:
        first, second: the names and conditions of the two experiments.
        task_ids: the common tasks.
        runs, successes: pooled per side (first, second).
        metrics: each side's headline metrics (fractions, None when undefined).
        differences: second - first per metric.
        intervals: the paired bootstrap CI of each difference.
        resamples, seed: of the bootstrap (the seed also drives a Monte Carlo sign-flip test).
        sign_flip: the paired test over tasks on the per-task success rate difference.
        fisher_p: Fisher's exact test on the pooled successes / runs.
    """

    first: str
    second: str
    conditions: tuple[Conditions, Conditions]
    task_ids: tuple[str, ...]
    runs: tuple[int, int]
    successes: tuple[int, int]
    metrics: tuple[dict[str, float | None], dict[str, float | None]]
    differences: dict[str, float | None]
    intervals: dict[str, list[float] | None]
    resamples: int
    seed: int
    sign_flip: SignFlipTest
    fisher_p: float

    @property
    def significant(self) -> bool:
        """Whether the paired sign-flip test rejects equal success rates at 95 %."""
        return self.sign_flip.p < 1.0 - LEVEL

    def warnings(self) -> list[str]:
        """A warning when the two experiments were run in different settings or conditions."""
        first, second = self.conditions
        if (first.setting, first.conditions) == (second.setting, second.conditions):
            return []
        return [f"the comparison mixes settings/conditions: {self.first} ({first.describe()}) against {self.second} "
                f"({second.describe()}); the differences reflect them too"]

    def verdict(self) -> str:
        """One line: the SR difference, its CI, significance and both p-values."""
        return (f"SR difference {_points(self.differences['SR'], True)} points (95 % CI "
                f"{format_interval(self.intervals['SR'])}): {_significance(self.sign_flip.p)} "
                f"(paired sign-flip p = {format_p(self.sign_flip.p)}; Fisher p = {format_p(self.fisher_p)})")

    def to_json(self) -> dict[str, Any]:
        """As one JSON object (metrics as fractions in [0, 1])."""
        sides = [{"name": name, "runs": runs, "successes": successes, "setting": conditions.setting,
                  "conditions": conditions.conditions, "conditions_recorded": conditions.recorded, "metrics": metrics}
                 for name, runs, successes, conditions, metrics in zip((self.first, self.second), self.runs,
                                                                       self.successes, self.conditions, self.metrics)]
        return {"first": sides[0], "second": sides[1], "common_tasks": list(self.task_ids),
                "differences": self.differences,
                "confidence_intervals": {"level": LEVEL, "method": "paired percentile bootstrap over tasks",
                                         "resamples": self.resamples, "seed": self.seed, **self.intervals},
                "sign_flip": self.sign_flip.to_json(), "fisher_p": self.fisher_p,
                "significant": self.significant, "verdict": self.verdict(), "warnings": self.warnings()}


def compare_sides(first: Side, second: Side, config: ScoringConfig) -> Comparison:
    """Compare `second` against `first` on their common tasks (`config`: srr_run, and the bootstrap's resamples and
    seed, which also seeds a Monte Carlo sign-flip test).

    Raises:
        CompareError: when no task has a scored run in both.
    """
    task_ids = tuple(sorted(first.task_ids() & second.task_ids(), key=task_sort_key))
    if not task_ids:
        raise CompareError(f"{first.name} and {second.name} have no common task with a scored run")
    before, after = (task_counts(side.outcomes, task_ids, config.srr_run) for side in (first, second))
    metrics = ({name: before.metric(name) for name in HEADLINE}, {name: after.metric(name) for name in HEADLINE})
    differences: dict[str, float | None] = {}
    for name in HEADLINE:
        old, new = metrics[0][name], metrics[1][name]
        differences[name] = None if old is None or new is None else new - old
    rate_differences = [Fraction(int(wins), int(runs)) - Fraction(int(old_wins), int(old_runs))
                        for wins, runs, old_wins, old_runs in zip(after.successes, after.runs, before.successes,
                                                                  before.runs)]
    runs = (int(before.runs.sum()), int(after.runs.sum()))
    successes = (int(before.successes.sum()), int(after.successes.sum()))
    return Comparison(first.name, second.name, (first.conditions, second.conditions), task_ids, runs, successes,
                      metrics, differences,
                      paired_bootstrap(before, after, config.bootstrap_resamples, config.seed),
                      config.bootstrap_resamples, config.seed, sign_flip_test(rate_differences, seed=config.seed),
                      fisher_exact(successes[0], runs[0], successes[1], runs[1]))


@dataclass(frozen=True)
class ReferenceComparison:
    """An experiment's pooled successes against a published count."""

    name: str
    successes: int
    runs: int
    reference: Reference
    fisher_p: float
    binomial: BinomialTest

    def verdict(self) -> str:
        """One line: both rates, significance by Fisher's test, and the binomial p-values."""
        direction = "greater" if self.successes * self.reference.runs >= self.reference.successes * self.runs \
            else "less"
        one_sided = self.binomial.greater if direction == "greater" else self.binomial.less
        return (f"{self.name} SR {_points(self.successes / self.runs)} ({self.successes}/{self.runs}) vs "
                f"{self.reference.label} {_points(self.reference.rate)} ({self.reference.successes}/"
                f"{self.reference.runs}): {_significance(self.fisher_p)} (Fisher p = {format_p(self.fisher_p)}; "
                f"exact binomial against {_points(self.reference.rate)} %: two-sided p = "
                f"{format_p(self.binomial.two_sided)}, one-sided ({direction}) p = {format_p(one_sided)})")

    def to_json(self) -> dict[str, Any]:
        """As JSON."""
        return {"label": self.reference.label, "reference_successes": self.reference.successes,
                "reference_runs": self.reference.runs, "successes": self.successes, "runs": self.runs,
                "fisher_p": self.fisher_p, "binomial": self.binomial.to_json(),
                "significant": self.fisher_p < 1.0 - LEVEL, "verdict": self.verdict()}


def compare_reference(side: Side, reference: Reference) -> ReferenceComparison:
    """`side`'s pooled successes over all its scored runs against a published count.

    Raises:
        CompareError: when the side has no scored run.
    """
    if not side.outcomes:
        raise CompareError(f"{side.name} has no scored run to compare with {reference.label}")
    successes = sum(outcome.success for outcome in side.outcomes)
    runs = len(side.outcomes)
    return ReferenceComparison(side.name, successes, runs, reference,
                               fisher_exact(successes, runs, reference.successes, reference.runs),
                               binomial_test(successes, runs, Fraction(reference.successes, reference.runs)))
