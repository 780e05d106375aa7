"""An optional, seeded model of skill failures, to study re-planning at success rates like the paper's Table 4.

The privileged policies succeed almost always in the MuJoCo apartment; the learned policies of the paper do not.
`FailureModel` draws, before each attempt, whether that attempt fails. A failing attempt does not move anything
(the state stays consistent) and reports `SkillStatus.INJECTED_FAILURE`, except a failing Put, which with
probability `put_drop_probability` opens the gripper where the arm is, so the object is missing afterwards (E2).

Draws come from one `random.Random(seed)` per model, so a run is reproducible given the seed and the sequence of
attempts. `TABLE4_SUCCESS_RATES` are the paper's per-action success rates; `from_subtask_success_rates` turns such
per-subtask rates into per-attempt failure probabilities for a loop of `attempts` tries
(1 - q**attempts = rate).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from homiebot_executor.skills import SKILLS

# Paper, Table 4: success rate of each action's executions (Go to, Pick, Place, Open, Close).
TABLE4_SUCCESS_RATES: dict[str, float] = {"navigate": 0.4532, "pick": 0.2245, "put": 0.4097, "open": 0.4313,
                                          "close": 0.3645}


@dataclass(frozen=True)
class FailureConfig:
    """Per-skill failure probabilities of one attempt.

    Attributes:
        probabilities: skill -> probability in [0, 1] that an attempt fails (missing skills never fail).
        put_drop_probability: given a failing Put, probability that the object is dropped (E2) instead of kept.
        seed: seed of the random draws.
    """

    probabilities: Mapping[str, float] = field(default_factory=dict)
    put_drop_probability: float = 0.0
    seed: int = 0

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

    @property
    def enabled(self) -> bool:
        """Whether any attempt can fail."""
        return any(probability > 0 for probability in self.probabilities.values())


def from_subtask_success_rates(rates: Mapping[str, float], attempts: int = 3) -> dict[str, float]:
    """Per-attempt failure probabilities q such that a subtask of `attempts` tries succeeds with the given rate.

    Raises:
        ValueError: a rate outside [0, 1] or attempts < 1.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    probabilities = {}
    for skill, rate in rates.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"success rate of {skill!r} must lie in [0, 1], got {rate}")
        probabilities[skill] = (1.0 - rate) ** (1.0 / attempts)
    return probabilities


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

    def reseed(self, seed: int) -> None:
        """Restart the random stream (e.g. at each episode reset)."""
        self._rng = random.Random(seed)

    def draw(self, skill: str) -> InjectedFailure | None:
        """Whether the next attempt of `skill` fails; None when it runs normally.

        One uniform number is drawn per attempt whatever the outcome (plus one for a failing Put), so the stream
        stays aligned across skills with probability 0.
        """
        probability = self.config.probabilities.get(skill, 0.0)
        if self._rng.random() >= probability:
            return None
        drop = skill == "put" and self._rng.random() < self.config.put_drop_probability
        return InjectedFailure(drop_object=drop)
