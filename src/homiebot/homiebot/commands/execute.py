"""`homiebot execute`: start the simulation stack and the executor, run subtasks through /subtask, print results.

    homiebot execute --task 12 "[Go to, fridge]" "[Open, fridge]" "[Pick, apple]"
    homiebot execute --scene my_scene.json --fail table4 "[Go to, sofa]"
    python -m homiebot.commands.execute --seed 3 "[Go to, brown_table]"

One JSON object per subtask on stdout: {"subtask", "success", "error_type" (null on success), "feedback"}.
The stack (homiebot.sim_stack: MuJoCo, habitat_bridge's bridge node, the skill servers), the executor node
and the monitor node run as child processes in the caller's ROS domain; their logs go to stderr with a [name]
prefix (with --verbose). The inventory is carried from one subtask to the next as the planner would. Exit status:
0 when every subtask succeeded, 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from emmoe_core.protocol import default_model, parse_subtask

HELP = "run subtasks on the simulated robot through /subtask and print one JSON result per subtask"


class ExecuteError(ValueError):
    """A user mistake or a stack that did not come up: one line for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot execute`."""
    parser.add_argument("subtasks", nargs="+", metavar="SUBTASK", help='e.g. "[Go to, fridge]" "[Put, apple, sink]"')
    parser.add_argument("--scene", default="", metavar="SPEC", help="scene spec file or official EMMOE scene.json")
    parser.add_argument("--task", type=int, default=None, metavar="ID",
                        help="EMMOE task id: its benchmark scene (DATA/<split>/<id>/scene.json), else its apartment")
    parser.add_argument("--data", type=Path, default=Path("data"), help="EMMOE data folder for --task (default: data)")
    parser.add_argument("--seed", type=int, default=None, help="apartment seed (without --scene/--task: 0)")
    parser.add_argument("--model", default="", help="model for every subtask (default: the one the system prompt "
                                                    "assigns to the action)")
    parser.add_argument("--fail", default="", help="failure model for the skills: table4 (the paper's skills, per "
                        "execution), skill=p,... (per attempt) or execution:skill=p,...")
    parser.add_argument("--fail-seed", type=int, default=0, help="seed of the failure model")
    parser.add_argument("--routing", choices=("background", "model"), default="background",
                        help="background: every skill on M3 (default); model: the chosen model's server")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per subtask")
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds for the stack to come up")
    parser.add_argument("--verbose", action="store_true", help="forward the nodes' logs to stderr")


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
    from homiebot.bringup import require_loopback_stack, stack_environment

    require_loopback_stack(ExecuteError)
    try:
        parsed = [parse_subtask(text) for text in args.subtasks]
    except ValueError as error:
        raise ExecuteError(str(error)) from None
    from habitat_bridge import tools
    from habitat_bridge.scene_spec import save_scene_spec
    from homiebot.supervisor import ProcessSpec, Supervisor

    scene_file = benchmark_scene(args.data, args.task) if args.task is not None and not args.scene else None
    choice = (tools.SceneChoice(scene_path=str(scene_file), seed=args.seed) if scene_file is not None else
              tools.SceneChoice(scene_path=args.scene, task_id=args.task, seed=args.seed))
    try:
        spec = tools.choose_scene(choice)
    except tools.ToolError as error:
        raise ExecuteError(str(error)) from None
    with tempfile.TemporaryDirectory(prefix="homiebot_execute_") as folder:
        scene_path = str(save_scene_spec(spec, Path(folder) / "scene.json"))
        stack = [sys.executable, "-m", "homiebot.sim_stack", "--scene", scene_path, "--camera-rate-hz", "0"]
        if args.fail:
            stack += ["--fail", args.fail, "--fail-seed", str(args.fail_seed)]
        environment = stack_environment(None)
        specs = [ProcessSpec("sim_stack", tuple(stack), environment),
                 ProcessSpec("executor", (sys.executable, "-m", "homiebot_executor.executor_node", "--ros-args",
                                          "-p", f"routing:={args.routing}"), environment),
                 ProcessSpec("monitor", (sys.executable, "-m", "homiebot_executor.monitor_node"), environment)]
        ready = {"sim_stack": "homiebot sim stack ready", "executor": "homiebot_executor ready",
                 "monitor": "emmoe monitor ready"}
        with Supervisor(specs, out=sys.stderr, echo=args.verbose) as supervisor:
            for name, line in ready.items():
                if not supervisor.wait_for_line(name, lambda text, line=line: line in text, args.startup_timeout):
                    tail = "\n".join(supervisor.lines[name][-5:])
                    raise ExecuteError(f"{name} did not start within {args.startup_timeout:g} s:\n{tail}")
            return _send_all(parsed, args)


def benchmark_scene(data_dir: Path, task_id: int) -> Path | None:
    """The scene.json the benchmark runs task `task_id` in, when the data folder (if there is one) has that task."""
    from emmoe_eval.dataset import SCENE_FILE, DatasetError, find_task

    if not data_dir.is_dir():
        return None
    try:
        task = find_task(data_dir, str(task_id))
    except DatasetError as error:
        raise ExecuteError(str(error)) from None
    scene = task.directory / SCENE_FILE if task is not None else None
    return scene if scene is not None and scene.is_file() else None


def _send_all(parsed: list[Any], args: argparse.Namespace) -> int:
    from emmoe_core.ros_helpers import private_node, send_action_goal
    from emmoe_core.topics import SUBTASK_ACTION
    from emmoe_core.action_client import ActionClient
    from emmoe_core.convert import subtask_message
    from emmoe_interfaces.action import ExecuteSubtask

    failures = 0
    inventory: list[str] = []
    with private_node("homiebot_execute") as private:
        client: Any = ActionClient(private.node, ExecuteSubtask, SUBTASK_ACTION)
        try:
            for subtask in parsed:
                model = args.model or default_model(subtask)
                goal = ExecuteSubtask.Goal(subtask=subtask_message(subtask, model), inventory=inventory)
                outcome = send_action_goal(client, goal, accept_timeout_s=30.0, result_timeout_s=args.timeout,
                                           server_wait_s=30.0, executor=private.executor)
                if not outcome.ok:
                    raise ExecuteError(outcome.message)
                result = outcome.result
                inventory = list(result.inventory)
                failures += not result.success
                print(json.dumps({"subtask": str(subtask), "success": bool(result.success),
                                  "error_type": result.error_type or None, "feedback": result.feedback or
                                  result.error_msg}), flush=True)
        finally:
            client.destroy()
    return 0 if failures == 0 else 1


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
