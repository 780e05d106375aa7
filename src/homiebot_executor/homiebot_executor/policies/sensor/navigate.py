"""Sensor-only navigation: NoMaD-style to a place, PixNav-style to a detected object, on the online map.

The robot looks (four head views with depth), finds the goal with the detector and picks a standing spot on the
map: a free cell whose distance to the goal's nearest perceived point lies in the goal kind's band, preferring the
middle of the band, a short drive and, by a long piece of furniture (not a drawer), a place before its middle. It
drives there with the base controller, looking again every `look_every` control steps: the map grows, the goal's
points are refined, and the path is planned again when new obstacles block it. When the goal is not seen, it explores: it drives to the nearest reachable frontier of the map (a free cell next
to unknown space) and looks again, until the goal appears or the step budget runs out.

Success (the release's rule on what the robot perceives): the base ends within nav_success_distance of its spot,
the goal is seen within `arrive_distance` of the base, and the contact force stayed under the limit.
"""

from __future__ import annotations

import math

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.naming import names_drawer

from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.navigation import BaseController, GeodesicField, GridPlanner
from homiebot_executor.policies.sensor.context import SensorContext, Sighting
from homiebot_executor.skills import SkillGoal, SkillStatus

# Standing distance bands (metres from the goal's nearest point) and the preferred distance, per goal kind; an
# object far back on a counter is reached from as far as the arm's reach (0.88 m), as M3's Go to does.
BANDS: dict[str, tuple[float, float, float]] = {"object": (0.35, 0.85, 0.5), "place": (0.3, 0.7, 0.45)}
ARRIVE_DISTANCE = 1.0
# Frontiers closer than this to the robot are not worth driving to (it sees that far already).
MIN_FRONTIER_DISTANCE = 0.8
# Cost per metre between a standing spot and the centre of a goal at least LONG_GOAL long (metres): the release
# measures a Pick's and a Put's distance to the object or to the centre of the furniture (D1 beyond 2 m); from before
# the middle of a 3 m counter both its ends are within 2 m, from before one end the other is not. By shorter furniture
# (the 2.1 m sofa) any spot will do, and the nearest is kept. Not for a drawer, which the detector does not tell from
# its counter: it lies anywhere along it.
MIDDLE_WEIGHT, LONG_GOAL = 0.2, 2.5
# How far a frontier drive goes before the robot looks again and decides anew (metres of path).
FRONTIER_LEG = 1.5
# With the map complete, places farther than this from every earlier look are still visited (metres).
COVERAGE_RADIUS = 1.5


def planner(ctx: SensorContext) -> GridPlanner:
    """A planner on the online map (unknown space counts as free; each look corrects it). The disc the robot stands
    on is free whatever the map says (it stands there), so the planner never starts boxed into a sliver of the
    inflated map."""
    assert ctx.map is not None
    grid = ctx.map.grid()
    margin = ctx.config.robot_radius + ctx.config.clearance
    x, y, _ = ctx.base()
    rows, columns = grid.shape
    gx = grid.origin[0] + (np.arange(columns) + 0.5) * grid.resolution
    gy = grid.origin[1] + (np.arange(rows) + 0.5) * grid.resolution
    under = np.hypot(gx[None, :] - x, gy[:, None] - y) <= margin + grid.resolution
    return GridPlanner(OccupancyGrid(grid.origin, grid.resolution, grid.occupied & ~under), margin)


def cell_centres(grid_planner: GridPlanner) -> tuple[np.ndarray, np.ndarray]:
    """World x and y of every cell centre."""
    grid = grid_planner.grid
    rows, columns = grid.shape
    return np.meshgrid(grid.origin[0] + (np.arange(columns) + 0.5) * grid.resolution,
                       grid.origin[1] + (np.arange(rows) + 0.5) * grid.resolution)


