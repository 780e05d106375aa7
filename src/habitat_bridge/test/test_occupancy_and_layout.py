"""Occupancy grids, placement sampling and world-frame geometry on small hand-made scenes."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from habitat_bridge import layout, occupancy
from habitat_bridge.scene_spec import Furniture, Pose2D, RobotStart, Room, SceneObject, SceneSpec


def one_table_room(yaw: float = 0.0, with_offset: bool = True) -> SceneSpec:
    """A 4 m x 3 m room with one 1.4 m x 0.85 m brown table at (2, 1.5) and an apple on it."""
    table = Furniture("brown_table_0", "frl_apartment_table_01", "table", Pose2D(2.0, 1.5, yaw), (1.4, 0.85, 0.76),
                      (0.4, 0.3, 0.2))
    apple = SceneObject("apple_0", "013_apple", "sphere", (0.075, 0.075, 0.075), (0.8, 0.1, 0.1), 0.07,
                        "brown_table_0", "top", False, (0.5, 0.2) if with_offset else None)
    return SceneSpec("one_table", 3, (Room("living_room_0", "living_room", (0.0, 0.0, 4.0, 3.0)),), (), (table,),
                     (apple,), RobotStart(Pose2D(0.5, 0.5, 0.0)))


def test_grid_marks_furniture_and_outside_of_rooms() -> None:
    grid = occupancy.occupancy_grid(one_table_room(), 0.05)
    assert not grid.is_free(2.0, 1.5)            # under the table top
    assert not grid.is_free(2.65, 1.85)          # a leg corner region (inside the footprint)
    assert grid.is_free(0.5, 0.5)                # open floor
    assert not grid.is_free(-0.2, 1.0)           # outside the room
    assert not grid.is_free(50.0, 50.0)          # outside the grid
    data = grid.to_ros_data()
    assert len(data) == grid.shape[0] * grid.shape[1] and set(data) == {0, 100}


def test_rotated_furniture_blocks_its_rotated_footprint() -> None:
    grid = occupancy.occupancy_grid(one_table_room(yaw=math.pi / 2), 0.05)
    assert not grid.is_free(2.0, 2.1)    # along y now: 0.6 m from the centre is inside the 0.7 m half length
    assert grid.is_free(2.6, 1.5)        # along x: beyond the 0.425 m half depth


def test_inflation_and_connectivity() -> None:
    grid = occupancy.occupancy_grid(one_table_room(), 0.05)
    inflated = grid.inflated(0.3)
    assert grid.is_free(1.1, 1.5) and not inflated.is_free(1.1, 1.5)  # 0.2 m from the table edge
    reachable = inflated.reachable_from(0.5, 0.5)
    assert reachable.any()
    column, row = inflated.cell_of(2.0, 1.5)
    assert not reachable[row, column]
    assert not inflated.reachable_from(2.0, 1.5).any()  # starting inside furniture reaches nothing


def test_invalid_resolution_is_refused() -> None:
    with pytest.raises(ValueError, match="resolution must be positive"):
        occupancy.occupancy_grid(one_table_room(), 0.0)


def test_object_start_pose_follows_the_furniture_rotation() -> None:
    spec = one_table_room(yaw=math.pi / 2)
    x, y, z, yaw = layout.object_start_pose(spec, spec.objects[0])
    # Offset (0.5, 0.2) in the table frame turned by 90 degrees is (-0.2, 0.5) in the world.
    assert (x, y) == pytest.approx((1.8, 2.0))
    assert z == pytest.approx(0.76 + 0.075 / 2 + 0.002)
    assert yaw == pytest.approx(math.pi / 2)


def test_resolve_offsets_is_seeded_and_keeps_objects_apart() -> None:
    spec = one_table_room(with_offset=False)
    spec = replace(spec, objects=tuple(replace(spec.objects[0], name=f"apple_{index}") for index in range(6)))
    first, again = layout.resolve_offsets(spec), layout.resolve_offsets(spec)
    assert [obj.offset for obj in first.objects] == [obj.offset for obj in again.objects]
    assert [obj.offset for obj in layout.resolve_offsets(spec, seed=99).objects] != [obj.offset
                                                                                      for obj in first.objects]
    offsets = np.array([obj.offset for obj in first.objects])
    distances = np.linalg.norm(offsets[:, None] - offsets[None], axis=-1) + np.eye(len(offsets))
    assert distances.min() >= 2 * layout.footprint_radius(spec.objects[0])


def test_open_door_changes_the_grid(compact_spec: SceneSpec) -> None:
    closed = occupancy.occupancy_grid(compact_spec, 0.05)
    opened = occupancy.occupancy_grid(compact_spec, 0.05, {"fridge_0_door": 1.6})
    assert (opened.occupied != closed.occupied).any()


def test_a_door_covers_its_panel_footprint_closed_and_swung(compact_spec: SceneSpec) -> None:
    """The compact fridge (front face at y = 3.21 m, door 0.8 m wide hinged at x = 2.6 m, 5 cm thick) blocks only its
    panel: not the 0.8 m square a door box turned about its hinge could sweep."""
    closed = occupancy.occupancy_grid(compact_spec, 0.05, {"fridge_0_door": 0.0})
    assert not closed.is_free(3.0, 3.19)                     # the panel
    assert closed.is_free(3.0, 3.05) and closed.is_free(2.8, 2.9)  # the floor in front of it
    opened = occupancy.occupancy_grid(compact_spec, 0.05, {"fridge_0_door": math.pi / 2})
    assert not opened.is_free(2.6, 2.6)                       # the panel turned to point into the room
    assert opened.is_free(3.0, 3.15) and opened.is_free(2.8, 2.9)  # where it stood, and beside it
    [panel, _handle] = [item for item in layout.world_boxes(next(piece for piece in compact_spec.furniture
                                                                  if piece.name == "fridge_0"), {"door": 0.6})
                        if item.part == "door"]
    assert panel.yaw == pytest.approx(-0.6) and panel.box.half[:2] == pytest.approx((0.4, 0.025))
