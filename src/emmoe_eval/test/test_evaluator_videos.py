"""The evaluator node with record_videos: frames from the bridge's video topics become per-subtask and per-run MP4s."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from emmoe_core.qos import scores_qos, steps_qos
from emmoe_core.ros_helpers import WaitStatus, spin_until

from emmoe_core.topics import HEAD_VIDEO_TOPIC, THIRD_PERSON_VIDEO_TOPIC
from emmoe_eval.videos import read_frames

pytestmark = pytest.mark.ros


def _image(level: int):
    from sensor_msgs.msg import Image

    pixels = np.full((32, 48, 3), level, dtype=np.uint8)
    return Image(height=32, width=48, encoding="rgb8", step=48 * 3, data=pixels.tobytes())


def _record(step: int, action: str, target: str, end_reason: str = ""):
    from emmoe_interfaces.msg import StepRecord

    message = StepRecord(episode_id="91", instruction="put the red bowl on the brown table", run_index=1, step=step,
                         planner="mock", observation_mode="text", success=True, end_reason=end_reason)
    message.subtask.action, message.subtask.target = action, target
    message.subtask.model = "NoMaD" if action != "End" else ""
    return message


def test_a_run_through_the_evaluator_writes_its_videos(tmp_path: Path, ros_process, ros_node_factory,
                                                       ros_context) -> None:
    from rclpy.duration import Duration
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from emmoe_interfaces.msg import RunScore, StepRecord

    out = tmp_path / "runs"
    ros_process("-m", "emmoe_eval.evaluator_node", "--ros-args", "-p", f"out_dir:={out}", "-p", "record_videos:=true",
                "-p", "write_views:=false", ready="evaluator ready", timeout=60)
    node = ros_node_factory("evaluator_videos_test")
    steps = node.create_publisher(StepRecord, "/emmoe/steps", steps_qos())
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    head = node.create_publisher(Image, HEAD_VIDEO_TOPIC, reliable)
    third = node.create_publisher(Image, THIRD_PERSON_VIDEO_TOPIC, reliable)
    scores: list[RunScore] = []
    node.create_subscription(RunScore, "/emmoe/run_scores", scores.append, scores_qos())
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    assert spin_until(executor, lambda: min(publisher.get_subscription_count()
                                             for publisher in (steps, head, third)) > 0, 30) is WaitStatus.DONE, \
        "the evaluator never subscribed to the steps and video topics"

    def frames(publisher, count: int, level: int) -> None:
        for _ in range(count):
            publisher.publish(_image(level))
            time.sleep(0.02)
        # Let the evaluator take them before the step that closes them (a frame received after the step that closes
        # its subtask is not that subtask's): wait until its reader has acknowledged every frame (one the transport
        # dropped comes back with a later reliable heartbeat), then for its executor to hand them to the recorder.
        assert publisher.wait_for_all_acked(Duration(seconds=15)), "the evaluator never acknowledged the frames"
        spin_until(executor, lambda: False, 0.3)

    def publish_step(record) -> None:
        record.header.stamp = node.get_clock().now().to_msg()  # as the planner stamps its records
        steps.publish(record)

    frames(head, 4, 60)
    frames(third, 3, 120)
    publish_step(_record(1, "Go to", "bowl"))
    spin_until(executor, lambda: False, 1.0)
    frames(head, 2, 200)
    publish_step(_record(2, "End", "", end_reason="end"))
    assert spin_until(executor, lambda: len(scores) == 1, 30) is WaitStatus.DONE, "the run was never scored"

    run_dir = out / "91" / "1"
    counts = {name: len(list(read_frames(run_dir / name))) for name in
              ("subtask1_head.mp4", "subtask1_third.mp4", "subtask2_head.mp4", "run_head.mp4", "run_third.mp4")}
    assert counts == {"subtask1_head.mp4": 4, "subtask1_third.mp4": 3, "subtask2_head.mp4": 2, "run_head.mp4": 6,
                      "run_third.mp4": 3}
    assert not (run_dir / "subtask2_third.mp4").exists()
    executor.remove_node(node)
