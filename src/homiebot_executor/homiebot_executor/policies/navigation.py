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
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.validation import require_positive_fields
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
        mask: np.ndarray = np.isfinite(self.distances)
        return mask

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

    def __init__(self, grid: OccupancyGrid, robot_radius: float, smoothing_margin: float = 0.08) -> None:
        """Inflate `grid` by `robot_radius` metres; shortcuts keep `smoothing_margin` more (tracking error)."""
        self.grid = grid.inflated(robot_radius)
        self.robot_radius = robot_radius
        self._shortcut_grid = grid.inflated(robot_radius + smoothing_margin)

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
        """Whether the straight segment a-b keeps the shortcut margin (its ends may lie in the margin)."""
        length = math.dist(a, b)
        samples = max(2, int(math.ceil(length / (self.grid.resolution * 0.5))) + 1)
        grid = self._shortcut_grid
        for t in np.linspace(0.0, 1.0, samples)[1:-1]:
            x, y = a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])
            if not grid.is_free(x, y) and not (math.dist((x, y), a) < 0.15 or math.dist((x, y), b) < 0.15):
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
        min_turn: smallest turn rate used while turning in place (rad/s).
        turn_in_place_above: heading error (rad) above which the base only turns.
        heading_gain: turn rate per radian of heading error.
        lookahead: distance (m) along the path to the point the base steers at (pure pursuit).
        goal_tolerance: distance (m) at which the last waypoint counts as reached.
        yaw_tolerance: final heading error (rad) accepted.
        slow_down_distance: distance (m) to the last waypoint under which the speed decreases.
        reverse_within: the base backs up (instead of turning round) to a straight-line goal behind it (more
            than 90 degrees off its heading) closer than this (m).
    """

    max_forward: float = 0.7
    max_turn: float = 1.5
    min_turn: float = 0.3
    turn_in_place_above: float = 0.35
    heading_gain: float = 2.5
    lookahead: float = 0.35
    goal_tolerance: float = 0.06
    yaw_tolerance: float = 0.08
    slow_down_distance: float = 0.6
    reverse_within: float = 1.0

    def __post_init__(self) -> None:
        require_positive_fields(self, ("max_forward", "max_turn", "min_turn", "turn_in_place_above", "heading_gain",
                                       "lookahead", "goal_tolerance", "yaw_tolerance", "slow_down_distance",
                                       "reverse_within"))


class BaseController:
    """Pure pursuit along a polyline, turning in place when far off heading, then a turn to the final heading."""

    def __init__(self, waypoints: Sequence[tuple[float, float]], final_yaw: float | None,
                 config: ControllerConfig | None = None) -> None:
        """Track `waypoints` (the first is the start) and end facing `final_yaw` (None: any heading).

        Raises:
            ValueError: no waypoints.
        """
        if not waypoints:
            raise ValueError("BaseController needs at least one waypoint")
        self.config = config or ControllerConfig()
        self.waypoints = [tuple(map(float, point)) for point in waypoints]
        self.final_yaw = final_yaw
        self._segment = 0
        self._arrived = len(self.waypoints) == 1

    def _target(self, x: float, y: float) -> tuple[float, float]:
        """The look-ahead point: project onto the current segment, then walk `lookahead` metres along the path."""
        points = self.waypoints
        while self._segment < len(points) - 2:
            ax, ay = points[self._segment]
            bx, by = points[self._segment + 1]
            length_sq = (bx - ax) ** 2 + (by - ay) ** 2
            t = ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / length_sq if length_sq > 0 else 1.0
            if t < 1.0:
                break
            self._segment += 1
        ax, ay = points[self._segment]
        bx, by = points[self._segment + 1]
        length = math.hypot(bx - ax, by - ay)
        t = 0.0 if length == 0 else max(0.0, min(1.0, ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / length ** 2))
        remaining = self.config.lookahead
        index, px, py = self._segment, ax + t * (bx - ax), ay + t * (by - ay)
        while True:
            nx, ny = points[index + 1]
            step = math.hypot(nx - px, ny - py)
            if step >= remaining or index + 2 >= len(points):
                if step <= remaining:
                    return nx, ny
                return px + (nx - px) * remaining / step, py + (ny - py) * remaining / step
            remaining -= step
            index, px, py = index + 1, nx, ny

    def _turn(self, error: float) -> float:
        config = self.config
        turn = float(np.clip(config.heading_gain * error, -config.max_turn, config.max_turn))
        if abs(turn) < config.min_turn:
            turn = math.copysign(config.min_turn, error)
        return turn

    def command(self, x: float, y: float, yaw: float) -> tuple[float, float] | None:
        """(forward, turn) for the current pose, or None when the goal pose is reached."""
        config = self.config
        if not self._arrived:
            goal = self.waypoints[-1]
            distance = math.dist((x, y), goal)
            if distance <= config.goal_tolerance:
                self._arrived = True
            else:
                target = self._target(x, y)
                error = wrap_angle(math.atan2(target[1] - y, target[0] - x) - yaw)
                direction = 1.0
                if len(self.waypoints) == 2 and distance < config.reverse_within and abs(error) > math.pi / 2:
                    error, direction = wrap_angle(error - math.pi), -1.0
                if abs(error) > config.turn_in_place_above:
                    return 0.0, self._turn(error)
                speed = min(config.max_forward,
                            config.max_forward * distance / config.slow_down_distance + 0.05)
                return direction * speed * math.cos(error), float(np.clip(config.heading_gain * error,
                                                                           -config.max_turn, config.max_turn))
        if self.final_yaw is None:
            return None
        error = wrap_angle(self.final_yaw - yaw)
        if abs(error) <= config.yaw_tolerance:
            return None
        return 0.0, self._turn(error)
