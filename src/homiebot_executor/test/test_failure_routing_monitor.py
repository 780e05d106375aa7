"""The seeded failure model, model routing and the execution watcher."""

from __future__ import annotations

import pytest

from homiebot_executor.checks import SubtaskRequest
from homiebot_executor.failure_model import (
    TABLE4_SUCCESS_RATES,
    FailureConfig,
    FailureModel,
    from_subtask_success_rates,
)
from homiebot_executor.monitor import ErrorMonitor, ErrorReport, ExecutionWatcher
from homiebot_executor.routing import RoutingConfig, route


def draws(model: FailureModel, skill: str, count: int) -> list[bool]:
    return [model.draw(skill) is not None for _ in range(count)]


def test_same_seed_same_failures_other_seed_differs():
    config = FailureConfig({"pick": 0.5}, seed=7)
    first, second = draws(FailureModel(config), "pick", 200), draws(FailureModel(config), "pick", 200)
    assert first == second
    other = draws(FailureModel(FailureConfig({"pick": 0.5}, seed=8)), "pick", 200)
    assert other != first


def test_reseed_restarts_the_stream():
    model = FailureModel(FailureConfig({"open": 0.3}, seed=1))
    first = draws(model, "open", 50)
    model.reseed(1)
    assert draws(model, "open", 50) == first


def test_failure_rate_follows_the_probability():
    model = FailureModel(FailureConfig({"navigate": 0.25}, seed=3))
    rate = sum(draws(model, "navigate", 4000)) / 4000
    assert 0.22 < rate < 0.28
    assert not any(draws(model, "pick", 100))


def test_put_drops_follow_their_probability():
    model = FailureModel(FailureConfig({"put": 1.0}, put_drop_probability=0.5, seed=0))
    drops = [model.draw("put").drop_object for _ in range(1000)]
    assert 0.45 < sum(drops) / 1000 < 0.55
    assert FailureModel(FailureConfig({"pick": 1.0}, put_drop_probability=1.0)).draw("pick").drop_object is False


def test_subtask_rates_to_attempt_probabilities():
    probabilities = from_subtask_success_rates(TABLE4_SUCCESS_RATES)
    for skill, rate in TABLE4_SUCCESS_RATES.items():
        assert 1 - probabilities[skill] ** 3 == pytest.approx(rate)


def test_failure_config_validation():
    with pytest.raises(ValueError, match="unknown skill 'fly'"):
        FailureConfig({"fly": 0.1})
    with pytest.raises(ValueError, match=r"probabilities\['pick'\]"):
        FailureConfig({"pick": 1.5})


def test_background_setting_routes_everything_to_m3():
    for model, skill in (("NoMaD", "navigate"), ("RT-1-X", "pick"), ("octo", "close"), ("PixNav", "put")):
        assert route(model, skill).server == "m3"
    assert route("RT-1-X", "pick").action_name == "/skills/m3/manipulate"
    assert route("NoMaD", "navigate").action_name == "/skills/m3/navigate"


def test_model_setting_routes_by_model_with_fallback():
    config = RoutingConfig(setting="model")
    assert route("NoMaD", "navigate", config=config).action_name == "/skills/nomad/navigate"
    assert route("pixnav", "navigate", config=config).server == "pixnav"
    assert route("RT-1-X", "put", config=config).action_name == "/skills/rt1x/manipulate"
    assert route("octo", "open", config=config).server == "octo"
    assert route("NoMaD", "pick", config=config).server == "rt1x"
    assert route("octo", "navigate", "object", config=config).server == "pixnav"
    strict = route("NoMaD", "pick", config=RoutingConfig(setting="model", mismatch="strict"))
    assert strict.server == "nomad" and not strict.can_run


def test_routing_rejects_unknown_models():
    with pytest.raises(ValueError, match="not in the model list"):
        route("GPT-4o", "pick")
    with pytest.raises(ValueError, match="RoutingConfig.setting"):
        RoutingConfig(setting="magic")


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
    request = SubtaskRequest("Put", "apple", "fridge", "RT-1-X")
    outcome = monitor.check(request, make_kitchen(held="apple_0"))
    report = monitor.report(request, outcome.error_type, outcome.feedback, outcome.detail)
    assert (report.error_type, report.subtask, report.category) == ("L3", "[Put, apple, fridge]", "logical")
    assert report.feedback == "Unable to put, the fridge is closed, you should open it first"


def test_watcher_reports_simultaneous_incidents_together():
    watcher = ExecutionWatcher(held_at_start="apple_0", contact_limit=5.0)
    assert [incident.kind for incident in watcher.observe(1, "", 8.0)] == ["drop", "contact"]


def test_verdicts_name_the_instances_the_skill_acts_on(make_kitchen):
    monitor = ErrorMonitor()
    cases = [(SubtaskRequest("Go to", "fridge", "", "NoMaD"), make_kitchen(), ("fridge_0", "")),
             (SubtaskRequest("Pick", "apple", "", "RT-1-X"), make_kitchen(), ("apple_0", "")),
             (SubtaskRequest("Open", "fridge", "", "octo"), make_kitchen(robot=(0.0, 0.5)), ("fridge_0_door", "")),
             (SubtaskRequest("Close", "drawer", "", "octo"), make_kitchen(robot=(-0.5, 0.0),
                                                                          drawer_positions=(0.0, 0.4)),
              ("kitchen_drawer_1", "")),
             (SubtaskRequest("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(held="apple_0"),
              ("apple_0", "brown_table_0"))]
    for request, scene, (target, place) in cases:
        verdict = monitor.verdict(request, scene)
        assert verdict.passed, (request, verdict.detail)
        assert (verdict.target, verdict.place) == (target, place)
        assert verdict.distance >= 0 and verdict.note == ""


def test_failed_verdicts_carry_the_feedback_and_quote_a_disagreeing_inventory(make_kitchen):
    monitor = ErrorMonitor()
    far = monitor.verdict(SubtaskRequest("Pick", "sofa", "", "RT-1-X"), make_kitchen())
    assert (far.error_type, far.feedback, far.target) == ("D1", "Unable to pick, the target is far away", "")
    assert far.distance == pytest.approx(6.0)
    empty = monitor.verdict(SubtaskRequest("Put", "apple", "brown_table", "RT-1-X"), make_kitchen(), ["apple"])
    assert empty.error_type == "L2"
    assert empty.detail == "the gripper is empty; the planner's inventory is ['apple'] but the gripper is empty"
    unknown = monitor.verdict(SubtaskRequest("Pick", "spaceship", "", "RT-1-X"), make_kitchen(), [])
    assert unknown.error_type == "F2" and unknown.distance == -1.0


def test_error_reports_validate_and_name_their_type():
    request = SubtaskRequest("Go to", "sofa", "", "NoMaD")
    assert ErrorReport(request, "drop", source="watch").error_type == "drop"
    fault = ErrorReport(request, "INTERNAL_ERROR", detail="scene down", source="execution")
    assert (fault.error_type, fault.category, fault.subtask) == ("", "", "[Go to, sofa]")
    assert ErrorReport(SubtaskRequest(""), "timeout", source="watch").subtask == ""
    with pytest.raises(ValueError, match="ErrorReport.source"):
        ErrorReport(request, "E1", source="planner")
    with pytest.raises(ValueError, match="ErrorReport.code"):
        ErrorReport(request, "E9")
