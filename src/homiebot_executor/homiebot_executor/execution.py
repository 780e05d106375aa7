"""The attempt loop after the checks: up to three attempts, E1/E2/E3 classification, inventory after the step.

Paper mode (default): every skill gets up to `max_attempts` attempts (each starts with an arm reset, done by the
skill itself, see homiebot_executor.skills); three failures give E1, except a Pick whose last attempt left its target
in the hand (it ran out while lifting), which succeeded. A failed Put after which nothing is grasped any
more gives E2 at once (there is nothing left to put).
Release mode (`put_retries="release"`): as the released code, a failed Put is not retried: E2 when the object is
missing, otherwise E3 ("time out").
Faults that are not skill failures (remote policy down, internal error) stop the loop and are reported as such, not
as an EMMOE error: the planner must not learn from a broken server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from emmoe_core.names import AliasTable, default_alias_table
from emmoe_core.protocol import feedback_for

from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


@dataclass(frozen=True)
class ExecutionConfig:
    """Settings of the attempt loop.

    Attributes:
        max_attempts: attempts per subtask (3 in the benchmark).
        put_retries: "paper" (retry a failed Put while the object is still held) or "release" (no retry: E3).
    """

    max_attempts: int = 3
    put_retries: str = "paper"

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"ExecutionConfig.max_attempts: expected at least 1, got {self.max_attempts}")
        if self.put_retries not in ("paper", "release"):
            raise ValueError(f"ExecutionConfig.put_retries: expected 'paper' or 'release', got {self.put_retries!r}")


class SkillRunner(Protocol):
    """Runs one attempt of a skill (the arm reset included) and reports its outcome."""

    def __call__(self, goal: SkillGoal, attempt: int) -> SkillOutcome:
        """Run attempt `attempt` (1-based) of `goal`."""
        ...


@dataclass(frozen=True)
class ExecutionResult:
    """Outcome of the attempt loop.

    Attributes:
        success: whether an attempt succeeded.
        error_type: "" on success or fault, else "E1", "E2" or "E3".
        feedback: the exact EMMOE feedback ("None" on success, "" on a fault or cancel).
        detail: what happened, for logs.
        attempts: outcomes of the attempts that ran, in order.
        canceled: the loop stopped because of a cancel request.
        fault: the loop stopped because the skill could not run (POLICY_UNAVAILABLE, INTERNAL_ERROR).
    """

    success: bool
    error_type: str = ""
    feedback: str = ""
    detail: str = ""
    attempts: tuple[SkillOutcome, ...] = field(default_factory=tuple)
    canceled: bool = False
    fault: bool = False


def run_attempts(action: str, goal: SkillGoal, run_skill: SkillRunner, read_hand: Callable[[], str],
                 config: ExecutionConfig | None = None, canceled: Callable[[], bool] = lambda: False,
                 on_attempt: Callable[[int], None] = lambda attempt: None) -> ExecutionResult:
    """Run up to `config.max_attempts` attempts of `goal` and classify the outcome.

    Args:
        action: the action as the planner wrote it (its lower-cased form goes into the feedback).
        goal: the skill goal.
        run_skill: runs one attempt.
        read_hand: the instance held right now ("" empty); used when an outcome does not report the hand.
        config: loop settings.
        canceled: polled before each attempt and after a cancelled one.
        on_attempt: called with the attempt number before it starts (progress feedback).
    """
    config = config or ExecutionConfig()
    outcomes: list[SkillOutcome] = []
    for attempt in range(1, config.max_attempts + 1):
        if canceled():
            return ExecutionResult(False, detail=f"canceled before attempt {attempt}", attempts=tuple(outcomes),
                                   canceled=True)
        on_attempt(attempt)
        outcome = run_skill(replace(goal, attempt=attempt), attempt)
        outcomes.append(outcome)
        if outcome.success:
            return ExecutionResult(True, feedback="None", detail=f"succeeded on attempt {attempt}",
                                   attempts=tuple(outcomes))
        if outcome.status is SkillStatus.CANCELED or canceled():
            return ExecutionResult(False, detail=f"canceled during attempt {attempt}", attempts=tuple(outcomes),
                                   canceled=True)
        if outcome.status.is_fault:
            return ExecutionResult(False, detail=f"attempt {attempt}: {outcome.status.value}: {outcome.message}",
                                   attempts=tuple(outcomes), fault=True)
        if goal.skill == "put":
            held = outcome.held_object if outcome.held_object is not None else read_hand()
            if not held:
                return _failure("E2", action, f"put attempt {attempt} failed ({outcome.status.value}) and nothing "
                                              "is grasped any more", outcomes)
            if config.put_retries == "release":
                return _failure("E3", action, f"put attempt {attempt} failed ({outcome.status.value}); the release "
                                              "does not retry Put", outcomes)
    last = outcomes[-1]
    detail = f"{len(outcomes)} attempts failed; last: {last.status.value}: {last.message}"
    if goal.skill == "pick" and (last.held_object if last.held_object is not None else read_hand()) == goal.target:
        # The last attempt ran out (lifting, say) with the target in the hand: the step did what it was asked.
        return ExecutionResult(True, feedback="None", detail=f"{detail}; the target is in the hand",
                               attempts=tuple(outcomes))
    return _failure("E1", action, detail, outcomes)


def _failure(code: str, action: str, detail: str, outcomes: Sequence[SkillOutcome]) -> ExecutionResult:
    return ExecutionResult(False, code, feedback_for(code, action), detail, tuple(outcomes))


def inventory_after(held_instance: str, held_canonical: str, before: Sequence[str], action: str, target: str,
                    aliases: AliasTable | None = None) -> list[str]:
    """The planner-facing inventory after a step: the held object under the name the planner uses for it.

    The name is kept from the inventory before the step when one of its entries names the held object, else the
    written target of a Pick of that object, else the canonical name. An empty hand gives [].
    """
    if not held_instance:
        return []
    aliases = aliases or default_alias_table()

    def names_it(name: str) -> bool:
        return aliases.matches(name, held_canonical) or aliases.same(name, held_instance)

    for name in before:
        if names_it(name):
            return [name]
    if action.lower() == "pick" and target and names_it(target):
        return [target]
    return [held_canonical or held_instance]
