"""Handles as the sensor-only Open and Close see and remember them (homiebot_executor.policies.sensor.handles)."""

from __future__ import annotations

import math

import numpy as np

from homiebot_executor.perception.points import upright_normals
from homiebot_executor.policies.sensor.handles import (
    EDGE_INSET, Arc, Handle, carried, face_behind, left_edge, open_first, panel_near)


def grid(xs: np.ndarray, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """(N, 3) points of every combination of the coordinates."""
    return np.stack(np.meshgrid(xs, ys, zs, indexing="ij"), -1).reshape(-1, 3)


def test_upright_surfaces_have_horizontal_normals_and_the_floor_none() -> None:
    columns, rows = np.meshgrid(np.linspace(-0.5, 0.5, 20), np.linspace(1.5, 0.5, 20))
    wall = np.stack([columns, np.full_like(columns, 2.0), rows], -1)  # the plane y = 2, seen as an image
    floor = np.stack([columns, rows + 1.0, np.zeros_like(columns)], -1)
    normals = upright_normals(wall)[2:-2, 2:-2]
    assert np.allclose(np.abs(normals[..., 1]), 1.0) and np.allclose(normals[..., 0], 0.0, atol=1e-9)
    assert np.isnan(upright_normals(floor)).all()
    assert np.isnan(upright_normals(wall)[:2]).all()  # no neighbour two rows up


def corner_of_a_fridge() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A door handle 0.15 m from the corner of a fridge whose front (y = 0) and side (x = 0) the robot sees from
    (-1, -1): the handle bar, the upright points around it and their normals; the side shows more pixels."""
    bar = grid(np.linspace(0.135, 0.165, 4), np.linspace(-0.05, -0.005, 6), np.linspace(0.7, 1.2, 30))
    front = grid(np.linspace(0.0, 0.4, 20), np.zeros(1), np.linspace(0.7, 1.2, 20))
    front = front[np.abs(front[:, 0] - 0.15) > 0.02]
    side = grid(np.zeros(1), np.linspace(0.01, 0.35, 30), np.linspace(0.7, 1.2, 20))
    points = np.concatenate([front, side])
    normals = np.concatenate([np.tile([0.0, 1.0], (len(front), 1)), np.tile([1.0, 0.0], (len(side), 1))])
    return bar, points, normals


def test_the_face_is_the_one_the_bar_stands_out_of_not_the_largest_side() -> None:
    bar, points, normals = corner_of_a_fridge()
    normal = face_behind(bar, points, normals, np.array([-1.0, -1.0]))
    assert normal is not None and np.allclose(normal, [0.0, -1.0])  # the front, turned towards the robot


def test_a_dark_stripe_lying_on_its_face_is_no_handle() -> None:
    bar, points, normals = corner_of_a_fridge()
    painted = bar.copy()
    painted[:, 1] = 0.0
    assert face_behind(painted, points, normals, np.array([-1.0, -1.0])) is None
    assert face_behind(bar, points[:10], normals[:10], np.array([-1.0, -1.0])) is None  # too few face pixels


def a_closed_door() -> Handle:
    """A 0.7 m door hinged at (0, 0) along +x, its handle bar 0.08 m from the free edge, facing -y; it opens
    towards -y."""
    face = grid(np.linspace(0.0, 0.7, 36), np.zeros(1), np.linspace(0.5, 1.4, 10))
    bar = grid(np.array([0.62]), np.linspace(-0.05, -0.01, 5), np.linspace(0.8, 1.1, 10))
    return Handle(np.array([0.62, -0.03, 0.95]), True, np.array([0.0, -1.0]), bar, face)


def turn(vector: np.ndarray, angle: float) -> np.ndarray:
    """`vector` (x, y) turned by `angle` radians."""
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]) @ vector


def test_a_door_left_open_is_remembered_turned_about_its_hinge_with_its_arc() -> None:
    door = a_closed_door()
    door = Handle(door.centre, True, door.normal, door.points, door.face_points,
                  Arc.through(np.zeros(2), door.centre[:2], np.array([0.0, -1.0])))
    start = np.array([0.62, -0.045, 0.95])
    end = np.append(turn(start[:2], -1.0), 0.95)
    left = carried(door, start, end)
    assert np.allclose(left.centre[:2], turn(door.centre[:2], -1.0)) and left.centre[2] == door.centre[2]
    assert np.allclose(left.normal, turn(door.normal, -1.0))
    assert left.arc is not None and np.allclose(left.arc.hinge, 0.0)
    assert math.isclose(left.arc.radius, float(np.linalg.norm(door.centre[:2])))
    assert left.arc.opening @ turn(np.array([0.0, -1.0]), -1.0) > 0.99  # it still opens the same way
    assert len(left.face_points) < len(door.face_points)  # the face far from the handle is not carried along


def test_a_drawer_left_open_is_remembered_where_the_hand_let_go() -> None:
    front = grid(np.linspace(-0.2, 0.2, 20), np.zeros(1), np.linspace(0.6, 0.8, 10))
    bar = grid(np.linspace(-0.09, 0.09, 10), np.linspace(-0.03, -0.01, 3), np.array([0.7]))
    drawer = Handle(np.array([0.0, -0.02, 0.7]), False, np.array([0.0, -1.0]), bar, front)
    left = carried(drawer, np.array([0.0, -0.035, 0.7]), np.array([0.02, -0.40, 0.7]))
    assert np.allclose(left.centre, [0.0, -0.385, 0.7]) and np.allclose(left.points - bar, [0.0, -0.365, 0.0])
    assert left_edge(left) is left  # a drawer is closed by its handle


def test_a_door_left_open_is_closed_by_its_free_edge_beyond_the_handle() -> None:
    door = a_closed_door()
    door = Handle(door.centre, True, door.normal, door.points, door.face_points,
                  Arc.through(np.zeros(2), door.centre[:2], np.array([0.0, -1.0])))
    left = carried(door, door.centre, np.append(turn(door.centre[:2], -1.1), 0.95))
    edge = left_edge(left)
    assert edge.arc is not None and np.allclose(edge.arc.hinge, 0.0)
    assert math.isclose(edge.arc.radius, math.hypot(0.7 - EDGE_INSET, 0.02), abs_tol=0.02)  # the edge, inset
    assert left.arc is not None
    assert edge.normal @ left.arc.start > 0.5  # reached from beyond the edge,
    assert edge.normal @ left.arc.opening < 0  # a little from the side the door closes towards


def a_drawer_handle(x: float, out: float) -> Handle:
    """The handle of a drawer of a counter whose front is y = 0, facing -y, pulled `out` metres."""
    bar = grid(np.linspace(x - 0.09, x + 0.09, 10), np.array([-0.02 - out]), np.array([0.7]))
    return Handle(np.array([x, -0.02 - out, 0.7]), False, np.array([0.0, -1.0]), bar, bar)


def test_to_close_the_drawer_that_stands_open_comes_before_a_nearer_closed_one() -> None:
    closed, open_, door = a_drawer_handle(0.0, 0.0), a_drawer_handle(0.5, 0.4), a_closed_door()
    assert open_first([closed, door, open_]) == [open_, closed, door]
    assert open_first([closed, door]) == [closed, door]  # none stands open: nearest first


def test_a_door_left_open_is_found_again_where_it_swung_on_to() -> None:
    hinge = np.array([0.0, 0.0])
    remembered = Handle(np.array([0.68, -0.02, 0.95]), True, np.array([0.9, -0.4]), np.zeros((0, 3)),
                        np.zeros((0, 3)), Arc.through(hinge, np.array([0.68, -0.02]), np.array([0.0, -1.0])))
    swung_on = -0.12  # radians further open than where the hand let go
    along = np.linspace(0.0, 0.7, 50)
    panel = grid(along, np.zeros(1), np.linspace(0.1, 1.7, 20))
    panel[:, :2] = panel[:, :2] @ np.array([[math.cos(swung_on), math.sin(swung_on)],
                                             [-math.sin(swung_on), math.cos(swung_on)]])
    body = grid(np.zeros(1), np.linspace(0.05, 0.7, 30), np.linspace(0.1, 1.7, 20))  # the rest of the fridge
    edge = panel_near(np.concatenate([panel, body]), remembered, np.array([1.2, -1.0]))
    assert edge is not None and edge.arc is not None
    free = 0.7 * np.array([math.cos(swung_on), math.sin(swung_on)])
    assert np.linalg.norm(edge.centre[:2] - free) < EDGE_INSET + 0.03
    assert np.linalg.norm(edge.arc.hinge) < 0.02 and edge.arc.opening[1] < 0
    assert panel_near(body, remembered, np.array([1.2, -1.0])) is None  # the door is not where it was left
