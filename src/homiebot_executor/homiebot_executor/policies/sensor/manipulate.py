"""Sensor-only Pick and Put (the RT-1-X server's skills), from the target's and the receptacle's point clouds.

Pick: find the object (driving within reach when it is farther), take the grasp point from its points (the centre
across, 3 cm under its top), approach from 10 cm along a top-down or tilted grasp whose arm stays clear of every
other perceived point, close the fingers (they hold what lies between them), lift and fold the arm. The object's
height is measured from its points and remembered for the Put. Success: the hand holds something afterwards.

Put: find the receptacle, collect its upward-facing surface points (table tops, shelves, the floor of an open
drawer) within reach with room above them for the held object, keep the height that covers the largest area (a
sofa's seat, not its armrests; measured as area, not as a count of points, which favours what is near the camera),
choose the point farthest inside that area's seen edges (up to 0.2 m), carry the object over it, release, let it
settle and look: success when the hand is empty and an object of the held category is seen resting within 0.15 m of
the chosen point, or, when the detector does not name it, the surface there holds something it did not hold before.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from homiebot_executor.perception.points import upward_normals
from homiebot_executor.policies import arm_motion as arm
from homiebot_executor.policies.arm_ik import grasp_rotation
from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.sensor.context import SensorContext, Sighting
from homiebot_executor.policies.sensor.navigate import approach, drive, face, planner, spot_for, standing_spot
from homiebot_executor.skills import SkillGoal, SkillStatus

# Standing band for the arm skills: from 0.3 m to 0.75 m from the thing's nearest point (preferred 0.5 m).
ARM_BAND = (0.3, 0.75, 0.5)
# The near end of that band, for a second try when the arm did not reach from the first spot.
CLOSE_BAND = (0.25, 0.45, 0.32)
# The held object is assumed this tall when its Pick did not measure it (metres).
DEFAULT_HELD_HEIGHT = 0.15
# Surfaces higher than this above the gripper's reach are not tried (metres).
SURFACE_HEIGHTS = (0.05, 1.25)
PLACED_WITHIN = 0.15
# Points of the arm-check cloud (2 cm voxels) that, added on a place spot by a Put, tell something was put there.
OCCUPIED_POINTS = 4
# Surfaces are measured on a grid of cells of this size (metres): by area, so that a near surface, which the camera
# samples densely, does not outweigh a larger one farther away.
SPOT_CELL = 0.05
# A place spot this far inside the surface's seen edges is inside enough (metres); nearer the edge counts less.
INSIDE_ENOUGH = 0.2


def grasp_rotations(yaw: float, covered: bool = False) -> list[np.ndarray]:
    """Grasps facing `yaw`: top-down first, then ever more tilted, then level; level first when something covers
    the target from above (a shelf)."""
    pitches = (0.0, 0.3, 0.6, 0.9) if covered else (math.pi / 2, 1.2, 0.9, 0.6, 0.3, 0.0)
    return [grasp_rotation(yaw, pitch) for pitch in pitches]


def covered(ctx: SensorContext, point: np.ndarray) -> bool:
    """Whether perceived points lie over `point` (within 0.12 m across, 0.08-0.45 m above): a shelf or a roof."""
    cloud = ctx.cloud_points
    over = (np.hypot(cloud[:, 0] - point[0], cloud[:, 1] - point[1]) < 0.12) & \
        (cloud[:, 2] > point[2] + 0.08) & (cloud[:, 2] < point[2] + 0.45)
    return bool(over.sum() >= 5)


def within_reach(ctx: SensorContext, name: str) -> Sighting:
    """The nearest sighting of `name` once the base stands within reach of it (driving there when needed)."""
    ctx.look()
    sightings = ctx.find(name)
    x, y, _ = ctx.base()
    if sightings and ARM_BAND[0] <= sightings[0].distance and \
            math.dist((x, y), sightings[0].centre[:2]) <= ctx.config.reach - 0.08:
        sighting = sightings[0]
    else:
        sighting = approach(ctx, name, ARM_BAND)
    face(ctx, sighting.centre)
    ctx.look()
    sightings = ctx.find(name)
    if not sightings:
        raise Stop(SkillStatus.UNREACHABLE, f"{name} went out of sight")
    return sightings[0]


def reach_object(ctx: SensorContext, sighting: Sighting
                 ) -> tuple[Sighting, np.ndarray, np.ndarray, np.ndarray]:
    """Bring the hand to the object's grasp point (the centre across, 3 cm under its top) from 10 cm before it,
    along a grasp whose arm clears every other perceived point.

    Returns:
        the sighting, the grasp point, the grasp rotation and the point before it.

    Raises:
        Stop: UNREACHABLE when no grasp reaches it from here.
    """
    centre = sighting.centre
    grasp = np.array([centre[0], centre[1], max(float(centre[2]), sighting.top - 0.03)])
    x, y, _ = ctx.base()
    yaw = math.atan2(grasp[1] - y, grasp[0] - x)
    ctx.ignore(sighting.points)
    ctx.phase("approach")
    rotation, before = arm.approach(ctx, grasp, grasp_rotations(yaw, covered(ctx, grasp)), check_way_in=True)
    ctx.phase("grasp")
    arm.line(ctx, before, grasp, rotation, 2)
    return sighting, grasp, rotation, before


def pick(ctx: SensorContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Grasp `goal.target` (see the module docstring)."""
    if ctx.held():
        if ctx.held_label != goal.target:
            return SkillStatus.GRASP_FAILED, "the hand is already full"
        # The last attempt grasped it but ran out of steps lifting it: finish the lift.
        ctx.phase("lift")
        arm.route_arm(ctx, *arm.VIA_POSES[0])
        return SkillStatus.SUCCEEDED, ""
    sighting = within_reach(ctx, goal.target)
    try:
        sighting, grasp, rotation, before = reach_object(ctx, sighting)
    except Stop as stop:
        if stop.status is not SkillStatus.UNREACHABLE:
            raise
        # Out of the arm's reach from here: step closer (the near end of the standing band) and try once more.
        closer = spot_for(ctx, planner(ctx), goal.target, CLOSE_BAND)
        if closer is None:
            raise
        drive(ctx, *closer)
        face(ctx, sighting.centre)
        ctx.look()
        sightings = ctx.find(goal.target)
        sighting, grasp, rotation, before = reach_object(ctx, sightings[0] if sightings else sighting)
    points, top = sighting.points, sighting.top
    with ctx.lock:
        grasped = ctx.backend.close_gripper(ctx.config.grasp_distance)
    ctx.tick(2)
    if grasped is None:
        arm.retreat(ctx, rotation)
        ctx.ignore(None)
        return SkillStatus.GRASP_FAILED, f"the fingers closed on nothing at ({grasp[0]:.2f}, {grasp[1]:.2f}, " \
                                         f"{grasp[2]:.2f})"
    if ctx.attempt is not None:
        ctx.attempt.watcher.held = grasped
    ctx.memory.pop(sighting.track, None)  # it is in the hand now, no longer where it was seen
    ctx.held_height = float(top - np.percentile(points[:, 2], 2))
    ctx.held_label = goal.target
    ctx.phase("lift")
    arm.retreat(ctx, rotation)
    ctx.ignore(None)
    if not ctx.held():
        return SkillStatus.OBJECT_DROPPED, "the object left the hand while lifting"
    return SkillStatus.SUCCEEDED, ""


