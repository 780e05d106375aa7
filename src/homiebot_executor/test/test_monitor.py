"""The error monitor's verdicts and reports, and the execution watcher (homiebot_executor.monitor)."""

from __future__ import annotations

import pytest


from emmoe_core.protocol import SubtaskText
from homiebot_executor.monitor import ErrorMonitor, ErrorReport, ExecutionWatcher


def test_watcher_sees_a_drop_but_not_an_allowed_release():
    watcher = ExecutionWatcher(held_at_start="apple_0", step_budget=200)
    assert watcher.observe(1, "apple_0", 0.0) == []
    [incident] = watcher.observe(2, "", 0.0)
    assert incident.kind == "drop" and incident.step == 2
    releasing = ExecutionWatcher(held_at_start="apple_0", release_allowed=True)
    assert releasing.observe(5, "", 0.0) == [] and not releasing.incidents


def test_watcher_contact_and_timeout_once_each():
    watcher = ExecutionWatcher(step_budget=3, contact_limit=5.0)
    assert watcher.observe(1, "", 4.9) == []
    assert [incident.kind for incident in watcher.observe(2, "", 7.5)] == ["contact"]
    assert [incident.kind for incident in watcher.observe(3, "", 9.0)] == ["timeout"]
    assert watcher.observe(4, "", 9.0) == []
    assert [incident.kind for incident in watcher.incidents] == ["contact", "timeout"]
    assert watcher.peak_contact_force == 9.0


def test_monitor_reports_carry_type_feedback_and_subtask(make_kitchen):
    monitor = ErrorMonitor()
    request = SubtaskText("Put", "apple", "fridge", "RT-1-X")
    outcome = monitor.check(request, make_kitchen(held="apple_0"))
    report = monitor.report(request, outcome.error_type, outcome.feedback, outcome.detail)
    assert (report.error_type, report.subtask, report.category) == ("L3", "[Put, apple, fridge]", "logical")
    assert report.feedback == "Unable to put, the fridge is closed, you should open it first"


def test_watcher_reports_simultaneous_incidents_together():
    watcher = ExecutionWatcher(held_at_start="apple_0", contact_limit=5.0)
    assert [incident.kind for incident in watcher.observe(1, "", 8.0)] == ["drop", "contact"]


def test_verdicts_name_the_instances_the_skill_acts_on(make_kitchen):
    monitor = ErrorMonitor()
    cases = [(SubtaskText("Go to", "fridge", "", "NoMaD"), make_kitchen(), ("fridge_0", "")),
             (SubtaskText("Pick", "apple", "", "RT-1-X"), make_kitchen(), ("apple_0", "")),
             (SubtaskText("Open", "fridge", "", "octo"), make_kitchen(robot=(0.0, 0.5)), ("fridge_0_door", "")),
             (SubtaskText("Close", "drawer", "", "octo"), make_kitchen(robot=(-0.5, 0.0),
                                                                          drawer_positions=(0.0, 0.4)),
              ("kitchen_drawer_1", "")),
             (SubtaskText("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(held="apple_0"),
              ("apple_0", "brown_table_0"))]
    for request, scene, (target, place) in cases:
        verdict = monitor.verdict(request, scene)
        assert verdict.passed, (request, verdict.detail)
        assert (verdict.target, verdict.place) == (target, place)
        assert verdict.distance >= 0 and verdict.note == ""


def test_a_pass_carries_what_the_executor_needs_from_the_scene(make_kitchen):
    monitor = ErrorMonitor()
    put = monitor.verdict(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(held="apple_0"))
    assert (put.target_canonical, put.place_canonical, put.held, put.held_canonical) == \
        ("013_apple", "frl_apartment_table_01", "apple_0", "013_apple")
    assert (put.canonical_of("apple_0"), put.canonical_of("brown_table_0"), put.canonical_of("bowl_0")) == \
        ("013_apple", "frl_apartment_table_01", None)
    opened = monitor.verdict(SubtaskText("Open", "fridge", "", "octo"), make_kitchen(robot=(0.0, 0.5)))
    assert (opened.target, opened.target_canonical, opened.held, opened.held_canonical) == \
        ("fridge_0_door", "fridge", "", "")
    # A Go to navigates to an object ("object") or to furniture ("place").
    kinds = [monitor.verdict(SubtaskText("Go to", target, "", "NoMaD"), make_kitchen()).target_kind
             for target in ("apple", "sofa")]
    assert kinds == ["object", "place"]
    assert monitor.verdict(SubtaskText("Pick", "sofa", "", "RT-1-X"), make_kitchen()).target_canonical == ""


def test_failed_verdicts_carry_the_feedback_and_quote_a_disagreeing_inventory(make_kitchen):
    monitor = ErrorMonitor()
    far = monitor.verdict(SubtaskText("Pick", "sofa", "", "RT-1-X"), make_kitchen())
    assert (far.error_type, far.feedback, far.target) == ("D1", "Unable to pick, the target is far away", "")
    assert far.distance == pytest.approx(6.0)
    empty = monitor.verdict(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(), ["apple"])
    assert empty.error_type == "L2"
    assert empty.detail == "the gripper is empty; the planner's inventory is ['apple'] but the gripper is empty"
    unknown = monitor.verdict(SubtaskText("Pick", "spaceship", "", "RT-1-X"), make_kitchen(), [])
    assert unknown.error_type == "F2" and unknown.distance == -1.0


def test_a_put_that_passes_on_the_inventory_with_an_empty_gripper_has_nothing_to_put(make_kitchen):
    from homiebot_executor.checks import CheckConfig

    monitor = ErrorMonitor(CheckConfig(hand_source="inventory"))
    verdict = monitor.verdict(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(), ["apple"])
    assert (verdict.error_type, verdict.feedback) == ("E2", "Unable to put, and the object is missing")
    assert verdict.detail == "the planner's inventory is ['apple'] but the gripper is empty"
    held = monitor.verdict(SubtaskText("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(held="apple_0"),
                           ["apple"])
    assert held.passed and (held.target, held.place) == ("apple_0", "brown_table_0")


def test_error_reports_validate_and_name_their_type():
    request = SubtaskText("Go to", "sofa", "", "NoMaD")
    assert ErrorReport(request, "drop", source="watch").error_type == "drop"
    fault = ErrorReport(request, "INTERNAL_ERROR", detail="scene down", source="execution")
    assert (fault.error_type, fault.category, fault.subtask) == ("", "", "[Go to, sofa]")
    assert ErrorReport(SubtaskText(""), "timeout", source="watch").subtask == ""
    with pytest.raises(ValueError, match="ErrorReport.source"):
        ErrorReport(request, "E1", source="planner")
    with pytest.raises(ValueError, match="ErrorReport.code"):
        ErrorReport(request, "E9")
