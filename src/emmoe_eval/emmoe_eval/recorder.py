"""The evaluator's core (no rclpy): record runs step by step, score each run when it ends.

For every run (episode_id, run_index) it writes, under `<out>/<episode_id>/<run_index>/`:
- `run.json` when the run starts, without an end reason: a folder whose run.json never gets one holds a run whose
  recording never finished (the evaluator was killed), never scored as a planner result (emmoe_eval.runs.run_end);
- `trajectory.jsonl`, one line per step, flushed and synced as each step arrives;
- `subtask{n}_{front,left,back,right}.png` when the step carries the four views;
- `episode.mcap`, a rosbag2 MCAP file with the run's StepRecords on /emmoe/steps (when given their serialised bytes);
- when the run ends: `conversation.json` (the live loop's rounds rebuilt from the steps), `run.json` (episode id, run
  index, instruction, planner, observation mode, end reason) and `score.json` (the run's result, also returned).

The planner owns the episode: a run ends when a record carries its end reason (`end`, `step_limit`, `gave_up`,
`cancelled`, `error`; see emmoe_interfaces/msg/StepRecord), either on its last executed step or on a run-end marker
(`end_run`) when the run stopped before executing anything more. `finish_all` closes runs the planner never ended
(the planner died, the evaluator shuts down): they end with reason `error`, an infrastructure failure that is never
scored as the planner's result. A run whose files cannot be written (disk full, folder removed, no permission) ends
the same way, its error message starting with WRITE_FAILURE so that the caller can stop instead of running on into
the same wall; every file is replaced whole (written beside, then renamed), so a full disk never leaves a truncated
score.json or run.json behind. TP needs the task's keypaths from an official-layout `data_dir`; for an unknown
task TP is -1 and the run is not successful.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from emmoe_eval.bags import StepBagWriter, end_marker_record, serialize_record
from emmoe_eval.conversation import CONVERSATION_FILE, conversation_from_steps, write_conversation
from emmoe_core.protocol import VIEWS
from emmoe_eval.dataset import DatasetError, Task, default_task_attributes, find_task, image_name
from emmoe_eval.metrics import COMPAT_MODES, ScoringConfig, make_matchers, score_run
from emmoe_eval.records import RunInfo
from emmoe_eval.runs import (END_REASONS, RUN_INFO_FILE, SCORE_FILE, TRAJECTORY_FILE, WRITE_FAILURE, Run, Step,
                             TrajectoryWriter)

BAG_FILE = "episode.mcap"
_OUTPUT_GLOBS = (TRAJECTORY_FILE, CONVERSATION_FILE, RUN_INFO_FILE, SCORE_FILE, BAG_FILE, "subtask*_*.png")


@dataclass(frozen=True)
class EvaluatorConfig:
    """Settings of the evaluator.

    Attributes:
        out_dir: where run folders are written.
        data_dir: official-layout EMMOE data (train/ and test/) holding the tasks' keypaths; None: TP is -1.
        record_bag: write episode.mcap per run.
        write_views: write the four view images of each step.
        compat: "default" or "official" scoring (see emmoe_eval.metrics).
    """

    out_dir: Path
    data_dir: Path | None = None
    record_bag: bool = True
    write_views: bool = True
    compat: str = "default"

    def __post_init__(self) -> None:
        if not str(self.out_dir).strip():
            raise ValueError("out_dir must name a folder for the run outputs")
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise ValueError(f"data_dir {self.data_dir} is not a folder; point it at the EMMOE data (train/, test/) "
                             "or leave it empty to record without task progress")
        if self.compat not in COMPAT_MODES:
            raise ValueError(f"compat must be one of {', '.join(COMPAT_MODES)}, not {self.compat!r}")


class RunRecorder:
    """The files of one run while it is being recorded."""

    def __init__(self, run_dir: Path, info: RunInfo, config: EvaluatorConfig) -> None:
        """Start a run folder, removing outputs of an earlier recording of the same run."""
        self.run_dir = run_dir
        self.info = info
        self.steps: list[Step] = []
        self._config = config
        run_dir.mkdir(parents=True, exist_ok=True)
        for pattern in _OUTPUT_GLOBS:
            for old in run_dir.glob(pattern):
                old.unlink()
        _write_json(run_dir / RUN_INFO_FILE, info.to_json())
        self._trajectory = TrajectoryWriter(run_dir / TRAJECTORY_FILE)
        self._bag = StepBagWriter(run_dir / BAG_FILE) if config.record_bag else None

    @property
    def bag_path(self) -> Path | None:
        """The bag file, when one is recorded."""
        return self._bag.path if self._bag is not None else None

    def add_marker(self, end_reason: str, serialized: bytes | memoryview | None, stamp_ns: int) -> None:
        """Record a run-end marker: the trajectory's marker line (not a step) and the record in the bag."""
        self._trajectory.write_end_marker(self.steps[-1].step + 1 if self.steps else 1, end_reason)
        if self._bag is not None and serialized is not None:
            self._bag.write_serialized(serialized, stamp_ns)

    def add(self, step: Step, views: Sequence[np.ndarray], serialized: bytes | memoryview | None, stamp_ns: int) -> None:
        """Record one step: images first, then the trajectory line, then the bag message.

        The step's `images` are kept only when the views are written (write_views).
        """
        if self._config.write_views:
            for view, pixels in zip(VIEWS, views):
                Image.fromarray(np.ascontiguousarray(pixels)).save(self.run_dir / image_name(step.step, view))
        elif step.images:
            step = replace(step, images=())
        self._trajectory.write(step)
        self.steps.append(step)
        if self._bag is not None and serialized is not None:
            self._bag.write_serialized(serialized, stamp_ns)

    def close(self, end_reason: str, error_msg: str = "") -> Run:
        """Close the trajectory and the bag, write conversation.json and run.json; return the recorded run."""
        self._trajectory.close()
        if self._bag is not None:
            self._bag.close()
        write_conversation(self.run_dir / CONVERSATION_FILE, conversation_from_steps(self.info.instruction, self.steps))
        info = {**self.info.to_json(), "end_reason": end_reason}
        if error_msg:
            info["error_msg"] = error_msg
        _write_json(self.run_dir / RUN_INFO_FILE, info)
        return Run(self.info.episode_id, str(self.info.run_index), list(self.steps), self.run_dir / TRAJECTORY_FILE,
                   end_reason=end_reason)