def surface_points(ctx: SensorContext, name: str) -> np.ndarray:
    """Upward-facing points of the receptacle `name` in the last look (all views), at heights the hand can put
    things on."""
    assert ctx.snapshot is not None
    observation = ctx.snapshot.observation
    chunks = []
    for detection in ctx.detector.detect(observation, name):
        image = ctx.snapshot.points[detection.view]
        flat = detection.mask & (upward_normals(image) > 0.95)
        chunks.append(image[flat])
    if not chunks:
        return np.zeros((0, 3))
    points: np.ndarray = np.concatenate(chunks)
    points = points[np.isfinite(points).all(axis=1)]
    kept: np.ndarray = points[(points[:, 2] > SURFACE_HEIGHTS[0]) & (points[:, 2] < SURFACE_HEIGHTS[1])]
    return kept


def cell_area(points: np.ndarray) -> int:
    """How many SPOT_CELL squares the points' x, y cover."""
    return len(np.unique(np.floor(points[:, :2] / SPOT_CELL).astype(int), axis=0))


def edge_distances(level: np.ndarray, points: np.ndarray) -> np.ndarray:
    """How far (metres) each of `points` lies inside the area the level's points cover, from its nearest seen edge
    (an occluded patch, where another object stands, is an edge too)."""
    origin = level[:, :2].min(axis=0) - SPOT_CELL
    cells = np.floor((level[:, :2] - origin) / SPOT_CELL).astype(int)
    covered = np.zeros(tuple(cells.max(axis=0) + 2), bool)
    covered[cells[:, 0], cells[:, 1]] = True
    inside = ndimage.distance_transform_edt(covered) * SPOT_CELL
    at = np.clip(np.floor((points[:, :2] - origin) / SPOT_CELL).astype(int), 0, np.array(covered.shape) - 1)
    distances: np.ndarray = inside[at[:, 0], at[:, 1]]
    return distances


