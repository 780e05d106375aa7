"""Which episode a RunTask goal asks for: instruction, episode id, task directory and scene file.

A task id is looked up in the EMMOE data folder (official layout, `data/<split>/<id>/`), whose info.txt gives
the instruction and scene.json the simulator episode; failing that, in a task list (`id<TAB>instruction` lines,
like shared/data/emmoe100_tasks.tsv). A free instruction gets a stable generated id.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from emmoe_eval.dataset import SCENE_FILE, DatasetError, find_task


class InvalidTaskError(ValueError):
    """The goal names no known task and gives no instruction; the message says what to fix."""


@dataclass(frozen=True)
class EpisodeSpec:
    """A resolved episode.

    Attributes:
        episode_id: the task id, or `free-<hash>` for a free instruction.
        instruction: the text the planner gets.
        task_id: the EMMOE task id ("" for a free instruction).
        task_dir: the task's directory in the data folder, when found.
        scene_path: the task's scene.json, when it exists (the simulator is reset with it).
    """

    episode_id: str
    instruction: str
    task_id: str = ""
    task_dir: Path | None = None
    scene_path: Path | None = None


def free_episode_id(instruction: str) -> str:
    """A stable id for a free instruction: `free-` and 8 hex digits of its SHA-1."""
    return "free-" + hashlib.sha1(instruction.encode("utf-8")).hexdigest()[:8]


def read_task_list(path: Path | str) -> dict[str, str]:
    """Read a task list: `id<TAB>instruction` lines; a first line `id<TAB>instruction` is a header.

    Raises:
        InvalidTaskError: naming the file and line when it cannot be read or a line has no tab.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InvalidTaskError(f"{path}: cannot read the task list: {error.strerror}") from None
    tasks: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        task_id, tab, instruction = line.partition("\t")
        if not tab:
            raise InvalidTaskError(f"{path}:{number}: expected 'id<TAB>instruction', found {line!r}")
        if number == 1 and task_id.strip() == "id":
            continue
        tasks[task_id.strip()] = instruction.strip()
    return tasks


def resolve_episode(task_id: str, instruction: str, data_dir: str = "", tasks_file: str = "") -> EpisodeSpec:
    """Resolve a RunTask goal into an episode.

    Args:
        task_id: EMMOE task id, or "" for a free instruction.
        instruction: overrides the task's own instruction when not empty.
        data_dir: the EMMOE data folder ("" when none).
        tasks_file: a task list used when the data folder does not have the task ("" when none).

    Raises:
        InvalidTaskError: when the instruction is empty and the task id is unknown, or the task's files are broken.
    """
    task_id, instruction = task_id.strip(), instruction.strip()
    if not task_id:
        if not instruction:
            raise InvalidTaskError("the goal has neither a task_id nor an instruction")
        return EpisodeSpec(episode_id=free_episode_id(instruction), instruction=instruction)
    task_dir: Path | None = None
    if data_dir:
        try:
            task = find_task(data_dir, task_id)
        except DatasetError as error:
            raise InvalidTaskError(f"task {task_id}: {error}") from None
        if task is not None:
            task_dir = task.directory
            instruction = instruction or task.instruction
    if not instruction and tasks_file:
        instruction = read_task_list(tasks_file).get(task_id, "")
    if not instruction:
        where = ", ".join(part for part in (f"data_dir {data_dir}" if data_dir else "",
                                            f"tasks_file {tasks_file}" if tasks_file else "") if part)
        raise InvalidTaskError(f"unknown task {task_id!r}" + (f" (looked in {where})" if where else
                                                              " (set data_dir or tasks_file, or give an instruction)"))
    scene = task_dir / SCENE_FILE if task_dir is not None else None
    return EpisodeSpec(episode_id=task_id, instruction=instruction, task_id=task_id, task_dir=task_dir,
                       scene_path=scene if scene is not None and scene.is_file() else None)
