"""Runs: the steps one planner run executed, and this project's `trajectory.jsonl` format.

`trajectory.jsonl` holds one JSON object per planner step, written as each step finishes:

| key | type | meaning |
|---|---|---|
| `step` | int | 1-based planner step |
| `action` | str | `Go to`, `Pick`, `Put`, `Open`, `Close`, `End`, or whatever the planner wrote |
| `target` | str or null | the object or place (null for End) |
| `place` | str or null | Put only: the receptacle (null otherwise) |
| `model` | str or null | the low-level model chosen |
| `success` | bool | whether the subtask succeeded; End counts as a success |
| `feedback` | str or null | the EMMOE feedback string, `"None"` on success |
| `analysis`, `raw_output` | str | optional: the Analysis line and the planner's whole output |
| `inventory` | list of str | optional: objects held after the step |
| `error_type` | str | optional: `F1`, `F2`, `L1`..`L4`, `D1`, `D2`, `E1`..`E3` |
| `images` | list of str | optional: the step's image files, relative to the run folder |

Any other key is kept in `Step.extra` and written back unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from emmoe_eval.protocol import SUCCESS_FEEDBACK, SubtaskText

TRAJECTORY_FILE = "trajectory.jsonl"
_REQUIRED_KEYS = ("step", "action", "target", "place", "model", "success", "feedback")
_KNOWN_KEYS = frozenset(_REQUIRED_KEYS + ("analysis", "raw_output", "inventory", "error_type", "images"))


class RunFormatError(ValueError):
    """A run file does not follow its format; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Step:
    """One executed planner step.

    Attributes:
        step: 1-based planner step number.
        action: the action as the planner wrote it.
        target: the object or place ("" when none).
        place: Put only: the receptacle ("" otherwise).
        model: the low-level model ("" when none).
        success: whether the subtask succeeded (End always succeeds).
        feedback: the EMMOE feedback string ("None" on success); None when the outcome was not recorded.
        analysis: the Analysis line, when known.
        raw_output: the planner's whole output, when known.
        inventory: objects held after the step, when known.
        error_type: the EMMOE error type of a failed step, when recorded.
        images: image files of the step, relative to the run folder.
        extra: other keys of the trajectory line, kept unchanged.
    """

    step: int
    action: str
    target: str = ""
    place: str = ""
    model: str = ""
    success: bool = True
    feedback: str | None = SUCCESS_FEEDBACK
    analysis: str | None = None
    raw_output: str | None = None
    inventory: tuple[str, ...] | None = None
    error_type: str | None = None
    images: tuple[str, ...] = ()
    extra: Mapping[str, Any] | None = None

    @property
    def is_end(self) -> bool:
        """Whether the planner ended the run with this step."""
        return self.action == "End"

    @property
    def subtask(self) -> SubtaskText:
        """The bracketed subtask of this step."""
        return SubtaskText(self.action, self.target, self.place)

    def to_json(self) -> dict[str, Any]:
        """The trajectory.jsonl object of this step."""
        line: dict[str, Any] = {
            "step": self.step, "action": self.action, "target": self.target or None, "place": self.place or None,
            "model": self.model or None, "success": self.success, "feedback": self.feedback,
        }
        if self.analysis is not None:
            line["analysis"] = self.analysis
        if self.raw_output is not None:
            line["raw_output"] = self.raw_output
        if self.inventory is not None:
            line["inventory"] = list(self.inventory)
        if self.error_type is not None:
            line["error_type"] = self.error_type
        if self.images:
            line["images"] = list(self.images)
        if self.extra:
            line.update({key: value for key, value in self.extra.items() if key not in line})
        return line

    @classmethod
    def from_json(cls, line: Any, where: str) -> Step:
        """Build a step from a decoded trajectory line.

        Args:
            line: the decoded JSON value.
            where: "file:line", used in error messages.

        Raises:
            RunFormatError: when a required key is missing or has the wrong type.
        """
        try:
            return _step_from_line(line)
        except _LineError as error:
            raise RunFormatError(f"{where}: {error}") from None


class _LineError(ValueError):
    """A trajectory line is invalid (message without the location)."""


_REQUIRED = frozenset(_REQUIRED_KEYS)
_STRING_KEYS = ("target", "place", "model", "feedback", "analysis", "raw_output", "error_type")


