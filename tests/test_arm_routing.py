"""Arm routing of the skills: IK solutions from several seeds on the real Fetch model, and free routes found by the
joint-space planner where neither a straight move nor the via poses are clear."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from emmoe_core.robot import fetch  # noqa: E402
from habitat_bridge.backends.fetch_model import kinematic_description  # noqa: E402

from homiebot_executor.policies import arm_motion  # noqa: E402
from homiebot_executor.policies.arm_ik import SOLVED_JOINTS, ArmIk, grasp_rotation  # noqa: E402

TUCKED = dict(zip(fetch.ARM_JOINTS, fetch.TUCKED_ARM), **{fetch.TORSO_JOINT: 0.15})


@pytest.fixture(scope="module")
def ik() -> ArmIk:
    return ArmIk(kinematic_description())


def test_every_solution_reaches_the_pose_and_they_differ(ik: ArmIk):
    ik.set_robot((0.0, 0.0, 0.0), TUCKED)
    rotation = grasp_rotation(0.0, 0.0)
    solutions = ik.solutions((0.7, 0.1, 0.8), rotation)
    assert solutions, "a level grasp 0.7 m ahead at 0.8 m is within Fetch's reach"
    assert all(solution.converged and solution.position_error <= ik.config.position_tolerance
               for solution in solutions)
    for index, first in enumerate(solutions):
        for second in solutions[index + 1:]:
            assert max(abs(first.joints[name] - second.joints[name]) for name in SOLVED_JOINTS) > 0.2
    # the model is left where set_robot put it: a solve from there is the same as a solve before
    again = ik.solutions((0.7, 0.1, 0.8), rotation)
    assert [solution.joints for solution in again] == [solution.joints for solution in solutions]


def test_out_of_reach_has_no_solution(ik: ArmIk):
    ik.set_robot((0.0, 0.0, 0.0), TUCKED)
    assert ik.solutions((2.0, 0.0, 0.8), grasp_rotation(0.0, 0.0)) == []


def test_limits_cover_the_torso_and_arm_with_the_rolls_unbounded(ik: ArmIk):
    lower, upper = ik.limits()
    assert lower.shape == upper.shape == (len(SOLVED_JOINTS),)
    assert np.all(lower < upper)
    assert 0.0 <= lower[0] < upper[0] <= 0.5, "the torso lift is in metres"
    rolls = [index for index, name in enumerate(SOLVED_JOINTS) if "roll" in name]
    assert rolls and all(lower[i] == -math.pi and upper[i] == math.pi for i in rolls)


class WallContext:
    """A robot whose shoulder pan cannot pass 0.5-0.7 rad unless the upper arm is rolled beyond `gap_roll`
    (None: never)."""

    def __init__(self, gap_roll: float | None, limits: tuple[np.ndarray, np.ndarray]) -> None:
        self.gap_roll = gap_roll
        self.ik = self
        self._limits = limits
        self.arm = (0.0, *fetch.TUCKED_ARM[1:])
        self.torso = 0.1

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        return self._limits

    def joint_state(self) -> tuple[tuple[float, float, float], dict[str, float]]:
        return (0.0, 0.0, 0.0), dict(zip(fetch.ARM_JOINTS, self.arm), **{fetch.TORSO_JOINT: self.torso})

    def blocked(self, arm: np.ndarray, torso: float) -> bool:
        in_wall = 0.5 <= arm[0] <= 0.7
        return in_wall and (self.gap_roll is None or arm[2] <= self.gap_roll)

    def arm_path_free(self, start, start_torso, end, end_torso) -> bool:
        a, b = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        return not any(self.blocked(a + t * (b - a), start_torso + t * (end_torso - start_torso))
                       for t in np.linspace(0.0, 1.0, 60))


def goal_beyond_the_wall() -> tuple[tuple[float, ...], float]:
    return (1.2, *fetch.TUCKED_ARM[1:]), 0.1


def test_the_planner_finds_the_way_over_the_wall_where_straight_and_via_poses_are_blocked(ik: ArmIk):
    ctx = WallContext(1.0, ik.limits())
    goal = goal_beyond_the_wall()
    start = (ctx.arm, ctx.torso)
    assert not ctx.arm_path_free(*start, *goal)
    route = arm_motion.free_route(ctx, goal)  # type: ignore[arg-type]
    assert route is not None
    assert route[-1] == goal
    points = [start, *route]
    assert all(ctx.arm_path_free(a[0], a[1], b[0], b[1]) for a, b in zip(points, points[1:]))
    # the via poses keep the upper arm roll at or below 0: only a planned path rolls it past the gap's 1.0
    assert max(arm[2] for arm, _ in route) > 1.0


def test_no_route_without_a_gap(ik: ArmIk):
    assert arm_motion.free_route(WallContext(None, ik.limits()), goal_beyond_the_wall()) is None  # type: ignore[arg-type]