def main_level(points: np.ndarray) -> np.ndarray:
    """The points at the height (within 2 cm) that covers the largest area: a sofa's seat rather than its armrests,
    a drawer's floor rather than the tops of its walls."""
    if not len(points):
        return points
    steps = np.round(points[:, 2] / 0.02)
    best = max(np.unique(steps), key=lambda step: cell_area(points[np.abs(steps - step) <= 1]))
    level: np.ndarray = points[np.abs(steps - best) <= 1]
    return level


def in_reach(ctx: SensorContext, points: np.ndarray) -> np.ndarray:
    """The points the hand can put something on from where the base stands."""
    x, y, _ = ctx.base()
    planar = np.hypot(points[:, 0] - x, points[:, 1] - y)
    kept: np.ndarray = points[(planar > 0.35) & (planar < ctx.config.reach - 0.05)]
    return kept


def step_inside_reach(ctx: SensorContext, name: str) -> None:
    """When the hand reaches only the edge of the receptacle's surface from here (the end of a sofa), stand where it
    reaches well inside it, and look again."""
    level = main_level(surface_points(ctx, name))
    if not len(level):
        return
    deep = level[edge_distances(level, level) >= INSIDE_ENOUGH]
    if not len(deep) or len(in_reach(ctx, deep)):
        return
    grid_planner = planner(ctx)
    x, y, _ = ctx.base()
    field_ = grid_planner.geodesic_from(x, y)
    cell = None if field_ is None else standing_spot(ctx, grid_planner, field_, deep, ARM_BAND)
    if cell is None:
        return
    centre = deep.mean(axis=0)
    ctx.phase("step_inside_reach")
    drive(ctx, grid_planner.grid.center_of(*cell), (float(centre[0]), float(centre[1])))
    face(ctx, centre)
    ctx.look()


