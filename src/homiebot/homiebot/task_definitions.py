"""EMMOE task definitions (data/tasks/*.yaml): parsing, validation, keypath expansion, the expert's info.txt.

A definition file maps task ids to mappings with `instruction`, `objects`, optional `clear` and `open`, `keypaths` and
`expert` (the format is documented at the top of data/tasks/emmoe_test.yaml). Keypaths are written compactly and
expanded here:

- a node may offer alternatives per argument: `"[Go to, bowl|drawer]"` stands for both subtasks;
- `{any_order: [[...], [...]]}` stands for its blocks in every order (each block a list of items);
- `{one_of: [[...], [...]]}` stands for any one of its blocks.

Expanded keypaths that mean the same thing through the alias table ("sink" and "kitchen_counter" are one entry) are
kept once. An expert step may declare the error it is designed to fail with (`[subtask, model, analysis, L3]`); its
info.txt block then carries that error's exact feedback (`emmoe_core.protocol.feedback_for`) and the next step is its
re-plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Keypath
from emmoe_core.names import default_alias_table
from emmoe_core.protocol import ACTIONS, ERROR_TYPES, MODELS, SUCCESS_FEEDBACK, SubtaskText, feedback_for, \
    parse_subtask

# Most keypaths one task may expand to (a guard against a definition that explodes combinatorially).
MAX_KEYPATHS = 800


class TaskDefinitionError(ValueError):
    """A task definition is invalid; the message names the file, the task and the field."""


@dataclass(frozen=True)
class PlacedObject:
    """An object the task's scene must contain.

    Attributes:
        canonical: alias-table entry of the object.
        receptacle: canonical name of the furniture it starts on or in.
        region: part of that furniture: "drawer" (any drawer), a surface name ("drawer_1", "sink", "shelf_0",
            "top", ...), or "" for anywhere on it.
    """

    canonical: str
    receptacle: str
    region: str = ""


@dataclass(frozen=True)
class ExpertStep:
    """One step of the expert trajectory.

    Attributes:
        subtask: the subtask as the expert writes it.
        model: the low-level model ("" for End).
        analysis: the Analysis line.
        expect: "" when the step must succeed, else the EMMOE error type it is designed to fail with.
    """

    subtask: SubtaskText
    model: str
    analysis: str
    expect: str = ""

    @property
    def feedback(self) -> str:
        """The exact feedback the executor gives for this step ("None" for a success)."""
        if not self.expect:
            return SUCCESS_FEEDBACK
        return feedback_for(self.expect, self.subtask.action, self.subtask.checked_target)


@dataclass(frozen=True)
class TaskDefinition:
    """One simulator task.

    Attributes:
        task_id: EMMOE task id.
        instruction: the benchmark's instruction text.
        objects: objects the scene must contain (targets and the distractors the task is about), placed in order.
        clear: canonical names of furniture that must hold nothing else, and of object kinds that must not appear
            besides the listed objects.
        open: instance names of doors and drawers that start open ("kitchen_drawer_1"); all others start closed.
        keypaths: every way to complete the task (expanded), each ending in [End].
        expert: the annotated trajectory (info.txt), designed failures included.
        seed: the apartment draw of the scene (default: the task id); a definition names another draw where the
            task id's layout leaves an expert step out of the skills' reach.
        deep_drawers: the kitchen counter has pot drawers that take tall objects (a cracker box, a cleanser).
    """

    task_id: int
    instruction: str
    objects: tuple[PlacedObject, ...]
    clear: tuple[str, ...]
    open: tuple[str, ...]
    keypaths: tuple[Keypath, ...]
    expert: tuple[ExpertStep, ...]
    seed: int | None = None
    deep_drawers: bool = False

    @property
    def failures(self) -> tuple[ExpertStep, ...]:
        """The expert steps designed to fail."""
        return tuple(step for step in self.expert if step.expect)

    def info(self) -> InfoTrajectory:
        """The expert trajectory as info.txt content, with the feedback and the inventory after every step."""
        held: list[str] = []
        blocks = []
        for index, step in enumerate(self.expert, start=1):
            if not step.expect and step.subtask.action == "Pick":
                held.append(step.subtask.target)
            elif not step.expect and step.subtask.action == "Put" and step.subtask.target in held:
                held.remove(step.subtask.target)
            blocks.append(InfoBlock(index=index, subtask=step.subtask, model=step.model, analysis=step.analysis,
                                    feedback=step.feedback, inventory=" ".join(held) or "None"))
        return InfoTrajectory(task=self.instruction, blocks=tuple(blocks))


def _fail(source: str, task: object, field: str, message: str) -> TaskDefinitionError:
    return TaskDefinitionError(f"{source}: task {task}: {field}: {message}")


def _subtask(text: Any, source: str, task: object, field: str, expect: str = "") -> SubtaskText:
    """Parse a bracketed subtask; an unknown action is allowed only for F1, an unknown name only for F2."""
    if not isinstance(text, str):
        raise _fail(source, task, field, f"expected a subtask like '[Go to, fridge]', got {text!r}")
    try:
        subtask = parse_subtask(text)
    except ValueError as error:
        raise _fail(source, task, field, str(error)) from error
    if subtask.action not in ACTIONS and expect != "F1":
        raise _fail(source, task, field, f"unknown action {subtask.action!r}; expected one of {', '.join(ACTIONS)}")
    table = default_alias_table()
    for name in (subtask.target, subtask.place):
        if name and not table.knows(name) and expect != "F2":
            raise _fail(source, task, field, f"{name!r} is not in the alias table")
    return subtask


def _node_alternatives(text: Any, source: str, task: object, field: str) -> list[SubtaskText]:
    """`"[Go to, bowl|drawer]"` -> the subtasks it stands for."""
    if not isinstance(text, str) or not text.strip().startswith("[") or not text.strip().endswith("]"):
        raise _fail(source, task, field, f"expected a subtask like '[Go to, fridge]', got {text!r}")
    parts = [part.strip() for part in text.strip()[1:-1].split(",")]
    choices = [part.split("|") for part in parts]
    return [_subtask("[" + ", ".join(choice.strip() for choice in combination) + "]", source, task, field)
            for combination in itertools.product(*choices)]


def _expand(items: Any, source: str, task: object, field: str) -> Iterator[tuple[SubtaskText, ...]]:
    """Every subtask sequence a compact keypath item list stands for."""
    if not isinstance(items, list):
        raise _fail(source, task, field, "expected a list of subtasks, any_order and one_of items")
    options: list[list[tuple[SubtaskText, ...]]] = []
    for number, item in enumerate(items):
        where = f"{field}[{number}]"
        if isinstance(item, Mapping) and set(item) == {"any_order"}:
            blocks = [list(_expand(block, source, task, f"{where}.any_order")) for block in item["any_order"]]
            options.append([tuple(itertools.chain.from_iterable(choice))
                            for order in itertools.permutations(blocks)
                            for choice in itertools.product(*order)])
        elif isinstance(item, Mapping) and set(item) == {"one_of"}:
            options.append([path for block in item["one_of"] for path in _expand(block, source, task,
                                                                                   f"{where}.one_of")])
        elif isinstance(item, Mapping):
            raise _fail(source, task, where, f"expected any_order or one_of, got {sorted(item)}")
        else:
            options.append([(node,) for node in _node_alternatives(item, source, task, where)])
    for combination in itertools.product(*options):
        yield tuple(itertools.chain.from_iterable(combination))


def _meaning(path: Keypath) -> tuple[tuple[str, ...], ...]:
    """What a keypath means through the alias table (names replaced by their canonical entries)."""
    table = default_alias_table()

    def canonical(name: str) -> str:
        found = sorted(table.canonicals(name))
        return "/".join(found) if found else name

    return tuple((node.action, canonical(node.target), canonical(node.place)) for node in path)


def expand_keypaths(written: Any, source: str, task: object) -> tuple[Keypath, ...]:
    """The keypaths a definition's compact `keypaths` list stands for, each meaning once, in written order."""
    if not isinstance(written, list) or not written:
        raise _fail(source, task, "keypaths", "expected a non-empty list of keypaths")
    seen: set[tuple[tuple[str, ...], ...]] = set()
    expanded: list[Keypath] = []
    for number, compact in enumerate(written):
        for path in _expand(compact, source, task, f"keypaths[{number}]"):
            if not path or path[-1].action != "End":
                raise _fail(source, task, f"keypaths[{number}]", "a keypath must end with [End]")
            meaning = _meaning(path)
            if meaning not in seen:
                seen.add(meaning)
                expanded.append(path)
            if len(expanded) > MAX_KEYPATHS:
                raise _fail(source, task, "keypaths", f"expands to more than {MAX_KEYPATHS} keypaths")
    return tuple(expanded)


