"""Grid planning and the base controller (homiebot_executor.policies.navigation)."""

from __future__ import annotations

import math

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid

from homiebot_executor.policies.navigation import BaseController, GridPlanner


def room_with_wall() -> OccupancyGrid:
    """4 m x 4 m at 5 cm; a wall across the middle (y = 2 m) with a gap at x > 3.2 m."""
    occupied = np.zeros((80, 80), dtype=bool)
    occupied[[0, -1], :] = True
    occupied[:, [0, -1]] = True
    occupied[39:41, :64] = True
    return OccupancyGrid((0.0, 0.0), 0.05, occupied)


def test_planner_goes_round_the_wall():
    planner = GridPlanner(room_with_wall(), robot_radius=0.3)
    field = planner.geodesic_from(1.0, 1.0)
    goal = planner.grid.cell_of(1.0, 3.0)
    path = planner.path(field, goal, (1.0, 1.0))
    assert path[0] == (1.0, 1.0) and math.dist(path[-1], (1.0, 3.0)) < 0.05
    assert any(x > 3.2 for x, _ in path), "the path must pass through the gap"
    assert all(planner.line_free(a, b) or math.dist(a, b) < 0.3 for a, b in zip(path, path[1:]))
    # Geodesic distance is the detour, not the straight 2 m.
    assert field.distances[goal[1], goal[0]] > 5.0


def test_unreachable_cells_have_no_path():
    occupied = np.zeros((40, 40), dtype=bool)
    occupied[:, 19:21] = True  # a full wall
    planner = GridPlanner(OccupancyGrid((0.0, 0.0), 0.05, occupied), robot_radius=0.1)
    field = planner.geodesic_from(0.3, 1.0)
    assert planner.path(field, planner.grid.cell_of(1.7, 1.0), (0.3, 1.0)) == []


def simulate(controller: BaseController, pose: tuple[float, float, float], steps: int = 400,
             dt: float = 0.1) -> tuple[float, float, float]:
    x, y, yaw = pose
    for _ in range(steps):
        command = controller.command(x, y, yaw)
        if command is None:
            break
        forward, turn = command
        x, y, yaw = x + forward * math.cos(yaw) * dt, y + forward * math.sin(yaw) * dt, yaw + turn * dt
    return x, y, yaw


def test_controller_reaches_the_goal_pose():
    controller = BaseController([(0.0, 0.0), (2.0, 0.0), (2.0, 2.0)], final_yaw=math.pi)
    x, y, yaw = simulate(controller, (0.0, 0.0, -1.0))
    assert math.dist((x, y), (2.0, 2.0)) < 0.08
    assert abs(math.atan2(math.sin(yaw - math.pi), math.cos(yaw - math.pi))) < 0.1


def test_controller_backs_up_to_a_close_goal_behind():
    controller = BaseController([(0.0, 0.0), (-0.5, 0.0)], final_yaw=0.0)
    forward, _ = controller.command(0.0, 0.0, 0.0)
    assert forward < 0
    x, y, yaw = simulate(controller, (0.0, 0.0, 0.0))
    assert math.dist((x, y), (-0.5, 0.0)) < 0.08 and abs(yaw) < 0.1
