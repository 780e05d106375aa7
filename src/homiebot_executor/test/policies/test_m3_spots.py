"""Where the M3 skills stand: shelves behind a door are reached from further back."""

from __future__ import annotations

from emmoe_core.robot.layout import SupportRegion

from homiebot_executor.policies.m3.pick import BEHIND_DOOR_STANDING, standing_distance

SHELF = SupportRegion("fridge_0", "shelf_0", "fridge_0", (0.0, 0.28, 0.6), (0.32, 0.28), 0.0, inside=True,
                      clearance=0.5)
TABLE = SupportRegion("table_0", "top", "table_0", (0.0, 0.28, 0.7), (0.32, 0.28), 0.0)
DRAWER = SupportRegion("counter_0", "interior", "drawer_0", (0.0, 0.28, 0.5), (0.32, 0.28), 0.0, inside=True,
                       clearance=0.2, part="drawer_0")


def test_shelves_behind_a_door_are_reached_from_further_back():
    assert standing_distance(SHELF) == BEHIND_DOOR_STANDING
    assert standing_distance(DRAWER) == standing_distance(TABLE) == standing_distance(None) < BEHIND_DOOR_STANDING
