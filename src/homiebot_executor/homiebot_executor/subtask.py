"""One EMMOE subtask from the planner's words to its result, independent of ROS.

`SubtaskExecutor.execute` does what /subtask does: feedback "checking"; the scene; the checks in order (F1, F2,
L1-L4, D1, D2) with the exact feedback strings; the skill goal for the resolved target; routing by the model choice;
up to three attempts (feedback "executing", attempt n; each attempt begins with the skill's arm reset); E1/E2/E3;
feedback "verifying"; the inventory after the step. End succeeds at once. The scene, the skill runner and the
feedback sink are injected: the executor node passes ROS calls, tests and benchmarks pass the backend directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from homiebot_executor.checks import CheckConfig, SubtaskRequest
from homiebot_executor.execution import ExecutionConfig, inventory_after, run_attempts
from homiebot_executor.monitor import ErrorMonitor, subtask_text
from homiebot_executor.naming import ResolvedTarget
from homiebot_executor.routing import Route, RoutingConfig, route
from homiebot_executor.scene import SceneSnapshot
from homiebot_executor.skills import SKILL_OF_ACTION, SkillGoal, SkillOutcome, instruction_for

# Result codes outside the EMMOE error types.
NONE, CANCELED, INTERNAL_ERROR = "NONE", "CANCELED", "INTERNAL_ERROR"

Feedback = Callable[[str, int, str], None]
SkillCall = Callable[[Route, SkillGoal, int], SkillOutcome]


@dataclass(frozen=True)
class SubtaskResult:
    """What /subtask returns.

    Attributes:
        success: the subtask succeeded (End always does).
        code: "NONE", an EMMOE error type ("F1".."E3"), "CANCELED" or "INTERNAL_ERROR".
        feedback: the exact EMMOE feedback ("None" on success, "" for CANCELED and INTERNAL_ERROR).
        detail: human-readable explanation ("" on success).
        inventory: held objects after the step, as the planner names them.
        attempts: skill attempts that ran.
    """

    success: bool
    code: str
    feedback: str
    detail: str = ""
    inventory: tuple[str, ...] = ()
    attempts: tuple[SkillOutcome, ...] = field(default_factory=tuple)

    @property
    def error_type(self) -> str:
        """The EMMOE error type, "" on success or for codes outside the benchmark."""
        return "" if self.code in (NONE, CANCELED, INTERNAL_ERROR) else self.code


class SceneUnavailable(RuntimeError):
    """The scene could not be read (simulator down or failing); becomes INTERNAL_ERROR."""


@dataclass(frozen=True)
class SubtaskConfig:
    """Settings of the subtask executor: checks, attempt loop, routing."""

    checks: CheckConfig = CheckConfig()
    execution: ExecutionConfig = ExecutionConfig()
    routing: RoutingConfig = RoutingConfig()


class SubtaskExecutor:
    """Checks, routes and runs subtasks (see the module docstring)."""

    def __init__(self, scene: Callable[[], SceneSnapshot], run_skill: SkillCall,
                 config: SubtaskConfig | None = None) -> None:
        """`scene()` reads the current scene (raising SceneUnavailable); `run_skill(route, goal, attempt)` runs one
        attempt on the routed server."""
        self.config = config or SubtaskConfig()
        self.monitor = ErrorMonitor(self.config.checks)
        self._scene = scene
        self._run_skill = run_skill

    def execute(self, request: SubtaskRequest, inventory: list[str] | tuple[str, ...] = (),
                feedback: Feedback = lambda phase, attempt, status: None,
                canceled: Callable[[], bool] = lambda: False) -> SubtaskResult:
        """Run one subtask. Never raises for faults: they come back as INTERNAL_ERROR."""
        before = tuple(inventory)
        try:
            return self._execute(request, before, feedback, canceled)
        except SceneUnavailable as error:
            return SubtaskResult(False, INTERNAL_ERROR, "", str(error), before)

    def _execute(self, request: SubtaskRequest, before: tuple[str, ...], feedback: Feedback,
                 canceled: Callable[[], bool]) -> SubtaskResult:
        text = subtask_text(request)
        feedback("checking", 0, f"{text} ({request.model})" if request.model else text)
        if request.verb == "end":
            return SubtaskResult(True, NONE, "None", "", before)
        snapshot = self._scene()
        outcome = self.monitor.check(request, snapshot)
        if not outcome.passed:
            return SubtaskResult(False, outcome.error_type, outcome.feedback, outcome.detail, before)
        if outcome.target is None:
            return SubtaskResult(False, INTERNAL_ERROR, "", "the checks passed without a resolved target", before)
        goal = self.skill_goal(request, outcome.target, snapshot)
        chosen = route(request.model, goal.skill, goal.target_kind, self.config.routing)
        execution = run_attempts(
            request.action, goal, lambda skill_goal, attempt: self._run_skill(chosen, skill_goal, attempt),
            read_hand=lambda: self._scene().held_object, config=self.config.execution, canceled=canceled,
            on_attempt=lambda attempt: feedback("executing", attempt,
                                                f"{chosen.action_name} {goal.skill} {goal.target}"))
        if not execution.canceled and not execution.fault:
            feedback("verifying", len(execution.attempts), execution.detail)
        held = self._hand_after(snapshot, goal, execution.attempts)
        held_info = snapshot.object(held) if held else None
        canonical = held_info.canonical if held_info is not None else ""
        inventory = tuple(inventory_after(held, canonical, before, request.action, request.target))
        if execution.canceled:
            return SubtaskResult(False, CANCELED, "", execution.detail, inventory, execution.attempts)
        if execution.fault:
            return SubtaskResult(False, INTERNAL_ERROR, "", execution.detail, inventory, execution.attempts)
        if execution.success:
            return SubtaskResult(True, NONE, "None", "", inventory, execution.attempts)
        return SubtaskResult(False, execution.error_type, execution.feedback, execution.detail, inventory,
                             execution.attempts)

    def _hand_after(self, snapshot: SceneSnapshot, goal: SkillGoal, attempts: tuple[SkillOutcome, ...]) -> str:
        """The hand after the step: as the last attempt reports it; unchanged after a successful navigation (a drop
        fails the skill); otherwise read from the scene."""
        last = attempts[-1] if attempts else None
        if last is not None and last.held_object is not None:
            return last.held_object
        if last is not None and last.success and goal.skill == "navigate":
            return snapshot.held_object
        return self._scene().held_object

    @staticmethod
    def skill_goal(request: SubtaskRequest, target: ResolvedTarget, snapshot: SceneSnapshot) -> SkillGoal:
        """The skill goal for a checked request: instance names for the skill, the planner's words for policies
        that take an instruction."""
        skill = SKILL_OF_ACTION[request.verb]
        if skill == "navigate":
            return SkillGoal("navigate", target.name, target_kind="object" if target.is_object else "place",
                             instruction=instruction_for("navigate", request.target))
        if skill in ("open", "close"):
            part = target.container.name if target.container is not None else target.name
            return SkillGoal(skill, part, instruction=instruction_for(skill, request.target))
        if skill == "put":
            written = request.target if request.place else snapshot.held_object
            return SkillGoal("put", snapshot.held_object, place=target.name,
                             instruction=instruction_for("put", written, request.checked_target))
        return SkillGoal(skill, target.name, instruction=instruction_for(skill, request.target))
