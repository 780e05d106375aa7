"""The evaluator node in its own process, fed StepRecords over DDS from the test process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from emmoe_core.qos import scores_qos, steps_qos
from emmoe_core.ros_helpers import WaitStatus, spin_until

from emmoe_eval.cli import main

pytestmark = pytest.mark.ros


def to_message(step, episode_id: str, run_index: int, instruction: str, end_reason: str = ""):
    """An rclpy StepRecord for a trajectory step, with four small views (end_reason: on a run's last record)."""
    from emmoe_interfaces.msg import StepRecord
    from sensor_msgs.msg import Image

    message = StepRecord(episode_id=episode_id, instruction=instruction, run_index=run_index, step=step.step,
                         planner="mock", observation_mode="text", success=step.success,
                         error_type=step.error_type or "", feedback=step.feedback or "",
                         inventory_after=list(step.inventory or ()), planning_seconds=0.5, end_reason=end_reason)
    message.header.stamp.sec = 100 + step.step
    message.subtask.action = step.action
    message.subtask.target = step.target
    message.subtask.place = step.place
    message.subtask.model = step.model
    for value in range(4):
        pixels = np.full((6, 5, 3), 40 * value + step.step, dtype=np.uint8)
        message.views.append(Image(height=6, width=5, encoding="rgb8", step=15, data=pixels.tobytes()))
    return message


def test_node_records_scores_and_its_bag_scores_like_its_trajectories(
        handmade, tmp_path, kit, ros_process, ros_node_factory, ros_context, capsys):
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    from emmoe_interfaces.msg import RunScore, StepRecord

    out = tmp_path / "runs"
    ros_process("-m", "emmoe_eval.evaluator_node", "--ros-args", "-p", f"out_dir:={out}",
                "-p", f"data_dir:={handmade.data_dir}", ready="evaluator ready", timeout=60)
    node = ros_node_factory("evaluator_test_client")
    publisher = node.create_publisher(StepRecord, "/emmoe/steps", steps_qos())
    scores: list[RunScore] = []
    node.create_subscription(RunScore, "/emmoe/run_scores", scores.append, scores_qos())
    finish = node.create_client(Trigger, "/emmoe_evaluator/finish_runs")
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 30) is WaitStatus.DONE, \
        "the node never subscribed"

    # Run 3/1 ends with End (its last record carries the end reason); run 91/2 is cut after two steps and closed
    # through the service.
    run = kit.runs[("3", "1")]
    for step in run:
        publisher.publish(to_message(step, "3", 1, "find a cold apple", "end" if step is run[-1] else ""))
    for step in kit.runs[("91", "2")][:2]:
        publisher.publish(to_message(step, "91", 2, "put the red bowl on the brown table"))
    assert spin_until(executor, lambda: len(scores) == 1, 30) is WaitStatus.DONE, "no score for run 3/1"
    first = scores[0]
    # Hand values of run 3/1 (conftest.py): TP 1, success, 8 steps, 1 re-plan, one D1 error.
    assert (first.episode_id, first.run_index, first.end_reason) == ("3", 1, "end")
    assert (first.task_progress, first.success, first.steps, first.replans) == (1.0, True, 8, 1)
    assert (list(first.error_types), list(first.error_counts)) == (["D1"], [1])

    assert finish.wait_for_service(timeout_sec=10)
    future = finish.call_async(Trigger.Request())
    assert spin_until(executor, lambda: future.done() and len(scores) == 2, 30) is WaitStatus.DONE, \
        "finish_runs did not answer"
    assert future.result().success and future.result().message == "finished 1 open run(s)"
    second = scores[1]
    # 91/2 steps 1-2: Go to bowl, Pick bowl -> K1 2/5, K2 2/4 -> TP 1/2, not ended; the planner never ended it,
    # so it is an infrastructure failure (reason error).
    assert (second.episode_id, second.end_reason, second.task_progress, second.success) == ("91", "error", 0.5, False)
    assert second.error_msg == "closed on request before the planner ended the run"

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
    # 91/2 ended with reason error: an infrastructure failure, left out of every metric and counted apart.
    # 1 run (3/1): SR 1, TP 1, SER 1/1, PLWSR 7/8.
    assert (from_bags["runs"], from_bags["SR"], from_bags["TP"], from_bags["SER"]) == (1, 1.0, 1.0, 1.0)
    assert (from_bags["PLWSR"], from_bags["infrastructure_failures"]) == (pytest.approx(7 / 8), 1)
    executor.remove_node(node)


def test_invalid_parameters_stop_the_node_with_one_message(tmp_path, ros_process):
    process = ros_process("-m", "emmoe_eval.evaluator_node", "--ros-args", "-p", f"out_dir:={tmp_path}",
                          "-p", "compat:=paper")
    assert process.process.wait(timeout=60) == 2
    process.wait_for("evaluator_node: error: compat must be one of default, official", timeout=5)
    assert "Traceback" not in process.output()
