"""The error-detection monitor node: watches execution and publishes every detected error on /emmoe/errors.

- Errors: every failed /subtask goal, as the executor reports it on `/emmoe/executor/outcomes`, is published on
  `/emmoe/errors` (emmoe_interfaces/StepRecord: subtask, error_code, error_type, feedback = the EMMOE message,
  inventories, stamp), and counted by type.
- Watch: while a /subtask goal executes (its status on the standard `/subtask/_action/status` topic), the monitor
  samples `/sim/query_scene` every `watch_period_s` and feeds homiebot_executor.monitor.ExecutionWatcher: the held
  object leaving the gripper (except during a Put, whose subtask it reads from the executor's "checking" feedback on
  `/subtask/_action/feedback`), contact forces above `contact_limit`, a goal running longer than `timeout_s`. Each
  incident is logged with its detail, and attached to the next error's log line.

The executor runs the checks itself (the same core, homiebot_executor.monitor.ErrorMonitor) until a check service
exists in emmoe_interfaces; see the package README. Run: `python -m homiebot_executor.monitor_node`; it prints
"emmoe monitor ready".
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

import rclpy
from action_msgs.msg import GoalStatus, GoalStatusArray
from emmoe_eval.protocol import parse_subtask
from emmoe_interfaces.action import ExecuteSubtask
from emmoe_interfaces.msg import StepRecord
from emmoe_interfaces.srv import QueryScene
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from homiebot_executor.executor_node import OUTCOMES_TOPIC, QUERY_SERVICE
from homiebot_executor.monitor import ExecutionWatcher, Incident

READY_LINE = "emmoe monitor ready"
ERRORS_TOPIC = "/emmoe/errors"
STATUS_TOPIC = "/subtask/_action/status"
FEEDBACK_TOPIC = "/subtask/_action/feedback"


class MonitorNode(Node):
    """See the module docstring."""

    def __init__(self, **node_kwargs: Any) -> None:
        """Declare parameters (watch_period_s, contact_limit, timeout_s), subscribe and publish."""
        super().__init__("emmoe_monitor", **node_kwargs)
        self.declare_parameter("watch_period_s", 0.2)
        self.declare_parameter("contact_limit", 5.0)
        self.declare_parameter("timeout_s", 300.0)
        self.watch_period = float(self.get_parameter("watch_period_s").value)
        self.contact_limit = float(self.get_parameter("contact_limit").value)
        self.timeout = float(self.get_parameter("timeout_s").value)
        if self.watch_period <= 0 or self.contact_limit <= 0 or self.timeout <= 0:
            raise ValueError("watch_period_s, contact_limit and timeout_s must be positive")
        group = ReentrantCallbackGroup()
        self.error_counts: Counter[str] = Counter()
        self.incidents: list[Incident] = []
        self._lock = threading.Lock()
        self._watcher: ExecutionWatcher | None = None
        self._samples = 0
        self._pending = False
        self._current_action = ""
        self._errors = self.create_publisher(StepRecord, ERRORS_TOPIC, 10)
        self.create_subscription(ExecuteSubtask.Impl.FeedbackMessage, FEEDBACK_TOPIC, self._on_feedback, 10,
                                 callback_group=group)
        self.create_subscription(StepRecord, OUTCOMES_TOPIC, self._on_outcome, 10, callback_group=group)
        self.create_subscription(GoalStatusArray, STATUS_TOPIC, self._on_status, 10, callback_group=group)
        self._query: Any = self.create_client(QueryScene, QUERY_SERVICE, callback_group=group)
        self.create_timer(self.watch_period, self._sample, callback_group=group)

    def _on_feedback(self, message: Any) -> None:
        feedback = message.feedback
        if feedback.phase != "checking":
            return
        try:
            action = parse_subtask(feedback.status.split(" (")[0]).action.lower()
        except ValueError:
            return
        with self._lock:
            self._current_action = action
            if self._watcher is not None:
                self._watcher.release_allowed = action == "put"

    def _on_status(self, message: GoalStatusArray) -> None:
        executing = any(status.status == GoalStatus.STATUS_EXECUTING for status in message.status_list)
        with self._lock:
            if executing and self._watcher is None:
                budget = max(1, int(self.timeout / self.watch_period))
                self._watcher = ExecutionWatcher(step_budget=budget, contact_limit=self.contact_limit)
                self._samples = 0
                self._watcher.release_allowed = self._current_action == "put"
            elif not executing:
                self._watcher = None

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
        for incident in incidents:
            self.get_logger().warning(f"watch: {incident.kind}: {incident.detail}")

    def _on_outcome(self, record: StepRecord) -> None:
        if record.success:
            return
        with self._lock:
            recent = [incident.detail for incident in self.incidents[-3:]]
        self.error_counts[record.error_type or "other"] += 1
        self._errors.publish(record)
        subtask = f"[{record.subtask.action}, {record.subtask.target}" + \
            (f", {record.subtask.place}]" if record.subtask.place else "]")
        note = f" (watch: {'; '.join(recent)})" if recent else ""
        self.get_logger().info(f"{record.error_type or 'fault'} {subtask}: {record.feedback}{note}")


def main(args: list[str] | None = None) -> int:
    """Entry point of `monitor_node`."""
    rclpy.init(args=args)
    node = None
    try:
        node = MonitorNode()
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(node)
        print(READY_LINE, flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ValueError as error:
        print(f"monitor_node: error: {error}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
