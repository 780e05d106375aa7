"""The HomieBot planner node: serves /emmoe/run_task and runs the EMMOE episode loop (`rollout.run_episode`).

Per step: /sim/get_observation -> planner inference -> /subtask goal (ExecuteSubtask) -> memory update (feedback and
the executor's inventory) -> a StepRecord on /emmoe/steps (also sent as the goal's feedback), until the run ends.
The last StepRecord of a run carries its end reason (end, step_limit, gave_up, cancelled, error); a run that ends
before executing anything more gets a run-end marker record (no subtask). At the start of a run the simulator is
reset with the task's scene.json when the task has one (parameter data_dir) and reset_simulator is true. A run that
exceeds executor_timeout_s waiting for /subtask ends with reason error (EXECUTOR_ERROR) instead of hanging; faults
are never recorded as the planner's own result. Cancel is honoured between and during phases.

Usage:
    planner_node --ros-args -p backend:=smollm2
    planner_node --ros-args -p backend:=openai -p openai_model:=gpt-4o -p openai_base_url:=http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from emmoe_core import topics
from emmoe_core.action_client import ActionClient
from emmoe_core.convert import subtask_message
from emmoe_core.qos import steps_qos
from emmoe_core.robot.messages import snapshot_from_query
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.ros_helpers import CallStatus, ParameterSpec, call_service, declare_config, send_action_goal, \
    spin_node
from emmoe_interfaces.action import ExecuteSubtask, RunTask
from emmoe_interfaces.msg import StepRecord
from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter

from homiebot_planner.backends import BackendError, EpisodeInfo, OracleBackend, create_backend
from homiebot_planner.backends.dagger import DaggerBackend
from homiebot_planner.conversions import observation_from_response, step_record
from homiebot_planner.episode import EpisodeSpec, InvalidTaskError, resolve_episode
from homiebot_planner.memory import write_conversation_json
from homiebot_planner.planner import Decision, Planner
from homiebot_planner.rollout import (
    EndReason,
    EpisodeCancelled,
    EpisodeFault,
    EpisodeResult,
    EpisodeStep,
    Execution,
    FaultSource,
    Observed,
    run_episode,
)
from homiebot_planner.settings import DYNAMIC_TYPED_PARAMETERS, PlannerParameters, build_settings

_EXECUTOR_FAULTS = (ExecuteSubtask.Result.CANCELED, ExecuteSubtask.Result.BUSY, ExecuteSubtask.Result.INTERNAL_ERROR)
_FAULT_CODES = {FaultSource.SIMULATOR: RunTask.Result.SIMULATOR_ERROR, FaultSource.EXECUTOR: RunTask.Result.EXECUTOR_ERROR,
                FaultSource.PLANNER: RunTask.Result.PLANNER_ERROR}


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
        # Dynamically typed parameters take several types: `-p in_context_example:=true` arrives as a bool.
        parameters: PlannerParameters = declare_config(self, PlannerParameters, parameters={
            name: ParameterSpec(dynamic_typing=True) for name in DYNAMIC_TYPED_PARAMETERS})
        self.settings = build_settings(parameters)
        self.backend = create_backend(self.settings.backend)
        if self.settings.dagger is not None:
            self.backend = DaggerBackend(self.backend, OracleBackend(self.settings.oracle), self.settings.dagger)
        self.planner_config = self.settings.planner
        self.in_context_example = self.settings.uses_in_context_example(self.backend.default_in_context_example)
        self._group = ReentrantCallbackGroup()
        self._busy = threading.Lock()
        self._cancels: dict[bytes, threading.Event] = {}
        self._observe_client: Any = self.create_client(GetObservation, topics.GET_OBSERVATION_SERVICE,
                                                       callback_group=self._group)
        self._reset_client: Any = self.create_client(ResetEpisode, topics.RESET_EPISODE_SERVICE, callback_group=self._group)
        self._scene_client: Any = (self.create_client(QueryScene, topics.QUERY_SCENE_SERVICE, callback_group=self._group)
                                   if self.backend.needs_scene else None)
        self._subtask_client: Any = ActionClient(self, ExecuteSubtask, topics.SUBTASK_ACTION, callback_group=self._group)
        self._steps = self.create_publisher(StepRecord, topics.STEPS_TOPIC, steps_qos())
        self._server = ActionServer(self, RunTask, topics.RUN_TASK_ACTION, execute_callback=self._execute,
                                    goal_callback=lambda _goal: GoalResponse.ACCEPT,
                                    cancel_callback=self._on_cancel, callback_group=self._group)
        self.get_logger().info(f"planner ready: backend {self.backend.name} (observation: "
                               f"{self.backend.observation_mode}, in-context example: {self.in_context_example})")

    # ---- action server callbacks -------------------------------------------------------------------------------

    def publish_step(self, record: StepRecord) -> None:
        """Publish a StepRecord on /emmoe/steps (transient-local: an evaluator that matches late still gets it)."""
        self._steps.publish(record)

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        cancel = self._cancels.get(bytes(goal_handle.goal_id.uuid))
        if cancel is not None:
            cancel.set()
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
            self._cancels.pop(key, None)
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
        cancel = threading.Event()
        self._cancels[key] = cancel
        if goal_handle.is_cancel_requested:
            cancel.set()
        run_index = goal.run_index or 1
        max_steps = goal.max_steps or node.max_steps
        planner = Planner(self.backend, spec.instruction, replace(self.planner_config,
                                                                  in_context_example=self.in_context_example))
        self.get_logger().info(f"run {spec.episode_id}/{run_index}: {spec.instruction!r} (max {max_steps} steps)")
        io = _StackIO(self, spec, run_index, planner, goal_handle, cancel)
        if self.backend.needs_scene:
            self.backend.attach_scene(io.query_scene)
        try:
            self.backend.start_episode(EpisodeInfo(episode_id=spec.episode_id, instruction=spec.instruction,
                                                   task_id=spec.task_id, task_dir=spec.task_dir))
            if spec.scene_path is not None and node.reset_simulator:
                io.reset(spec.scene_path)
        except (EpisodeFault, BackendError) as error:
            source = error.source if isinstance(error, EpisodeFault) else FaultSource.PLANNER
            io.record(EpisodeStep(number=1, decision=None, execution=None, inventory_before=(),
                                  end_reason=EndReason.ERROR, error_msg=str(error)))
            outcome = EpisodeResult(EndReason.ERROR, 0, str(error), source)
        except EpisodeCancelled:
            io.record(EpisodeStep(number=1, decision=None, execution=None, inventory_before=(),
                                  end_reason=EndReason.CANCELLED))
            outcome = EpisodeResult(EndReason.CANCELLED, 0, "cancelled during the simulator reset")
        else:
            outcome = run_episode(planner, io, io, io, max_steps, cancel)
        return self._finish(goal_handle, spec, run_index, planner, io, outcome)

    def _finish(self, goal_handle: Any, spec: EpisodeSpec, run_index: int, planner: Planner, io: _StackIO,
                outcome: EpisodeResult) -> RunTask.Result:
        """Write conversation.json, settle the goal and build the result (the evaluator scores the run)."""
        self._write_conversation(spec, run_index, planner)
        if outcome.end_reason is EndReason.ERROR:
            error_code = _FAULT_CODES[outcome.fault_source or FaultSource.PLANNER]
            goal_handle.abort()
        elif outcome.end_reason is EndReason.CANCELLED:
            error_code = RunTask.Result.CANCELED
            goal_handle.canceled()
        else:
            error_code = RunTask.Result.NONE
            goal_handle.succeed()
        self.get_logger().info(f"run {spec.episode_id}/{run_index} ended after {outcome.steps} steps "
                               f"({outcome.end_reason.value}): {outcome.message}")
        message = outcome.message if error_code != RunTask.Result.NONE else ""
        result = _result(error_code, message, spec.episode_id, outcome.steps, success=outcome.ended_by_agent)
        result.end_reason = outcome.end_reason.value
        return result

    def _write_conversation(self, spec: EpisodeSpec, run_index: int, planner: Planner) -> None:
        directory = self.settings.node.conversation_dir
        if not directory or not planner.memory.rounds:
            return
        path = Path(directory) / spec.episode_id / str(run_index) / "conversation.json"
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


class _StackIO:
    """The episode loop's observer, executor and recorder for one run, over the stack's ROS interfaces."""

    def __init__(self, node: PlannerNode, spec: EpisodeSpec, run_index: int, planner: Planner, goal_handle: Any,
                 cancel: threading.Event) -> None:
        self.node = node
        self.settings = node.settings.node
        self.spec = spec
        self.run_index = run_index
        self.planner = planner
        self.goal_handle = goal_handle
        self.cancel = cancel

    def _call(self, client: Any, request: Any, timeout_s: float, what: str) -> Any:
        outcome = call_service(client, request, timeout_s, cancel=self.cancel, server_wait_s=self.settings.server_wait_s)
        if outcome.status is CallStatus.CANCELLED:
            raise EpisodeCancelled(f"cancelled during {what}")
        if not outcome.ok:
            raise EpisodeFault(FaultSource.SIMULATOR, f"{what}: {outcome.message}")
        response = outcome.response
        if not response.success:
            raise EpisodeFault(FaultSource.SIMULATOR, f"{what} failed: {response.error_msg}")
        return response

    def reset(self, scene_path: Path) -> None:
        """Reset the simulator with the task's scene for this run (raises EpisodeFault, EpisodeCancelled)."""
        request = ResetEpisode.Request()
        request.scene_path = str(scene_path)
        request.run_key = f"{self.spec.episode_id}/{self.run_index}"
        self._call(self.node._reset_client, request, self.settings.reset_timeout_s, "reset_episode")

    def observe(self) -> Observed:
        """The current observation from /sim/get_observation."""
        response = self._call(self.node._observe_client, GetObservation.Request(),
                              self.settings.observation_timeout_s, "get_observation")
        try:
            observation = observation_from_response(response, decode_images=self.planner.observation_mode == "images")
        except ValueError as error:
            raise EpisodeFault(FaultSource.SIMULATOR, f"get_observation: {error}") from None
        return Observed(observation, [response.front, response.left, response.back, response.right])

    def query_scene(self) -> SceneSnapshot:
        """The privileged scene from /sim/query_scene (for a backend that reads it: the re-planning expert)."""
        response = self._call(self.node._scene_client, QueryScene.Request(), self.settings.observation_timeout_s,
                              "query_scene")
        return snapshot_from_query(response)

    def execute(self, decision: Decision, inventory: Sequence[str]) -> Execution:
        """Send the subtask to /subtask and wait for its result."""
        goal = ExecuteSubtask.Goal()
        goal.subtask = subtask_message(decision.subtask, decision.model)
        goal.inventory = list(inventory)
        started = time.monotonic()
        outcome = send_action_goal(self.node._subtask_client, goal, accept_timeout_s=self.settings.server_wait_s,
                                   result_timeout_s=self.settings.executor_timeout_s, cancel=self.cancel,
                                   server_wait_s=self.settings.server_wait_s)
        seconds = time.monotonic() - started
        if outcome.status is CallStatus.CANCELLED:
            raise EpisodeCancelled("cancelled during execution")
        if outcome.status is CallStatus.TIMEOUT:
            fault = f"executor timeout: /subtask gave no result within {self.settings.executor_timeout_s:g} s"
        elif not outcome.ok:
            fault = f"/subtask: {outcome.message}"
        if not outcome.ok:
            return Execution(success=False, inventory=tuple(inventory), error_code=ExecuteSubtask.Result.INTERNAL_ERROR,
                             feedback=fault, seconds=seconds, fault=fault)
        result = outcome.result
        execution = Execution(
            success=result.success, inventory=tuple(result.inventory), error_code=result.error_code,
            error_type=result.error_type, feedback=result.feedback or ("None" if result.success else result.error_msg),
            target_instance=result.target_instance, target_canonical=result.target_canonical,
            place_instance=result.place_instance, place_canonical=result.place_canonical, seconds=seconds)
        if result.error_code in _EXECUTOR_FAULTS:
            execution = replace(execution, fault=f"/subtask failed outside the EMMOE errors (code {result.error_code}): "
                                                 f"{result.error_msg}")
        return execution

    def record(self, step: EpisodeStep) -> None:
        """Publish the step's StepRecord on /emmoe/steps and as the goal's feedback."""
        record = step_record(self.spec.episode_id, self.spec.instruction, self.run_index, self.node.backend.name,
                             self.planner.observation_mode, step,
                             views=step.views if self.settings.record_views else ())
        record.header.stamp = self.node.get_clock().now().to_msg()
        self.node.publish_step(record)
        feedback = RunTask.Feedback()
        feedback.latest = record
        self.goal_handle.publish_feedback(feedback)


def _result(error_code: int, message: str, episode_id: str = "", steps: int = 0,
            success: bool = False) -> RunTask.Result:
    result = RunTask.Result()
    result.success = success
    result.error_code = error_code
    result.error_msg = message
    result.episode_id = episode_id
    result.steps = steps
    return result


def main(args: list[str] | None = None) -> int:
    """Run the planner node until interrupted (exit status 2 for a bad parameter or backend)."""
    return spin_node(PlannerNode, args, name="planner_node", config_errors=(ValueError, BackendError))


if __name__ == "__main__":
    sys.exit(main())
