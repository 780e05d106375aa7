"""An optional, seeded model of skill failures, to reproduce the paper's skills (Table 4) in the MuJoCo apartment.

The privileged policies succeed almost always here; the paper's M3 skills did not. `FailureModel` decides whether
an attempt fails, in one of two units:

- `execution` (the paper conditions): one draw per execution of a subtask, at its first attempt; every attempt of
  a failed execution fails, so the per-execution success rate is the calibrated one whatever the number of attempts
  (three for most skills, one for a Put under the release's rules).
- `attempt`: one independent draw per attempt (the hand-written `skill=p` form).

A failing attempt does not move anything (the state stays consistent) and reports `SkillStatus.INJECTED_FAILURE`,
except a failing Put, which with probability `put_drop_probability` opens the gripper where the arm is, so the
object is missing afterwards (E2).

Calibration: the paper's Table 4 figures (`TABLE4_FIGURES`) are s/(3f+2s) over the release's counts of successful
(s) and failed (f) executions, one failed execution counting three attempts. With the per-execution success rate
p = s/(s+f) that is r = p/(3-p), so p = 3r/(1+r) (`execution_success_rate`): Go to 93.6 %, Pick 55.0 %, Put 87.2 %,
Open 90.4 %, Close 80.1 % (`PAPER_EXECUTION_SUCCESS_RATES`). `paper_figure` is the inverse, the form
`emmoe-eval score` prints as `SR_paper`.

Draws come from one `random.Random` per model, started from the seed and, at every episode reset that names its
run, again from the seed and the run's key (`start_run`, `<episode>/<run index>` from the planner node): a run's
draws then depend only on the seed, the run and its own executions, not on the runs a stack served before it, so
two planners that decide alike in a run meet the same failures (paired comparisons), and a run is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from homiebot_executor.skills import SKILLS

# Paper, Table 4 (Go to, Pick, Place, Open, Close): s/(3f+2s) over the release's execution counts, six planners pooled.
TABLE4_FIGURES: dict[str, float] = {"navigate": 0.4532, "pick": 0.2245, "put": 0.4097, "open": 0.4313,
                                    "close": 0.3645}
UNITS: tuple[str, ...] = ("attempt", "execution")


def execution_success_rate(figure: float) -> float:
    """The per-execution success rate s/(s+f) behind a Table 4 figure r = s/(3f+2s): p = 3r/(1+r).

    Raises:
        ValueError: a figure outside [0, 0.5] (s/(3f+2s) cannot exceed one half).
    """
    if not 0.0 <= figure <= 0.5:
        raise ValueError(f"a Table 4 figure s/(3f+2s) lies in [0, 0.5], got {figure}")
    return 3.0 * figure / (1.0 + figure)


def paper_figure(successes: float, failures: float) -> float | None:
    """The paper's Table 4 form s/(3f+2s) of execution counts (None without executions)."""
    denominator = 3.0 * failures + 2.0 * successes
    return successes / denominator if denominator else None


# The per-execution success rates the paper's skills had (the calibrated failure model of `--conditions paper`).
PAPER_EXECUTION_SUCCESS_RATES: dict[str, float] = {skill: execution_success_rate(figure)
                                                   for skill, figure in TABLE4_FIGURES.items()}


@dataclass(frozen=True)
class FailureConfig:
    """Per-skill failure probabilities of one attempt.

    Attributes:
        probabilities: skill -> probability in [0, 1] that a `unit` fails (missing skills never fail).
        put_drop_probability: given a failing Put, probability that the object is dropped (E2) instead of kept.
        seed: seed of the random draws.
        unit: "execution" (one draw per execution of a subtask, at its first attempt) or "attempt" (one per attempt).
    """

    probabilities: Mapping[str, float] = field(default_factory=dict)
    put_drop_probability: float = 0.0
    seed: int = 0
    unit: str = "attempt"

    def __post_init__(self) -> None:
        for skill, probability in self.probabilities.items():
            if skill not in SKILLS:
                raise ValueError(f"FailureConfig.probabilities: unknown skill {skill!r}; expected one of "
                                 f"{', '.join(SKILLS)}")
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"FailureConfig.probabilities[{skill!r}]: expected a probability in [0, 1], "
                                 f"got {probability}")
        if not 0.0 <= self.put_drop_probability <= 1.0:
            raise ValueError(f"FailureConfig.put_drop_probability: expected a value in [0, 1], got "
                             f"{self.put_drop_probability}")
        if self.unit not in UNITS:
            raise ValueError(f"FailureConfig.unit: expected one of {', '.join(UNITS)}, got {self.unit!r}")

    @classmethod
    def paper(cls, seed: int = 0, put_drop_probability: float = 0.0) -> FailureConfig:
        """The paper's skills: each execution fails with 1 - PAPER_EXECUTION_SUCCESS_RATES[skill]."""
        return cls({skill: 1.0 - rate for skill, rate in PAPER_EXECUTION_SUCCESS_RATES.items()},
                   put_drop_probability, seed, "execution")

    @property
    def enabled(self) -> bool:
        """Whether any attempt can fail."""
        return any(probability > 0 for probability in self.probabilities.values())


@dataclass(frozen=True)
class InjectedFailure:
    """A drawn failure: whether the object is dropped (Put only)."""

    drop_object: bool = False


class FailureModel:
    """Seeded per-attempt failure draws."""

    def __init__(self, config: FailureConfig | None = None) -> None:
        """Start the random stream at `config.seed`."""
        self.config = config or FailureConfig()
        self._rng = random.Random(self.config.seed)
        # unit "execution": the skill and verdict drawn at the running execution's first attempt.
        self._execution: tuple[str, InjectedFailure | None] | None = None

    def start_run(self, run_key: str) -> None:
        """Restart the random stream for the run `run_key` (the same key, the same stream)."""
        self._rng = random.Random(f"{self.config.seed}:{run_key}")
        self._execution = None

    def draw(self, skill: str, attempt: int = 1) -> InjectedFailure | None:
        """Whether attempt `attempt` (1-based) of an execution of `skill` fails; None when it runs normally.

        Unit "attempt": one uniform number is drawn per attempt whatever the outcome (plus one for a failing Put),
        so the stream stays aligned across skills with probability 0. Unit "execution": the same draw at the first
        attempt; later attempts of that execution repeat its verdict (a dropped object is not dropped twice).
        """
        if self.config.unit == "execution":
            if attempt > 1 and self._execution is not None and self._execution[0] == skill:
                verdict = self._execution[1]
                return InjectedFailure() if verdict is not None else None
            verdict = self._draw(skill)
            self._execution = (skill, verdict)
            return verdict
        return self._draw(skill)

    def _draw(self, skill: str) -> InjectedFailure | None:
        probability = self.config.probabilities.get(skill, 0.0)
        if self._rng.random() >= probability:
            return None
        drop = skill == "put" and self._rng.random() < self.config.put_drop_probability
        return InjectedFailure(drop_object=drop)
