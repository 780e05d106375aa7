"""The /subtask action server (emmoe_interfaces/action/ExecuteSubtask): checks, routing, the attempt loop.

For each goal: feedback "checking"; query the scene (/sim/query_scene); run the benchmark's checks in order
(F1, F2, L1-L4, D1, D2) with the exact feedback strings; route the skill by the model choice (background setting by
default: M3); run up to three attempts on `/skills/<server>/navigate|manipulate` (feedback "executing", attempt n;
each attempt starts with the skill server's arm reset); classify E1/E2/E3; query the hand for the inventory
(feedback "verifying"). End succeeds at once. A goal that arrives while one runs is rejected (the client sees the
rejection; `homiebot send-subtask` reports it as busy). Cancel requests stop the running skill. No exception escapes
a callback: faults come back as INTERNAL_ERROR with error_msg.

The checks run here, in the same code the monitor node uses (homiebot_executor.monitor); each finished goal is
published as an emmoe_interfaces/StepRecord on `/emmoe/executor/outcomes`, which the monitor turns into
`/emmoe/errors`. (A check service on the monitor needs a new interface; see the package README.)

Parameters: check_order ("spec" | "release"), far_threshold, near_threshold, max_attempts, put_retries
("paper" | "release"), routing ("background" | "model"), model_mismatch ("fallback" | "strict"), service_timeout_s,
skill_timeout_s, server_wait_s. Run: `ros2 run homiebot_executor executor_node` or
`python -m homiebot_executor.executor_node`; it prints "homiebot_executor ready".
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import rclpy
from emmoe_interfaces.action import ExecuteSubtask, Manipulate, Navigate
from emmoe_interfaces.msg import StepRecord
from emmoe_interfaces.srv import QueryScene
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future

from homiebot_executor import messages
from homiebot_executor.checks import CheckConfig, SubtaskRequest
from homiebot_executor.execution import ExecutionConfig
from homiebot_executor.monitor import subtask_text
from homiebot_executor.routing import Route, RoutingConfig
from homiebot_executor.scene import SceneSnapshot
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus
from homiebot_executor.subtask import (
    CANCELED,
    INTERNAL_ERROR,
    SceneUnavailable,
    SubtaskConfig,
    SubtaskExecutor,
    SubtaskResult,
)

READY_LINE = "homiebot_executor ready"
OUTCOMES_TOPIC = "/emmoe/executor/outcomes"
QUERY_SERVICE = "/sim/query_scene"


@dataclass(frozen=True)
class ExecutorConfig:
    """Settings of the executor node.

    Attributes:
        checks: check order and thresholds.
        execution: attempts and Put retry mode.
        routing: model routing.
        service_timeout_s: seconds to wait for /sim/query_scene.
        skill_timeout_s: seconds to wait for one skill attempt's result (the goal is cancelled after).
        server_wait_s: seconds to wait for a skill server or the scene service to appear.
    """

    checks: CheckConfig = CheckConfig()
    execution: ExecutionConfig = ExecutionConfig()
    routing: RoutingConfig = RoutingConfig()
    service_timeout_s: float = 5.0
    skill_timeout_s: float = 120.0
    server_wait_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("service_timeout_s", "skill_timeout_s", "server_wait_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ExecutorConfig.{name}: expected a positive number of seconds, "
                                 f"got {getattr(self, name)}")


def _wait(future: Future, timeout: float) -> Any:
    """Block this (worker) thread until the future completes; None on time-out."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    if not done.wait(timeout):
        return None
    return future.result()


