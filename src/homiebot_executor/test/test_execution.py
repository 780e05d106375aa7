"""The attempt loop with a fake skill: retries, E1/E2/E3, faults, cancel, inventory naming."""

from __future__ import annotations

import pytest

from homiebot_executor.execution import ExecutionConfig, inventory_after, run_attempts
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


class FakeSkill:
    """Returns scripted outcomes and counts arm resets (each attempt starts with one)."""

    def __init__(self, *outcomes: SkillOutcome) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[int] = []
        self.arm_resets = 0

    def __call__(self, goal: SkillGoal, attempt: int) -> SkillOutcome:
        self.arm_resets += 1
        self.calls.append(attempt)
        return self.outcomes.pop(0)


FAIL = SkillOutcome(SkillStatus.TIMEOUT, "budget used", sim_steps=200)
OK = SkillOutcome(SkillStatus.SUCCEEDED, held_object="apple_0", sim_steps=80)
PICK = SkillGoal("pick", "apple_0")
PUT = SkillGoal("put", "apple_0", place="brown_table_0")


def test_success_on_the_second_attempt():
    skill = FakeSkill(FAIL, OK)
    result = run_attempts("Pick", PICK, skill, read_hand=lambda: "")
    assert result.success and result.feedback == "None" and result.error_type == ""
    assert skill.calls == [1, 2] and skill.arm_resets == 2


def test_three_failures_give_e1():
    skill = FakeSkill(FAIL, FAIL, FAIL)
    result = run_attempts("Pick", PICK, skill, read_hand=lambda: "")
    assert not result.success and result.error_type == "E1"
    assert result.feedback == "Unable to pick, the subtask is too difficult to perform"
    assert skill.calls == [1, 2, 3] and len(result.attempts) == 3


def test_a_pick_that_ran_out_with_its_target_in_the_hand_succeeded():
    lifted_too_slowly = SkillOutcome(SkillStatus.TIMEOUT, "budget used in phase lift", held_object="apple_0")
    result = run_attempts("Pick", PICK, FakeSkill(FAIL, FAIL, lifted_too_slowly), read_hand=lambda: "")
    assert result.success and result.feedback == "None" and "the target is in the hand" in result.detail
    wrong_object = SkillOutcome(SkillStatus.TIMEOUT, "budget used", held_object="banana_0")
    assert run_attempts("Pick", PICK, FakeSkill(FAIL, FAIL, wrong_object), read_hand=lambda: "").error_type == "E1"
    assert run_attempts("Pick", PICK, FakeSkill(FAIL, FAIL, FAIL), read_hand=lambda: "apple_0").success


def test_go_to_feedback_uses_the_lower_cased_verb():
    skill = FakeSkill(FAIL, FAIL, FAIL)
    result = run_attempts("Go to", SkillGoal("navigate", "fridge_0"), skill, read_hand=lambda: "")
    assert result.feedback == "Unable to go to, the subtask is too difficult to perform"


def test_failed_put_without_the_object_gives_e2_at_once():
    skill = FakeSkill(SkillOutcome(SkillStatus.OBJECT_DROPPED, held_object=""))
    result = run_attempts("Put", PUT, skill, read_hand=lambda: "should not be read")
    assert result.error_type == "E2" and result.feedback == "Unable to put, and the object is missing"
    assert skill.calls == [1]


def test_e2_reads_the_hand_when_the_skill_does_not_report_it():
    skill = FakeSkill(SkillOutcome(SkillStatus.PLACE_FAILED, held_object=None))
    assert run_attempts("Put", PUT, skill, read_hand=lambda: "").error_type == "E2"


def test_put_is_retried_in_paper_mode_while_the_object_is_held():
    skill = FakeSkill(SkillOutcome(SkillStatus.PLACE_FAILED, held_object="apple_0"),
                      SkillOutcome(SkillStatus.PLACE_FAILED, held_object="apple_0"),
                      SkillOutcome(SkillStatus.PLACE_FAILED, held_object="apple_0"))
    result = run_attempts("Put", PUT, skill, read_hand=lambda: "apple_0")
    assert result.error_type == "E1" and skill.calls == [1, 2, 3]


def test_release_mode_does_not_retry_put_and_reports_time_out():
    skill = FakeSkill(SkillOutcome(SkillStatus.TIMEOUT, held_object="apple_0"))
    result = run_attempts("Put", PUT, skill, read_hand=lambda: "apple_0",
                          config=ExecutionConfig(put_retries="release"))
    assert result.error_type == "E3" and result.feedback == "Unable to put, time out" and skill.calls == [1]


def test_a_fault_stops_the_loop_without_an_emmoe_error():
    skill = FakeSkill(SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, "connection refused"))
    result = run_attempts("Pick", PICK, skill, read_hand=lambda: "")
    assert result.fault and not result.success and result.error_type == "" and skill.calls == [1]
    assert "connection refused" in result.detail


def test_cancel_before_the_next_attempt():
    skill = FakeSkill(FAIL, OK)
    flags = iter([False, True, True])
    result = run_attempts("Pick", PICK, skill, read_hand=lambda: "", canceled=lambda: next(flags))
    assert result.canceled and skill.calls == [1]


