"""Action clients used by the CLI: send one goal, stream its feedback, return its result.

`call_action` wraps emmoe_core.ros_helpers.send_action_goal for a private client node (time-out, cancellation on
Ctrl-C) and turns every failure into an ActionCallError with a message for the user, so the CLI commands stay thin.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from emmoe_core.dds_guard import discovery_problem

# Seconds a CLI client keeps spinning after an action's result, for feedback that was sent just before it.
FEEDBACK_DRAIN_S = 0.3


class ActionCallError(RuntimeError):
    """The action server was not found, rejected the goal, or did not answer in time."""


def require_loopback_discovery(environ: Mapping[str, str] | None = None) -> None:
    """Refuse to start nodes whose DDS traffic could leave this machine (emmoe_core.dds_guard: LOCALHOST, or
    SYSTEM_DEFAULT with the loopback Fast DDS profile); the error says what to set."""
    problem = discovery_problem(environ)
    if problem is not None:
        raise ActionCallError(problem)


require_localhost_discovery = require_loopback_discovery  # the name before SYSTEM_DEFAULT was accepted


def call_action(action_type: Any, action_name: str, goal: Any, timeout_s: float,
                on_feedback: Callable[[Any], None] | None = None, server_wait_s: float = 10.0,
                node_name: str = "homiebot_cli") -> Any:
    """Send `goal` to `action_name` from a private client node and return the result message.

    Args:
        action_type: The action class, e.g. ExecuteSubtask.
        action_name: Where it is served, e.g. "/subtask".
        goal: The goal message.
        timeout_s: Seconds to wait for the result once the goal is accepted (the goal is cancelled then).
        on_feedback: Called with each feedback message (the action's Feedback).
        server_wait_s: Seconds to wait for the server to appear and to accept the goal.
        node_name: Name of the temporary client node.

    Raises:
        ActionCallError: server missing, goal rejected, or no result in time.
        KeyboardInterrupt: after cancelling the goal (Ctrl-C).
    """
    require_loopback_discovery()
    from emmoe_core.ros_helpers import CallStatus, private_node, send_action_goal
    from emmoe_core.action_client import ActionClient

    with private_node(node_name) as private:
        client = ActionClient(private.node, action_type, action_name)
        try:
            feedback_callback = (lambda message: on_feedback(message.feedback)) if on_feedback else None
            outcome = send_action_goal(client, goal, server_wait_s, timeout_s, feedback_callback=feedback_callback,
                                       executor=private.executor)
            if feedback_callback is not None and outcome.ok:
                # A server may publish its last feedback just before the result, and the two travel apart: take what
                # has arrived before this process prints the result and exits.
                deadline = time.monotonic() + FEEDBACK_DRAIN_S
                while time.monotonic() < deadline:
                    private.executor.spin_once(timeout_sec=0.05)
        finally:
            client.destroy()
    if outcome.status is CallStatus.UNAVAILABLE:
        raise ActionCallError(f"no action server at {action_name} (ROS_DOMAIN_ID="
                              f"{os.environ.get('ROS_DOMAIN_ID', '0')}); is the stack up?")
    if not outcome.ok:
        raise ActionCallError(outcome.message)
    return outcome.result
