"""How the sensor-only Pick stands and grasps: its standing band and the order of its grasps."""

from __future__ import annotations

import math

import numpy as np

from homiebot_executor.policies.sensor.manipulate import ARM_BAND, grasp_rotations
from homiebot_executor.policies.sensor.navigate import BANDS


def pitch_of(rotation: np.ndarray) -> float:
    """How steeply the grasp points down (0: level, pi/2: top-down)."""
    approach = rotation[:, 0]
    return math.asin(-float(approach[2]))


def test_a_pick_stands_as_far_from_its_object_as_a_go_to_may_leave_it():
    """An object far back on a sofa seat is 0.76-0.79 m from the nearest free cell: the Pick must accept such a
    spot, as the Go to before it did, instead of exploring the room for a nearer one until its budget is gone."""
    assert ARM_BAND[1] >= BANDS["object"][1] and ARM_BAND[0] <= ARM_BAND[2] <= ARM_BAND[1]


def test_grasps_go_from_top_down_to_level_and_the_other_way_round_under_a_cover():
    open_above = [pitch_of(rotation) for rotation in grasp_rotations(0.3)]
    covered = [pitch_of(rotation) for rotation in grasp_rotations(0.3, covered=True)]
    assert open_above == sorted(open_above, reverse=True) and math.isclose(open_above[0], math.pi / 2)
    # Under a shelf board or a counter top the level grasps come first, but the steep ones are still tried: the
    # back of an open drawer lies under the counter's edge, its front part is free above.
    assert covered == open_above[::-1] and math.isclose(covered[0], 0.0, abs_tol=1e-9)
    for rotation in grasp_rotations(0.3):
        heading = rotation[:2, 0]
        if np.linalg.norm(heading) > 1e-6:
            assert math.isclose(math.atan2(heading[1], heading[0]), 0.3, abs_tol=1e-6)
