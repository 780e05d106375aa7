"""A scripted ExecuteSubtask server for the cross-process action test (no simulator behind it).

It serves /subtask, publishes two feedback messages per goal and answers deterministically from the
goal alone: "Pick" adds the target to the inventory, an action outside the EMMOE list gets F1 with the
benchmark's feedback string, anything else succeeds unchanged. Prints "ready" once the server exists.
"""

from __future__ import annotations

import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from emmoe_interfaces.action import ExecuteSubtask

ACTIONS = ("Go to", "Pick", "Put", "Open", "Close", "End")


def execute(goal_handle: rclpy.action.server.ServerGoalHandle) -> ExecuteSubtask.Result:
    """Answer one goal from its content alone."""
    goal = goal_handle.request
    for phase, attempt in (("checking", 0), ("executing", 1)):
        goal_handle.publish_feedback(ExecuteSubtask.Feedback(phase=phase, attempt=attempt, status=goal.subtask.target))
    result = ExecuteSubtask.Result(inventory=list(goal.inventory))
    if goal.subtask.action not in ACTIONS:
        result.error_code = ExecuteSubtask.Result.F1
        result.error_type = "F1"
        result.feedback = f"{goal.subtask.action} is not in the action list! You should only choose actions in the list."
    else:
        result.success = True
        result.feedback = "None"
        if goal.subtask.action == "Pick":
            result.inventory.append(goal.subtask.target)
    goal_handle.succeed()
    return result


def main() -> None:
    """Serve /subtask until interrupted."""
    rclpy.init()
    node = Node("scripted_subtask_server")
    ActionServer(node, ExecuteSubtask, "/subtask", execute)
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    print("ready", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
