"""The monitor node: its check service, and its watch while a /subtask goal executes (drops, contacts), each error
published on /emmoe/errors."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from emmoe_core.topics import CHECK_SUBTASK_SERVICE as CHECK_SERVICE
from emmoe_core.topics import ERRORS_TOPIC
from emmoe_core.topics import SUBTASK_FEEDBACK_TOPIC as FEEDBACK_TOPIC
from emmoe_core.topics import SUBTASK_STATUS_TOPIC as STATUS_TOPIC
from homiebot_executor.monitor_node import MonitorNode

pytestmark = pytest.mark.ros


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def call(client, request, timeout=10.0):
    assert client.wait_for_service(timeout_sec=timeout)
    future = client.call_async(request)
    assert wait_until(future.done, timeout), "no answer"
    return future.result()


@pytest.fixture
def spin(ros_context):
    """Spin the given nodes in a background executor; destroyed after the test."""
    from rclpy.executors import MultiThreadedExecutor

    spinner = MultiThreadedExecutor(num_threads=4, context=ros_context)
    nodes = []

    def start(*more):
        for node in more:
            spinner.add_node(node)
            nodes.append(node)

    threading.Thread(target=spinner.spin, daemon=True).start()
    yield start
    spinner.shutdown()
    for node in nodes:
        node.destroy_node()


@pytest.mark.parametrize("action,place,expect_drop", [("Go to", "", True), ("Put", "brown_table", False)])
def test_watch_publishes_drops_and_contacts_for_the_checked_subtask(ros_context, spin, static_scene, action, place,
                                                                    expect_drop):
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import ExecutionError, Subtask
    from emmoe_interfaces.srv import CheckSubtask
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    scene = static_scene.StaticSceneServer(static_scene.demo_kitchen(held="apple_0"), context=ros_context)
    monitor = MonitorNode(context=ros_context, parameter_overrides=[Parameter("watch_period_s", value=0.05)])
    driver = Node("fake_executor", context=ros_context)
    status = driver.create_publisher(GoalStatusArray, STATUS_TOPIC, 10)
    feedback = driver.create_publisher(ExecuteSubtask.Impl.FeedbackMessage, FEEDBACK_TOPIC, 10)
    errors: list = []
    driver.create_subscription(ExecutionError, ERRORS_TOPIC, errors.append, 10)
    spin(scene, monitor, driver)
    target = "apple" if action == "Put" else "fridge"
    verdict = call(driver.create_client(CheckSubtask, CHECK_SERVICE), CheckSubtask.Request(
        subtask=Subtask(action=action, target=target, place=place, model="RT-1-X"), inventory=["apple"]))
    assert verdict.passed and verdict.feedback == "None" and verdict.error_msg == ""
    assert (verdict.resolved_target, verdict.resolved_place) == (("apple_0", "brown_table_0") if action == "Put"
                                                                 else ("fridge_0", ""))
    message = ExecuteSubtask.Impl.FeedbackMessage()
    message.feedback.phase, message.feedback.attempt = "executing", 2

    def executing() -> bool:  # what the executor's action server publishes while the goal runs
        feedback.publish(message)
        status.publish(GoalStatusArray(status_list=[GoalStatus(status=GoalStatus.STATUS_EXECUTING)]))
        return monitor._samples >= 3

    assert wait_until(executing)
    scene.scene = dataclasses.replace(static_scene.demo_kitchen(held=""), contact_force=12.0)
    assert wait_until(lambda: any(error.error_type == "contact" for error in errors))
    time.sleep(0.3)
    assert {error.error_type for error in errors} == ({"drop", "contact"} if expect_drop else {"contact"})
    contact = next(error for error in errors if error.error_type == "contact")
    assert (contact.source, contact.error_code, contact.attempt, contact.feedback) == ("watch", 0, 2, "")
    assert (contact.subtask.action, contact.subtask.target, contact.subtask.place) == (action, target, place)
    assert "12.0 N" in contact.error_msg


def test_check_failures_are_published_and_a_missing_scene_is_a_fault(ros_context, spin, static_scene):
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import ExecutionError, Subtask
    from emmoe_interfaces.srv import CheckSubtask
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    monitor = MonitorNode(context=ros_context, parameter_overrides=[Parameter("scene_timeout_s", value=0.3)])
    client_node = Node("check_client", context=ros_context)
    errors: list = []
    client_node.create_subscription(ExecutionError, ERRORS_TOPIC, errors.append, 10)
    spin(monitor, client_node)
    client = client_node.create_client(CheckSubtask, CHECK_SERVICE)
    request = CheckSubtask.Request(subtask=Subtask(action="Put", target="apple", place="fridge", model="RT-1-X"),
                                   inventory=["apple"])
    fault = call(client, request)
    assert (fault.passed, fault.error_code, fault.error_type) == (False, ExecuteSubtask.Result.INTERNAL_ERROR, "")
    assert "/sim/query_scene is not available" in fault.error_msg

    class SlowScene(static_scene.StaticSceneServer):
        delay = 1.0

        def _on_query(self, request, response):
            time.sleep(self.delay)
            return super()._on_query(request, response)

    scene = SlowScene(static_scene.demo_kitchen(held=""), context=ros_context)
    spin(scene)
    assert wait_until(lambda: monitor._query.service_is_ready())
    late = call(client, request)
    assert late.error_code == ExecuteSubtask.Result.INTERNAL_ERROR
    assert late.error_msg == "/sim/query_scene gave no answer within 0.3 s"
    scene.delay = 0.0
    time.sleep(1.0)  # the late answer comes and is dropped
    failed = call(client, request)
    assert (failed.passed, failed.error_code, failed.error_type, failed.feedback) == (
        False, ExecuteSubtask.Result.L2, "L2", "Unable to put, the hand is empty")
    assert failed.error_msg == "the gripper is empty; the planner's inventory is ['apple'] but the gripper is empty"
    assert wait_until(lambda: len(errors) == 1)
    [error] = errors
    assert (error.source, error.error_type, error.error_code, error.attempt) == ("check", "L2", 4, 0)
    assert (error.subtask.action, error.subtask.place, error.feedback) == ("Put", "fridge", failed.feedback)
