"""Conversions between emmoe_interfaces messages and the executor's plain types (no rclpy; message modules only).

QueryScene's ContainerState carries no owner furniture, so the owner of a door or drawer is inferred: the part is also
listed among the objects (kind "container", canonical of its furniture); its owner is the nearest non-part instance
with the same canonical name. Parts are kept out of the snapshot's objects (they are reached through their owner or
their own name).
"""

from __future__ import annotations

import math

from emmoe_interfaces.action import ExecuteSubtask, Manipulate, Navigate
from emmoe_interfaces.msg import Subtask
from emmoe_interfaces.srv import QueryScene

from homiebot_executor.checks import SubtaskRequest
from homiebot_executor.scene import OBJECT_KINDS, ContainerInfo, ObjectInfo, SceneSnapshot
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


def _yaw(orientation: object) -> float:
    w, x, y, z = (float(getattr(orientation, key)) for key in ("w", "x", "y", "z"))
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def snapshot_from_query(response: QueryScene.Response) -> SceneSnapshot:
    """A SceneSnapshot from a successful QueryScene response."""
    robot = (float(response.robot_pose.position.x), float(response.robot_pose.position.y))
    part_names = {container.name for container in response.containers}
    listed = {}
    for state in response.objects:
        kind = state.kind if state.kind in OBJECT_KINDS else "furniture"
        listed[state.name] = ObjectInfo(
            state.name, state.canonical, kind,
            (float(state.pose.position.x), float(state.pose.position.y), float(state.pose.position.z)),
            (float(state.size.x), float(state.size.y), float(state.size.z)), state.on, bool(state.inside),
            float(state.distance))
    objects = tuple(item for name, item in listed.items() if name not in part_names)
    containers = []
    for container in response.containers:
        part = listed.get(container.name)
        owners = [item for item in objects if item.canonical == container.canonical and item.kind != "room"]
        if part is not None and owners:
            owner = min(owners, key=lambda item: math.dist(item.position[:2], part.position[:2])).name
        else:
            owner = owners[0].name if len(owners) == 1 else ""
        containers.append(ContainerInfo(
            container.name, container.canonical, container.joint_type, float(container.position),
            float(container.lower_limit), float(container.upper_limit), float(container.open_threshold),
            bool(container.is_open), owner, part.distance if part is not None else math.inf))
    return SceneSnapshot(robot, _yaw(response.robot_pose.orientation), response.held_object,
                         float(response.contact_force), objects, tuple(containers))


def request_from_subtask(subtask: Subtask) -> SubtaskRequest:
    """The planner's subtask as a SubtaskRequest (fields as written)."""
    return SubtaskRequest(subtask.action, subtask.target, subtask.place, subtask.model)


EXECUTE_CODES: dict[str, int] = {name: int(getattr(ExecuteSubtask.Result, name))
                                 for name in ("NONE", "F1", "F2", "L1", "L2", "L3", "L4", "D1", "D2", "E1", "E2",
                                              "E3", "CANCELED", "BUSY", "INTERNAL_ERROR")}

_NAVIGATE_CODES: dict[SkillStatus, int] = {
    SkillStatus.SUCCEEDED: Navigate.Result.NONE, SkillStatus.UNKNOWN_TARGET: Navigate.Result.UNKNOWN_TARGET,
    SkillStatus.NO_PATH: Navigate.Result.NO_PATH, SkillStatus.UNREACHABLE: Navigate.Result.NO_PATH,
    SkillStatus.COLLISION: Navigate.Result.COLLISION, SkillStatus.TIMEOUT: Navigate.Result.TIMEOUT,
    SkillStatus.INJECTED_FAILURE: Navigate.Result.TIMEOUT,
    SkillStatus.POLICY_UNAVAILABLE: Navigate.Result.POLICY_UNAVAILABLE, SkillStatus.CANCELED: Navigate.Result.CANCELED,
}
_MANIPULATE_CODES: dict[SkillStatus, int] = {
    SkillStatus.SUCCEEDED: Manipulate.Result.NONE, SkillStatus.UNKNOWN_TARGET: Manipulate.Result.UNKNOWN_TARGET,
    SkillStatus.UNREACHABLE: Manipulate.Result.UNREACHABLE, SkillStatus.NO_PATH: Manipulate.Result.UNREACHABLE,
    SkillStatus.COLLISION: Manipulate.Result.UNREACHABLE, SkillStatus.GRASP_FAILED: Manipulate.Result.GRASP_FAILED,
    SkillStatus.OBJECT_DROPPED: Manipulate.Result.OBJECT_DROPPED, SkillStatus.PLACE_FAILED: Manipulate.Result.PLACE_FAILED,
    SkillStatus.JOINT_NOT_MOVED: Manipulate.Result.JOINT_NOT_MOVED, SkillStatus.TIMEOUT: Manipulate.Result.TIMEOUT,
    SkillStatus.INJECTED_FAILURE: Manipulate.Result.TIMEOUT,
    SkillStatus.POLICY_UNAVAILABLE: Manipulate.Result.POLICY_UNAVAILABLE,
    SkillStatus.CANCELED: Manipulate.Result.CANCELED,
}


