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
alias table (emmoe_eval.names). Articulations default to the release's thresholds: doors 0.8 rad, drawers 0.25 m.

Validation errors name the offending field, e.g. ``furniture[2].size: expected 3 positive numbers, got [1, 0, 2]``.
The official EMMOE/Habitat RearrangeDataset scene.json form is recognised too (see habitat_bridge.official).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import yaml
from emmoe_eval.names import default_alias_table

from habitat_bridge import catalog, furniture

SCHEMA = "homiebot-scene"
SCHEMA_VERSION = 1
ROOM_KINDS: tuple[str, ...] = ("living_room", "kitchen", "dining_area")
JOINT_TYPES: tuple[str, ...] = ("hinge", "slide")

T = TypeVar("T")


class SceneSpecError(ValueError):
    """A scene spec is invalid; the message starts with the path of the offending field."""


def _fail(path: str, message: str) -> SceneSpecError:
    return SceneSpecError(f"{path}: {message}" if path else message)


def _numbers(value: Any, count: int, path: str, *, positive: bool = False, unit: bool = False) -> tuple[float, ...]:
    """`count` finite numbers (optionally > 0, or within [0, 1])."""
    ok = isinstance(value, (list, tuple)) and len(value) == count and all(
        isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item) for item in value)
    if ok and positive:
        ok = all(item > 0 for item in value)
    if ok and unit:
        ok = all(0.0 <= item <= 1.0 for item in value)
    if not ok:
        what = "positive numbers" if positive else "numbers in [0, 1]" if unit else "numbers"
        raise _fail(path, f"expected {count} {what}, got {value!r}")
    return tuple(float(item) for item in value)


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, f"expected a number, got {value!r}")
    return float(value)


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, f"expected a non-empty name, got {value!r}")
    if value != value.strip() or "/" in value:
        raise _fail(path, f"names may not contain '/' or surrounding spaces, got {value!r}")
    return value


@dataclass(frozen=True)
class Pose2D:
    """A planar pose: position (metres) and yaw (radians, counter-clockwise from +x)."""

    x: float
    y: float
    yaw: float = 0.0

    def __post_init__(self) -> None:
        for key in ("x", "y", "yaw"):
            _number(getattr(self, key), key)

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Pose2D:
        """Parse `{x, y, yaw}`."""
        mapping = _mapping(data, path, required=("x", "y"), optional=("yaw",))
        return cls(_number(mapping["x"], f"{path}.x"), _number(mapping["y"], f"{path}.y"),
                   _number(mapping.get("yaw", 0.0), f"{path}.yaw"))

    def to_dict(self) -> dict[str, float]:
        """Plain mapping for JSON/YAML."""
        return {"x": self.x, "y": self.y, "yaw": self.yaw}


@dataclass(frozen=True)
class Room:
    """A room: an axis-aligned floor region.

    Attributes:
        name: unique instance name, e.g. "living_room_0".
        kind: one of ROOM_KINDS.
        bounds: (xmin, ymin, xmax, ymax) in metres.
        floor_color: RGB in [0, 1].
        canonical: alias-table entry the room answers to ("living_room"), or "" when none.
    """

    name: str
    kind: str
    bounds: tuple[float, float, float, float]
    floor_color: tuple[float, float, float] = (0.6, 0.5, 0.4)
    canonical: str = ""

    def __post_init__(self) -> None:
        _name(self.name, "name")
        if self.kind not in ROOM_KINDS:
            raise _fail("kind", f"expected one of {', '.join(ROOM_KINDS)}, got {self.kind!r}")
        xmin, ymin, xmax, ymax = _numbers(self.bounds, 4, "bounds")
        if xmax <= xmin or ymax <= ymin:
            raise _fail("bounds", f"expected [xmin, ymin, xmax, ymax] with max > min, got {list(self.bounds)}")
        _numbers(self.floor_color, 3, "floor_color", unit=True)

    def contains(self, x: float, y: float) -> bool:
        """Whether the point lies on this room's floor."""
        xmin, ymin, xmax, ymax = self.bounds
        return xmin <= x <= xmax and ymin <= y <= ymax

    @property
    def center(self) -> tuple[float, float]:
        """Centre of the floor region."""
        xmin, ymin, xmax, ymax = self.bounds
        return (xmin + xmax) / 2, (ymin + ymax) / 2


