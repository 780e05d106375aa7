"""Where the M3 skills stand and put: shelves behind a door are reached from further back, put spots keep off the
edge where there is room, and the hand lets go only over the region."""

from __future__ import annotations

import math
import threading

from emmoe_core.robot.layout import SupportRegion
from emmoe_core.robot.state import InstanceState, Pose

from homiebot_executor.policies.m3.pick import BEHIND_DOOR_STANDING, standing_distance
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
