"""The evaluator node in its own process, fed StepRecords over DDS from the test process."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from emmoe_eval.cli import main

pytestmark = pytest.mark.ros


def to_message(step, episode_id: str, run_index: int, instruction: str):
    """An rclpy StepRecord for a trajectory step, with four small views."""
    from emmoe_interfaces.msg import StepRecord
    from sensor_msgs.msg import Image

    message = StepRecord(episode_id=episode_id, instruction=instruction, run_index=run_index, step=step.step,
                         planner="mock", observation_mode="text", success=step.success,
                         error_type=step.error_type or "", feedback=step.feedback or "",
                         inventory_after=list(step.inventory or ()), planning_seconds=0.5)
    message.header.stamp.sec = 100 + step.step
    message.subtask.action = step.action
    message.subtask.target = step.target
    message.subtask.place = step.place
    message.subtask.model = step.model
    for value in range(4):
        pixels = np.full((6, 5, 3), 40 * value + step.step, dtype=np.uint8)
        message.views.append(Image(height=6, width=5, encoding="rgb8", step=15, data=pixels.tobytes()))
    return message


def spin_until(executor, condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        executor.spin_once(timeout_sec=0.1)
    return condition()


def test_node_records_scores_and_its_bag_scores_like_its_trajectories(
        handmade, tmp_path, kit, ros_process, ros_node_factory, ros_context, capsys):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from emmoe_interfaces.msg import StepRecord

    out = tmp_path / "runs"
    ros_process("-m", "emmoe_eval.evaluator_node", "--ros-args", "-p", f"out_dir:={out}",
                "-p", f"data_dir:={handmade.data_dir}", ready="evaluator ready", timeout=60)
    node = ros_node_factory("evaluator_test_client")
    publisher = node.create_publisher(StepRecord, "/emmoe/steps",
                                      QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    scores: list[dict] = []
    node.create_subscription(String, "/emmoe/run_scores", lambda message: scores.append(json.loads(message.data)),
                             QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                                        durability=DurabilityPolicy.TRANSIENT_LOCAL))
    finish = node.create_client(Trigger, "/emmoe_evaluator/finish_runs")
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 30), "the node never subscribed"

    # Run 3/1 ends with End; run 91/2 is cut after two steps and ended through the service.
    for step in kit.runs[("3", "1")]:
        publisher.publish(to_message(step, "3", 1, "find a cold apple"))
    for step in kit.runs[("91", "2")][:2]:
        publisher.publish(to_message(step, "91", 2, "put the red bowl on the brown table"))
    assert spin_until(executor, lambda: len(scores) == 1, 30), "no score for run 3/1"
    first = scores[0]
    # Hand values of run 3/1 (conftest.py): TP 1, success, 8 steps, 1 re-plan, one D1 error.
    assert (first["episode_id"], first["run_index"], first["end_reason"]) == ("3", 1, "end")
    assert (first["task_progress"], first["success"], first["steps"], first["replans"]) == (1.0, True, 8, 1)

    assert finish.wait_for_service(timeout_sec=10)
    future = finish.call_async(Trigger.Request())
    assert spin_until(executor, lambda: future.done() and len(scores) == 2, 30), "finish_runs did not answer"
    assert future.result().success and future.result().message == "finished 1 open run(s)"
    second = scores[1]
    # 91/2 steps 1-2: Go to bowl, Pick bowl -> K1 2/5, K2 2/4 -> TP 1/2, not ended
    assert (second["episode_id"], second["end_reason"], second["task_progress"], second["success"]) == \
        ("91", "requested", 0.5, False)

    run_dir = out / "3" / "1"
    lines = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, 9))          # recorded in publication order
    assert sorted(path.name for path in run_dir.glob("subtask8_*.png")) == \
        ["subtask8_back.png", "subtask8_front.png", "subtask8_left.png", "subtask8_right.png"]
    assert {path.name for path in run_dir.iterdir()} >= {"episode.mcap", "conversation.json", "run.json", "score.json"}

    # The bags the node wrote score exactly like its trajectory.jsonl files.
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(out), "--json"]) == 0
    from_trajectories = json.loads(capsys.readouterr().out)
    bags = sorted(str(path) for path in out.glob("*/*/episode.mcap"))
    assert len(bags) == 2
    assert main(["score-bag", *bags, "--data", str(handmade.data_dir), "--json"]) == 0
    from_bags = json.loads(capsys.readouterr().out)
    assert from_bags == from_trajectories
    # 2 runs: SR 1/2, TP (1 + 1/2)/2 = 3/4, SER 1/1, PLWSR (7/8)/2
    assert (from_bags["runs"], from_bags["SR"], from_bags["TP"], from_bags["SER"]) == (2, 0.5, 0.75, 1.0)
    assert from_bags["PLWSR"] == pytest.approx(7 / 16)
    executor.remove_node(node)


def test_invalid_parameters_stop_the_node_with_one_message(tmp_path, ros_process):
    process = ros_process("-m", "emmoe_eval.evaluator_node", "--ros-args", "-p", f"out_dir:={tmp_path}",
                          "-p", "max_steps:=0")
    assert process.process.wait(timeout=60) == 2
    process.wait_for("evaluator_node: error: max_steps must be >= 1", timeout=5)
    assert "Traceback" not in process.output()
