"""The bridge node in its own process, driven by a client in the test process over DDS."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from habitat_bridge.bridge_node import READY_LINE
from habitat_bridge.scene_spec import SceneSpec, save_scene_spec

pytestmark = pytest.mark.ros


def _call(node, executor, service_type, name: str, request, timeout: float = 30.0):
    client = node.create_client(service_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f"{name} not available"
    future = client.call_async(request)
    executor.spin_until_future_complete(future, timeout_sec=timeout)
    assert future.done(), f"{name} did not answer"
    return future.result()


def test_node_serves_observations_queries_resets_and_drives(ros_process, ros_node_factory, compact_spec: SceneSpec,
                                                            tmp_path: Path) -> None:
    from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image, JointState

    scene = save_scene_spec(compact_spec, tmp_path / "kitchen.json")
    ros_process("-m", "habitat_bridge.bridge_node", "--ros-args", "-p", f"scene_path:={scene}",
                "-p", "camera_rate_hz:=5.0", "-p", "publish_depth:=true", ready=READY_LINE, timeout=60)
    node = ros_node_factory("bridge_client")
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    received: dict[str, object] = {}
    topics = (("/head_camera/left/image_raw", Image), ("/head_camera/back/depth/image_raw", Image),
              ("/odom", Odometry), ("/joint_states", JointState), ("/clock", Clock))
    for topic, message_type in topics:
        node.create_subscription(message_type, topic, lambda message, topic=topic: received.__setitem__(topic,
                                                                                                         message), 10)
    try:
        observation = _call(node, executor, GetObservation, "/sim/get_observation",
                            GetObservation.Request(include_depth=True))
        assert observation.success, observation.error_msg
        assert (observation.front.width, observation.right.height, len(observation.depth)) == (256, 256, 4)
        assert "fridge" in {name for item in observation.visible for name in item.names}

        bad = _call(node, executor, ResetEpisode, "/sim/reset_episode", ResetEpisode.Request(scene_json="{}"))
        assert (bad.success, bad.error_code) == (False, ResetEpisode.Response.INVALID_SPEC)
        unknown = _call(node, executor, QueryScene, "/sim/query_scene", QueryScene.Request(names=["unicorn"]))
        assert unknown.error_code == QueryScene.Response.UNKNOWN_NAME
        query = _call(node, executor, QueryScene, "/sim/query_scene", QueryScene.Request(names=["fridge"]))
        assert query.success and [item.name for item in query.containers] == ["fridge_0_door"]

        deadline = time.monotonic() + 20
        while len(received) < len(topics) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert set(received) == {topic for topic, _ in topics}
        assert received["/head_camera/back/depth/image_raw"].encoding == "32FC1"
        assert "elbow_flex_joint" in received["/joint_states"].name
        start_y = received["/odom"].pose.pose.position.y

        publisher = node.create_publisher(Twist, "/cmd_vel", 10)
        command = Twist()
        command.linear.x = 0.4  # the robot starts facing +y
        # Drive until the robot has moved 0.2 m (0.5 s of simulated driving), or give up after 20 s of wall time (the
        # bridge's simulated time keeps pace with wall time; the rest is for a loaded machine's slow discovery).
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and received["/odom"].pose.pose.position.y <= start_y + 0.2:
            publisher.publish(command)
            executor.spin_once(timeout_sec=0.05)
        assert received["/odom"].pose.pose.position.y > start_y + 0.2
        clock = received["/clock"].clock
        assert clock.sec + clock.nanosec * 1e-9 > 0.5

        again = _call(node, executor, ResetEpisode, "/sim/reset_episode",
                      ResetEpisode.Request(scene_json=json.dumps(compact_spec.to_dict())))
        assert again.success and again.episode_id == "compact_0"
    finally:
        executor.remove_node(node)
        executor.shutdown()


def test_in_process_users_pause_the_tick_and_hold_the_simulator(ros_context, compact_spec: SceneSpec,
                                                                tmp_path: Path) -> None:
    """`paused()` stops the free-running simulation (state topics keep coming); `exclusive()` holds off services."""
    import threading

    from emmoe_interfaces.srv import QueryScene
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock

    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.bridge_node import BridgeNode

    scene = save_scene_spec(compact_spec, tmp_path / "kitchen.json")
    bridge = BridgeNode(backend=MujocoBackend(), context=ros_context, parameter_overrides=[
        Parameter("scene_path", value=str(scene)), Parameter("rate_hz", value=50.0),
        Parameter("camera_rate_hz", value=0.0)])
    client_node = Node("pause_client", context=ros_context)
    clocks: list[float] = []
    client_node.create_subscription(Clock, "/clock", lambda message: clocks.append(
        message.clock.sec + message.clock.nanosec * 1e-9), 10)
    spinner = MultiThreadedExecutor(num_threads=4, context=ros_context)
    spinner.add_node(bridge)
    spinner.add_node(client_node)
    threading.Thread(target=spinner.spin, daemon=True).start()

    def sim_time() -> float:
        with bridge.exclusive() as backend:
            return backend.robot_state().time

    def eventually(condition, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.02)
        return condition()

    try:
        assert eventually(lambda: sim_time() > 0.1)  # free running
        with bridge.paused():
            assert bridge.is_paused
            frozen = sim_time()
            time.sleep(0.4)
            assert sim_time() == frozen  # the tick no longer steps
            access = bridge.exclusive()
            with access as backend, access:  # re-entrant and reusable
                backend.step(0.3)
            clocks.clear()
            # /clock is still published, at the time the body stepped to
            assert eventually(lambda: len(clocks) >= 3)
            assert clocks[-1] == pytest.approx(frozen + 0.3, abs=1e-6)
        assert not bridge.is_paused
        assert eventually(lambda: sim_time() > frozen + 0.35)  # free running again

        client = client_node.create_client(QueryScene, "/sim/query_scene")
        assert client.wait_for_service(timeout_sec=10)
        with bridge.exclusive():
            future = client.call_async(QueryScene.Request(names=["fridge"]))
            time.sleep(0.5)
            assert not future.done()  # the service waits for the lock
        assert eventually(future.done) and future.result().success
        assert future.result().containers[0].furniture == "fridge_0"
    finally:
        spinner.shutdown()
        client_node.destroy_node()
        bridge.destroy_node()


def test_a_tick_in_flight_at_shutdown_logs_no_error(ros_context, compact_spec: SceneSpec, tmp_path: Path) -> None:
    """Ctrl-C shuts the context down while the tick timer still fires: publishing then fails with "publisher's
    context is invalid", the normal end of the node, not a failed simulation tick worth an error line."""
    import rclpy
    from rclpy.parameter import Parameter

    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.bridge_node import BridgeNode

    scene = save_scene_spec(compact_spec, tmp_path / "kitchen.json")
    bridge = BridgeNode(backend=MujocoBackend(), context=ros_context, parameter_overrides=[
        Parameter("scene_path", value=str(scene)), Parameter("camera_rate_hz", value=0.0)])
    errors: list[str] = []

    class Logger:
        def error(self, message: str, **_: object) -> None:
            errors.append(message)

    bridge.get_logger = Logger  # type: ignore[method-assign]
    try:
        bridge._on_tick()
        assert errors == []
        rclpy.shutdown(context=ros_context)
        bridge._on_tick()
        assert errors == []
    finally:
        bridge.destroy_node()


def test_a_reset_that_names_its_run_starts_that_run(ros_context, compact_spec: SceneSpec, tmp_path: Path) -> None:
    from emmoe_interfaces.srv import ResetEpisode
    from rclpy.parameter import Parameter

    from habitat_bridge.bridge_node import BridgeNode

    scene = str(save_scene_spec(compact_spec, tmp_path / "kitchen.json"))
    started: list[str] = []
    node = BridgeNode(on_run_start=started.append, context=ros_context,
                      parameter_overrides=[Parameter("scene_path", value=scene)])
    try:
        for request in (ResetEpisode.Request(scene_path=scene, run_key="7/2"), ResetEpisode.Request(scene_path=scene),
                        ResetEpisode.Request(scene_json="{}", run_key="7/3")):
            node._on_reset(request, ResetEpisode.Response())
        assert started == ["7/2"]  # not for a reset that names no run, nor for one refused
    finally:
        node.destroy_node()
