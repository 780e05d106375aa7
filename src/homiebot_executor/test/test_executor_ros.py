"""The /subtask executor node answering a client over DDS, with the scene served by another process.

The skill server is a real SkillServerNode (/skills/m3/..., /skills/rt1x/...) whose policy is scripted, so the test
controls attempts, delays and cancels; the QueryScene service is homiebot_executor.static_scene in a child process.
"""

from __future__ import annotations

import threading
import time

import pytest

from homiebot_executor.executor_node import ExecutorConfig, ExecutorNode
from homiebot_executor.monitor_node import ERRORS_TOPIC, MonitorNode
from homiebot_executor.routing import RoutingConfig
from homiebot_executor.skill_servers import RobotClaim, SkillServerNode
from homiebot_executor.skills import SkillOutcome, SkillStatus

pytestmark = pytest.mark.ros


class ScriptedPolicy:
    """Returns queued outcomes (success by default), optionally after a delay that a cancel cuts short."""

    def __init__(self) -> None:
        self.outcomes: list[SkillOutcome] = []
        self.goals: list = []
        self.delay = 0.0

    def run(self, goal, should_cancel, progress):
        self.goals.append(goal)
        deadline = time.monotonic() + self.delay
        while time.monotonic() < deadline:
            if should_cancel():
                return SkillOutcome(SkillStatus.CANCELED, "cancelled", "")
            progress("working", 1, float("nan"))
            time.sleep(0.02)
        return self.outcomes.pop(0) if self.outcomes else SkillOutcome(SkillStatus.SUCCEEDED, held_object="")


@pytest.fixture
def graph(ros_context, ros_process):
    """static_scene in a child process; executor, skill servers and a client node here."""
    from rclpy.executors import MultiThreadedExecutor

    ros_process("-m", "homiebot_executor.static_scene", ready="static scene ready")
    policy = ScriptedPolicy()
    claim = RobotClaim()
    nodes = [ExecutorNode(ExecutorConfig(routing=RoutingConfig()), context=ros_context),
             SkillServerNode("m3", policy, claim, context=ros_context),
             SkillServerNode("rt1x", policy, claim, context=ros_context),
             MonitorNode(context=ros_context)]
    from rclpy.node import Node

    client_node = Node("subtask_test_client", context=ros_context)
    spinner = MultiThreadedExecutor(num_threads=6, context=ros_context)
    for node in [*nodes, client_node]:
        spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    yield client_node, policy, nodes[0]
    spinner.shutdown()
    for node in [*nodes, client_node]:
        node.destroy_node()


def wait(future, timeout=30.0):
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    assert done.wait(timeout), "no answer in time"
    return future.result()


def send(client_node, action, target="", place="", model="RT-1-X", inventory=(), feedback=None):
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import Subtask
    from rclpy.action import ActionClient

    client = ActionClient(client_node, ExecuteSubtask, "/subtask")
    assert client.wait_for_server(timeout_sec=20)
    goal = ExecuteSubtask.Goal(subtask=Subtask(action=action, target=target, place=place, model=model),
                               inventory=list(inventory))
    handle = wait(client.send_goal_async(goal, feedback_callback=(lambda m: feedback.append(m.feedback))
                                         if feedback is not None else None))
    return client, handle


def result_of(handle):
    return wait(handle.get_result_async(), 60).result


def test_checks_answer_with_the_exact_strings(graph):
    client_node, policy, _ = graph
    cases = [(("Fetch", "apple"), "F1", "Fetch is not in the action list! You should only choose actions in the list."),
             (("Pick", "spaceship"), "F2", "spaceship does not exist! Please choose another object"),
             (("Put", "apple", "brown_table"), "L2", "Unable to put, the hand is empty"),
             (("Open", "brown_table"), "L4", "Can not open brown_table! Please choose another object"),
             (("Pick", "sofa"), "D1", "Unable to pick, the target is far away")]
    for args, code, text in cases:
        _, handle = send(client_node, *args)
        result = result_of(handle)
        assert (result.success, result.error_type, result.feedback) == (False, code, text)
        assert result.error_code == getattr(result, code)
    assert policy.goals == []


def test_success_feedback_and_routing(graph):
    client_node, policy, _ = graph
    feedback = []
    _, handle = send(client_node, "Pick", "red_apple", feedback=feedback)
    result = result_of(handle)
    assert result.success and result.error_code == result.NONE and result.feedback == "None"
    assert [(goal.skill, goal.target) for goal in policy.goals] == [("pick", "apple_0")]
    phases = [(message.phase, message.attempt) for message in feedback]
    assert phases[0] == ("checking", 0) and feedback[0].status == "[Pick, red_apple] (RT-1-X)"
    assert ("executing", 1) in phases and phases[-1] == ("verifying", 1)


def test_three_failed_attempts_give_e1(graph):
    client_node, policy, _ = graph
    policy.outcomes = [SkillOutcome(SkillStatus.TIMEOUT, "budget", "")] * 3
    _, handle = send(client_node, "Go to", "fridge", model="NoMaD")
    result = result_of(handle)
    assert (result.error_type, result.feedback) == ("E1", "Unable to go to, the subtask is too difficult to perform")
    assert [goal.skill for goal in policy.goals] == ["navigate"] * 3


def test_end_succeeds_without_a_skill(graph):
    client_node, policy, _ = graph
    _, handle = send(client_node, "End", model="None", inventory=("apple",))
    result = result_of(handle)
    assert result.success and result.feedback == "None" and list(result.inventory) == ["apple"]
    assert policy.goals == []


def test_busy_goal_is_rejected_and_cancel_is_honoured(graph):
    from emmoe_interfaces.action import ExecuteSubtask

    client_node, policy, _ = graph
    policy.delay = 20.0
    _, first = send(client_node, "Pick", "apple")
    assert first.accepted
    time.sleep(0.5)
    _, second = send(client_node, "Pick", "apple")
    assert not second.accepted
    wait(first.cancel_goal_async())
    result = result_of(first)
    assert result.error_code == ExecuteSubtask.Result.CANCELED and not result.success


def test_monitor_publishes_each_error_on_emmoe_errors(graph):
    from emmoe_interfaces.msg import StepRecord

    client_node, policy, _ = graph
    received: list = []
    client_node.create_subscription(StepRecord, ERRORS_TOPIC, received.append, 10)
    time.sleep(1.0)
    _, handle = send(client_node, "Put", "apple", "fridge", inventory=("apple",))
    assert result_of(handle).error_type == "L2"
    _, handle = send(client_node, "Pick", "apple")
    assert result_of(handle).success
    deadline = time.monotonic() + 10
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(received) == 1
    record = received[0]
    assert (record.error_type, record.error_code, record.feedback) == ("L2", 4, "Unable to put, the hand is empty")
    assert (record.subtask.action, record.subtask.target, record.subtask.place) == ("Put", "apple", "fridge")
    assert list(record.inventory_before) == ["apple"]
