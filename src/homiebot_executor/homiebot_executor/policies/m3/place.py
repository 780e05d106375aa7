"""Put for the M3 skills: choose a free spot on a support region of the receptacle (inside a fridge or a drawer only
when it is open), stand within reach of it, carry the object over it (or over the next of a few spots reachable from
there), release only when the object is over the region, let it settle. Success: the object rests within
place_success_distance of that region."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from emmoe_core.robot.layout import PUT_HEADROOM, SupportRegion
from emmoe_core.robot.state import ContainerState, InstanceState

from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.m3.context import SkillContext
from homiebot_executor.policies.m3.navigate import go_near
from homiebot_executor.policies.m3.pick import reached_level
from homiebot_executor.skills import SkillGoal, SkillStatus

# Free height assumed above an object used as a place (nothing hangs over a bowl on a table).
OBJECT_PLACE_CLEARANCE = 1.0
# Free spots (best first, over every region of the place) an arm approach is tried for once the robot stands.
SPOTS_TRIED_FROM_THE_STAND = 4
# Control steps an approach, the release and the retreat after it take: another spot is tried only with this much
# budget left, so a put that runs out of spots keeps the object in the hand instead of timing out.
RELEASE_RESERVE = 110
# How far the held object may be from where the approach should have brought it (m).
ARRIVAL_TOLERANCE = 0.04
# Spots whose footprint comes within EDGE_MARGIN of a region's edge cost EDGE_COST more (as if that much further
# away): the release lands a few centimetres off the spot, and an object released at the edge may tip off.
EDGE_MARGIN = 0.05
EDGE_COST = 0.3


def put(ctx: SkillContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Put the held object on or in `goal.place` (see the module docstring)."""
    held = ctx.held()
    if not held:
        return SkillStatus.PLACE_FAILED, "the hand is empty"
    place = goal.place or goal.target
    regions = regions_of(ctx, place)
    if not regions:
        return SkillStatus.PLACE_FAILED, f"{place} offers no open region to put things on or in"
    obj = ctx.instance(held)
    layout = ctx.layout()
    # Onto an object (a bowl): its centre, which other objects may not keep clear of.
    onto_object = layout.piece(place) is None and layout.owner_of(place) is None
    spots = ([(region, region.center) for region in regions] if onto_object
             else free_spots(ctx, regions, obj, ctx.base()[:2]))
    if not spots:
        return SkillStatus.PLACE_FAILED, f"no free spot on {place}"
    # Try the best few spots until one has a free standing place within reach.
    for index, (region, point) in enumerate(spots[:4]):
        try:
            go_near(ctx, (point[0], point[1]), 0.4, ctx.config.reach - 0.05, layout.piece(region.furniture),
                    sight=True)
            break
        except Stop as stop:
            if stop.status is not SkillStatus.UNREACHABLE or index == min(3, len(spots) - 1):
                raise
    # The spots of the region walked to first, then the other regions' (best first from where the robot stands).
    stand = ctx.base()[:2]
    candidates = [(region, point)] if onto_object else (
        free_spots(ctx, [region], obj, stand) + free_spots(ctx, [other for other in regions if other is not region],
                                                           obj, stand))
    grip, grip_rotation = arm.grip(ctx)
    offset = grip_rotation.T @ (np.array(ctx.instance(held).pose.position) - grip)
    ctx.phase("approach")
    chosen = None
    for number, (region, point) in enumerate(candidates[:SPOTS_TRIED_FROM_THE_STAND]):
        if number and ctx.steps_left() < RELEASE_RESERVE:
            break
        target = np.array([point[0], point[1], point[2] + obj.size[2] / 2 + 0.02])
        chosen = _hold_over(ctx, held, target, offset, reached_level(region))
        if chosen is not None:
            break
    if chosen is None:
        arm.tuck_arm(ctx)
        return SkillStatus.UNREACHABLE, f"cannot hold {held} over {region.receptacle}"
    rotation, before = chosen
    ctx.phase("release")
    arm.line(ctx, before, target - rotation @ offset, rotation, 2)
    if not over(region, ctx.instance(held)):
        arm.retreat(ctx, rotation, tuck=True)
        return SkillStatus.UNREACHABLE, f"{held} did not come over {region.receptacle} (kept in the hand)"
    ctx.allow_release()
    with ctx.lock:
        ctx.backend.open_gripper()
    ctx.tick(5)
    try:
        arm.retreat(ctx, rotation)
    except Stop as stop:
        if stop.status is not SkillStatus.TIMEOUT:
            raise
        return placed(ctx, held, region, settle=False)  # let go in time: the put is judged, the arm left out
    return placed(ctx, held, region)


