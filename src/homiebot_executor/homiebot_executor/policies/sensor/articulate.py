"""Sensor-only Open and Close (the Octo server's skills): handles found in the images, moved with the hand.

Handles: within the detector's masks of the target's category, the pixels clearly darker than the part around them
(at least 0.2 m above the floor) are handle candidates; each connected region with depth that is a compact bar
standing out of its face is one handle. A horizontal bar is taken for a drawer's, a vertical one for a door's. The
face's normal comes from the part's points around the handle (their horizontal principal direction, turned towards
the robot). An open door shows the robot its inner face, without the handle: the robot then looks at the panel
from its other side first.

Opening: stand in front of the nearest handle, reach it with a level grasp, close the fingers on it, then
- a drawer: back the base away, the arm held still, until the hand has come DRAWER_PULL out;
- a door: estimate the hinge at the far edge of the face from the handle, and carry the handle along the arc around
  it a little further every control step, the base backing away or following to keep the handle in reach.
Closing is the same motion the other way: a drawer is pushed until the hand stalls against the closed drawer, a
door carried back along its arc until the hand stalls against the closed stop (or it swept DOOR_CLOSING_SWEEP and
the arc ran into the furniture). The hand lets go, and the result is judged from what the hand did (it held the
handle throughout): opened, the handle came 0.25 m out (a drawer) or swept 0.8 rad about the hinge (a door), the
release's thresholds. A handle the fingers closed on without holding it (a fixed front) is remembered and skipped
next time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.arm_ik import grasp_rotation
from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.sensor.context import SensorContext
from homiebot_executor.policies.sensor.navigate import approach, cell_centres, drive, face, planner
from homiebot_executor.skills import SkillGoal, SkillStatus

# Where to stand before a handle (metres along the face's normal) and the release's opening thresholds.
STAND_OFF = 0.62
DRAWER_PULL, DRAWER_OPEN, DRAWER_PUSH = 0.38, 0.25, 0.5
DOOR_SWING, DOOR_OPEN = 1.1, 0.8
# A closing swing that the arm could follow this far counts as closed even when it ended at the arm's reach rather
# than against the closed stop (the hand's target then lies inside the furniture).
DOOR_CLOSING_SWEEP = 0.6
HANDLE_BAND = (0.45, 0.8, 0.6)
# A handle bar is at most this wide across (metres) and stands at least this far out of its face.
HANDLE_MAX_WIDTH, HANDLE_MIN_PROTRUSION = 0.3, 0.01
# While a door swings, the base backs away or follows to keep the handle this far ahead of it (metres).
SWING_AHEAD = (0.6, 0.72)
# Swing per control step (radians), and how far the hand may lag its target (three steps running) before the door counts as
# stopped.
SWING_RATE, SWING_STALL = 0.04, 0.12


@dataclass(frozen=True)
class Handle:
    """A handle seen in the images.

    Attributes:
        centre: world position of its visible face's centre.
        vertical: a vertical bar (a door's) rather than a horizontal one (a drawer's).
        normal: unit horizontal normal of the face it is on, pointing towards the robot.
        points: (N, 3) points of the handle.
        face_points: (N, 3) points of that face around the handle (for the hinge estimate).
    """

    centre: np.ndarray
    vertical: bool
    normal: np.ndarray
    points: np.ndarray
    face_points: np.ndarray


def find_handles(ctx: SensorContext, name: str) -> list[Handle]:
    """Handles on things of `name`'s category in the last look, nearest the robot first."""
    assert ctx.snapshot is not None
    observation = ctx.snapshot.observation
    x, y, _ = ctx.base()
    handles: list[Handle] = []
    for detection in ctx.detector.detect(observation, name):
        image = ctx.snapshot.points[detection.view]
        luminance = observation.rgb[detection.view].astype(float).mean(axis=-1)
        mask = detection.mask
        dark = mask & (luminance < 0.6 * float(np.median(luminance[mask]))) & (image[..., 2] > 0.2)
        regions, count = ndimage.label(ndimage.binary_dilation(dark))
        part = image[mask & ~dark]
        part = part[np.isfinite(part).all(axis=1)]
        for region in range(1, count + 1):
            points = image[(regions == region) & dark]
            points = points[np.isfinite(points).all(axis=1)]
            if len(points) < 6:
                continue
            centre = points.mean(axis=0)
            extent = points.max(axis=0) - points.min(axis=0)
            vertical = bool(extent[2] > max(extent[0], extent[1]))
            around = part[(np.hypot(part[:, 0] - centre[0], part[:, 1] - centre[1]) < 0.35)
                          & (np.abs(part[:, 2] - centre[2]) < 0.3)]
            if len(around) < 20:
                continue
            flat = around[:, :2] - around[:, :2].mean(axis=0)
            direction = np.linalg.svd(flat, full_matrices=False)[2][0]
            normal = np.array([-direction[1], direction[0]])
            if normal @ (np.array([x, y]) - centre[:2]) < 0:
                normal = -normal
            # A handle is a compact bar standing out of the face (shadows and seams lie in it).
            protrusion = float(np.median(points[:, :2] @ normal) - np.median(around[:, :2] @ normal))
            if max(extent[0], extent[1]) > HANDLE_MAX_WIDTH or protrusion < HANDLE_MIN_PROTRUSION:
                continue
            handles.append(Handle(centre, vertical, normal, points, part))
    handles.sort(key=lambda handle: math.dist((x, y), handle.centre[:2]))
    return handles


