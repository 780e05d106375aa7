"""The bridge's video topics: the head front and third-person views, published while someone subscribes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from emmoe_core.topics import HEAD_VIDEO_TOPIC, THIRD_PERSON_VIDEO_TOPIC
from habitat_bridge import bridge_core
from habitat_bridge.scene_spec import SceneSpec, save_scene_spec


def test_video_views_are_the_head_front_and_the_view_from_behind() -> None:
    assert bridge_core.video_views(("front", "left", "back", "right", "third_front", "third_back")) == \
        {"head": "front", "third": "third_back"}
    assert bridge_core.video_views(("front", "left", "back", "right")) == {"head": "front"}  # habitat: no third view
    with pytest.raises(ValueError, match="video_rate_hz"):
        bridge_core.BridgeConfig(video_rate_hz=-1.0)


@pytest.mark.ros
def test_frames_flow_to_subscribers_also_while_a_skill_pauses_the_simulation(
        ros_context, ros_node_factory, compact_spec: SceneSpec, tmp_path: Path) -> None:
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from habitat_bridge.bridge_node import BridgeNode

    scene = save_scene_spec(compact_spec, tmp_path / "kitchen.json")
    bridge = BridgeNode(context=ros_context, parameter_overrides=[
        Parameter("scene_path", value=str(scene)), Parameter("image_size", value=64),
        Parameter("camera_rate_hz", value=0.0), Parameter("video_rate_hz", value=10.0)])
    client = ros_node_factory("video_client")
    received: dict[str, list[Image]] = {HEAD_VIDEO_TOPIC: [], THIRD_PERSON_VIDEO_TOPIC: []}
    for topic, frames in received.items():
        client.create_subscription(Image, topic, frames.append, 10)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(bridge)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        deadline = time.monotonic() + 30
        while min(len(frames) for frames in received.values()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert min(len(frames) for frames in received.values()) >= 2, "no video frames"
        third = received[THIRD_PERSON_VIDEO_TOPIC][-1]
        assert (third.width, third.height, third.encoding, third.header.frame_id) == (64, 64, "rgb8",
                                                                                      "video_third_back")
        # A skill steps the simulator itself inside paused(): the frames keep coming and show its simulated time.
        with bridge.paused():
            before = len(received[HEAD_VIDEO_TOPIC])
            start = time.monotonic()
            while time.monotonic() - start < 2.0:
                with bridge.exclusive() as backend:
                    backend.step(0.05)
                time.sleep(0.02)
            stamps = [frame.header.stamp.sec + frame.header.stamp.nanosec * 1e-9
                      for frame in received[HEAD_VIDEO_TOPIC][before:]]
        assert len(stamps) >= 2 and stamps[-1] > stamps[0], "no frames while paused"
    finally:
        executor.shutdown()
        spinner.join(timeout=10)
        bridge.destroy_node()
