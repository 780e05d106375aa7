"""The planner's step logic: build the messages, sample up to N times, parse, give up, update memory.

This is the EMMOE high-level planning loop without ROS: the planner node feeds it observations and execution
results; tests and benchmarks drive it directly.
"""

from __future__ import annotations

import threading
import time
from itertools import takewhile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from emmoe_core.names import AliasTable, default_alias_table
from emmoe_core.protocol import (
    ACTIONS,
    OPEN_CONTAINER_OBJECTS,
    SubtaskText,
    is_small_object,
)

from homiebot_planner.backends.base import ChatMessage, DecodingConstraints, GenerationRequest, PlannerBackend
from homiebot_planner.memory import PlannerMemory
from homiebot_planner.parsing import PARSERS, ParsedOutput, is_valid, parse_output
from homiebot_planner.prompts import (
    RELEASE_IMAGE_ORDER,
    REQUEST_LINES,
    VIEW_ORDER,
    build_user_message,
    display_name,
    in_context_example,
    shown_objects,
    system_prompt,
)

# What constrained decoding may name (PlannerConfig.target_names).
TARGET_NAMES: tuple[str, ...] = ("visible", "vocabulary")
END = SubtaskText("End")
# The subtask of a give-up decision: nothing to execute (the run ends without logging the round, as the release).
NO_SUBTASK = SubtaskText("")


@dataclass(frozen=True)
class PlannerConfig:
    """Settings of the planning loop (defaults are the released loop's).

    Attributes:
        max_samples: samples per step before giving up (EMMOE: 5; the run then ends, reason gave_up).
        history_window: previous conversation rounds the model sees (the release defines 3 but sends none: 0).
        request_variant: "live" (the release's loop) or "sft" (the SFT data's request line).
        in_context_example: show one well-formed exchange before each inference (for untuned models).
        temperature: sampling temperature (EMMOE: 0.2; 0 is greedy; None sends none: the model's or API's default).
        max_new_tokens: cap on tokens per sample.
        require_valid: re-sample answers that parse but name an unknown action/model or wrong arguments
            (off by default: the benchmark sends them to the executor, which answers F1).
        release_image_order: send the views as left, back, right, front as the release did (the prompt still
            says front, left, back, right); off by default.
        display_names: show text-only planners readable aliases (`apple`) instead of canonical ids (`013_apple`).
        object_locations: show text-only planners where each visible small object rests (`apple (on sofa)`), the
            relation an image shows; a model trained here decides by its planner_prompt.json instead (shown as in
            its training data).
        hand_rules: constrained decoding also forbids Pick/Open/Close with a full hand and Put with an empty one.
        object_rules: constrained decoding lets Pick take only small objects and Open/Close only furniture.
        no_repeat: constrained decoding does not offer the previous subtask again (its outcome would repeat), unless
            it failed in execution (E1-E3).
        walk_up: after a subtask refused because its target is far away (D1), constrained decoding offers only
            `[Go to, <that target>]` (the place of a Put): walking up is what undoes a D1 (docs/fidelity.md,
            "recovery rules").
        end_when_done_trying: constrained decoding offers End only with an empty hand and not right after a subtask
            failed in execution (E1-E3): a held object or a failed subtask is work left.
        parser: how answers are parsed: "release", "release_bracket" or "strict" (homiebot_planner.parsing).
        target_names: what constrained decoding lets a subtask name: "visible" (the names visible in the four views)
            or "vocabulary" (those and every single-word name of the alias table: a fridge or a room out of sight,
            as the expert's plans name them; the executor answers for names the scene lacks).
    """

    max_samples: int = 5
    history_window: int = 0
    request_variant: str = "live"
    in_context_example: bool = False
    temperature: float | None = 0.2
    max_new_tokens: int = 1024
    require_valid: bool = False
    release_image_order: bool = False
    display_names: bool = True
    object_locations: bool = True
    hand_rules: bool = True
    object_rules: bool = True
    no_repeat: bool = True
    walk_up: bool = True
    end_when_done_trying: bool = True
    parser: str = "strict"
    target_names: str = "visible"

    def __post_init__(self) -> None:
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {self.max_samples}")
        if self.history_window < 0:
            raise ValueError(f"history_window must be >= 0, got {self.history_window}")
        if self.request_variant not in REQUEST_LINES:
            raise ValueError(f"request_variant must be one of {sorted(REQUEST_LINES)}, got {self.request_variant!r}")
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
        if self.max_new_tokens < 8:
            raise ValueError(f"max_new_tokens must be >= 8, got {self.max_new_tokens}")
        if self.parser not in PARSERS:
            raise ValueError(f"parser must be one of {', '.join(PARSERS)}, got {self.parser!r}")
        if self.target_names not in TARGET_NAMES:
            raise ValueError(f"target_names must be one of {', '.join(TARGET_NAMES)}, got {self.target_names!r}")