def place_spot(ctx: SensorContext, name: str, held_height: float) -> np.ndarray:
    """A point on the receptacle's surface within reach with room above it (see the module docstring).

    Raises:
        Stop: PLACE_FAILED when no surface point qualifies.
    """
    level = main_level(surface_points(ctx, name))
    candidates = in_reach(ctx, level)
    if len(candidates) > 600:
        candidates = candidates[np.linspace(0, len(candidates) - 1, 600).astype(int)]
    if not len(candidates):
        raise Stop(SkillStatus.PLACE_FAILED, f"no free surface of {name} is seen within reach")
    cloud_points = ctx.cloud_points
    cloud = cKDTree(cloud_points) if len(cloud_points) else None
    room = np.ones(len(candidates), bool)
    for index, point in enumerate(candidates):
        # Room above: nothing within 6 cm across from 3 cm over the surface to the object's height + 6 cm.
        if cloud is not None:
            near = cloud.query_ball_point(point, held_height + 0.08)
            above = cloud_points[near] if near else np.zeros((0, 3))
            room[index] = not np.any((above[:, 2] > point[2] + 0.03) & (above[:, 2] < point[2] + held_height + 0.06)
                                     & (np.hypot(above[:, 0] - point[0], above[:, 1] - point[1]) < 0.06))
    if not room.any():
        raise Stop(SkillStatus.PLACE_FAILED, f"no surface of {name} within reach has room for the object")
    # Well inside the surface (as far from its seen edges as it gets, up to INSIDE_ENOUGH), then a comfortable reach.
    inside = np.where(room, np.minimum(edge_distances(level, candidates), INSIDE_ENOUGH), -1.0)
    best = np.nonzero(inside >= inside.max() - 1e-6)[0]
    x, y, _ = ctx.base()
    reach = np.hypot(candidates[best, 0] - x, candidates[best, 1] - y)
    spot: np.ndarray = candidates[best[int(np.argmin(np.abs(reach - 0.6)))]]
    return spot


def put(ctx: SensorContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Place the held object on or in `goal.place` (see the module docstring)."""
    if not ctx.held():
        return SkillStatus.PLACE_FAILED, "the hand is empty"
    held_height = ctx.held_height or DEFAULT_HELD_HEIGHT
    receptacle = within_reach(ctx, goal.place)
    step_inside_reach(ctx, goal.place)
    spot = place_spot(ctx, goal.place, held_height)
    standing_before = standing_points(ctx.cloud_points, spot, held_height)
    x, y, _ = ctx.base()
    yaw = math.atan2(spot[1] - y, spot[0] - x)
    release_point = spot + np.array([0.0, 0.0, held_height - 0.03 + 0.04])
    ctx.ignore(receptacle.points[np.abs(receptacle.points[:, 2] - spot[2]) < 0.03])
    ctx.phase("carry")
    rotation, before = arm.approach(ctx, release_point, grasp_rotations(yaw, covered(ctx, release_point)))
    arm.line(ctx, before, release_point, rotation, 2)
    ctx.phase("release")
    ctx.allow_release()
    with ctx.lock:
        ctx.backend.open_gripper()
    ctx.tick(10)
    ctx.ignore(None)
    # Up and away, then raised at the side, out of the front view (tucking now could sweep the arm through the
    # object just placed).
    arm.retreat(ctx, rotation)
    arm.route_arm(ctx, *arm.VIA_POSES[1])
    label = ctx.held_label or goal.target
    ctx.held_height, ctx.held_label = None, ""
    if ctx.held():
        return SkillStatus.PLACE_FAILED, "the object is still in the hand"
    ctx.look()
    resting = [sighting for sighting in ctx.find(label)
               if np.min(np.linalg.norm(sighting.points - (spot + np.array([0, 0, held_height / 2])), axis=1))
               < PLACED_WITHIN + held_height / 2]
    if not resting and standing_points(ctx.cloud_points, spot, held_height) - standing_before < OCCUPIED_POINTS:
        return SkillStatus.PLACE_FAILED, f"no {label} is seen resting where it was released"
    return SkillStatus.SUCCEEDED, ""


def standing_points(cloud: np.ndarray, spot: np.ndarray, held_height: float) -> int:
    """How many of the (N, 3) `cloud` points stand on the surface within PLACED_WITHIN of `spot`, up to the held
    object's height (counted before and after a Put: what was added is what the hand let go of)."""
    standing = (np.hypot(cloud[:, 0] - spot[0], cloud[:, 1] - spot[1]) < PLACED_WITHIN) & \
        (cloud[:, 2] > spot[2] + min(0.02, held_height / 2)) & (cloud[:, 2] < spot[2] + held_height + 0.03)
    return int(standing.sum())

