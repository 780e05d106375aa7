"""The /subtask action server (emmoe_interfaces/action/ExecuteSubtask): checks, routing, the attempt loop.

For each goal: feedback "checking"; have the checks run in order (F1, F2, L1-L4, D1, D2) on one scene query, with
the exact feedback strings; route the skill by the model choice (background setting by default: M3);
run up to three attempts on `/skills/<server>/navigate|manipulate` (feedback "executing", attempt n; each attempt
starts with the skill server's arm reset); classify E1/E2/E3; take the hand from the skill's result for the
inventory (feedback "verifying"). End succeeds at once. A goal that arrives while one runs is rejected (the client
sees the rejection; `homiebot send-subtask` reports it as busy). Cancel requests stop the running skill. No
exception escapes a callback: faults come back as INTERNAL_ERROR with error_msg.

The checks: the executor asks the error-detection monitor (`/emmoe/check_subtask`, emmoe_interfaces/CheckSubtask,
served by homiebot_executor.monitor_node), which queries the scene, also publishes a failed check on /emmoe/errors,
and answers with everything the skill goal, the resolved identity and the inventory's names need (instances,
canonical entries, navigation kind, the hand): the executor does not query the scene itself then. When the monitor
is unavailable (not discovered within monitor_wait_s; after that it is not waited for again until it reappears),
gives no answer within check_timeout_s, or cannot check (INTERNAL_ERROR), the executor queries /sim/query_scene once
and runs the same check core itself (homiebot_executor.monitor.ErrorMonitor), says "checked by the executor (<reason>)" in the result's error_msg, and
publishes a failed check on /emmoe/errors itself. It logs a warning the first time for a reason (a missing monitor
stays missing for many goals: one warning, not one per goal; the later goals are logged at debug level) and again
after the monitor has answered in between. Execution errors (E1-E3) and faults are published on /emmoe/errors
(emmoe_interfaces/ExecutionError, source "execution") by the executor.

Parameters (ExecutorConfig's fields, emmoe_core.ros_helpers.declare_config): check_order ("spec" | "release"),
feedback_style, check_model, hand_source (used by the fallback checks; give the monitor the same; the fallback's
distance thresholds are the benchmark's, emmoe_core.robot.naming: the monitor's far_threshold and near_threshold are
the only ones to set), max_attempts, put_retries ("paper" | "release"), routing ("background" | "model"), model_mismatch ("fallback" |
"strict"), service_timeout_s, skill_timeout_s, server_wait_s, check_timeout_s, monitor_wait_s. Run:
`ros2 run homiebot_executor executor_node` or `python -m homiebot_executor.executor_node`; it prints
"homiebot_executor ready".
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace
from typing import Any

from emmoe_core.action_client import ActionClient
from emmoe_core.convert import subtask_from_message
from emmoe_core.protocol import SubtaskText
from emmoe_core.ros_helpers import CallStatus, WaitStatus, call_service, declare_config, send_action_goal, spin_node, \
    wait_for_future
from emmoe_core.topics import CHECK_SUBTASK_SERVICE as CHECK_SERVICE
from emmoe_core.topics import ERRORS_TOPIC, SUBTASK_ACTION
from emmoe_core.topics import QUERY_SCENE_SERVICE as QUERY_SERVICE
from emmoe_core.robot.messages import snapshot_from_query
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.validation import require_positive_fields
from emmoe_interfaces.action import ExecuteSubtask, Manipulate, Navigate
from emmoe_interfaces.msg import ExecutionError
from emmoe_interfaces.srv import CheckSubtask, QueryScene
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from homiebot_executor import messages
from homiebot_executor.checks import CheckConfig
from homiebot_executor.execution import ExecutionConfig
from homiebot_executor.monitor import FAULT, CheckVerdict, ErrorReport, subtask_text
from homiebot_executor.routing import Route, RoutingConfig
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus
from homiebot_executor.subtask import (
    CANCELED,
    INTERNAL_ERROR,
    NONE,
    SceneUnavailable,
    SubtaskConfig,
    SubtaskExecutor,
    SubtaskResult,
)

READY_LINE = "homiebot_executor ready"
# The config fields whose parameter is not named like the field, or that are not parameters.
# The distance thresholds are the monitor's parameters only (one owner); the fallback checks use the benchmark's.
PARAMETER_NAMES: dict[str, str | None] = {"checks.order": "check_order", "checks.enclosed_canonicals": None,
                                          "checks.far_threshold": None, "checks.near_threshold": None,
                                          "routing.setting": "routing", "routing.mismatch": "model_mismatch"}
# Result codes not published on /emmoe/errors by the executor: success, a cancel, and the checks (their checker does).
_NOT_EXECUTION_ERRORS = (NONE, CANCELED, *CheckConfig().sequence)


@dataclass(frozen=True)
class ExecutorConfig:
    """Settings of the executor node.

    Attributes:
        checks: the fallback checks' settings (the distance thresholds are not parameters: see PARAMETER_NAMES).
        execution: attempts and Put retry mode.
        routing: model routing.
        service_timeout_s: seconds to wait for /sim/query_scene.
        skill_timeout_s: seconds to wait for one skill attempt's result (the goal is cancelled after).
        server_wait_s: seconds to wait for a skill server or the scene service to appear.
        check_timeout_s: seconds to wait for the monitor's verdict on /emmoe/check_subtask before checking locally.
        monitor_wait_s: seconds to wait for /emmoe/check_subtask to appear; once it was missing it is not waited for
            again until it reappears (a stack without a monitor is not slowed down on every goal).
    """

    checks: CheckConfig = CheckConfig()
    execution: ExecutionConfig = ExecutionConfig()
    routing: RoutingConfig = RoutingConfig()
    service_timeout_s: float = 5.0
    skill_timeout_s: float = 120.0
    server_wait_s: float = 5.0
    check_timeout_s: float = 3.0
    monitor_wait_s: float = 1.0

    def __post_init__(self) -> None:
        require_positive_fields(self, ("service_timeout_s", "skill_timeout_s", "server_wait_s", "check_timeout_s",
                                       "monitor_wait_s"))


class ExecutorNode(Node):
    """Serves /subtask (see the module docstring)."""

    def __init__(self, config: ExecutorConfig | None = None, **node_kwargs: Any) -> None:
        """Declare parameters (they override `config`), create the server and clients."""
        super().__init__("homiebot_executor", **node_kwargs)
        self.config = config or declare_config(self, ExecutorConfig, parameters=PARAMETER_NAMES)
        self.core = SubtaskExecutor(self._snapshot, self._attempt,
                                    SubtaskConfig(self.config.checks, self.config.execution, self.config.routing),
                                    checker=self._check)
        self._handle: ServerGoalHandle | None = None
        self._group = ReentrantCallbackGroup()
        self._busy = threading.Lock()
        self._query: Any = self.create_client(QueryScene, QUERY_SERVICE, callback_group=self._group)
        self._monitor: Any = self.create_client(CheckSubtask, CHECK_SERVICE, callback_group=self._group)
        self._monitor_missing = False
        self._fallback_reason = ""  # why the last goal was checked here ("" when the monitor checked it)
        self._skill_clients: dict[str, ActionClient] = {}
        self._errors = self.create_publisher(ExecutionError, ERRORS_TOPIC, 10)
        self._server = ActionServer(self, ExecuteSubtask, SUBTASK_ACTION, execute_callback=self._execute,
                                    goal_callback=self._on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
                                    callback_group=self._group)

    # ---- goal handling -----------------------------------------------------------------------------------------
    def _on_goal(self, _goal: ExecuteSubtask.Goal) -> GoalResponse:
        if self._busy.acquire(blocking=False):
            return GoalResponse.ACCEPT
        self.get_logger().warning("goal rejected: another subtask is running (BUSY)")
        return GoalResponse.REJECT

    def _execute(self, handle: ServerGoalHandle) -> ExecuteSubtask.Result:
        goal: ExecuteSubtask.Goal = handle.request
        request = subtask_from_message(goal.subtask)
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
                                       error_msg=outcome.detail, inventory=list(outcome.inventory),
                                       target_instance=outcome.resolved.target_instance,
                                       target_canonical=outcome.resolved.target_canonical,
                                       place_instance=outcome.resolved.place_instance,
                                       place_canonical=outcome.resolved.place_canonical)
        if outcome.code not in _NOT_EXECUTION_ERRORS:
            self._publish_error(ErrorReport(request, outcome.code, outcome.feedback, outcome.detail, "execution",
                                            len(outcome.attempts)))
        if outcome.code == CANCELED and handle.is_cancel_requested:
            handle.canceled()
        elif outcome.success:
            handle.succeed()
        else:
            handle.abort()
        return result

    # ---- checks ------------------------------------------------------------------------------------------------
    def _check(self, request: SubtaskText, inventory: tuple[str, ...]) -> CheckVerdict:
        """The monitor's verdict, or the local check core's on one scene query of the executor's when the monitor
        cannot give one (see the module docstring).

        Raises:
            SceneUnavailable: the fallback could not read the scene.
        """
        why = self._unavailable_reason()
        if not why:
            pending = self._monitor.call_async(messages.check_request(request, inventory))
            answered = wait_for_future(pending, self.config.check_timeout_s) is WaitStatus.DONE
            response = pending.result() if answered else None
            if response is None:
                self._monitor.remove_pending_request(pending)
                why = f"{CHECK_SERVICE} gave no answer within {self.config.check_timeout_s:g} s"
            elif response.error_code == messages.EXECUTE_CODES[FAULT]:
                why = f"{CHECK_SERVICE} could not check: {response.error_msg}"
            else:
                if self._fallback_reason:
                    self.get_logger().info(f"{CHECK_SERVICE} checks the goals again")
                    self._fallback_reason = ""
                return messages.verdict_from_check(response)
        return self._check_locally(request, inventory, why)

    def _check_locally(self, request: SubtaskText, inventory: tuple[str, ...], reason: str) -> CheckVerdict:
        """The fallback: the same check core here on the executor's own scene query; logged, noted in the result, a
        failure published."""
        snapshot = self._snapshot()
        note = f"checked by the executor ({reason})"
        if reason != self._fallback_reason:  # goals run one at a time (_busy): no lock needed
            self._fallback_reason = reason
            self.get_logger().warning(f"{subtask_text(request)}: {note}; the next goals checked here for the same "
                                      "reason are logged at debug level")
        else:
            self.get_logger().debug(f"{subtask_text(request)}: {note}")
        verdict = replace(self.core.monitor.verdict(request, snapshot, inventory), note=note)
        if not verdict.passed:
            self._publish_error(self.core.monitor.report(request, verdict.error_type, verdict.feedback,
                                                         f"{verdict.detail}; {note}", "check"))
        return verdict

    def _unavailable_reason(self) -> str:
        """"" when the monitor's check service can be called, else why not."""
        if self._monitor.service_is_ready():
            self._monitor_missing = False
            return ""
        if not self._monitor_missing and self._monitor.wait_for_service(timeout_sec=self.config.monitor_wait_s):
            return ""
        self._monitor_missing = True
        return f"{CHECK_SERVICE} is not available"

    def _publish_error(self, report: ErrorReport) -> None:
        try:
            self._errors.publish(messages.execution_error(report, self.get_clock().now().to_msg()))
        except Exception as error:  # reporting is best effort; the result still goes to the client
            self.get_logger().error(f"could not publish on {ERRORS_TOPIC}: {type(error).__name__}: {error}")

    # ---- ROS calls ---------------------------------------------------------------------------------------------
    def _feedback(self, phase: str, attempt: int, status: str) -> None:
        if self._handle is not None:
            self._handle.publish_feedback(ExecuteSubtask.Feedback(phase=phase, attempt=attempt, status=status))

    def _snapshot(self) -> SceneSnapshot:
        """The current scene from /sim/query_scene.

        Raises:
            SceneUnavailable: the service is missing, slow or failing.
        """
        answer = call_service(self._query, QueryScene.Request(), self.config.service_timeout_s,
                              server_wait_s=self.config.server_wait_s)
        if answer.status is CallStatus.UNAVAILABLE:
            raise SceneUnavailable(f"{QUERY_SERVICE} is not available (is the simulator up?)")
        if not answer.ok:
            raise SceneUnavailable(answer.message)
        response = answer.response
        if not response.success:
            raise SceneUnavailable(f"{QUERY_SERVICE} failed: {response.error_msg}")
        return snapshot_from_query(response)

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
        navigate = goal.skill == "navigate"
        message = messages.navigate_goal(goal) if navigate else messages.manipulate_goal(goal)

        def relay(feedback: Any) -> None:
            detail = feedback.feedback
            status = (f"{detail.distance_remaining:.2f} m to go, {detail.sim_steps} steps" if navigate
                      else f"{detail.phase}, {detail.sim_steps} steps")
            self._feedback("executing", attempt, status)

        wait = self.config.server_wait_s
        sent = send_action_goal(self._client(chosen), message, wait, self.config.skill_timeout_s,
                                lambda: handle.is_cancel_requested, relay, server_wait_s=wait, cancel_wait_s=wait)
        if sent.status is CallStatus.UNAVAILABLE:
            return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, f"no skill server at {chosen.action_name}")
        if sent.goal_handle is None or not sent.goal_handle.accepted:
            if sent.status is CallStatus.CANCELLED:
                return SkillOutcome(SkillStatus.CANCELED, f"cancelled before {chosen.action_name} took the goal")
            return SkillOutcome(SkillStatus.POLICY_UNAVAILABLE, f"{chosen.action_name} did not accept the goal")
        if sent.result is None:
            return SkillOutcome(SkillStatus.INTERNAL_ERROR, f"{chosen.action_name} did not stop after cancel")
        outcome = (messages.outcome_from_navigate(sent.result) if navigate
                   else messages.outcome_from_manipulate(sent.result))
        if sent.status is CallStatus.TIMEOUT and not handle.is_cancel_requested and not outcome.success:
            return SkillOutcome(SkillStatus.TIMEOUT, f"no result within {self.config.skill_timeout_s:g} s",
                                outcome.held_object, outcome.sim_steps)
        return outcome

    def destroy_node(self) -> None:
        """Destroy the action server and clients with the node."""
        self._server.destroy()
        for client in self._skill_clients.values():
            client.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of `executor_node`."""
    return spin_node(ExecutorNode, args, num_threads=4, name="executor_node", ready_line=READY_LINE)


if __name__ == "__main__":
    sys.exit(main())
