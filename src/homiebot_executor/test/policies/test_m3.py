"""The M3 skills on a fake robot that implements only emmoe_core.robot's interface (no simulator package at all)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pytest
from emmoe_core.robot import fetch
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import FurnitureLayout, SceneLayout, SupportRegion
from emmoe_core.robot.state import (
    BackendError,
    ContainerState,
    InstanceState,
    Observation,
    Pose,
    RobotState,
    UnknownNameError,
)

from homiebot_executor.policies.m3 import PrivilegedSkills
from homiebot_executor.skills import SkillGoal, SkillStatus

TABLE = FurnitureLayout("brown_table_0", "table", 3.0, 3.0, 0.0, (1.4, 0.85, 0.76))


def _body(name: str, joint: str, inner: str = "") -> str:
    return (f'<body name="fetch/{name}" pos="0 0 0.1"><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>'
            f'{joint}{inner}</body>')


def fake_description() -> str:
    """A Fetch-shaped kinematic chain with the joint and site names of emmoe_core.robot.fetch."""
    inner = '<site name="fetch/grip"/>' + "".join(
        _body(finger, f'<joint name="fetch/{finger}" type="slide" axis="0 1 0" range="0 0.05" limited="true"/>')
        for finger in fetch.FINGER_JOINTS)
    for joint in reversed(fetch.ARM_JOINTS):
        inner = _body(joint, f'<joint name="fetch/{joint}" type="hinge" axis="0 1 0"/>', inner)
    head = _body("head", "".join(f'<joint name="fetch/{joint}" type="hinge" axis="{axis}"/>'
                                 for joint, axis in zip(fetch.HEAD_JOINTS, ("0 0 1", "0 1 0"))))
    torso = _body("torso", f'<joint name="fetch/{fetch.TORSO_JOINT}" type="slide" axis="0 0 1" range="0 0.4" '
                           f'limited="true"/>', head + inner)
    base = _body("base", "".join(f'<joint name="fetch/{joint}" type="{"hinge" if joint == "base_yaw" else "slide"}" '
                                 f'axis="{axis}"/>'
                                 for joint, axis in zip(fetch.BASE_JOINTS, ("1 0 0", "0 1 0", "0 0 1"))), torso)
    return f'<mujoco model="fake_fetch"><compiler angle="radian"/><worldbody>{base}</worldbody></mujoco>'


class FakeRobot:
    """A kinematic base (velocities integrated exactly), joints that reach their targets at once, and a 6 m x 6 m
    room with one table, behind the Robot and PrivilegedScene interfaces."""

    def __init__(self, layout: SceneLayout | None = SceneLayout((TABLE,))) -> None:
        self.x, self.y, self.yaw = 1.0, 1.0, 0.0
        self.command = (0.0, 0.0)
        self.joints = {name: 0.0 for name in (fetch.TORSO_JOINT, *fetch.HEAD_JOINTS, *fetch.ARM_JOINTS,
                                              *fetch.FINGER_JOINTS)}
        self.arm_targets: Sequence[float] = (0.0,) * 7
        self.layout = layout
        self.time = 0.0

    # ---- Robot ---------------------------------------------------------------------------------------------
    def step(self, seconds: float) -> None:
        forward, turn = self.command
        self.x += forward * math.cos(self.yaw) * seconds
        self.y += forward * math.sin(self.yaw) * seconds
        self.yaw = math.atan2(math.sin(self.yaw + turn * seconds), math.cos(self.yaw + turn * seconds))
        self.joints.update(zip(fetch.ARM_JOINTS, self.arm_targets))
        self.time += seconds

    def robot_state(self) -> RobotState:
        names = tuple(self.joints)
        return RobotState(Pose.from_yaw(self.x, self.y, 0.0, self.yaw), self.command, names,
                          tuple(self.joints.values()), (0.0,) * len(names), Pose((self.x, self.y, 1.0)), None,
                          self.time)

    def robot_description(self) -> str:
        return fake_description()

    def set_base_velocity(self, forward: float, turn: float) -> None:
        self.command = (forward, turn)

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        self.arm_targets = tuple(float(value) for value in positions)

    def set_torso_target(self, height: float) -> None:
        self.joints[fetch.TORSO_JOINT] = height

    def open_gripper(self) -> str | None:
        return None

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        return None

    def held_object(self) -> str | None:
        return None

    def contact_force(self) -> float:
        return 0.0

    def observe(self, views: Sequence[str] = (), *, depth: bool = False, segmentation: bool = False) -> Observation:
        return Observation(self.time, {})

    # ---- PrivilegedScene -----------------------------------------------------------------------------------
    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        table = InstanceState("brown_table_0", "frl_apartment_table_01", "furniture", Pose((3.0, 3.0, 0.38)),
                              TABLE.size, distance=math.dist((self.x, self.y), (3.0, 3.0)))
        for name in names or ():
            if name != table.name:
                raise UnknownNameError(name)
        return [table]

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        for name in names or ():
            raise UnknownNameError(name)
        return []

    def set_container_target(self, name: str, position: float) -> None:
        raise UnknownNameError(name)

    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        cells = int(round(6.0 / resolution))
        occupied = np.zeros((cells, cells), dtype=bool)
        occupied[[0, -1], :] = occupied[:, [0, -1]] = True
        x0, x1 = (int((TABLE.x + sign * TABLE.size[0] / 2) / resolution) for sign in (-1, 1))
        y0, y1 = (int((TABLE.y + sign * TABLE.size[1] / 2) / resolution) for sign in (-1, 1))
        occupied[y0:y1 + 1, x0:x1 + 1] = True
        return OccupancyGrid((0.0, 0.0), resolution, occupied)

    def scene_layout(self) -> SceneLayout:
        if self.layout is None:
            raise BackendError("this robot knows no scene layout")
        return self.layout

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        return False

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        return True


def test_navigation_reaches_the_table_on_any_backend_of_the_interface():
    robot = FakeRobot()
    outcome = PrivilegedSkills(robot).run(SkillGoal("navigate", "brown_table_0"))
    assert outcome.status is SkillStatus.SUCCEEDED, outcome.message
    # Beside the table footprint (1.4 m x 0.85 m at (3, 3)), within arm's reach of it.
    gap = math.hypot(max(abs(robot.x - 3.0) - 0.7, 0.0), max(abs(robot.y - 3.0) - 0.425, 0.0))
    assert gap < fetch.ARM_REACH
    assert outcome.held_object == "" and outcome.sim_steps > 0
    assert robot.joints[fetch.ARM_JOINTS[3]] == pytest.approx(fetch.TUCKED_ARM[3])  # the arm reset before moving


def test_skill_results_come_from_the_interface_only():
    assert PrivilegedSkills(FakeRobot()).run(SkillGoal("pick", "brown_table_0")).status is SkillStatus.UNKNOWN_TARGET
    assert PrivilegedSkills(FakeRobot()).run(SkillGoal("navigate", "sofa_0")).status is SkillStatus.UNKNOWN_TARGET
    failed = PrivilegedSkills(FakeRobot(layout=None)).run(SkillGoal("navigate", "brown_table_0"))
    assert failed.status is SkillStatus.INTERNAL_ERROR and "no scene layout" in failed.message
    region = SupportRegion("brown_table_0", "top", "brown_table_0", (3.0, 3.0, 0.76), (0.7, 0.42), 0.0)
    empty = PrivilegedSkills(FakeRobot(SceneLayout((TABLE,), (region,)))).run(SkillGoal("put", "apple_0",
                                                                                       "brown_table_0"))
    assert (empty.status, empty.message) == (SkillStatus.PLACE_FAILED, "the hand is empty")
