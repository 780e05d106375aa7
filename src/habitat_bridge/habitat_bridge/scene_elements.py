"""The elements of a scene spec (rooms, walls, furniture with articulations, objects, the robot's start) and the
field checks they share; `habitat_bridge.scene_spec` assembles them into a SceneSpec and reads and writes spec files.

Every check raises SceneSpecError naming the offending field (`size: expected 3 positive numbers, got [1, 0, 2]`);
the spec prefixes the element's place (`furniture[2].`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from collections.abc import Mapping, Sequence
from typing import Any

from habitat_bridge import catalog, furniture

ROOM_KINDS: tuple[str, ...] = ("living_room", "kitchen", "dining_area")
JOINT_TYPES: tuple[str, ...] = ("hinge", "slide")


class SceneSpecError(ValueError):
    """A scene spec is invalid; the message starts with the path of the offending field."""


def field_error(path: str, message: str) -> SceneSpecError:
    return SceneSpecError(f"{path}: {message}" if path else message)


def numbers_field(value: Any, count: int, path: str, *, positive: bool = False, unit: bool = False) -> tuple[float, ...]:
    """`count` finite numbers (optionally > 0, or within [0, 1])."""
    ok = isinstance(value, (list, tuple)) and len(value) == count and all(
        isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item) for item in value)
    if ok and positive:
        ok = all(item > 0 for item in value)
    if ok and unit:
        ok = all(0.0 <= item <= 1.0 for item in value)
    if not ok:
        what = "positive numbers" if positive else "numbers in [0, 1]" if unit else "numbers"
        raise field_error(path, f"expected {count} {what}, got {value!r}")
    return tuple(float(item) for item in value)


def number_field(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise field_error(path, f"expected a number, got {value!r}")
    return float(value)


def name_field(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise field_error(path, f"expected a non-empty name, got {value!r}")
    if value != value.strip() or "/" in value:
        raise field_error(path, f"names may not contain '/' or surrounding spaces, got {value!r}")
    return value


@dataclass(frozen=True)
class Pose2D:
    """A planar pose: position (metres) and yaw (radians, counter-clockwise from +x)."""

    x: float
    y: float
    yaw: float = 0.0

    def __post_init__(self) -> None:
        for key in ("x", "y", "yaw"):
            number_field(getattr(self, key), key)

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Pose2D:
        """Parse `{x, y, yaw}`."""
        mapping = mapping_field(data, path, required=("x", "y"), optional=("yaw",))
        return cls(number_field(mapping["x"], f"{path}.x"), number_field(mapping["y"], f"{path}.y"),
                                                                         number_field(mapping.get("yaw", 0.0), f"{path}.yaw"))

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
        name_field(self.name, "name")
        if self.kind not in ROOM_KINDS:
            raise field_error("kind", f"expected one of {', '.join(ROOM_KINDS)}, got {self.kind!r}")
        xmin, ymin, xmax, ymax = numbers_field(self.bounds, 4, "bounds")
        if xmax <= xmin or ymax <= ymin:
            raise field_error("bounds", f"expected [xmin, ymin, xmax, ymax] with max > min, got {list(self.bounds)}")
        numbers_field(self.floor_color, 3, "floor_color", unit=True)

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
        start = numbers_field(self.start, 2, "start")
        end = numbers_field(self.end, 2, "end")
        if math.dist(start, end) < 1e-6:
            raise field_error("end", "a wall needs two different end points")
        if number_field(self.thickness, "thickness") <= 0:
            raise field_error("thickness", f"expected a positive number, got {self.thickness!r}")
        if number_field(self.height, "height") <= 0:
            raise field_error("height", f"expected a positive number, got {self.height!r}")


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
        name_field(self.name, "name")
        name_field(self.slot, "slot")
        if self.joint not in JOINT_TYPES:
            raise field_error("joint", f"expected one of {', '.join(JOINT_TYPES)}, got {self.joint!r}")
        lower, upper = numbers_field(self.range, 2, "range")
        if not lower <= 0.0 < upper:
            raise field_error("range", f"expected [lower, upper] with lower <= 0 < upper, got {list(self.range)}")
        if not lower < number_field(self.open_threshold, "open_threshold") <= upper:
            raise field_error("open_threshold", f"{self.open_threshold} is outside the range {list(self.range)}")
        if not lower <= number_field(self.initial, "initial") <= upper:
            raise field_error("initial", f"{self.initial} is outside the range {list(self.range)}")


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
        name_field(self.name, "name")
        name_field(self.canonical, "canonical")
        if self.model not in catalog.FURNITURE_MODELS:
            raise field_error("model", f"expected one of {', '.join(catalog.FURNITURE_MODELS)}, got {self.model!r}")
        numbers_field(self.size, 3, "size", positive=True)
        numbers_field(self.color, 3, "color", unit=True)
        if number_field(self.elevation, "elevation") < 0:
            raise field_error("elevation", f"expected a number >= 0, got {self.elevation!r}")
        offered = furniture.available_slots(self.model, self.size)
        seen: set[str] = set()
        for index, articulation in enumerate(self.articulations):
            if articulation.slot not in offered:
                raise field_error(f"articulations[{index}].slot",
                                  f"model {self.model!r} of length {self.size[0]:g} m has no slot {articulation.slot!r}; "
                            f"available: {', '.join(offered) or 'none'}")
            if articulation.slot in seen:
                raise field_error(f"articulations[{index}].slot", f"slot {articulation.slot!r} is used twice")
            seen.add(articulation.slot)
            expected = furniture.slot_defaults(self.model, articulation.slot).joint
            if articulation.joint != expected:
                raise field_error(f"articulations[{index}].joint",
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
        name_field(self.name, "name")
        name_field(self.canonical, "canonical")
        if self.shape not in catalog.OBJECT_SHAPES:
            raise field_error("shape", f"expected one of {', '.join(catalog.OBJECT_SHAPES)}, got {self.shape!r}")
        numbers_field(self.size, 3, "size", positive=True)
        numbers_field(self.color, 3, "color", unit=True)
        if number_field(self.mass, "mass") <= 0:
            raise field_error("mass", f"expected a positive number, got {self.mass!r}")
        name_field(self.receptacle, "receptacle")
        name_field(self.surface, "surface")
        if not isinstance(self.inside, bool):
            raise field_error("inside", f"expected true or false, got {self.inside!r}")
        if self.offset is not None:
            numbers_field(self.offset, 2, "offset")
        number_field(self.yaw, "yaw")


@dataclass(frozen=True)
class RobotStart:
    """Where the robot starts."""

    pose: Pose2D


def mapping_field(data: Any, path: str, required: Sequence[str] = (), optional: Sequence[str] = ()) -> Mapping[str, Any]:
    """`data` as a mapping holding every `required` key and no key outside `required` and `optional`."""
    if not isinstance(data, Mapping):
        raise field_error(path, f"expected a mapping, got {type(data).__name__}")
    for key in required:
        if key not in data:
            raise field_error(f"{path}.{key}" if path else key, "missing")
    known = set(required) | set(optional)
    for key in data:
        if key not in known:
            raise field_error(f"{path}.{key}" if path else str(key),
                              f"unknown field; expected one of {', '.join(sorted(known))}")
    return data
