"""The simulation stack (MuJoCo + bridge + skill servers) in a child process, the executor node here."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("mujoco")

from homiebot_executor.executor_node import ExecutorNode  # noqa: E402

pytestmark = pytest.mark.ros


def test_subtasks_run_on_the_simulated_robot(ros_context, ros_process):
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import Subtask
    from emmoe_core.action_client import ActionClient
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    ros_process("-m", "homiebot.sim_stack", "--compact", "--rate-hz", "20", "--camera-rate-hz", "0",
                ready="homiebot sim stack ready", timeout=60)
    executor_node = ExecutorNode(context=ros_context)
    client_node = Node("stack_client", context=ros_context)
    spinner = MultiThreadedExecutor(num_threads=4, context=ros_context)
    spinner.add_node(executor_node)
    spinner.add_node(client_node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    client = ActionClient(client_node, ExecuteSubtask, "/subtask")
    try:
        assert client.wait_for_server(timeout_sec=20)
        inventory: list[str] = []
        results = []
        for action, target, place, model in (("Go to", "cracker_box", "", "PixNav"), ("Pick", "cracker_box", "", "RT-1-X"),
                                             ("Open", "fridge", "", "octo"), ("Go to", "brown_table", "", "NoMaD"),
                                             ("Put", "cracker_box", "brown_table", "RT-1-X")):
            goal = ExecuteSubtask.Goal(subtask=Subtask(action=action, target=target, place=place, model=model),
                                       inventory=inventory)
            done = threading.Event()
            future = client.send_goal_async(goal)
            future.add_done_callback(lambda _: done.set())
            assert done.wait(20)
            result_future = future.result().get_result_async()
            done.clear()
            result_future.add_done_callback(lambda _: done.set())
            assert done.wait(120), f"no result for {action} {target}"
            result = result_future.result().result
            results.append((action, result.success, result.error_type, result.feedback, list(result.inventory)))
            inventory = list(result.inventory)
        assert results == [
            ("Go to", True, "", "None", []), ("Pick", True, "", "None", ["cracker_box"]),
            ("Open", False, "L1", "Unable to open, the hand is full", ["cracker_box"]),
            ("Go to", True, "", "None", ["cracker_box"]), ("Put", True, "", "None", [])]
    finally:
        client.destroy()
        spinner.shutdown()
        executor_node.destroy_node()
        client_node.destroy_node()


def test_no_background_runs_the_sensor_skills_and_m3_refuses(ros_context):
    """In no_background the four model servers share the sensor-only skills (a --remote still wins), and m3
    answers every goal PRIVILEGED_REFUSED through its action server without touching the robot."""
    from emmoe_core.action_client import ActionClient
    from emmoe_core.ros_helpers import send_action_goal
    from emmoe_interfaces.action import Manipulate
    from habitat_bridge.sensor_only import SensorOnlyRobot
    from homiebot_executor.policies.remote import RemotePolicy
    from homiebot_executor.policies.sensor import SensorSkills
    from homiebot_executor.skill_servers import RefusingPolicy, SkillServerNode
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    from homiebot.sim_stack import M3_REFUSAL, StackOptions, build_nodes

    options = StackOptions(setting="no_background", remote=("octo=http://127.0.0.1:9",), camera_rate_hz=0.0)
    nodes = build_nodes(options, "", context=ros_context)
    client_node = Node("setting_client", context=ros_context)
    spinner = MultiThreadedExecutor(num_threads=4, context=ros_context)
    for node in (*nodes, client_node):
        spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    try:
        policies = {node.server: node.policy for node in nodes if isinstance(node, SkillServerNode)}
        assert isinstance(policies["nomad"], SensorSkills)
        assert policies["nomad"] is policies["pixnav"] is policies["rt1x"]
        assert isinstance(policies["octo"], RemotePolicy)
        assert isinstance(policies["m3"], RefusingPolicy)
        robot = policies["nomad"].context.backend
        assert isinstance(robot, SensorOnlyRobot) and robot._backend is nodes[0].backend
        # The default perception of no_background: the learned detector, one for the skills, one for the planner's
        # text observation (each keeps its own tracks).
        from emmoe_core.perception.learned import LearnedDetector

        assert isinstance(policies["nomad"].context.detector, LearnedDetector)
        assert isinstance(nodes[0].detector, LearnedDetector)
        assert nodes[0].detector is not policies["nomad"].context.detector
        calls = dict(robot.calls)
        client = ActionClient(client_node, Manipulate, "/skills/m3/manipulate")
        outcome = send_action_goal(client, Manipulate.Goal(skill="pick", target="apple"), 10.0, 10.0,
                                   request_tries=3)
        assert outcome.ok and not outcome.result.success
        assert outcome.result.error_code == Manipulate.Result.PRIVILEGED_REFUSED
        assert outcome.result.error_msg == M3_REFUSAL
        assert robot.calls == calls and not robot.refused  # the refusal never touched the robot
    finally:
        spinner.shutdown()
        for node in (*nodes, client_node):
            node.destroy_node()