@dataclass(frozen=True)
class Wall:
    """A straight wall segment.

    Attributes:
        start: (x, y) of one end of the centre line.
        end: (x, y) of the other end.
        thickness: metres.
        height: metres.
    """

    start: tuple[float, float]
    end: tuple[float, float]
    thickness: float = 0.1
    height: float = 2.6

    def __post_init__(self) -> None:
        start = _numbers(self.start, 2, "start")
        end = _numbers(self.end, 2, "end")
        if math.dist(start, end) < 1e-6:
            raise _fail("end", "a wall needs two different end points")
        if _number(self.thickness, "thickness") <= 0:
            raise _fail("thickness", f"expected a positive number, got {self.thickness!r}")
        if _number(self.height, "height") <= 0:
            raise _fail("height", f"expected a positive number, got {self.height!r}")


@dataclass(frozen=True)
class Articulation:
    """A door or drawer of a piece of furniture.

    Attributes:
        name: unique instance name, e.g. "fridge_0_door", "kitchen_drawer_1".
        slot: which part of the model moves ("door", "drawer_0", ...; see furniture.available_slots).
        joint: "hinge" (radians) or "slide" (metres).
        range: (lower, upper) joint limits; 0 (closed) must lie within them.
        open_threshold: joint value at or above which the part counts as open.
        initial: joint value at reset.
    """

    name: str
    slot: str
    joint: str
    range: tuple[float, float]
    open_threshold: float
    initial: float = 0.0

    def __post_init__(self) -> None:
        _name(self.name, "name")
        _name(self.slot, "slot")
        if self.joint not in JOINT_TYPES:
            raise _fail("joint", f"expected one of {', '.join(JOINT_TYPES)}, got {self.joint!r}")
        lower, upper = _numbers(self.range, 2, "range")
        if not lower <= 0.0 < upper:
            raise _fail("range", f"expected [lower, upper] with lower <= 0 < upper, got {list(self.range)}")
        if not lower < _number(self.open_threshold, "open_threshold") <= upper:
            raise _fail("open_threshold", f"{self.open_threshold} is outside the range {list(self.range)}")
        if not lower <= _number(self.initial, "initial") <= upper:
            raise _fail("initial", f"{self.initial} is outside the range {list(self.range)}")


@dataclass(frozen=True)
class Furniture:
    """A piece of furniture (a static receptacle, or an articulated container when it has articulations).

    Attributes:
        name: unique instance name, e.g. "brown_table_0".
        canonical: alias-table entry, e.g. "frl_apartment_table_01".
        model: geometry template (catalog.FURNITURE_MODELS).
        pose: footprint centre and yaw.
        size: (length, depth, height) in metres.
        color: RGB in [0, 1].
        room: name of the room it stands in ("" when none).
        elevation: height of the model's base above the floor (a wall-mounted TV).
        articulations: its doors and drawers.
    """

    name: str
    canonical: str
    model: str
    pose: Pose2D
    size: tuple[float, float, float]
    color: tuple[float, float, float] = (0.8, 0.8, 0.8)
    room: str = ""
    elevation: float = 0.0
    articulations: tuple[Articulation, ...] = ()

    def __post_init__(self) -> None:
        _name(self.name, "name")
        _name(self.canonical, "canonical")
        if self.model not in catalog.FURNITURE_MODELS:
            raise _fail("model", f"expected one of {', '.join(catalog.FURNITURE_MODELS)}, got {self.model!r}")
        _numbers(self.size, 3, "size", positive=True)
        _numbers(self.color, 3, "color", unit=True)
        if _number(self.elevation, "elevation") < 0:
            raise _fail("elevation", f"expected a number >= 0, got {self.elevation!r}")
        offered = furniture.available_slots(self.model, self.size)
        seen: set[str] = set()
        for index, articulation in enumerate(self.articulations):
            if articulation.slot not in offered:
                raise _fail(f"articulations[{index}].slot",
                            f"model {self.model!r} of length {self.size[0]:g} m has no slot {articulation.slot!r}; "
                            f"available: {', '.join(offered) or 'none'}")
            if articulation.slot in seen:
                raise _fail(f"articulations[{index}].slot", f"slot {articulation.slot!r} is used twice")
            seen.add(articulation.slot)
            expected = furniture.slot_defaults(self.model, articulation.slot).joint
            if articulation.joint != expected:
                raise _fail(f"articulations[{index}].joint",
                            f"slot {articulation.slot!r} of a {self.model} is a {expected} joint, not "
                            f"{articulation.joint!r}")

    @cached_property
    def geometry(self) -> furniture.FurnitureGeometry:
        """Boxes, moving parts and support regions (local frame), computed once."""
        return furniture.furniture_geometry(self.model, self.size,
                                            tuple(articulation.slot for articulation in self.articulations))

    def articulation_for_slot(self, slot: str) -> Articulation | None:
        """The articulation that moves `slot`, or None."""
        return next((item for item in self.articulations if item.slot == slot), None)


