"""Sensor-only Open and Close (the Octo server's skills): handles found in the images, moved with the hand.

Handles and open door panels are found in the images by homiebot_executor.policies.sensor.handles.

Opening: stand in front of the nearest handle, reach it with a level grasp, close the fingers on it, then
- a drawer: back the base away, the arm held still, until the hand has come DRAWER_PULL out;
- a door: estimate the hinge at the far edge of the face from the handle, and carry the handle along the arc around
  it a little further every control step, the base backing away or following to keep the handle in reach.
Closing is the same motion the other way: a drawer is pushed until the hand falls behind the base, held back by the
closed drawer (at once when it was closed already), a door carried back along its arc until the hand stalls against
the closed stop (or it swept DOOR_CLOSING_SWEEP and the arc ran into the furniture). An open door is closed by its
panel's free edge, which the fingers close across from beyond the edge, the arc turning about the panel's other end:
opened, its handle may face a wall where the robot cannot stand. What this robot left open in the episode it
remembers where the hand let go (the handle turned or pulled with the hand) and closes from there first: a drawer by
that handle, a door by its free edge, sought in the points seen near where it was left (a detector that labels the
whole fridge does not show the door apart from its body). To close, the handle of a drawer that stands open comes
before nearer closed ones. Only when neither a handle nor the panel is seen does the robot look at the panel from
its other side. The hand lets go, and the result is judged from what the hand did (it held the handle throughout):
opened, the handle came 0.25 m out (a drawer) or swept 0.8 rad about the hinge (a door), the release's thresholds. A
handle the fingers closed on without holding it (a fixed front) is remembered and skipped next time.
"""

from __future__ import annotations

import math

import numpy as np

from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.arm_ik import grasp_rotation
from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.navigation import wrap_angle
from homiebot_executor.policies.sensor.context import SensorContext
from homiebot_executor.policies.sensor.handles import (
    Handle, arc_of, carried, door_panels, find_handles, left_edge, nearest_unfailed, open_first, panel_edge, seen_again)
from homiebot_executor.policies.sensor.navigate import approach, cell_centres, drive, face, planner
from homiebot_executor.skills import SkillGoal, SkillStatus

# Where to stand before a handle (metres along the face's normal) and the release's opening thresholds.
STAND_OFF = 0.62
DRAWER_PULL, DRAWER_OPEN, DRAWER_PUSH = 0.38, 0.25, 0.5
# A push has met the closed drawer when the hand has fallen this far behind the base (metres).
DRAWER_LAG = 0.05
DOOR_SWING, DOOR_OPEN = 1.1, 0.8
# A closing swing that the arm could follow this far counts as closed even when it ended at the arm's reach rather
# than against the closed stop (the hand's target then lies inside the furniture).
DOOR_CLOSING_SWEEP = 0.6
# A closing swing goes on until the door stops the hand, at most this far (the hinge's range, radians); a door the hand
# took this far the other way (radians) was not closed.
DOOR_CLOSING_LIMIT, DOOR_WRONG_WAY = 2.0, 0.05
HANDLE_BAND = (0.45, 0.8, 0.6)
# While a door swings, the base backs away or follows to keep the handle this far ahead of it (metres).
SWING_AHEAD = (0.6, 0.72)
# Swing per control step (radians), and how far the hand may lag its target (three steps running) before the door
# counts as stopped.
SWING_RATE, SWING_STALL = 0.04, 0.12
# Turn rate per radian the base has been turned off its heading while the arm swings a door (1/s).
HEADING_GAIN = 4.0


def stance_before(ctx: SensorContext, handle: Handle) -> tuple[float, float]:
    """The reachable free cell nearest the spot STAND_OFF in front of the handle (within 0.45 m of it, 0.45-0.8 m
    from the handle).

    Raises:
        Stop: NO_PATH when none is free.
    """
    ideal = handle.centre[:2] + STAND_OFF * handle.normal
    grid_planner = planner(ctx)
    x, y, _ = ctx.base()
    field_ = grid_planner.geodesic_from(x, y)
    if field_ is None:
        raise Stop(SkillStatus.NO_PATH, "the robot is boxed in on its map")
    gx, gy = cell_centres(grid_planner)
    offset = np.hypot(gx - ideal[0], gy - ideal[1])
    reach = np.hypot(gx - handle.centre[0], gy - handle.centre[1])
    cost = np.where(field_.reachable() & (offset < 0.45) & (reach > 0.45) & (reach < 0.8), offset, np.inf)
    if not np.isfinite(cost).any():
        raise Stop(SkillStatus.NO_PATH, f"no free standing spot before the handle at ({handle.centre[0]:.2f}, "
                                        f"{handle.centre[1]:.2f})")
    row, column = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return grid_planner.grid.center_of(int(column), int(row))


