"""`homiebot execute`: start the simulation stack and the executor, run subtasks through /subtask, print results.

    homiebot execute --task 12 "[Go to, fridge]" "[Open, fridge]" "[Pick, apple]"
    homiebot execute --scene my_scene.json --fail table4 "[Go to, sofa]"
    python -m homiebot_executor.execute_command --seed 3 "[Go to, brown_table]"

One JSON object per subtask on stdout: {"subtask", "success", "error_type" (null on success), "feedback"}.
The stack (homiebot_executor.sim_stack: MuJoCo, habitat_bridge's bridge node, the skill servers), the executor node
and the monitor node run as child processes in the caller's ROS domain; their logs go to stderr with a [name]
prefix (with --verbose). The inventory is carried from one subtask to the next as the planner would. Exit status:
0 when every subtask succeeded, 1 otherwise, 2 for a usage error.

The homiebot CLI discovers this command through `homiebot/commands/execute.py`, which re-exports HELP,
add_arguments and run from here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from emmoe_eval.protocol import MODELS_FOR_ACTION, parse_subtask

HELP = "run subtasks on the simulated robot through /subtask and print one JSON result per subtask"


class ExecuteError(ValueError):
    """A user mistake or a stack that did not come up: one line for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot execute`."""
    parser.add_argument("subtasks", nargs="+", metavar="SUBTASK", help='e.g. "[Go to, fridge]" "[Put, apple, sink]"')
    parser.add_argument("--scene", default="", metavar="SPEC", help="scene spec file or official EMMOE scene.json")
    parser.add_argument("--task", type=int, default=None, metavar="ID", help="EMMOE task id (its apartment)")
    parser.add_argument("--seed", type=int, default=None, help="apartment seed (without --scene/--task: 0)")
    parser.add_argument("--model", default="", help="model for every subtask (default: the one the system prompt "
                                                    "assigns to the action)")
    parser.add_argument("--fail", default="", help="failure model for the skills: skill=p,... or table4")
    parser.add_argument("--fail-seed", type=int, default=0, help="seed of the failure model")
    parser.add_argument("--routing", choices=("background", "model"), default="background",
                        help="background: every skill on M3 (default); model: the chosen model's server")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per subtask")
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds for the stack to come up")
    parser.add_argument("--verbose", action="store_true", help="forward the nodes' logs to stderr")


def default_model(action: str, target: str) -> str:
    """The model the system prompt assigns to an action (PixNav for going to objects, NoMaD for places)."""
    from emmoe_eval.names import default_alias_table

    choices = MODELS_FOR_ACTION.get(action, ())
    if action == "Go to":
        table = default_alias_table()
        is_object = any(canonical[:3].isdigit() for canonical in table.canonicals(target))
        return "PixNav" if is_object else "NoMaD"
    return choices[0] if choices else "None"


def run(args: argparse.Namespace) -> int:
    """Bring the stack up, run the subtasks, print the results; usage errors raise homiebot.cli.UsageError."""
    from homiebot.cli import UsageError

    try:
        return execute(args)
    except ExecuteError as error:
        raise UsageError(str(error)) from None


def execute(args: argparse.Namespace) -> int:
    """The command without the homiebot CLI around it.

    Raises:
        ExecuteError: a bad subtask or scene, or a stack that did not come up.
    """
    if os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") != "LOCALHOST":
        raise ExecuteError("ROS_AUTOMATIC_DISCOVERY_RANGE must be LOCALHOST (source env.sh)")
    try:
        parsed = [parse_subtask(text) for text in args.subtasks]
    except ValueError as error:
        raise ExecuteError(str(error)) from None
    from habitat_bridge import tools
    from habitat_bridge.scene_spec import save_scene_spec
    from homiebot.supervisor import ProcessSpec, Supervisor

    try:
        spec = tools.choose_scene(tools.SceneChoice(scene_path=args.scene, task_id=args.task, seed=args.seed))
    except tools.ToolError as error:
        raise ExecuteError(str(error)) from None
    with tempfile.TemporaryDirectory(prefix="homiebot_execute_") as folder:
        scene_path = str(save_scene_spec(spec, Path(folder) / "scene.json"))
        stack = [sys.executable, "-m", "homiebot_executor.sim_stack", "--scene", scene_path, "--camera-rate-hz", "0"]
        if args.fail:
            stack += ["--fail", args.fail, "--fail-seed", str(args.fail_seed)]
        specs = [ProcessSpec("sim_stack", tuple(stack)),
                 ProcessSpec("executor", (sys.executable, "-m", "homiebot_executor.executor_node", "--ros-args",
                                          "-p", f"routing:={args.routing}")),
                 ProcessSpec("monitor", (sys.executable, "-m", "homiebot_executor.monitor_node"))]
        ready = {"sim_stack": "homiebot sim stack ready", "executor": "homiebot_executor ready",
                 "monitor": "emmoe monitor ready"}
        with Supervisor(specs, out=sys.stderr, echo=args.verbose) as supervisor:
            for name, line in ready.items():
                if not supervisor.wait_for_line(name, lambda text, line=line: line in text, args.startup_timeout):
                    tail = "\n".join(supervisor.lines[name][-5:])
                    raise ExecuteError(f"{name} did not start within {args.startup_timeout:g} s:\n{tail}")
            return _send_all(parsed, args)


def _send_all(parsed: list[Any], args: argparse.Namespace) -> int:
    import rclpy
    from emmoe_interfaces.action import ExecuteSubtask
    from emmoe_interfaces.msg import Subtask
    from rclpy.action import ActionClient
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("homiebot_execute", context=context)
    spinner = SingleThreadedExecutor(context=context)
    spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    client: Any = ActionClient(node, ExecuteSubtask, "/subtask")
    failures = 0
    inventory: list[str] = []
    try:
        if not client.wait_for_server(timeout_sec=30):
            raise ExecuteError("no /subtask server appeared")
        for subtask in parsed:
            model = args.model or default_model(subtask.action, subtask.target)
            goal = ExecuteSubtask.Goal(subtask=Subtask(action=subtask.action, target=subtask.target,
                                                       place=subtask.place, model=model), inventory=inventory)
            result = _call(client, goal, args.timeout)
            inventory = list(result.inventory)
            failures += not result.success
            print(json.dumps({"subtask": str(subtask), "success": bool(result.success),
                              "error_type": result.error_type or None, "feedback": result.feedback or
                              result.error_msg}), flush=True)
    finally:
        client.destroy()
        spinner.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return 0 if failures == 0 else 1


def _call(client: Any, goal: Any, timeout: float) -> Any:
    done = threading.Event()
    future = client.send_goal_async(goal)
    future.add_done_callback(lambda _: done.set())
    if not done.wait(30):
        raise ExecuteError("/subtask did not answer the goal request")
    handle = future.result()
    if not handle.accepted:
        raise ExecuteError("/subtask rejected the goal (busy)")
    done.clear()
    result_future = handle.get_result_async()
    result_future.add_done_callback(lambda _: done.set())
    if not done.wait(timeout):
        handle.cancel_goal_async()
        raise ExecuteError(f"no result within {timeout:g} s; the goal was cancelled")
    return result_future.result().result


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (without the homiebot CLI)."""
    parser = argparse.ArgumentParser(prog="homiebot execute", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return execute(args)
    except ExecuteError as error:
        print(f"homiebot execute: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
