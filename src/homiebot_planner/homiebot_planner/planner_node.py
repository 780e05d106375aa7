"""The HomieBot planner node: serves /emmoe/run_task and runs the EMMOE planning loop.

Per step: /sim/get_observation -> planner inference -> /subtask goal (ExecuteSubtask) -> memory update -> a
StepRecord on /emmoe/steps (also sent as the goal's feedback), until End or the step limit. At the start of a run
the simulator is reset with the task's scene.json when the task has one (parameter data_dir) and
reset_simulator is true. A run that exceeds executor_timeout_s waiting for /subtask records the step as failed
with the reason and ends with EXECUTOR_ERROR instead of hanging. Cancel is honoured between and during phases.

Usage:
    planner_node --ros-args -p backend:=smollm2
    planner_node --ros-args -p backend:=openai -p openai_model:=gpt-4o -p openai_base_url:=http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import rclpy
from emmoe_interfaces.action import ExecuteSubtask, RunTask
from emmoe_interfaces.msg import StepRecord, Subtask
from emmoe_interfaces.srv import GetObservation, ResetEpisode
from rcl_interfaces.msg import ParameterDescriptor, ParameterType
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from homiebot_planner.backends import BackendError, EpisodeInfo, create_backend
from homiebot_planner.conversions import observation_from_response, step_record
from homiebot_planner.episode import EpisodeSpec, InvalidTaskError, resolve_episode
from homiebot_planner.memory import write_conversation_json
from homiebot_planner.planner import Decision, Observation, Planner
from homiebot_planner.settings import (
    PARAMETER_DEFAULTS,
    TRI_STATE_PARAMETERS,
    build_settings,
    resolve_in_context_example,
)

_POLL_S = 0.05
_EXECUTOR_FAULTS = (ExecuteSubtask.Result.CANCELED, ExecuteSubtask.Result.BUSY, ExecuteSubtask.Result.INTERNAL_ERROR)


class RunAborted(Exception):
    """Ends a run early with a RunTask error code and message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass
class Execution:
    """What /subtask answered for one step (or why it did not)."""

    success: bool = False
    error_code: int = 0
    error_type: str = ""
    feedback: str = "None"
    fatal: str = ""
    cancelled: bool = False
    seconds: float = 0.0


@dataclass
class RunState:
    """Book-keeping of the run in progress."""

    spec: EpisodeSpec
    run_index: int
    cancel: threading.Event = field(default_factory=threading.Event)
    steps: int = 0
    ended_by_agent: bool = False


