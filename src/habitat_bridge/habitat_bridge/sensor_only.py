"""The sensor-only view of a backend: what skills get in the no_background setting.

`SensorOnlyRobot` passes through the robot interface (emmoe_core.robot.interface.Robot: stepping, odometry and joint
states, the cameras, base, arm, torso, head and gripper commands, the contact force) and refuses everything else:
object and container states, the occupancy grid, the scene layout, arm collision checks against the furniture,
container actuation, teleports and name resolution raise PrivilegedAccessError, which ends the skill attempt with the
PRIVILEGED_REFUSED error code. A leak is impossible rather than unlikely: the skills never hold the backend itself.
Every refused query is counted (`refused`), and so is every allowed call (`calls`), so a test can prove that a whole
run made none.

The gripper holds only what lies between its fingers: `close_gripper` never reaches farther than `grasp_reach`.
The camera's instance segmentation stays available for the detector stand-in (`--perception segmentation`, see
emmoe_core.perception.detector); every observation that asks for it is counted (`calls["observe_segmentation"]`),
so a test can prove that a run with the learned detector read none.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from emmoe_core.robot.state import VIEWS, Observation, PrivilegedAccessError, RobotState

from habitat_bridge.backends.base import SimBackend

# The privileged methods of SimBackend (everything a real robot cannot answer).
PRIVILEGED: tuple[str, ...] = ("object_states", "container_states", "set_container_target", "set_container_position",
                               "occupancy_grid", "scene_layout", "arm_collides", "arm_path_free", "teleport_base",
                               "resolve", "reset")


class SensorOnlyRobot:
    """A backend seen through the robot's sensors and actuators only (see the module docstring)."""

    def __init__(self, backend: SimBackend, grasp_reach: float = 0.05) -> None:
        """Wrap `backend`; the gripper holds objects within `grasp_reach` metres of its grasp point."""
        self._backend = backend
        self.grasp_reach = grasp_reach
        self.refused: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    def _count(self, name: str) -> None:
        with self._count_lock:
            self.calls[name] += 1

    def __getattr__(self, name: str) -> Any:
        if name in PRIVILEGED:
            with self._count_lock:
                self.refused[name] += 1
            raise PrivilegedAccessError(name)
        raise AttributeError(f"the sensor-only robot has no {name!r} (only the robot interface)")

    # ---- the robot interface -------------------------------------------------------------------------------------
    def step(self, seconds: float) -> None:
        self._count("step")
        self._backend.step(seconds)

    def robot_state(self) -> RobotState:
        self._count("robot_state")
        return self._backend.robot_state()

    def robot_description(self) -> str:
        self._count("robot_description")
        return self._backend.robot_description()

    def set_base_velocity(self, forward: float, turn: float) -> None:
        self._count("set_base_velocity")
        self._backend.set_base_velocity(forward, turn)

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        self._count("set_arm_targets")
        self._backend.set_arm_targets(positions)

    def set_torso_target(self, height: float) -> None:
        self._count("set_torso_target")
        self._backend.set_torso_target(height)

    def set_head_target(self, pan: float, tilt: float) -> None:
        self._count("set_head_target")
        self._backend.set_head_target(pan, tilt)

    def open_gripper(self) -> str | None:
        self._count("open_gripper")
        return self._backend.open_gripper()

    def close_gripper(self, max_distance: float = 0.05) -> str | None:
        self._count("close_gripper")
        return self._backend.close_gripper(min(max_distance, self.grasp_reach))

    def held_object(self) -> str | None:
        self._count("held_object")
        return self._backend.held_object()

    def contact_force(self) -> float:
        self._count("contact_force")
        return self._backend.contact_force()

    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        self._count("observe")
        if segmentation:
            self._count("observe_segmentation")
        return self._backend.observe(views, depth=depth, segmentation=segmentation)