@dataclass
class StepOutcome:
    """What handling one step produced: results of runs that ended, and warnings."""

    finished: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Evaluator:
    """Records StepRecords into run folders and scores each run when it ends (not thread-safe: serialise calls)."""

    def __init__(self, config: EvaluatorConfig) -> None:
        self.config = config
        self._open: dict[tuple[str, int], RunRecorder] = {}
        self._finished: set[tuple[str, int]] = set()
        self._tasks: dict[str, Task | None] = {}
        self._scoring = ScoringConfig(compat=config.compat)
        self._matcher_for = make_matchers(self._scoring)

    @property
    def open_runs(self) -> list[tuple[str, int]]:
        """The runs being recorded."""
        return list(self._open)

    def run_dir(self, info: RunInfo) -> Path:
        """The folder a run is recorded in (its videos go there too: emmoe_eval.videos)."""
        return self._run_dir(info)

    def handle(self, info: RunInfo, step: Step | None, views: Sequence[np.ndarray] = (),
               serialized: bytes | memoryview | None = None, stamp_ns: int = 0, end_reason: str = "",
               error_msg: str = "") -> StepOutcome:
        """Record one step (or a run-end marker); when the record ends its run, score the run.

        Args:
            info: the run the record belongs to.
            step: the executed step; None for a run-end marker (the run ended before executing anything more).
            views: the four views (front, left, back, right) as arrays, or none.
            serialized: the CDR bytes of the StepRecord, recorded in the bag.
            stamp_ns: the bag timestamp.
            end_reason: set on the run's last record: one of END_REASONS.
            error_msg: the fault's detail when end_reason is "error".
        """
        if end_reason and end_reason not in END_REASONS:
            return StepOutcome(problems=[f"episode {info.episode_id} run {info.run_index}: unknown end reason "
                                         f"{end_reason!r}; expected one of {', '.join(END_REASONS)}; ignored"])
        if step is None:
            return self._end_marker(info, serialized, stamp_ns, end_reason, error_msg)
        outcome = StepOutcome()
        key = info.key
        if key in self._finished and step.step != 1:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: step {step.step} arrived after "
                                    "the run ended; ignored")
            return outcome
        recorder = self._open.get(key)
        if recorder is not None and step.step == 1:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: step 1 again; the run restarts "
                                    "and its earlier recording is replaced")
            recorder.close("error", "the run restarted")
            recorder = None
        elif recorder is None and key in self._finished:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: recorded again; the earlier "
                                    "recording is replaced")
        try:
            if recorder is None:
                if step.step != 1:
                    outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: first step seen is "
                                            f"{step.step}; earlier steps are missing")
                self._finished.discard(key)
                recorder = self._open[key] = RunRecorder(self._run_dir(info), info, self.config)
            elif step.step != recorder.steps[-1].step + 1:
                outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: step {step.step} follows "
                                        f"step {recorder.steps[-1].step}")
            recorder.add(step, views, serialized, stamp_ns)
        except OSError as error:
            outcome.finished.append(self._unwritable(info, error))
            return outcome
        if end_reason:
            outcome.finished.append(self._finish(key, end_reason, error_msg))
        return outcome

    def _end_marker(self, info: RunInfo, serialized: bytes | memoryview | None, stamp_ns: int, end_reason: str,
                    error_msg: str) -> StepOutcome:
        """A run-end marker: close the open run, or record a run that ended before its first step."""
        outcome = StepOutcome()
        if not end_reason:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: a record without a subtask "
                                    "and without an end reason; ignored")
            return outcome
        key = info.key
        recorder = self._open.get(key)
        if recorder is None:
            if key in self._finished:
                outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: recorded again; the "
                                        "earlier recording is replaced")
            self._finished.discard(key)
        try:
            if recorder is None:
                recorder = self._open[key] = RunRecorder(self._run_dir(info), info, self.config)
            recorder.add_marker(end_reason, serialized, stamp_ns)
        except OSError as error:
            outcome.finished.append(self._unwritable(info, error))
            return outcome
        outcome.finished.append(self._finish(key, end_reason, error_msg))
        return outcome

    def finish_all(self, why: str = "closed on request") -> list[dict[str, Any]]:
        """Close every open run the planner never ended (it died, or the evaluator shuts down).

        Such runs end with reason "error": an infrastructure failure, never the planner's result.
        """
        results = []
        for key in list(self._open):
            recorder, message = self._open[key], f"{why} before the planner ended the run"
            number = recorder.steps[-1].step + 1 if recorder.steps else 1
            marker = end_marker_record(recorder.info, number, "error", message, time.time_ns())
            try:
                recorder.add_marker("error", serialize_record(marker), time.time_ns())
            except OSError as error:
                results.append(self._unwritable(recorder.info, error))
                continue
            results.append(self._finish(key, "error", message))
        return results

    def _run_dir(self, info: RunInfo) -> Path:
        return Path(self.config.out_dir) / _safe_name(info.episode_id) / str(info.run_index)

    def _task(self, episode_id: str) -> tuple[Task | None, str]:
        if self.config.data_dir is None:
            return None, "no data_dir set"
        if episode_id not in self._tasks:
            try:
                self._tasks[episode_id] = find_task(self.config.data_dir, episode_id)
            except DatasetError as error:
                return None, str(error)
        task = self._tasks[episode_id]
        return task, "" if task is not None else f"task {episode_id} is not in {self.config.data_dir}"

    def _unwritable(self, info: RunInfo, error: OSError, closed: bool = False) -> dict[str, Any]:
        """End a run whose files cannot be written: an infrastructure failure, not scored (nor written, probably).
        `closed`: its recorder was closed already."""
        key, message = info.key, f"{WRITE_FAILURE}: {error}"
        recorder = self._open.pop(key, None)
        self._finished.add(key)
        if recorder is not None and not closed:
            try:
                recorder.close("error", message)
            except OSError:
                pass  # the same cause: what could be written stays, and the run is re-run on resume
        run_dir = self._run_dir(info)
        result: dict[str, Any] = {"episode_id": key[0], "run_index": key[1], "end_reason": "error",
                                  "error_msg": message, "steps": len(recorder.steps) if recorder else 0,
                                  "run_dir": str(run_dir), "trajectory": str(run_dir / TRAJECTORY_FILE), "bag": None,
                                  "task_known": False, "task_progress": -1.0, "success": False,
                                  "ended_with_end": False, "note": "not scored: the run's files could not be written"}
        try:
            _write_json(run_dir / SCORE_FILE, result)
        except OSError:
            pass
        return result

    def _finish(self, key: tuple[str, int], reason: str, error_msg: str = "") -> dict[str, Any]:
        recorder = self._open[key]
        try:
            run = recorder.close(reason, error_msg)
        except OSError as error:  # not closed again: what it wrote stays as it is
            return self._unwritable(recorder.info, error, closed=True)
        result: dict[str, Any] = {"episode_id": key[0], "run_index": key[1], "end_reason": reason,
                                  "error_msg": error_msg,
                                  "steps": len(run.steps), "run_dir": str(recorder.run_dir),
                                  "trajectory": str(recorder.run_dir / TRAJECTORY_FILE),
                                  "bag": str(recorder.bag_path) if recorder.bag_path else None}
        task, why_unknown = self._task(key[0])
        if task is None:
            result.update({"task_known": False, "task_progress": -1.0, "success": False,
                           "ended_with_end": bool(run.steps) and run.steps[-1].is_end, "note": why_unknown})
        else:
            outcome, problems = score_run(run, task, self._matcher_for(task), self._scoring, default_task_attributes())
            scored = outcome.to_json()
            result.update({"task_known": True, "task_progress": outcome.task_progress, "success": outcome.success,
                           "ended_with_end": outcome.ended, "scored_steps": outcome.length,
                           "expert_steps": outcome.expert_length, "replans": outcome.replans,
                           "errors": scored["errors"], "compat": self.config.compat})
            if problems:
                result["note"] = "; ".join(problems)
        try:
            _write_json(recorder.run_dir / SCORE_FILE, result)
        except OSError as error:
            return self._unwritable(recorder.info, error, closed=True)
        self._open.pop(key)
        self._finished.add(key)
        return result


def _safe_name(episode_id: str) -> str:
    """A folder name for an episode id (path separators and leading dots replaced)."""
    name = episode_id.replace("/", "_").replace("\\", "_").strip() or "episode"
    return "_" + name[1:] if name.startswith(".") else name


def _write_json(path: Path, value: Any) -> None:
    """Write a JSON file whole or not at all (beside it first, then renamed over it)."""
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise
