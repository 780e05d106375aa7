"""Path planning on an occupancy grid and a base controller (pure numpy/scipy; no simulator).

`GridPlanner` inflates the grid by the robot's radius, computes geodesic distances from the start over the
8-connected free cells with scipy's Dijkstra (one call gives the distance to every cell, which also ranks candidate
standing spots), extracts the path to a chosen cell and shortens it by line-of-sight checks. `BaseController` turns
a waypoint list into (forward, turn) commands: turn in place when the heading error is large, otherwise drive with
proportional steering, slowing down near the last waypoint, then turn to the final heading.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from habitat_bridge.occupancy import OccupancyGrid
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

_NEIGHBOURS = ((1, 0, 1.0), (0, 1, 1.0), (1, 1, math.sqrt(2.0)), (1, -1, math.sqrt(2.0)))


def wrap_angle(angle: float) -> float:
    """Angle in (-pi, pi]."""
    return math.atan2(math.sin(angle), math.cos(angle))


@dataclass(frozen=True)
class GeodesicField:
    """Geodesic distances from one start cell.

    Attributes:
        grid: the inflated grid the distances live on.
        distances: (rows, columns) metres; inf where unreachable.
        predecessors: flat cell index of each cell's predecessor on its shortest path (-9999 for none).
        start_cell: (column, row) of the start.
    """

    grid: OccupancyGrid
    distances: np.ndarray
    predecessors: np.ndarray
    start_cell: tuple[int, int]

    def reachable(self) -> np.ndarray:
        """Bool mask of cells with a finite distance."""
        return np.isfinite(self.distances)

    def cell_path(self, cell: tuple[int, int]) -> list[tuple[int, int]]:
        """Cells from the start to `cell` (inclusive); empty when unreachable."""
        rows, columns = self.grid.shape
        column, row = cell
        if not np.isfinite(self.distances[row, column]):
            return []
        index = row * columns + column
        path = []
        while index >= 0:
            path.append((index % columns, index // columns))
            index = int(self.predecessors[index])
        return path[::-1]


class GridPlanner:
    """Collision-free paths for a round robot on an occupancy grid."""

    def __init__(self, grid: OccupancyGrid, robot_radius: float) -> None:
        """Inflate `grid` by `robot_radius` metres."""
        self.grid = grid.inflated(robot_radius)
        self.robot_radius = robot_radius

    def free_start_cell(self, x: float, y: float, search_radius: float = 0.4) -> tuple[int, int] | None:
        """The free cell nearest (x, y) within `search_radius` (the robot may start slightly inside the margin)."""
        column, row = self.grid.cell_of(x, y)
        if self.grid.inside(column, row) and not self.grid.occupied[row, column]:
            return column, row
        cells = int(math.ceil(search_radius / self.grid.resolution))
        rows, columns = self.grid.shape
        r0, r1 = max(0, row - cells), min(rows, row + cells + 1)
        c0, c1 = max(0, column - cells), min(columns, column + cells + 1)
        window = ~self.grid.occupied[r0:r1, c0:c1]
        if not window.any():
            return None
        rr, cc = np.nonzero(window)
        distance = np.hypot(rr + r0 - row, cc + c0 - column)
        best = int(np.argmin(distance))
        return int(cc[best] + c0), int(rr[best] + r0)

    def geodesic_from(self, x: float, y: float) -> GeodesicField | None:
        """Distances from the free cell nearest (x, y) to every cell; None when the robot is boxed in."""
        start = self.free_start_cell(x, y)
        if start is None:
            return None
        free = ~self.grid.occupied
        rows, columns = free.shape
        index = np.arange(rows * columns).reshape(rows, columns)
        sources, targets, weights = [], [], []
        for dc, dr, cost in _NEIGHBOURS:
            r_lo, r_hi = max(0, -dr), rows - max(0, dr)
            c_lo, c_hi = max(0, -dc), columns - max(0, dc)
            a = free[r_lo:r_hi, c_lo:c_hi]
            b = free[r_lo + dr:r_hi + dr, c_lo + dc:c_hi + dc]
            both = a & b
            if dc and dr:
                # No corner cutting: both orthogonal neighbours must be free as well.
                both &= free[r_lo + dr:r_hi + dr, c_lo:c_hi] & free[r_lo:r_hi, c_lo + dc:c_hi + dc]
            sources.append(index[r_lo:r_hi, c_lo:c_hi][both])
            targets.append(index[r_lo + dr:r_hi + dr, c_lo + dc:c_hi + dc][both])
            weights.append(np.full(int(both.sum()), cost * self.grid.resolution))
        source = np.concatenate(sources)
        target = np.concatenate(targets)
        weight = np.concatenate(weights)
        graph = coo_matrix((weight, (source, target)), shape=(rows * columns, rows * columns)).tocsr()
        start_index = start[1] * columns + start[0]
        distances, predecessors = dijkstra(graph, directed=False, indices=start_index, return_predecessors=True)
        return GeodesicField(self.grid, distances.reshape(rows, columns), predecessors, start)

    def line_free(self, a: tuple[float, float], b: tuple[float, float]) -> bool:
        """Whether the straight segment a-b crosses only free cells of the inflated grid."""
        length = math.dist(a, b)
        samples = max(2, int(math.ceil(length / (self.grid.resolution * 0.5))) + 1)
        for t in np.linspace(0.0, 1.0, samples):
            if not self.grid.is_free(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])):
                return False
        return True

    def smooth(self, points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        """Drop waypoints that a straight line can skip (greedy line of sight)."""
        if len(points) <= 2:
            return list(points)
        result = [points[0]]
        anchor = 0
        while anchor < len(points) - 1:
            reach = anchor + 1
            for candidate in range(len(points) - 1, anchor, -1):
                if self.line_free(points[anchor], points[candidate]):
                    reach = candidate
                    break
            result.append(points[reach])
            anchor = reach
        return result

    def path(self, field: GeodesicField, goal_cell: tuple[int, int],
             start_xy: tuple[float, float]) -> list[tuple[float, float]]:
        """Smoothed world waypoints from the start position to the centre of `goal_cell` ([] when unreachable)."""
        cells = field.cell_path(goal_cell)
        if not cells:
            return []
        points = [start_xy, *(self.grid.center_of(column, row) for column, row in cells[1:])]
        if len(points) == 1:
            points.append(self.grid.center_of(*goal_cell))
        return self.smooth(points)


@dataclass(frozen=True)
class ControllerConfig:
    """Gains and limits of the base controller.

    Attributes:
        max_forward: m/s.
        max_turn: rad/s.
        turn_in_place_above: heading error (rad) above which the base only turns.
        heading_gain: turn rate per radian of heading error.
        waypoint_tolerance: distance (m) at which an intermediate waypoint counts as passed.
        goal_tolerance: distance (m) at which the last waypoint counts as reached.
        yaw_tolerance: final heading error (rad) accepted.
        slow_down_distance: distance (m) to the last waypoint under which the speed decreases.
        reverse_within: the base backs up (instead of turning round) to a last waypoint behind it and closer than
            this (m).
    """

    max_forward: float = 0.7
    max_turn: float = 1.2
    turn_in_place_above: float = 0.5
    heading_gain: float = 2.0
    waypoint_tolerance: float = 0.2
    goal_tolerance: float = 0.06
    yaw_tolerance: float = 0.08
    slow_down_distance: float = 0.6
    reverse_within: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_forward", "max_turn", "turn_in_place_above", "heading_gain", "waypoint_tolerance",
                     "goal_tolerance", "yaw_tolerance", "slow_down_distance", "reverse_within"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ControllerConfig.{name}: expected a positive number, got {getattr(self, name)}")


class BaseController:
    """Follows waypoints, then turns to a final heading."""

    def __init__(self, waypoints: Sequence[tuple[float, float]], final_yaw: float | None,
                 config: ControllerConfig | None = None) -> None:
        """Track `waypoints` (the first may be the start) and end facing `final_yaw` (None: any heading)."""
        self.config = config or ControllerConfig()
        self.waypoints = list(waypoints)
        self.final_yaw = final_yaw
        self._next = 1 if len(self.waypoints) > 1 else 0

    @property
    def done_driving(self) -> bool:
        """Whether the last waypoint was reached."""
        return self._next >= len(self.waypoints)

    def command(self, x: float, y: float, yaw: float) -> tuple[float, float] | None:
        """(forward, turn) for the current pose, or None when the goal pose is reached."""
        config = self.config
        while not self.done_driving:
            goal = self.waypoints[self._next]
            last = self._next == len(self.waypoints) - 1
            distance = math.dist((x, y), goal)
            if distance <= (config.goal_tolerance if last else config.waypoint_tolerance):
                self._next += 1
                continue
            error = wrap_angle(math.atan2(goal[1] - y, goal[0] - x) - yaw)
            direction = 1.0
            if last and len(self.waypoints) <= 2 and distance < config.reverse_within and \
                    abs(error) > math.pi - config.turn_in_place_above:
                error, direction = wrap_angle(error - math.pi), -1.0
            turn = float(np.clip(config.heading_gain * error, -config.max_turn, config.max_turn))
            if abs(error) > config.turn_in_place_above:
                return 0.0, turn
            speed = config.max_forward
            if last:
                speed = min(speed, config.max_forward * distance / config.slow_down_distance + 0.05)
            return direction * speed * math.cos(error), turn
        if self.final_yaw is None:
            return None
        error = wrap_angle(self.final_yaw - yaw)
        if abs(error) <= config.yaw_tolerance:
            return None
        return 0.0, float(np.clip(config.heading_gain * error, -config.max_turn, config.max_turn))
