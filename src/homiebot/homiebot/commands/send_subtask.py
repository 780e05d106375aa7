"""`homiebot send-subtask`: the `ros2 action send_goal /subtask ...` of installs without ros2cli."""

from __future__ import annotations

import argparse
import json

from emmoe_core.topics import SUBTASK_ACTION

HELP = "send one subtask to the executor (/subtask) and print its feedback and result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot send-subtask`."""
    parser.add_argument("subtask", help='the subtask as the planner writes it: "Go to, fridge", "[Put, apple, sink]"')
    parser.add_argument("--model", default="", help="low-level model: NoMaD, PixNav, octo or RT-1-X")
    parser.add_argument("--inventory", nargs="*", default=[], metavar="OBJECT", help="what the robot holds")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the result")
    parser.add_argument("--server-wait", type=float, default=10.0, help="seconds to wait for the server to appear")
    parser.add_argument("--action-name", default=SUBTASK_ACTION, help="where ExecuteSubtask is served")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Send the goal; exit status 0 when the subtask succeeded, 1 when it failed."""
    from emmoe_core.protocol import parse_subtask
    from homiebot.cli import UsageError
    from homiebot.ros_clients import ActionCallError, call_action

    try:
        parsed = parse_subtask(args.subtask)
    except ValueError as error:
        raise UsageError(str(error)) from error
    from emmoe_core.convert import subtask_message
    from emmoe_interfaces.action import ExecuteSubtask

    goal = ExecuteSubtask.Goal(subtask=subtask_message(parsed, args.model), inventory=list(args.inventory))

    def show_feedback(feedback: ExecuteSubtask.Feedback) -> None:
        if not args.json:
            print(f"feedback: phase={feedback.phase} attempt={feedback.attempt} {feedback.status}".rstrip(), flush=True)

    try:
        result = call_action(ExecuteSubtask, args.action_name, goal, args.timeout, show_feedback,
                             server_wait_s=args.server_wait)
    except ActionCallError as error:
        raise UsageError(str(error)) from error
    code_names = {getattr(ExecuteSubtask.Result, name): name for name in dir(ExecuteSubtask.Result)
                  if name.isupper() and isinstance(getattr(ExecuteSubtask.Result, name), int)}
    summary = {
        "success": bool(result.success),
        "error_code": code_names.get(result.error_code, str(result.error_code)),
        "error_type": result.error_type,
        "feedback": result.feedback,
        "error_msg": result.error_msg,
        "inventory": list(result.inventory),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key}: {' '.join(value) if isinstance(value, list) else value}")
    return 0 if result.success else 1
