"""Read and write the official EMMOE-100 data layout.

```
<root>/data/{train,test}/<task_id>/info.txt        annotated expert trajectory
<root>/data/{train,test}/<task_id>/keypath.json    list of keypaths, each a list of "[Action, target(, place)]"
<root>/data/{train,test}/<task_id>/scene.json      simulator episode (passed through untouched)
<root>/data/{train,test}/<task_id>/subtask{n}_{front,left,back,right}.png
<root>/sft_train.json   <root>/dpo_train.json        the release's training files (`homiebot data build` writes them)
```
`<root>` may also be given as `<root>/data` (the folder holding `train/` and `test/`).

Every malformed input raises `DatasetError` whose message names the file and the line, keypath or field.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from emmoe_core.json_text import JSONTextError, TextFileError, decode_json, read_text_file, shown, string_lines
from emmoe_core.protocol import ACTIONS, SUCCESS_FEEDBACK, VIEWS, SubtaskText, parse_subtask

SPLITS: tuple[str, ...] = ("train", "test")
INFO_FILE = "info.txt"
KEYPATH_FILE = "keypath.json"
SCENE_FILE = "scene.json"
# The EMMOE splits by task id.
TRAIN_IDS = range(1, 91)
TEST_IDS = range(91, 101)
# Collected tasks: step number -> view -> the names visible when the step was planned (text observations).
VISIBLE_FILE = "visible.json"
# ... and parallel to it, where each small object rested then ("on <canonical>", "in <canonical>" or "").
LOCATIONS_FILE = "locations.json"
_IMAGE_NAME = re.compile(r"^subtask(?P<index>\d+)_(?P<view>front|left|back|right)\.png$")
_SUBTASK_HEAD = re.compile(r"^Subtask\s*(?P<index>\d{1,9})\s*:\s*(?P<subtask>\[[^\[\]]*\])\s*(?:\((?P<model>[^()]*)\))?\s*$")
_INFO_FIELDS = ("Analysis", "Feedback", "Inventory")


class DatasetError(ValueError):
    """Malformed EMMOE data; the message names the file and the line or field."""


@dataclass(frozen=True)
class InfoBlock:
    """One `Subtask<n>:` block of info.txt.

    Attributes:
        index: the n of `Subtask<n>`.
        subtask: the bracketed subtask.
        model: the low-level model in parentheses ("" for End).
        analysis: the Analysis line ("" when absent).
        feedback: the Feedback line ("None" after a success, else the EMMOE error string).
        inventory: the Inventory line as written ("None" for an empty hand).
    """

    index: int
    subtask: SubtaskText
    model: str = ""
    analysis: str = ""
    feedback: str = SUCCESS_FEEDBACK
    inventory: str = "None"

    @property
    def succeeded(self) -> bool:
        """Whether the annotated execution of this subtask succeeded (feedback "None")."""
        return self.feedback.strip() == SUCCESS_FEEDBACK


@dataclass(frozen=True)
class InfoTrajectory:
    """The content of info.txt: the instruction and the annotated subtask blocks in order."""

    task: str
    blocks: tuple[InfoBlock, ...]

    @property
    def expert_length(self) -> int:
        """L* of PLWSR: the number of `Subtask<n>:` blocks, End block and failed subtasks included."""
        return len(self.blocks)


Keypath = tuple[SubtaskText, ...]


@dataclass(frozen=True)
class Task:
    """One EMMOE task directory.

    Attributes:
        task_id: the directory name ("91").
        split: "train" or "test".
        directory: the task directory.
        info: the parsed info.txt.
        keypaths: the parsed keypath.json.
    """

    task_id: str
    split: str
    directory: Path
    info: InfoTrajectory
    keypaths: tuple[Keypath, ...]

    @property
    def instruction(self) -> str:
        """The natural-language instruction (first line of info.txt)."""
        return self.info.task

    @property
    def expert_length(self) -> int:
        """L* of PLWSR."""
        return self.info.expert_length

    def scene(self) -> Any:
        """The task's scene.json, parsed (the simulator's episode file, passed through untouched).

        Raises:
            DatasetError: when scene.json is missing or is not valid JSON.
        """
        return read_json_file(self.directory / SCENE_FILE)

    def images(self) -> dict[int, dict[str, Path]]:
        """The annotated images: subtask index -> view -> path."""
        return subtask_images(self.directory)


# ---- info.txt ---------------------------------------------------------------------------------------------------------

def parse_info(text: str, source: str = INFO_FILE) -> InfoTrajectory:
    """Parse info.txt text.

    Args:
        text: the file content.
        source: the file name used in error messages.

    Raises:
        DatasetError: naming `source` and the line when the text does not follow the format.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    number = 0
    while number < len(lines) and not lines[number].strip():
        number += 1
    if number == len(lines) or not lines[number].startswith("Task:"):
        raise DatasetError(f"{source}:{number + 1}: the first line must be 'Task: <instruction>'")
    task = lines[number][len("Task:"):].strip()
    if not task:
        raise DatasetError(f"{source}:{number + 1}: the instruction after 'Task:' is empty")
    blocks: list[InfoBlock] = []
    current: dict[str, Any] | None = None
    last_field = ""
    for line_number, line in enumerate(lines[number + 1:], start=number + 2):
        stripped = line.strip()
        if not stripped:
            if current is not None:
                blocks.append(_finish_block(current))
                current = None
            continue
        if current is None:
            match = _SUBTASK_HEAD.match(stripped)
            if match is None:
                raise DatasetError(f"{source}:{line_number}: expected a block head like 'Subtask3: [Open, fridge] (octo)', "
                                   f"found {shown(stripped)}")
            try:
                subtask = parse_subtask(match.group("subtask"))
            except ValueError as error:
                raise DatasetError(f"{source}:{line_number}: {error}") from None
            current = {"index": int(match.group("index")), "subtask": subtask,
                       "model": (match.group("model") or "").strip()}
            last_field = ""
            continue
        label, colon, value = stripped.partition(":")
        if colon and label in _INFO_FIELDS:
            last_field = label.lower()
            current[last_field] = value.strip()
        elif last_field:
            current[last_field] += "\n" + stripped
        else:
            raise DatasetError(f"{source}:{line_number}: expected 'Analysis:', 'Feedback:' or 'Inventory:', found {shown(stripped)}")
    if current is not None:
        blocks.append(_finish_block(current))
    if not blocks:
        raise DatasetError(f"{source}: no 'Subtask<n>:' blocks after the Task line")
    return InfoTrajectory(task=task, blocks=tuple(blocks))


