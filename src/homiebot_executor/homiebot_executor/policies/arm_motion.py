"""Arm routing for the skills: joint moves at a bounded speed, via poses around furniture, IK solves, straight
grasp-point lines, approach and retreat."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from emmoe_core.robot import fetch

from homiebot_executor.policies.arm_ik import grasp_rotation
from homiebot_executor.policies.attempt import RobotContext, Stop
from homiebot_executor.policies.joint_path import JointPathConfig, plan_joint_path
from homiebot_executor.skills import SkillStatus

# The arm raised in front, elbow high, gripper 0.43 m ahead at 1.07 m pointing down (with the torso at READY_TORSO):
# the pose between the tucked arm and a target, clear of table and counter tops.
READY_ARM: tuple[float, ...] = (0.0, -1.2, 0.0, 1.4, 0.0, 1.9, 0.0)
READY_TORSO = 0.3
TUCKED_TORSO = 0.15
# Via poses tried, in this order, when a straight joint move would hit furniture: the arm raised and folded close in
# front (0.38 m ahead at most), and raised at the side.
VIA_POSES: tuple[tuple[tuple[float, ...], float], ...] = (
    ((0.0, -1.2, 0.0, 2.2, 0.0, 1.9, 0.0), READY_TORSO),
    ((1.32, -1.2, -0.2, 1.72, 0.0, 1.66, 0.0), READY_TORSO),
    (READY_ARM, READY_TORSO),
)


def arm_error(ctx: RobotContext[Any], target: np.ndarray) -> float:
    """Largest joint distance of the arm from `target` (radians)."""
    _, joints = ctx.joint_state()
    return float(np.max(np.abs(np.array([joints[name] for name in fetch.ARM_JOINTS]) - target)))


def move_arm(ctx: RobotContext[Any], arm: Sequence[float], torso: float | None = None, settle: int = 5,
             must_arrive: bool = False) -> None:
    """Drive the arm (and torso) to joint targets, interpolating at `arm_speed` per control step.

    Raises:
        Stop: UNREACHABLE when `must_arrive` and a joint stays more than 0.35 rad off (blocked by furniture).
    """
    _, joints = ctx.joint_state()
    start = np.array([joints[name] for name in fetch.ARM_JOINTS])
    target = np.asarray(arm, dtype=float)
    steps = max(1, int(math.ceil(float(np.max(np.abs(target - start))) / ctx.config.arm_speed)))
    if torso is not None:
        with ctx.lock:
            ctx.backend.set_torso_target(torso)
    for fraction in np.linspace(1.0 / steps, 1.0, steps):
        with ctx.lock:
            ctx.backend.set_arm_targets(start + fraction * (target - start))
        ctx.tick()
    for _ in range(settle):
        if arm_error(ctx, target) < 0.03:
            return
        ctx.tick()
    if must_arrive and arm_error(ctx, target) > 0.35:
        raise Stop(SkillStatus.UNREACHABLE, f"the arm is blocked {arm_error(ctx, target):.2f} rad short of its target")


def collides(ctx: RobotContext[Any], arm: Sequence[float], torso: float) -> bool:
    """Whether an arm configuration would hit something now (as far as the context knows)."""
    return ctx.arm_collides(arm, torso)


# The joint-space planner for arm moves that neither a straight move nor the via poses clear; the torso lift (metres)
# counts four times in its distances (0.1 m of lift as 0.4 rad).
ROUTE_PLANNER = JointPathConfig(step=0.4, max_samples=300, shortcut_tries=40)
TORSO_SCALE = 4.0
# An approach that cannot go to the pose before the target directly tries staging poses these distances further
# back (metres), nearest first, then moves in along a line: the straight line keeps the hand clear of shelf boards a
# joint-space move would swing through, and the farther stagings lie outside a deep carcass (a fridge is 0.72 m
# deep), whose inside the joint-space planner seldom finds a way into.
STAGING_BACK = (0.15, 0.3, 0.45)
# Longest step of the grasp point along such a line (metres): each step is one IK solve and a straight joint move.
LINE_STEP = 0.075

Configuration = tuple[tuple[float, ...], float]


def current_configuration(ctx: RobotContext[Any]) -> Configuration:
    """The arm joints and torso lift now."""
    _, joints = ctx.joint_state()
    return tuple(joints[name] for name in fetch.ARM_JOINTS), joints[fetch.TORSO_JOINT]


def planned_route(ctx: RobotContext[Any], start: Configuration, goal: Configuration) -> list[Configuration] | None:
    """A collision-free joint path from `start` to `goal` found by the RRT-Connect planner (None if none)."""
    lower, upper = ctx.ik.limits()

    def segment_free(a: np.ndarray, b: np.ndarray) -> bool:
        return ctx.arm_path_free(tuple(a[1:]), float(a[0]), tuple(b[1:]), float(b[0]))

    scale = (TORSO_SCALE,) + (1.0,) * len(fetch.ARM_JOINTS)
    path = plan_joint_path((start[1], *start[0]), (goal[1], *goal[0]), lower, upper, segment_free, ROUTE_PLANNER,
                           scale)
    if path is None:
        return None
    return [(tuple(float(value) for value in node[1:]), float(node[0])) for node in path[1:]]


def free_route(ctx: RobotContext[Any], goal: Configuration) -> list[Configuration] | None:
    """Configurations to pass through to `goal` (the goal last) with every straight move clear: the straight move,
    else through one or two via poses, else a planned path; None when none is found."""
    start = current_configuration(ctx)
    goal = (tuple(goal[0]), goal[1])
    candidates = [[goal]] + [[via, goal] for via in VIA_POSES] + \
        [[first, second, goal] for first in VIA_POSES for second in VIA_POSES if first is not second]
    for candidate in candidates:
        points = [start, *candidate]
        if all(ctx.arm_path_free(a[0], a[1], b[0], b[1]) for a, b in zip(points, points[1:])):
            return candidate
    return planned_route(ctx, start, goal)


def follow(ctx: RobotContext[Any], route: Sequence[Configuration], must_arrive: bool = False) -> None:
    """Move through the configurations of a route (settling only at the last)."""
    for index, (joints_target, torso_target) in enumerate(route):
        last = index == len(route) - 1
        move_arm(ctx, joints_target, torso_target, settle=5 if last else 1, must_arrive=must_arrive and last)


def route_arm(ctx: RobotContext[Any], arm: Sequence[float], torso: float, must_arrive: bool = False) -> None:
    """Move to a configuration along a free route (free_route), or straight when none is found."""
    goal = (tuple(arm), torso)
    follow(ctx, free_route(ctx, goal) or [goal], must_arrive)


def tuck_arm(ctx: RobotContext[Any]) -> None:
    """Torso down, arm tucked (the pose the base drives with)."""
    route_arm(ctx, fetch.TUCKED_ARM, TUCKED_TORSO)


def reset_arm(ctx: RobotContext[Any]) -> None:
    """The reset before every attempt: fingers open unless holding, torso down, arm tucked."""
    ctx.phase("reset_arm")
    with ctx.lock:
        if not ctx.backend.held_object():
            ctx.backend.open_gripper()
    tuck_arm(ctx)


def solve(ctx: RobotContext[Any], position: Sequence[float] | np.ndarray, rotations: Sequence[np.ndarray],
          collision_free: bool = False) -> tuple[tuple[float, ...], float, np.ndarray]:
    """Arm joints, torso lift and the rotation used, for the grasp point at `position` (rotations in turn).

    Raises:
        Stop: UNREACHABLE when no rotation converges (to a collision-free configuration if asked).
    """
    base, joints = ctx.joint_state()
    closest = math.inf
    colliding = 0
    for rotation in rotations:
        ctx.ik.set_robot(base, joints)
        solution = ctx.ik.solve(position, rotation)
        if solution.converged:
            if collision_free and collides(ctx, solution.arm, solution.torso):
                colliding += 1
                continue
            return solution.arm, solution.torso, rotation
        closest = min(closest, solution.position_error)
    if colliding:
        raise Stop(SkillStatus.UNREACHABLE, f"every arm configuration reaching ({position[0]:.2f}, "
                                            f"{position[1]:.2f}, {position[2]:.2f}) hits furniture")
    raise Stop(SkillStatus.UNREACHABLE, f"no arm configuration reaches ({position[0]:.2f}, {position[1]:.2f}, "
                                        f"{position[2]:.2f}); closest {closest:.3f} m off")


def line(ctx: RobotContext[Any], start: np.ndarray, end: np.ndarray, rotation: np.ndarray, pieces: int,
         must_arrive: bool = True) -> None:
    """Move the grasp point along a straight segment in `pieces` IK steps."""
    for fraction in np.linspace(1.0 / pieces, 1.0, pieces):
        arm, torso, _ = solve(ctx, start + fraction * (end - start), [rotation])
        move_arm(ctx, arm, torso, settle=2, must_arrive=must_arrive and fraction == 1.0)


def approach(ctx: RobotContext[Any], point: np.ndarray, rotations: Sequence[np.ndarray],
             back: float = 0.10, check_way_in: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Go to `back` metres before `point` along the approach of the first rotation that reaches both: to the pose
    before directly, else through a staging pose further back (STAGING_BACK, nearest first) and a straight line in.
    Every collision-free IK solution is tried (with `check_way_in`, only those whose way in stays clear up to halfway
    from the pose before to `point`, where the fingers meet the object), along a free route; when no route is found
    for any, the first of them is driven to straight.

    Returns:
        (rotation, the point before the target).
    """
    unrouted: list[tuple[np.ndarray, np.ndarray, Configuration]] = []
    for rotation in rotations:
        before = point - back * rotation[:, 0]
        base, joints = ctx.joint_state()
        ctx.ik.set_robot(base, joints)
        if not ctx.ik.solve(point, rotation).converged:
            continue
        way_in = [(before + point) / 2] if check_way_in else []
        routeless: list[Configuration] = []
        if _reach(ctx, before, rotation, way_in, routeless):
            return rotation, before
        unrouted += [(rotation, before, configuration) for configuration in routeless]
        for back_more in STAGING_BACK:
            staging = before - back_more * rotation[:, 0]
            if _reach(ctx, staging, rotation, [before, *way_in], []):
                try:
                    line(ctx, staging, before, rotation, max(2, math.ceil(back_more / LINE_STEP - 1e-9)))
                    return rotation, before
                except Stop as stop:
                    if stop.status is not SkillStatus.UNREACHABLE:
                        raise
    if unrouted:
        rotation, before, (arm, torso) = unrouted[0]
        route_arm(ctx, arm, torso, must_arrive=True)
        return rotation, before
    solve(ctx, point, rotations)
    raise Stop(SkillStatus.UNREACHABLE, "no collision-free approach pose before the target")


