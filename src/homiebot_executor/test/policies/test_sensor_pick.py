"""The order in which the sensor-only Pick tries its grasps."""

from __future__ import annotations

import math

import numpy as np

from homiebot_executor.policies.sensor.manipulate import grasp_rotations


def pitch_of(rotation: np.ndarray) -> float:
    """How steeply the grasp points down (0: level, pi/2: top-down)."""
    approach = rotation[:, 0]
    return math.asin(-float(approach[2]))


def test_grasps_go_from_top_down_to_level_and_start_level_under_a_cover():
    open_above = [pitch_of(rotation) for rotation in grasp_rotations(0.3)]
    covered = [pitch_of(rotation) for rotation in grasp_rotations(0.3, covered=True)]
    assert open_above == sorted(open_above, reverse=True) and math.isclose(open_above[0], math.pi / 2)
    assert covered == sorted(covered) and math.isclose(covered[0], 0.0, abs_tol=1e-9) and max(covered) < 1.0
    for rotation in grasp_rotations(0.3):
        heading = rotation[:2, 0]
        if np.linalg.norm(heading) > 1e-6:
            assert math.isclose(math.atan2(heading[1], heading[0]), 0.3, abs_tol=1e-6)
