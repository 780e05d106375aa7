"""The evaluator node: records every run published on /emmoe/steps and scores it when it ends.

Topics and services:
- subscribes `/emmoe/steps` (emmoe_interfaces/msg/StepRecord);
- publishes `/emmoe/run_scores` (std_msgs/msg/String, reliable, transient local, depth 50): one JSON object per
  finished run with `episode_id`, `run_index`, `end_reason` (`end`, `step_limit`, `requested`), `steps`,
  `task_known`, `task_progress` (-1 when the task is unknown), `success`, `ended_with_end`, `replans`, `errors`,
  and the paths `run_dir`, `trajectory`, `bag`;
- serves `~/finish_runs` (std_srvs/srv/Trigger): ends and scores every open run.

Parameters: `out_dir` (default "runs/evaluator"), `data_dir` (official-layout EMMOE data for the keypaths; empty: TP
is -1), `max_steps` (20), `record_bag` (true), `write_views` (true), `compat` ("default" or "official").
Files per run are described in emmoe_eval.recorder. Run it with
`ros2 run emmoe_eval evaluator_node --ros-args -p out_dir:=runs/exp -p data_dir:=data` (or
`python -m emmoe_eval.evaluator_node --ros-args ...` without ros2cli).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from std_msgs.msg import String
from std_srvs.srv import Trigger

from emmoe_interfaces.msg import StepRecord
from emmoe_eval.recorder import Evaluator, EvaluatorConfig
from emmoe_eval.records import run_info_from_record, step_from_record, view_arrays

STEPS_TOPIC = "/emmoe/steps"
SCORES_TOPIC = "/emmoe/run_scores"


class EvaluatorNode(Node):
    """Thin ROS adapter over `emmoe_eval.recorder.Evaluator`."""

    def __init__(self, **kwargs: Any) -> None:
        """Declare parameters, build the core, and start listening.

        Raises:
            ValueError: when a parameter value is invalid (the message says which and how to fix it).
            ParameterException: when a parameter has the wrong type.
        """
        super().__init__("emmoe_evaluator", **kwargs)
        out_dir: str = self.declare_parameter("out_dir", "runs/evaluator").value
        data_dir: str = self.declare_parameter("data_dir", "").value
        self.config = EvaluatorConfig(
            out_dir=Path(out_dir), data_dir=Path(data_dir) if data_dir else None,
            max_steps=self.declare_parameter("max_steps", 20).value,
            record_bag=self.declare_parameter("record_bag", True).value,
            write_views=self.declare_parameter("write_views", True).value,
            compat=self.declare_parameter("compat", "default").value)
        self._core = Evaluator(self.config)
        self._lock = threading.Lock()
        # One mutually exclusive group: StepRecords must be recorded in arrival order (a reentrant group would let the
        # multi-threaded executor run consecutive messages concurrently), and finish_runs must not interleave with
        # them. The lock guards the core against close() from the main thread.
        group = MutuallyExclusiveCallbackGroup()
        steps_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        scores_qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._scores = self.create_publisher(String, SCORES_TOPIC, scores_qos)
        self._steps = self.create_subscription(StepRecord, STEPS_TOPIC, self._on_step, steps_qos, raw=True,
                                               callback_group=group)
        self._finish_service = self.create_service(Trigger, "~/finish_runs", self._on_finish_runs,
                                                   callback_group=group)
        self.get_logger().info(f"evaluator ready: recording {STEPS_TOPIC} into {self.config.out_dir}, "
                               f"scores on {SCORES_TOPIC}")

    def _on_step(self, data: bytes) -> None:
        try:
            record = deserialize_message(data, StepRecord)
            info = run_info_from_record(record)
            step = step_from_record(record)
            views = view_arrays(record) if self.config.write_views else []
            stamp = record.header.stamp.sec * 1_000_000_000 + record.header.stamp.nanosec or time.time_ns()
            with self._lock:
                outcome = self._core.handle(info, step, views, data, stamp)
            for problem in outcome.problems:
                self.get_logger().warning(problem)
            for result in outcome.finished:
                self._publish(result)
        except Exception as error:  # a bad message must never take the node down
            self.get_logger().error(f"could not record a StepRecord: {type(error).__name__}: {error}")

    def _on_finish_runs(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            with self._lock:
                results = self._core.finish_all("requested")
            for result in results:
                self._publish(result)
            response.success = True
            response.message = f"finished {len(results)} open run(s)"
        except Exception as error:  # report the failure to the caller instead of aborting the service
            response.success = False
            response.message = f"{type(error).__name__}: {error}"
        return response

    def _publish(self, result: dict[str, Any]) -> None:
        self._scores.publish(String(data=json.dumps(result)))
        progress = result["task_progress"]
        self.get_logger().info(f"run finished: episode {result['episode_id']} run {result['run_index']} "
                               f"({result['end_reason']}, {result['steps']} steps), TP "
                               f"{'unknown' if progress < 0 else f'{100 * progress:.1f}%'}, success {result['success']}")

    def close(self) -> None:
        """Finish open runs (their files are completed and scored, not published)."""
        with self._lock:
            results = self._core.finish_all("shutdown")
        for result in results:
            self.get_logger().info(f"closed open run {result['episode_id']}/{result['run_index']} at shutdown")


def main(args: list[str] | None = None) -> int:
    """Entry point of `evaluator_node`."""
    rclpy.init(args=args)
    node: EvaluatorNode | None = None
    try:
        node = EvaluatorNode()
        executor = MultiThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (ValueError, ParameterException) as error:
        print(f"evaluator_node: error: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
