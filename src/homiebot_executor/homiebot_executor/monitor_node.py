"""The error-detection monitor node: checks subtasks before execution, watches execution, publishes every error.

- Check: serves `/emmoe/check_subtask` (emmoe_interfaces/CheckSubtask). It reads the scene (/sim/query_scene), runs
  the benchmark's checks in order (F1, F2, L1-L4, D1, D2; homiebot_executor.monitor.ErrorMonitor) and answers pass
  (with the instances the skill will act on, their canonical entries, the target's navigation kind and the hand:
  the executor builds the goal from the answer, without a scene query of its own) or the failed check with its exact
  feedback string. A failed check is
  published on `/emmoe/errors`. A scene that cannot be read gives INTERNAL_ERROR (the executor then checks itself).
  The executor asks before every subtask but End.
- Watch: while a /subtask goal executes (its status on the standard `/subtask/_action/status` topic), the monitor
  samples `/sim/query_scene` every `watch_period_s` and feeds homiebot_executor.monitor.ExecutionWatcher: the held
  object leaving the gripper (except during a Put, known from the check request), contact forces above
  `contact_limit`, a goal running longer than `timeout_s`. Each incident is logged and published on `/emmoe/errors`
  (source "watch", error_type the incident's kind), with the subtask of the last check and the attempt from the
  executor's feedback (`/subtask/_action/feedback`).

Errors go out as emmoe_interfaces/ExecutionError; the executor publishes execution errors (E1-E3) on the same topic.
Parameters (MonitorConfig's fields): watch_period_s, contact_limit, timeout_s, scene_timeout_s, and the checks'
far_threshold and near_threshold (the only distance thresholds to set: the executor's fallback checks use the
benchmark's), check_order, feedback_style, check_model, hand_source (give the executor the same). Run:
`python -m homiebot_executor.monitor_node`; it prints "emmoe monitor ready".

No callback blocks: the check is a coroutine that awaits its scene query (with a time-out timer), and the samples
complete through done-callbacks. The process spins one SingleThreadedExecutor: with rclpy's MultiThreadedExecutor the
check requests sat unserved for up to 2 s at times while the executor's goal status and feedback arrived (measured on
the /subtask round trip: p90 about 2 s against 20 ms single-threaded).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus, GoalStatusArray
from emmoe_core.convert import subtask_from_message
from emmoe_core.protocol import SubtaskText
from emmoe_core.ros_helpers import WaitStatus, await_condition, await_future, declare_config, spin_node
from emmoe_core.topics import CHECK_SUBTASK_SERVICE, ERRORS_TOPIC, QUERY_SCENE_SERVICE, SUBTASK_FEEDBACK_TOPIC, \
    SUBTASK_STATUS_TOPIC
from emmoe_core.robot.messages import snapshot_from_query
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.validation import require_positive
from emmoe_interfaces.action import ExecuteSubtask
from emmoe_interfaces.msg import ExecutionError
from emmoe_interfaces.srv import CheckSubtask, QueryScene
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from homiebot_executor import messages
from homiebot_executor.checks import CheckConfig
from homiebot_executor.monitor import ErrorMonitor, ErrorReport, ExecutionWatcher, Incident, subtask_text
from homiebot_executor.subtask import SceneUnavailable

READY_LINE = "emmoe monitor ready"
NO_SUBTASK = SubtaskText("")
# The config fields whose parameter is not named like the field, or that are not parameters.
PARAMETER_NAMES: dict[str, str | None] = {"checks.order": "check_order", "checks.enclosed_canonicals": None}


@dataclass(frozen=True)
class MonitorConfig:
    """Settings of the monitor node.

    Attributes:
        watch_period_s: seconds between scene samples while a /subtask goal executes.
        contact_limit: contact force (N) above which the watch reports an incident.
        timeout_s: a goal running longer than this is reported.
        scene_timeout_s: seconds to wait for /sim/query_scene during a check (for its discovery, then its answer).
        checks: check order and distance thresholds (the thresholds are this node's alone; give the executor the
            same order, feedback style, model check and hand source).
    """

    watch_period_s: float = 0.2
    contact_limit: float = 5.0
    timeout_s: float = 300.0
    scene_timeout_s: float = 2.0
    checks: CheckConfig = CheckConfig()

    def __post_init__(self) -> None:
        for name in ("watch_period_s", "contact_limit", "timeout_s", "scene_timeout_s"):
            require_positive(f"emmoe_monitor.{name}", getattr(self, name))


class MonitorNode(Node):
    """See the module docstring."""

    def __init__(self, config: MonitorConfig | None = None, **node_kwargs: Any) -> None:
        """Declare parameters (they override `config`), serve the check, subscribe to the executor's goal status and
        feedback, publish."""
        super().__init__("emmoe_monitor", **node_kwargs)
        self.config = config or declare_config(self, MonitorConfig, parameters=PARAMETER_NAMES)
        self.monitor = ErrorMonitor(self.config.checks)
        group = ReentrantCallbackGroup()
        self.incidents: list[Incident] = []
        self._lock = threading.Lock()
        self._watcher: ExecutionWatcher | None = None
        self._samples = 0
        self._pending = False
        self._subtask = NO_SUBTASK
        self._attempt = 0
        self._errors = self.create_publisher(ExecutionError, ERRORS_TOPIC, 10)
        self._query: Any = self.create_client(QueryScene, QUERY_SCENE_SERVICE, callback_group=group)
        self.create_service(CheckSubtask, CHECK_SUBTASK_SERVICE, self._on_check, callback_group=group)
        self.create_subscription(ExecuteSubtask.Impl.FeedbackMessage, SUBTASK_FEEDBACK_TOPIC, self._on_feedback, 10,
                                 callback_group=group)
        self.create_subscription(GoalStatusArray, SUBTASK_STATUS_TOPIC, self._on_status, 10, callback_group=group)
        self.create_timer(self.config.watch_period_s, self._sample, callback_group=group)

    # ---- check -------------------------------------------------------------------------------------------------
    async def _on_check(self, request: CheckSubtask.Request,
                        response: CheckSubtask.Response) -> CheckSubtask.Response:
        subtask = subtask_from_message(request.subtask)
        with self._lock:
            self._subtask = subtask
            self._attempt = 0
            if self._watcher is not None:
                self._watcher.release_allowed = subtask.verb == "put"
        try:
            verdict = self.monitor.verdict(subtask, await self._scene(), list(request.inventory))
        except SceneUnavailable as error:
            self.get_logger().warning(f"{subtask_text(subtask)}: cannot check: {error}")
            return messages.check_fault(str(error), response)
        except Exception as error:  # never let an exception escape the callback
            self.get_logger().error(f"{subtask_text(subtask)}: check failed: {type(error).__name__}: {error}")
            return messages.check_fault(f"{type(error).__name__}: {error}", response)
        if not verdict.passed:
            self._publish(self.monitor.report(subtask, verdict.error_type, verdict.feedback, verdict.detail))
        return messages.check_response(verdict, response)

    async def _scene(self) -> SceneSnapshot:
        """The current scene, awaited without blocking the executor.

        Raises:
            SceneUnavailable: /sim/query_scene is missing (not discovered within scene_timeout_s), slow (no answer
                within scene_timeout_s) or failing.
        """
        discovered = await await_condition(self, self._query.service_is_ready, self.config.scene_timeout_s)
        if discovered is not WaitStatus.DONE:
            raise SceneUnavailable(f"{QUERY_SCENE_SERVICE} is not available (is the simulator up?)")
        query = self._query.call_async(QueryScene.Request())
        if await await_future(self, query, self.config.scene_timeout_s) is not WaitStatus.DONE:
            self._query.remove_pending_request(query)
            raise SceneUnavailable(f"{QUERY_SCENE_SERVICE} gave no answer within {self.config.scene_timeout_s:g} s")
        response = query.result()
        if response is None or not response.success:
            detail = response.error_msg if response else "no response"
            raise SceneUnavailable(f"{QUERY_SCENE_SERVICE} failed: {detail}")
        return snapshot_from_query(response)

    # ---- watch -------------------------------------------------------------------------------------------------
    def _on_feedback(self, message: Any) -> None:
        with self._lock:
            self._attempt = int(message.feedback.attempt)

    def _on_status(self, message: GoalStatusArray) -> None:
        executing = any(status.status == GoalStatus.STATUS_EXECUTING for status in message.status_list)
        with self._lock:
            if executing and self._watcher is None:
                budget = max(1, int(self.config.timeout_s / self.config.watch_period_s))
                self._watcher = ExecutionWatcher(step_budget=budget, contact_limit=self.config.contact_limit,
                                                 release_allowed=self._subtask.verb == "put")
                self._samples = 0
            elif not executing and self._watcher is not None:
                self._watcher = None
                self._subtask = NO_SUBTASK
                self._attempt = 0

    def _sample(self) -> None:
        with self._lock:
            if self._watcher is None or self._pending or not self._query.service_is_ready():
                return
            self._pending = True
        future = self._query.call_async(QueryScene.Request(names=[]))
        future.add_done_callback(self._on_sample)

    def _on_sample(self, future: Any) -> None:
        try:
            response = future.result()
        except Exception as error:  # a failed sample is skipped, never fatal
            self.get_logger().debug(f"scene sample failed: {error}")
            response = None
        with self._lock:
            self._pending = False
            watcher = self._watcher
            if watcher is None or response is None or not response.success:
                return
            if self._samples == 0:
                watcher.held = response.held_object
            self._samples += 1
            incidents = watcher.observe(self._samples, response.held_object, float(response.contact_force))
            self.incidents.extend(incidents)
            subtask, attempt = self._subtask, self._attempt
        for incident in incidents:
            self._publish(ErrorReport(subtask, incident.kind, "", incident.detail, "watch", attempt))

    def _publish(self, report: ErrorReport) -> None:
        summary = f"{report.source}: {report.code} {report.subtask or '(subtask unknown)'}: " + \
            (f"{report.feedback} ({report.detail})" if report.feedback else report.detail)
        if report.source == "watch":
            self.get_logger().warning(summary)
        else:
            self.get_logger().info(summary)
        try:
            self._errors.publish(messages.execution_error(report, self.get_clock().now().to_msg()))
        except Exception as error:  # reporting is best effort
            self.get_logger().error(f"could not publish on {ERRORS_TOPIC}: {type(error).__name__}: {error}")


def main(args: list[str] | None = None) -> int:
    """Entry point of `monitor_node`."""
    return spin_node(MonitorNode, args, num_threads=1, name="monitor_node", ready_line=READY_LINE)


if __name__ == "__main__":
    sys.exit(main())