def standing_spot(ctx: SensorContext, grid_planner: GridPlanner, field_: GeodesicField, points: np.ndarray,
                  band: tuple[float, float, float], middle: np.ndarray | None = None) -> tuple[int, int] | None:
    """The reachable, mapped-free cell whose distance to the nearest of `points` best fits `band`; with `middle`
    (the goal's centre), cells facing the middle of a long piece of furniture are preferred to its ends."""
    assert ctx.map is not None
    high = band[1]
    gx, gy = cell_centres(grid_planner)
    flat = points[:, :2]
    if len(flat) > 400:
        flat = flat[np.linspace(0, len(flat) - 1, 400).astype(int)]
    # Distance of every cell within the band's reach to the nearest goal point (cropped for speed).
    x0, y0 = flat.min(axis=0) - high - 0.1
    x1, y1 = flat.max(axis=0) + high + 0.1
    window = (gx >= x0) & (gx <= x1) & (gy >= y0) & (gy <= y1) & field_.reachable()
    known_free = ctx.map.states() == 1
    window &= known_free
    rows, columns = np.nonzero(window)
    if not len(rows):
        return None
    best = best_spot(np.stack([gx[rows, columns], gy[rows, columns]], 1), field_.distances[rows, columns], flat,
                     band, middle)
    if best is None:
        return None
    return int(columns[best]), int(rows[best])


