"""Message conversions: QueryScene, the skill actions, the check service (homiebot_executor.messages)."""

from __future__ import annotations

import pytest
from emmoe_core.protocol import SubtaskText
from emmoe_core.robot.messages import snapshot_from_query, snapshot_to_query

from homiebot_executor import messages
from homiebot_executor.checks import check_subtask
from homiebot_executor.skills import SkillOutcome, SkillStatus


def test_query_scene_round_trip_keeps_part_owners(static_scene):
    from emmoe_interfaces.srv import QueryScene

    scene = static_scene.demo_kitchen(held="apple_0")
    response = snapshot_to_query(scene, QueryScene.Response())
    assert "fridge_0_door" in [state.name for state in response.objects]
    back = snapshot_from_query(response)
    assert back.held_object == "apple_0" and back.held_canonical() == "013_apple"
    assert [item.name for item in back.objects] == [item.name for item in scene.objects]
    door = back.container("fridge_0_door")
    assert door is not None and door.furniture == "fridge_0" and not door.is_open
    assert response.containers[0].furniture == "fridge_0"
    outcome = check_subtask(SubtaskText("Put", "apple", "refrigerator", "RT-1-X"), back)
    assert outcome.error_type == "L3"


@pytest.mark.parametrize("status", [SkillStatus.SUCCEEDED, SkillStatus.NO_PATH, SkillStatus.COLLISION,
                                    SkillStatus.TIMEOUT, SkillStatus.CANCELED, SkillStatus.POLICY_UNAVAILABLE])
def test_navigate_results_keep_the_status(status):
    outcome = SkillOutcome(status, "" if status is SkillStatus.SUCCEEDED else "why", None, 12, 0.3)
    back = messages.outcome_from_navigate(messages.navigate_result(outcome))
    assert back.status is status and back.sim_steps == 12
    carried = SkillOutcome(status, "", "apple_0", 12, 0.3)
    # The hand travels with the result; after a fault it counts as unknown (the executor reads the scene).
    expected = None if status.is_fault else "apple_0"
    assert messages.outcome_from_navigate(messages.navigate_result(carried)).held_object == expected


def test_check_service_messages_round_trip():
    from builtin_interfaces.msg import Time
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.srv import CheckSubtask

    from homiebot_executor.monitor import CheckVerdict, ErrorReport

    request = messages.check_request(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), ("apple",))
    assert (request.subtask.place, list(request.inventory)) == ("brown_table", ["apple"])
    verdict = CheckVerdict(target="apple_0", place="brown_table_0", distance=1.1, target_canonical="013_apple",
                           place_canonical="frl_apartment_table_01", target_kind="object", held="apple_0",
                           held_canonical="013_apple")
    passed = messages.check_response(verdict, CheckSubtask.Response())
    assert (passed.passed, passed.error_code, passed.feedback, passed.resolved_place) == (True, 0, "None",
                                                                                         "brown_table_0")
    # A pass carries everything the executor reads from the scene: the verdict survives the round trip whole.
    assert messages.verdict_from_check(passed) == verdict
    failed = messages.check_response(CheckVerdict("L3", "Unable to put, the fridge is closed, you should open it "
                                                        "first", "door shut", distance=1.4), CheckSubtask.Response())
    assert (failed.passed, failed.error_code, failed.error_msg) == (False, ExecuteSubtask.Result.L3, "door shut")
    assert messages.verdict_from_check(failed).feedback.startswith("Unable to put, the fridge is closed")
    fault = messages.check_fault("scene down", CheckSubtask.Response())
    assert (fault.passed, fault.error_code, fault.error_type) == (False, ExecuteSubtask.Result.INTERNAL_ERROR, "")
    error = messages.execution_error(ErrorReport(SubtaskText("Pick", "apple", "", "RT-1-X"), "E1", "Unable to pick, "
                                                 "the subtask is too difficult to perform", "3 attempts failed",
                                                 "execution", 3), Time(sec=7))
    assert (error.error_code, error.error_type, error.source, error.attempt) == (ExecuteSubtask.Result.E1, "E1",
                                                                                 "execution", 3)
    assert (error.subtask.action, error.subtask.model, error.header.stamp.sec) == ("Pick", "RT-1-X", 7)
    drop = messages.execution_error(ErrorReport(SubtaskText(""), "drop", "", "apple_0 left", "watch", 2),
                                    error.header.stamp)
    assert (drop.error_code, drop.error_type, drop.feedback, drop.attempt) == (0, "drop", "", 2)


@pytest.mark.parametrize("status", [SkillStatus.SUCCEEDED, SkillStatus.UNREACHABLE, SkillStatus.GRASP_FAILED,
                                    SkillStatus.OBJECT_DROPPED, SkillStatus.PLACE_FAILED,
                                    SkillStatus.JOINT_NOT_MOVED, SkillStatus.TIMEOUT, SkillStatus.INTERNAL_ERROR])
def test_manipulate_results_keep_the_status_and_hand(status):
    outcome = SkillOutcome(status, "" if status is SkillStatus.SUCCEEDED else "why", "apple_0", 40)
    back = messages.outcome_from_manipulate(messages.manipulate_result(outcome))
    assert back.status is status and back.held_object == (None if status.is_fault else "apple_0")


def test_injected_failures_travel_as_their_own_code():
    result = messages.manipulate_result(SkillOutcome(SkillStatus.INJECTED_FAILURE, "failure model: pick", ""))
    assert result.error_code == result.INJECTED_FAILURE and result.error_msg == "failure model: pick"
    navigation = messages.navigate_result(SkillOutcome(SkillStatus.INJECTED_FAILURE, "failure model: navigate", ""))
    assert navigation.error_code == navigation.INJECTED_FAILURE and navigation.error_msg == "failure model: navigate"


@pytest.mark.parametrize("status", list(SkillStatus))
def test_every_skill_status_survives_both_skill_actions(status):
    """outcome -> Navigate/Manipulate result -> outcome keeps the status, message, steps and (unless a fault) hand."""
    outcome = SkillOutcome(status, "" if status is SkillStatus.SUCCEEDED else f"why: {status.value}", "apple_0", 9)
    hand = None if status.is_fault else "apple_0"
    for back in (messages.outcome_from_navigate(messages.navigate_result(outcome)),
                 messages.outcome_from_manipulate(messages.manipulate_result(outcome))):
        assert (back.status, back.message, back.sim_steps, back.held_object) == (status, outcome.message, 9, hand)


def test_codes_no_status_owns_read_as_internal_errors():
    from emmoe_interfaces.action import Manipulate, Navigate

    unknown = messages.outcome_from_navigate(Navigate.Result(success=False, error_code=999, error_msg="?"))
    failed_without_code = messages.outcome_from_manipulate(Manipulate.Result(success=False, error_code=0))
    assert unknown.status is failed_without_code.status is SkillStatus.INTERNAL_ERROR
    assert messages.outcome_from_manipulate(Manipulate.Result(success=True, error_code=7)).status is \
        SkillStatus.SUCCEEDED