def _reach(ctx: RobotContext[Any], position: np.ndarray, rotation: np.ndarray, onward: Sequence[np.ndarray],
           routeless: list[Configuration]) -> bool:
    """Move to an IK solution of the pose along a free route, trying each solution whose way on through the
    `onward` grasp points stays clear (True when one is reached); the clear solutions no route was found to are
    added to `routeless`."""
    base, joints = ctx.joint_state()
    ctx.ik.set_robot(base, joints)
    for solution in ctx.ik.solutions(position, rotation):
        if not _clear_onward(ctx, base, joints, (solution.arm, solution.torso), onward, rotation):
            continue
        route = free_route(ctx, (solution.arm, solution.torso))
        if route is None:
            routeless.append((solution.arm, solution.torso))
            continue
        try:
            follow(ctx, route, must_arrive=True)
            return True
        except Stop as stop:
            if stop.status is not SkillStatus.UNREACHABLE:
                raise
    return False


def _clear_onward(ctx: RobotContext[Any], base: tuple[float, float, float], joints: dict[str, float],
                  start: Configuration, onward: Sequence[np.ndarray], rotation: np.ndarray) -> bool:
    """Whether `start` is collision-free and the grasp point's way on through `onward` (IK continued from it, as
    `line` moves) converges and stays clear."""
    if collides(ctx, *start):
        return False
    previous = start
    for position in onward:
        seeded = dict(joints, **dict(zip(fetch.ARM_JOINTS, previous[0])), **{fetch.TORSO_JOINT: previous[1]})
        ctx.ik.set_robot(base, seeded)
        solution = ctx.ik.solve(position, rotation)
        following = (solution.arm, solution.torso)
        if not solution.converged or not ctx.arm_path_free(previous[0], previous[1], *following):
            return False
        previous = following
    return True