def _finish_block(fields: dict[str, Any]) -> InfoBlock:
    return InfoBlock(index=fields["index"], subtask=fields["subtask"], model=fields["model"],
                     analysis=fields.get("analysis", ""), feedback=fields.get("feedback", SUCCESS_FEEDBACK),
                     inventory=fields.get("inventory", "None"))


def format_info(info: InfoTrajectory) -> str:
    """info.txt text for `info` (the inverse of `parse_info`)."""
    parts = [f"Task: {info.task}"]
    for block in info.blocks:
        head = f"Subtask{block.index}: {block.subtask}"
        if block.model:
            head += f" ({block.model})"
        lines = [head]
        if block.analysis:
            lines.append(f"Analysis: {block.analysis}")
        # An End block carries no Feedback/Inventory lines unless it was annotated with non-default ones.
        if block.subtask.action != "End" or (block.feedback, block.inventory) != (SUCCESS_FEEDBACK, "None"):
            lines += [f"Feedback: {block.feedback}", f"Inventory: {block.inventory}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def read_info(path: Path | str) -> InfoTrajectory:
    """Read and parse an info.txt file.

    Raises:
        DatasetError: when the file is missing or malformed.
    """
    path = Path(path)
    return parse_info(_read_text(path), str(path))


# ---- keypath.json -----------------------------------------------------------------------------------------------------

def parse_keypaths(data: Any, source: str = KEYPATH_FILE, lines: Sequence[int] = ()) -> tuple[Keypath, ...]:
    """Validate decoded keypath.json: a non-empty list of keypaths, each a list of ACTIONS subtask strings ending in [End].

    Raises:
        DatasetError: naming `source`, the keypath and the node, and its line (`lines`: json_text.string_lines).
    """
    if not isinstance(data, list) or not data:
        raise DatasetError(f"{source}: expected a non-empty JSON list of keypaths")
    keypaths: list[Keypath] = []
    line_of = iter(lines)  # every node before a string node is a string: the file's strings are the nodes, in order
    for path_number, keypath in enumerate(data, start=1):
        if not isinstance(keypath, list) or not keypath:
            raise DatasetError(f"{source}: keypath {path_number} must be a non-empty list of subtask strings")
        nodes: list[SubtaskText] = []
        for node_number, node in enumerate(keypath, start=1):
            line = next(line_of, None) if isinstance(node, str) else None
            where = f"{source}{'' if line is None else f':{line}'}: keypath {path_number}, node {node_number}"
            if not isinstance(node, str):
                raise DatasetError(f"{where}: expected a string like '[Go to, fridge]', found {shown(node)}")
            try:
                nodes.append(parse_subtask(node))
                if nodes[-1].action not in ACTIONS:
                    raise ValueError(f"unknown action {shown(nodes[-1].action)} (expected one of {', '.join(ACTIONS)})")
            except ValueError as error:
                raise DatasetError(f"{where}: {error}") from None
        if nodes[-1].action != "End":
            raise DatasetError(f"{source}: keypath {path_number} must end with '[End]' (it ends with '{nodes[-1]}')")
        keypaths.append(tuple(nodes))
    return tuple(keypaths)


def read_keypaths(path: Path | str) -> tuple[Keypath, ...]:
    """Read keypath.json.

    Raises:
        DatasetError: when the file is missing, not JSON, or not a list of keypaths.
    """
    path = Path(path)
    return parse_keypaths(read_json_file(path), str(path), string_lines(_read_text(path)))  # (a small file)


def keypaths_to_json(keypaths: Iterable[Keypath]) -> list[list[str]]:
    """The JSON form of keypaths: lists of "[Action, target]" strings."""
    return [[str(node) for node in keypath] for keypath in keypaths]


# ---- task directories ------------------------------------------------------------------------------------------------

def resolve_data_root(path: Path | str) -> Path:
    """The folder holding `train/` and `test/`: `path` itself or `path/data`.

    Raises:
        DatasetError: when neither holds a train or test folder.
    """
    path = Path(path)
    for candidate in (path, path / "data"):
        if any((candidate / split).is_dir() for split in SPLITS):
            return candidate
    raise DatasetError(f"{path.resolve()}: not an EMMOE data folder (no train/ or test/ in it or in its data/)")


def split_names(split: str) -> tuple[str, ...]:
    """The splits selected by "train", "test" or "all".

    Raises:
        DatasetError: for any other value.
    """
    if split == "all":
        return SPLITS
    if split in SPLITS:
        return (split,)
    raise DatasetError(f"unknown split {split!r}; expected train, test or all")


def base_task_id(task_id: str) -> str:
    """The EMMOE task a folder belongs to: `12_v3` (a seeded scene variant) -> `12`, `91` -> `91`."""
    return task_id.split("_v", 1)[0]


def is_test_task(task_id: str) -> bool:
    """Whether a task folder is an EMMOE test task (91-100) or a variant of one."""
    base = base_task_id(task_id)
    return base.isdigit() and int(base) in TEST_IDS


def task_sort_key(task_id: str) -> tuple[int, int | str]:
    """Numeric ids in numeric order, then other ids alphabetically."""
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)


