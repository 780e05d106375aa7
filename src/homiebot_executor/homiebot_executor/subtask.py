"""One EMMOE subtask from the planner's words to its result, independent of ROS.

`SubtaskExecutor.execute` does what /subtask does: feedback "checking"; the checks in order (F1, F2, L1-L4, D1, D2)
on one scene snapshot, with the exact feedback strings; the skill goal for the instances the checks resolved;
routing by the model choice; up to three attempts (feedback "executing", attempt n; each attempt begins with the
skill's arm reset); E1/E2/E3; feedback "verifying"; the inventory after the step. End succeeds at once. The verdict
is the one owner of what the checks read from the scene (the instances, their canonical entries, the hand): the
executor does not read the scene again for the goal, the resolved identity or the inventory's names. The scene, the
checker, the skill runner and the feedback sink are injected: the executor node passes ROS calls (the checker asks
the monitor node, falling back to the local check core on one scene query of its own), tests and benchmarks pass the
backend and the local check core (homiebot_executor.monitor.ErrorMonitor on `scene()`, the default checker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from emmoe_core.protocol import SubtaskText
from emmoe_core.robot.scene import SceneSnapshot

from homiebot_executor.checks import CheckConfig
from homiebot_executor.execution import ExecutionConfig, inventory_after, run_attempts
from homiebot_executor.monitor import CheckVerdict, ErrorMonitor, subtask_text
from homiebot_executor.routing import Route, RoutingConfig, route
from homiebot_executor.skills import SKILL_OF_ACTION, SkillGoal, SkillOutcome, instruction_for

# Result codes outside the EMMOE error types.
NONE, CANCELED, INTERNAL_ERROR = "NONE", "CANCELED", "INTERNAL_ERROR"

Feedback = Callable[[str, int, str], None]
SkillCall = Callable[[Route, SkillGoal, int], SkillOutcome]
# checker(request, planner's inventory) runs the checks on one scene snapshot (its own) and gives the verdict.
Checker = Callable[[SubtaskText, tuple[str, ...]], CheckVerdict]


@dataclass(frozen=True)
class ResolvedIdentity:
    """The scene instances a subtask's written names resolved to, with their alias-table canonical entries.

    Recorded with every executed step so that task progress can match on what the robot really acted on.
    """

    target_instance: str = ""
    target_canonical: str = ""
    place_instance: str = ""
    place_canonical: str = ""

    @classmethod
    def of(cls, verdict: CheckVerdict) -> ResolvedIdentity:
        """The identity of a verdict's target and place."""
        return cls(verdict.target, verdict.target_canonical, verdict.place, verdict.place_canonical)


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
        resolved: what the written target and place resolved to (empty when the checks did not resolve them).
    """

    success: bool
    code: str
    feedback: str
    detail: str = ""
    inventory: tuple[str, ...] = ()
    attempts: tuple[SkillOutcome, ...] = field(default_factory=tuple)
    resolved: ResolvedIdentity = ResolvedIdentity()

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
                 config: SubtaskConfig | None = None, checker: Checker | None = None) -> None:
        """`scene()` reads the current scene (raising SceneUnavailable); `run_skill(route, goal, attempt)` runs one
        attempt on the routed server; `checker` runs the checks (see Checker; default: the local check core,
        `self.monitor`, on `scene()`)."""
        self.config = config or SubtaskConfig()
        self.monitor = ErrorMonitor(self.config.checks)
        self._scene = scene
        self._run_skill = run_skill
        self._check = checker or (lambda request, inventory: self.monitor.verdict(request, self._scene(), inventory))

    def execute(self, request: SubtaskText, inventory: list[str] | tuple[str, ...] = (),
                feedback: Feedback = lambda phase, attempt, status: None,
                canceled: Callable[[], bool] = lambda: False) -> SubtaskResult:
        """Run one subtask. Never raises for faults: they come back as INTERNAL_ERROR."""
        before = tuple(inventory)
        try:
            return self._execute(request, before, feedback, canceled)
        except SceneUnavailable as error:
            return SubtaskResult(False, INTERNAL_ERROR, "", str(error), before)

    def _execute(self, request: SubtaskText, before: tuple[str, ...], feedback: Feedback,
                 canceled: Callable[[], bool]) -> SubtaskResult:
        text = subtask_text(request)
        feedback("checking", 0, f"{text} ({request.model})" if request.model else text)
        if request.verb == "end":
            return SubtaskResult(True, NONE, "None", "", before)
        verdict = self._check(request, before)
        note = verdict.note
        if not verdict.passed:
            return SubtaskResult(False, verdict.error_type, verdict.feedback, _joined(verdict.detail, note), before)
        if not verdict.target:
            return SubtaskResult(False, INTERNAL_ERROR, "", _joined("the checks passed without a resolved target",
                                                                   note), before)
        goal = self.skill_goal(request, verdict)
        resolved = ResolvedIdentity.of(verdict)
        chosen = route(request.routed_model, goal.skill, goal.target_kind, self.config.routing)
        execution = run_attempts(
            request.action, goal, lambda skill_goal, attempt: self._run_skill(chosen, skill_goal, attempt),
            read_hand=lambda: self._scene().held_object, config=self.config.execution, canceled=canceled,
            on_attempt=lambda attempt: feedback("executing", attempt,
                                                f"{chosen.action_name} {goal.skill} {goal.target}"))
        if not execution.canceled and not execution.fault:
            feedback("verifying", len(execution.attempts), execution.detail)
        held = self._hand_after(execution.attempts)
        inventory = tuple(inventory_after(held, self._canonical_of(held, verdict), before, request.action,
                                          request.target))
        if execution.canceled:
            return SubtaskResult(False, CANCELED, "", _joined(execution.detail, note), inventory, execution.attempts,
                                 resolved)
        if execution.fault:
            return SubtaskResult(False, INTERNAL_ERROR, "", _joined(execution.detail, note), inventory,
                                 execution.attempts, resolved)
        if execution.success:
            return SubtaskResult(True, NONE, "None", note, inventory, execution.attempts, resolved)
        return SubtaskResult(False, execution.error_type, execution.feedback, _joined(execution.detail, note),
                             inventory, execution.attempts, resolved)

    def _hand_after(self, attempts: tuple[SkillOutcome, ...]) -> str:
        """The hand after the step: as the last attempt reports it (skill servers always do), else read from the
        scene."""
        last = attempts[-1] if attempts else None
        if last is not None and last.held_object is not None:
            return last.held_object
        return self._scene().held_object

    def _canonical_of(self, held: str, verdict: CheckVerdict) -> str:
        """The canonical entry of the object held after the step: from the verdict when it names that object (the
        target, or what was held already), else read from the scene (a skill that grasped something else)."""
        if not held:
            return ""
        known = verdict.canonical_of(held)
        if known is not None:
            return known
        item = self._scene().object(held)
        return item.canonical if item is not None else ""

    @staticmethod
    def skill_goal(request: SubtaskText, verdict: CheckVerdict) -> SkillGoal:
        """The skill goal for a request that passed the checks: the instances the checks resolved for the skill,
        the planner's words for policies that take an instruction."""
        skill = SKILL_OF_ACTION[request.verb]
        if skill == "navigate":
            return SkillGoal("navigate", verdict.target, target_kind=verdict.target_kind,
                             instruction=instruction_for("navigate", request.target))
        if skill == "put":
            written = request.target if request.place else verdict.target
            return SkillGoal("put", verdict.target, place=verdict.place,
                             instruction=instruction_for("put", written, request.checked_target))
        return SkillGoal(skill, verdict.target, instruction=instruction_for(skill, request.target))


def _joined(detail: str, note: str) -> str:
    """A result's detail with the checker's note appended."""
    return f"{detail}; {note}" if detail and note else detail or note