def navigate_goal(goal: SkillGoal) -> Navigate.Goal:
    """Navigate goal for a navigation SkillGoal."""
    return Navigate.Goal(target=goal.target, target_kind=goal.target_kind, max_sim_steps=goal.max_sim_steps)


def manipulate_goal(goal: SkillGoal) -> Manipulate.Goal:
    """Manipulate goal for an arm SkillGoal."""
    return Manipulate.Goal(skill=goal.skill, target=goal.target, place=goal.place, instruction=goal.instruction,
                           max_sim_steps=goal.max_sim_steps)


def skill_goal_from_navigate(goal: Navigate.Goal) -> SkillGoal:
    """SkillGoal from a Navigate goal.

    Raises:
        ValueError: empty target (goal poses are not supported by these servers) or a bad target kind.
    """
    if not goal.target:
        raise ValueError("Navigate.target is empty; goal poses without a target are not supported here")
    return SkillGoal("navigate", goal.target, target_kind=goal.target_kind or "place",
                     max_sim_steps=int(goal.max_sim_steps))


def skill_goal_from_manipulate(goal: Manipulate.Goal) -> SkillGoal:
    """SkillGoal from a Manipulate goal.

    Raises:
        ValueError: an unknown skill or an empty target.
    """
    if not goal.target:
        raise ValueError("Manipulate.target is empty")
    return SkillGoal(goal.skill.lower(), goal.target, place=goal.place, instruction=goal.instruction,
                     max_sim_steps=int(goal.max_sim_steps))


def navigate_result(outcome: SkillOutcome) -> Navigate.Result:
    """Navigate result for an outcome."""
    code = _NAVIGATE_CODES.get(outcome.status, Navigate.Result.INTERNAL_ERROR)
    distance = outcome.distance_to_goal if math.isfinite(outcome.distance_to_goal) else -1.0
    return Navigate.Result(success=outcome.success, error_code=code, error_msg=_message(outcome),
                           distance_to_goal=float(distance), sim_steps=outcome.sim_steps)


def manipulate_result(outcome: SkillOutcome) -> Manipulate.Result:
    """Manipulate result for an outcome."""
    code = _MANIPULATE_CODES.get(outcome.status, Manipulate.Result.INTERNAL_ERROR)
    return Manipulate.Result(success=outcome.success, error_code=code, error_msg=_message(outcome),
                             held_object=outcome.held_object or "", sim_steps=outcome.sim_steps)


def _message(outcome: SkillOutcome) -> str:
    if outcome.success:
        return ""
    return outcome.message or outcome.status.value


def outcome_from_navigate(result: Navigate.Result) -> SkillOutcome:
    """SkillOutcome from a Navigate result (the hand is not reported)."""
    status = _status_of(result.error_code, _NAVIGATE_CODES, result.success)
    return SkillOutcome(status, result.error_msg, None, int(result.sim_steps), float(result.distance_to_goal))


def outcome_from_manipulate(result: Manipulate.Result) -> SkillOutcome:
    """SkillOutcome from a Manipulate result."""
    status = _status_of(result.error_code, _MANIPULATE_CODES, result.success)
    return SkillOutcome(status, result.error_msg, result.held_object, int(result.sim_steps))


def _status_of(code: int, table: dict[SkillStatus, int], success: bool) -> SkillStatus:
    if success:
        return SkillStatus.SUCCEEDED
    preferred = {SkillStatus.UNREACHABLE, SkillStatus.TIMEOUT, SkillStatus.NO_PATH}
    matches = [status for status, value in table.items() if value == code and status is not SkillStatus.SUCCEEDED]
    if not matches:
        return SkillStatus.INTERNAL_ERROR
    return next((status for status in matches if status in preferred), matches[0])
