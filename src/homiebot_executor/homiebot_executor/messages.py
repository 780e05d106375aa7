"""Conversions between emmoe_interfaces messages and the executor's plain types (no rclpy; message modules only).

Subtask messages go through emmoe_core.convert and QueryScene responses through
emmoe_core.robot.messages.snapshot_from_query (the one conversion of each, shared with the planner and the bridge).
Every SkillStatus has an error code of its own name in both skill actions, so an outcome survives its trip through
a skill server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from emmoe_core.convert import subtask_message
from emmoe_core.protocol import SubtaskText
from emmoe_interfaces.action import ExecuteSubtask, Manipulate, Navigate
from emmoe_interfaces.msg import ExecutionError
from emmoe_interfaces.srv import CheckSubtask

from homiebot_executor.monitor import FAULT, CheckVerdict, ErrorReport
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


EXECUTE_CODES: dict[str, int] = {name: int(getattr(ExecuteSubtask.Result, name))
                                 for name in ("NONE", "F1", "F2", "L1", "L2", "L3", "L4", "D1", "D2", "E1", "E2",
                                              "E3", "CANCELED", "BUSY", "INTERNAL_ERROR")}

def check_request(request: SubtaskText, inventory: Sequence[str]) -> CheckSubtask.Request:
    """The /emmoe/check_subtask request for a subtask and the planner's inventory."""
    return CheckSubtask.Request(subtask=subtask_message(request), inventory=list(inventory))


def check_response(verdict: CheckVerdict, response: CheckSubtask.Response) -> CheckSubtask.Response:
    """Fill a /emmoe/check_subtask response from a verdict."""
    response.passed = verdict.passed
    response.error_code = EXECUTE_CODES[verdict.error_type or "NONE"]
    response.error_type = verdict.error_type
    response.feedback = verdict.feedback if not verdict.passed else "None"
    response.error_msg = verdict.detail
    response.resolved_target, response.resolved_place = verdict.target, verdict.place
    response.distance = float(verdict.distance)
    response.target_canonical, response.place_canonical = verdict.target_canonical, verdict.place_canonical
    response.target_kind = verdict.target_kind
    response.held_object, response.held_canonical = verdict.held, verdict.held_canonical
    return response


def check_fault(detail: str, response: CheckSubtask.Response) -> CheckSubtask.Response:
    """Fill a /emmoe/check_subtask response for a check that could not run (INTERNAL_ERROR)."""
    response.passed = False
    response.error_code = EXECUTE_CODES[FAULT]
    response.error_msg = detail
    response.distance = -1.0
    return response


def verdict_from_check(response: CheckSubtask.Response) -> CheckVerdict:
    """The verdict a /emmoe/check_subtask response carries (not for INTERNAL_ERROR responses)."""
    if response.passed:
        return CheckVerdict(target=response.resolved_target, place=response.resolved_place,
                            distance=float(response.distance), target_canonical=response.target_canonical,
                            place_canonical=response.place_canonical, target_kind=response.target_kind,
                            held=response.held_object, held_canonical=response.held_canonical)
    return CheckVerdict(response.error_type, response.feedback, response.error_msg, distance=float(response.distance))


def execution_error(report: ErrorReport, stamp: object) -> ExecutionError:
    """The /emmoe/errors message of a report; `stamp` is a builtin_interfaces/Time."""
    message = ExecutionError(subtask=subtask_message(report.request),
                             error_code=EXECUTE_CODES.get(report.code, EXECUTE_CODES["NONE"]),
                             error_type=report.error_type, feedback=report.feedback, error_msg=report.detail,
                             source=report.source, attempt=min(max(report.attempt, 0), 255))
    message.header.stamp = stamp
    return message


def _error_codes(result_type: Any) -> dict[SkillStatus, int]:
    """Each status's error code in a skill action's result: the constant of its name (NONE for SUCCEEDED).

    Raises:
        AttributeError: when the action lacks a status's constant (the round trip would lose the status).
    """
    return {status: int(getattr(result_type, "NONE" if status is SkillStatus.SUCCEEDED else status.name))
            for status in SkillStatus}