def outer_side_of_panel(ctx: SensorContext, name: str
                        ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """A free standing spot on the far side of a door panel of `name` from the rest of the furniture, in sight of
    it, and the panel's centre to face (None when no thin panel is seen or no such spot is free)."""
    for panel in door_panels(ctx, name):
        centre, normal = panel.centre, panel.normal
        grid_planner = planner(ctx)
        x, y, _ = ctx.base()
        field_ = grid_planner.geodesic_from(x, y)
        if field_ is None:
            return None
        ideal = centre + 0.85 * normal
        gx, gy = cell_centres(grid_planner)
        offset = np.hypot(gx - ideal[0], gy - ideal[1])
        cost = np.where(field_.reachable() & (offset < 0.5), offset, np.inf)
        # Nearest the ideal spot first, among those that see the panel (no wall between).
        in_front = (float(centre[0] + 0.4 * normal[0]), float(centre[1] + 0.4 * normal[1]))
        for index in np.argsort(cost, axis=None)[:int(np.isfinite(cost).sum())]:
            row, column = np.unravel_index(int(index), cost.shape)
            spot = grid_planner.grid.center_of(int(column), int(row))
            if grid_planner.line_free(spot, in_front):
                return spot, (float(centre[0]), float(centre[1]))
    return None


def take_handle(ctx: SensorContext, name: str, opening: bool) -> tuple[Handle, np.ndarray]:
    """Stand square in front of the nearest handle of `name`, reach it and close the fingers on it. To close, what
    this robot let go of when it left `name` open is held first (a door's free edge, see left_edge); otherwise an
    open door's panel edge when the panel is seen (its handle may face a wall), else the handle of a part that stands
    open; an open door whose handle and panel are not seen is looked at from the panel's other side.

    Returns:
        the handle as seen from the standing spot, and the grasp rotation.

    Raises:
        Stop: NO_PATH / UNREACHABLE / JOINT_NOT_MOVED when it cannot be found, reached or held.
    """
    def seek() -> Handle | None:
        ctx.look()
        if opening:
            return nearest_unfailed(ctx, find_handles(ctx, name))
        return panel_edge(ctx, name) or nearest_unfailed(ctx, open_first(find_handles(ctx, name)))

    handle = None if opening or name not in ctx.left_open else nearest_unfailed(ctx, [left_edge(ctx.left_open[name])])
    handle = handle or seek()
    if handle is None:
        approach(ctx, name, HANDLE_BAND)
        handle = seek()
    if handle is None and (viewpoint := outer_side_of_panel(ctx, name)) is not None:
        # An open door shows its inner face: look at it from its other side, where the handle is.
        ctx.phase("position_base")
        drive(ctx, *viewpoint)
        face(ctx, np.array([*viewpoint[1], 0.0]))
        ctx.look()
        handle = nearest_unfailed(ctx, find_handles(ctx, name))
    if handle is None:
        raise Stop(SkillStatus.NO_PATH, f"no handle of {name} is seen")
    ctx.phase("position_base")
    drive(ctx, stance_before(ctx, handle), (float(handle.centre[0]), float(handle.centre[1])))
    face(ctx, handle.centre)
    ctx.look()
    handle = seen_again(ctx, name, handle)
    yaw = math.atan2(-handle.normal[1], -handle.normal[0])
    grip = handle.centre - 0.015 * np.append(handle.normal, 0.0)
    near_face = handle.face_points[np.linalg.norm(handle.face_points - handle.centre, axis=1) < 0.3]
    ctx.ignore(np.concatenate([handle.points, near_face]))
    ctx.phase("reach_handle")
    rotations = [grasp_rotation(yaw, pitch) for pitch in (0.0, 0.2, -0.2)]
    rotation, before = arm.approach(ctx, grip, rotations, back=0.08)
    arm.line(ctx, before, grip, rotation, 2, must_arrive=False)
    with ctx.lock:
        held = ctx.backend.close_gripper(ctx.config.grasp_distance)
    ctx.tick(2)
    ctx.ignore(None)
    if held is None:
        ctx.failed_handles.append(handle.centre)
        arm.retreat(ctx, rotation, tuck=True)
        raise Stop(SkillStatus.JOINT_NOT_MOVED, f"the fingers found nothing to hold at the handle at "
                                                f"({handle.centre[0]:.2f}, {handle.centre[1]:.2f}, "
                                                f"{handle.centre[2]:.2f})")
    return handle, rotation


def let_go(ctx: SensorContext, rotation: np.ndarray) -> None:
    """Open the fingers and fold the arm away."""
    with ctx.lock:
        ctx.backend.open_gripper()
    ctx.tick(2)
    arm.retreat(ctx, rotation, tuck=True)


def drive_straight(ctx: SensorContext, distance: float, stop_on_stall: bool) -> bool:
    """Drive the base straight `distance` metres (negative: backwards) with the arm held still, until done or, with
    `stop_on_stall`, until the hand has fallen DRAWER_LAG behind the base for three control steps (what it holds
    has hit its end stop, or stood there from the start); whether it stalled."""
    x0, y0, _ = ctx.base()
    speed = math.copysign(0.2, distance)
    lagging = 0
    first, _ = arm.grip(ctx)
    while True:
        x, y, _ = ctx.base()
        driven = math.dist((x, y), (x0, y0))
        if driven >= abs(distance) - 0.01:
            break
        with ctx.lock:
            ctx.backend.set_base_velocity(speed, 0.0)
        ctx.tick()
        grip, _ = arm.grip(ctx)
        lagging = lagging + 1 if driven - float(np.linalg.norm((grip - first)[:2])) > DRAWER_LAG else 0
        if stop_on_stall and lagging >= 3:
            break
    with ctx.lock:
        ctx.backend.set_base_velocity(0.0, 0.0)
    ctx.tick()
    return lagging >= 3


def swing(ctx: SensorContext, handle: Handle, opening: bool) -> tuple[float, bool]:
    """Carry a held door handle (or edge) along its arc, a little further every control step, the base backing away
    or following to keep the hand within SWING_AHEAD ahead of it.

    Returns:
        the angle the hand really swept about the hinge (radians, negative when the other way), and whether the door
        stopped the hand (it lagged its target by more than SWING_STALL: a closed door, or one at its stop) rather
        than the arm's reach.

    Raises:
        Stop: JOINT_NOT_MOVED when no hinge edge is seen.
    """
    arc = arc_of(handle)
    if arc.radius < 0.2:
        raise Stop(SkillStatus.JOINT_NOT_MOVED, "no hinge edge is seen on the door's face")
    moving = arc.opening if opening else -arc.opening
    # The hand turns with the door (the handle is held at a point, so any grasp orientation holds it).
    turning = math.copysign(1.0, float(arc.start[0] * moving[1] - arc.start[1] * moving[0]))
    yaw0 = math.atan2(-handle.normal[1], -handle.normal[0])
    ctx.phase("swing")
    angle, stalled, lagging = 0.0, False, 0
    target = handle.centre
    heading = ctx.base()[2]
    limit = DOOR_SWING if opening else DOOR_CLOSING_LIMIT
    while angle < limit:
        angle = min(limit, angle + SWING_RATE)
        target2d = arc.hinge + arc.radius * (math.cos(angle) * arc.start + math.sin(angle) * moving)
        target = np.array([target2d[0], target2d[1], handle.centre[2]])
        x, y, yaw = ctx.base()
        ahead = (target2d - np.array([x, y])) @ np.array([math.cos(yaw), math.sin(yaw)])
        turn = turning * angle
        rotations = [grasp_rotation(yaw0 + turn * share, pitch) for share in (1.0, 0.5, 0.0) for pitch in (0.0, 0.3)]
        try:
            arm_joints, torso, _ = arm.solve(ctx, target, rotations)
        except Stop:
            break
        with ctx.lock:
            # The base holds its heading against the door's pull on the hand.
            ctx.backend.set_base_velocity(-0.2 if ahead < SWING_AHEAD[0] else 0.2 if ahead > SWING_AHEAD[1] else 0.0,
                                          HEADING_GAIN * wrap_angle(heading - yaw))
            ctx.backend.set_arm_targets(arm_joints)
            ctx.backend.set_torso_target(torso)
        ctx.tick()
        grip, _ = arm.grip(ctx)
        lagging = lagging + 1 if np.linalg.norm(grip - target) > SWING_STALL else 0
        if lagging >= 3:
            stalled = True
            break
    with ctx.lock:
        ctx.backend.set_base_velocity(0.0, 0.0)
    # The hand catches up with its last target (unless the door stopped it).
    for _ in range(0 if stalled else 10):
        ctx.tick()
        grip, _ = arm.grip(ctx)
        if np.linalg.norm(grip - target) < 0.03:
            break
    grip, _ = arm.grip(ctx)
    now = grip[:2] - arc.hinge
    swept = math.atan2(float(now @ moving), float(now @ arc.start))
    return swept, stalled


def open_part(ctx: SensorContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Open the door or drawer `goal.target` (see the module docstring)."""
    return articulate(ctx, goal, opening=True)


def close_part(ctx: SensorContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Close the door or drawer `goal.target` (see the module docstring)."""
    return articulate(ctx, goal, opening=False)


def articulate(ctx: SensorContext, goal: SkillGoal, opening: bool) -> tuple[SkillStatus, str]:
    """Open or close with the hand on the handle (see the module docstring)."""
    if ctx.held():
        return SkillStatus.UNREACHABLE, "the hand is full"
    handle, _ = take_handle(ctx, goal.target, opening)
    start, _ = arm.grip(ctx)
    try:
        if handle.vertical:
            status, message = move_door(ctx, handle, opening)
        else:
            status, message = move_drawer(ctx, handle, start, opening)
    except Stop:
        # The attempt ends with the part moved (out of steps, say): remember where it was left.
        ctx.left_open[goal.target] = carried(handle, start, arm.grip(ctx)[0])
        raise
    end, rotation = arm.grip(ctx)
    let_go(ctx, rotation)
    if status == SkillStatus.SUCCEEDED and not opening:
        ctx.left_open.pop(goal.target, None)
    else:
        ctx.left_open[goal.target] = carried(handle, start, end)
    return status, message


def move_drawer(ctx: SensorContext, handle: Handle, start: np.ndarray, opening: bool) -> tuple[SkillStatus, str]:
    """Pull out or push in the drawer whose handle the hand holds at `start`, and judge the result (the hand still
    holds it)."""
    ctx.phase("pull" if opening else "push")
    stalled = drive_straight(ctx, -DRAWER_PULL if opening else DRAWER_PUSH, stop_on_stall=not opening)
    end, _ = arm.grip(ctx)
    travel = float((end - start)[:2] @ handle.normal)
    if opening and travel < DRAWER_OPEN:
        return SkillStatus.JOINT_NOT_MOVED, f"the drawer came {travel:.2f} m out"
    if not opening and not stalled:
        return SkillStatus.JOINT_NOT_MOVED, f"the push went {-travel:.2f} m without meeting the closed drawer"
    return SkillStatus.SUCCEEDED, ""


def move_door(ctx: SensorContext, handle: Handle, opening: bool) -> tuple[SkillStatus, str]:
    """Swing open or shut the door whose handle (or edge) the hand holds, and judge the result (the hand still
    holds it)."""
    swept, stalled = swing(ctx, handle, opening)
    if opening and swept < DOOR_OPEN:
        return SkillStatus.JOINT_NOT_MOVED, f"the door swung {swept:.2f} rad open"
    if not opening and not stalled and swept < DOOR_CLOSING_SWEEP:
        return SkillStatus.JOINT_NOT_MOVED, f"the door swung {swept:.2f} rad without meeting its closed stop"
    if not opening and swept < -DOOR_WRONG_WAY:
        return SkillStatus.JOINT_NOT_MOVED, f"the door swung {-swept:.2f} rad further open"
    return SkillStatus.SUCCEEDED, ""
