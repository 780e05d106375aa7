"""The fake Fetch node: a ROS 2 process that speaks a real Fetch's interfaces (/cmd_vel, /odom, /joint_states,
/base_scan, the head camera's colour, registered depth and camera_info with a detector's instance masks, the arm,
torso and head FollowJointTrajectory servers, the gripper's GripperCommand server), backed by the MuJoCo simulator
through habitat_bridge.fetch.fake_fetch.FakeFetchCore. Nothing else of the simulator is offered. The camera (the
simulator's front head view) is rendered at CAMERA_HZ of wall time, and only while someone subscribes; the laser
scans at the real laser's rate of the robot's clock.

`fake_fetch_node --scene data/test/100/scene.json`. The executor is one thread, and none of its callbacks waits long,
so the robot's clock ticks evenly and a command is taken as soon as it arrives: the camera timer copies the
simulation's state (well under a millisecond) and hands the copy to a thread of its own that renders and publishes it
(25-80 ms here; a frame that falls due while the previous one is being drawn is dropped, as a busy camera driver
drops it). Each tick first takes the /cmd_vel messages already delivered, as a base controller reads its newest
command at the start of a cycle, so the software stop's zero twist acts from the first tick after it arrives. The
trajectory servers' execute callbacks are coroutines that wait for the tick that ends their motion.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from pathlib import Path
from typing import Any

from emmoe_core.perception import PERCEPTIONS
from emmoe_core.robot import fetch

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
        self._cmd_vel = self.node.create_subscription(Twist, topics.cmd_vel, self._on_twist, 10)
        self.dropped_samples = 0  # odometry, joint-state and laser samples DDS refused to send
        # The running trajectory goals: (joint group, future the tick completes when its motion ends, goal handle).
        self._waiting: list[tuple[str, Any, Any]] = []
        for group in JOINT_GROUPS:
            ActionServer(self.node, FollowJointTrajectory, getattr(topics, f"{group}_action"),
                         execute_callback=self._follow, cancel_callback=self._cancel)
        ActionServer(self.node, GripperCommand, topics.gripper_action, execute_callback=self._grip)
        self._timer = self.node.create_timer(core.config.tick / core.config.speed, self._tick)
        # The camera thread takes (robot time, state copy) frames; None ends it. `_camera_idle` is set while it waits
        # (the one state copy may then be overwritten).
        self._frames: queue.Queue[tuple[float, Any] | None] = queue.Queue(maxsize=1)
        self._camera_idle = threading.Event()
        self._camera_idle.set()
        self._camera_thread = threading.Thread(target=self._draw_frames, name="head_camera", daemon=True)
        self._camera_thread.start()
        self._camera_timer = self.node.create_timer(1.0 / CAMERA_HZ, self._take_frame)
        self._scan_timer = self.node.create_timer(1.0 / fetch.LASER_HZ / core.config.speed, self._publish_scan)

    def _publish_sensor(self, publisher: Any, message: Any) -> None:
        """Publish one sample of a periodic sensor; a sample DDS refuses to send is dropped, as a driver drops it.

        Fast DDS's write can fail under back-pressure (a reliable reader that has not acknowledged the history yet,
        on a loaded machine: `cannot publish data`); the next tick sends a fresh sample, so the node keeps running
        instead of dying with the robot's clock (the robot side then reports that its clock stopped).
        """
        from rclpy._rclpy_pybind11 import RCLError

        try:
            publisher.publish(message)
        except RCLError as error:
            self.dropped_samples += 1
            self.node.get_logger().warning(f"{publisher.topic_name}: a sample was dropped ({self.dropped_samples} "
                                           f"so far): {error}", throttle_duration_sec=5.0)

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
        self._publish_sensor(self._scan, scan)

    def _take_frame(self) -> None:
        """Hand the camera thread the state now, when someone subscribes and the previous frame is drawn."""
        if self._camera_idle.is_set() and any(publisher.get_subscription_count() for publisher in
                                              (self._rgb, self._depth, self._camera_info, self._instances)):
            self._camera_idle.clear()
            self._frames.put_nowait((self.core.time, self.core.copy_state()))

    def _draw_frames(self) -> None:
        """The camera thread: draw and publish each frame handed over, until None."""
        while (frame := self._frames.get()) is not None:
            try:
                self._publish_camera(*frame)
            except Exception as error:  # noqa: BLE001 - a frame that failed is reported; the camera goes on
                self.node.get_logger().error(f"head camera: the frame at {frame[0]:.2f} s failed: {error!r}")
            finally:
                self._camera_idle.set()

    def close(self) -> None:
        """End the camera thread (after the frame it is drawing)."""
        self._camera_idle.wait()
        self._frames.put(None)
        self._camera_thread.join()

    def _publish_camera(self, seconds: float, state: Any) -> None:
        from emmoe_interfaces.msg import InstanceMasks
        from sensor_msgs.msg import CameraInfo

        rgb, depth, camera, ids, names, categories = self.core.head_camera(state)
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

    def _take_base_commands(self) -> None:
        """Take the /cmd_vel messages that arrived but whose callback has not run yet (the newest wins), as a base
        controller reads the newest command at the start of each cycle: a command acts from the first tick after it
        arrives, even when the executor has other callbacks ready first (it takes messages the same way, in this same
        thread)."""
        subscription = self._cmd_vel
        with subscription.handle:
            while (taken := subscription.handle.take_message(subscription.msg_type, subscription.raw)) is not None:
                self._on_twist(taken[0])

    def _tick(self) -> None:
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState

        self._take_base_commands()
        self.core.tick()
        for group, future, _ in self._waiting:
            if self.core.motion_done(group) and not future.done():
                future.set_result(True)
        self._waiting = [entry for entry in self._waiting if not entry[1].done()]
        state = self.core.state()
        now = stamp(self.core.time)
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = now, "odom", "base_link"
        odom.pose.pose.position.x, odom.pose.pose.position.y = state.base.position[0], state.base.position[1]
        w, _, _, z = state.base.orientation
        odom.pose.pose.orientation.w, odom.pose.pose.orientation.z = w, z
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = state.base_velocity
        self._publish_sensor(self._odom, odom)
        joints = JointState()
        joints.header.stamp = now
        joints.name = list(state.joint_names)
        joints.position = [float(value) for value in state.joint_positions]
        joints.velocity = [float(value) for value in state.joint_velocities]
        self._publish_sensor(self._joints, joints)

    async def _follow(self, handle: Any) -> Any:
        from control_msgs.action import FollowJointTrajectory
        from rclpy.task import Future

        trajectory = handle.request.trajectory
        result = FollowJointTrajectory.Result()
        finished: Future = Future()
        try:
            group = self.core.follow(trajectory.joint_names,
                                     [seconds_of(point.time_from_start) for point in trajectory.points],
                                     [list(point.positions) for point in trajectory.points])
        except ValueError as error:
            handle.abort()
            result.error_code, result.error_string = FollowJointTrajectory.Result.INVALID_JOINTS, str(error)
            return result
        # A later goal to the same controller replaces this one: this one ends aborted.
        for waiting_group, future, _ in self._waiting:
            if waiting_group == group and not future.done():
                future.set_result(False)
        self._waiting.append((group, finished, handle))
        completed = await finished
        if handle.is_cancel_requested:
            handle.canceled()
            result.error_code, result.error_string = FollowJointTrajectory.Result.SUCCESSFUL, "cancelled"
        elif completed:
            handle.succeed()
            result.error_code = FollowJointTrajectory.Result.SUCCESSFUL
        else:
            handle.abort()
            result.error_code, result.error_string = (FollowJointTrajectory.Result.INVALID_GOAL,
                                                      "replaced by a newer goal")
        return result

    def _cancel(self, handle: Any) -> Any:
        """A cancel request for a running goal, accepted: its joints are held where they are, and the next tick ends
        the goal (cancelled)."""
        from rclpy.action import CancelResponse

        for group, future, waiting_handle in self._waiting:
            if waiting_handle is handle and not future.done():
                self.core.hold(group)
        return CancelResponse.ACCEPT

    def _grip(self, handle: Any) -> Any:
        from control_msgs.action import GripperCommand

        stalled = self.core.grip(handle.request.command.position)
        handle.succeed()
        result = GripperCommand.Result()
        result.stalled, result.reached_goal, result.position = stalled, not stalled, self.core.finger_gap()
        return result


def main(args: list[str] | None = None) -> int:
    """Entry point of `fake_fetch_node --scene scene.json` (see the module docstring)."""
    from emmoe_core.ros_helpers import spin_node

    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.scene_spec import SceneSpec

    parser = argparse.ArgumentParser(prog="fake_fetch_node", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scene", type=Path, required=True, help="scene.json to load (data/<split>/<id>/)")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="simulated seconds per second of wall time (default 1: as fast as a real Fetch)")
    parser.add_argument("--perception", choices=PERCEPTIONS, default="learned",
                        help="the masks of the head camera: learned (the detector trained on simulator renders, "
                             "default) or segmentation (the simulator's instance masks standing in for one)")
    options, ros_args = parser.parse_known_args(args)
    if not options.scene.is_file():
        parser.error(f"no scene file {options.scene}")
    if not options.speed > 0:
        parser.error(f"--speed must be positive, got {options.speed}")
    backend = MujocoBackend()
    backend.reset(SceneSpec.from_dict(json.loads(options.scene.read_text())))
    config = FakeFetchConfig(speed=options.speed)
    detector = None
    if options.perception == "learned":
        from emmoe_core.perception.learned import LearnedDetector

        detector = LearnedDetector(threads=1)
    nodes: list[FakeFetchNode] = []

    def make_node() -> Any:
        nodes.append(FakeFetchNode(FakeFetchCore(backend, config, detector)))
        return nodes[-1].node

    def shut_down() -> None:
        for node in nodes:
            node.close()
        backend.close()

    return spin_node(make_node, ros_args, num_threads=1, name="fake_fetch_node", ready_line=READY_LINE,
                     on_shutdown=shut_down)


if __name__ == "__main__":
    sys.exit(main())