@dataclass(frozen=True)
class SceneObject:
    """A movable YCB-like object.

    Attributes:
        name: unique instance name, e.g. "apple_0".
        canonical: alias-table entry, e.g. "013_apple".
        shape: one of catalog.OBJECT_SHAPES.
        size: bounding box (x, y, z) in metres.
        color: RGB in [0, 1].
        mass: kilograms.
        receptacle: furniture or articulation (drawer) name it starts on/in.
        surface: support region of the receptacle ("top", "seat", "sink", "shelf_0", "drawer_1", ...).
        inside: whether that region is inside a container; must agree with the region.
        offset: (u, v) position relative to the region's centre, in the receptacle's frame; None = sampled.
        yaw: rotation about z relative to the receptacle (radians).
    """

    name: str
    canonical: str
    shape: str
    size: tuple[float, float, float]
    color: tuple[float, float, float]
    mass: float
    receptacle: str
    surface: str
    inside: bool = False
    offset: tuple[float, float] | None = None
    yaw: float = 0.0

    def __post_init__(self) -> None:
        _name(self.name, "name")
        _name(self.canonical, "canonical")
        if self.shape not in catalog.OBJECT_SHAPES:
            raise _fail("shape", f"expected one of {', '.join(catalog.OBJECT_SHAPES)}, got {self.shape!r}")
        _numbers(self.size, 3, "size", positive=True)
        _numbers(self.color, 3, "color", unit=True)
        if _number(self.mass, "mass") <= 0:
            raise _fail("mass", f"expected a positive number, got {self.mass!r}")
        _name(self.receptacle, "receptacle")
        _name(self.surface, "surface")
        if not isinstance(self.inside, bool):
            raise _fail("inside", f"expected true or false, got {self.inside!r}")
        if self.offset is not None:
            _numbers(self.offset, 2, "offset")
        _number(self.yaw, "yaw")