# Execution failures: a retry of the same subtask may succeed.
RETRYABLE_ERRORS: tuple[str, ...] = ("E1", "E2", "E3")


@dataclass(frozen=True)
class Observation:
    """What the planner observes before a step.

    Attributes:
        images: view name ("front", "left", "back", "right") -> HxWx3 uint8 RGB image; empty when not available.
        visible: view name -> names visible in that view (canonical names from the simulator's segmentation).
        locations: view name -> parallel to `visible`: where each small object rests ("on <canonical>",
            "in <canonical>", "" for furniture and objects on the floor); empty when not reported.
    """

    images: Mapping[str, np.ndarray] = field(default_factory=dict)
    visible: Mapping[str, Sequence[str]] = field(default_factory=dict)
    locations: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The planner's answer for one step.

    Attributes:
        round_number: 1-based planner step.
        user_message: the user message of this step (text).
        raw_output: the accepted sample, or the last sample when the planner gave up.
        parsed: the parsed answer; None when no sample parsed.
        subtask: what to execute (End when the planner ended; NO_SUBTASK when it gave up).
        model: the low-level model as written ("None" for End, "" when the planner gave up).
        analysis: the Analysis text (empty when the planner gave up).
        samples: how many samples were drawn.
        gave_up: True when all samples were unparsable: the run ends (the round is not kept in memory).
        valid: whether the answer is valid under the protocol (action/model lists, argument counts).
        planning_seconds: wall time of the step's inference.
    """

    round_number: int
    user_message: str
    raw_output: str
    parsed: ParsedOutput | None
    subtask: SubtaskText
    model: str
    analysis: str
    samples: int
    gave_up: bool
    valid: bool
    planning_seconds: float

    @property
    def is_end(self) -> bool:
        """Whether this step ends the run."""
        return self.subtask.action == "End"


class Planner:
    """One episode of EMMOE high-level planning with one backend.

    Args:
        backend: where answers come from.
        task: the instruction.
        config: loop settings.
        alias_table: for display names of visible objects (the shipped table by default).
    """

    def __init__(self, backend: PlannerBackend, task: str, config: PlannerConfig | None = None,
                 alias_table: AliasTable | None = None) -> None:
        self.backend = backend
        self.config = config or PlannerConfig()
        self.memory = PlannerMemory(task, window=self.config.history_window)
        if backend.needs_history:
            backend.attach_history(lambda: tuple(self.memory.executed))
        self._alias_table = alias_table or default_alias_table()
        self._system = backend.system_prompt(system_prompt(backend.observation_mode))
        self._vocabulary = (vocabulary_names(self._alias_table, self._shown)
                            if self.config.target_names == "vocabulary" else [])

    @property
    def observation_mode(self) -> str:
        """"images" or "text": what this planner's backend sees."""
        return self.backend.observation_mode

    def _shown(self, name: str) -> str:
        return display_name(name, self._alias_table) if self.config.display_names else name

    def visible_names(self, observation: Observation) -> dict[str, list[str]]:
        """The text observation per view: visible names as the planner shows them (display names unless turned
        off), small objects with where they rest (`shown_objects`)."""
        shown = self.config.object_locations if self.backend.object_locations is None else self.backend.object_locations
        locations = observation.locations if shown else {}
        return {view: shown_objects(observation.visible.get(view, ()), locations.get(view, ()), self._shown)
                for view in VIEW_ORDER}

    def constraints(self, observation: Observation) -> DecodingConstraints:
        """What constrained decoding may choose from in this observation."""
        names: dict[str, None] = {}
        receptacles: dict[str, None] = {}
        containers: dict[str, None] = {}
        seen = [(self._shown(canonical), canonical)
                for view in VIEW_ORDER for canonical in observation.visible.get(view, ())]
        for shown, canonical in seen + self._vocabulary:
            names[shown] = None
            if not is_small_object(canonical):
                receptacles[shown] = None
            elif canonical in OPEN_CONTAINER_OBJECTS:
                containers[shown] = None
        return DecodingConstraints(names=tuple(names), held=tuple(self.memory.inventory),
                                   receptacles=tuple(receptacles), containers=tuple(containers),
                                   hand_rules=self.config.hand_rules,
                                   object_rules=self.config.object_rules, repeated=self._repeat_forbidden(),
                                   offered=self._offered())

    def _offered(self) -> tuple[str, ...]:
        """With `walk_up` or `end_when_done_trying`: what the last step and the hand leave to choose (empty: all)."""
        last = self.memory.executed[-1] if self.memory.executed else None
        if self.config.walk_up and last is not None and last.error == "D1":
            return (str(SubtaskText("Go to", last.subtask.checked_target))[1:-1],)
        if self.config.end_when_done_trying and (self.memory.inventory or (
                last is not None and last.error in RETRYABLE_ERRORS)):
            return tuple(action for action in ACTIONS if action != END.action)
        return ()

    def _repeat_forbidden(self) -> tuple[str, ...]:
        """With `no_repeat`: the subtasks whose outcome would repeat. The previous one, unless it failed in execution
        (E1-E3, where a retry may work), and every subtask refused without running (D1, L1, ...) since the last step
        that ran a skill: nothing has moved since, so a refused `[Pick, sponge]` from too far away is refused again
        (without this, the planner alternated between two objects out of reach until the step limit)."""
        executed = self.memory.executed
        if not self.config.no_repeat or not executed:
            return ()
        refused = list(takewhile(lambda step: not step.success and step.error not in RETRYABLE_ERRORS,
                                 reversed(executed)))
        steps = refused or [step for step in executed[-1:] if step.success]
        return tuple(dict.fromkeys(str(step.subtask)[1:-1] for step in steps))

    def user_message(self, observation: Observation) -> str:
        """The user message of the next step."""
        visible = self.visible_names(observation) if self.observation_mode == "text" else None
        return build_user_message(self.memory.task, self.memory.inventory, self.memory.history, self.memory.feedback,
                                  self.config.request_variant, visible)

    def messages(self, observation: Observation, user_message: str) -> tuple[ChatMessage, ...]:
        """System prompt (unless the backend's model takes none), optional in-context example, the conversation
        window and the current turn."""
        messages = [ChatMessage("system", self._system)] if self._system is not None else []
        if self.config.in_context_example:
            example = in_context_example()
            messages += [ChatMessage("user", example.user), ChatMessage("assistant", example.assistant)]
        for previous in self.memory.visible_rounds():
            messages += [ChatMessage("user", previous.user), ChatMessage("assistant", previous.assistant)]
        images: tuple[np.ndarray, ...] = ()
        if self.observation_mode == "images" and observation.images:
            order = RELEASE_IMAGE_ORDER if self.config.release_image_order else VIEW_ORDER
            images = tuple(observation.images[view] for view in order if view in observation.images)
        messages.append(ChatMessage("user", user_message, images))
        return tuple(messages)

    def decide(self, observation: Observation, cancel: threading.Event | None = None) -> Decision:
        """Sample until an answer parses (and is valid when required), at most `max_samples` times.

        The exchange is added to the conversation. After `max_samples` unusable samples the planner gives up: the
        decision has `gave_up` set and no subtask, and the round is not kept (the release never logs it).

        Raises:
            BackendError: when the backend cannot answer at all.
        """
        started = time.perf_counter()
        user_message = self.user_message(observation)
        request = GenerationRequest(
            messages=self.messages(observation, user_message),
            temperature=self.config.temperature,
            max_new_tokens=self.config.max_new_tokens,
            constraints=self.constraints(observation),
            cancel=cancel,
        )
        raw_output = ""
        parsed: ParsedOutput | None = None
        samples = 0
        for samples in range(1, self.config.max_samples + 1):
            raw_output = self.backend.generate(request)
            candidate = parse_output(raw_output, self.config.parser)
            if candidate is not None and (not self.config.require_valid or is_valid(candidate)):
                parsed = candidate
                break
            if cancel is not None and cancel.is_set():
                break
        if parsed is None:
            return Decision(round_number=self.memory.next_round, user_message=user_message, raw_output=raw_output,
                            parsed=None, subtask=NO_SUBTASK, model="", analysis="", samples=samples, gave_up=True,
                            valid=False, planning_seconds=time.perf_counter() - started)
        round_number = self.memory.add_round(user_message, raw_output).number
        elapsed = time.perf_counter() - started
        return Decision(round_number=round_number, user_message=user_message, raw_output=raw_output, parsed=parsed,
                        subtask=parsed.subtask, model=parsed.model, analysis=parsed.analysis, samples=samples,
                        gave_up=False, valid=is_valid(parsed), planning_seconds=elapsed)

    def record_result(self, decision: Decision, success: bool, feedback: str | None,
                      inventory_after: Sequence[str] | None = None, error_type: str | None = None) -> None:
        """Update memory with the execution result of a decision.

        Args:
            decision: the executed decision.
            success: whether it succeeded.
            feedback: the executor's feedback string.
            inventory_after: what the executor says the robot holds now (the source of truth in the live loop);
                None only in replays without an executor, which then apply the release's text rule.
            error_type: the executor's EMMOE error type of a failure (None where none was recorded).
        """
        self.memory.record_execution(decision.round_number, decision.subtask, success, feedback, inventory_after,
                                     error_type)


def vocabulary_names(table: AliasTable, shown: Callable[[str], str]) -> list[tuple[str, str]]:
    """Every name constrained decoding may use with `target_names` vocabulary, with the canonical entry it names:
    per entry of the alias table its shown name and its single-word aliases (`brown_table`, `refrigerator`)."""
    names: list[tuple[str, str]] = []
    for canonical, aliases in table.aliases.items():
        spellings = (shown(canonical), *(alias.strip() for alias in aliases if " " not in alias.strip()))
        names += [(spelling, canonical) for spelling in dict.fromkeys(spellings)]
    return names
