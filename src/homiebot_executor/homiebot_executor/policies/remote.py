"""A skill policy served over HTTP (homiebot-policy/1): the client side inside the skill servers.

`RemotePolicy.run` resets the arm (as every attempt does), then loops: render the head camera, read the robot
state, send a PolicyRequest, execute the returned action chunk on the backend (base velocities and waypoints, end-
effector deltas through the mink IK, gripper commands), until the server says "done", the step budget runs out, or
the goal is cancelled. Success is then judged by the simulator with the release's rules (navigation: the base within
0.65 m of the target's footprint and no contact above 5 N; pick: the target is held; put: the object rests within
0.5 m of the receptacle; open/close: the joint past its threshold). A server that cannot be reached or breaks the
protocol gives POLICY_UNAVAILABLE, never an exception.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.interface import SimulatedRobot
from emmoe_core.robot.state import BackendError, UnknownNameError
from emmoe_core.validation import require_positive

from homiebot_executor.monitor import ExecutionWatcher
from homiebot_executor.policies.arm_ik import ArmIk
from homiebot_executor.policies.navigation import BaseController
from homiebot_executor.remote.client import PolicyClient, RemotePolicyError
from homiebot_executor.remote.protocol import Goal, PolicyAction, PolicyRequest, RobotStateMessage, WireImage
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus

Progress = Callable[[str, int, float], None]


class _Budget(Exception):
    """The step budget ran out."""


class RemotePolicy:
    """One learned model behind a policy server, driving the backend."""

    def __init__(self, backend: SimulatedRobot, client: PolicyClient, model: str, control_period: float = 0.1,
                 lock: AbstractContextManager[object] | None = None, camera: str = "front") -> None:
        """Drive `backend` (the robot, and the privileged scene to judge success) with the answers of `client` for
        `model`; `control_period` is one budget step (s)."""
        require_positive("control_period", control_period)
        self.backend = backend
        self.client = client
        self.model = model
        self.control_period = control_period
        self.lock = lock if lock is not None else threading.RLock()
        self.camera = camera
        self.ik = ArmIk(backend.robot_description())

    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool] = lambda: False,
            progress: Progress = lambda phase, steps, distance: None) -> SkillOutcome:
        """One attempt of `goal` through the remote policy."""
        session = uuid.uuid4().hex
        try:
            with self.lock:
                self.backend.set_arm_targets(fetch.TUCKED_ARM)
                self.backend.step(1.0)
                watcher = ExecutionWatcher(held_at_start=self.backend.held_object() or "",
                                           step_budget=goal.step_budget)
            steps = 0
            request_number = 0
            while True:
                if should_cancel():
                    return SkillOutcome(SkillStatus.CANCELED, "cancel requested", self._hand(), steps)
                response = self.client.act(self._request(goal, session, request_number))
                request_number += 1
                if response.status == "error":
                    return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, f"policy server: {response.message}",
                                        self._hand(), steps)
                try:
                    for action in response.actions:
                        steps = self._execute(action, goal, watcher, steps, should_cancel)
                        progress("policy", steps, float("nan"))
                        if action.type == "stop":
                            break
                except _Budget:
                    break
                if response.status == "done" or any(action.type == "stop" for action in response.actions):
                    break
            if goal.skill == "put" and not self._hand():
                watcher.release_allowed = True
            status, message = self._judge(goal, watcher)
            return SkillOutcome(status, message, self._hand(), steps)
        except RemotePolicyError as error:
            return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, str(error), self._hand_or_none())
        except UnknownNameError as error:
            return SkillOutcome(SkillStatus.UNKNOWN_TARGET, str(error), self._hand_or_none())
        except BackendError as error:
            return SkillOutcome(SkillStatus.INTERNAL_ERROR, f"simulator: {error}", self._hand_or_none())
        finally:
            try:
                with self.lock:
                    self.backend.set_base_velocity(0.0, 0.0)
            except BackendError:
                pass

    # ---- requests ----------------------------------------------------------------------------------------------
    def _hand(self) -> str:
        with self.lock:
            return self.backend.held_object() or ""

    def _hand_or_none(self) -> str | None:
        try:
            return self._hand()
        except BackendError:
            return None

    def _request(self, goal: SkillGoal, session: str, number: int) -> PolicyRequest:
        with self.lock:
            observation = self.backend.observe([self.camera])
            state = self.backend.robot_state()
        joints = dict(zip(state.joint_names, state.joint_positions))
        x, y, yaw = state.base.position[0], state.base.position[1], state.base.yaw
        c, s = math.cos(yaw), math.sin(yaw)
        gx, gy, gz = state.gripper.position
        ee = ((gx - x) * c + (gy - y) * s, -(gx - x) * s + (gy - y) * c, gz)
        half = (math.cos(-yaw / 2), 0.0, 0.0, math.sin(-yaw / 2))
        orientation = _quaternion_product(half, state.gripper.orientation)
        fingers = [joints.get(name, 0.0) for name in fetch.FINGER_JOINTS]
        robot = RobotStateMessage(
            base_pose=(x, y, yaw), base_velocity=tuple(state.base_velocity),  # type: ignore[arg-type]
            arm_joints=tuple(joints[name] for name in fetch.ARM_JOINTS),
            torso_height=joints.get(fetch.TORSO_JOINT, 0.0), gripper_opening=float(np.mean(fingers)),
            ee_position=ee, ee_orientation=orientation, holding=state.held_object is not None)
        kind = goal.target_kind if goal.skill == "navigate" else ""
        return PolicyRequest(self.model, goal.skill, session, number, goal.instruction or goal.target,
                             Goal(goal.target, kind), {"head": WireImage.from_array(observation.rgb[self.camera])},
                             robot)

    # ---- actions -----------------------------------------------------------------------------------------------
    def _tick(self, watcher: ExecutionWatcher, steps: int, should_cancel: Callable[[], bool]) -> int:
        if should_cancel():
            raise _Budget
        with self.lock:
            self.backend.step(self.control_period)
            held = self.backend.held_object() or ""
            force = self.backend.contact_force()
        steps += 1
        watcher.observe(steps, held, force)
        if watcher.saw("timeout"):
            raise _Budget
        return steps

    def _execute(self, action: PolicyAction, goal: SkillGoal, watcher: ExecutionWatcher, steps: int,
                 should_cancel: Callable[[], bool]) -> int:
        if action.type == "base_velocity":
            with self.lock:
                self.backend.set_base_velocity(action.linear, action.angular)
            for _ in range(max(1, round(action.duration / self.control_period))):
                steps = self._tick(watcher, steps, should_cancel)
            with self.lock:
                self.backend.set_base_velocity(0.0, 0.0)
        elif action.type == "base_waypoint":
            with self.lock:
                base = self.backend.robot_state().base
            x, y, yaw = base.position[0], base.position[1], base.yaw
            c, s = math.cos(yaw), math.sin(yaw)
            goal_xy = (x + c * action.x - s * action.y, y + s * action.x + c * action.y)
            final = None if action.yaw is None else yaw + action.yaw
            controller = BaseController([(x, y), goal_xy], final)
            for _ in range(50):
                with self.lock:
                    base = self.backend.robot_state().base
                command = controller.command(base.position[0], base.position[1], base.yaw)
                if command is None:
                    break
                with self.lock:
                    self.backend.set_base_velocity(*command)
                steps = self._tick(watcher, steps, should_cancel)
            with self.lock:
                self.backend.set_base_velocity(0.0, 0.0)
        elif action.type == "ee_delta":
            steps = self._ee_delta(action, watcher, steps, should_cancel)
        elif action.type == "gripper":
            with self.lock:
                if action.gripper is not None and action.gripper < 0.5:
                    self.backend.close_gripper()
                else:
                    if goal.skill == "put":
                        watcher.release_allowed = True
                    self.backend.open_gripper()
            steps = self._tick(watcher, steps, should_cancel)
        return steps

    def _ee_delta(self, action: PolicyAction, watcher: ExecutionWatcher, steps: int,
                  should_cancel: Callable[[], bool]) -> int:
        with self.lock:
            state = self.backend.robot_state()
        joints = dict(zip(state.joint_names, state.joint_positions))
        yaw = state.base.yaw
        c, s = math.cos(yaw), math.sin(yaw)
        dx, dy, dz = action.translation
        target = np.array(state.gripper.position) + np.array([c * dx - s * dy, s * dx + c * dy, dz])
        rotation = _matrix(state.gripper.orientation) @ _rpy_matrix(*action.rotation)
        self.ik.set_robot((state.base.position[0], state.base.position[1], yaw), joints)
        solution = self.ik.solve(target, rotation)
        if solution.converged:
            with self.lock:
                self.backend.set_arm_targets(solution.arm)
                self.backend.set_torso_target(solution.torso)
        if action.gripper is not None:
            with self.lock:
                if action.gripper < 0.5:
                    self.backend.close_gripper()
                else:
                    self.backend.open_gripper()
        return self._tick(watcher, steps, should_cancel)

    # ---- success rules -----------------------------------------------------------------------------------------
    def _judge(self, goal: SkillGoal, watcher: ExecutionWatcher) -> tuple[SkillStatus, str]:
        held = self._hand()
        if goal.skill == "navigate":
            with self.lock:
                target = self.backend.object_states([goal.target])[0]
                base = self.backend.robot_state().base
            reach = max(target.size[0], target.size[1]) / 2 if target.kind != "object" else 0.0
            distance = max(0.0, math.dist(base.position[:2], target.pose.position[:2]) - reach)
            if watcher.saw("contact"):
                return SkillStatus.COLLISION, f"contact force above 5 N (peak {watcher.peak_contact_force:.1f} N)"
            if distance >= 0.65:
                return SkillStatus.TIMEOUT, f"ended {distance:.2f} m from {goal.target}"
            return SkillStatus.SUCCEEDED, ""
        if goal.skill == "pick":
            if held == goal.target:
                return SkillStatus.SUCCEEDED, ""
            return SkillStatus.GRASP_FAILED, f"holding {held or 'nothing'} instead of {goal.target}"
        if goal.skill == "put":
            if held:
                return SkillStatus.PLACE_FAILED, f"{held} is still in the gripper"
            with self.lock:
                obj = self.backend.object_states([goal.target])[0]
                place = self.backend.object_states([goal.place])[0]
            distance = math.dist(obj.pose.position, place.pose.position) - max(place.size) / 2
            if obj.receptacle in (goal.place,) or distance <= 0.5:
                return SkillStatus.SUCCEEDED, ""
            return SkillStatus.PLACE_FAILED, f"{goal.target} rests {distance:.2f} m from {goal.place}"
        with self.lock:
            part = self.backend.container_states([goal.target])[0]
        if goal.skill == "open" and part.is_open or goal.skill == "close" and part.position <= part.lower + 0.05:
            return SkillStatus.SUCCEEDED, ""
        return SkillStatus.JOINT_NOT_MOVED, f"{part.name} at {part.position:.2f}"


def _quaternion_product(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float, float, float]:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def _matrix(quaternion: tuple[float, ...]) -> np.ndarray:
    w, x, y, z = quaternion
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), \
        math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])