@dataclass(frozen=True)
class RobotStart:
    """Where the robot starts."""

    pose: Pose2D


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
        _name(self.name, "name")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise _fail("seed", f"expected an integer, got {self.seed!r}")
        if self.version != SCHEMA_VERSION:
            raise _fail("version", f"this reader knows version {SCHEMA_VERSION}, got {self.version!r}")
        if not self.rooms:
            raise _fail("rooms", "a scene needs at least one room")
        aliases = default_alias_table().aliases
        by_name: dict[str, Any] = {}

        def claim(name: str, item: Any, path: str) -> None:
            if name in by_name:
                raise _fail(f"{path}.name", f"name {name!r} is used twice")
            by_name[name] = item

        for index, room in enumerate(self.rooms):
            claim(room.name, room, f"rooms[{index}]")
            if room.canonical and room.canonical not in aliases:
                raise _fail(f"rooms[{index}].canonical", f"{room.canonical!r} is not in the alias table")
        room_names = {room.name for room in self.rooms}
        for index, item in enumerate(self.furniture):
            path = f"furniture[{index}]"
            claim(item.name, item, path)
            if item.canonical not in aliases:
                raise _fail(f"{path}.canonical", f"{item.canonical!r} is not in the alias table")
            if item.room and item.room not in room_names:
                raise _fail(f"{path}.room", f"no room named {item.room!r}")
            for number, articulation in enumerate(item.articulations):
                claim(articulation.name, articulation, f"{path}.articulations[{number}]")
        for index, obj in enumerate(self.objects):
            path = f"objects[{index}]"
            claim(obj.name, obj, path)
            if obj.canonical not in aliases:
                raise _fail(f"{path}.canonical", f"{obj.canonical!r} is not in the alias table")
            self._check_placement(obj, path, by_name)
        if not any(room.contains(self.robot.pose.x, self.robot.pose.y) for room in self.rooms):
            raise _fail("robot.pose", f"({self.robot.pose.x:g}, {self.robot.pose.y:g}) is not inside any room")
        object.__setattr__(self, "_by_name", by_name)

    def _check_placement(self, item: SceneObject, path: str, by_name: dict[str, Any]) -> None:
        owner = by_name.get(item.receptacle)
        if isinstance(owner, Articulation):
            owner = next(piece for piece in self.furniture if owner in piece.articulations)
        if not isinstance(owner, Furniture):
            raise _fail(f"{path}.receptacle", f"no furniture or drawer named {item.receptacle!r}")
        region = owner.geometry.surface(item.surface)
        if region is None:
            names = ", ".join(region.name for region in owner.geometry.surfaces) or "none"
            raise _fail(f"{path}.surface", f"{owner.name} has no support region {item.surface!r}; available: {names}")
        if region.part is not None:
            articulation = owner.articulation_for_slot(region.part)
            if articulation is None or item.receptacle not in (articulation.name, owner.name):
                raise _fail(f"{path}.receptacle", f"region {item.surface!r} belongs to a drawer; name the drawer")
        if item.inside != region.inside:
            raise _fail(f"{path}.inside", f"region {item.surface!r} of {owner.name} is "
                                          f"{'inside' if region.inside else 'not inside'} a container")
        if item.size[2] > region.clearance + 1e-9:
            raise _fail(f"{path}.size", f"{item.size[2]:g} m tall does not fit under {region.clearance:g} m "
                                        f"in {owner.name}.{item.surface}")
        if item.offset is not None:
            u, v = item.offset
            if abs(u) > region.half[0] + 1e-9 or abs(v) > region.half[1] + 1e-9:
                raise _fail(f"{path}.offset", f"({u:g}, {v:g}) lies outside {owner.name}.{item.surface} "
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
        top = _mapping(data, "", required=("schema", "version", "name", "rooms", "furniture", "objects", "robot"),
                       optional=("seed", "walls"))
        if top["schema"] != SCHEMA:
            raise _fail("schema", f"expected {SCHEMA!r}, got {top['schema']!r}")
        if top["version"] != SCHEMA_VERSION:
            raise _fail("version", f"this reader knows version {SCHEMA_VERSION}, got {top['version']!r}")
        rooms = _items(top["rooms"], "rooms", _room)
        walls = _items(top.get("walls", []), "walls", _wall)
        pieces = _items(top["furniture"], "furniture", _furniture)
        objects = _items(top["objects"], "objects", _object)
        robot_map = _mapping(top["robot"], "robot", required=("pose",))
        robot = RobotStart(Pose2D.from_dict(robot_map["pose"], "robot.pose"))
        seed = top.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise _fail("seed", f"expected an integer, got {seed!r}")
        return cls(name=_name(top["name"], "name"), seed=seed, rooms=rooms, walls=walls, furniture=pieces,
                   objects=objects, robot=robot)


# ---- parsing helpers -----------------------------------------------------------------------------------------------
def _mapping(data: Any, path: str, required: Sequence[str] = (), optional: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _fail(path, f"expected a mapping, got {type(data).__name__}")
    for key in required:
        if key not in data:
            raise _fail(f"{path}.{key}" if path else key, "missing")
    known = set(required) | set(optional)
    for key in data:
        if key not in known:
            raise _fail(f"{path}.{key}" if path else str(key),
                        f"unknown field; expected one of {', '.join(sorted(known))}")
    return data


def _items(data: Any, path: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not isinstance(data, list):
        raise _fail(path, f"expected a list, got {type(data).__name__}")
    return tuple(parse(item, f"{path}[{index}]") for index, item in enumerate(data))


def _construct(factory: Callable[..., T], path: str, **kwargs: Any) -> T:
    """Build a dataclass, prefixing its own validation errors with `path`."""
    try:
        return factory(**kwargs)
    except SceneSpecError as error:
        raise SceneSpecError(f"{path}.{error}") from None


def _room(data: Any, path: str) -> Room:
    mapping = _mapping(data, path, required=("name", "kind", "bounds"), optional=("floor_color", "canonical"))
    return _construct(Room, path, name=mapping["name"], kind=mapping["kind"],
                      bounds=_numbers(mapping["bounds"], 4, f"{path}.bounds"),
                      floor_color=_numbers(mapping.get("floor_color", [0.6, 0.5, 0.4]), 3, f"{path}.floor_color",
                                           unit=True),
                      canonical=mapping.get("canonical", "") or "")


def _wall(data: Any, path: str) -> Wall:
    mapping = _mapping(data, path, required=("start", "end"), optional=("thickness", "height"))
    return _construct(Wall, path, start=_numbers(mapping["start"], 2, f"{path}.start"),
                      end=_numbers(mapping["end"], 2, f"{path}.end"), thickness=mapping.get("thickness", 0.1),
                      height=mapping.get("height", 2.6))


def _articulation(data: Any, path: str) -> Articulation:
    mapping = _mapping(data, path, required=("name", "slot", "joint", "range", "open_threshold"),
                       optional=("initial",))
    return _construct(Articulation, path, name=mapping["name"], slot=mapping["slot"], joint=mapping["joint"],
                      range=_numbers(mapping["range"], 2, f"{path}.range"),
                      open_threshold=mapping["open_threshold"], initial=mapping.get("initial", 0.0))


def _furniture(data: Any, path: str) -> Furniture:
    mapping = _mapping(data, path, required=("name", "canonical", "model", "pose", "size"),
                       optional=("color", "room", "elevation", "articulations"))
    articulations = _items(mapping.get("articulations", []), f"{path}.articulations", _articulation)
    return _construct(Furniture, path, name=mapping["name"], canonical=mapping["canonical"], model=mapping["model"],
                      pose=Pose2D.from_dict(mapping["pose"], f"{path}.pose"),
                      size=_numbers(mapping["size"], 3, f"{path}.size", positive=True),
                      color=_numbers(mapping.get("color", [0.8, 0.8, 0.8]), 3, f"{path}.color", unit=True),
                      room=mapping.get("room", "") or "", elevation=mapping.get("elevation", 0.0),
                      articulations=articulations)


def _object(data: Any, path: str) -> SceneObject:
    mapping = _mapping(data, path, required=("name", "canonical", "receptacle", "surface"),
                       optional=("shape", "size", "color", "mass", "inside", "offset", "yaw"))
    kind = catalog.OBJECT_KINDS.get(mapping["canonical"]) if isinstance(mapping["canonical"], str) else None
    if kind is None and not all(key in mapping for key in ("shape", "size", "color", "mass")):
        raise _fail(f"{path}.canonical", f"{mapping['canonical']!r} has no built-in shape; give shape, size, color "
                                         "and mass")
    offset = mapping.get("offset")
    return _construct(
        SceneObject, path, name=mapping["name"], canonical=mapping["canonical"],
        shape=mapping.get("shape", kind.shape if kind else ""),
        size=_numbers(mapping.get("size", kind.size if kind else None), 3, f"{path}.size", positive=True),
        color=_numbers(mapping.get("color", kind.color if kind else None), 3, f"{path}.color", unit=True),
        mass=mapping.get("mass", kind.mass if kind else 0.0), receptacle=mapping["receptacle"],
        surface=mapping["surface"], inside=mapping.get("inside", False),
        offset=None if offset is None else _numbers(offset, 2, f"{path}.offset"), yaw=mapping.get("yaw", 0.0))


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

