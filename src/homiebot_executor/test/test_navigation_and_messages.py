"""Grid planning, the base controller, name resolution details, and the QueryScene conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from habitat_bridge.occupancy import OccupancyGrid

from homiebot_executor import messages
from homiebot_executor.checks import SubtaskRequest, check_subtask
from homiebot_executor.naming import NameResolver
from homiebot_executor.policies.navigation import BaseController, GridPlanner
from homiebot_executor.scene import ObjectInfo, SceneSnapshot
from homiebot_executor.skills import SkillOutcome, SkillStatus
from homiebot_executor.static_scene import demo_kitchen, snapshot_to_query


def room_with_wall() -> OccupancyGrid:
    """4 m x 4 m at 5 cm; a wall across the middle (y = 2 m) with a gap at x > 3.2 m."""
    occupied = np.zeros((80, 80), dtype=bool)
    occupied[[0, -1], :] = True
    occupied[:, [0, -1]] = True
    occupied[39:41, :64] = True
    return OccupancyGrid((0.0, 0.0), 0.05, occupied)


def test_planner_goes_round_the_wall():
    planner = GridPlanner(room_with_wall(), robot_radius=0.3)
    field = planner.geodesic_from(1.0, 1.0)
    goal = planner.grid.cell_of(1.0, 3.0)
    path = planner.path(field, goal, (1.0, 1.0))
    assert path[0] == (1.0, 1.0) and math.dist(path[-1], (1.0, 3.0)) < 0.05
    assert any(x > 3.2 for x, _ in path), "the path must pass through the gap"
    assert all(planner.line_free(a, b) or math.dist(a, b) < 0.3 for a, b in zip(path, path[1:]))
    # Geodesic distance is the detour, not the straight 2 m.
    assert field.distances[goal[1], goal[0]] > 5.0


def test_unreachable_cells_have_no_path():
    occupied = np.zeros((40, 40), dtype=bool)
    occupied[:, 19:21] = True  # a full wall
    planner = GridPlanner(OccupancyGrid((0.0, 0.0), 0.05, occupied), robot_radius=0.1)
    field = planner.geodesic_from(0.3, 1.0)
    assert planner.path(field, planner.grid.cell_of(1.7, 1.0), (0.3, 1.0)) == []


def simulate(controller: BaseController, pose: tuple[float, float, float], steps: int = 400,
             dt: float = 0.1) -> tuple[float, float, float]:
    x, y, yaw = pose
    for _ in range(steps):
        command = controller.command(x, y, yaw)
        if command is None:
            break
        forward, turn = command
        x, y, yaw = x + forward * math.cos(yaw) * dt, y + forward * math.sin(yaw) * dt, yaw + turn * dt
    return x, y, yaw


def test_controller_reaches_the_goal_pose():
    controller = BaseController([(0.0, 0.0), (2.0, 0.0), (2.0, 2.0)], final_yaw=math.pi)
    x, y, yaw = simulate(controller, (0.0, 0.0, -1.0))
    assert math.dist((x, y), (2.0, 2.0)) < 0.08
    assert abs(math.atan2(math.sin(yaw - math.pi), math.cos(yaw - math.pi))) < 0.1


def test_controller_backs_up_to_a_close_goal_behind():
    controller = BaseController([(0.0, 0.0), (-0.5, 0.0)], final_yaw=0.0)
    forward, _ = controller.command(0.0, 0.0, 0.0)
    assert forward < 0
    x, y, yaw = simulate(controller, (0.0, 0.0, 0.0))
    assert math.dist((x, y), (-0.5, 0.0)) < 0.08 and abs(yaw) < 0.1


def test_rooms_come_after_furniture_with_the_same_name():
    snapshot = SceneSnapshot((0.0, 0.0), objects=(
        ObjectInfo("kitchen_0", "kitchen_counter", "room", (0.1, 0.0, 0.0), distance=0.1),
        ObjectInfo("kitchen_counter_0", "kitchen_counter", "container", (3.0, 0.0, 0.4), distance=3.0)))
    assert NameResolver().resolve("kitchen", snapshot, "go to").instance.name == "kitchen_counter_0"


def test_query_scene_round_trip_keeps_part_owners():
    from emmoe_interfaces.srv import QueryScene

    scene = demo_kitchen(held="apple_0")
    response = snapshot_to_query(scene, QueryScene.Response())
    assert "fridge_0_door" in [state.name for state in response.objects]
    back = messages.snapshot_from_query(response)
    assert back.held_object == "apple_0" and back.held_canonical() == "013_apple"
    assert [item.name for item in back.objects] == [item.name for item in scene.objects]
    door = back.container("fridge_0_door")
    assert door is not None and door.owner == "fridge_0" and not door.is_open
    assert response.containers[0].furniture == "fridge_0"
    outcome = check_subtask(SubtaskRequest("Put", "apple", "refrigerator", "RT-1-X"), back)
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

    request = messages.check_request(SubtaskRequest("Put", "apple", "brown_table", "RT-1-X"), ("apple",))
    assert (request.subtask.place, list(request.inventory)) == ("brown_table", ["apple"])
    passed = messages.check_response(CheckVerdict(target="apple_0", place="brown_table_0", distance=1.1),
                                     CheckSubtask.Response())
    assert (passed.passed, passed.error_code, passed.feedback, passed.resolved_place) == (True, 0, "None",
                                                                                         "brown_table_0")
    assert messages.verdict_from_check(passed) == CheckVerdict(target="apple_0", place="brown_table_0", distance=1.1)
    failed = messages.check_response(CheckVerdict("L3", "Unable to put, the fridge is closed, you should open it "
                                                        "first", "door shut", distance=1.4), CheckSubtask.Response())
    assert (failed.passed, failed.error_code, failed.error_msg) == (False, ExecuteSubtask.Result.L3, "door shut")
    assert messages.verdict_from_check(failed).feedback.startswith("Unable to put, the fridge is closed")
    fault = messages.check_fault("scene down", CheckSubtask.Response())
    assert (fault.passed, fault.error_code, fault.error_type) == (False, ExecuteSubtask.Result.INTERNAL_ERROR, "")
    error = messages.execution_error(ErrorReport(SubtaskRequest("Pick", "apple", "", "RT-1-X"), "E1", "Unable to pick, "
                                                 "the subtask is too difficult to perform", "3 attempts failed",
                                                 "execution", 3), Time(sec=7))
    assert (error.error_code, error.error_type, error.source, error.attempt) == (ExecuteSubtask.Result.E1, "E1",
                                                                                 "execution", 3)
    assert (error.subtask.action, error.subtask.model, error.header.stamp.sec) == ("Pick", "RT-1-X", 7)
    drop = messages.execution_error(ErrorReport(SubtaskRequest(""), "drop", "", "apple_0 left", "watch", 2),
                                    error.header.stamp)
    assert (drop.error_code, drop.error_type, drop.feedback, drop.attempt) == (0, "drop", "", 2)


@pytest.mark.parametrize("status", [SkillStatus.SUCCEEDED, SkillStatus.UNREACHABLE, SkillStatus.GRASP_FAILED,
                                    SkillStatus.OBJECT_DROPPED, SkillStatus.PLACE_FAILED,
                                    SkillStatus.JOINT_NOT_MOVED, SkillStatus.TIMEOUT, SkillStatus.INTERNAL_ERROR])
def test_manipulate_results_keep_the_status_and_hand(status):
    outcome = SkillOutcome(status, "" if status is SkillStatus.SUCCEEDED else "why", "apple_0", 40)
    back = messages.outcome_from_manipulate(messages.manipulate_result(outcome))
    assert back.status is status and back.held_object == (None if status.is_fault else "apple_0")


def test_injected_failures_travel_as_time_outs():
    result = messages.manipulate_result(SkillOutcome(SkillStatus.INJECTED_FAILURE, "failure model: pick", ""))
    assert result.error_code == result.TIMEOUT and result.error_msg == "failure model: pick"


def test_stack_options():
    from homiebot_executor.sim_stack import parse_failures, parse_remotes

    assert parse_failures("navigate=0.3, pick=0.5") == {"navigate": 0.3, "pick": 0.5}
    assert set(parse_failures("table4")) == {"navigate", "pick", "put", "open", "close"}
    assert parse_remotes(["rt1x=http://127.0.0.1:8000"]) == {"rt1x": "http://127.0.0.1:8000"}
    with pytest.raises(ValueError, match="--fail"):
        parse_failures("pick")
    with pytest.raises(ValueError, match="--remote"):
        parse_remotes(["m3=http://127.0.0.1:1"])


def test_go_to_and_open_a_drawer_prefer_the_drawer_holding_something(make_kitchen):
    """Two closed drawers, kitchen_drawer_0 nearer; a bowl lies inside kitchen_drawer_1: that one is meant."""
    from dataclasses import replace

    scene = make_kitchen(robot=(-1.5, -1.0))
    bowl_inside = [replace(item, on="kitchen_drawer_1", inside=True) if item.name == "bowl_0" else item
                   for item in scene.objects]
    with_bowl = replace(scene, objects=tuple(bowl_inside))
    resolver = NameResolver()
    assert resolver.resolve("drawer", scene, "open").name == "kitchen_drawer_0"
    for verb in ("go to", "open"):
        assert resolver.resolve("drawer", with_bowl, verb).name == "kitchen_drawer_1"
    assert resolver.resolve("drawer", with_bowl, "close").name == "kitchen_drawer_0"