def grip(ctx: RobotContext[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Grasp point position and rotation matrix in the world."""
    with ctx.lock:
        gripper = ctx.backend.robot_state().gripper
    w, x, y, z = gripper.orientation
    rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return np.array(gripper.position), rotation


def retreat(ctx: RobotContext[Any], rotation: np.ndarray, tuck: bool = False) -> None:
    """Back out along the approach (and up), then fold the arm up in front (the next reset tucks it), or tuck it
    when something is about to swing towards the robot."""
    start, _ = grip(ctx)
    level = abs(rotation[2, 0]) < 0.5
    end = start - 0.12 * rotation[:, 0] + np.array([0.0, 0.0, 0.03 if level else 0.10])
    try:
        line(ctx, start, end, rotation, 2, must_arrive=False)
    except Stop as stop:
        if stop.status is not SkillStatus.UNREACHABLE:
            raise
    if tuck:
        tuck_arm(ctx)
    else:
        route_arm(ctx, *VIA_POSES[0])


def rotations(yaw: float, level: bool) -> list[np.ndarray]:
    """Grasp rotations to try facing `yaw`: level ones (for shelves) or from top-down to nearly level."""
    pitches = (0.0, 0.3, 0.6) if level else (math.pi / 2, 1.2, 0.9, 0.6, 0.3)
    return [grasp_rotation(yaw, pitch) for pitch in pitches]