class PlannerNode(Node):
    """The planner node (see the module docstring).

    Args:
        context: rclpy context (tests pass their own).
        parameter_overrides: parameter values that replace the declared defaults (tests).

    Raises:
        ValueError: for an invalid parameter (the message names it).
        BackendError: when the backend cannot be built.
    """

    def __init__(self, context: Any = None, parameter_overrides: list[Parameter] | None = None) -> None:
        super().__init__("planner", context=context, parameter_overrides=parameter_overrides or [])
        for name, default in PARAMETER_DEFAULTS.items():
            if isinstance(default, list):
                descriptor = ParameterDescriptor(type=ParameterType.PARAMETER_STRING_ARRAY)
                self.declare_parameter(name, default, descriptor)
            elif name in TRI_STATE_PARAMETERS:
                # "auto", "true" or "false": `-p name:=true` arrives as a bool, which is accepted too.
                self.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True))
            else:
                self.declare_parameter(name, default)
        values = {name: self.get_parameter(name).value for name in PARAMETER_DEFAULTS}
        self.settings = build_settings(values)
        self.backend = create_backend(self.settings.backend)
        self.planner_config = self.settings.planner
        self.in_context_example = resolve_in_context_example(self.settings.in_context_example,
                                                             self.backend.default_in_context_example)
        self._group = ReentrantCallbackGroup()
        self._busy = threading.Lock()
        self._runs: dict[bytes, RunState] = {}
        self._observe_client: Any = self.create_client(GetObservation, "/sim/get_observation",
                                                       callback_group=self._group)
        self._reset_client: Any = self.create_client(ResetEpisode, "/sim/reset_episode", callback_group=self._group)
        self._subtask_client: Any = ActionClient(self, ExecuteSubtask, "/subtask", callback_group=self._group)
        self._steps = self.create_publisher(StepRecord, "/emmoe/steps",
                                            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        self._server = ActionServer(self, RunTask, "/emmoe/run_task", execute_callback=self._execute,
                                    goal_callback=lambda _goal: GoalResponse.ACCEPT,
                                    cancel_callback=self._on_cancel, callback_group=self._group)
        self.get_logger().info(f"planner ready: backend {self.backend.name} (observation: "
                               f"{self.backend.observation_mode}, in-context example: {self.in_context_example})")

    # ---- action server callbacks -------------------------------------------------------------------------------

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        run = self._runs.get(bytes(goal_handle.goal_id.uuid))
        if run is not None:
            run.cancel.set()
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: Any) -> RunTask.Result:
        if not self._busy.acquire(blocking=False):
            goal_handle.abort()
            return _result(RunTask.Result.BUSY, "another episode is running on this planner")
        key = bytes(goal_handle.goal_id.uuid)
        try:
            return self._run(goal_handle, key)
        except Exception as error:  # noqa: BLE001 - never let an exception escape an action callback
            self.get_logger().error(f"run failed: {type(error).__name__}: {error}")
            goal_handle.abort()
            return _result(RunTask.Result.PLANNER_ERROR, f"internal error: {type(error).__name__}: {error}")
        finally:
            self._runs.pop(key, None)
            self._busy.release()

    # ---- the run ---------------------------------------------------------------------------------------------

    def _run(self, goal_handle: Any, key: bytes) -> RunTask.Result:
        goal = goal_handle.request
        node = self.settings.node
        try:
            spec = resolve_episode(goal.task_id, goal.instruction, node.data_dir, node.tasks_file)
        except InvalidTaskError as error:
            goal_handle.abort()
            return _result(RunTask.Result.INVALID_TASK, str(error))
        run = RunState(spec=spec, run_index=goal.run_index or 1)
        self._runs[key] = run
        if goal_handle.is_cancel_requested:
            run.cancel.set()
        max_steps = goal.max_steps or node.max_steps
        config = replace(self.planner_config, in_context_example=self.in_context_example)
        planner = Planner(self.backend, spec.instruction, config)
        self.get_logger().info(f"run {spec.episode_id}/{run.run_index}: {spec.instruction!r} (max {max_steps} steps)")
        try:
            self.backend.start_episode(EpisodeInfo(episode_id=spec.episode_id, instruction=spec.instruction,
                                                   task_id=spec.task_id, task_dir=spec.task_dir))
            if spec.scene_path is not None and node.reset_simulator:
                self._reset(spec.scene_path, run.cancel)
            observation, views = self._observe(run.cancel)
            while run.steps < max_steps and not run.ended_by_agent:
                self._check_cancel(run)
                observation, views = self._step(goal_handle, run, planner, observation, views)
        except RunAborted as abort:
            return self._finish(goal_handle, run, planner, abort.error_code, str(abort))
        except BackendError as error:
            if run.cancel.is_set():
                return self._finish(goal_handle, run, planner, RunTask.Result.CANCELED, "cancelled during inference")
            return self._finish(goal_handle, run, planner, RunTask.Result.PLANNER_ERROR, str(error))
        reason = "the agent ended the run" if run.ended_by_agent else f"step limit {max_steps} reached"
        return self._finish(goal_handle, run, planner, RunTask.Result.NONE, reason)

    def _finish(self, goal_handle: Any, run: RunState, planner: Planner, error_code: int,
                message: str) -> RunTask.Result:
        """Write conversation.json, settle the goal and build the result (task progress when keypaths are known)."""
        self._write_conversation(run, planner)
        if error_code == RunTask.Result.NONE:
            goal_handle.succeed()
        elif error_code == RunTask.Result.CANCELED:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        self.get_logger().info(f"run {run.spec.episode_id}/{run.run_index} ended after {run.steps} steps: {message}")
        result = _result(error_code, "" if error_code == RunTask.Result.NONE else message, run,
                         success=run.ended_by_agent)
        result.task_progress = run.spec.task_progress(planner.memory.executed)
        return result

    def _step(self, goal_handle: Any, run: RunState, planner: Planner, observation: Observation,
              views: list[Image]) -> tuple[Observation, list[Image]]:
        inventory_before = list(planner.memory.inventory)
        decision = planner.decide(observation, run.cancel)
        self._check_cancel(run)
        run.steps += 1
        if decision.is_end:
            execution = Execution(success=True)
            run.ended_by_agent = True
        else:
            execution = self._execute_subtask(decision, inventory_before, run.cancel)
            if execution.cancelled:
                raise RunAborted(RunTask.Result.CANCELED, "cancelled during execution")
        planner.record_result(decision, execution.success, execution.feedback)
        next_observation, next_views = observation, views
        problem: RunAborted | None = None
        if execution.fatal:
            problem = RunAborted(RunTask.Result.EXECUTOR_ERROR, execution.fatal)
        elif not decision.is_end:
            try:
                next_observation, next_views = self._observe(run.cancel)
            except RunAborted as error:
                problem, next_views = error, []
        record = step_record(
            episode_id=run.spec.episode_id, instruction=run.spec.instruction, run_index=run.run_index,
            decision=decision, planner_name=self.backend.name, observation_mode=planner.observation_mode,
            inventory_before=inventory_before, inventory_after=planner.memory.inventory, success=execution.success,
            error_code=execution.error_code, error_type=execution.error_type, feedback=execution.feedback,
            execution_seconds=execution.seconds, views=next_views if self.settings.node.record_views else (),
        )
        record.header.stamp = self.get_clock().now().to_msg()
        self._steps.publish(record)
        feedback = RunTask.Feedback()
        feedback.latest = record
        goal_handle.publish_feedback(feedback)
        if problem is not None:
            raise problem
        return next_observation, next_views

    def _check_cancel(self, run: RunState) -> None:
        if run.cancel.is_set():
            raise RunAborted(RunTask.Result.CANCELED, "cancelled")

    # ---- calls to the simulator and the executor -----------------------------------------------------------------

    def _wait(self, future: Any, timeout_s: float, cancel: threading.Event | None) -> str:
        """"done", "timeout" or "cancelled"."""
        done = threading.Event()
        future.add_done_callback(lambda _future: done.set())
        deadline = time.monotonic() + timeout_s
        while not done.wait(_POLL_S):
            if cancel is not None and cancel.is_set():
                return "cancelled"
            if time.monotonic() >= deadline:
                return "timeout"
        return "done"

    def _call(self, client: Any, request: Any, timeout_s: float, cancel: threading.Event, what: str) -> Any:
        if not client.wait_for_service(timeout_sec=self.settings.node.server_wait_s):
            raise RunAborted(RunTask.Result.SIMULATOR_ERROR, f"{what}: service {client.srv_name} is not available")
        future = client.call_async(request)
        status = self._wait(future, timeout_s, cancel)
        if status == "cancelled":
            raise RunAborted(RunTask.Result.CANCELED, f"cancelled during {what}")
        if status == "timeout":
            raise RunAborted(RunTask.Result.SIMULATOR_ERROR, f"{what}: no answer within {timeout_s:g} s")
        response = future.result()
        if response is None or not response.success:
            detail = response.error_msg if response is not None else "no response"
            raise RunAborted(RunTask.Result.SIMULATOR_ERROR, f"{what} failed: {detail}")
        return response

    def _reset(self, scene_path: Path, cancel: threading.Event) -> None:
        request = ResetEpisode.Request()
        request.scene_path = str(scene_path)
        self._call(self._reset_client, request, self.settings.node.reset_timeout_s, cancel, "reset_episode")

    def _observe(self, cancel: threading.Event) -> tuple[Observation, list[Image]]:
        response = self._call(self._observe_client, GetObservation.Request(), self.settings.node.observation_timeout_s,
                              cancel, "get_observation")
        try:
            observation = observation_from_response(response)
        except ValueError as error:
            raise RunAborted(RunTask.Result.SIMULATOR_ERROR, f"get_observation: {error}") from None
        return observation, [response.front, response.left, response.back, response.right]

    def _execute_subtask(self, decision: Decision, inventory: list[str], cancel: threading.Event) -> Execution:
        node = self.settings.node
        started = time.monotonic()
        if not self._subtask_client.wait_for_server(timeout_sec=node.server_wait_s):
            return Execution(fatal="the executor action server /subtask is not available")
        goal = ExecuteSubtask.Goal()
        goal.subtask = Subtask(action=decision.subtask.action, target=decision.subtask.target,
                               place=decision.subtask.place, model=decision.model)
        goal.inventory = list(inventory)
        sent = self._subtask_client.send_goal_async(goal)
        status = self._wait(sent, node.server_wait_s, cancel)
        if status != "done":
            return Execution(cancelled=status == "cancelled",
                             fatal="" if status == "cancelled" else "/subtask did not accept the goal in time")
        handle = sent.result()
        if handle is None or not handle.accepted:
            return Execution(fatal="/subtask rejected the goal")
        result_future = handle.get_result_async()
        status = self._wait(result_future, node.executor_timeout_s, cancel)
        if status != "done":
            handle.cancel_goal_async()
            if status == "cancelled":
                return Execution(cancelled=True, seconds=time.monotonic() - started)
            reason = f"executor timeout: /subtask gave no result within {node.executor_timeout_s:g} s"
            return Execution(error_code=ExecuteSubtask.Result.INTERNAL_ERROR, feedback=reason, fatal=reason,
                             seconds=time.monotonic() - started)
        response = result_future.result()
        if response is None:
            return Execution(fatal="/subtask returned no result", seconds=time.monotonic() - started)
        result = response.result
        execution = Execution(success=result.success, error_code=result.error_code, error_type=result.error_type,
                              feedback=result.feedback or ("None" if result.success else result.error_msg),
                              seconds=time.monotonic() - started)
        if result.error_code in _EXECUTOR_FAULTS:
            execution.fatal = f"/subtask failed outside the EMMOE errors (code {result.error_code}): {result.error_msg}"
        return execution

    def _write_conversation(self, run: RunState, planner: Planner) -> None:
        directory = self.settings.node.conversation_dir
        if not directory or not planner.memory.rounds:
            return
        path = Path(directory) / run.spec.episode_id / str(run.run_index) / "conversation.json"
        try:
            write_conversation_json(path, planner.memory.rounds)
        except OSError as error:
            self.get_logger().error(f"cannot write {path}: {error}")

    def destroy_node(self) -> None:
        """Release the backend (when it was built), then the node."""
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
        super().destroy_node()


def _result(error_code: int, message: str, run: RunState | None = None, success: bool = False) -> RunTask.Result:
    result = RunTask.Result()
    result.success = success
    result.error_code = error_code
    result.error_msg = message
    result.episode_id = run.spec.episode_id if run is not None else ""
    result.steps = run.steps if run is not None else 0
    result.task_progress = -1.0
    return result


def main(args: list[str] | None = None) -> int:
    """Run the planner node until interrupted."""
    rclpy.init(args=args)
    try:
        node = PlannerNode()
    except (ValueError, BackendError) as error:
        print(f"planner_node: {error}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
