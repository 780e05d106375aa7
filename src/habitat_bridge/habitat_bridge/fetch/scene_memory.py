"""`SceneMemory`: what the `fetch` backend knows about the room, with no simulator to ask.

A real robot cannot be queried for where every object is. The benchmark's checks before execution (unknown target,
hand full or empty, closed container, too far) need that much, so the fetch backend keeps a memory of the room:
- the room map the operator gives for the episode, in the scene-spec format (habitat_bridge.scene_spec): rooms,
  furniture with their doors and drawers, and where the operator put each object before the run;
- updated by the subtasks the robot executed (the StepRecords the planner publishes): a successful Pick puts the
  object in the hand, a successful Put rests it on or in its place, Open and Close move the part to its open or
  closed end. This is how the paper judges keypaths without a simulator: from the executed subtasks.

The robot's own pose comes from odometry (the caller passes it in); distances are planar, from the base to each
pose, as the simulator backends give them. Pure Python (no ROS): the fetch backend owns one per episode.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from emmoe_core.robot.layout import SceneLayout
from emmoe_core.robot.state import ContainerState, InstanceState, Pose, UnknownNameError

from habitat_bridge.backends.base import resolve_name
from habitat_bridge.backends.mjcf_builder import CEILING_HEIGHT
from habitat_bridge.furniture import slot_defaults
from habitat_bridge.layout import local_to_world, object_start_pose, resolve_offsets, scene_layout
from habitat_bridge.scene_spec import SceneSpec


@dataclass(frozen=True)
class _Entry:
    """One remembered instance: its state at the robot's origin and its extra labels ("drawer", room kinds)."""

    state: InstanceState
    labels: tuple[str, ...] = ()


