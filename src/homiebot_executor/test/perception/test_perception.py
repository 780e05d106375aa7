"""The sensor-only perception cores: depth back-projection, the segmentation detector stand-in, the online map."""

from __future__ import annotations

import math

import numpy as np
import pytest
from emmoe_core.robot.state import CameraView, Observation

from emmoe_core.perception.detector import SegmentationDetector
from homiebot_executor.perception.occupancy import FREE, OCCUPIED, UNKNOWN, MapConfig, OnlineMap
from homiebot_executor.perception.points import point_image, upward_normals, valid


def camera_looking_along_x(height: float = 1.0, size: int = 64, fovy: float = 90.0) -> CameraView:
    """A level camera at (0, 0, height) looking along +x (optical z = world x, optical x = -world y, y = -z)."""
    focal = (size / 2) / math.tan(math.radians(fovy) / 2)
    rotation = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    return CameraView(size, size, focal, focal, size / 2, size / 2, (0.0, 0.0, height), rotation)


def test_a_wall_two_metres_ahead_back_projects_to_x_two() -> None:
    camera = camera_looking_along_x()
    points = point_image(np.full((64, 64), 2.0, dtype=np.float32), camera)
    assert np.allclose(points[..., 0], 2.0)
    # The image's left column is to the robot's left (+y), its top row above the camera.
    assert points[32, 0, 1] > 1.9 and points[32, -1, 1] < -1.9
    assert points[0, 32, 2] > 2.9 and points[-1, 32, 2] < -0.9


def test_missing_and_far_depth_become_nan() -> None:
    depth = np.full((64, 64), 2.0, dtype=np.float32)
    depth[0, 0], depth[0, 1], depth[0, 2] = np.nan, 0.0, 50.0
    points = point_image(depth, camera_looking_along_x(), max_range=6.0)
    assert np.isnan(points[0, :3]).all()
    assert len(valid(points.reshape(-1, 3))) == 64 * 64 - 3


def test_a_floor_faces_up_and_a_wall_does_not() -> None:
    camera = camera_looking_along_x(height=1.0)
    wall = point_image(np.full((64, 64), 2.0, dtype=np.float32), camera)
    assert np.nanmedian(upward_normals(wall)) < 0.05
    # A floor: each pixel below the horizon sees z = 0 at depth height / (ray's downward slope).
    rows = (np.arange(64) + 0.5 - 32) / camera.fy
    depth = np.where(rows[:, None] > 0.05, 1.0 / np.maximum(rows[:, None], 1e-6), np.nan) * np.ones((1, 64))
    floor = point_image(depth.astype(np.float32), camera, max_range=30.0)
    assert np.nanmedian(upward_normals(floor)) > 0.99
    assert np.nanmax(np.abs(floor[..., 2])) < 1e-6


def observation_with(segmentation: np.ndarray, names: tuple[str, ...], canonicals: tuple[str, ...]) -> Observation:
    return Observation(time=0.0, rgb={"front": np.zeros((*segmentation.shape, 3), dtype=np.uint8)},
                       segmentation={"front": segmentation}, instance_names=names, instance_canonicals=canonicals)


def test_the_detector_answers_by_category_never_by_instance() -> None:
    segmentation = np.full((20, 20), -1, dtype=np.int32)
    segmentation[0:5, 0:5] = 0   # apple_0
    segmentation[10:15, 10:15] = 1  # apple_1
    segmentation[0:5, 10:15] = 2  # bowl_0
    observation = observation_with(segmentation, ("apple_0", "apple_1", "bowl_0"), ("013_apple", "013_apple", "024_bowl"))
    detector = SegmentationDetector()
    for query in ("apple_0", "apple", "013_apple"):
        found = detector.detect(observation, query)
        assert sorted(detection.track for detection in found) == [0, 1], query
        assert all(detection.label == "013_apple" for detection in found)
    assert [detection.track for detection in detector.detect(observation, "bowl")] == [2]
    assert detector.detect(observation, "fridge") == []


def test_the_detector_ignores_specks() -> None:
    segmentation = np.full((20, 20), -1, dtype=np.int32)
    segmentation[0:2, 0:2] = 0
    observation = observation_with(segmentation, ("apple_0",), ("013_apple",))
    assert SegmentationDetector(min_pixels=12).detect(observation, "apple") == []
    assert len(SegmentationDetector(min_pixels=4).detect(observation, "apple")) == 1


def wall_view(distance: float, camera: CameraView) -> np.ndarray:
    """The point image of a wall `distance` ahead of the camera, floor below it."""
    points = point_image(np.full((64, 64), distance, dtype=np.float32), camera)
    return points


def test_the_map_marks_a_wall_occupied_the_space_before_it_free_and_the_rest_unknown() -> None:
    online = OnlineMap((0.0, 0.0), MapConfig(extent=8.0, self_radius=0.3))
    camera = camera_looking_along_x(height=1.0)
    online.integrate(wall_view(2.0, camera), camera.position, (0.0, 0.0))
    states = online.states()
    grid = online.grid()
    assert not grid.is_free(2.02, 0.0)
    column, row = grid.cell_of(2.02, 0.0)
    assert states[row, column] == OCCUPIED
    column, row = grid.cell_of(1.0, 0.0)
    assert states[row, column] == FREE
    column, row = grid.cell_of(-2.0, 0.0)
    assert states[row, column] == UNKNOWN
    # Cells beyond the field of view stay unknown, so the free space has frontiers next to them.
    assert online.frontiers().any()
    assert online.grid(unknown_blocked=True).occupied[row, column]


def test_a_wall_seen_gone_is_freed_again() -> None:
    online = OnlineMap((0.0, 0.0), MapConfig(extent=8.0, self_radius=0.3))
    camera = camera_looking_along_x(height=1.0)
    online.integrate(wall_view(1.5, camera), camera.position, (0.0, 0.0))
    column, row = online.grid().cell_of(1.52, 0.0)
    assert online.states()[row, column] == OCCUPIED
    for _ in range(6):  # the door opened: the camera now sees through to 3 m
        online.integrate(wall_view(3.0, camera), camera.position, (0.0, 0.0))
    assert online.states()[row, column] == FREE


def test_points_on_the_robot_itself_are_not_obstacles() -> None:
    online = OnlineMap((0.0, 0.0), MapConfig(extent=8.0, self_radius=0.45))
    camera = camera_looking_along_x(height=1.0)
    online.integrate(wall_view(0.3, camera), camera.position, (0.0, 0.0))
    assert not (online.states() == OCCUPIED).any()


@pytest.mark.parametrize("field", ["resolution", "extent", "self_radius", "max_range"])
def test_map_settings_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        MapConfig(**{field: 0.0})
