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
| `target_instance`, `place_instance` | str | optional: the scene instance the target / place resolved to (`apple_0`) |
| `target_canonical`, `place_canonical` | str | optional: that instance's alias-table entry (`003_cracker_box`) |
| `end_reason` | str | optional, last line only: why the run ended (one of `END_REASONS`) |
| `visible` | object | optional: view (`front`, `left`, `back`, `right`) -> the names visible in it when the step was planned |
| `locations` | object | optional: view -> parallel to `visible`: where each small object rested (`on fridge`, `in fridge`, ``) |

Any other key is kept in `Step.extra` and written back unchanged. The last line may instead be a run-end marker,
`{"step": n, "action": null, "end_reason": "gave_up"}`: not an executed step, it only carries the end reason.

The run's folder may hold `run.json` (written by the recorder when the run starts, without an end reason, and again
when it closes); its `end_reason` (and `error_msg`) win over the last line's. End reasons: `end` (the agent's End),
`step_limit`, `gave_up` (no parseable answer in 5 samples; never an End step), `cancelled` and `error` (a cancel or an
infrastructure fault: not planner results, left out of every metric). A run without a recorded reason (the release's
conversations, older runs) has `end_reason` None; `Run.inferred_end_reason` then says `end` when its last step is End.
A run whose folder shows that its recording never finished (run.json without an end reason, or a bag writer's
`.partial/` folder) and that records no end reason either ends with `error`: a killed evaluator's half-written run is
never a planner result (`run_end`). A run that ended with End but whose file holds no End step (emptied, cut) is corrupt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from emmoe_eval.bag_recovery import unfinished_bag_folders
from emmoe_core.json_text import JSONTextError, TextFileError, decode_json, read_text_file, shown
from emmoe_core.protocol import SUCCESS_FEEDBACK, SubtaskText

TRAJECTORY_FILE = "trajectory.jsonl"
RUN_INFO_FILE = "run.json"
# The run's result, written by the recorder (emmoe_eval.recorder) after everything else, once the run has ended.
SCORE_FILE = "score.json"
END_REASONS: tuple[str, ...] = ("end", "step_limit", "gave_up", "cancelled", "error")
INFRASTRUCTURE_ERROR = "error"
# End reasons that are no planner result: a fault, or a cancel (by the user, or by the runner when a node died or a
# run timed out). Such runs are left out of every metric by default and run again on resume.
NOT_PLANNER_RESULTS: tuple[str, ...] = (INFRASTRUCTURE_ERROR, "cancelled")
# The start of the error message of a run whose files could not be written (disk full, folder gone): an
# infrastructure failure after which a benchmark stops rather than running on into the same wall.
WRITE_FAILURE = "could not write the run's files"
RESOLVED_KEYS: tuple[str, ...] = ("target_instance", "target_canonical", "place_instance", "place_canonical")
_REQUIRED_KEYS = ("step", "action", "target", "place", "model", "success", "feedback")
_KNOWN_KEYS = frozenset(_REQUIRED_KEYS + ("analysis", "raw_output", "inventory", "error_type", "images", "end_reason",
                                          "visible", "locations")
                        + RESOLVED_KEYS)


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
        target_instance: the scene instance the executor resolved the target to ("" when unknown).
        target_canonical: its alias-table canonical entry ("" when unknown).
        place_instance: Put only: the scene instance the place resolved to ("" when unknown).
        place_canonical: its canonical entry ("" when unknown).
        end_reason: on the run's last step only: why the run ended (one of END_REASONS), else None.
        visible: view -> names visible in it (canonical) in the observation the step was planned on, when recorded.
        locations: view -> parallel to `visible`: "on <canonical>", "in <canonical>" or "", when recorded.
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
    target_instance: str = ""
    target_canonical: str = ""
    place_instance: str = ""
    place_canonical: str = ""
    end_reason: str | None = None
    visible: Mapping[str, tuple[str, ...]] | None = None
    locations: Mapping[str, tuple[str, ...]] | None = None

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
        for key in RESOLVED_KEYS:
            if getattr(self, key):
                line[key] = getattr(self, key)
        if self.end_reason is not None:
            line["end_reason"] = self.end_reason
        for key in ("visible", "locations"):
            if getattr(self, key) is not None:
                line[key] = {view: list(names) for view, names in getattr(self, key).items()}
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
_STRING_KEYS = ("target", "place", "model", "feedback", "analysis", "raw_output", "error_type", "end_reason",
                *RESOLVED_KEYS)


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
        raise _LineError(f"'step' must be an integer >= 1, found {shown(number)}")
    success = line["success"]
    if type(success) is not bool:
        raise _LineError(f"'success' must be true or false, found {shown(success)}")
    action = line["action"]
    if type(action) is not str or not action.strip():
        raise _LineError("'action' must be a non-empty string")
    for key in _STRING_KEYS:
        value = line.get(key)
        if value is not None and type(value) is not str:
            raise _LineError(f"'{key}' must be a string or null, found {shown(value)}")
    extra_keys = keys - _KNOWN_KEYS
    return Step(
        step=number, action=action, target=line["target"] or "", place=line["place"] or "",
        model=line["model"] or "", success=success, feedback=line["feedback"],
        analysis=line.get("analysis"), raw_output=line.get("raw_output"), inventory=_string_list(line, "inventory"),
        error_type=line.get("error_type"), images=_string_list(line, "images") or (),
        extra={key: line[key] for key in extra_keys} if extra_keys else None,
        target_instance=line.get("target_instance") or "", target_canonical=line.get("target_canonical") or "",
        place_instance=line.get("place_instance") or "", place_canonical=line.get("place_canonical") or "",
        end_reason=line.get("end_reason"), visible=_per_view(line, "visible"),
        locations=_per_view(line, "locations"),
    )


