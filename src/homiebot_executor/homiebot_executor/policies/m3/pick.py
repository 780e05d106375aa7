"""Pick for the M3 skills: stand within reach, approach from 10 cm (top-down, or level for objects on shelves with
tilted grasps in between), weld-grasp, lift, fold the arm. Success: the right object is held and was not dropped."""

from __future__ import annotations

import math

import numpy as np
from emmoe_core.robot.layout import SupportRegion
from emmoe_core.robot.state import InstanceState

from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.arm_ik import grasp_rotation
from homiebot_executor.policies.m3.context import SkillContext
from homiebot_executor.policies.m3.navigate import go_near
from homiebot_executor.skills import SkillGoal, SkillStatus


# Regions with less free height than this above them are reached with a level gripper (metres).
LEVEL_BELOW_CLEARANCE = 0.6
# Lowest grasp point of a level grasp above the board the object rests on (metres, at most the object's top): the
# gripper body under a lower grasp point scrapes the board (a plum on a fridge shelf).
LEVEL_GRIP_ABOVE = 0.05
# Closest the base stands to what it reaches on a shelf behind a door (fridge, wall cabinet; metres): right against
# the carcass the shoulder cannot rise into the opening without hitting the frame.
BEHIND_DOOR_STANDING = 0.7


def reached_level(region: SupportRegion | None) -> bool:
    """Whether things on a region are reached with a level gripper: the region has a board or shelf close above
    it (fridge and cabinet shelves, open shelving); a drawer is pulled out from under the top, so it is not."""
    return region is not None and not region.part and region.clearance < LEVEL_BELOW_CLEARANCE


def reach_rotations(region: SupportRegion | None, yaw: float) -> list[np.ndarray]:
    """Grasp rotations to try, in order, for things on `region` from a base facing `yaw`: level ones where
    reached_level; elsewhere from top-down to nearly level, and inside a carcass with more room above (a fridge's top
    shelf) the level ones after those (a steep grasp's forearm can meet the roof over an object at the back)."""
    if reached_level(region):
        return arm.rotations(yaw, level=True)
    if region is not None and region.inside and not region.part:
        return arm.rotations(yaw, level=False) + arm.rotations(yaw, level=True)
    return arm.rotations(yaw, level=False)


def standing_distance(region: SupportRegion | None) -> float:
    """Closest the base stands to an object on `region` (metres): further back on shelves behind a door."""
    return BEHIND_DOOR_STANDING if region is not None and region.inside and not region.part else 0.4


def region_of(ctx: SkillContext, state: InstanceState) -> SupportRegion | None:
    """The support region an object rests on (None when it rests on no furniture)."""
    layout = ctx.layout()
    piece = layout.owner_of(state.receptacle) or layout.piece(state.receptacle)
    return layout.region(piece.name, state.surface) if piece is not None else None


def pick(ctx: SkillContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Grasp `goal.target` (see the module docstring)."""
    if ctx.held():
        return SkillStatus.GRASP_FAILED, f"the hand already holds {ctx.held()}"
    state = ctx.instance(goal.target)
    if state.kind != "object":
        return SkillStatus.UNKNOWN_TARGET, f"{goal.target} is not a graspable object"
    centre = np.array(state.pose.position)
    region = region_of(ctx, state)
    go_near(ctx, (centre[0], centre[1]), standing_distance(region), ctx.config.reach, ctx.furniture_of(state.name),
            in_line=region is not None and region.inside, sight=True)
    x, y, _ = ctx.base()
    yaw = math.atan2(centre[1] - y, centre[0] - x)
    level = reached_level(region)
    grasp_point = centre.copy()
    top = centre[2] + state.size[2] / 2
    grasp_point[2] = max(centre[2], top - 0.03)
    if level and region is not None:
        grasp_point[2] = max(grasp_point[2], min(top, region.center[2] + LEVEL_GRIP_ABOVE))
    ctx.phase("approach")
    # Last, top-down with the fingers closing towards the robot: clear of a drawer's side walls.
    turned = [] if level else [grasp_rotation(yaw + math.pi / 2, math.pi / 2)]
    rotation, before = arm.approach(ctx, grasp_point, reach_rotations(region, yaw) + turned, check_way_in=True)
    ctx.phase("grasp")
    arm.line(ctx, before, grasp_point, rotation, 2)
    with ctx.lock:
        grasped = ctx.backend.close_gripper(ctx.config.grasp_distance)
    ctx.tick(2)
    if grasped != state.name:
        if grasped is not None:
            with ctx.lock:
                ctx.backend.open_gripper()
        arm.retreat(ctx, rotation)
        if grasped is None:
            return SkillStatus.GRASP_FAILED, f"nothing within {ctx.config.grasp_distance:g} m of the grasp point"
        return SkillStatus.GRASP_FAILED, f"grasped {grasped} instead of {state.name}"
    if ctx.attempt is not None:
        ctx.attempt.watcher.held = grasped
    ctx.phase("lift")
    arm.retreat(ctx, rotation)
    if ctx.held() != state.name:
        return SkillStatus.OBJECT_DROPPED, f"{state.name} is no longer held"
    return SkillStatus.SUCCEEDED, ""