def span(points: np.ndarray) -> float:
    """Horizontal length of a point cloud along its main direction (2nd to 98th percentile, metres)."""
    flat = points[:, :2] - points[:, :2].mean(axis=0)
    if len(flat) < 3:
        return 0.0
    direction = np.linalg.svd(flat[:: max(1, len(flat) // 2000)], full_matrices=False)[2][0]
    along = flat @ direction
    return float(np.percentile(along, 98) - np.percentile(along, 2))


def best_spot(cells: np.ndarray, path: np.ndarray, goal: np.ndarray, band: tuple[float, float, float],
              middle: np.ndarray | None = None) -> int | None:
    """Index of the best of the (N, 2) candidate `cells` (each `path` metres of drive away) for a goal whose (M, 2)
    points are `goal`: a cell whose distance to the goal's nearest point lies in `band`, nearest its preferred
    distance, then a short drive, then (with `middle`) near the goal's middle. None when no cell is in the band."""
    low, high, preferred = band
    distance = np.min(np.hypot(cells[:, None, 0] - goal[None, :, 0], cells[:, None, 1] - goal[None, :, 1]), axis=1)
    inside = (distance >= low) & (distance <= high)
    if not inside.any():
        return None
    cost = np.abs(distance - preferred) + 0.05 * path
    if middle is not None:
        cost = cost + MIDDLE_WEIGHT * np.hypot(cells[:, 0] - middle[0], cells[:, 1] - middle[1])
    return int(np.argmin(np.where(inside, cost, np.inf)))


def drive(ctx: SensorContext, spot: tuple[float, float], face: tuple[float, float] | None, goal_name: str = "",
          band: tuple[float, float, float] = BANDS["place"], max_path: float = math.inf) -> tuple[float, float]:
    """Drive to `spot` (then face `face`), looking every look_every steps and replanning when the path is blocked.
    With `goal_name`, the spot is chosen again (in `band`) when a look refines the goal. Stops after `max_path`
    metres. Returns the spot it drove to last."""
    x, y, _ = ctx.base()
    start = (x, y)
    grid_planner = planner(ctx)
    field_ = grid_planner.geodesic_from(x, y)
    if field_ is None:
        raise Stop(SkillStatus.NO_PATH, "the robot is boxed in on its map")
    cell = grid_planner.grid.cell_of(*spot)
    waypoints = grid_planner.path(field_, cell, (x, y)) if grid_planner.grid.inside(*cell) else []
    if not waypoints and goal_name:
        # Unreachable from exactly here (the map changed, or the start snapped elsewhere): choose again from here.
        refreshed = spot_for(ctx, grid_planner, goal_name, band)
        if refreshed is not None:
            spot, face = refreshed
            waypoints = grid_planner.path(field_, grid_planner.grid.cell_of(*spot), (x, y))
    if not waypoints:
        raise Stop(SkillStatus.NO_PATH, f"no path on the map to ({spot[0]:.2f}, {spot[1]:.2f})")
    controller = BaseController(waypoints, _yaw_to(waypoints[-1], face), ctx.config.controller)
    ctx.phase("drive")
    steps = 0
    while True:
        bx, by, yaw = ctx.base()
        if ctx.attempt is not None:
            ctx.attempt.distance = math.dist((bx, by), waypoints[-1])
        if math.dist((bx, by), start) > max_path:
            break
        command = controller.command(bx, by, yaw)
        if command is None:
            break
        with ctx.lock:
            ctx.backend.set_base_velocity(*command)
        ctx.tick()
        steps += 1
        if steps % ctx.config.look_every == 0:
            ctx.look()
            grid_planner = planner(ctx)
            refreshed = None
            if goal_name and not spot_still_good(ctx, grid_planner, goal_name, band, waypoints[-1]):
                refreshed = spot_for(ctx, grid_planner, goal_name, band)
                if refreshed is not None:
                    _stop_base(ctx)
                    return drive(ctx, refreshed[0], refreshed[1], goal_name, band, max_path)
            if not all(grid_planner.line_free(a, b) for a, b in zip([(bx, by), *waypoints[1:]], waypoints[1:])):
                _stop_base(ctx)
                # Blocked: plan again, to a spot chosen again on the new map when the goal is known.
                if goal_name:
                    refreshed = refreshed or spot_for(ctx, grid_planner, goal_name, band)
                    if refreshed is None:
                        raise Stop(SkillStatus.NO_PATH, f"no reachable standing spot by {goal_name} on the map")
                    spot, face = refreshed
                return drive(ctx, spot, face, goal_name, band, max_path - math.dist((bx, by), start))
    _stop_base(ctx)
    return spot


def spot_still_good(ctx: SensorContext, grid_planner: GridPlanner, name: str, band: tuple[float, float, float],
                    spot: tuple[float, float]) -> bool:
    """Whether `spot` is still free on the map and within `band` of the nearest sighting of `name`."""
    sightings = ctx.find(name)
    if not sightings or not grid_planner.grid.is_free(*spot):
        return False
    points = sightings[0].points
    distance = float(np.min(np.hypot(points[:, 0] - spot[0], points[:, 1] - spot[1])))
    return band[0] - 0.05 <= distance <= band[1] + 0.05


def _stop_base(ctx: SensorContext) -> None:
    with ctx.lock:
        ctx.backend.set_base_velocity(0.0, 0.0)
    ctx.tick()


def _yaw_to(origin: tuple[float, float], face: tuple[float, float] | None) -> float | None:
    return None if face is None else math.atan2(face[1] - origin[1], face[0] - origin[0])


def spot_for(ctx: SensorContext, grid_planner: GridPlanner, name: str, band: tuple[float, float, float]
             ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """A standing spot (in `band`) and the point to face for the nearest sighting of `name` that has one (of the
    three nearest), or None."""
    sightings = ctx.find(name)
    if not sightings:
        return None
    x, y, _ = ctx.base()
    field_ = grid_planner.geodesic_from(x, y)
    if field_ is None:
        return None
    for sighting in sightings[:3]:
        centre = sighting.centre
        middle = centre if span(sighting.points) >= LONG_GOAL and not names_drawer(name) else None
        cell = standing_spot(ctx, grid_planner, field_, sighting.points, band, middle)
        if cell is not None:
            return grid_planner.grid.center_of(*cell), (float(centre[0]), float(centre[1]))
    return None


def explore(ctx: SensorContext) -> bool:
    """Drive one leg towards the nearest reachable frontier or, with none left, towards the reachable free place
    farthest from everywhere the robot has looked from (small things are seen only from nearby); False when
    everything reachable has been looked at from within COVERAGE_RADIUS."""
    assert ctx.map is not None
    ctx.phase("explore")
    grid_planner = planner(ctx)
    x, y, _ = ctx.base()
    field_ = grid_planner.geodesic_from(x, y)
    if field_ is None:
        raise Stop(SkillStatus.NO_PATH, "the robot is boxed in on its map")
    frontier = ctx.map.frontiers() & field_.reachable()
    distances = np.where(frontier, field_.distances, np.inf)
    distances[distances < MIN_FRONTIER_DISTANCE] = np.inf
    if not np.isfinite(distances).any():
        gx, gy = cell_centres(grid_planner)
        looked = np.array(ctx.looked_from)
        unseen = np.full(gx.shape, np.inf)
        for px, py in looked[np.linspace(0, len(looked) - 1, min(len(looked), 60)).astype(int)]:
            unseen = np.minimum(unseen, np.hypot(gx - px, gy - py))
        candidates = field_.reachable() & (ctx.map.states() == 1) & (unseen > COVERAGE_RADIUS)
        if not candidates.any():
            return False
        distances = np.where(candidates, field_.distances, np.inf)
    row, column = np.unravel_index(int(np.argmin(distances)), distances.shape)
    target = grid_planner.grid.center_of(int(column), int(row))
    drive(ctx, target, None, max_path=FRONTIER_LEG)
    ctx.look()
    return True


def approach(ctx: SensorContext, name: str, band: tuple[float, float, float]) -> Sighting:
    """Find `name` (exploring when it is not in sight) and drive to a standing spot in `band` by it; the final
    sighting.

    Raises:
        Stop: NO_PATH when the map is explored without seeing it or no spot is reachable; TIMEOUT by the budget.
    """
    ctx.phase("look")
    ctx.look()
    while True:
        spot = spot_for(ctx, planner(ctx), name, band)
        if spot is not None:
            break
        if not explore(ctx):
            seen = "seen, but no free standing spot by it" if ctx.find(name) else "not seen anywhere"
            raise Stop(SkillStatus.NO_PATH, f"{name}: {seen} on the explored map")
    reached = drive(ctx, spot[0], spot[1], name, band)
    ctx.look()
    sightings = ctx.find(name)
    if not sightings:
        raise Stop(SkillStatus.NO_PATH, f"{name} is out of sight at the standing spot")
    bx, by, yaw = ctx.base()
    if ctx.attempt is not None:
        ctx.attempt.distance = math.dist((bx, by), reached)
    if math.dist((bx, by), reached) >= ctx.config.nav_success_distance:
        raise Stop(SkillStatus.TIMEOUT, f"ended {math.dist((bx, by), reached):.2f} m from the standing spot")
    return sightings[0]


def navigate(ctx: SensorContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Go to `goal.target` (see the module docstring)."""
    sighting = approach(ctx, goal.target, BANDS[goal.target_kind])
    attempt = ctx.attempt
    if attempt is not None:
        contact = next((item for item in attempt.watcher.incidents if item.kind == "contact"), None)
        if contact is not None:
            return SkillStatus.COLLISION, contact.detail
    if sighting.distance > ARRIVE_DISTANCE:
        return SkillStatus.TIMEOUT, f"{goal.target} is {sighting.distance:.2f} m away at the standing spot"
    return SkillStatus.SUCCEEDED, ""


def face(ctx: SensorContext, point: np.ndarray) -> None:
    """Turn the base in place towards a point."""
    x, y, _ = ctx.base()
    controller = BaseController([(x, y)], math.atan2(point[1] - y, point[0] - x), ctx.config.controller)
    while (command := controller.command(*ctx.base())) is not None:
        with ctx.lock:
            ctx.backend.set_base_velocity(*command)
        ctx.tick()
    _stop_base(ctx)
