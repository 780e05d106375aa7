"""The fake Fetch node: a ROS 2 process that speaks a real Fetch's interfaces (/cmd_vel, /odom, /joint_states,
/base_scan, the head camera's colour, registered depth and camera_info with a detector's instance masks, the arm,
torso and head FollowJointTrajectory servers, the gripper's GripperCommand server), backed by the MuJoCo simulator
through habitat_bridge.fetch.fake_fetch.FakeFetchCore. Nothing else of the simulator is offered. The camera (the
simulator's front head view) is rendered at CAMERA_HZ of wall time, and only while someone subscribes; the laser
scans at the real laser's rate of the robot's clock.

`fake_fetch_node --scene data/test/100/scene.json` (one thread, like the bridge node: callbacks are short, and the
action servers' execute callbacks are coroutines that wait for the tick that ends their motion).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from emmoe_eval.robot import fetch

from habitat_bridge.bridge_core import image_message, seconds_of, stamp
from habitat_bridge.fetch.config import JOINT_GROUPS
from habitat_bridge.fetch.fake_fetch import FakeFetchConfig, FakeFetchCore, laser_angles

READY_LINE = "fake_fetch ready"
# Frames per second of wall time of the head camera, and its optical frame (a real Fetch's name).
CAMERA_HZ = 10.0
CAMERA_FRAME = "head_camera_rgb_optical_frame"
LASER_FRAME = "base_laser_link"


class FakeFetchNode:
    """The thin ROS 2 node around a FakeFetchCore (see the module docstring)."""

    def __init__(self, core: FakeFetchCore, topics: Any = None, node_name: str = "fake_fetch") -> None:
        from control_msgs.action import FollowJointTrajectory, GripperCommand
        from emmoe_interfaces.msg import InstanceMasks
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.action import ActionServer
        from rclpy.node import Node
        from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan

        from habitat_bridge.fetch.config import FetchTopics

        self.core = core
        topics = topics or FetchTopics()
        self.node = Node(node_name)
        self._odom = self.node.create_publisher(Odometry, topics.odom, 10)
        self._joints = self.node.create_publisher(JointState, topics.joint_states, 10)
        self._rgb = self.node.create_publisher(Image, topics.rgb, 2)
        self._depth = self.node.create_publisher(Image, topics.depth, 2)
        self._camera_info = self.node.create_publisher(CameraInfo, topics.camera_info, 2)
        self._instances = self.node.create_publisher(InstanceMasks, topics.instances, 2)
        self._scan = self.node.create_publisher(LaserScan, topics.base_scan, 5)
        self.node.create_subscription(Twist, topics.cmd_vel, self._on_twist, 10)
        self._waiting: list[tuple[str, Any]] = []
        for group in JOINT_GROUPS:
            ActionServer(self.node, FollowJointTrajectory, getattr(topics, f"{group}_action"),
                         execute_callback=self._follow)
        ActionServer(self.node, GripperCommand, topics.gripper_action, execute_callback=self._grip)
        self._timer = self.node.create_timer(core.config.tick / core.config.speed, self._tick)
        self._camera_timer = self.node.create_timer(1.0 / CAMERA_HZ, self._publish_camera)
        self._scan_timer = self.node.create_timer(1.0 / fetch.LASER_HZ / core.config.speed, self._publish_scan)

    def _publish_scan(self) -> None:
        from sensor_msgs.msg import LaserScan

        angles = laser_angles()
        scan = LaserScan()
        scan.header.stamp, scan.header.frame_id = stamp(self.core.time), LASER_FRAME
        scan.angle_min, scan.angle_max = float(angles[0]), float(angles[-1])
        scan.angle_increment = float(angles[1] - angles[0])
        scan.scan_time = 1.0 / fetch.LASER_HZ
        scan.range_min, scan.range_max = fetch.LASER_RANGE
        scan.ranges = self.core.base_scan().tolist()
        self._scan.publish(scan)

    def _publish_camera(self) -> None:
        from emmoe_interfaces.msg import InstanceMasks
        from sensor_msgs.msg import CameraInfo

        if not any(publisher.get_subscription_count()
                   for publisher in (self._rgb, self._depth, self._camera_info, self._instances)):
            return
        seconds = self.core.time
        rgb, depth, camera, ids, names, categories = self.core.head_camera()
        self._rgb.publish(image_message(rgb, seconds, CAMERA_FRAME))
        self._depth.publish(image_message(depth, seconds, CAMERA_FRAME))
        info = CameraInfo()
        info.header.stamp, info.header.frame_id = stamp(seconds), CAMERA_FRAME
        info.width, info.height = camera.width, camera.height
        info.distortion_model = "plumb_bob"
        info.d = [0.0] * 5
        info.k = [camera.fx, 0.0, camera.cx, 0.0, camera.fy, camera.cy, 0.0, 0.0, 1.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.p = [camera.fx, 0.0, camera.cx, 0.0, 0.0, camera.fy, camera.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        self._camera_info.publish(info)
        masks = InstanceMasks()
        masks.header = info.header
        masks.ids = image_message(ids, seconds, CAMERA_FRAME)
        masks.names, masks.categories = list(names), list(categories)
        self._instances.publish(masks)

    def _on_twist(self, message: Any) -> None:
        self.core.command_base(message.linear.x, message.angular.z)

    def _tick(self) -> None:
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState

        self.core.tick()
        state = self.core.state()
        now = stamp(self.core.time)
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = now, "odom", "base_link"
        odom.pose.pose.position.x, odom.pose.pose.position.y = state.base.position[0], state.base.position[1]
        w, _, _, z = state.base.orientation
        odom.pose.pose.orientation.w, odom.pose.pose.orientation.z = w, z
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = state.base_velocity
        self._odom.publish(odom)
        joints = JointState()
        joints.header.stamp = now
        joints.name = list(state.joint_names)
        joints.position = [float(value) for value in state.joint_positions]
        joints.velocity = [float(value) for value in state.joint_velocities]
        self._joints.publish(joints)
        for group, future in list(self._waiting):
            if self.core.motion_done(group) and not future.done():
                future.set_result(True)
        self._waiting = [(group, future) for group, future in self._waiting if not future.done()]

    async def _follow(self, handle: Any) -> Any:
        from control_msgs.action import FollowJointTrajectory
        from rclpy.task import Future

        trajectory = handle.request.trajectory
        result = FollowJointTrajectory.Result()
        try:
            group = self.core.follow(trajectory.joint_names,
                                     [seconds_of(point.time_from_start) for point in trajectory.points],
                                     [list(point.positions) for point in trajectory.points])
        except ValueError as error:
            handle.abort()
            result.error_code, result.error_string = FollowJointTrajectory.Result.INVALID_JOINTS, str(error)
            return result
        # A later goal to the same controller replaces this one: this one ends aborted.
        for waiting_group, future in self._waiting:
            if waiting_group == group and not future.done():
                future.set_result(False)
        finished: Future = Future()
        self._waiting.append((group, finished))
        completed = await finished
        if completed:
            handle.succeed()
            result.error_code = FollowJointTrajectory.Result.SUCCESSFUL
        else:
            handle.abort()
            result.error_code, result.error_string = (FollowJointTrajectory.Result.INVALID_GOAL,
                                                      "replaced by a newer goal")
        return result

    def _grip(self, handle: Any) -> Any:
        from control_msgs.action import GripperCommand

        stalled = self.core.grip(handle.request.command.position)
        handle.succeed()
        result = GripperCommand.Result()
        result.stalled, result.reached_goal, result.position = stalled, not stalled, self.core.finger_gap()
        return result


def main(args: list[str] | None = None) -> int:
    """Entry point of `fake_fetch_node --scene scene.json` (one thread, like the bridge node)."""
    from emmoe_eval.ros_helpers import spin_node

    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.scene_spec import SceneSpec

    parser = argparse.ArgumentParser(prog="fake_fetch_node", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scene", type=Path, required=True, help="scene.json to load (data/<split>/<id>/)")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="simulated seconds per second of wall time (default 1: as fast as a real Fetch)")
    options, ros_args = parser.parse_known_args(args)
    if not options.scene.is_file():
        parser.error(f"no scene file {options.scene}")
    if not options.speed > 0:
        parser.error(f"--speed must be positive, got {options.speed}")
    backend = MujocoBackend()
    backend.reset(SceneSpec.from_dict(json.loads(options.scene.read_text())))
    config = FakeFetchConfig(speed=options.speed)
    return spin_node(lambda: FakeFetchNode(FakeFetchCore(backend, config)).node, ros_args, num_threads=1,
                     name="fake_fetch_node", ready_line=READY_LINE, on_shutdown=backend.close)


if __name__ == "__main__":
    sys.exit(main())
