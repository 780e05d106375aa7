"""Where the M3 skills stand and put things: spots inside a container stay near the front and the middle of the
opening, and shelves behind a door are reached from further back."""

from __future__ import annotations

import math
import threading

from emmoe_core.robot.layout import SupportRegion
from emmoe_core.robot.state import InstanceState, Pose

from homiebot_executor.policies.m3.pick import BEHIND_DOOR_STANDING, standing_distance
from homiebot_executor.policies.m3.place import INSIDE_FRONT_DEPTH, INSIDE_SIDE_ROOM, free_spots

# A fridge shelf 0.64 m wide and 0.56 m deep, its front edge at y = 0.0 (the robot stands at negative y).
SHELF = SupportRegion("fridge_0", "shelf_0", "fridge_0", (0.0, 0.28, 0.6), (0.32, 0.28), 0.0, inside=True,
                      clearance=0.5)
TABLE = SupportRegion("table_0", "top", "table_0", (0.0, 0.28, 0.7), (0.32, 0.28), 0.0)
DRAWER = SupportRegion("counter_0", "interior", "drawer_0", (0.0, 0.28, 0.5), (0.32, 0.28), 0.0, inside=True,
                       clearance=0.2, part="drawer_0")
HELD = InstanceState("apple_0", "013_apple", "object", Pose((0.0, -1.0, 1.0)), (0.07, 0.07, 0.07))


class Scene:
    """The two things free_spots reads of a context: its lock and the objects of the backend."""

    def __init__(self, others: list[InstanceState]) -> None:
        self.lock = threading.Lock()
        self.backend = self
        self._others = others

    def object_states(self) -> list[InstanceState]:
        return [HELD, *self._others]


def test_spots_behind_a_door_are_near_the_front_and_clear_of_the_side_walls():
    radius = math.hypot(*HELD.size[:2]) / 2
    spots = free_spots(Scene([]), [SHELF], HELD, (-0.6, -0.6))  # type: ignore[arg-type]
    assert spots
    assert all(abs(x) <= SHELF.half[0] - radius - INSIDE_SIDE_ROOM + 1e-9 for _, (x, _, _) in spots)
    # the robot stands off to the left, yet the best spot is near the front, nearer the middle than the side
    best = spots[0][1]
    assert best[1] <= INSIDE_FRONT_DEPTH and abs(best[0]) < 0.1


def test_deeper_spots_behind_a_door_remain_when_the_front_is_taken():
    row = [InstanceState(f"box_{i}", "003_cracker_box", "object", Pose((x, 0.12, 0.7)), (0.16, 0.2, 0.2))
           for i, x in enumerate((-0.2, 0.0, 0.2))]
    spots = free_spots(Scene(row), [SHELF], HELD, (0.0, -0.6))  # type: ignore[arg-type]
    assert spots and spots[0][1][1] > INSIDE_FRONT_DEPTH


def test_spots_on_open_furniture_use_the_whole_top_and_lean_towards_the_robot():
    spots = free_spots(Scene([]), [TABLE], HELD, (-0.6, -0.6))  # type: ignore[arg-type]
    assert spots[0][1][0] < -0.2, "nearest the robot, with no centring outside containers"
    assert max(y for _, (_, y, _) in spots) > INSIDE_FRONT_DEPTH


def test_a_drawer_is_used_to_its_back_and_objects_in_the_way_are_avoided():
    blocker = InstanceState("mug_0", "025_mug", "object", Pose((0.0, 0.05, 0.55)), (0.1, 0.1, 0.1))
    spots = free_spots(Scene([blocker]), [DRAWER], HELD, (0.0, -0.6))  # type: ignore[arg-type]
    assert spots
    assert max(y for _, (_, y, _) in spots) > INSIDE_FRONT_DEPTH, "drawers are reached from above"
    assert all(math.dist((x, y), (0.0, 0.05)) > 0.1 for _, (x, y, _) in spots)


def test_shelves_behind_a_door_are_reached_from_further_back():
    assert standing_distance(SHELF) == BEHIND_DOOR_STANDING
    assert standing_distance(DRAWER) == standing_distance(TABLE) == standing_distance(None) < BEHIND_DOOR_STANDING