def _hold_over(ctx: SkillContext, held: str, target: np.ndarray, offset: np.ndarray,
               level: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Bring the held object (its centre `offset` from the grip) before `target` in the first grasp rotation that
    gets it there (within ARRIVAL_TOLERANCE: an arm that stopped short with the object caught on a shelf's front
    does not count): (rotation, the grip's point before), or None when none does."""
    x, y, _ = ctx.base()
    yaw = math.atan2(target[1] - y, target[0] - x)
    for rotation in arm.rotations(yaw, level):
        try:
            _, before = arm.approach(ctx, target - rotation @ offset, [rotation])
        except Stop as stop:
            if stop.status is not SkillStatus.UNREACHABLE:
                raise
            continue
        if np.linalg.norm(np.array(ctx.instance(held).pose.position) - (before + rotation @ offset)) \
                <= ARRIVAL_TOLERANCE:
            return rotation, before
    return None


def over(region: SupportRegion, obj: InstanceState, slack: float = 0.02) -> bool:
    """Whether an object's centre is above the region's footprint (within `slack`) and its bottom no lower than
    `slack` under the region's plane: where opening the hand leaves it on the region."""
    bottom = obj.pose.position[2] - obj.size[2] / 2
    return max(region.outside(obj.pose.position[0], obj.pose.position[1])) <= slack and \
        bottom >= region.center[2] - slack


def regions_of(ctx: SkillContext, place: str) -> list[SupportRegion]:
    """Support regions of the receptacle, moved with their drawer; inside regions only behind an open door."""
    layout = ctx.layout()
    if layout.owner_of(place) is not None:
        state = ctx.container(place)
        if not state.is_open:
            return []
        return [moved(ctx, region, state) for region in layout.regions if region.receptacle == place]
    piece = layout.piece(place)
    if piece is None:
        return object_region(ctx, place)
    own = [region for region in layout.regions if region.furniture == piece.name and not region.part]
    outside = [region for region in own if not region.inside]
    if outside:
        return outside
    doors = [ctx.container(part.name) for part in piece.parts]
    if doors and not all(door.is_open for door in doors):
        return []
    return own


def object_region(ctx: SkillContext, name: str) -> list[SupportRegion]:
    """An object used as the place ("put the banana in the bowl"): the top of its bounding box, a small region
    around its centre, on the furniture it rests on. Empty when the object stands on no furniture."""
    state = ctx.instance(name)
    piece = ctx.furniture_of(state.name) if state.kind == "object" else None
    if piece is None:
        return []
    top = state.pose.position[2] + state.size[2] / 2
    half = (max(state.size[0] / 2 - 0.02, 0.01), max(state.size[1] / 2 - 0.02, 0.01))
    return [SupportRegion(piece.name, f"on_{state.name}", state.name,
                          (state.pose.position[0], state.pose.position[1], top), half, 0.0,
                          clearance=OBJECT_PLACE_CLEARANCE)]


def moved(ctx: SkillContext, region: SupportRegion, state: ContainerState) -> SupportRegion:
    """A drawer region at the drawer's current opening."""
    layout = ctx.layout()
    part, piece = layout.part(region.part), layout.owner_of(region.part)
    if part is None or piece is None:
        return region
    delta = state.position - part.initial
    c, s = math.cos(piece.yaw), math.sin(piece.yaw)
    local = np.asarray(part.axis) * delta
    center = (region.center[0] + c * local[0] - s * local[1], region.center[1] + s * local[0] + c * local[1],
              region.center[2] + local[2])
    return replace(region, center=center)


def free_spots(ctx: SkillContext, regions: Sequence[SupportRegion], obj: InstanceState,
               base: tuple[float, float]) -> list[tuple[SupportRegion, tuple[float, float, float]]]:
    """Spots on the regions clear of other objects, best first (near the robot, at a comfortable height), at
    least 0.3 m apart."""
    with ctx.lock:
        others = [state for state in ctx.backend.object_states() if state.kind == "object"
                  and state.name != obj.name]
    radius = math.hypot(obj.size[0], obj.size[1]) / 2
    scored: list[tuple[float, SupportRegion, tuple[float, float, float]]] = []
    for region in regions:
        if region.clearance < obj.size[2] + PUT_HEADROOM:
            continue
        margin_u, margin_v = region.half[0] - radius, region.half[1] - radius
        if margin_u < 0 or margin_v < 0:
            continue
        near = [other for other in others if abs(other.pose.position[2] - region.center[2]) < 0.35]
        for u in np.linspace(-margin_u, margin_u, max(2, int(2 * margin_u / 0.05) + 1)):
            for v in np.linspace(-margin_v, margin_v, max(2, int(2 * margin_v / 0.05) + 1)):
                x, y = region.to_world(float(u), float(v))
                if any(math.dist((x, y), other.pose.position[:2]) <
                       radius + math.hypot(other.size[0], other.size[1]) / 2 + 0.03 for other in near):
                    continue
                score = math.dist((x, y), base) + 0.5 * abs(region.center[2] - 0.85)
                if min(margin_u - abs(u), margin_v - abs(v)) < EDGE_MARGIN:
                    score += EDGE_COST
                scored.append((score, region, (x, y, region.center[2])))
    scored.sort(key=lambda item: item[0])
    chosen: list[tuple[SupportRegion, tuple[float, float, float]]] = []
    for _, region, point in scored:
        if all(math.dist(point[:2], other[:2]) >= 0.3 for _, other in chosen):
            chosen.append((region, point))
    return chosen


def placed(ctx: SkillContext, name: str, region: SupportRegion, settle: bool = True) -> tuple[SkillStatus, str]:
    """Judge a put (after letting it settle for three steps with `settle`): the object left the hand and rests within
    place_success_distance of the region."""
    if ctx.held() == name:
        return SkillStatus.PLACE_FAILED, f"{name} is still in the gripper"
    if settle:
        ctx.tick(3)
    position = np.array(ctx.instance(name).pose.position)
    du, dv = region.outside(position[0], position[1])
    dz = position[2] - region.center[2]
    distance = math.sqrt(du * du + dv * dv + min(dz, 0.0) ** 2 + max(dz - 0.3, 0.0) ** 2)
    if distance > ctx.config.place_success_distance:
        return SkillStatus.PLACE_FAILED, f"{name} came to rest {distance:.2f} m from {region.receptacle}"
    return SkillStatus.SUCCEEDED, ""
