"""What `homiebot sim render` and `homiebot sim view` do: pick a scene, render its four views, draw its map.

Scenes come from a spec file (habitat_bridge schema or an official EMMOE scene.json), from an EMMOE task id (the
apartment seeded by the id, holding the objects its instruction names), or from a seed (a generated apartment).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from emmoe_core.robot.state import VIEWS

from habitat_bridge import apartment, layout, topdown
from habitat_bridge.official import OfficialEpisode, is_official_scene, parse_official_episode
from habitat_bridge.scene_spec import SceneSpec, SceneSpecError, parse_scene_text

TASKS_FILE_NAME = "emmoe100_tasks.tsv"


class ToolError(ValueError):
    """A user mistake (missing file, unknown task, invalid scene): one line for the user."""


@dataclass(frozen=True)
class SceneChoice:
    """Which scene a command works on; exactly one of the three sources (or none: seed 0)."""

    scene_path: str = ""
    task_id: int | None = None
    seed: int | None = None
    tasks_file: str = ""


def default_tasks_file() -> Path | None:
    """The EMMOE-100 task list: $HOMIEBOT_DATA/emmoe100_tasks.tsv, else the copy shipped with emmoe_core."""
    candidates = []
    if os.environ.get("HOMIEBOT_DATA"):
        candidates.append(Path(os.environ["HOMIEBOT_DATA"]) / TASKS_FILE_NAME)
    candidates.append(Path(str(resources.files("emmoe_core").joinpath("data", TASKS_FILE_NAME))))
    return next((path for path in candidates if path.is_file()), None)


def task_instruction(task_id: int, tasks_file: str | Path | None = None) -> str | None:
    """The instruction of an EMMOE task from the tab-separated task list (id, instruction), or None without one.

    Raises:
        ToolError: the file is unreadable or has no such task.
    """
    path = Path(tasks_file) if tasks_file else default_tasks_file()
    if path is None:
        return None
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))
    except OSError as error:
        raise ToolError(f"{path}: cannot read the task list: {error.strerror}") from None
    for row in rows[1:]:
        if len(row) >= 2 and row[0].strip() == str(task_id):
            return row[1]
    raise ToolError(f"{path}: no task with id {task_id}")


def load_scene_file(path: str | Path) -> SceneSpec | OfficialEpisode:
    """A scene spec or official episode from a file.

    Raises:
        ToolError: the file is missing or invalid (the message names the file and field).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ToolError(f"{path}: cannot read: {error.strerror}") from None
    try:
        data = parse_scene_text(text, str(path))
        if is_official_scene(data):
            return parse_official_episode(data)
        return SceneSpec.from_dict(data)
    except SceneSpecError as error:
        message = str(error)
        raise ToolError(message if message.startswith(str(path)) else f"{path}: {message}") from None


def choose_scene(choice: SceneChoice) -> SceneSpec:
    """The scene a command line asks for, as an embedded-apartment spec with every object placed.

    Official episodes become apartments holding their objects (apartment.spec_from_official).

    Raises:
        ToolError: conflicting or invalid choices.
    """
    if choice.scene_path and choice.task_id is not None:
        raise ToolError("give either --scene or --task, not both")
    try:
        if choice.scene_path:
            scene = load_scene_file(choice.scene_path)
            if isinstance(scene, OfficialEpisode):
                return layout.resolve_offsets(apartment.spec_from_official(scene, choice.seed or 0))
            return layout.resolve_offsets(scene if choice.seed is None else scene.with_seed(choice.seed))
        if choice.task_id is not None:
            if choice.task_id < 1:
                raise ToolError(f"task ids start at 1, got {choice.task_id}")
            instruction = task_instruction(choice.task_id, choice.tasks_file or None)
            return apartment.scene_for_task(choice.task_id, instruction or "")
        return apartment.generate_apartment(choice.seed or 0)
    except SceneSpecError as error:
        raise ToolError(str(error)) from None


def render_views(spec: SceneSpec, out_dir: str | Path, *, third_person: bool = False,
                 size: int = 256) -> list[Path]:
    """Render the four head views (and optionally four third-person views) of a robot's start pose to PNGs.

    Files: front.png left.png back.png right.png (+ third_front.png ... with third_person). Uses the MuJoCo backend.
    """
    from PIL import Image

    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.backends.mujoco_config import MujocoBackendConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    backend = MujocoBackend(MujocoBackendConfig(image_width=size, image_height=size))
    try:
        backend.reset(spec)
        views = list(VIEWS) + ([f"third_{view}" for view in VIEWS] if third_person else [])
        observation = backend.observe(views)
    finally:
        backend.close()
    written = []
    for view in views:
        path = out / f"{view}.png"
        Image.fromarray(observation.rgb[view]).save(path, optimize=True)
        written.append(path)
    return written


def draw_map(spec: SceneSpec, out_path: str | Path, *, labels: bool = True) -> Path:
    """Write the top-down map of a scene (with object labels) as a PNG."""
    return topdown.draw_topdown(spec, out_path, labels=labels)
