"""The interface every planner backend implements, and the request it receives.

A backend turns one `GenerationRequest` (chat messages, the current four views, sampling settings and the
constraints a local model may decode under) into the model's raw text. It does not parse: the planner core
parses, re-samples and falls back to End, identically for every backend. The request holds only what a language model
sees; the experts, which answer from the episode itself, get the executed steps (`attach_history`) and the true
scene (`attach_scene`) through sources attached to them.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from emmoe_core.robot.scene import SceneSnapshot

from homiebot_planner.memory import ExecutedStep
from homiebot_planner.prompts import ObservationMode

Role = Literal["system", "user", "assistant"]
HistorySource = Callable[[], Sequence[ExecutedStep]]


class BackendError(RuntimeError):
    """The backend cannot produce an answer (server down, model missing, bad configuration).

    The message says what failed and what to do; it never contains credentials.
    """


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn. Only the current user turn carries images (front, left, back, right, or the release order).

    Attributes:
        role: "system", "user" or "assistant".
        text: the turn's text.
        images: RGB images as HxWx3 uint8 arrays, in the order they are to be shown.
    """

    role: Role
    text: str
    images: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class DecodingConstraints:
    """What a constrained decoder may choose from in this step.

    Attributes:
        names: names the planner may target (display names of everything visible in the four views, and with
            the planner's `target_names` vocabulary every single-word name of the alias table).
        held: what the planner believes the robot holds (Put's object).
        receptacles: visible furniture and places (Put's place; all visible names when empty).
        containers: visible small objects that are open containers (a bowl): Put may name them as its place too.
        hand_rules: also forbid Pick/Open/Close with a full hand and Put with an empty one.
        object_rules: Pick only objects (visible names that are not receptacles), Open/Close only furniture (the
            receptacles); applies when receptacles are known.
        repeated: subtasks (bracket contents, `Go to, fridge`) that may not be chosen again.
        offered: what may be chosen, each a subtask (`Go to, sponge`) or an action (`Pick`); empty, or matching no
            allowed ending: anything allowed.
    """

    names: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    receptacles: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()
    hand_rules: bool = True
    object_rules: bool = True
    repeated: tuple[str, ...] = ()
    offered: tuple[str, ...] = ()


@dataclass(frozen=True)
class EpisodeInfo:
    """What a backend may know about the episode it plans (the expert backend reads the task's files).

    Attributes:
        episode_id: identifier used in the StepRecords.
        instruction: the task text.
        task_id: EMMOE task id, empty for a free instruction.
        task_dir: the task's directory in the official layout (info.txt, keypath.json), when known.
    """

    episode_id: str
    instruction: str
    task_id: str = ""
    task_dir: Path | None = None


@dataclass(frozen=True)
class GenerationRequest:
    """Everything a backend needs for one sample.

    Attributes:
        messages: system prompt, optional in-context example, the visible conversation window, the current turn.
        temperature: sampling temperature (0 means greedy; None: send none, the model's or the API's default).
        max_new_tokens: cap on generated tokens.
        constraints: what constrained decoding may choose from.
        cancel: set when the run is cancelled; long generations stop early.
    """

    messages: tuple[ChatMessage, ...]
    temperature: float | None = 0.2
    max_new_tokens: int = 1024
    constraints: DecodingConstraints = field(default_factory=DecodingConstraints)
    cancel: threading.Event | None = None


class PlannerBackend(ABC):
    """A source of planner answers.

    Attributes:
        name: backend and model, as it appears in StepRecord.planner (e.g. "smollm2", "openai:gpt-4o").
        observation_mode: "images" when the backend takes the four views, "text" for visible-object names.
        default_in_context_example: whether untuned use needs the one-example template by default.
        object_locations: for a model trained here, whether its text observations said where objects rest (the
            planner then shows them, or not, as in training); None: the planner's `object_locations` setting decides.
    """

    name: str = "backend"
    observation_mode: ObservationMode = "images"
    default_in_context_example: bool = False
    object_locations: bool | None = None
    # Whether the backend reads the true scene (the re-planning expert): the planner node then attaches a source.
    needs_scene: bool = False
    # Whether the backend answers from the steps executed so far (the experts): the planner attaches its memory's.
    needs_history: bool = False

    def attach_history(self, source: HistorySource) -> None:
        """Read the episode's executed steps through `source` (only backends with `needs_history`; default: ignored)."""

    def attach_scene(self, source: Callable[[], SceneSnapshot]) -> None:
        """Read the privileged scene through `source` (only backends with `needs_scene`; default: ignored)."""

    def start_episode(self, episode: EpisodeInfo) -> None:
        """Called before the first step of every episode (default: nothing to do).

        Raises:
            BackendError: when the backend cannot plan this episode (e.g. the expert has no plan for it).
        """

    @abstractmethod
    def generate(self, request: GenerationRequest) -> str:
        """One sample of raw model output.

        Raises:
            BackendError: when no answer can be produced.
        """

    def system_prompt(self, protocol_prompt: str) -> str | None:
        """The system turn this backend's model is prompted with: the protocol's (default), another text, or None
        for none (a planner fine-tuned without a system turn must be run without one)."""
        return protocol_prompt

    def close(self) -> None:
        """Release resources (default: nothing to release)."""
