"""The scene-spec schema (version 1): one description of an episode's scene that every backend builds.

A spec is a JSON or YAML mapping::

    schema: homiebot-scene        # fixed marker
    version: 1
    name: apartment_seed_7        # free text, used as the episode id
    seed: 7                       # drives anything left to chance (objects without an offset)
    rooms:     [{name, kind: living_room|kitchen|dining_area, bounds: [xmin, ymin, xmax, ymax],
                 floor_color: [r, g, b], canonical: "living_room" | ""}]
    walls:     [{start: [x, y], end: [x, y], thickness: 0.1, height: 2.6}]
    furniture: [{name, canonical, model, pose: {x, y, yaw}, size: [length, depth, height], color: [r, g, b],
                 room, elevation: 0.0,
                 articulations: [{name, slot, joint: hinge|slide, range: [lo, hi], open_threshold, initial}]}]
    objects:   [{name, canonical, shape, size: [x, y, z], color: [r, g, b], mass, receptacle, surface, inside,
                 offset: [u, v] | null, yaw}]
    robot:     {pose: {x, y, yaw}}

Units are metres, radians and kilograms; the world is z-up. Furniture poses place the centre of the footprint on the
floor (see habitat_bridge.furniture for each model's local frame). An object rests on a named support region
(`surface`) of its `receptacle` (a furniture name, or an articulation name for drawers); `offset` is its position in
that region relative to the region's centre (null: the backend samples one from the spec's seed); `inside` says
whether that region is inside a container and must agree with the region. Canonical names are entries of the EMMOE
alias table (emmoe_core.names). Articulations default to the release's thresholds: doors 0.8 rad, drawers 0.25 m.

Validation errors name the offending field, e.g. ``furniture[2].size: expected 3 positive numbers, got [1, 0, 2]``.
The official EMMOE/Habitat RearrangeDataset scene.json form is recognised too (see habitat_bridge.official).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from emmoe_core.names import default_alias_table

from habitat_bridge import catalog
from habitat_bridge.scene_elements import (
    Articulation,
    Furniture,
    Pose2D,
    RobotStart,
    Room,
    SceneObject,
    SceneSpecError,
    Wall,
    field_error,
    mapping_field,
    name_field,
    numbers_field,
)

# The schema's element types are defined in habitat_bridge.scene_elements and are part of this module's API.
__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "Articulation",
    "Furniture",
    "Pose2D",
    "RobotStart",
    "Room",
    "SceneObject",
    "SceneSpec",
    "SceneSpecError",
    "Wall",
    "load_scene_spec",
    "parse_scene_text",
    "save_scene_spec",
    "spec_from_text",
]

SCHEMA = "homiebot-scene"
SCHEMA_VERSION = 1

T = TypeVar("T")

@dataclass(frozen=True)
class SceneSpec:
    """A whole scene: rooms, walls, furniture, objects, robot start and seed (schema version 1).

    Construction validates everything that can be checked without a simulator: names are unique, canonical names
    are in the alias table, receptacles and support regions exist, objects fit where they are placed, the robot
    starts inside a room.
    """

    name: str
    seed: int
    rooms: tuple[Room, ...]
    walls: tuple[Wall, ...]
    furniture: tuple[Furniture, ...]
    objects: tuple[SceneObject, ...]
    robot: RobotStart
    version: int = SCHEMA_VERSION
    _by_name: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name_field(self.name, "name")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise field_error("seed", f"expected an integer, got {self.seed!r}")
        if self.version != SCHEMA_VERSION:
            raise field_error("version", f"this reader knows version {SCHEMA_VERSION}, got {self.version!r}")
        if not self.rooms:
            raise field_error("rooms", "a scene needs at least one room")
        aliases = default_alias_table().aliases
        by_name: dict[str, Any] = {}

        def claim(name: str, item: Any, path: str) -> None:
            if name in by_name:
                raise field_error(f"{path}.name", f"name {name!r} is used twice")
            by_name[name] = item

        for index, room in enumerate(self.rooms):
            claim(room.name, room, f"rooms[{index}]")
            if room.canonical and room.canonical not in aliases:
                raise field_error(f"rooms[{index}].canonical", f"{room.canonical!r} is not in the alias table")
        room_names = {room.name for room in self.rooms}
        for index, item in enumerate(self.furniture):
            path = f"furniture[{index}]"
            claim(item.name, item, path)
            if item.canonical not in aliases:
                raise field_error(f"{path}.canonical", f"{item.canonical!r} is not in the alias table")
            if item.room and item.room not in room_names:
                raise field_error(f"{path}.room", f"no room named {item.room!r}")
            for number, articulation in enumerate(item.articulations):
                claim(articulation.name, articulation, f"{path}.articulations[{number}]")
        for index, obj in enumerate(self.objects):
            path = f"objects[{index}]"
            claim(obj.name, obj, path)
            if obj.canonical not in aliases:
                raise field_error(f"{path}.canonical", f"{obj.canonical!r} is not in the alias table")
            self._check_placement(obj, path, by_name)
        if not any(room.contains(self.robot.pose.x, self.robot.pose.y) for room in self.rooms):
            raise field_error("robot.pose", f"({self.robot.pose.x:g}, {self.robot.pose.y:g}) is not inside any room")
        object.__setattr__(self, "_by_name", by_name)

    def _check_placement(self, item: SceneObject, path: str, by_name: dict[str, Any]) -> None:
        owner = by_name.get(item.receptacle)
        if isinstance(owner, Articulation):
            owner = next(piece for piece in self.furniture if owner in piece.articulations)
        if not isinstance(owner, Furniture):
            raise field_error(f"{path}.receptacle", f"no furniture or drawer named {item.receptacle!r}")
        region = owner.geometry.surface(item.surface)
        if region is None:
            names = ", ".join(region.name for region in owner.geometry.surfaces) or "none"
            raise field_error(f"{path}.surface", f"{owner.name} has no support region {item.surface!r}; available: {names}")
        if region.part is not None:
            articulation = owner.articulation_for_slot(region.part)
            if articulation is None or item.receptacle not in (articulation.name, owner.name):
                raise field_error(f"{path}.receptacle", f"region {item.surface!r} belongs to a drawer; name the drawer")
        if item.inside != region.inside:
            raise field_error(f"{path}.inside", f"region {item.surface!r} of {owner.name} is "
                                          f"{'inside' if region.inside else 'not inside'} a container")
        if item.size[2] > region.clearance + 1e-9:
            raise field_error(f"{path}.size", f"{item.size[2]:g} m tall does not fit under {region.clearance:g} m "
                                        f"in {owner.name}.{item.surface}")
        if item.offset is not None:
            u, v = item.offset
            if abs(u) > region.half[0] + 1e-9 or abs(v) > region.half[1] + 1e-9:
                raise field_error(f"{path}.offset", f"({u:g}, {v:g}) lies outside {owner.name}.{item.surface} "
                                              f"(half extents {region.half[0]:g} x {region.half[1]:g})")

    # ---- look-ups ----------------------------------------------------------------------------------------------
    def item(self, name: str) -> Room | Furniture | Articulation | SceneObject | None:
        """The room, furniture, articulation or object called `name`."""
        return self._by_name.get(name)

    def owner_of(self, articulation_name: str) -> Furniture | None:
        """The furniture an articulation belongs to."""
        return next((piece for piece in self.furniture
                     if any(item.name == articulation_name for item in piece.articulations)), None)

    def receptacle_furniture(self, obj: SceneObject) -> Furniture:
        """The furniture an object starts on or in (the drawer's counter for a drawer)."""
        found = self.item(obj.receptacle)
        if isinstance(found, Articulation):
            owner = self.owner_of(found.name)
            if owner is not None:
                return owner
        if isinstance(found, Furniture):
            return found
        raise SceneSpecError(f"objects: {obj.name}: no receptacle {obj.receptacle!r}")

    def bounds(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) over all rooms."""
        return (min(room.bounds[0] for room in self.rooms), min(room.bounds[1] for room in self.rooms),
                max(room.bounds[2] for room in self.rooms), max(room.bounds[3] for room in self.rooms))

    def with_seed(self, seed: int) -> SceneSpec:
        """The same scene with another seed (objects without an offset land elsewhere)."""
        return replace(self, seed=seed)

    # ---- (de)serialisation ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain mapping in the documented schema."""
        return {
            "schema": SCHEMA,
            "version": self.version,
            "name": self.name,
            "seed": self.seed,
            "rooms": [{"name": room.name, "kind": room.kind, "bounds": list(room.bounds),
                       "floor_color": list(room.floor_color), "canonical": room.canonical} for room in self.rooms],
            "walls": [{"start": list(wall.start), "end": list(wall.end), "thickness": wall.thickness,
                       "height": wall.height} for wall in self.walls],
            "furniture": [{
                "name": item.name, "canonical": item.canonical, "model": item.model, "pose": item.pose.to_dict(),
                "size": list(item.size), "color": list(item.color), "room": item.room, "elevation": item.elevation,
                "articulations": [{"name": joint.name, "slot": joint.slot, "joint": joint.joint,
                                   "range": list(joint.range), "open_threshold": joint.open_threshold,
                                   "initial": joint.initial} for joint in item.articulations],
            } for item in self.furniture],
            "objects": [{
                "name": item.name, "canonical": item.canonical, "shape": item.shape, "size": list(item.size),
                "color": list(item.color), "mass": item.mass, "receptacle": item.receptacle,
                "surface": item.surface, "inside": item.inside,
                "offset": None if item.offset is None else list(item.offset), "yaw": item.yaw,
            } for item in self.objects],
            "robot": {"pose": self.robot.pose.to_dict()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> SceneSpec:
        """Parse and validate a mapping in the documented schema.

        Raises:
            SceneSpecError: naming the first invalid field.
        """
        top = mapping_field(data, "", required=("schema", "version", "name", "rooms", "furniture", "objects", "robot"),
                            optional=("seed", "walls"))
        if top["schema"] != SCHEMA:
            raise field_error("schema", f"expected {SCHEMA!r}, got {top['schema']!r}")
        if top["version"] != SCHEMA_VERSION:
            raise field_error("version", f"this reader knows version {SCHEMA_VERSION}, got {top['version']!r}")
        rooms = _items(top["rooms"], "rooms", _room)
        walls = _items(top.get("walls", []), "walls", _wall)
        pieces = _items(top["furniture"], "furniture", _furniture)
        objects = _items(top["objects"], "objects", _object)
        robot_map = mapping_field(top["robot"], "robot", required=("pose",))
        robot = RobotStart(Pose2D.from_dict(robot_map["pose"], "robot.pose"))
        seed = top.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise field_error("seed", f"expected an integer, got {seed!r}")
        return cls(name=name_field(top["name"], "name"), seed=seed, rooms=rooms, walls=walls, furniture=pieces,
                                   objects=objects, robot=robot)


# ---- parsing helpers -----------------------------------------------------------------------------------------------
def _items(data: Any, path: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not isinstance(data, list):
        raise field_error(path, f"expected a list, got {type(data).__name__}")
    return tuple(parse(item, f"{path}[{index}]") for index, item in enumerate(data))


def _construct(factory: Callable[..., T], path: str, **kwargs: Any) -> T:
    """Build a dataclass, prefixing its own validation errors with `path`."""
    try:
        return factory(**kwargs)
    except SceneSpecError as error:
        raise SceneSpecError(f"{path}.{error}") from None


def _room(data: Any, path: str) -> Room:
    mapping = mapping_field(data, path, required=("name", "kind", "bounds"), optional=("floor_color", "canonical"))
    return _construct(Room, path, name=mapping["name"], kind=mapping["kind"],
                      bounds=numbers_field(mapping["bounds"], 4, f"{path}.bounds"),
                      floor_color=numbers_field(mapping.get("floor_color", [0.6, 0.5, 0.4]), 3, f"{path}.floor_color",
                                                unit=True),
                      canonical=mapping.get("canonical", "") or "")


def _wall(data: Any, path: str) -> Wall:
    mapping = mapping_field(data, path, required=("start", "end"), optional=("thickness", "height"))
    return _construct(Wall, path, start=numbers_field(mapping["start"], 2, f"{path}.start"),
                                                      end=numbers_field(mapping["end"], 2, f"{path}.end"), thickness=mapping.get("thickness", 0.1),
                      height=mapping.get("height", 2.6))


def _articulation(data: Any, path: str) -> Articulation:
    mapping = mapping_field(data, path, required=("name", "slot", "joint", "range", "open_threshold"),
                            optional=("initial",))
    return _construct(Articulation, path, name=mapping["name"], slot=mapping["slot"], joint=mapping["joint"],
                      range=numbers_field(mapping["range"], 2, f"{path}.range"),
                      open_threshold=mapping["open_threshold"], initial=mapping.get("initial", 0.0))


def _furniture(data: Any, path: str) -> Furniture:
    mapping = mapping_field(data, path, required=("name", "canonical", "model", "pose", "size"),
                            optional=("color", "room", "elevation", "articulations"))
    articulations = _items(mapping.get("articulations", []), f"{path}.articulations", _articulation)
    return _construct(Furniture, path, name=mapping["name"], canonical=mapping["canonical"], model=mapping["model"],
                      pose=Pose2D.from_dict(mapping["pose"], f"{path}.pose"),
                      size=numbers_field(mapping["size"], 3, f"{path}.size", positive=True),
                      color=numbers_field(mapping.get("color", [0.8, 0.8, 0.8]), 3, f"{path}.color", unit=True),
                      room=mapping.get("room", "") or "", elevation=mapping.get("elevation", 0.0),
                      articulations=articulations)


def _object(data: Any, path: str) -> SceneObject:
    mapping = mapping_field(data, path, required=("name", "canonical", "receptacle", "surface"),
                            optional=("shape", "size", "color", "mass", "inside", "offset", "yaw"))
    kind = catalog.OBJECT_KINDS.get(mapping["canonical"]) if isinstance(mapping["canonical"], str) else None
    if kind is None and not all(key in mapping for key in ("shape", "size", "color", "mass")):
        raise field_error(f"{path}.canonical", f"{mapping['canonical']!r} has no built-in shape; give shape, size, color "
                                         "and mass")
    offset = mapping.get("offset")
    return _construct(
        SceneObject, path, name=mapping["name"], canonical=mapping["canonical"],
        shape=mapping.get("shape", kind.shape if kind else ""),
        size=numbers_field(mapping.get("size", kind.size if kind else None), 3, f"{path}.size", positive=True),
        color=numbers_field(mapping.get("color", kind.color if kind else None), 3, f"{path}.color", unit=True),
        mass=mapping.get("mass", kind.mass if kind else 0.0), receptacle=mapping["receptacle"],
        surface=mapping["surface"], inside=mapping.get("inside", False),
        offset=None if offset is None else numbers_field(offset, 2, f"{path}.offset"), yaw=mapping.get("yaw", 0.0))


# ---- files ---------------------------------------------------------------------------------------------------------
def parse_scene_text(text: str, source: str = "<text>") -> Any:
    """Parse JSON or YAML text into a mapping.

    Raises:
        SceneSpecError: the text is neither valid JSON nor valid YAML (the message names the source).
    """
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise SceneSpecError(f"{source}: invalid JSON at line {error.lineno} column {error.colno}: "
                                 f"{error.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SceneSpecError(f"{source}: invalid YAML: {error}") from None


def spec_from_text(text: str, source: str = "<text>") -> SceneSpec:
    """Parse and validate a scene spec from JSON or YAML text."""
    data = parse_scene_text(text, source)
    try:
        return SceneSpec.from_dict(data)
    except SceneSpecError as error:
        raise SceneSpecError(f"{source}: {error}") from None


def load_scene_spec(path: str | Path) -> SceneSpec:
    """Read and validate a scene-spec file (.json, .yaml or .yml).

    Raises:
        SceneSpecError: the file is unreadable or invalid; the message names the file and field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SceneSpecError(f"{path}: cannot read: {error.strerror}") from None
    return spec_from_text(text, str(path))


def save_scene_spec(spec: SceneSpec, path: str | Path) -> Path:
    """Write a scene spec as JSON (.json) or YAML (.yaml/.yml)."""
    path = Path(path)
    data = spec.to_dict()
    if path.suffix.lower() in (".yaml", ".yml"):
        text = yaml.safe_dump(data, sort_keys=False)
    else:
        text = json.dumps(data, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return path