def read_task(directory: Path | str, split: str) -> Task:
    """Read one task directory (info.txt and keypath.json; scene.json and images are read on demand).

    Raises:
        DatasetError: when a required file is missing or malformed.
    """
    directory = Path(directory)
    return Task(task_id=directory.name, split=split, directory=directory,
                info=read_info(directory / INFO_FILE), keypaths=read_keypaths(directory / KEYPATH_FILE))


BROKEN_TASK_NOTE = "its runs are not scored"


def load_tasks(data_dir: Path | str, split: str = "all", problems: list[str] | None = None) -> dict[str, Task]:
    """Every task of the selected split(s), keyed by task id, in task-id order.

    Args:
        data_dir: the data folder (holding train/ and test/).
        split: "train", "test" or "all".
        problems: when given, a malformed task is described here and left out instead of raising, so that one
            broken task folder does not stop the others from being scored.

    Raises:
        DatasetError: for a malformed task (unless `problems` is given) or a task id present in both splits.
    """
    root = resolve_data_root(data_dir)
    tasks: dict[str, Task] = {}
    for split_name in split_names(split):
        folder = root / split_name
        if not folder.is_dir():
            continue
        for directory in sorted((entry for entry in folder.iterdir() if entry.is_dir()),
                                key=lambda entry: task_sort_key(entry.name)):
            if directory.name in tasks:
                raise DatasetError(f"{directory}: task {directory.name} also exists in {tasks[directory.name].directory}")
            try:
                tasks[directory.name] = read_task(directory, split_name)
            except DatasetError as error:
                if problems is None:
                    raise
                problems.append(f"{error}; task {directory.name} is left out ({BROKEN_TASK_NOTE})")
    return dict(sorted(tasks.items(), key=lambda item: task_sort_key(item[0])))


def find_task(data_dir: Path | str, task_id: str) -> Task | None:
    """The task with this id in either split, or None when no such directory exists.

    Raises:
        DatasetError: when the data folder or the task's files are malformed.
    """
    root = resolve_data_root(data_dir)
    for split_name in SPLITS:
        directory = root / split_name / task_id
        if directory.is_dir():
            return read_task(directory, split_name)
    return None


