"""The occupancy grid the M3 navigation plans on, with hinged doors drawn at their true angle.

habitat_bridge.occupancy.occupancy_grid (what the backend's `occupancy_grid` returns) draws every box of a hinged
door as its covering square, 2 x hypot(half sizes) wide, even when the door is closed: the fridge door then blocks
0.4 m of floor in front of the fridge, and the robot cannot stand close enough to reach inside. Until that is
changed there, this module builds the same grid (rooms free, walls and furniture boxes within the robot's height band
occupied) but rasterises door boxes as rotated rectangles. Drawers and static boxes come from habitat_bridge.layout
unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from habitat_bridge import layout
from habitat_bridge.occupancy import ROBOT_BAND, OccupancyGrid
from habitat_bridge.scene_spec import SceneSpec


def _fill(occupied: np.ndarray, xs: np.ndarray, ys: np.ndarray, center: tuple[float, float],
          half: tuple[float, float], yaw: float) -> None:
    """Mark cells whose centres lie in a rectangle rotated by `yaw`."""
    c, s = math.cos(yaw), math.sin(yaw)
    dx, dy = xs - center[0], ys - center[1]
    u = c * dx + s * dy
    v = -s * dx + c * dy
    occupied |= (np.abs(u) <= half[0]) & (np.abs(v) <= half[1])


def occupancy_with_doors(spec: SceneSpec, joint_positions: Mapping[str, float],
                         resolution: float = 0.05) -> OccupancyGrid:
    """Occupancy of walls and furniture, doors and drawers at `joint_positions` (articulation name -> value).

    Raises:
        ValueError: resolution is not positive.
    """
    if not resolution > 0:
        raise ValueError(f"resolution must be positive, got {resolution}")
    xmin, ymin, xmax, ymax = spec.bounds()
    margin = 2 * resolution
    origin = (xmin - margin, ymin - margin)
    columns = int(math.ceil((xmax - xmin + 2 * margin) / resolution))
    rows = int(math.ceil((ymax - ymin + 2 * margin) / resolution))
    xs, ys = np.meshgrid(origin[0] + (np.arange(columns) + 0.5) * resolution,
                         origin[1] + (np.arange(rows) + 0.5) * resolution)
    free = np.zeros((rows, columns), dtype=bool)
    for room in spec.rooms:
        rx0, ry0, rx1, ry1 = room.bounds
        free |= (xs >= rx0) & (xs <= rx1) & (ys >= ry0) & (ys <= ry1)
    occupied = ~free
    for wall in spec.walls:
        (x0, y0), (x1, y1) = wall.start, wall.end
        length = math.hypot(x1 - x0, y1 - y0)
        _fill(occupied, xs, ys, ((x0 + x1) / 2, (y0 + y1) / 2), (length / 2 + wall.thickness / 2, wall.thickness / 2),
              math.atan2(y1 - y0, x1 - x0))
    for piece in spec.furniture:
        slots = {articulation.slot: joint_positions.get(articulation.name, articulation.initial)
                 for articulation in piece.articulations}
        hinged = {part.key for part in piece.geometry.moving if part.joint == "hinge"}
        for box, part in layout.world_boxes(piece, slots):
            if part in hinged:
                continue
            if _outside_band(box.center[2], box.half[2]):
                continue
            _fill(occupied, xs, ys, box.center[:2], box.half[:2], piece.pose.yaw)
        for part in piece.geometry.moving:
            if part.key not in hinged:
                continue
            angle = slots.get(part.key, 0.0) * float(np.sign(part.axis[2]))
            c, s = math.cos(angle), math.sin(angle)
            for box in part.boxes:
                if _outside_band(box.center[2] + piece.elevation, box.half[2]):
                    continue
                rel = np.asarray(box.center) - np.asarray(part.pivot)
                local = (part.pivot[0] + c * rel[0] - s * rel[1], part.pivot[1] + s * rel[0] + c * rel[1], box.center[2])
                center = layout.local_to_world(piece, local)
                _fill(occupied, xs, ys, center[:2], box.half[:2], piece.pose.yaw + angle)
    return OccupancyGrid(origin, resolution, occupied)


def _outside_band(center_z: float, half_z: float) -> bool:
    return center_z + half_z < ROBOT_BAND[0] or center_z - half_z > ROBOT_BAND[1]
