"""The evaluator node: records every run published on /emmoe/steps and scores it when the planner ends it.

Topics and services:
- subscribes `/emmoe/steps` (emmoe_interfaces/msg/StepRecord); a run ends on the record that carries its
  `end_reason` (the planner owns the episode: End, step limit, give-up, cancel, fault);
- publishes `/emmoe/run_scores` (emmoe_interfaces/msg/RunScore, reliable, transient local, depth 50): one message
  per finished run (the same values are in the run's score.json);
- serves `~/finish_runs` (std_srvs/srv/Trigger): closes every open run the planner never ended; such runs end with
  reason `error` (an infrastructure failure, never scored as the planner's result).

Parameters: `out_dir` (default "runs/evaluator"), `data_dir` (official-layout EMMOE data for the keypaths; empty: TP
is -1), `record_bag` (true), `write_views` (true), `compat` ("default" or "official"), `record_videos` (false:
subscribe to the bridge's head and third-person video topics and write MP4s per subtask and per run, see
emmoe_eval.videos) and `video_fps` (5.0, the bridge's video_rate_hz).
Files per run are described in emmoe_eval.recorder. Run it with
`ros2 run emmoe_eval evaluator_node --ros-args -p out_dir:=runs/exp -p data_dir:=data` (or
`python -m emmoe_eval.evaluator_node --ros-args ...` without ros2cli).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.subscription import MessageInfo
from sensor_msgs.msg import Image
from std_srvs.srv import Trigger

from emmoe_core.convert import PICTURE_ENCODINGS, image_to_array
from emmoe_core.qos import scores_qos, steps_qos
from emmoe_core.ros_helpers import declare_config, spin_node
from emmoe_core.topics import SCORES_TOPIC, STEPS_TOPIC, VIDEO_TOPICS
from emmoe_interfaces.msg import RunScore, StepRecord

from emmoe_eval.recorder import Evaluator, EvaluatorConfig
from emmoe_eval.records import run_info_from_record, step_from_record, view_arrays
from emmoe_eval.videos import VideoConfig, VideoRecorder


@dataclass(frozen=True)
class VideoParameters:
    """The evaluator's video parameters.

    Attributes:
        record_videos: subscribe to the video topics and write MP4s.
        video: the recorder's settings (its fps is the parameter `video_fps`; window_s is no parameter).
    """

    record_videos: bool = False
    video: VideoConfig = VideoConfig()


class EvaluatorNode(Node):
    """Thin ROS adapter over `emmoe_eval.recorder.Evaluator`."""

    def __init__(self, **kwargs: Any) -> None:
        """Declare parameters, build the core, and start listening.

        Raises:
            ValueError: when a parameter value is invalid (the message says which and how to fix it).
            ParameterException: when a parameter has the wrong type.
        """
        super().__init__("emmoe_evaluator", **kwargs)
        self.config: EvaluatorConfig = declare_config(self, EvaluatorConfig, overrides={"out_dir": "runs/evaluator"})
        self._core = Evaluator(self.config)
        self._lock = threading.Lock()
        # One mutually exclusive group: StepRecords must be recorded in arrival order (a reentrant group would let the
        # multi-threaded executor run consecutive messages concurrently), and finish_runs must not interleave with
        # them. The lock guards the core against close() from the main thread.
        group = MutuallyExclusiveCallbackGroup()
        self._scores = self.create_publisher(RunScore, SCORES_TOPIC, scores_qos())
        self._steps = self.create_subscription(StepRecord, STEPS_TOPIC, self._on_step, steps_qos(), raw=True,
                                               callback_group=group)
        self._finish_service = self.create_service(Trigger, "~/finish_runs", self._on_finish_runs,
                                                   callback_group=group)
        self._video_lock = threading.Lock()  # frames come in on their own callback group
        self._videos = self._start_videos()
        self.get_logger().info(f"evaluator ready: recording {STEPS_TOPIC} into {self.config.out_dir}, "
                               f"scores on {SCORES_TOPIC}")

    def _on_step(self, data: bytes) -> None:
        try:
            record = deserialize_message(data, StepRecord)
            info = run_info_from_record(record)
            executed = bool(record.subtask.action)
            step = step_from_record(record) if executed else None
            views = view_arrays(record) if self.config.write_views and executed else []
            stamp = record.header.stamp.sec * 1_000_000_000 + record.header.stamp.nanosec or time.time_ns()
            with self._lock:
                outcome = self._core.handle(info, step, views, data, stamp, end_reason=record.end_reason,
                                            error_msg=record.error_msg)
            if self._videos is not None:  # before the scores go out: a run's files are complete when it is scored
                with self._video_lock:
                    self._videos.after_record(self._core.run_dir(info), step.step if step is not None else None,
                                              stamp, [Path(result["run_dir"]) for result in outcome.finished])
            for problem in outcome.problems:
                self.get_logger().warning(problem)
            for result in outcome.finished:
                self._publish(result)
        except Exception as error:  # a bad message must never take the node down
            self.get_logger().error(f"could not record a StepRecord: {type(error).__name__}: {error}")

    # ---- videos (emmoe_eval.videos) ------------------------------------------------------------------------------
    def _start_videos(self) -> VideoRecorder | None:
        """With record_videos, subscribe to the video topics (own group: frames never wait for a step's files).

        Frames are placed by their publication time against the StepRecords' stamps (emmoe_eval.videos).
        """
        parameters: VideoParameters = declare_config(self, VideoParameters,
                                                     parameters={"video.fps": "video_fps", "video.window_s": None})
        if not parameters.record_videos:
            return None
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        group = MutuallyExclusiveCallbackGroup()
        for stream, topic in VIDEO_TOPICS.items():
            self.create_subscription(Image, topic, functools.partial(self._on_frame, stream), qos,
                                     callback_group=group)
        return VideoRecorder(parameters.video)

    def _on_frame(self, stream: str, message: Image, info: MessageInfo) -> None:
        try:
            frame = image_to_array(message, PICTURE_ENCODINGS)
            with self._video_lock:
                if self._videos is not None:
                    self._videos.add_frame(stream, frame, int(info["source_timestamp"]) or time.time_ns())
        except Exception as error:  # a bad frame must never take the node down
            self.get_logger().error(f"could not record a {stream} video frame: {type(error).__name__}: {error}",
                                    throttle_duration_sec=5.0)

    def _on_finish_runs(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            with self._lock:
                results = self._core.finish_all("closed on request")
                if self._videos is not None:
                    with self._video_lock:
                        for result in results:
                            self._videos.run_finished(Path(result["run_dir"]))
            for result in results:
                self._publish(result)
            response.success = True
            response.message = f"finished {len(results)} open run(s)"
        except Exception as error:  # report the failure to the caller instead of aborting the service
            response.success = False
            response.message = f"{type(error).__name__}: {error}"
        return response

    def _publish(self, result: dict[str, Any]) -> None:
        self._scores.publish(run_score_message(result))
        progress = result["task_progress"]
        self.get_logger().info(f"run finished: episode {result['episode_id']} run {result['run_index']} "
                               f"({result['end_reason']}, {result['steps']} steps), TP "
                               f"{'unknown' if progress < 0 else f'{100 * progress:.1f}%'}, success {result['success']}")

    def close(self) -> None:
        """Finish open runs (their files are completed and scored, not published)."""
        with self._lock:
            results = self._core.finish_all("evaluator shut down")
        for result in results:
            self.get_logger().info(f"closed open run {result['episode_id']}/{result['run_index']} at shutdown")
        if self._videos is not None:
            with self._video_lock:
                for result in results:
                    self._videos.run_finished(Path(result["run_dir"]))
                late = self._videos.late_frames()
                self._videos.close()
            if any(late.values()):
                self.get_logger().info("video frames dropped for arriving after their subtask's step: "
                                       + ", ".join(f"{stream} {count}" for stream, count in late.items()))


def run_score_message(result: dict[str, Any]) -> RunScore:
    """The RunScore message of a finished run's result (the dict written to score.json)."""
    errors: dict[str, int] = result.get("errors") or {}
    return RunScore(
        episode_id=str(result["episode_id"]), run_index=int(result["run_index"]), end_reason=result["end_reason"],
        error_msg=result.get("error_msg") or "", steps=int(result["steps"]), task_known=bool(result["task_known"]),
        task_progress=float(result["task_progress"]), success=bool(result["success"]),
        ended_with_end=bool(result["ended_with_end"]), replans=int(result.get("replans") or 0),
        error_types=list(errors), error_counts=[int(count) for count in errors.values()],
        run_dir=result["run_dir"], trajectory=result["trajectory"], bag=result.get("bag") or "")


def main(args: list[str] | None = None) -> int:
    """Entry point of `evaluator_node`: open runs are closed (reason error) when it stops."""
    built: list[EvaluatorNode] = []

    def build() -> EvaluatorNode:
        built.append(EvaluatorNode())
        return built[-1]

    def close_open_runs() -> None:
        for node in built:
            node.close()

    return spin_node(build, args, name="evaluator_node", on_shutdown=close_open_runs)


if __name__ == "__main__":
    sys.exit(main())