class ExecutorNode(Node):
    """Serves /subtask (see the module docstring)."""

    def __init__(self, config: ExecutorConfig | None = None, **node_kwargs: Any) -> None:
        """Declare parameters (they override `config`), create the server and clients."""
        super().__init__("homiebot_executor", **node_kwargs)
        self.config = config or self._config_from_parameters()
        self.core = SubtaskExecutor(self._snapshot, self._attempt,
                                    SubtaskConfig(self.config.checks, self.config.execution, self.config.routing))
        self._handle: ServerGoalHandle | None = None
        self._group = ReentrantCallbackGroup()
        self._busy = threading.Lock()
        self._query: Any = self.create_client(QueryScene, QUERY_SERVICE, callback_group=self._group)
        self._skill_clients: dict[str, ActionClient] = {}
        self._outcomes = self.create_publisher(StepRecord, OUTCOMES_TOPIC, 10)
        self._goal_count = 0
        self._server = ActionServer(self, ExecuteSubtask, "/subtask", execute_callback=self._execute,
                                    goal_callback=self._on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
                                    callback_group=self._group)

    def _config_from_parameters(self) -> ExecutorConfig:
        defaults = ExecutorConfig()
        values = {
            "check_order": defaults.checks.order, "far_threshold": defaults.checks.far_threshold,
            "near_threshold": defaults.checks.near_threshold, "max_attempts": defaults.execution.max_attempts,
            "put_retries": defaults.execution.put_retries, "routing": defaults.routing.setting,
            "model_mismatch": defaults.routing.mismatch, "service_timeout_s": defaults.service_timeout_s,
            "skill_timeout_s": defaults.skill_timeout_s, "server_wait_s": defaults.server_wait_s,
        }
        for name, value in values.items():
            self.declare_parameter(name, value)
        get = {name: self.get_parameter(name).value for name in values}
        return ExecutorConfig(
            checks=CheckConfig(far_threshold=float(get["far_threshold"]), near_threshold=float(get["near_threshold"]),
                               order=str(get["check_order"])),
            execution=ExecutionConfig(max_attempts=int(get["max_attempts"]), put_retries=str(get["put_retries"])),
            routing=RoutingConfig(setting=str(get["routing"]), mismatch=str(get["model_mismatch"])),
            service_timeout_s=float(get["service_timeout_s"]), skill_timeout_s=float(get["skill_timeout_s"]),
            server_wait_s=float(get["server_wait_s"]))

    # ---- goal handling -----------------------------------------------------------------------------------------
    def _on_goal(self, _goal: ExecuteSubtask.Goal) -> GoalResponse:
        if self._busy.acquire(blocking=False):
            return GoalResponse.ACCEPT
        self.get_logger().warning("goal rejected: another subtask is running (BUSY)")
        return GoalResponse.REJECT

    def _execute(self, handle: ServerGoalHandle) -> ExecuteSubtask.Result:
        started = time.monotonic()
        goal: ExecuteSubtask.Goal = handle.request
        request = messages.request_from_subtask(goal.subtask)
        before = list(goal.inventory)
        self._handle = handle
        try:
            outcome = self.core.execute(request, before, canceled=lambda: handle.is_cancel_requested,
                                        feedback=lambda phase, attempt, status: self._feedback(phase, attempt, status))
        except Exception as error:  # never let an exception escape the callback
            self.get_logger().error(f"{subtask_text(request)}: {type(error).__name__}: {error}")
            outcome = SubtaskResult(False, INTERNAL_ERROR, "", f"{type(error).__name__}: {error}", tuple(before))
        finally:
            self._handle = None
            self._busy.release()
        if not outcome.success:
            self.get_logger().info(f"{subtask_text(request)}: {outcome.code}: {outcome.detail}")
        result = ExecuteSubtask.Result(success=outcome.success, error_code=messages.EXECUTE_CODES[outcome.code],
                                       error_type=outcome.error_type, feedback=outcome.feedback,
                                       error_msg=outcome.detail if not outcome.success else "",
                                       inventory=list(outcome.inventory))
        if outcome.code == CANCELED and handle.is_cancel_requested:
            handle.canceled()
        elif outcome.success:
            handle.succeed()
        else:
            handle.abort()
        self._publish_outcome(request, before, result, time.monotonic() - started)
        return result

    # ---- ROS calls ---------------------------------------------------------------------------------------------
    def _feedback(self, phase: str, attempt: int, status: str) -> None:
        if self._handle is not None:
            self._handle.publish_feedback(ExecuteSubtask.Feedback(phase=phase, attempt=attempt, status=status))

    def _snapshot(self) -> SceneSnapshot:
        """The current scene from /sim/query_scene.

        Raises:
            SceneUnavailable: the service is missing, slow or failing.
        """
        if not self._query.wait_for_service(timeout_sec=self.config.server_wait_s):
            raise SceneUnavailable(f"{QUERY_SERVICE} is not available (is the simulator up?)")
        response = _wait(self._query.call_async(QueryScene.Request()), self.config.service_timeout_s)
        if response is None:
            raise SceneUnavailable(f"{QUERY_SERVICE} gave no answer within {self.config.service_timeout_s:g} s")
        if not response.success:
            raise SceneUnavailable(f"{QUERY_SERVICE} failed: {response.error_msg}")
        return messages.snapshot_from_query(response)

    def _client(self, chosen: Route) -> ActionClient:
        name = chosen.action_name
        if name not in self._skill_clients:
            action_type = Navigate if chosen.skill == "navigate" else Manipulate
            self._skill_clients[name] = ActionClient(self, action_type, name, callback_group=self._group)
        return self._skill_clients[name]

    def _attempt(self, chosen: Route, goal: SkillGoal, attempt: int) -> SkillOutcome:
        """One attempt on the routed skill server (which resets the arm first)."""
        handle = self._handle
        if handle is None:
            return SkillOutcome(SkillStatus.INTERNAL_ERROR, "no goal is running")
        if not chosen.can_run:
            return SkillOutcome(SkillStatus.UNREACHABLE, f"model server {chosen.server} cannot {goal.skill}")
        client = self._client(chosen)
        if not client.wait_for_server(timeout_sec=self.config.server_wait_s):
            return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, f"no skill server at {chosen.action_name}")
        navigate = goal.skill == "navigate"
        message = messages.navigate_goal(goal) if navigate else messages.manipulate_goal(goal)

        def relay(feedback: Any) -> None:
            detail = feedback.feedback
            status = (f"{detail.distance_remaining:.2f} m to go, {detail.sim_steps} steps" if navigate
                      else f"{detail.phase}, {detail.sim_steps} steps")
            self._feedback("executing", attempt, status)

        goal_handle = _wait(client.send_goal_async(message, feedback_callback=relay), self.config.server_wait_s)
        if goal_handle is None or not goal_handle.accepted:
            return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, f"{chosen.action_name} did not accept the goal")
        result_future = goal_handle.get_result_async()
        done = threading.Event()
        result_future.add_done_callback(lambda _: done.set())
        deadline = time.monotonic() + self.config.skill_timeout_s
        cancel_sent = False
        while not done.wait(0.05):
            if (handle.is_cancel_requested or time.monotonic() > deadline) and not cancel_sent:
                goal_handle.cancel_goal_async()
                cancel_sent = True
                deadline = time.monotonic() + self.config.server_wait_s
            elif cancel_sent and time.monotonic() > deadline:
                return SkillOutcome(SkillStatus.INTERNAL_ERROR, f"{chosen.action_name} did not stop after cancel")
        result = result_future.result().result
        outcome = messages.outcome_from_navigate(result) if navigate else messages.outcome_from_manipulate(result)
        if cancel_sent and not handle.is_cancel_requested and not outcome.success:
            return SkillOutcome(SkillStatus.TIMEOUT, f"no result within {self.config.skill_timeout_s:g} s",
                                outcome.held_object, outcome.sim_steps)
        return outcome

    def _publish_outcome(self, request: SubtaskRequest, before: list[str], result: ExecuteSubtask.Result,
                         seconds: float) -> None:
        self._goal_count += 1
        record = StepRecord(step=self._goal_count, success=result.success,
                            error_code=result.error_code, error_type=result.error_type, feedback=result.feedback,
                            inventory_before=before, inventory_after=list(result.inventory),
                            execution_seconds=float(seconds))
        record.header.stamp = self.get_clock().now().to_msg()
        record.subtask.action, record.subtask.target = request.action, request.target
        record.subtask.place, record.subtask.model = request.place, request.model
        self._outcomes.publish(record)

    def destroy_node(self) -> None:
        """Destroy the action server and clients with the node."""
        self._server.destroy()
        for client in self._skill_clients.values():
            client.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of `executor_node`."""
    rclpy.init(args=args)
    node = None
    try:
        node = ExecutorNode()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        print(READY_LINE, flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ValueError as error:  # a bad parameter: one line, no traceback
        print(f"executor_node: error: {error}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
