"""The evaluator's core (no rclpy): record runs step by step, score each run when it ends.

For every run (episode_id, run_index) it writes, under `<out>/<episode_id>/<run_index>/`:
- `trajectory.jsonl`, one line per step, flushed and synced as each step arrives;
- `subtask{n}_{front,left,back,right}.png` when the step carries the four views;
- `episode.mcap`, a rosbag2 MCAP file with the run's StepRecords on /emmoe/steps (when given their serialised bytes);
- when the run ends: `conversation.json` (the live loop's rounds rebuilt from the steps), `run.json` (episode id, run
  index, instruction, planner, observation mode) and `score.json` (the run's result, also returned).

A run ends on an End step, at `max_steps`, or when `finish_all` is called. TP needs the task's keypaths from an
official-layout `data_dir`; for an unknown task TP is -1 and the run is not successful.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from emmoe_eval.bags import StepBagWriter
from emmoe_eval.conversation import CONVERSATION_FILE, conversation_from_steps, write_conversation
from emmoe_eval.dataset import VIEWS, DatasetError, Task, default_task_attributes, find_task, image_name
from emmoe_eval.metrics import COMPAT_MODES, ScoringConfig, make_matchers, score_run
from emmoe_eval.records import RunInfo
from emmoe_eval.runs import TRAJECTORY_FILE, Run, Step, TrajectoryWriter

BAG_FILE = "episode.mcap"
RUN_INFO_FILE = "run.json"
SCORE_FILE = "score.json"
_OUTPUT_GLOBS = (TRAJECTORY_FILE, CONVERSATION_FILE, RUN_INFO_FILE, SCORE_FILE, BAG_FILE, "subtask*_*.png")


@dataclass(frozen=True)
class EvaluatorConfig:
    """Settings of the evaluator.

    Attributes:
        out_dir: where run folders are written.
        data_dir: official-layout EMMOE data (train/ and test/) holding the tasks' keypaths; None: TP is -1.
        max_steps: a run ends after this many steps even without End (the benchmark's 20).
        record_bag: write episode.mcap per run.
        write_views: write the four view images of each step.
        compat: "default" or "official" scoring (see emmoe_eval.metrics).
    """

    out_dir: Path
    data_dir: Path | None = None
    max_steps: int = 20
    record_bag: bool = True
    write_views: bool = True
    compat: str = "default"

    def __post_init__(self) -> None:
        if not str(self.out_dir).strip():
            raise ValueError("out_dir must name a folder for the run outputs")
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise ValueError(f"data_dir {self.data_dir} is not a folder; point it at the EMMOE data (train/, test/) "
                             "or leave it empty to record without task progress")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, not {self.max_steps}")
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
        self._trajectory = TrajectoryWriter(run_dir / TRAJECTORY_FILE)
        self._bag = StepBagWriter(run_dir / BAG_FILE) if config.record_bag else None

    @property
    def bag_path(self) -> Path | None:
        """The bag file, when one is recorded."""
        return self._bag.path if self._bag is not None else None

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

    def close(self) -> Run:
        """Close the trajectory and the bag, write conversation.json and run.json; return the recorded run."""
        self._trajectory.close()
        if self._bag is not None:
            self._bag.close()
        write_conversation(self.run_dir / CONVERSATION_FILE, conversation_from_steps(self.info.instruction, self.steps))
        _write_json(self.run_dir / RUN_INFO_FILE, self.info.to_json())
        return Run(self.info.episode_id, str(self.info.run_index), list(self.steps), self.run_dir / TRAJECTORY_FILE)


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

    def handle(self, info: RunInfo, step: Step, views: Sequence[np.ndarray] = (),
               serialized: bytes | memoryview | None = None, stamp_ns: int = 0) -> StepOutcome:
        """Record one step; when it ends its run, score the run.

        Args:
            info: the run the step belongs to.
            step: the step.
            views: the four views (front, left, back, right) as arrays, or none.
            serialized: the CDR bytes of the StepRecord, recorded in the bag.
            stamp_ns: the bag timestamp.
        """
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
            recorder.close()
            recorder = None
        elif recorder is None and key in self._finished:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: recorded again; the earlier "
                                    "recording is replaced")
        if recorder is None:
            if step.step != 1:
                outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: first step seen is "
                                        f"{step.step}; earlier steps are missing")
            self._finished.discard(key)
            recorder = RunRecorder(self._run_dir(info), info, self.config)
            self._open[key] = recorder
        elif step.step != recorder.steps[-1].step + 1:
            outcome.problems.append(f"episode {info.episode_id} run {info.run_index}: step {step.step} follows step "
                                    f"{recorder.steps[-1].step}")
        recorder.add(step, views, serialized, stamp_ns)
        if step.is_end:
            outcome.finished.append(self._finish(key, "end"))
        elif step.step >= self.config.max_steps:
            outcome.finished.append(self._finish(key, "step_limit"))
        return outcome

    def finish_all(self, reason: str = "requested") -> list[dict[str, Any]]:
        """End and score every open run (e.g. the planner stopped without End)."""
        return [self._finish(key, reason) for key in list(self._open)]

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

    def _finish(self, key: tuple[str, int], reason: str) -> dict[str, Any]:
        recorder = self._open.pop(key)
        self._finished.add(key)
        run = recorder.close()
        result: dict[str, Any] = {"episode_id": key[0], "run_index": key[1], "end_reason": reason,
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
        _write_json(recorder.run_dir / SCORE_FILE, result)
        return result


def _safe_name(episode_id: str) -> str:
    """A folder name for an episode id (path separators and leading dots replaced)."""
    name = episode_id.replace("/", "_").replace("\\", "_").strip() or "episode"
    return "_" + name[1:] if name.startswith(".") else name


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
