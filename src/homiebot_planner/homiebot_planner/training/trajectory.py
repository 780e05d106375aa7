"""Reader for EMMOE's annotated expert trajectories (`<split>/<task_id>/info.txt`, official layout).

Format (EMMOE.md section 5): a first line `Task: <instruction>`, then blank-line-separated blocks:

    Subtask3: [Open, fridge] (octo)
    Analysis: <why this step>
    Feedback: None
    Inventory: None

`Feedback` and `Inventory` are recorded *after* the subtask ran: `Feedback: None` means it succeeded,
anything else is the executor's error string. The last block is `Subtask<n>: [End]` (no model); its
Feedback/Inventory lines may be left out. A line without a known label continues the previous field.

Validation is strict, because every field ends up in training text: numbering must run 1, 2, 3, ...;
actions and models must come from the protocol lists (except in a step whose feedback is the F1 "not in
the action list" error, which records exactly such a mistake); Put takes object and place, End nothing,
the other actions one target; the trajectory ends with its only End block, which cannot fail. Every
problem raises `TrajectoryError` naming the file, the block and its line.

(This parser lives in the training package because `emmoe_eval.dataset` did not exist when it was
written; fold the two together once it does.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from emmoe_eval.dataset import LOCATIONS_FILE, VISIBLE_FILE, task_sort_key
from emmoe_core.protocol import ACTIONS, MODELS, SUCCESS_FEEDBACK, classify_feedback, parse_subtask

END_ACTION = "End"
_FIELDS = ("Analysis", "Feedback", "Inventory")
_HEAD = re.compile(r"^Subtask(?P<number>\d+):\s*(?P<decision>.*?)\s*$")
_DECISION = re.compile(r"^(?P<subtask>\[[^\[\]]*\])\s*(?:\((?P<model>[^()]*)\))?$")
_LABEL = re.compile(r"^(?P<label>Analysis|Feedback|Inventory):\s?(?P<value>.*)$")


class TrajectoryError(ValueError):
    """A malformed info.txt; the message names the file, the block and its line."""


@dataclass(frozen=True)
class TrajectoryStep:
    """One `Subtask<n>` block.

    Attributes:
        number: n of `Subtask<n>` (1-based, consecutive).
        decision: the head without its `Subtask<n>: ` prefix, as written: `[Go to, blue_sofa] (PixNav)`.
        subtask: the bracketed part of the head, as written: `[Go to, blue_sofa]`.
        action: the subtask's action (`Go to`, `Pick`, ...).
        target: the object or place it acts on (empty for End).
        place: Put's destination (empty otherwise).
        model: the low-level model named in parentheses, None for End.
        analysis: the Analysis text.
        feedback: the feedback recorded after the step (`None` on success).
        inventory: the inventory recorded after the step (`None` when the hand is empty).
        line: the line of the block's head in info.txt.
        observed_as: the block whose recorded observations (images, visible objects) this step uses; 0 means
            its own number (differs only in a trajectory renumbered by `Trajectory.without_failures`).
    """

    number: int
    decision: str
    subtask: str
    action: str
    target: str
    place: str
    model: str | None
    analysis: str
    feedback: str
    inventory: str
    line: int
    observed_as: int = 0

    @property
    def observation_number(self) -> int:
        """The block number its observations were recorded under."""
        return self.observed_as or self.number

    @property
    def succeeded(self) -> bool:
        """Whether the step ran without error (its recorded feedback is `None`)."""
        return self.feedback == SUCCESS_FEEDBACK

    @property
    def is_end(self) -> bool:
        """Whether this is the End step."""
        return self.action == END_ACTION


@dataclass(frozen=True)
class Trajectory:
    """The annotated expert trajectory of one task.

    Attributes:
        task_id: the task directory's name.
        task: the instruction (`Task:` line).
        steps: the blocks in order; the last one is End.
        source: the info.txt it was read from.
    """

    task_id: str
    task: str
    steps: tuple[TrajectoryStep, ...]
    source: Path

    def visible(self, step: TrajectoryStep) -> dict[str, list[str]] | None:
        """The names visible per view (canonical) when `step` was planned, from the collected `visible.json`;
        None when the task was not collected with them.

        Raises:
            TrajectoryError: when visible.json cannot be read or lacks the step.
        """
        return self._per_view(VISIBLE_FILE, "visible objects", step)

    def locations(self, step: TrajectoryStep) -> dict[str, list[str]] | None:
        """Parallel to `visible`: where each small object rested when `step` was planned, from the collected
        `locations.json`; None when the task was not collected with them.

        Raises:
            TrajectoryError: when locations.json cannot be read or lacks the step.
        """
        return self._per_view(LOCATIONS_FILE, "object locations", step)

    def _per_view(self, file_name: str, what: str, step: TrajectoryStep) -> dict[str, list[str]] | None:
        path = self.source.parent / file_name
        if not path.is_file():
            return None
        try:
            table = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise TrajectoryError(f"{path}: cannot read the {what}: {error}") from error
        seen = table.get(str(step.observation_number)) if isinstance(table, dict) else None
        if not isinstance(seen, dict):
            raise TrajectoryError(f"{path}: no {what} for block {step.observation_number} (collect the task again)")
        return {str(view): [str(name) for name in names] for view, names in seen.items()}

    def images(self, step: TrajectoryStep) -> tuple[Path, ...]:
        """The four observations the planner saw before choosing `step`: front, left, back, right."""
        folder = self.source.parent
        return tuple(folder / f"subtask{step.observation_number}_{view}.png"
                     for view in ("front", "left", "back", "right"))

    def without_failures(self) -> Trajectory:
        """The trajectory as if its failed blocks had never been planned: they are left out and the others
        renumbered 1, 2, ... (each keeps the observations recorded for its own block). A failed block leaves the
        simulator state as it was, so what follows stays consistent; later histories and feedback no longer show it.
        """
        kept = [step for step in self.steps if step.succeeded]
        steps = tuple(replace(step, number=number, observed_as=step.observation_number)
                      for number, step in enumerate(kept, start=1))
        return replace(self, steps=steps)


def read_trajectory(path: Path | str, task_id: str | None = None) -> Trajectory:
    """Read and validate one info.txt.

    Args:
        path: the info.txt file.
        task_id: the task's id; defaults to the name of the folder holding the file.

    Raises:
        TrajectoryError: when the file cannot be read or is malformed (the message names file, block, line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TrajectoryError(f"{path}: cannot read the trajectory: {error}") from error
    return parse_trajectory(text, path, task_id if task_id is not None else path.parent.name)


def parse_trajectory(text: str, source: Path, task_id: str) -> Trajectory:
    """Parse the text of an info.txt (see the module docstring for the format and the checks).

    Raises:
        TrajectoryError: naming `source`, the block and its line.
    """
    lines = [line.rstrip("\r") for line in text.split("\n")]
    task, first_block_line = _read_task_line(lines, source)
    blocks = _split_blocks(lines, first_block_line)
    if not blocks:
        raise TrajectoryError(f"{source}: no Subtask blocks after the Task line")
    steps = []
    for index, (line_number, block_lines) in enumerate(blocks, start=1):
        steps.append(_parse_block(block_lines, line_number, index, source))
    last = steps[-1]
    if not last.is_end:
        raise TrajectoryError(f"{source}: block {last.number} (line {last.line}): the trajectory must end with a "
                              f"'Subtask{last.number + 1}: [End]' block")
    return Trajectory(task_id=task_id, task=task, steps=tuple(steps), source=source)


def _read_task_line(lines: list[str], source: Path) -> tuple[str, int]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if not line.startswith("Task:"):
            raise TrajectoryError(f"{source}: line {number}: expected 'Task: <instruction>', found {line.strip()!r}")
        task = line[len("Task:"):].strip()
        if not task:
            raise TrajectoryError(f"{source}: line {number}: the Task line is empty")
        return task, number + 1
    raise TrajectoryError(f"{source}: the file is empty (expected 'Task: <instruction>' then Subtask blocks)")


def _split_blocks(lines: list[str], start: int) -> list[tuple[int, list[str]]]:
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    for number, line in enumerate(lines[start - 1:], start=start):
        if line.strip():
            if not current:
                blocks.append((number, current))
            current.append(line)
        else:
            current = []
    return blocks


def _parse_block(block: list[str], line: int, expected: int, source: Path) -> TrajectoryStep:
    def fail(problem: str) -> TrajectoryError:
        return TrajectoryError(f"{source}: block {expected} (line {line}): {problem}")

    head = _HEAD.match(block[0].strip())
    if head is None:
        raise fail(f"expected 'Subtask{expected}: [action, target] (model)', found {block[0].strip()!r}")
    number = int(head.group("number"))
    if number != expected:
        raise fail(f"expected Subtask{expected}, found Subtask{number} (blocks must be numbered 1, 2, 3, ...)")
    decision = head.group("decision")
    parts = _DECISION.match(decision)
    if parts is None:
        raise fail(f"the head must be '[action, target] (model)' or '[End]', found {decision!r}")
    subtask_text = parts.group("subtask")
    try:
        subtask = parse_subtask(subtask_text)
    except ValueError as error:
        raise fail(str(error)) from error
    model = parts.group("model").strip() if parts.group("model") is not None else None

    fields = _read_fields(block[1:], fail)
    if "Analysis" not in fields:
        raise fail("missing the 'Analysis:' line")
    is_end = subtask.action == END_ACTION
    for label in ("Feedback", "Inventory"):
        if label not in fields and not is_end:
            raise fail(f"missing the '{label}:' line")
    feedback = fields.get("Feedback", SUCCESS_FEEDBACK)
    inventory = fields.get("Inventory", "")

    records_format_error = classify_feedback(feedback) == "F1"
    if not records_format_error:
        _check_subtask(subtask.action, subtask.target, subtask.place, model, fail)
    if is_end and feedback != SUCCESS_FEEDBACK:
        raise fail(f"the End block must have 'Feedback: None', found {feedback!r}")
    return TrajectoryStep(number=number, decision=decision, subtask=subtask_text, action=subtask.action,
                          target=subtask.target, place=subtask.place, model=model, analysis=fields["Analysis"],
                          feedback=feedback, inventory=inventory, line=line)


def _read_fields(lines: list[str], fail: Callable[[str], TrajectoryError]) -> dict[str, str]:
    fields: dict[str, str] = {}
    label: str | None = None
    for line in lines:
        match = _LABEL.match(line)
        if match:
            label = match.group("label")
            if label in fields:
                raise fail(f"the '{label}:' line appears twice")
            fields[label] = match.group("value").strip()
        elif label is None:
            raise fail(f"expected one of {', '.join(f'{name}:' for name in _FIELDS)}, found {line.strip()!r}")
        else:
            fields[label] = f"{fields[label]}\n{line.strip()}"
    return fields


def _check_subtask(action: str, target: str, place: str, model: str | None,
                   fail: Callable[[str], TrajectoryError]) -> None:
    if action not in ACTIONS:
        raise fail(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    if action == END_ACTION:
        if target or model is not None:
            raise fail("the End block is written '[End]' with no target and no model")
        return
    if action == "Put" and not (target and place):
        raise fail("Put takes an object and a place: '[Put, object, place]'")
    if action != "Put" and (not target or place):
        raise fail(f"{action} takes exactly one target: '[{action}, target]'")
    if model is None:
        raise fail("missing the model in parentheses after the subtask, e.g. '(RT-1-X)'")
    if model not in MODELS:
        raise fail(f"unknown model {model!r}; expected one of {', '.join(MODELS)}")


def find_trajectories(data_dir: Path | str, split: str) -> list[Path]:
    """The info.txt files of a split (`data_dir/<split>/<task_id>/info.txt`), numeric ids in numeric order.

    Raises:
        TrajectoryError: when the split folder does not exist or holds no info.txt.
    """
    folder = Path(data_dir) / split
    if not folder.is_dir():
        raise TrajectoryError(f"{folder}: no such folder (expected DATA_DIR/{split}/<task_id>/info.txt)")
    files = [path for path in folder.glob("*/info.txt") if path.is_file()]
    if not files:
        raise TrajectoryError(f"{folder}: no <task_id>/info.txt found")
    return sorted(files, key=lambda path: task_sort_key(path.parent.name))
