"""The static layout of a scene as the privileged (M3) skills see it: furniture, their doors and drawers, and the
support regions objects rest on.

A backend builds one `SceneLayout` per episode (from its scene spec, or from bounding boxes when it has none); what
moves (joint positions, objects) comes from the privileged state queries. Frames: a piece of furniture has a local
frame at its footprint centre turned by its yaw (x along its length, -y out of its front face, z up from the floor);
doors and drawers are described in that frame at their closed position (joint value 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# Free height a put needs above an object's height on a region (m): the skills skip regions with less, and the task
# builder refuses a task that puts an object where no region has that much.
PUT_HEADROOM = 0.03

Vec3 = tuple[float, float, float]


def frame_to_world(origin: Sequence[float], yaw: float, u: float, v: float) -> tuple[float, float]:
    """World (x, y) of the point (u, v) of a planar frame at `origin` (x, y, ...) turned by `yaw`."""
    c, s = math.cos(yaw), math.sin(yaw)
    return origin[0] + c * u - s * v, origin[1] + s * u + c * v


def world_to_frame(origin: Sequence[float], yaw: float, x: float, y: float) -> tuple[float, float]:
    """(u, v) of the world point (x, y) in a planar frame at `origin` turned by `yaw`."""
    dx, dy = x - origin[0], y - origin[1]
    c, s = math.cos(yaw), math.sin(yaw)
    return c * dx + s * dy, -s * dx + c * dy


@dataclass(frozen=True)
class PartLayout:
    """A door or drawer in its furniture's frame, closed.

    Attributes:
        name: articulation instance name ("fridge_0_door", "kitchen_drawer_1").
        joint_type: "hinge" (radians) or "slide" (metres).
        axis: joint axis; positive joint values open the part.
        pivot: a point of the hinge axis, or the drawer's reference point.
        handle: centre of the handle.
        inner_face: largest local y of the part's boxes (its inner face, where a door is pushed shut from).
        initial: joint value at reset (support regions are given at this value).
    """

    name: str
    joint_type: str
    axis: Vec3
    pivot: Vec3
    handle: Vec3
    inner_face: float
    initial: float = 0.0


@dataclass(frozen=True)
class FurnitureLayout:
    """One piece of furniture.

    Attributes:
        name: instance name ("kitchen_counter_0").
        model: geometry template ("counter", "fridge", "table", ...; "" when the backend does not know it).
        x: footprint centre, world x.
        y: footprint centre, world y.
        yaw: heading of the local frame.
        size: (length, depth, height) metres.
        elevation: height of the local frame's origin above the floor (a wall-mounted TV).
        parts: its doors and drawers.
    """

    name: str
    model: str
    x: float
    y: float
    yaw: float
    size: Vec3
    elevation: float = 0.0
    parts: tuple[PartLayout, ...] = ()

    def to_world(self, point: Vec3) -> Vec3:
        """A point of the local frame in the world frame."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        u, v, z = point
        return self.x + c * u - s * v, self.y + s * u + c * v, z + self.elevation

    def part(self, name: str) -> PartLayout | None:
        """The door or drawer called `name`, or None."""
        return next((part for part in self.parts if part.name == name), None)


@dataclass(frozen=True)
class SupportRegion:
    """A horizontal region where objects rest, in the world frame (drawers at their initial position).

    Attributes:
        furniture: instance name of the piece it belongs to.
        name: region name within the piece ("top", "sink", "shelf_0", "interior", ...).
        receptacle: the name objects on it report as their receptacle (the drawer's name for a drawer).
        center: world centre; z is the height of the supporting plane.
        half: half extents along the region's own x and y.
        yaw: the region's orientation.
        inside: whether objects here are inside a container (fridge, drawer, cabinet).
        clearance: free height above the plane (metres).
        part: name of the door or drawer the region moves with ("" for a fixed region).
    """

    furniture: str
    name: str
    receptacle: str
    center: Vec3
    half: tuple[float, float]
    yaw: float
    inside: bool = False
    clearance: float = math.inf
    part: str = ""

    def to_world(self, u: float, v: float) -> tuple[float, float]:
        """World (x, y) of a point given relative to the region's centre."""
        return frame_to_world(self.center, self.yaw, u, v)

    def to_local(self, x: float, y: float) -> tuple[float, float]:
        """(u, v) of a world point relative to the region's centre."""
        return world_to_frame(self.center, self.yaw, x, y)

    def outside(self, x: float, y: float) -> tuple[float, float]:
        """How far a world point lies beyond the region's footprint along its own x and y (0 within it)."""
        u, v = self.to_local(x, y)
        return max(abs(u) - self.half[0], 0.0), max(abs(v) - self.half[1], 0.0)


@dataclass(frozen=True)
class SceneLayout:
    """Furniture and support regions of one episode.

    Attributes:
        furniture: every piece of furniture.
        regions: every support region, in the backend's order.
    """

    furniture: tuple[FurnitureLayout, ...] = ()
    regions: tuple[SupportRegion, ...] = ()
    _pieces: dict[str, FurnitureLayout] = field(init=False, repr=False, compare=False)
    _owners: dict[str, FurnitureLayout] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pieces", {piece.name: piece for piece in self.furniture})
        object.__setattr__(self, "_owners", {part.name: piece for piece in self.furniture for part in piece.parts})

    def piece(self, name: str) -> FurnitureLayout | None:
        """The piece of furniture called `name` (not one of its parts), or None."""
        return self._pieces.get(name)

    def owner_of(self, part: str) -> FurnitureLayout | None:
        """The piece a door or drawer belongs to, or None when `part` names no door or drawer."""
        return self._owners.get(part)

    def part(self, name: str) -> PartLayout | None:
        """The door or drawer called `name`, or None."""
        owner = self._owners.get(name)
        return owner.part(name) if owner is not None else None

    def region(self, furniture: str, name: str) -> SupportRegion | None:
        """The first region called `name` of the piece `furniture`, or None."""
        return next((region for region in self.regions if region.furniture == furniture and region.name == name),
                    None)