class SceneMemory:
    """The room as the fetch backend knows it (see the module docstring). Thread-safe."""

    def __init__(self, spec: SceneSpec) -> None:
        """Start from the operator's map of the room (object offsets resolved as the simulator resolves them)."""
        self.spec = resolve_offsets(spec)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._containers: dict[str, ContainerState] = {}
        self.held: str | None = None
        for obj in self.spec.objects:
            x, y, z, yaw = object_start_pose(self.spec, obj)
            self._add(InstanceState(obj.name, obj.canonical, "object", Pose.from_yaw(x, y, z, yaw), obj.size,
                                    obj.receptacle, obj.surface, obj.inside))
        for piece in self.spec.furniture:
            centre = local_to_world(piece, (0.0, 0.0, piece.size[2] / 2))
            kind = "container" if piece.articulations else "furniture"
            self._add(InstanceState(piece.name, piece.canonical, kind, Pose.from_yaw(*centre, piece.pose.yaw),
                                    piece.size))
            handles = {moving.key: moving.handle for moving in piece.geometry.moving}
            for part in piece.articulations:
                label = slot_defaults(piece.model, part.slot).label
                at = local_to_world(piece, handles[part.slot]) if part.slot in handles else centre
                self._add(InstanceState(part.name, piece.canonical, "container",
                                        Pose.from_yaw(*at, piece.pose.yaw), piece.size), (label,))
                self._containers[part.name] = ContainerState(part.name, piece.canonical, label, piece.name,
                                                             part.joint, part.initial, part.range[0], part.range[1],
                                                             part.open_threshold)
        for room in self.spec.rooms:
            xmin, ymin, xmax, ymax = room.bounds
            self._add(InstanceState(room.name, room.canonical or room.kind, "room",
                                    Pose(((xmin + xmax) / 2, (ymin + ymax) / 2, 0.0)),
                                    (xmax - xmin, ymax - ymin, CEILING_HEIGHT)),
                      (room.kind,))

    def _add(self, state: InstanceState, labels: tuple[str, ...] = ()) -> None:
        self._entries[state.name] = _Entry(state, labels)

    # ---- answers -----------------------------------------------------------------------------------------------
    def resolve(self, name: str, base: tuple[float, float]) -> list[str]:
        """Instance names matching a planner's name (instance, canonical or alias), nearest to `base` first."""
        with self._lock:
            matches = resolve_name(name, [(entry.state.name, entry.state.canonical, entry.labels)
                                          for entry in self._entries.values()])
            return sorted(matches, key=lambda match: math.dist(base, self._entries[match].state.pose.position[:2]))

    def object_states(self, names: Iterable[str] | None, base: tuple[float, float]) -> list[InstanceState]:
        """The instances matching `names` (None or empty: all), with their distance from `base`.

        Raises:
            UnknownNameError: a name matches nothing in the room.
        """
        chosen = self._chosen(names, base)
        with self._lock:
            return [replace(self._entries[name].state,
                            distance=math.dist(base, self._entries[name].state.pose.position[:2])) for name in chosen]

    def container_states(self, names: Iterable[str] | None, base: tuple[float, float]) -> list[ContainerState]:
        """Doors and drawers matching `names` (their own names or their furniture's; None or empty: all).

        Raises:
            UnknownNameError: a name matches no door or drawer.
        """
        wanted = list(names or [])
        with self._lock:
            parts = list(self._containers.values())
        if not wanted:
            selected = parts
        else:
            selected = []
            for name in wanted:
                matches = set(self.resolve(name, base))
                found = [part for part in parts if part.name in matches or part.furniture in matches]
                if not found:
                    raise UnknownNameError(name)
                selected.extend(part for part in found if part not in selected)
        with self._lock:
            return [replace(part, distance=math.dist(base, self._entries[part.name].state.pose.position[:2]))
                    for part in selected]

    def scene_layout(self) -> SceneLayout:
        """The map's furniture, doors, drawers and support regions (at their initial positions)."""
        return scene_layout(self.spec)

    def _chosen(self, names: Iterable[str] | None, base: tuple[float, float]) -> list[str]:
        wanted = list(names or [])
        if not wanted:
            with self._lock:
                return list(self._entries)
        chosen: dict[str, None] = {}
        for name in wanted:
            matches = self.resolve(name, base)
            if not matches:
                raise UnknownNameError(name)
            chosen.update(dict.fromkeys(matches))
        return list(chosen)

    # ---- updates from the executed subtasks --------------------------------------------------------------------
    def apply(self, action: str, target: str, place: str, success: bool) -> None:
        """One executed subtask (action as the protocol writes it, resolved instance names); failures change
        nothing. Names the map does not hold are ignored (the executor resolved them against this memory)."""
        if not success:
            return
        verb = action.strip().lower()
        with self._lock:
            if verb == "pick" and target in self._entries:
                self.held = target
                state = self._entries[target].state
                self._entries[target] = _Entry(replace(state, receptacle="", surface="", inside=False),
                                               self._entries[target].labels)
            elif verb == "put" and target in self._entries:
                self._rest(target, place)
                if self.held == target:
                    self.held = None
            elif verb in ("open", "close"):
                for name, part in self._containers.items():
                    if target in (name, part.furniture):
                        self._containers[name] = replace(part, position=part.upper if verb == "open" else part.lower)

    def _rest(self, name: str, place: str) -> None:
        """Put a held object on or in `place`: in a drawer or behind a door (furniture with doors), else on top, at
        the centre."""
        entry = self._entries[name]
        holder = self._entries.get(place)
        if holder is None:
            return
        inside = place in self._containers or any(part.furniture == place and part.label == "door"
                                                  for part in self._containers.values())
        x, y, z = holder.state.pose.position
        top = z + holder.state.size[2] / 2 if not inside else z
        pose = Pose.from_yaw(x, y, top + entry.state.size[2] / 2, entry.state.pose.yaw)
        self._entries[name] = _Entry(replace(entry.state, pose=pose, receptacle=place, surface="",
                                             inside=inside), entry.labels)

    def nearest_object(self, point: Sequence[float], within: float) -> str | None:
        """The remembered object (not furniture) nearest `point`, if one is within `within` metres."""
        with self._lock:
            objects = [entry.state for entry in self._entries.values() if entry.state.kind == "object"]
        best = min(objects, key=lambda state: math.dist(point, state.pose.position), default=None)
        return best.name if best is not None and math.dist(point, best.pose.position) <= within else None

    def follow_hand(self, grasp_point: tuple[float, float, float]) -> None:
        """Move the held object with the grasp point (called with the robot state)."""
        with self._lock:
            if self.held is None:
                return
            entry = self._entries[self.held]
            self._entries[self.held] = _Entry(replace(entry.state, pose=Pose(grasp_point, entry.state.pose.orientation)),
                                              entry.labels)
