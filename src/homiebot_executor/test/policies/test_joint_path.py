"""The joint-space planner on toy worlds: 2-D boxes with walls whose straight segments are checked by sampling."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot_executor.policies.joint_path import JointPathConfig, plan_joint_path

LOWER, UPPER = (0.0, 0.0), (4.0, 4.0)


def wall_with_gap(gap_low: float, gap_high: float):
    """A wall at x = 2 (1.9-2.1) from y = 0 to 4, open between gap_low and gap_high; segments sampled every 1 cm."""
    def blocked(point: np.ndarray) -> bool:
        return 1.9 <= point[0] <= 2.1 and not gap_low <= point[1] <= gap_high

    def segment_free(a: np.ndarray, b: np.ndarray) -> bool:
        count = max(2, int(np.linalg.norm(b - a) / 0.01) + 1)
        return not any(blocked(a + t * (b - a)) for t in np.linspace(0.0, 1.0, count))
    return segment_free


def assert_valid(path: list[np.ndarray], start, goal, segment_free) -> None:
    assert np.allclose(path[0], start) and np.allclose(path[-1], goal)
    assert all(segment_free(a, b) for a, b in zip(path, path[1:]))


def test_a_free_straight_move_is_the_path():
    path = plan_joint_path((0.5, 0.5), (3.5, 0.5), LOWER, UPPER, wall_with_gap(0.0, 4.0))
    assert path is not None and len(path) == 2


def test_the_path_goes_through_the_gap_and_every_segment_is_free():
    segment_free = wall_with_gap(3.0, 3.4)
    path = plan_joint_path((0.5, 0.5), (3.5, 0.5), LOWER, UPPER, segment_free,
                           JointPathConfig(step=0.3, max_samples=2000))
    assert path is not None
    assert_valid(path, (0.5, 0.5), (3.5, 0.5), segment_free)
    crossing = [point for point in path if 1.5 < point[0] < 2.5]
    assert crossing, "a path across the wall needs a node near the gap"
    assert len(path) >= 3


def test_no_path_through_a_closed_wall():
    path = plan_joint_path((0.5, 0.5), (3.5, 0.5), LOWER, UPPER, wall_with_gap(5.0, 6.0),
                           JointPathConfig(step=0.3, max_samples=200))
    assert path is None


def test_the_same_seed_gives_the_same_path_and_the_path_runs_from_start_to_goal():
    segment_free = wall_with_gap(1.0, 1.3)
    config = JointPathConfig(step=0.3, max_samples=2000, seed=4)
    first = plan_joint_path((3.5, 3.5), (0.5, 3.5), LOWER, UPPER, segment_free, config)
    second = plan_joint_path((3.5, 3.5), (0.5, 3.5), LOWER, UPPER, segment_free, config)
    assert first is not None and second is not None
    assert all(np.array_equal(a, b) for a, b in zip(first, second)) and len(first) == len(second)
    assert_valid(first, (3.5, 3.5), (0.5, 3.5), segment_free)


def test_scaled_joints_are_returned_in_their_own_units():
    segment_free = wall_with_gap(3.0, 3.4)
    # the second joint in units ten times smaller: limits and ends scaled down, distances scaled back up
    def scaled_free(a: np.ndarray, b: np.ndarray) -> bool:
        return segment_free(a * (1.0, 10.0), b * (1.0, 10.0))
    path = plan_joint_path((0.5, 0.05), (3.5, 0.05), (0.0, 0.0), (4.0, 0.4), scaled_free,
                           JointPathConfig(step=0.3, max_samples=2000), scale=(1.0, 10.0))
    assert path is not None
    assert_valid(path, (0.5, 0.05), (3.5, 0.05), scaled_free)
    assert max(point[1] for point in path) <= 0.4


def test_settings_are_checked():
    with pytest.raises(ValueError, match="step"):
        JointPathConfig(step=0.0)
    with pytest.raises(ValueError, match="shortcut_tries"):
        JointPathConfig(shortcut_tries=-1)
