"""An ExecuteSubtask action server in one process answers a client in another, over DDS on loopback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

SERVER = Path(__file__).parent / "processes" / "scripted_subtask_server.py"

pytestmark = pytest.mark.ros


def send_goal(node, context, subtask, inventory):
    """Send one /subtask goal and return (feedback messages, result)."""
    import rclpy
    from emmoe_core.action_client import ActionClient
    from rclpy.executors import SingleThreadedExecutor

    from emmoe_core.topics import SUBTASK_ACTION, SUBTASK_FEEDBACK_TOPIC
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import Subtask

    client = ActionClient(node, ExecuteSubtask, SUBTASK_ACTION)
    assert client.wait_for_server(timeout_sec=30.0), "no /subtask server discovered in the test's domain"
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    # The services can be discovered before the feedback topic: feedback sent before it matches would be lost.
    deadline = time.monotonic() + 10.0
    while node.count_publishers(SUBTASK_FEEDBACK_TOPIC) == 0 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    feedback = []
    goal = ExecuteSubtask.Goal(subtask=Subtask(**subtask), inventory=inventory)
    goal_future = client.send_goal_async(goal, feedback_callback=lambda message: feedback.append(message.feedback))
    executor.spin_until_future_complete(goal_future, timeout_sec=10.0)
    goal_handle = goal_future.result()
    assert goal_handle is not None and goal_handle.accepted
    result_future = goal_handle.get_result_async()
    executor.spin_until_future_complete(result_future, timeout_sec=10.0)
    assert result_future.done(), "no result within 10 s"
    # Feedback travels on a topic, the result through a service: the last feedback may arrive after the result.
    deadline = time.monotonic() + 5.0
    while len(feedback) < 2 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    executor.remove_node(node)
    client.destroy()
    return feedback, result_future.result().result


def test_goal_feedback_and_result_cross_process(ros_node_factory, ros_context, ros_process, ros_domain_id):
    server = ros_process(str(SERVER), ready="ready")
    assert server.process.pid != os.getpid()
    node = ros_node_factory("subtask_client")

    feedback, result = send_goal(node, ros_context, {"action": "Pick", "target": "apple", "model": "RT-1-X"}, [])
    assert [(message.phase, message.attempt) for message in feedback] == [("checking", 0), ("executing", 1)]
    assert feedback[0].status == "apple"
    assert result.success and result.error_code == result.NONE and result.feedback == "None"
    assert list(result.inventory) == ["apple"]

    _, result = send_goal(node, ros_context, {"action": "Fetch", "target": "apple", "model": "RT-1-X"}, ["bowl"])
    assert not result.success
    assert result.error_code == result.F1 and result.error_type == "F1"
    assert result.feedback == "Fetch is not in the action list! You should only choose actions in the list."
    assert list(result.inventory) == ["bowl"]


def test_server_in_another_domain_is_not_reached(ros_node_factory, ros_context, ros_process, monkeypatch):
    """Domain isolation: a server started in a different ROS_DOMAIN_ID is invisible to the test's client."""
    from emmoe_core.action_client import ActionClient

    from emmoe_interfaces.action import ExecuteSubtask

    other_domain = (int(os.environ["ROS_DOMAIN_ID"]) % 100) + 1
    monkeypatch.setenv("ROS_DOMAIN_ID", str(other_domain))
    ros_process(str(SERVER), ready="ready")
    node = ros_node_factory("isolated_client")
    client = ActionClient(node, ExecuteSubtask, "/subtask")
    assert not client.wait_for_server(timeout_sec=2.0)
    client.destroy()
