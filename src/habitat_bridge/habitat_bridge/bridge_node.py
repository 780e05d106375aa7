"""The bridge node: one ROS 2 node around one simulator backend.

Publishes `/head_camera/{front,left,back,right}/image_raw` (rgb8) and, with publish_depth,
`/head_camera/{view}/depth/image_raw` (32FC1 metres), `/odom`, `/joint_states` and `/clock` (simulated time);
subscribes `/cmd_vel` (linear.x forward, angular.z turn; the base stops after cmd_vel_timeout of simulated time
without commands); serves `/sim/reset_episode`, `/sim/get_observation` and `/sim/query_scene` (emmoe_interfaces).
A bad request gets an error code in its response; the node keeps running.

The simulation keeps pace with wall time: each control tick (rate_hz) steps the control periods since the previous
one (at most bridge_core.MAX_CATCH_UP_S), so ticks that come late (a loaded machine; a camera frame or a service
holding the simulator) do not slow simulated time down. A timer of its own (camera_rate_hz) renders the head views
that someone subscribes to and publishes them after releasing the simulator.

In-process users of the backend (skills composed into the same process, e.g. homiebot.sim_stack) share it
through two public context managers:
- `exclusive()`: holds the simulator lock that every tick, camera frame and service holds, and yields the
  backend: `with bridge.exclusive() as backend: backend.step(0.1)`. Re-entrant; the returned object can be kept and
  entered again and again (`PrivilegedSkills(bridge.backend, lock=bridge.exclusive())`).
- `paused()`: pauses the free-running simulation for its body: ticks do not step the simulator, the cameras are not
  rendered, and /cmd_vel is ignored (no command from before outlives the pause); /clock, /odom and /joint_states keep
  being published from the state the body steps to, and services are served between the body's exclusive() sections.
  Nestable. A skill that steps the simulator in its own (simulated) time runs inside `paused()` and takes
  `exclusive()` around each backend call.

While someone subscribes, `/sim/head_front/image_raw` and `/sim/third_person/image_raw` (rgb8, the head front view
and a view from behind and above the robot, MuJoCo backend) are published at video_rate_hz, also while paused, so
that the evaluator can record the videos of a run; nobody subscribing costs nothing.

Parameters: backend, scene_path, seed, rate_hz, camera_rate_hz, publish_depth, cmd_vel_timeout, image_size,
video_rate_hz (see habitat_bridge.bridge_core.BridgeConfig). Run: `ros2 run habitat_bridge bridge_node` or
`python -m habitat_bridge.bridge_node`; it prints "habitat_bridge ready" once it serves.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from emmoe_core.ros_helpers import declare_config, spin_node
from emmoe_core.topics import (
    CLOCK_TOPIC,
    CMD_VEL_TOPIC,
    GET_OBSERVATION_SERVICE,
    JOINT_STATES_TOPIC,
    ODOM_TOPIC,
    QUERY_SCENE_SERVICE,
    RESET_EPISODE_SERVICE,
    camera_topic,
)
from emmoe_core.topics import VIDEO_TOPICS
from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState

from habitat_bridge import bridge_core
from habitat_bridge.backends import create_backend, resolve_backend_name
from habitat_bridge.backends.base import VIEWS, SimBackend

if TYPE_CHECKING:
    from emmoe_core.perception.learned import LearnedDetector

READY_LINE = "habitat_bridge ready"


class SimulatorAccess:
    """The bridge's simulator lock as a reusable, re-entrant context manager that yields the backend."""

    def __init__(self, lock: Any, backend: SimBackend) -> None:
        """`lock` is the bridge's re-entrant lock, `backend` what entering yields."""
        self._lock = lock
        self._backend = backend

    def __enter__(self) -> SimBackend:
        """Wait for the lock (ticks, services and other users release it between their calls)."""
        self._lock.acquire()
        return self._backend

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Release the lock."""
        self._lock.release()


class BridgeNode(Node):
    """ROS 2 front of a SimBackend (see the module docstring)."""

    def __init__(self, backend: SimBackend | None = None, detector: LearnedDetector | None = None,
                 on_run_start: Callable[[str], None] | None = None, **node_kwargs: Any) -> None:
        """Serve `backend` (else the one the parameters name); `detector` (the learned one) names what the planner
        sees, else the simulator's segmentation does; `on_run_start` is called with the run key of every successful
        reset that names one (a skill failure model restarts its stream there)."""
        super().__init__("habitat_bridge", **node_kwargs)
        self.detector = detector
        self._on_run_start = on_run_start
        self.config = declare_config(self, bridge_core.BridgeConfig)
        self._lock = threading.RLock()
        self._pauses = 0
        if backend is None:
            name = resolve_backend_name(self.config.backend)
            backend = create_backend(name, image_width=self.config.image_size, image_height=self.config.image_size)
        self.backend = backend
        self._default_scene = bridge_core.load_scene_request("", self.config.scene_path)
        if not self.backend.runs_itself:
            seed = None if self.config.seed < 0 else self.config.seed
            episode = self.backend.reset(self._default_scene, seed)
            self.get_logger().info(f"{self.backend.name} backend, episode {episode}")

        group = ReentrantCallbackGroup()
        kinds = (False, True) if self.config.publish_depth else (False,)
        self._camera_publishers = {(view, depth): self.create_publisher(Image, camera_topic(view, depth=depth), 2)
                                   for view in VIEWS for depth in kinds}
        self.create_service(ResetEpisode, RESET_EPISODE_SERVICE, self._on_reset, callback_group=group)
        self.create_service(GetObservation, GET_OBSERVATION_SERVICE, self._on_get_observation, callback_group=group)
        self.create_service(QueryScene, QUERY_SCENE_SERVICE, self._on_query_scene, callback_group=group)
        if not self.backend.runs_itself:
            self._start_simulation(group)
        self._video_views = bridge_core.video_views(self.backend.views)
        self._video_publishers = {stream: self.create_publisher(Image, VIDEO_TOPICS[stream], 2)
                                  for stream in self._video_views}
        if self.config.video_rate_hz > 0:
            self.create_timer(1.0 / self.config.video_rate_hz, self._on_video_tick, callback_group=group)

    def _start_simulation(self, group: ReentrantCallbackGroup) -> None:
        """The free-running simulation: /cmd_vel in; /clock, /odom, /joint_states and the head views out. Ticks and
        camera frames in groups of their own: spun by several threads (in-process users), one at a time each, never
        queued up behind each other on the simulator lock."""
        self._base_command = bridge_core.BaseCommand(self.config.cmd_vel_timeout)
        self._pacer = bridge_core.TickPacer(1.0 / self.config.rate_hz, time.monotonic())
        self._odom_publisher = self.create_publisher(Odometry, ODOM_TOPIC, 10)
        self._joint_publisher = self.create_publisher(JointState, JOINT_STATES_TOPIC, 10)
        self._clock_publisher = self.create_publisher(Clock, CLOCK_TOPIC, 10)
        self.create_subscription(Twist, CMD_VEL_TOPIC, self._on_cmd_vel, 10, callback_group=group)
        self.create_timer(self._pacer.period, self._on_tick, callback_group=MutuallyExclusiveCallbackGroup())
        if self.config.camera_rate_hz > 0:
            self.create_timer(1.0 / self.config.camera_rate_hz, self._on_camera_frame,
                              callback_group=MutuallyExclusiveCallbackGroup())

    # ---- in-process access ---------------------------------------------------------------------------------------
    def exclusive(self) -> SimulatorAccess:
        """The simulator to yourself: `with bridge.exclusive() as backend:` holds the lock every tick, camera frame
        and service of this node holds (see the module docstring). The returned object is reusable."""
        return SimulatorAccess(self._lock, self.backend)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Pause the free-running simulation while the body steps the simulator itself (see the module docstring)."""
        with self._lock:
            self._pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._pauses -= 1

    @property
    def is_paused(self) -> bool:
        """Whether a `paused()` section is active."""
        with self._lock:
            return self._pauses > 0

    # ---- callbacks ----------------------------------------------------------------------------------------------
    def _on_cmd_vel(self, message: Twist) -> None:
        """Keep the latest command; the ticks apply it. No simulator lock here: a command never waits behind a tick or
        a camera frame."""
        command = (float(message.linear.x), float(message.angular.z))
        if not all(math.isfinite(value) for value in command):
            self.get_logger().warning(f"ignored /cmd_vel: base velocity must be finite, got {command}")
            return
        if self._pauses:  # an int read: atomic; a paused body drives the robot itself
            return
        self._base_command.receive(*command)

    def _on_tick(self) -> None:
        """Step the periods due with the base command due (not while paused); publish /clock, /odom, /joint_states."""
        try:
            with self._lock:
                periods = self._pacer.periods(time.monotonic())
                if self._pauses:
                    self._base_command.stop()
                elif periods:
                    self.backend.set_base_velocity(*self._base_command.due(self.backend.time))
                    self.backend.step(periods * self._pacer.period)
                state = self.backend.robot_state()
            clock = Clock()
            clock.clock = bridge_core.stamp(state.time)
            self._clock_publisher.publish(clock)
            self._odom_publisher.publish(bridge_core.odometry_message(state))
            self._joint_publisher.publish(bridge_core.joint_state_message(state))
        except Exception as error:  # keep ticking; a reset recovers a broken episode
            if self.context.ok():  # else shutting down: a tick in flight finds its publishers gone, the normal end
                self.get_logger().error(f"simulation tick failed: {bridge_core.describe_backend_error(error)}",
                                        throttle_duration_sec=5.0)

    def _on_camera_frame(self) -> None:
        """Render the head views someone subscribes to (not while paused); publish them after releasing the
        simulator."""
        wanted = [key for key, publisher in self._camera_publishers.items() if publisher.get_subscription_count() > 0]
        if self._pauses or not wanted:
            return
        views = {view for view, _ in wanted}
        try:
            with self._lock:
                observation = self.backend.observe([view for view in VIEWS if view in views],
                                                   depth=any(depth for _, depth in wanted))
            for view, depth in wanted:
                image = observation.depth[view] if depth else observation.rgb[view]
                self._camera_publishers[view, depth].publish(bridge_core.image_message(image, observation.time,
                                                                                       f"head_camera_{view}"))
        except Exception as error:  # keep publishing; a reset recovers a broken episode
            if self.context.ok():  # else shutting down (see _on_tick)
                self.get_logger().error(f"camera frame failed: {bridge_core.describe_backend_error(error)}",
                                        throttle_duration_sec=5.0)

    def _on_video_tick(self) -> None:
        """Publish the video views that someone subscribes to (between the exclusive sections of a paused body)."""
        streams = [stream for stream, publisher in self._video_publishers.items()
                   if publisher.get_subscription_count() > 0]
        if not streams:
            return
        try:
            with self._lock:
                observation = self.backend.observe([self._video_views[stream] for stream in streams])
            for stream in streams:
                view = self._video_views[stream]
                self._video_publishers[stream].publish(bridge_core.image_message(observation.rgb[view],
                                                                                 observation.time, f"video_{view}"))
        except Exception as error:  # videos are best effort; the simulation goes on
            if self.context.ok():  # else shutting down (see _on_tick)
                self.get_logger().error(f"video frame failed: {bridge_core.describe_backend_error(error)}",
                                        throttle_duration_sec=5.0)

    def _on_reset(self, request: ResetEpisode.Request, response: ResetEpisode.Response) -> ResetEpisode.Response:
        with self._lock:
            result = bridge_core.handle_reset(self.backend, request, response, self._default_scene)
            if result.success and request.run_key and self._on_run_start is not None:
                self._on_run_start(request.run_key)
        if result.success:
            self.get_logger().info(f"episode {result.episode_id} loaded")
        else:
            self.get_logger().warning(f"reset refused ({result.error_code}): {result.error_msg}")
        return result

    def _on_get_observation(self, request: GetObservation.Request,
                            response: GetObservation.Response) -> GetObservation.Response:
        with self._lock:
            return bridge_core.handle_get_observation(self.backend, request, response, self.detector)

    def _on_query_scene(self, request: QueryScene.Request, response: QueryScene.Response) -> QueryScene.Response:
        with self._lock:
            return bridge_core.handle_query_scene(self.backend, request, response)

    def destroy_node(self) -> None:
        """Release the simulator with the node."""
        with self._lock:
            self.backend.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of `bridge_node` (a bad parameter or scene file: one line on stderr, exit status 2).

    One thread: alone in its process, the node's callbacks are short or hold the simulator lock anyway. rclpy 9's
    MultiThreadedExecutor submits a callback that waits in its thread pool again on every turn of its loop
    (ros2/rclpy#1452): fed a /cmd_vel stream it took a whole core and the ticks came at a fraction of their rate.
    """
    return spin_node(BridgeNode, args, num_threads=1, name="bridge_node", ready_line=READY_LINE)


if __name__ == "__main__":
    sys.exit(main())