def hinge_of(handle: Handle) -> tuple[np.ndarray, float]:
    """The hinge line's (x, y) and the radius for a door handle: the far edge of its face along the face."""
    along = np.array([handle.normal[1], -handle.normal[0]])
    face = handle.face_points
    offset = face[:, :2] - handle.centre[:2]
    on_face = np.abs(offset @ handle.normal) < 0.08
    span = offset[on_face] @ along
    low, high = (float(span.min()), float(span.max())) if len(span) else (0.0, 0.0)
    reach = high if abs(high) > abs(low) else low
    hinge = handle.centre[:2] + reach * along
    return hinge, abs(reach)


def hinge_side(handle: Handle, hinge: np.ndarray) -> float:
    """+1 when the hinge lies to the robot's left of the handle as the robot faces the face, -1 to its right."""
    facing = -handle.normal
    left = np.array([-facing[1], facing[0]])
    return 1.0 if (hinge - handle.centre[:2]) @ left > 0 else -1.0


def nearest_unfailed(ctx: SensorContext, handles: list[Handle]) -> Handle | None:
    """The nearest handle not remembered as one the fingers could not hold."""
    for handle in handles:
        if all(math.dist(handle.centre, failed) > 0.06 for failed in ctx.failed_handles):
            return handle
    return None


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
    sightings = ctx.find(name)
    for sighting in sightings:
        flat = sighting.points[:, :2]
        centre = flat.mean(axis=0)
        _, spread, axes = np.linalg.svd(flat - centre, full_matrices=False)
        length = float(np.ptp((flat - centre) @ axes[0]))
        if len(sightings) < 2 or spread[1] > 0.25 * spread[0] or length < 0.4:
            continue  # not a thin panel standing apart from its furniture
        rest = np.concatenate([other.points[:, :2] for other in sightings if other is not sighting]).mean(axis=0)
        normal = np.array([-axes[0][1], axes[0][0]])
        if normal @ (rest - centre) > 0:
            normal = -normal
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


