"""Open and close for the M3 skills: stand in front of the handle, reach it, retract, step out of the door's swing or
the drawer's travel, drive the joint past its open threshold (or back to closed). Success: the joint is past the
threshold (or closed)."""

from __future__ import annotations

import math

import numpy as np
from emmoe_core.robot.layout import FurnitureLayout, PartLayout
from emmoe_core.robot.state import BackendError, ContainerState

from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.m3.context import Area, SkillContext
from homiebot_executor.policies.m3.navigate import go_near, to_local
from homiebot_executor.skills import SkillGoal, SkillStatus


def open_part(ctx: SkillContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Open the door or drawer `goal.target`."""
    return articulate(ctx, goal, opening=True)


def close_part(ctx: SkillContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Close the door or drawer `goal.target`."""
    return articulate(ctx, goal, opening=False)


def articulate(ctx: SkillContext, goal: SkillGoal, opening: bool) -> tuple[SkillStatus, str]:
    """Drive a door or drawer open or closed (see the module docstring)."""
    if ctx.held():
        return SkillStatus.UNREACHABLE, f"the hand holds {ctx.held()}"
    state = ctx.container(goal.target)
    piece = ctx.layout().owner_of(state.name)
    if piece is None:
        return SkillStatus.UNKNOWN_TARGET, f"{state.name} belongs to no furniture"
    if (opening and state.is_open) or (not opening and state.position <= state.lower + 0.03):
        return SkillStatus.SUCCEEDED, ""  # already past the threshold (or closed): nothing to drive
    config = ctx.config
    if opening:
        target = min(config.hinge_open if state.joint_type == "hinge" else config.slide_open, state.upper - 0.02)
    else:
        target = state.lower
    push_shut = state.joint_type == "hinge" and state.position > 0.3 and not opening
    # An open door is pushed shut from the inner face of its free edge; everything else is taken by the handle.
    touch, normal = contact_point(state, piece, push_shut)
    # A drawer comes towards the robot: stand beyond its travel so it can slide out without a second move.
    away = 0.6
    if state.joint_type == "slide":
        away = max(away, target - state.position + config.robot_radius + config.clearance + 0.04)
    try:
        # Square in front of the contact point, so the fingers meet it head on.
        stance = (touch[0] + away * normal[0], touch[1] + away * normal[1])
        go_near(ctx, stance, 0.0, 0.12, face=(touch[0], touch[1]))
    except Stop as stop:
        if stop.status is not SkillStatus.UNREACHABLE:
            raise
        go_near(ctx, (touch[0], touch[1]), 0.45, config.reach - 0.15, None if push_shut else piece)
    x, y, _ = ctx.base()
    yaw = math.atan2(touch[1] - y, touch[0] - x)
    ctx.phase("reach_handle")
    rotation, before = arm.approach(ctx, touch, arm.rotations(yaw, level=True), back=0.08)
    arm.line(ctx, before, touch, rotation, 2, must_arrive=False)
    ctx.phase("retract")
    arm.retreat(ctx, rotation, tuck=True)
    centre, radius, inside = travel_area(ctx, state, piece, target)
    go_near(ctx, centre, radius, radius + 0.7, piece, inside, face=(touch[0], touch[1]), preferred=radius + 0.05)
    ctx.phase("drive_joint")
    # Ramp the joint target over eight control steps (the part follows it smoothly; hinged doors are critically
    # damped), then wait until the part has stayed past its threshold (or closed) for three control steps.
    start = ctx.container(state.name).position
    for fraction in np.linspace(0.125, 1.0, 8):
        with ctx.lock:
            ctx.backend.set_container_target(state.name, start + fraction * (target - start))
        ctx.tick()
    steady = 0
    while steady < 3:
        ctx.tick()
        position = ctx.container(state.name).position
        arrived = position >= state.open_threshold + 0.05 if opening else position <= state.lower + 0.03
        steady = steady + 1 if arrived else 0
    final = ctx.container(state.name)
    if opening and not final.is_open:
        return SkillStatus.JOINT_NOT_MOVED, f"{state.name} at {final.position:.2f}, open from {final.open_threshold}"
    if not opening and final.position > final.lower + 0.05:
        return SkillStatus.JOINT_NOT_MOVED, f"{state.name} still at {final.position:.2f}"
    return SkillStatus.SUCCEEDED, ""


def part_layout(state: ContainerState, piece: FurnitureLayout) -> PartLayout:
    """The geometry of the part in its furniture's layout.

    Raises:
        BackendError: the layout does not describe the part.
    """
    part = piece.part(state.name)
    if part is None:
        raise BackendError(f"the scene layout of {piece.name} does not describe {state.name}")
    return part


def contact_point(state: ContainerState, piece: FurnitureLayout,
                  inner: bool) -> tuple[np.ndarray, tuple[float, float]]:
    """Where the gripper touches the part (its handle, or the inner face of a door's free edge) and the
    horizontal normal pointing from there towards where the robot should stand, at the part's current position.
    """
    part = part_layout(state, piece)
    if not inner:
        angle = state.position * float(np.sign(part.axis[2])) if state.joint_type == "hinge" else 0.0
        local_normal = (math.sin(angle), -math.cos(angle))
        yaw = piece.yaw
        normal = (math.cos(yaw) * local_normal[0] - math.sin(yaw) * local_normal[1],
                  math.sin(yaw) * local_normal[0] + math.cos(yaw) * local_normal[1])
        return np.array(state.handle), normal
    local = np.array([part.handle[0], part.inner_face + 0.03, part.handle[2]])
    pivot = np.asarray(part.pivot)
    angle = state.position * float(np.sign(part.axis[2]))
    c, s = math.cos(angle), math.sin(angle)
    rel = local - pivot
    rotated = pivot + np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1], rel[2]])
    local_normal = (-s, c)  # the door's inner side, local +y turned with the door
    yaw = piece.yaw
    normal = (math.cos(yaw) * local_normal[0] - math.sin(yaw) * local_normal[1],
              math.sin(yaw) * local_normal[0] + math.cos(yaw) * local_normal[1])
    return np.array(piece.to_world((float(rotated[0]), float(rotated[1]), float(rotated[2])))), normal


def travel_area(ctx: SkillContext, state: ContainerState, piece: FurnitureLayout,
                target: float) -> tuple[tuple[float, float], float, Area]:
    """Where the base must not stand while the part moves: (reference point, minimum distance, area test)."""
    part = part_layout(state, piece)
    margin = ctx.config.robot_radius + ctx.config.clearance
    pivot = piece.to_world(part.pivot)
    if state.joint_type == "slide":
        travel = max(target, state.position)
        front = -piece.size[1] / 2

        def in_travel(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
            _, v = to_local(piece, gx, gy)
            return v > front - travel - margin

        return (pivot[0], pivot[1]), travel + margin, in_travel
    radius = math.hypot(part.handle[0] - part.pivot[0], part.handle[1] - part.pivot[1]) + 0.1 + margin

    def in_swing(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        return np.hypot(gx - pivot[0], gy - pivot[1]) < radius

    return (pivot[0], pivot[1]), radius, in_swing
