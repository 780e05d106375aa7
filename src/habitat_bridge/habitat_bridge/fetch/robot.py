"""`FetchRobot`: the robot side of the `fetch` backend, driving a real Fetch (or the fake Fetch) through its ROS
interfaces only, with every command passing the safety gate.

- Base: the requested (forward, turn) is sent on /cmd_vel every control period through the SafetyGate (limits,
  ramps, fence, and the laser guard on the clearance /base_scan shows ahead: none, so no forward motion, while the
  scan is stale); the software stop topic latches the gate, sends a zero twist at once and cancels every goal of the
  arm, torso and head controllers (the action protocol's cancel-all request: a joint trajectory controller holds its
  joints where they are when its goal is cancelled, whoever sent the goal).
- Arm, torso, head: one-point FollowJointTrajectory goals, timed by the joint speed limit.
- Gripper: GripperCommand goals; closing reports whether the fingers stalled on something.
- Time: `step(seconds)` waits until the robot's clock (the odometry stamps) has advanced that far.
- Dry-run: every command is computed and counted in `dry_run_log`, none is sent.
- Head camera: the newest colour image, registered depth, camera_info and the detector's instance masks of one
  stamp (`head_camera()`), or the first such frame stamped at or after a given robot time (`frame_after()`); the
  base pose and joint positions at a frame's stamp (`pose_at()`, `joints_at()`, interpolated in the last
  HISTORY_S seconds of odometry and joint states), as a robot's tf places an image where the camera was when it
  was taken, not where it is when the image arrives.
- `wait_until_ready()` refuses to start while odometry, joint states, the base laser or the head camera are stale.

The node is given (the caller spins it); the methods are called from another thread and block on the robot.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from emmoe_core.action_client import ActionClient
from emmoe_core.convert import image_to_array
from emmoe_core.robot import fetch
from emmoe_core.robot.state import BackendError, CameraView
from emmoe_core.ros_helpers import WaitStatus, wait_for_future, wait_until

from habitat_bridge.bridge_core import seconds_of, stamp
from habitat_bridge.fetch.config import JOINT_GROUPS, FetchConfig
from habitat_bridge.fetch.safety import SafetyGate, clearance_ahead

# The service every ROS 2 action server offers under its action's name to cancel goals (all goals: a request with a
# zero goal id and a zero stamp).
CANCEL_SERVICE = "{action}/_action/cancel_goal"
CAMERA_PARTS: tuple[str, ...] = ("rgb", "depth", "info", "instances")
# The parts of a frame matched by their stamp (camera_info is the same for every frame).
FRAME_PARTS: tuple[str, ...] = ("rgb", "depth", "instances")
# Frames kept while their parts arrive, and the robot seconds of odometry and joint states kept to place them.
FRAMES_KEPT = 4
HISTORY_S = 3.0


@dataclass(frozen=True)
class CameraFrame:
    """One head-camera frame.

    Attributes:
        rgb: (H, W, 3) uint8; depth: (H, W) metres registered to it.
        intrinsics: from camera_info (pose left at the origin: the caller places it with the robot model).
        ids: (H, W) int32 index into `names` per pixel, -1 where the detector found nothing.
        names, categories: the detector's things (tracks) and their categories.
        stamp: the colour image's stamp (the robot's clock).
    """

    rgb: np.ndarray
    depth: np.ndarray
    intrinsics: CameraView
    ids: np.ndarray
    names: tuple[str, ...]
    categories: tuple[str, ...]
    stamp: float


class FetchRobot:
    """A Fetch reached through its ROS interfaces (see the module docstring)."""

    def __init__(self, node: Any, config: FetchConfig | None = None) -> None:
        from action_msgs.srv import CancelGoal
        from control_msgs.action import FollowJointTrajectory, GripperCommand
        from emmoe_interfaces.msg import InstanceMasks
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan
        from std_msgs.msg import Empty

        self.config = config or FetchConfig()
        self.gate = SafetyGate(self.config.safety)
        self.node = node
        topics = self.config.topics
        self._lock = threading.Lock()
        self._odom: Any = None
        self._odom_stamp: float | None = None
        self._joints: dict[str, float] = {}
        self._joint_speeds: dict[str, float] = {}
        self._joint_stamp: float | None = None
        self._camera: dict[str, Any] = {}
        self._frame_parts: dict[float, dict[str, Any]] = {}  # stamp -> part -> message, the last FRAMES_KEPT stamps
        self._poses = StampedHistory()  # (x, y, yaw)
        self._joint_history = StampedHistory()  # {joint: position}
        self._clearance: tuple[float, float | None] = (-math.inf, None)
        self._request = (0.0, 0.0)
        self._sent_at: float | None = None
        self.dry_run_log: list[tuple[str, Any]] = []
        self._twist_out = node.create_publisher(Twist, topics.cmd_vel, 10)
        node.create_subscription(Odometry, topics.odom, self._on_odom, 10)
        node.create_subscription(JointState, topics.joint_states, self._on_joints, 10)
        node.create_subscription(LaserScan, topics.base_scan, self._on_scan, 5)
        node.create_subscription(Empty, topics.stop, lambda message: self.stop(), 10)
        for kind, message_type, topic in (("rgb", Image, topics.rgb), ("depth", Image, topics.depth),
                                          ("info", CameraInfo, topics.camera_info),
                                          ("instances", InstanceMasks, topics.instances)):
            node.create_subscription(message_type, topic, lambda message, kind=kind: self._on_camera(kind, message), 2)
        self._trajectories = {group: ActionClient(node, FollowJointTrajectory, getattr(topics, f"{group}_action"))
                              for group in JOINT_GROUPS}
        self._cancel_all = {group: node.create_client(CancelGoal, CANCEL_SERVICE.format(
            action=getattr(topics, f"{group}_action"))) for group in JOINT_GROUPS}
        self._gripper = ActionClient(node, GripperCommand, topics.gripper_action)
        node.create_timer(self.config.control_period, self._send_base)

    # ---- sensors ---------------------------------------------------------------------------------------------------
    def _on_odom(self, message: Any) -> None:
        at = seconds_of(message.header.stamp)
        with self._lock:
            self._odom = message
            self._odom_stamp = at
            self._poses.remember(at, _planar_pose(message))

    def _on_joints(self, message: Any) -> None:
        at = seconds_of(message.header.stamp)
        with self._lock:
            self._joints.update(zip(message.name, message.position))
            self._joint_speeds.update(zip(message.name, message.velocity))
            self._joint_stamp = at
            self._joint_history.remember(at, dict(self._joints))

    def pose_at(self, at: float) -> tuple[float, float, float]:
        """(x, y, yaw) at robot time `at`, interpolated between the odometry around it (the nearest end outside the
        history)."""
        with self._lock:
            if not self._poses:
                raise BackendError("no odometry from the robot yet")
            first, second, share = self._poses.around(at)
        return between_poses(first, second, share)

    def joints_at(self, at: float) -> dict[str, float]:
        """Every joint's position at robot time `at`, interpolated like `pose_at`."""
        with self._lock:
            if not self._joint_history:
                raise BackendError("no joint states from the robot yet")
            before, after, share = self._joint_history.around(at)
        return {name: value + share * (after.get(name, value) - value) for name, value in before.items()}

    def _on_scan(self, message: Any) -> None:
        clearance = clearance_ahead(np.asarray(message.ranges, dtype=float), message.angle_min,
                                    message.angle_increment, fetch.LASER_MOUNT[0], fetch.BASE_RADIUS)
        with self._lock:
            self._clearance = (clearance, seconds_of(message.header.stamp))

    def clearance(self) -> float:
        """Metres the base can drive ahead before its front edge meets what the last laser scan saw, less the drive
        since that scan (inf: nothing in its path; -inf while the scan is missing or stale)."""
        with self._lock:
            clearance, scanned_at = self._clearance
            now = self._odom_stamp
            forward = float(self._odom.twist.twist.linear.x) if self._odom is not None else 0.0
        if now is None or scanned_at is None or self.gate.stale({"base laser": scanned_at}, now):
            return -math.inf
        return clearance - max(forward, 0.0) * max(now - scanned_at, 0.0)

    def _on_camera(self, kind: str, message: Any) -> None:
        with self._lock:
            self._camera[kind] = message
            if kind in FRAME_PARTS:
                self._frame_parts.setdefault(seconds_of(message.header.stamp), {})[kind] = message
                while len(self._frame_parts) > FRAMES_KEPT:
                    del self._frame_parts[min(self._frame_parts)]

    def _complete_stamps(self, after: float = -math.inf) -> list[float]:
        """Stamps (at or after `after`) of the kept frames whose parts have all arrived, oldest first; under the
        lock."""
        return sorted(at for at, parts in self._frame_parts.items()
                      if at >= after - 1e-9 and all(kind in parts for kind in FRAME_PARTS))

    def head_camera(self, after: float | None = None) -> CameraFrame:
        """The newest head-camera frame (colour, registered depth, intrinsics, the detector's masks, all of one
        stamp), or with `after` the first one stamped at or after it.

        Raises:
            BackendError: before the first of each has arrived (with `after`: none stamped since).
        """
        with self._lock:
            missing = [kind for kind in CAMERA_PARTS if kind not in self._camera]
            complete = self._complete_stamps(-math.inf if after is None else after)
            if missing or not complete:
                waiting = ", ".join(missing) or "frame with colour, depth and masks of one stamp"
                since = "" if after is None else f" stamped after {after:.2f} s"
                raise BackendError(f"no head camera {waiting}{since} from the robot yet")
            parts = self._frame_parts[complete[-1] if after is None else complete[0]]
            rgb, depth, masks, info = parts["rgb"], parts["depth"], parts["instances"], self._camera["info"]
        intrinsics = CameraView(width=info.width, height=info.height, fx=info.k[0], fy=info.k[4], cx=info.k[2],
                                cy=info.k[5], position=(0.0, 0.0, 0.0), rotation=np.eye(3))
        return CameraFrame(image_to_array(rgb), image_to_array(depth), intrinsics,
                           image_to_array(masks.ids).astype(np.int32),
                           tuple(masks.names), tuple(masks.categories), seconds_of(rgb.header.stamp))

    def frame_after(self, after: float, timeout_s: float = 5.0) -> CameraFrame:
        """The first frame (colour, depth and masks of one stamp) stamped at or after `after` (robot time).

        Raises:
            BackendError: when none comes within `timeout_s` seconds of wall time.
        """
        def fresh() -> bool:
            with self._lock:
                return "info" in self._camera and bool(self._complete_stamps(after))

        if wait_until(fresh, timeout_s, poll_s=0.01) is not WaitStatus.DONE:
            raise BackendError(f"no head camera frame stamped after {after:.2f} s within {timeout_s:g} s")
        return self.head_camera(after)

    @property
    def time(self) -> float:
        """The robot's clock: the last odometry stamp (seconds)."""
        with self._lock:
            if self._odom_stamp is None:
                raise BackendError("no odometry from the robot yet")
            return self._odom_stamp

    def base_pose(self) -> tuple[float, float, float]:
        """(x, y, yaw) from the last odometry."""
        with self._lock:
            if self._odom is None:
                raise BackendError("no odometry from the robot yet")
            return _planar_pose(self._odom)

    def base_velocity(self) -> tuple[float, float]:
        """(forward m/s, turn rad/s) from the last odometry."""
        with self._lock:
            if self._odom is None:
                raise BackendError("no odometry from the robot yet")
            twist = self._odom.twist.twist
        return float(twist.linear.x), float(twist.angular.z)

    def joint_states(self) -> tuple[dict[str, float], dict[str, float]]:
        """Every joint's last position and velocity, by name."""
        with self._lock:
            return dict(self._joints), dict(self._joint_speeds)

    def joint_positions(self, joints: Sequence[str]) -> list[float]:
        """Positions of `joints` from the last joint states."""
        with self._lock:
            missing = [joint for joint in joints if joint not in self._joints]
            if missing:
                raise BackendError(f"no joint states for {', '.join(missing)} from the robot yet")
            return [float(self._joints[joint]) for joint in joints]

    def wait_until_ready(self) -> None:
        """Wait for fresh odometry, joint states, laser scans and head-camera images (each within `sensor_max_age` of
        the newest stamp of the robot's clock).

        Raises:
            BackendError: naming the stale sensors after `ready_timeout` seconds.
        """
        def stale() -> list[str]:
            with self._lock:
                camera = seconds_of(self._camera["rgb"].header.stamp) if "rgb" in self._camera else None
                stamps = {"odometry": self._odom_stamp, "joint states": self._joint_stamp,
                          "base laser": self._clearance[1], "head camera": camera}
            newest = max((stamp for stamp in stamps.values() if stamp is not None), default=math.inf)
            return self.gate.stale(stamps, newest)

        if wait_until(lambda: not stale(), self.config.ready_timeout) is not WaitStatus.DONE:
            raise BackendError(f"refusing to start: stale or missing {', '.join(stale())} after "
                               f"{self.config.ready_timeout:g} s")

    def step(self, seconds: float) -> None:
        """Let the current commands act for `seconds` of the robot's clock.

        Raises:
            BackendError: when the robot's clock does not advance (no odometry) within a wall-time margin.
        """
        end = self.time + seconds - 1e-9
        if wait_until(lambda: self.time >= end, 2.0 * seconds + 2.0, poll_s=0.005) is not WaitStatus.DONE:
            raise BackendError(f"the robot's clock did not advance {seconds:g} s (odometry stopped?)")

    # ---- base ------------------------------------------------------------------------------------------------------
    def set_base_velocity(self, forward: float, turn: float) -> None:
        """Request a base velocity; it is sent, limited, every control period until changed."""
        with self._lock:
            self._request = (forward, turn)

    def _send_base(self) -> None:
        from geometry_msgs.msg import Twist

        with self._lock:
            request = self._request
            if self._odom_stamp is None:
                return
            now = self._odom_stamp
        # The ramps act on the robot's clock: the time since the previous command, not the timer's nominal period.
        period = self.config.control_period if self._sent_at is None else min(max(now - self._sent_at, 0.0), 0.5)
        self._sent_at = now
        forward, turn = self.gate.base_command(*request, period, self.base_pose(), self.clearance())
        twist = Twist()
        twist.linear.x, twist.angular.z = forward, turn
        self._publish_twist(twist)

    def _publish_twist(self, twist: Any) -> None:
        if self.gate.sends:
            self._twist_out.publish(twist)
        else:
            self.dry_run_log.append(("cmd_vel", (twist.linear.x, twist.angular.z)))

    # ---- joints ----------------------------------------------------------------------------------------------------
    def set_arm_targets(self, positions: Sequence[float]) -> None:
        """Move the seven arm joints (fetch.ARM_JOINTS order) to `positions` at the joint speed limit."""
        self._move("arm", positions)

    def set_torso_target(self, height: float) -> None:
        """Move the torso lift to `height` metres."""
        self._move("torso", [height])

    def set_head_target(self, pan: float, tilt: float) -> None:
        """Point the head."""
        self._move("head", [pan, tilt])

    def _move(self, group: str, positions: Sequence[float]) -> None:
        joints = JOINT_GROUPS[group]
        if len(positions) != len(joints) or not all(math.isfinite(value) for value in positions):
            raise ValueError(f"{group} targets must be {len(joints)} finite numbers, got {list(positions)!r}")
        if self.gate.stopped:
            return
        current = self.joint_positions(joints)
        self._send_trajectory(group, joints, positions, self.gate.joint_motion_time(current, positions))

    def _send_trajectory(self, group: str, joints: Sequence[str], positions: Sequence[float], seconds: float) -> None:
        """One goal to `group`'s controller: reach `positions` after `seconds`."""
        from builtin_interfaces.msg import Duration
        from control_msgs.action import FollowJointTrajectory
        from trajectory_msgs.msg import JointTrajectoryPoint

        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(joints)
        point = JointTrajectoryPoint()
        point.positions = [float(value) for value in positions]
        after = stamp(seconds)
        point.time_from_start = Duration(sec=after.sec, nanosec=after.nanosec)
        goal.trajectory.points = [point]
        if not self.gate.sends:
            self.dry_run_log.append((group, (tuple(point.positions), seconds)))
            return
        client = self._trajectories[group]
        if not client.server_is_ready():
            raise BackendError(f"the {group} controller ({getattr(self.config.topics, f'{group}_action')}) is not up")
        client.send_goal_async(goal)

    # ---- gripper ---------------------------------------------------------------------------------------------------
    def open_gripper(self) -> str | None:
        """Open the fingers; None (a real robot does not know the name of what it let go)."""
        self._grip(self.config.gripper_open)
        return None

    def close_gripper(self, max_distance: float = 0.05) -> str | None:
        """Close the fingers; "held" when they stalled on something, None when they closed on nothing."""
        result = self._grip(0.0)
        return "held" if result is not None and result.stalled else None

    def _grip(self, gap: float, timeout_s: float = 10.0) -> Any:
        from control_msgs.action import GripperCommand

        goal = GripperCommand.Goal()
        goal.command.position, goal.command.max_effort = gap, self.config.gripper_effort
        if not self.gate.sends:
            self.dry_run_log.append(("gripper", gap))
            return None
        if self.gate.stopped:
            return None
        if not self._gripper.server_is_ready():
            raise BackendError(f"the gripper controller ({self.config.topics.gripper_action}) is not up")
        sent = self._gripper.send_goal_async(goal)
        if wait_for_future(sent, timeout_s) is not WaitStatus.DONE:
            raise BackendError(f"the gripper did not accept a goal within {timeout_s:g} s")
        handle = sent.result()
        if handle is None or not handle.accepted:
            return None
        answer = handle.get_result_async()
        if wait_for_future(answer, timeout_s) is not WaitStatus.DONE:
            raise BackendError(f"the gripper did not answer within {timeout_s:g} s")
        return answer.result().result

    # ---- safety ----------------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """The software stop: latch the gate, zero the base now, and cancel every goal of the arm, torso and head
        controllers (each holds its joints where they are)."""
        from action_msgs.srv import CancelGoal
        from geometry_msgs.msg import Twist

        self.gate.stop()
        with self._lock:
            self._request = (0.0, 0.0)
        self._publish_twist(Twist())
        for group, client in self._cancel_all.items():
            if not self.gate.sends:
                self.dry_run_log.append(("cancel", group))
            elif not client.service_is_ready():
                self.node.get_logger().error(f"software stop: the {group} controller's cancel service "
                                             f"({client.srv_name}) is not up")
            else:
                client.call_async(CancelGoal.Request())

    def release_stop(self) -> None:
        """Release the software stop (an operator's decision)."""
        self.gate.release()


def _planar_pose(message: Any) -> tuple[float, float, float]:
    """(x, y, yaw in [-pi, pi]) of an Odometry message."""
    pose = message.pose.pose
    yaw = 2.0 * math.atan2(pose.orientation.z, pose.orientation.w)
    return pose.position.x, pose.position.y, math.remainder(yaw, 2 * math.pi)


def between_poses(first: tuple[float, float, float], second: tuple[float, float, float], share: float
                  ) -> tuple[float, float, float]:
    """The planar pose `share` of the way from `first` to `second` (the yaw the short way round)."""
    (x0, y0, yaw0), (x1, y1, yaw1) = first, second
    return x0 + share * (x1 - x0), y0 + share * (y1 - y0), \
        math.remainder(yaw0 + share * math.remainder(yaw1 - yaw0, 2 * math.pi), 2 * math.pi)


class StampedHistory:
    """Values by the robot's clock over the last `keep_s` seconds (appended in time order): what the odometry and
    joint states said when a camera frame was taken."""

    def __init__(self, keep_s: float = HISTORY_S) -> None:
        self.keep_s = keep_s
        self._items: deque[tuple[float, Any]] = deque()

    def __bool__(self) -> bool:
        return bool(self._items)

    def remember(self, at: float, value: Any) -> None:
        """Append a stamped value and forget those more than `keep_s` older."""
        self._items.append((at, value))
        while self._items[0][0] < at - self.keep_s:
            self._items.popleft()

    def around(self, at: float) -> tuple[Any, Any, float]:
        """The values just before and after `at` and the share of the way from the first to the second (the
        nearest end twice outside the history); the history must not be empty."""
        stamps = [stamp_ for stamp_, _ in self._items]
        index = bisect.bisect_left(stamps, at)
        if index == 0 or index == len(stamps):
            value = self._items[min(index, len(stamps) - 1)][1]
            return value, value, 0.0
        (start, first), (end, second) = self._items[index - 1], self._items[index]
        return first, second, (at - start) / (end - start) if end > start else 0.0
