"""Where the sensor-only Go to stands by its goal (homiebot_executor.policies.sensor.navigate.best_spot)."""

from __future__ import annotations

import numpy as np

from homiebot_executor.policies.sensor.navigate import BANDS, LONG_GOAL, best_spot, span


def test_the_robot_stands_before_the_middle_of_a_long_counter_not_at_its_near_end() -> None:
    counter = np.stack([np.linspace(-1.5, 1.5, 61), np.zeros(61)], 1)  # its front edge, 3 m long
    cells = np.stack([np.arange(-2.0, 2.01, 0.1), np.full(41, -0.45)], 1)  # a row of free cells before it
    path = cells[:, 0] + 3.0  # the robot comes from the left
    middle = np.array([0.0, 0.3])
    at_the_end = cells[best_spot(cells, path, counter, BANDS["place"])]
    by_the_middle = cells[best_spot(cells, path, counter, BANDS["place"], middle=middle)]
    assert at_the_end[0] < -1.3 and np.hypot(*(at_the_end - middle)) > 1.5  # the shortest drive wins
    assert abs(by_the_middle[0]) < 0.3  # from there, both ends are within 2 m


def test_no_spot_when_no_cell_lies_in_the_band() -> None:
    far = np.array([[3.0, 3.0], [4.0, 4.0]])
    assert best_spot(far, np.zeros(2), np.zeros((1, 2)), BANDS["object"]) is None


def test_the_span_of_a_counter_turned_in_the_room_is_its_length() -> None:
    along = np.linspace(0.0, 3.0, 300)
    counter = np.stack([along * np.cos(0.6), along * np.sin(0.6), np.full(300, 0.9)], 1)
    sofa = counter[:, :] * (2.1 / 3.0)
    assert span(counter) >= LONG_GOAL > span(sofa)
    assert abs(span(counter) - 3.0 * 0.96) < 0.05