def _per_view(line: dict[str, Any], key: str) -> dict[str, tuple[str, ...]] | None:
    value = line.get(key)
    if value is None:
        return None
    if type(value) is not dict:
        raise _LineError(f"'{key}' must be an object of view -> list of strings")
    return {str(view): _string_list(value, view) or () for view in value}


def _marker_reason(line: Any) -> str | None:
    """The end reason of a run-end marker line (no action, an end reason), None for any other line."""
    if type(line) is dict and not line.get("action") and type(line.get("end_reason")) is str:
        reason: str = line["end_reason"]
        return reason
    return None


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
        end_reason: why the run ended (one of END_REASONS), None when not recorded.
        error_msg: the fault's detail when end_reason is "error".
        last_entry: conversation runs only: the file's last entry as written (the release's End test reads it).
    """

    task_id: str
    run_id: str
    steps: list[Step]
    source: Path | None = None
    problems: list[str] = field(default_factory=list)
    corrupt: bool = False
    end_reason: str | None = None
    error_msg: str = ""
    last_entry: str | None = None

    @property
    def inferred_end_reason(self) -> str | None:
        """The recorded end reason, else "end" when the last step is End, else None (unknown)."""
        if self.end_reason is not None:
            return self.end_reason
        return "end" if self.steps and self.steps[-1].is_end else None

    @property
    def infrastructure_failure(self) -> bool:
        """Whether a fault or a cancel ended the run (never scored as the planner's result by default)."""
        return self.end_reason in NOT_PLANNER_RESULTS


def parse_trajectory(text: str, source: str) -> tuple[list[Step], list[str], bool]:
    """Parse trajectory.jsonl text (a trailing run-end marker line is dropped; `read_trajectory` keeps its reason).

    Returns:
        (steps, problems, corrupt): the steps before the first bad line, warnings, and whether a line was bad.
    """
    steps, problems, corrupt, _ = _parse_lines(text, source)
    return steps, problems, corrupt


def _parse_lines(text: str, source: str) -> tuple[list[Step], list[str], bool, str | None]:
    """(steps, problems, corrupt, end reason of the last line or marker)."""
    steps: list[Step] = []
    problems: list[str] = []
    lines = [(number, raw) for number, raw in enumerate(text.split("\n"), start=1) if raw.strip()]
    marker: str | None = None
    for position, (number, raw) in enumerate(lines):
        try:
            decoded = decode_json(raw)
            if position == len(lines) - 1 and _marker_reason(decoded) is not None:
                marker = _marker_reason(decoded)
                break
            steps.append(_step_from_line(decoded))
        except JSONTextError as error:
            problems.append(f"{source}:{number}: truncated or corrupt line ({error.msg}); the run is scored as failed")
            return steps, problems, True, None
        except _LineError as error:
            problems.append(f"{source}:{number}: {error}; the run is scored as failed")
            return steps, problems, True, None
    if steps and steps[0].step != 1:
        problems.append(f"{source}: the first step is step {steps[0].step}; the steps before it are missing")
    for previous, current in zip(steps, steps[1:]):
        if current.step != previous.step + 1:
            problems.append(f"{source}: step {current.step} follows step {previous.step}")
    if marker is None and steps:
        marker = steps[-1].end_reason
    return steps, problems, False, marker


def run_end(run_dir: Path | str, line_reason: str | None, source: str, problems: list[str]) -> tuple[str | None, str]:
    """The end reason and fault detail of the run recorded in a run folder.

    run.json's end reason wins over the run file's last line (`line_reason`, read from `source`). When neither records
    one and the folder shows that its recording never finished (`_unfinished_recording`), the run ended in an
    infrastructure failure ("error"), never a planner result. An unreadable run.json and unknown reasons are
    described in `problems`; a missing run.json is not a problem.

    Returns:
        (end reason or None when none is recorded, error_msg).
    """
    path = Path(run_dir) / RUN_INFO_FILE
    info = _run_info(path, problems)
    recorded, message = (info or {}).get("end_reason"), (info or {}).get("error_msg")
    if recorded is not None and type(recorded) is not str:
        problems.append(f"{path}: 'end_reason' must be a string, found {shown(recorded)}; ignored")
    elif recorded:
        return _checked_reason(recorded, str(path), problems), message if type(message) is str else ""
    reason = _checked_reason(line_reason, source, problems)
    if reason is None:
        unfinished = _unfinished_recording(path.parent, info)
        if unfinished:
            return INFRASTRUCTURE_ERROR, unfinished
    return reason, ""


def _unfinished_recording(run_dir: Path, info: dict[str, Any] | None) -> str:
    """Why a run folder's recording never finished ("" when nothing says so): a bag writer's `.partial/` folder is
    still there, or run.json (`info`, None when absent or unreadable) was written when the run started and never
    given its end reason."""
    partial = unfinished_bag_folders(run_dir)
    if partial:
        return f"the recording never finished: no end marker, and {partial[0]} is a bag its writer never closed"
    if info is not None and "end_reason" not in info:
        return f"the recording never finished: no end marker, and {run_dir / RUN_INFO_FILE} has no end reason"
    return ""


def _run_info(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """run.json's object; None when it is absent, or unreadable (a problem)."""
    if not os.path.lexists(path):
        return None
    try:
        info = decode_json(read_text_file(path))
    except TextFileError as error:
        problems.append(f"{path}: cannot read ({error.reason}); its end reason is ignored")
        return None
    except JSONTextError as error:
        problems.append(f"{path}: cannot read ({error}); its end reason is ignored")
        return None
    if type(info) is not dict:
        problems.append(f"{path}: expected a JSON object; its end reason is ignored")
        return None
    info_object: dict[str, Any] = info
    return info_object


def _checked_reason(reason: str | None, where: str, problems: list[str]) -> str | None:
    if reason is None or reason in END_REASONS:
        return reason
    problems.append(f"{where}: unknown end reason {shown(reason)} (expected one of {', '.join(END_REASONS)}); ignored")
    return None


def planner_result(score_file: Path) -> tuple[bool, str]:
    """Whether a run's score.json holds a planner result (its end reason is not in NOT_PLANNER_RESULTS; a score.json
    without one, from before end reasons, does), and why it is unusable ("" when it is usable or absent): unreadable
    (a FIFO or a directory in its place, not UTF-8), not JSON (cut, nested too deeply), not an object, or an unknown
    end reason. Never raises, never blocks."""
    if not os.path.lexists(score_file):
        return False, ""
    try:
        score = decode_json(read_text_file(score_file))
    except TextFileError as error:
        return False, f"{score_file}: cannot read ({error.reason})"
    except JSONTextError as error:
        return False, f"{score_file}: invalid JSON ({error})"
    if type(score) is not dict:
        return False, f"{score_file}: expected a JSON object"
    reason = score.get("end_reason")
    if reason is not None and reason not in END_REASONS:
        return False, f"{score_file}: unknown end reason {shown(reason)}"
    return reason not in NOT_PLANNER_RESULTS, ""


def run_identity(path: Path, task_id: str | None, run_id: str | None) -> tuple[str, str]:
    """(task id, run id) of a run file `<exp>/<task>/<run>/<file>`, unless given."""
    return (task_id if task_id is not None else path.parent.parent.name,
            run_id if run_id is not None else path.parent.name)


def read_trajectory(path: Path | str, task_id: str | None = None, run_id: str | None = None) -> Run:
    """Read a trajectory.jsonl file into a Run; never raises for bad content (the run is marked corrupt).

    Args:
        path: the file.
        task_id: the task id; by default the name of the folder above the run folder.
        run_id: the run id; by default the run folder's name.
    """
    path = Path(path)
    task_id, run_id = run_identity(path, task_id, run_id)
    try:
        steps, problems, corrupt, line_reason = _parse_lines(read_text_file(path), str(path))
    except TextFileError as error:
        steps, corrupt, line_reason = [], True, None
        problems = [f"{path}: cannot read ({error.reason}); the run is scored as failed"]
    reason, error_msg = run_end(path.parent, line_reason, str(path), problems)
    if reason == "end" and not corrupt and not any(step.is_end for step in steps):
        problems.append(f"{path}: the run ended with End, yet the file holds no End step (emptied or cut); the run is "
                        "scored as failed")
        corrupt = True
    if not steps and not corrupt and reason is None:
        problems.append(f"{path}: no steps")
    return Run(task_id, run_id, steps, path, problems, corrupt, end_reason=reason, error_msg=error_msg)


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
        self._write_line(step.to_json())

    def write_end_marker(self, step: int, end_reason: str) -> None:
        """Append the run-end marker line (`{"step": n, "action": null, "end_reason": ...}`) and flush it."""
        self._write_line({"step": step, "action": None, "end_reason": end_reason})

    def _write_line(self, line: dict[str, Any]) -> None:
        if self._file is None:
            raise ValueError(f"{self.path}: the trajectory writer is closed")
        self._file.write(json.dumps(line, ensure_ascii=False) + "\n")
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
