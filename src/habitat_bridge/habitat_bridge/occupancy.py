"""2-D occupancy grids of a scene (for path planning) and the reachability check the generator relies on.

A cell is occupied when a wall or a piece of furniture covers its centre at any height the robot body occupies, or
when it lies outside every room. Doors and drawers are drawn where their joints put them: a drawer slid out, a door
panel turned about its hinge at its true size (a closed door covers only its own thin footprint in front of the
piece). Grids follow nav_msgs/OccupancyGrid's layout: row-major, rows along +y, cell (0, 0)
at `origin`.
"""

from __future__ import annotations

import math

import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.validation import require_positive

from habitat_bridge import layout
from habitat_bridge.scene_spec import SceneSpec

# Heights the robot body sweeps (metres): anything in this band blocks the base.
ROBOT_BAND = (0.02, 1.4)
# Planar distance from a free cell within which the generator wants every object (metres): the arm's reach less a
# margin, so that the skills' standing-spot search on a 0.05 m grid finds a cell within reach.
GENERATOR_REACH = fetch.ARM_REACH - 0.03
# How hinged door boxes are drawn: "panel" (their true footprint at the current angle) or "covering_square" (the
# square around each box's centre that holds it at any angle: conservative; the apartment generator keeps it so that
# every seeded apartment, and the task scenes built from them, stay what they were).
DOOR_FOOTPRINTS = ("panel", "covering_square")


def _fill_rectangle(occupied: np.ndarray, origin: tuple[float, float], resolution: float,
                    center: tuple[float, float], half: tuple[float, float], yaw: float) -> None:
    """Mark cells whose centres lie in a rotated rectangle."""
    c, s = math.cos(yaw), math.sin(yaw)
    extent_x = abs(c) * half[0] + abs(s) * half[1]
    extent_y = abs(s) * half[0] + abs(c) * half[1]
    rows, columns = occupied.shape
    i0 = max(0, int(math.floor((center[0] - extent_x - origin[0]) / resolution)))
    i1 = min(columns, int(math.ceil((center[0] + extent_x - origin[0]) / resolution)) + 1)
    j0 = max(0, int(math.floor((center[1] - extent_y - origin[1]) / resolution)))
    j1 = min(rows, int(math.ceil((center[1] + extent_y - origin[1]) / resolution)) + 1)
    if i0 >= i1 or j0 >= j1:
        return
    xs = origin[0] + (np.arange(i0, i1) + 0.5) * resolution - center[0]
    ys = origin[1] + (np.arange(j0, j1) + 0.5) * resolution - center[1]
    dx, dy = np.meshgrid(xs, ys)
    u = c * dx + s * dy
    v = -s * dx + c * dy
    occupied[j0:j1, i0:i1] |= (np.abs(u) <= half[0]) & (np.abs(v) <= half[1])


def occupancy_grid(spec: SceneSpec, resolution: float = 0.05,
                   joint_positions: dict[str, float] | None = None, door_footprint: str = "panel") -> OccupancyGrid:
    """The scene's occupancy grid.

    Args:
        spec: the scene.
        resolution: cell size in metres.
        joint_positions: articulation name -> joint value (doors and drawers are drawn there); initial values
            otherwise.
        door_footprint: one of DOOR_FOOTPRINTS.

    Raises:
        ValueError: resolution is not positive, or an unknown door_footprint.
    """
    require_positive("resolution", resolution)
    if door_footprint not in DOOR_FOOTPRINTS:
        raise ValueError(f"door_footprint must be one of {', '.join(DOOR_FOOTPRINTS)}, got {door_footprint!r}")
    xmin, ymin, xmax, ymax = spec.bounds()
    margin = 2 * resolution
    origin = (xmin - margin, ymin - margin)
    columns = int(math.ceil((xmax - xmin + 2 * margin) / resolution))
    rows = int(math.ceil((ymax - ymin + 2 * margin) / resolution))
    xs = origin[0] + (np.arange(columns) + 0.5) * resolution
    ys = origin[1] + (np.arange(rows) + 0.5) * resolution
    grid_x, grid_y = np.meshgrid(xs, ys)
    in_room = np.zeros((rows, columns), dtype=bool)
    for room in spec.rooms:
        rx0, ry0, rx1, ry1 = room.bounds
        in_room |= (grid_x >= rx0) & (grid_x <= rx1) & (grid_y >= ry0) & (grid_y <= ry1)
    occupied = ~in_room
    for wall in spec.walls:
        (x0, y0), (x1, y1) = wall.start, wall.end
        length = math.hypot(x1 - x0, y1 - y0)
        _fill_rectangle(occupied, origin, resolution, ((x0 + x1) / 2, (y0 + y1) / 2),
                        (length / 2 + wall.thickness / 2, wall.thickness / 2), math.atan2(y1 - y0, x1 - x0))
    names = joint_positions or {}
    for piece in spec.furniture:
        slots = {articulation.slot: names[articulation.name] for articulation in piece.articulations
                 if articulation.name in names}
        hinged = {part.key for part in piece.geometry.moving if part.joint == "hinge"}
        for placed in layout.world_boxes(piece, slots):
            box = placed.box
            low, high = box.center[2] - box.half[2], box.center[2] + box.half[2]
            if high < ROBOT_BAND[0] or low > ROBOT_BAND[1]:
                continue
            half, yaw = box.half[:2], placed.yaw
            if door_footprint == "covering_square" and placed.part in hinged:
                reach = math.hypot(*box.half[:2])
                half, yaw = (reach, reach), piece.pose.yaw
            _fill_rectangle(occupied, origin, resolution, box.center[:2], half, yaw)
    return OccupancyGrid(origin, resolution, occupied)


def unreachable_objects(spec: SceneSpec, reach: float = GENERATOR_REACH,
                        robot_radius: float = fetch.ROBOT_RADIUS, resolution: float = 0.05, door_footprint: str = "panel") -> list[str]:
    """Objects no free base position connected to the robot's start can reach.

    An object is reachable when some cell that the robot can drive to from its start (on the grid inflated by its
    radius, with doors at their initial positions drawn as `door_footprint`) lies within `reach` metres of the
    object's centre.
    """
    grid = occupancy_grid(spec, resolution, door_footprint=door_footprint).inflated(robot_radius)
    free = grid.reachable_from(spec.robot.pose.x, spec.robot.pose.y)
    if not free.any():
        return [obj.name for obj in spec.objects]
    rows, columns = np.nonzero(free)
    centers_x = grid.origin[0] + (columns + 0.5) * resolution
    centers_y = grid.origin[1] + (rows + 0.5) * resolution
    missing = []
    for obj in spec.objects:
        x, y, _, _ = layout.object_start_pose(spec, obj)
        if not np.any(np.hypot(centers_x - x, centers_y - y) <= reach):
            missing.append(obj.name)
    return missing
