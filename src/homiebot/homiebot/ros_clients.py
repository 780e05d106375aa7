"""Action clients used by the CLI: send one goal, stream its feedback, return its result.

`call_action` is the one place that spins a client node until a result arrives, with a time-out
and cancellation on Ctrl-C, so the CLI commands stay thin.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

DISCOVERY_RANGE_ERROR = (
    "ROS_AUTOMATIC_DISCOVERY_RANGE must be LOCALHOST before any node starts (source env.sh)"
)


class ActionCallError(RuntimeError):
    """The action server was not found, rejected the goal, or did not answer in time."""


def require_localhost_discovery() -> None:
    """Refuse to start nodes whose DDS discovery could leave this machine."""
    if os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") != "LOCALHOST":
        raise ActionCallError(DISCOVERY_RANGE_ERROR)


def call_action(action_type: Any, action_name: str, goal: Any, timeout_s: float,
                on_feedback: Callable[[Any], None] | None = None, server_wait_s: float = 10.0,
                node_name: str = "homiebot_cli") -> Any:
    """Send `goal` to `action_name` and return the result message.

    Args:
        action_type: The action class, e.g. ExecuteSubtask.
        action_name: Where it is served, e.g. "/subtask".
        goal: The goal message.
        timeout_s: Seconds to wait for the result once the goal is accepted (the goal is cancelled then).
        on_feedback: Called with each feedback message.
        server_wait_s: Seconds to wait for the server to appear.
        node_name: Name of the temporary client node.

    Raises:
        ActionCallError: server missing, goal rejected, or no result in time.
    """
    require_localhost_discovery()
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node(node_name, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    client = ActionClient(node, action_type, action_name)
    try:
        if not client.wait_for_server(timeout_sec=server_wait_s):
            raise ActionCallError(f"no action server at {action_name} (ROS_DOMAIN_ID="
                                  f"{os.environ.get('ROS_DOMAIN_ID', '0')}); is the stack up?")
        feedback_callback = (lambda message: on_feedback(message.feedback)) if on_feedback else None
        goal_future = client.send_goal_async(goal, feedback_callback=feedback_callback)
        executor.spin_until_future_complete(goal_future, timeout_sec=server_wait_s)
        goal_handle = goal_future.result()
        if goal_handle is None:
            raise ActionCallError(f"{action_name} did not answer the goal request")
        if not goal_handle.accepted:
            raise ActionCallError(f"{action_name} rejected the goal (busy with another one?)")
        result_future = goal_handle.get_result_async()
        try:
            executor.spin_until_future_complete(result_future, timeout_sec=timeout_s)
        except KeyboardInterrupt:
            cancel = goal_handle.cancel_goal_async()
            executor.spin_until_future_complete(cancel, timeout_sec=5.0)
            raise
        if not result_future.done():
            cancel = goal_handle.cancel_goal_async()
            executor.spin_until_future_complete(cancel, timeout_sec=5.0)
            raise ActionCallError(f"{action_name} gave no result within {timeout_s:.0f} s; the goal was cancelled")
        return result_future.result().result
    finally:
        client.destroy()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
