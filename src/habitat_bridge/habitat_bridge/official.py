"""The official EMMOE scene.json: a Habitat 2.0 RearrangeDataset file with one episode.

The release stores each task's simulator episode in this form (`config`, `episodes[]` with a ReplicaCAD staging
`scene_id`, YCB `rigid_objs` with 4x4 poses, `targets`, `markers` for drawer links, `target_receptacles`,
`goal_receptacles`). The Habitat backend loads it as it is. For the embedded MuJoCo apartment only part of it is
meaningful (the ReplicaCAD furniture is not available): the list of YCB objects, which ones are targets and the names
of their receptacles; `habitat_bridge.apartment.spec_from_official` builds an apartment with those.

Habitat is y-up; poses are converted to this project's z-up world with (x, y, z)_habitat -> (x, -z, y).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from habitat_bridge.scene_spec import SceneSpecError

_CONFIG_SUFFIX = ".object_config.json"


@dataclass(frozen=True)
class OfficialObject:
    """One rigid object of an official episode.

    Attributes:
        instance: Habitat instance handle, e.g. "003_cracker_box_:0000".
        canonical: YCB canonical name, e.g. "003_cracker_box".
        config: the object's config file name as written in the episode.
        matrix: 4x4 pose in Habitat's y-up frame (row-major).
    """

    instance: str
    canonical: str
    config: str
    matrix: tuple[tuple[float, ...], ...]

    @property
    def position_zup(self) -> tuple[float, float, float]:
        """Position in the z-up world."""
        x, y, z = (row[3] for row in self.matrix[:3])
        return x, -z, y


@dataclass(frozen=True)
class OfficialEpisode:
    """An official EMMOE/Habitat rearrange episode, kept close to the file.

    Attributes:
        episode_id: the episode's id.
        scene_id: ReplicaCAD scene instance path.
        scene_dataset_config: Habitat scene dataset config path.
        additional_obj_config_paths: where Habitat finds the YCB object configs.
        start_position: agent start (Habitat frame).
        start_rotation: agent start quaternion (x, y, z, w).
        objects: rigid objects in file order, with instance handles.
        targets: instance handle -> 4x4 goal pose.
        target_receptacles: (receptacle handle, link index or None) per target.
        goal_receptacles: (receptacle handle, link index or None) per target.
        markers: marker records as in the file (articulated-object link markers).
        ao_states: articulated-object joint states as in the file.
        object_labels: instance handle -> label ("any_targets|0").
        raw: the episode mapping as read, for the Habitat backend.
    """

    episode_id: str
    scene_id: str
    scene_dataset_config: str
    additional_obj_config_paths: tuple[str, ...]
    start_position: tuple[float, float, float]
    start_rotation: tuple[float, float, float, float]
    objects: tuple[OfficialObject, ...]
    targets: dict[str, tuple[tuple[float, ...], ...]]
    target_receptacles: tuple[tuple[str, int | None], ...]
    goal_receptacles: tuple[tuple[str, int | None], ...]
    markers: tuple[Mapping[str, Any], ...]
    ao_states: Mapping[str, Any]
    object_labels: Mapping[str, str]
    raw: Mapping[str, Any]

    @property
    def target_objects(self) -> tuple[OfficialObject, ...]:
        """The target objects, in the order of `targets`."""
        by_instance = {obj.instance: obj for obj in self.objects}
        return tuple(by_instance[name] for name in self.targets if name in by_instance)


def is_official_scene(data: Any) -> bool:
    """Whether a parsed scene file is in the official RearrangeDataset form."""
    return isinstance(data, Mapping) and "episodes" in data and "schema" not in data


def receptacle_canonical(handle: str) -> str:
    """Canonical furniture name of a receptacle handle: "frl_apartment_table_01_:0000" -> "frl_apartment_table_01"."""
    return handle.split("_:")[0]


def _matrix(value: Any, path: str) -> tuple[tuple[float, ...], ...]:
    ok = isinstance(value, list) and len(value) == 4 and all(
        isinstance(row, list) and len(row) == 4 and all(isinstance(item, (int, float)) and not isinstance(item, bool)
                                                       and math.isfinite(item) for item in row) for row in value)
    if not ok:
        raise SceneSpecError(f"{path}: expected a 4x4 matrix of numbers")
    return tuple(tuple(float(item) for item in row) for row in value)


def _receptacles(value: Any, path: str) -> tuple[tuple[str, int | None], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SceneSpecError(f"{path}: expected a list of [handle, link] pairs")
    pairs = []
    for index, item in enumerate(value):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and (item[1] is None or isinstance(item[1], int))):
            raise SceneSpecError(f"{path}[{index}]: expected [handle, link index or null], got {item!r}")
        pairs.append((item[0], item[1]))
    return tuple(pairs)


def parse_official_episode(data: Any, episode_index: int = 0) -> OfficialEpisode:
    """Read one episode of an official scene.json mapping.

    Raises:
        SceneSpecError: naming the offending field (e.g. "episodes[0].rigid_objs[3]").
    """
    if not is_official_scene(data):
        raise SceneSpecError("episodes: not an official RearrangeDataset file")
    episodes = data["episodes"]
    if not isinstance(episodes, list) or not episodes:
        raise SceneSpecError("episodes: expected a non-empty list")
    if not 0 <= episode_index < len(episodes):
        raise SceneSpecError(f"episodes: index {episode_index} out of range (the file has {len(episodes)})")
    path = f"episodes[{episode_index}]"
    episode = episodes[episode_index]
    if not isinstance(episode, Mapping):
        raise SceneSpecError(f"{path}: expected a mapping")
    for key in ("episode_id", "scene_id", "rigid_objs"):
        if key not in episode:
            raise SceneSpecError(f"{path}.{key}: missing")
    objects = []
    counts: dict[str, int] = {}
    for index, item in enumerate(episode["rigid_objs"]):
        item_path = f"{path}.rigid_objs[{index}]"
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise SceneSpecError(f"{item_path}: expected [config file, 4x4 matrix]")
        config = item[0]
        canonical = config[: -len(_CONFIG_SUFFIX)] if config.endswith(_CONFIG_SUFFIX) else config.rsplit(".", 1)[0]
        number = counts.get(canonical, 0)
        counts[canonical] = number + 1
        objects.append(OfficialObject(f"{canonical}_:{number:04d}", canonical, config,
                                      _matrix(item[1], f"{item_path}[1]")))
    targets_raw = episode.get("targets") or {}
    if not isinstance(targets_raw, Mapping):
        raise SceneSpecError(f"{path}.targets: expected a mapping of instance -> 4x4 matrix")
    targets = {name: _matrix(value, f"{path}.targets.{name}") for name, value in targets_raw.items()}
    info = episode.get("info") or {}
    labels = info.get("object_labels", {}) if isinstance(info, Mapping) else {}
    start_position = episode.get("start_position", [0.0, 0.0, 0.0])
    start_rotation = episode.get("start_rotation", [0.0, 0.0, 0.0, 1.0])
    return OfficialEpisode(
        episode_id=str(episode["episode_id"]),
        scene_id=str(episode["scene_id"]),
        scene_dataset_config=str(episode.get("scene_dataset_config", "")),
        additional_obj_config_paths=tuple(episode.get("additional_obj_config_paths") or ()),
        start_position=tuple(float(value) for value in start_position),  # type: ignore[arg-type]
        start_rotation=tuple(float(value) for value in start_rotation),  # type: ignore[arg-type]
        objects=tuple(objects),
        targets=targets,
        target_receptacles=_receptacles(episode.get("target_receptacles"), f"{path}.target_receptacles"),
        goal_receptacles=_receptacles(episode.get("goal_receptacles"), f"{path}.goal_receptacles"),
        markers=tuple(episode.get("markers") or ()),
        ao_states=dict(episode.get("ao_states") or {}),
        object_labels=dict(labels),
        raw=episode,
    )