def test_cancelled_attempt_stops_the_loop():
    skill = FakeSkill(SkillOutcome(SkillStatus.CANCELED))
    result = run_attempts("Pick", PICK, skill, read_hand=lambda: "")
    assert result.canceled and not result.success


def test_progress_callback_sees_each_attempt():
    seen: list[int] = []
    run_attempts("Pick", PICK, FakeSkill(FAIL, FAIL, OK), read_hand=lambda: "", on_attempt=seen.append)
    assert seen == [1, 2, 3]


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="max_attempts"):
        ExecutionConfig(max_attempts=0)
    with pytest.raises(ValueError, match="put_retries"):
        ExecutionConfig(put_retries="sometimes")


def test_inventory_names():
    assert inventory_after("", "", ["apple"], "Put", "apple") == []
    assert inventory_after("apple_0", "013_apple", [], "Pick", "red_apple") == ["red_apple"]
    assert inventory_after("apple_0", "013_apple", ["apple"], "Go to", "fridge") == ["apple"]
    # The planner's inventory names something else: the simulator's hand wins, under its canonical name.
    assert inventory_after("bowl_0", "024_bowl", ["apple"], "Go to", "fridge") == ["024_bowl"]


def test_the_subtask_executor_acts_on_its_checker_and_passes_the_note_on(make_kitchen):
    from emmoe_core.protocol import SubtaskText
    from homiebot_executor.monitor import CheckVerdict
    from homiebot_executor.subtask import SubtaskExecutor

    goals: list[SkillGoal] = []
    seen: list[tuple] = []

    def run(route, goal, attempt):
        goals.append(goal)
        return SkillOutcome(SkillStatus.SUCCEEDED, held_object="")

    def lenient(request, inventory):  # a checker with other thresholds than the local core, on its own snapshot
        seen.append((request.target, inventory))
        return CheckVerdict(target="sofa_0", distance=make_kitchen().object("sofa_0").distance,
                            note="checked by a test")

    executor = SubtaskExecutor(lambda: make_kitchen(), run, checker=lenient)
    result = executor.execute(SubtaskText("Pick", "sofa", "", "RT-1-X"), ["nothing"])
    assert result.success and result.detail == "checked by a test"
    assert [(goal.skill, goal.target) for goal in goals] == [("pick", "sofa_0")] and seen == [("sofa", ("nothing",))]

    def strict(request, inventory):
        return CheckVerdict("D1", "Unable to pick, the target is far away", "sofa_0 is 6.00 m away", note="why")

    refused = SubtaskExecutor(lambda: make_kitchen(), run, checker=strict).execute(
        SubtaskText("Pick", "sofa", "", "RT-1-X"))
    assert (refused.code, refused.feedback, refused.detail) == ("D1", "Unable to pick, the target is far away",
                                                                "sofa_0 is 6.00 m away; why")
    assert len(goals) == 1
    local = SubtaskExecutor(lambda: make_kitchen(), run).execute(SubtaskText("Pick", "sofa", "", "RT-1-X"))
    assert (local.code, local.detail) == ("D1", "sofa_0 is 6.00 m away (limit 2 m)")


def test_when_the_checker_answered_the_executor_reads_no_scene(make_kitchen):
    from emmoe_core.protocol import SubtaskText
    from homiebot_executor.monitor import ErrorMonitor
    from homiebot_executor.subtask import SubtaskExecutor

    reads: list[str] = []
    goals: list[SkillGoal] = []
    holding = make_kitchen(held="apple_0")

    def scene():
        reads.append("scene")
        return holding

    def answer(request, inventory):  # the monitor's answer: the checks on its own snapshot
        return ErrorMonitor().verdict(request, holding, inventory)

    def run(route, goal, attempt):
        goals.append(goal)
        return SkillOutcome(SkillStatus.SUCCEEDED, held_object="apple_0")

    executor = SubtaskExecutor(scene, run, checker=answer)
    walked = executor.execute(SubtaskText("Go to", "bowl", "", "NoMaD"), ["red_apple"])
    # The goal's kind, the resolved identity and the inventory's name (the held apple's) all come from the answer.
    assert (goals[0].target, goals[0].target_kind) == ("bowl_0", "object")
    assert (walked.resolved.target_canonical, walked.inventory) == ("024_bowl", ("red_apple",))
    put = executor.execute(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), ["apple"])
    assert (put.resolved.target_canonical, put.resolved.place_canonical) == ("013_apple", "frl_apartment_table_01")
    assert put.inventory == ("apple",) and reads == []
    # A skill that grasped something the answer does not name: the scene is read once, after the step.
    grabbed = SubtaskExecutor(lambda: reads.append("scene") or make_kitchen(held="bowl_0"),
                              lambda route, goal, attempt: SkillOutcome(SkillStatus.SUCCEEDED, held_object="bowl_0"),
                              checker=lambda request, inventory: ErrorMonitor().verdict(request, make_kitchen(),
                                                                                        inventory))
    assert grabbed.execute(SubtaskText("Pick", "apple", "", "RT-1-X")).inventory == ("024_bowl",)
    assert reads == ["scene"]
    # Without a checker the local core checks on one scene read.
    reads.clear()
    assert SubtaskExecutor(scene, run).execute(SubtaskText("Go to", "sofa", "", "NoMaD"), ["apple"]).success
    assert reads == ["scene"]