def subtask_images(directory: Path | str) -> dict[int, dict[str, Path]]:
    """The `subtask{n}_{view}.png` images in a folder: n -> view -> path, n ascending, views in VIEWS order."""
    found: dict[int, dict[str, Path]] = {}
    for entry in Path(directory).iterdir():
        match = _IMAGE_NAME.match(entry.name)
        if match:
            found.setdefault(int(match.group("index")), {})[match.group("view")] = entry
    return {index: {view: found[index][view] for view in VIEWS if view in found[index]} for index in sorted(found)}


def image_name(index: int, view: str) -> str:
    """`subtask{index}_{view}.png`."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    return f"subtask{index}_{view}.png"


def write_task(data_dir: Path | str, split: str, task_id: str, info: InfoTrajectory, keypaths: Sequence[Keypath],
               scene: Any = None, images: Mapping[int, Mapping[str, Path]] | None = None) -> Path:
    """Write one task directory in the official layout and return it.

    Args:
        data_dir: the folder holding train/ and test/ (created when missing).
        split: "train" or "test".
        task_id: the task directory name.
        info: written as info.txt.
        keypaths: written as keypath.json (validated first).
        scene: written as scene.json when given (any JSON value, untouched).
        images: subtask index -> view -> existing PNG file, copied as subtask{n}_{view}.png.

    Raises:
        DatasetError: for an unknown split or keypaths that do not validate.
    """
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; expected train or test")
    keypath_json = keypaths_to_json(keypaths)
    parse_keypaths(keypath_json, f"keypaths of task {task_id}")
    directory = Path(data_dir) / split / task_id
    directory.mkdir(parents=True, exist_ok=True)
    (directory / INFO_FILE).write_text(format_info(info), encoding="utf-8")
    (directory / KEYPATH_FILE).write_text(json.dumps(keypath_json, indent=2) + "\n", encoding="utf-8")
    if scene is not None:
        (directory / SCENE_FILE).write_text(json.dumps(scene, indent=2) + "\n", encoding="utf-8")
    for index, views in (images or {}).items():
        for view, source in views.items():
            shutil.copyfile(source, directory / image_name(index, view))
    return directory


# ---- task attributes -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskAttributes:
    """Task-attribute membership: attribute name -> task ids (ints, as the release numbers tasks)."""

    members: Mapping[str, frozenset[int]]

    def of(self, task_id: str) -> tuple[str, ...]:
        """The attributes of a task (none for non-numeric ids)."""
        if not task_id.isdigit():
            return ()
        number = int(task_id)
        return tuple(name for name, ids in self.members.items() if number in ids)


def parse_task_attributes(data: Any, source: str) -> TaskAttributes:
    """Validate `{attribute: [task ids]}` (keys starting with `_` are notes and ignored).

    Raises:
        DatasetError: naming the attribute.
    """
    if not isinstance(data, dict):
        raise DatasetError(f"{source}: expected an object mapping attribute names to lists of task ids")
    members: dict[str, frozenset[int]] = {}
    for name, ids in data.items():
        if name.startswith("_"):
            continue
        if not isinstance(ids, list) or not all(isinstance(value, int) and not isinstance(value, bool) for value in ids):
            raise DatasetError(f"{source}: attribute {name!r} must be a list of integer task ids")
        members[name] = frozenset(ids)
    return TaskAttributes(members)


def load_task_attributes(path: Path | str | None = None) -> TaskAttributes:
    """Task attributes from a JSON file; without a path, the release's lists shipped with emmoe_eval.

    The shipped lists are those the released metric notebooks hard-code; the release's task numbering may not follow
    the paper's appendix order, so treat per-attribute results on the official data as indicative.
    """
    if path is None:
        return default_task_attributes()
    path = Path(path)
    return parse_task_attributes(read_json_file(path), str(path))


@lru_cache(maxsize=1)
def default_task_attributes() -> TaskAttributes:
    """The shipped copy of the release's task-attribute lists (parsed once per process)."""
    text = resources.files("emmoe_eval").joinpath("data/official_task_attributes.json").read_text(encoding="utf-8")
    return parse_task_attributes(json.loads(text), "emmoe_eval/data/official_task_attributes.json")


# ---- helpers -------------------------------------------------------------------------------------------------------

def _read_text(path: Path) -> str:
    try:
        return read_text_file(path)
    except TextFileError as error:
        raise DatasetError(f"{path}: {'file not found' if error.missing else f'cannot read: {error.reason}'}") from None


def read_json_file(path: Path) -> Any:
    """Decode a JSON file.

    Raises:
        DatasetError: naming the file, line and column of a syntax error, or a missing or unreadable file.
    """
    text = _read_text(path)
    try:
        return decode_json(text)
    except JSONTextError as error:
        raise DatasetError(f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}") from None