def take_handle(ctx: SensorContext, name: str) -> tuple[Handle, np.ndarray]:
    """Stand square in front of the nearest handle of `name`, reach it and close the fingers on it.

    Returns:
        the handle as seen from the standing spot, and the grasp rotation.

    Raises:
        Stop: NO_PATH / UNREACHABLE / JOINT_NOT_MOVED when it cannot be found, reached or held.
    """
    ctx.look()
    handle = nearest_unfailed(ctx, find_handles(ctx, name))
    if handle is None:
        approach(ctx, name, HANDLE_BAND)
        ctx.look()
        handle = nearest_unfailed(ctx, find_handles(ctx, name))
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
    seen = [item for item in find_handles(ctx, name) if math.dist(item.centre, handle.centre) < 0.15]
    handle = seen[0] if seen else handle
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
    `stop_on_stall`, until the hand has stopped following for three control steps (what it holds has hit its end
    stop); whether it stalled."""
    x0, y0, _ = ctx.base()
    speed = math.copysign(0.2, distance)
    still = 0
    stalled = False
    previous, _ = arm.grip(ctx)
    first = previous
    while True:
        x, y, _ = ctx.base()
        if math.dist((x, y), (x0, y0)) >= abs(distance) - 0.01:
            break
        with ctx.lock:
            ctx.backend.set_base_velocity(speed, 0.0)
        ctx.tick()
        grip, _ = arm.grip(ctx)
        moving = np.linalg.norm(grip - first) > 0.02
        still = still + 1 if moving and np.linalg.norm(grip - previous) < 0.004 else 0
        previous = grip
        if stop_on_stall and still >= 3:
            stalled = True
            break
    with ctx.lock:
        ctx.backend.set_base_velocity(0.0, 0.0)
    ctx.tick()
    return stalled


def swing(ctx: SensorContext, handle: Handle, opening: bool) -> tuple[float, bool]:
    """Carry a door handle along its arc about the estimated hinge, a little further every control step, the base
    backing away or following to keep the handle within SWING_AHEAD ahead of it.

    Returns:
        the angle the hand really swept about the hinge (radians), and whether the door stopped the hand (it lagged
        its target by more than SWING_STALL: a closed door, or one at its stop) rather than the arm's reach.

    Raises:
        Stop: JOINT_NOT_MOVED when no hinge edge is seen.
    """
    hinge, radius = hinge_of(handle)
    if radius < 0.2:
        raise Stop(SkillStatus.JOINT_NOT_MOVED, "no hinge edge is seen on the door's face")
    start = handle.centre[:2] - hinge
    start /= np.linalg.norm(start)
    sign = 1.0 if opening else -1.0
    side = hinge_side(handle, hinge)
    yaw0 = math.atan2(-handle.normal[1], -handle.normal[0])
    ctx.phase("swing")
    angle, stalled, lagging = 0.0, False, 0
    target = handle.centre
    while angle < DOOR_SWING:
        angle = min(DOOR_SWING, angle + SWING_RATE)
        target2d = hinge + radius * (math.cos(angle) * start + sign * math.sin(angle) * handle.normal)
        target = np.array([target2d[0], target2d[1], handle.centre[2]])
        x, y, yaw = ctx.base()
        ahead = (target2d - np.array([x, y])) @ np.array([math.cos(yaw), math.sin(yaw)])
        # The hand turns with the door (the handle is held at a point, so any grasp orientation holds it).
        turn = -sign * angle * side
        rotations = [grasp_rotation(yaw0 + turn * share, pitch) for share in (1.0, 0.5, 0.0) for pitch in (0.0, 0.3)]
        try:
            arm_joints, torso, _ = arm.solve(ctx, target, rotations)
        except Stop:
            break
        with ctx.lock:
            ctx.backend.set_base_velocity(-0.2 if ahead < SWING_AHEAD[0] else 0.2 if ahead > SWING_AHEAD[1] else 0.0,
                                          0.0)
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
    now = grip[:2] - hinge
    swept = math.acos(float(np.clip(now @ start / max(np.linalg.norm(now), 1e-6), -1.0, 1.0)))
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
    handle, rotation = take_handle(ctx, goal.target)
    start, _ = arm.grip(ctx)
    if not handle.vertical:
        ctx.phase("pull" if opening else "push")
        stalled = drive_straight(ctx, -DRAWER_PULL if opening else DRAWER_PUSH, stop_on_stall=not opening)
        end, _ = arm.grip(ctx)
        let_go(ctx, rotation)
        travel = float((end - start)[:2] @ handle.normal)
        if opening and travel < DRAWER_OPEN:
            return SkillStatus.JOINT_NOT_MOVED, f"the drawer came {travel:.2f} m out"
        if not opening and not stalled:
            return SkillStatus.JOINT_NOT_MOVED, f"the push went {-travel:.2f} m without meeting the closed drawer"
        return SkillStatus.SUCCEEDED, ""
    swept, stalled = swing(ctx, handle, opening)
    _, rotation = arm.grip(ctx)
    let_go(ctx, rotation)
    if opening and swept < DOOR_OPEN:
        return SkillStatus.JOINT_NOT_MOVED, f"the door swung {swept:.2f} rad open"
    if not opening and not stalled and swept < DOOR_CLOSING_SWEEP:
        return SkillStatus.JOINT_NOT_MOVED, f"the door swung {swept:.2f} rad without meeting its closed stop"
    return SkillStatus.SUCCEEDED, ""
