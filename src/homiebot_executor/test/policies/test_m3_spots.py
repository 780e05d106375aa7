"""Where the M3 skills stand and put: shelves behind a door are reached from further back and from in front of the
object, never through a wall, put spots keep off the edge where there is room, the hand lets go only over the region,
and the grasp rotations tried suit the region."""

from __future__ import annotations

import math
import threading

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import FurnitureLayout, PartLayout, SceneLayout, SupportRegion
from emmoe_core.robot.state import InstanceState, Pose

from homiebot_executor.policies.m3.navigate import IN_LINE_SLACK, cell_centres, in_line_penalty, in_sight, walls
from homiebot_executor.policies.m3.pick import BEHIND_DOOR_STANDING, reach_rotations, standing_distance
from homiebot_executor.policies.m3.place import EDGE_MARGIN, free_spots, over

SHELF = SupportRegion("fridge_0", "shelf_0", "fridge_0", (0.0, 0.28, 0.6), (0.32, 0.28), 0.0, inside=True,
                      clearance=0.5)
TABLE = SupportRegion("table_0", "top", "table_0", (0.0, 0.28, 0.7), (0.32, 0.28), 0.0)
DRAWER = SupportRegion("counter_0", "interior", "drawer_0", (0.0, 0.28, 0.5), (0.32, 0.28), 0.0, inside=True,
                       clearance=0.2, part="drawer_0")


def test_shelves_behind_a_door_are_reached_from_further_back():
    assert standing_distance(SHELF) == BEHIND_DOOR_STANDING
    assert standing_distance(DRAWER) == standing_distance(TABLE) == standing_distance(None) < BEHIND_DOOR_STANDING


class _Objects:
    """Just enough of a skill context for free_spots: a lock and the objects in the scene."""

    def __init__(self, *others: InstanceState) -> None:
        self.lock = threading.Lock()
        self.backend = self
        self._others = others

    def object_states(self) -> tuple[InstanceState, ...]:
        return self._others


def _object(name: str, x: float, y: float, z: float, size: tuple[float, float, float] = (0.06, 0.06, 0.1)
            ) -> InstanceState:
    return InstanceState(name, "013_apple", "object", Pose((x, y, z), (1.0, 0.0, 0.0, 0.0)), size)


def test_spots_keep_away_from_the_edge_while_the_region_has_room():
    held = _object("apple_0", 5.0, 5.0, 1.0)
    spots = free_spots(_Objects(), [TABLE], held, (0.0, -1.0))  # type: ignore[arg-type]
    best = spots[0][1]
    u, v = TABLE.to_local(best[0], best[1])
    radius = math.hypot(*held.size[:2]) / 2
    assert TABLE.half[1] - radius - abs(v) >= EDGE_MARGIN - 1e-9  # nearest the robot, but not on the edge
    narrow = SupportRegion("shelf_0", "shelf_1", "shelf_0", (0.0, 0.28, 0.7), (0.32, radius + 0.02), 0.0)
    assert free_spots(_Objects(), [narrow], held, (0.0, -1.0))  # type: ignore[arg-type]  # a cost, not a limit


def test_the_hand_lets_go_only_over_the_region():
    assert over(TABLE, _object("apple_0", 0.1, 0.3, 0.76))
    assert not over(TABLE, _object("apple_0", 0.1, -0.05, 0.76))  # in front of the edge
    assert not over(SHELF, _object("apple_0", 0.1, 0.3, 0.58))  # under the shelf's plane (blocked by its front)


def _level(rotation: np.ndarray) -> bool:
    return abs(float(rotation[2, 0])) < 1e-6


def test_grasp_rotations_suit_the_region():
    low_shelf, drawer, table = reach_rotations(SHELF, 0.0), reach_rotations(DRAWER, 0.0), reach_rotations(TABLE, 0.0)
    assert all(rotation[2, 0] > -0.6 for rotation in low_shelf)  # under a board close above: level to slightly down
    assert _level(low_shelf[0])
    high_shelf = SupportRegion("fridge_0", "shelf_1", "fridge_0", (0.0, 0.28, 1.1), (0.32, 0.28), 0.0, inside=True,
                               clearance=0.64)
    rotations = reach_rotations(high_shelf, 0.0)
    assert abs(rotations[0][2, 0] + 1.0) < 1e-6 and _level(rotations[-3])  # top-down first, level ones after
    assert abs(drawer[0][2, 0] + 1.0) < 1e-6 and abs(table[0][2, 0] + 1.0) < 1e-6  # open above: top-down first


# A 4 m x 3 m room at 5 cm cells: a fridge against the south wall at x 2.0-2.8 (front at y 0.72), a wall from the
# south wall up to y 1.9 at x 1.8-1.9 just west of it.
FRIDGE = FurnitureLayout("fridge_0", "fridge", 2.4, 0.36, math.pi, (0.8, 0.72, 1.8),
                         parts=(PartLayout("fridge_0_door", "hinge", (0.0, 0.0, 1.0), (0.4, -0.36, 0.0),
                                           (0.35, -0.4, 0.9), -0.36),))


def _room() -> tuple[OccupancyGrid, SceneLayout]:
    occupied = np.zeros((60, 80), dtype=bool)
    occupied[0:15, 40:56] = True  # the fridge's footprint
    occupied[0:38, 36:38] = True  # the wall beside it
    return OccupancyGrid((0.0, 0.0), 0.05, occupied), SceneLayout(furniture=(FRIDGE,))


def test_a_standing_spot_never_sees_the_object_through_a_wall():
    grid, layout = _room()
    blockers = walls(grid, layout)
    assert blockers[10, 36] and not blockers[5, 45]  # the wall is a wall, the fridge is not
    inside_fridge = (2.15, 0.4)
    gx, gy = cell_centres(grid)
    sighted = in_sight(grid, blockers, inside_fridge, gx, gy)
    row, column = grid.cell_of(1.3, 0.5)[::-1]
    assert not sighted[row, column]  # beside the fridge, on the other side of the wall
    row, column = grid.cell_of(2.2, 1.3)[::-1]
    assert sighted[row, column]  # in front of it
    assert list(in_sight(grid, blockers, inside_fridge, np.array([1.3, 2.2]), np.array([0.5, 1.3]))) == [False, True]


def test_reaching_into_a_carcass_prefers_standing_in_line_with_the_object():
    point = (2.15, 0.4)
    gx, gy = np.array([2.15, 2.15 + IN_LINE_SLACK, 2.75]), np.array([1.3, 1.3, 1.3])
    penalty = in_line_penalty(FRIDGE, point, gx, gy)
    assert penalty[0] == 0.0 and penalty[1] < 1e-9 and penalty[2] > 0.5