def _string_list(line: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = line.get(key)
    if value is None:
        return None
    if type(value) is not list or any(type(item) is not str for item in value):
        raise _LineError(f"'{key}' must be a list of strings")
    return tuple(value)


def _step_from_line(line: Any) -> Step:
    """Validate one decoded line and build its Step (exact type checks keep this fast: it runs for every step)."""
    if type(line) is not dict:
        raise _LineError("expected a JSON object per line")
    keys = line.keys()
    if not _REQUIRED <= keys:
        raise _LineError(f"missing key(s) {', '.join(key for key in _REQUIRED_KEYS if key not in line)}")
    number = line["step"]
    if type(number) is not int or number < 1:
        raise _LineError(f"'step' must be an integer >= 1, found {number!r}")
    success = line["success"]
    if type(success) is not bool:
        raise _LineError(f"'success' must be true or false, found {success!r}")
    action = line["action"]
    if type(action) is not str or not action.strip():
        raise _LineError("'action' must be a non-empty string")
    for key in _STRING_KEYS:
        value = line.get(key)
        if value is not None and type(value) is not str:
            raise _LineError(f"'{key}' must be a string or null, found {value!r}")
    extra_keys = keys - _KNOWN_KEYS
    return Step(
        step=number, action=action, target=line["target"] or "", place=line["place"] or "",
        model=line["model"] or "", success=success, feedback=line["feedback"],
        analysis=line.get("analysis"), raw_output=line.get("raw_output"), inventory=_string_list(line, "inventory"),
        error_type=line.get("error_type"), images=_string_list(line, "images") or (),
        extra={key: line[key] for key in extra_keys} if extra_keys else None,
    )


@dataclass
class Run:
    """One run of one task, as read from disk or a bag.

    Attributes:
        task_id: the task (episode) id.
        run_id: the run folder name or run index ("1").
        steps: the executed steps in order.
        source: the file the run was read from, when any.
        problems: warnings found while reading (truncated file, odd step numbers, ...).
        corrupt: True when the run file could not be read completely; such a run is scored as a failed run.
    """

    task_id: str
    run_id: str
    steps: list[Step]
    source: Path | None = None
    problems: list[str] = field(default_factory=list)
    corrupt: bool = False


def parse_trajectory(text: str, source: str) -> tuple[list[Step], list[str], bool]:
    """Parse trajectory.jsonl text.

    Returns:
        (steps, problems, corrupt): the steps before the first bad line, warnings, and whether a line was bad.
    """
    steps: list[Step] = []
    problems: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            steps.append(_step_from_line(json.loads(raw)))
        except json.JSONDecodeError as error:
            problems.append(f"{source}:{number}: truncated or corrupt line ({error.msg}); the run is scored as failed")
            return steps, problems, True
        except _LineError as error:
            problems.append(f"{source}:{number}: {error}; the run is scored as failed")
            return steps, problems, True
    for previous, current in zip(steps, steps[1:]):
        if current.step != previous.step + 1:
            problems.append(f"{source}: step {current.step} follows step {previous.step}")
    return steps, problems, False


def read_trajectory(path: Path | str, task_id: str | None = None, run_id: str | None = None) -> Run:
    """Read a trajectory.jsonl file into a Run; never raises for bad content (the run is marked corrupt).

    Args:
        path: the file.
        task_id: the task id; by default the name of the folder above the run folder.
        run_id: the run id; by default the run folder's name.
    """
    path = Path(path)
    task_id = task_id if task_id is not None else path.parent.parent.name
    run_id = run_id if run_id is not None else path.parent.name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        return Run(task_id, run_id, [], path, [f"{path}: cannot read ({reason}); the run is scored as failed"], True)
    steps, problems, corrupt = parse_trajectory(text, str(path))
    if not steps and not corrupt:
        problems.append(f"{path}: no steps")
    return Run(task_id, run_id, steps, path, problems, corrupt)


def write_trajectory(path: Path | str, steps: Iterable[Step]) -> None:
    """Write a whole trajectory.jsonl file (for recording step by step, use TrajectoryWriter)."""
    with TrajectoryWriter(path, sync=False) as writer:
        for step in steps:
            writer.write(step)


class TrajectoryWriter:
    """Appends steps to a trajectory.jsonl file one at a time, flushed and synced after each step.

    A crash therefore loses at most the step being written. Use as a context manager or call `close()`.
    """

    def __init__(self, path: Path | str, sync: bool = True) -> None:
        """Create (or truncate) the file.

        Args:
            path: the trajectory.jsonl file; its folder is created when missing.
            sync: fsync after every step (survives power loss, not only a process crash).
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sync = sync
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")

    def write(self, step: Step) -> None:
        """Append one step and flush it to disk.

        Raises:
            ValueError: when the writer is closed.
        """
        if self._file is None:
            raise ValueError(f"{self.path}: the trajectory writer is closed")
        self._file.write(json.dumps(step.to_json(), ensure_ascii=False) + "\n")
        self._file.flush()
        if self._sync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
