"""The monitor's watch: while a /subtask goal executes it samples the scene and reports drops and contacts."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from homiebot_executor.monitor_node import FEEDBACK_TOPIC, STATUS_TOPIC, MonitorNode
from homiebot_executor.static_scene import StaticSceneServer, demo_kitchen

pytestmark = pytest.mark.ros


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("action,expect_drop", [("Go to", True), ("Put", False)])
def test_drop_and_contact_while_a_goal_executes(ros_context, action, expect_drop):
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from emmoe_interfaces.action import ExecuteSubtask
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    scene = StaticSceneServer(demo_kitchen(held="apple_0"), context=ros_context)
    monitor = MonitorNode(context=ros_context, parameter_overrides=[Parameter("watch_period_s", value=0.05)])
    driver = Node("fake_executor", context=ros_context)
    status = driver.create_publisher(GoalStatusArray, STATUS_TOPIC, 10)
    feedback = driver.create_publisher(ExecuteSubtask.Impl.FeedbackMessage, FEEDBACK_TOPIC, 10)
    spinner = MultiThreadedExecutor(num_threads=4, context=ros_context)
    for node in (scene, monitor, driver):
        spinner.add_node(node)
    threading.Thread(target=spinner.spin, daemon=True).start()
    try:
        time.sleep(0.5)
        message = ExecuteSubtask.Impl.FeedbackMessage()
        message.feedback.phase, message.feedback.status = "checking", f"[{action}, fridge] (NoMaD)"
        feedback.publish(message)
        time.sleep(0.2)
        assert wait_until(lambda: (status.publish(GoalStatusArray(status_list=[GoalStatus(
            status=GoalStatus.STATUS_EXECUTING)])) or monitor._samples >= 3))
        scene.scene = dataclasses.replace(demo_kitchen(held=""), contact_force=12.0)
        assert wait_until(lambda: any(incident.kind == "contact" for incident in monitor.incidents))
        time.sleep(0.3)
        kinds = {incident.kind for incident in monitor.incidents}
        assert ("drop" in kinds) is expect_drop
    finally:
        spinner.shutdown()
        for node in (scene, monitor, driver):
            node.destroy_node()
