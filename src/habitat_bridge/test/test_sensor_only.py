"""The sensor-only view of a backend (habitat_bridge.sensor_only): the robot interface passes through and is counted,
every privileged query raises PrivilegedAccessError and is counted, and the gripper reaches only `grasp_reach`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emmoe_core.robot import fetch
from emmoe_core.robot.interface import Robot
from emmoe_core.robot.state import PrivilegedAccessError, RobotState

from habitat_bridge.sensor_only import PRIVILEGED, SensorOnlyRobot


@pytest.fixture(scope="module")
def sim() -> Iterator[object]:
    """A real MuJoCo backend on the generated apartment of seed 0."""
    from habitat_bridge.backends import create_backend

    backend = create_backend("mujoco")
    backend.reset(None, seed=0)
    yield backend
    backend.close()


def test_robot_interface_calls_pass_through_and_are_counted(sim) -> None:
    robot = SensorOnlyRobot(sim)
    missing = [name for name in vars(Robot) if callable(vars(Robot)[name]) and not name.startswith("_")
               and not callable(getattr(type(robot), name, None))]
    assert not missing, f"SensorOnlyRobot lacks Robot.{', '.join(missing)}"
    start = robot.robot_state()
    assert isinstance(start, RobotState) and start.time == sim.robot_state().time
    assert robot.robot_description() == sim.robot_description()
    robot.set_base_velocity(0.2, 0.0)
    robot.set_arm_targets(fetch.TUCKED_ARM)
    robot.set_torso_target(0.1)
    robot.set_head_target(0.0, 0.3)
    robot.step(0.5)
    assert robot.robot_state().time == pytest.approx(start.time + 0.5, abs=0.05)
    robot.set_base_velocity(0.0, 0.0)
    assert robot.open_gripper() is None and robot.held_object() is None
    assert robot.contact_force() >= 0.0
    observation = robot.observe(["front"], depth=True, segmentation=True)
    assert list(observation.rgb) == list(observation.depth) == list(observation.segmentation) == ["front"]
    assert robot.calls == {"robot_state": 2, "robot_description": 1, "set_base_velocity": 2, "set_arm_targets": 1,
                           "set_torso_target": 1, "set_head_target": 1, "step": 1, "open_gripper": 1,
                           "held_object": 1, "contact_force": 1, "observe": 1,
                           "observe_segmentation": 1}  # a segmentation read is counted on its own
    assert not robot.refused


@pytest.mark.parametrize("name", PRIVILEGED)
def test_every_privileged_query_is_refused_and_counted(sim, name: str) -> None:
    robot = SensorOnlyRobot(sim)
    for _ in range(2):
        with pytest.raises(PrivilegedAccessError, match=name) as raised:
            getattr(robot, name)()
        assert raised.value.query == name
    assert robot.refused == {name: 2} and not robot.calls


def test_anything_outside_the_robot_interface_does_not_exist(sim) -> None:
    robot = SensorOnlyRobot(sim)
    with pytest.raises(AttributeError, match="only the robot interface"):
        robot.model  # noqa: B018
    assert not robot.refused


def test_the_gripper_reaches_no_farther_than_grasp_reach(sim, monkeypatch) -> None:
    asked: list[float] = []
    monkeypatch.setattr(sim, "close_gripper", lambda max_distance=0.12: asked.append(max_distance))
    robot = SensorOnlyRobot(sim)
    robot.close_gripper(0.5)
    robot.close_gripper()
    robot.close_gripper(0.02)
    assert asked == [robot.grasp_reach, 0.05, 0.02] and robot.grasp_reach == 0.05
    assert robot.calls == {"close_gripper": 3}
    assert SensorOnlyRobot(sim, grasp_reach=0.03).close_gripper(0.5) is None and asked[-1] == 0.03