_NAVIGATE_CODES = _error_codes(Navigate.Result)
_MANIPULATE_CODES = _error_codes(Manipulate.Result)


def navigate_goal(goal: SkillGoal) -> Navigate.Goal:
    """Navigate goal for a navigation SkillGoal."""
    return Navigate.Goal(target=goal.target, target_kind=goal.target_kind, max_sim_steps=goal.max_sim_steps,
                         attempt=goal.attempt)


def manipulate_goal(goal: SkillGoal) -> Manipulate.Goal:
    """Manipulate goal for an arm SkillGoal."""
    return Manipulate.Goal(skill=goal.skill, target=goal.target, place=goal.place, instruction=goal.instruction,
                           max_sim_steps=goal.max_sim_steps, attempt=goal.attempt)


def skill_goal_from_navigate(goal: Navigate.Goal) -> SkillGoal:
    """SkillGoal from a Navigate goal.

    Raises:
        ValueError: empty target (goal poses are not supported by these servers) or a bad target kind.
    """
    if not goal.target:
        raise ValueError("Navigate.target is empty; goal poses without a target are not supported here")
    return SkillGoal("navigate", goal.target, target_kind=goal.target_kind or "place",
                     max_sim_steps=int(goal.max_sim_steps), attempt=max(1, int(goal.attempt)))


def skill_goal_from_manipulate(goal: Manipulate.Goal) -> SkillGoal:
    """SkillGoal from a Manipulate goal.

    Raises:
        ValueError: an unknown skill or an empty target.
    """
    if not goal.target:
        raise ValueError("Manipulate.target is empty")
    return SkillGoal(goal.skill.lower(), goal.target, place=goal.place, instruction=goal.instruction,
                     max_sim_steps=int(goal.max_sim_steps), attempt=max(1, int(goal.attempt)))


def navigate_result(outcome: SkillOutcome) -> Navigate.Result:
    """Navigate result for an outcome."""
    code = _NAVIGATE_CODES[outcome.status]
    distance = outcome.distance_to_goal if math.isfinite(outcome.distance_to_goal) else -1.0
    return Navigate.Result(success=outcome.success, error_code=code, error_msg=_message(outcome),
                           distance_to_goal=float(distance), held_object=outcome.held_object or "",
                           sim_steps=outcome.sim_steps)


def manipulate_result(outcome: SkillOutcome) -> Manipulate.Result:
    """Manipulate result for an outcome."""
    code = _MANIPULATE_CODES[outcome.status]
    return Manipulate.Result(success=outcome.success, error_code=code, error_msg=_message(outcome),
                             held_object=outcome.held_object or "", sim_steps=outcome.sim_steps)


def _message(outcome: SkillOutcome) -> str:
    if outcome.success:
        return ""
    return outcome.message or outcome.status.value


def outcome_from_navigate(result: Navigate.Result) -> SkillOutcome:
    """SkillOutcome from a Navigate result (the hand counts as unknown after a fault)."""
    status = _status_of(result.error_code, _NAVIGATE_CODES, result.success)
    return SkillOutcome(status, result.error_msg, _reported_hand(status, result.held_object), int(result.sim_steps),
                        float(result.distance_to_goal))


def outcome_from_manipulate(result: Manipulate.Result) -> SkillOutcome:
    """SkillOutcome from a Manipulate result (the hand counts as unknown after a fault)."""
    status = _status_of(result.error_code, _MANIPULATE_CODES, result.success)
    return SkillOutcome(status, result.error_msg, _reported_hand(status, result.held_object), int(result.sim_steps))


def _reported_hand(status: SkillStatus, held_object: str) -> str | None:
    """The held object a result reports; None after a fault, whose server may not have read the hand."""
    return None if status.is_fault else held_object


def _status_of(code: int, table: dict[SkillStatus, int], success: bool) -> SkillStatus:
    """The status a result's code names (INTERNAL_ERROR for an unknown code, or NONE on a failed result)."""
    if success:
        return SkillStatus.SUCCEEDED
    return next((status for status, value in table.items() if value == code and status is not SkillStatus.SUCCEEDED),
                SkillStatus.INTERNAL_ERROR)
