"""The random-valid-action baseline: every step, a uniformly drawn subtask that passes the hand rules.

It sees what a text planner sees (the names visible in the four views and the inventory) and answers in the
EMMOE template, so its runs go through the same parser, executor and metrics as a language model's. End is
drawn with a fixed probability. Seeded per episode, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from emmoe_core.protocol import MODELS_FOR_ACTION, format_subtask

from homiebot_planner.backends.base import EpisodeInfo, GenerationRequest, PlannerBackend


@dataclass(frozen=True)
class RandomConfig:
    """Settings of the random baseline.

    Attributes:
        seed: base seed; each episode and run draws from its own stream derived from it.
        end_probability: chance of answering End at a step.
    """

    seed: int = 0
    end_probability: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.end_probability <= 1.0:
            raise ValueError(f"random_end_probability must be in [0, 1], got {self.end_probability}")


class RandomBackend(PlannerBackend):
    """Draws a valid subtask at random (see the module docstring)."""

    observation_mode = "text"

    def __init__(self, config: RandomConfig) -> None:
        self.config = config
        self.name = "random"
        self._rng = random.Random(config.seed)

    def start_episode(self, episode: EpisodeInfo) -> None:
        """A fresh random stream per episode (same episode, same seed: same choices)."""
        self._rng = random.Random(f"{self.config.seed}:{episode.episode_id}")

    def candidates(self, request: GenerationRequest) -> list[tuple[str, str, str]]:
        """Every (action, target, place) the hand rules allow with what is visible and held."""
        constraints = request.constraints
        held, visible = constraints.held, constraints.names
        receptacles = constraints.receptacles or visible
        options = [("Go to", name, "") for name in visible]
        if held and constraints.hand_rules:
            options += [("Put", item, place) for item in held for place in receptacles]
        else:
            options += [(action, name, "") for action in ("Pick", "Open", "Close") for name in visible]
        return options

    def generate(self, request: GenerationRequest) -> str:
        """One random subtask in the EMMOE answer template."""
        options = self.candidates(request)
        if not options or self._rng.random() < self.config.end_probability:
            return "Analysis: random baseline.\nSubtask: [End]\nModel: None"
        action, target, place = self._rng.choice(options)
        model = self._rng.choice(MODELS_FOR_ACTION[action])
        return f"Analysis: random baseline.\nSubtask: {format_subtask(action, target, place)}\nModel: {model}"
