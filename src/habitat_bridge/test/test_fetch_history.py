"""The robot's recent odometry and joint states, by which the fetch backend places a camera frame at its stamp."""

import math

import pytest
from habitat_bridge.fetch.robot import StampedHistory, between_poses


def test_a_stamp_between_two_readings_is_interpolated_and_one_outside_takes_the_nearest_end():
    history = StampedHistory()
    history.remember(1.00, "a")
    history.remember(1.02, "b")
    history.remember(1.04, "c")
    assert history.around(1.01) == ("a", "b", pytest.approx(0.5))
    assert history.around(1.04) == ("b", "c", pytest.approx(1.0))
    assert history.around(0.5) == ("a", "a", 0.0)
    assert history.around(2.0) == ("c", "c", 0.0)


def test_readings_older_than_the_kept_seconds_are_forgotten():
    history = StampedHistory(keep_s=0.11)
    for index in range(20):
        history.remember(index * 0.02, index)
    assert history.around(0.0) == (14, 14, 0.0)  # 0.28 s is the oldest kept, within 0.11 s of the newest at 0.38 s


def test_a_pose_between_two_readings_turns_the_short_way_across_pi():
    x, y, yaw = between_poses((0.0, 1.0, math.pi - 0.1), (1.0, 3.0, -math.pi + 0.1), 0.5)
    assert (x, y) == pytest.approx((0.5, 2.0))
    assert abs(math.remainder(yaw - math.pi, 2 * math.pi)) < 1e-9
    assert between_poses((0.0, 0.0, 0.2), (0.0, 0.0, 0.4), 0.25)[2] == pytest.approx(0.25)
