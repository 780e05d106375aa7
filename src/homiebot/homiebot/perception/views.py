"""Labelled head views from the MuJoCo apartment: what the learned detector is trained and evaluated on.

For each task's scene (and seeded variants of it) the robot is put at sampled poses, three quarters of them 0.5-2.2
m from an object or piece of furniture and facing it, the rest anywhere free, and the four head views are rendered
with depth and instance segmentation. Segmentation becomes a class image (`DetectorClasses`: 0 background, then
every object kind and furniture kind of the catalog). In a third of the scenes the doors and drawers are set to
random openings, so the insides of the fridge, cabinets and drawers are seen too. A scene's views go to one
`<out>/<task>_<seed>.npz` shard (rgb uint8, depth uint16 millimetres, label uint8); a shard already written is
skipped, so a stopped run resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from emmoe_core.perception.classes import DetectorClasses
from emmoe_core.robot.state import VIEWS


@dataclass(frozen=True)
class ViewSampling:
    """How views are sampled.

    Attributes:
        poses_per_scene: robot poses per scene (four views each).
        near_share: share of poses near a thing and facing it (the rest: anywhere free).
        opened_share: share of scenes whose doors and drawers are set to random openings.
        clearance: metres from the robot's centre to the nearest obstacle at a sampled pose.
    """

    poses_per_scene: int = 12
    near_share: float = 0.75
    opened_share: float = 0.35
    clearance: float = 0.35


def catalog_classes() -> DetectorClasses:
    """Background, every object kind, every furniture kind of the embedded apartment's catalog."""
    from habitat_bridge.catalog import FURNITURE_KINDS, OBJECT_KINDS

    return DetectorClasses(("background", *sorted(OBJECT_KINDS), *sorted(FURNITURE_KINDS)))


def class_image(segmentation: np.ndarray, canonicals: tuple[str, ...], classes: DetectorClasses) -> np.ndarray:
    """(H, W) uint8 class indices from instance ids (-1 and instances of no class: background)."""
    lookup = np.array([classes.index.get(canonical, 0) for canonical in canonicals] + [0], dtype=np.uint8)
    return lookup[np.where(segmentation >= 0, segmentation, len(canonicals))]


def _sample_pose(rng: np.random.Generator, free: Callable[[float, float], bool],
                 things: list[tuple[float, float, float]], bounds: tuple[float, float, float, float],
                 near: bool) -> tuple[float, float, float] | None:
    x_low, x_high, y_low, y_high = bounds
    for _ in range(200):
        if near and things:
            tx, ty, farthest = things[int(rng.integers(len(things)))]
            distance, angle = rng.uniform(0.5, farthest), rng.uniform(-math.pi, math.pi)
            x, y = tx + distance * math.cos(angle), ty + distance * math.sin(angle)
            yaw = math.atan2(ty - y, tx - x) + rng.normal(0.0, 0.25)
        else:
            x, y, yaw = rng.uniform(x_low, x_high), rng.uniform(y_low, y_high), rng.uniform(-math.pi, math.pi)
        if free(x, y):
            return x, y, yaw
    return None


def render_scene(backend: object, scene: object, sampling: ViewSampling, classes: DetectorClasses,
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Reset `backend` (a MujocoBackend) on `scene` and render the views of sampled poses (see the module
    docstring)."""
    from habitat_bridge.scene_spec import SceneSpec

    backend.reset(SceneSpec.from_dict(scene))  # type: ignore[attr-defined]
    if rng.random() < sampling.opened_share:
        for container in backend.container_states():  # type: ignore[attr-defined]
            if rng.random() < 0.6:
                backend.set_container_position(  # type: ignore[attr-defined]
                    container.name, float(rng.uniform(0.3, 1.0)) * container.upper)
    grid = backend.occupancy_grid().inflated(sampling.clearance)  # type: ignore[attr-defined]
    # Objects are looked at from up to 1.8 m (where the skills see them), furniture from up to 2.5 m.
    things = [(state.pose.position[0], state.pose.position[1], 1.8 if state.kind == "object" else 2.5)
              for state in backend.object_states()  # type: ignore[attr-defined]
              if state.kind in ("object", "furniture", "container")]
    objects = [thing for thing in things if thing[2] == 1.8]
    things = objects * 4 + things  # most near poses face a small object
    rows, columns = grid.shape
    (x0, y0), (x1, y1) = grid.center_of(0, 0), grid.center_of(columns - 1, rows - 1)
    bounds = (min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1))
    rgb, depth, label, focal = [], [], [], []
    for index in range(sampling.poses_per_scene):
        pose = _sample_pose(rng, grid.is_free, things, bounds, index < sampling.near_share * sampling.poses_per_scene)
        if pose is None:
            continue
        backend.teleport_base(*pose)  # type: ignore[attr-defined]
        observation = backend.observe(VIEWS, depth=True, segmentation=True)  # type: ignore[attr-defined]
        for view in VIEWS:
            rgb.append(observation.rgb[view])
            depth.append(np.clip(observation.depth[view] * 1000.0, 0, 65535).astype(np.uint16))
            label.append(class_image(observation.segmentation[view], observation.instance_canonicals, classes))
            focal.append(observation.cameras[view].fx)
    return {"rgb": np.stack(rgb), "depth": np.stack(depth), "label": np.stack(label),
            "focal": np.array(focal, np.float32)}


def render_views(task_ids: Iterable[int], seeds: Iterable[int | None], out: Path, sampling: ViewSampling,
                 progress: Callable[[str], None] = print) -> list[Path]:
    """Render every (task, seed) scene into `<out>/<task>_<seed>.npz` (None: the task's own draw), skipping shards
    already written; the shards of all of them."""
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    from homiebot.benchmark_tasks import DEFAULT_DEFINITIONS, scene_for
    from homiebot.task_definitions import load_all

    definitions = load_all(DEFAULT_DEFINITIONS)
    classes = catalog_classes()
    out.mkdir(parents=True, exist_ok=True)
    (out / "classes.txt").write_text("\n".join(classes.names) + "\n")
    jobs = [(task, seed) for task in task_ids for seed in seeds]
    shards, backend = [], None
    try:
        for number, (task, seed) in enumerate(jobs, 1):
            shard = out / f"{task}_{'own' if seed is None else seed}.npz"
            shards.append(shard)
            if shard.exists():
                continue
            backend = backend or MujocoBackend()
            rng = np.random.default_rng([task, 0 if seed is None else seed + 1])
            arrays = render_scene(backend, scene_for(definitions[task], seed), sampling, classes, rng)
            partial = shard.with_suffix(".partial.npz")
            np.savez_compressed(partial, **arrays)
            partial.rename(shard)
            progress(f"[views] {number}/{len(jobs)} task {task} seed {seed}: {len(arrays['rgb'])} views")
    finally:
        if backend is not None:
            backend.close()
    return shards