def _objects(data: Any, source: str, task_id: int) -> tuple[PlacedObject, ...]:
    table = default_alias_table()
    objects = []
    for number, item in enumerate(data):
        field = f"objects[{number}]"
        if not isinstance(item, Mapping) or "canonical" not in item or "receptacle" not in item:
            raise _fail(source, task_id, field, "expected {canonical, receptacle[, region]}")
        for key in ("canonical", "receptacle"):
            if item[key] not in table.aliases:
                raise _fail(source, task_id, f"{field}.{key}", f"{item[key]!r} is not a canonical alias-table entry")
        objects.append(PlacedObject(item["canonical"], item["receptacle"], str(item.get("region", ""))))
    return tuple(objects)


def _expert(data: Any, source: str, task_id: int) -> tuple[ExpertStep, ...]:
    expert = []
    for number, step in enumerate(data):
        field = f"expert[{number}]"
        if not isinstance(step, list) or len(step) not in (3, 4):
            raise _fail(source, task_id, field, "expected [subtask, model, analysis] or [subtask, model, analysis, "
                                                "designed error type]")
        expect = str(step[3]) if len(step) == 4 else ""
        if expect and expect not in ERROR_TYPES:
            raise _fail(source, task_id, field, f"unknown error type {expect!r}; expected one of "
                                                f"{', '.join(ERROR_TYPES)}")
        subtask = _subtask(step[0], source, task_id, field, expect)
        model = "" if subtask.action == "End" else str(step[1])
        if subtask.action != "End" and model not in MODELS:
            raise _fail(source, task_id, field, f"unknown model {model!r}; expected one of {', '.join(MODELS)}")
        if subtask.action == "End" and expect:
            raise _fail(source, task_id, field, "End always succeeds; it cannot be a designed failure")
        expert.append(ExpertStep(subtask, model, str(step[2]).strip(), expect))
    if not expert or expert[-1].subtask.action != "End":
        raise _fail(source, task_id, "expert", "the expert trajectory must end with [End]")
    return tuple(expert)


