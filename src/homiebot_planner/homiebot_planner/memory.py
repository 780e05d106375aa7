"""The planner's episode memory: inventory, execution history, last feedback and the conversation window.

Updates follow the EMMOE live loop (spec section 2): every executed step appends a history entry
`({round}) {subtask}({signal}) `; after a successful Pick the object joins the inventory, after a successful Put
it leaves it, and after a failed Put whose feedback says the object is missing (E2) it leaves it too. The model
sees only the last `window` rounds of the conversation; the whole conversation is kept for conversation.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emmoe_eval.conversation import format_history_entry, format_round, write_conversation
from emmoe_core.names import normalize
from emmoe_core.protocol import SUCCESS_FEEDBACK, SubtaskText, classify_feedback


@dataclass(frozen=True)
class ConversationRound:
    """One USER/ASSISTANT exchange.

    Attributes:
        number: 1-based planner step.
        user: the user message as sent (text only; images are not kept).
        assistant: the model output the planner acted on (the last sample when it gave up).
    """

    number: int
    user: str
    assistant: str


@dataclass(frozen=True)
class ExecutedStep:
    """A subtask the planner sent, whether it succeeded, the executor's feedback and error type (what the expert
    backend and the history need)."""

    subtask: SubtaskText
    success: bool
    feedback: str | None = None
    error_type: str | None = None

    @property
    def error(self) -> str | None:
        """The EMMOE error type of a failed step: the executor's, else what its feedback reads as (replays of logs
        that record no type); None for a success."""
        if self.success:
            return None
        return self.error_type or classify_feedback(self.feedback)


class PlannerMemory:
    """What the planner remembers within one episode.

    Args:
        task: the instruction of the episode.
        window: how many previous rounds of the conversation the model sees (default 0: the release defines a 3-round
            window but never sends it; 3 is the option).

    Raises:
        ValueError: when the window is negative.
    """

    def __init__(self, task: str, window: int = 0) -> None:
        if window < 0:
            raise ValueError(f"history window must be >= 0, got {window}")
        self.task = task
        self.window = window
        self.inventory: list[str] = []
        self.feedback: str | None = None
        self.rounds: list[ConversationRound] = []
        self.executed: list[ExecutedStep] = []
        self._history_entries: list[str] = []

    @property
    def history(self) -> str | None:
        """The concatenated history entries, or None before the first executed step."""
        return "".join(self._history_entries) or None

    @property
    def next_round(self) -> int:
        """The 1-based number of the next planner step."""
        return len(self.rounds) + 1

    def add_round(self, user: str, assistant: str) -> ConversationRound:
        """Append the exchange of the current step to the conversation."""
        conversation_round = ConversationRound(number=self.next_round, user=user, assistant=assistant)
        self.rounds.append(conversation_round)
        return conversation_round

    def visible_rounds(self) -> list[ConversationRound]:
        """The previous rounds the model sees (at most `window`, oldest first)."""
        if self.window == 0:
            return []
        return self.rounds[-self.window:]

    def record_execution(self, round_number: int, subtask: SubtaskText, success: bool, feedback: str | None,
                         inventory_after: Sequence[str] | None = None, error_type: str | None = None) -> None:
        """Update history, feedback and inventory after a subtask was executed.

        Args:
            round_number: the planner step the subtask belongs to.
            subtask: the executed subtask as the planner wrote it.
            success: whether execution succeeded.
            feedback: the executor's feedback string ("None" or None on success).
            inventory_after: the executor's answer for what the robot holds now: the live loop always passes it and
                it replaces the inventory. None in replays without an executor (benchmarks, tests): the release's
                text rule is applied instead (a successful Pick appends the target, a successful Put or an E2 Put
                drops it).
            error_type: the executor's EMMOE error type of a failure (None where none was recorded).
        """
        self._history_entries.append(format_history_entry(round_number, subtask, success))
        self.executed.append(ExecutedStep(subtask=subtask, success=success, feedback=feedback, error_type=error_type))
        text = (feedback or "").strip()
        self.feedback = None if success or text in ("", SUCCESS_FEEDBACK) else text
        if inventory_after is not None:
            self.inventory = list(inventory_after)
        elif subtask.action == "Pick" and success:
            self.inventory.append(subtask.target)
        elif subtask.action == "Put" and (success or classify_feedback(feedback) == "E2"):
            self._drop(subtask.target)

    def _drop(self, name: str) -> None:
        for index, held in enumerate(self.inventory):
            if normalize(held) == normalize(name):
                del self.inventory[index]
                return
        if self.inventory:
            self.inventory.pop()


def write_conversation_json(path: Path | str, rounds: list[ConversationRound]) -> Path:
    """Write conversation.json in the release's format (one `USER:\\n...ASSISTANT:\\n...\\n` string per round).

    Returns:
        The path written (parents are created).
    """
    write_conversation(path, [format_round(item.user, item.assistant) for item in rounds])
    return Path(path)
