"""World-frame geometry of a scene spec: furniture boxes, support regions and object start poses.

Pure numpy; used by the MJCF builder, the occupancy grid, the top-down map, the object placement sampler and the
privileged skills' view of the scene (`scene_layout`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from emmoe_core.robot.layout import (
    FurnitureLayout,
    PartLayout,
    SceneLayout,
    SupportRegion,
    frame_to_world,
    world_to_frame,
)

from habitat_bridge.furniture import Box, Surface
from habitat_bridge.scene_spec import Furniture, SceneObject, SceneSpec, SceneSpecError


@dataclass(frozen=True)
class WorldSurface:
    """A support region in the world frame (at the articulations' initial positions).

    Attributes:
        furniture: the piece it belongs to.
        surface: the region in the piece's local frame.
        receptacle: the name objects on it report as their receptacle (the drawer's name for a drawer).
        center: world centre (z = supporting plane height).
        half: half extents along the region's own x and y.
        yaw: the region's orientation (the furniture's yaw).
    """

    furniture: Furniture
    surface: Surface
    receptacle: str
    center: tuple[float, float, float]
    half: tuple[float, float]
    yaw: float

    def to_world(self, u: float, v: float) -> tuple[float, float]:
        """World (x, y) of a point given relative to the region's centre."""
        return frame_to_world(self.center, self.yaw, u, v)

    def to_local(self, x: float, y: float) -> tuple[float, float]:
        """(u, v) of a world point relative to the region's centre."""
        return world_to_frame(self.center, self.yaw, x, y)


def local_to_world(piece: Furniture, point: tuple[float, float, float]) -> tuple[float, float, float]:
    """A point of a piece's local frame in the world frame."""
    x, y = frame_to_world((piece.pose.x, piece.pose.y), piece.pose.yaw, point[0], point[1])
    return x, y, point[2] + piece.elevation


def _part_offset(piece: Furniture, part: str | None, position: float | None = None) -> np.ndarray:
    """Local displacement of a drawer's contents at a joint position (the initial one by default)."""
    if part is None:
        return np.zeros(3)
    moving = next(item for item in piece.geometry.moving if item.key == part)
    articulation = piece.articulation_for_slot(part)
    value = position if position is not None else (articulation.initial if articulation else 0.0)
    if moving.joint != "slide":
        return np.zeros(3)
    return np.asarray(moving.axis) * value


def world_surfaces(spec: SceneSpec) -> list[WorldSurface]:
    """Every support region of the scene in the world frame."""
    found = []
    for piece in spec.furniture:
        for surface in piece.geometry.surfaces:
            offset = _part_offset(piece, surface.part)
            center = local_to_world(piece, tuple(np.asarray(surface.center) + offset))  # type: ignore[arg-type]
            receptacle = piece.name
            if surface.part is not None:
                articulation = piece.articulation_for_slot(surface.part)
                receptacle = articulation.name if articulation else piece.name
            found.append(WorldSurface(piece, surface, receptacle, center, surface.half, piece.pose.yaw))
    return found


def scene_layout(spec: SceneSpec) -> SceneLayout:
    """The spec as the privileged skills see it (emmoe_core.robot.layout): furniture with their doors and drawers,
    and every support region (world_surfaces, in that order)."""
    pieces = []
    for piece in spec.furniture:
        parts = []
        for moving in piece.geometry.moving:
            articulation = piece.articulation_for_slot(moving.key)
            if articulation is not None:
                inner_face = max(box.center[1] + box.half[1] for box in moving.boxes)
                parts.append(PartLayout(articulation.name, moving.joint, moving.axis, moving.pivot, moving.handle,
                                        inner_face, articulation.initial))
        pieces.append(FurnitureLayout(piece.name, piece.model, piece.pose.x, piece.pose.y, piece.pose.yaw, piece.size,
                                      piece.elevation, tuple(parts)))
    regions = []
    for region in world_surfaces(spec):
        part = region.receptacle if region.surface.part is not None else ""
        regions.append(SupportRegion(region.furniture.name, region.surface.name, region.receptacle, region.center,
                                     region.half, region.yaw, region.surface.inside, region.surface.clearance, part))
    return SceneLayout(tuple(pieces), tuple(regions))


def find_surface(spec: SceneSpec, obj: SceneObject) -> WorldSurface:
    """The world support region an object starts on."""
    piece = spec.receptacle_furniture(obj)
    for item in world_surfaces(spec):
        if item.furniture.name == piece.name and item.surface.name == obj.surface:
            return item
    raise SceneSpecError(f"objects: {obj.name}: {piece.name} has no support region {obj.surface!r}")


def object_start_pose(spec: SceneSpec, obj: SceneObject) -> tuple[float, float, float, float]:
    """(x, y, z, yaw) of an object's centre at the start; its offset must be resolved."""
    if obj.offset is None:
        raise SceneSpecError(f"objects: {obj.name}: offset not resolved (call resolve_offsets first)")
    region = find_surface(spec, obj)
    x, y = region.to_world(*obj.offset)
    return x, y, region.center[2] + obj.size[2] / 2 + 0.002, region.yaw + obj.yaw


class Sized(Protocol):
    """Anything with a bounding box (x, y, z) in metres: a scene object or an object kind."""

    @property
    def size(self) -> tuple[float, float, float]: ...


def footprint_radius(obj: Sized) -> float:
    """Radius of the disc that covers an object's footprint."""
    return math.hypot(obj.size[0], obj.size[1]) / 2


def resolve_offsets(spec: SceneSpec, seed: int | None = None) -> SceneSpec:
    """Give every object without an offset a free spot on its support region.

    Spots are drawn with random.Random(seed, or the spec's seed), so the result is deterministic. Objects with
    explicit offsets keep them and are avoided.

    Raises:
        SceneSpecError: an object does not fit on its region.
    """
    rng = random.Random(spec.seed if seed is None else seed)
    taken: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for obj in spec.objects:
        if obj.offset is not None:
            taken.setdefault((obj.receptacle, obj.surface), []).append((*obj.offset, footprint_radius(obj)))
    resolved = []
    for index, obj in enumerate(spec.objects):
        if obj.offset is None:
            region = find_surface(spec, obj)
            spot = sample_spot(region, footprint_radius(obj), taken.get((obj.receptacle, obj.surface), []), rng)
            if spot is None:
                raise SceneSpecError(f"objects[{index}]: no free spot for {obj.name} on "
                                     f"{obj.receptacle}.{obj.surface}")
            taken.setdefault((obj.receptacle, obj.surface), []).append((*spot, footprint_radius(obj)))
            obj = replace(obj, offset=spot)
        resolved.append(obj)
    return replace(spec, objects=tuple(resolved))


def sample_spot(region: WorldSurface, radius: float, taken: list[tuple[float, float, float]], rng: random.Random,
                front_depth: float | None = None, attempts: int = 60) -> tuple[float, float] | None:
    """A free (u, v) for a disc of `radius` on a region, away from the discs in `taken`.

    Args:
        region: where.
        radius: the object's footprint radius.
        taken: (u, v, radius) of objects already there.
        rng: random source.
        front_depth: when given, keep the spot within this distance of the region's front edge (v = -half_y).
        attempts: how many draws before giving up.
    """
    half_u = region.half[0] - radius
    half_v = region.half[1] - radius
    if half_u < 0 or half_v < 0:
        return None
    v_max = half_v if front_depth is None else min(half_v, -region.half[1] + front_depth)
    if v_max < -half_v:
        return None
    for _ in range(attempts):
        u = rng.uniform(-half_u, half_u)
        v = rng.uniform(-half_v, v_max)
        if all(math.hypot(u - tu, v - tv) >= radius + tr + 0.02 for tu, tv, tr in taken):
            return round(u, 4), round(v, 4)
    return None


@dataclass(frozen=True)
class WorldBox:
    """One box of a piece of furniture placed in the world.

    Attributes:
        box: the box with its centre in the world frame; half sizes along the box's own axes.
        part: key of the moving part the box belongs to, None for the piece's static boxes.
        yaw: world orientation of the box's x axis: the piece's yaw, plus the opening angle for a hinged part (door
            hinges turn about the vertical).
    """

    box: Box
    part: str | None
    yaw: float


def world_boxes(piece: Furniture, joint_positions: dict[str, float] | None = None) -> list[WorldBox]:
    """A piece's boxes in the world frame, moving parts at the given joint positions (slot -> value; the initial
    ones by default): a drawer slides along its axis, a door panel turns about its hinge and keeps its true size."""
    result: list[WorldBox] = []
    for box in piece.geometry.static:
        result.append(WorldBox(replace(box, center=local_to_world(piece, box.center)), None, piece.pose.yaw))
    for part in piece.geometry.moving:
        articulation = piece.articulation_for_slot(part.key)
        value = (joint_positions or {}).get(part.key, articulation.initial if articulation else 0.0)
        angle = 0.0
        for box in part.boxes:
            center = np.asarray(box.center, dtype=float)
            if part.joint == "slide":
                center = center + np.asarray(part.axis) * value
            else:
                pivot = np.asarray(part.pivot)
                angle = value * float(np.sign(part.axis[2]))
                c, s = math.cos(angle), math.sin(angle)
                rel = center - pivot
                center = pivot + np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1], rel[2]])
            world = local_to_world(piece, (float(center[0]), float(center[1]), float(center[2])))
            result.append(WorldBox(replace(box, center=world), part.key, piece.pose.yaw + angle))
    return result