def parse_definition(task_id: Any, data: Any, source: str) -> TaskDefinition:
    """Validate one task's mapping from the YAML file."""
    if not isinstance(task_id, int):
        raise TaskDefinitionError(f"{source}: task ids must be integers, got {task_id!r}")
    if not isinstance(data, Mapping):
        raise _fail(source, task_id, "definition", "expected a mapping")
    for key in ("instruction", "objects", "keypaths", "expert"):
        if key not in data:
            raise _fail(source, task_id, key, "missing")
    table = default_alias_table()
    clear = tuple(data.get("clear", ()))
    for number, name in enumerate(clear):
        if name not in table.aliases:
            raise _fail(source, task_id, f"clear[{number}]", f"{name!r} is not a canonical alias-table entry")
    opened = tuple(str(name) for name in data.get("open", ()))
    seed = data.get("seed")
    if seed is not None and not isinstance(seed, int):
        raise _fail(source, task_id, "seed", f"expected an integer apartment draw, got {seed!r}")
    deep_drawers = data.get("deep_drawers", False)
    if not isinstance(deep_drawers, bool):
        raise _fail(source, task_id, "deep_drawers", f"expected true or false, got {deep_drawers!r}")
    return TaskDefinition(task_id, str(data["instruction"]), _objects(data["objects"], source, task_id), clear,
                          opened, expand_keypaths(data["keypaths"], source, task_id),
                          _expert(data["expert"], source, task_id), seed, deep_drawers)


def load_definitions(path: Path | str) -> dict[int, TaskDefinition]:
    """Read and validate a definition file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TaskDefinitionError(f"{path}: cannot read: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise TaskDefinitionError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(raw, Mapping):
        raise TaskDefinitionError(f"{path}: expected a mapping of task id -> definition")
    return {task_id: parse_definition(task_id, data, str(path)) for task_id, data in raw.items()}


def load_all(paths: Sequence[Path | str]) -> dict[int, TaskDefinition]:
    """Definitions of several files; a task id defined twice is an error."""
    merged: dict[int, TaskDefinition] = {}
    for path in paths:
        for task_id, definition in load_definitions(path).items():
            if task_id in merged:
                raise TaskDefinitionError(f"{path}: task {task_id} is already defined in another file")
            merged[task_id] = definition
    return merged
