"""Navigation for the M3 skills: standing-spot search on the occupancy grid, driving the path, repositioning.

A standing spot is the reachable cell of least cost: for an object, the cell nearest it, in front of its receptacle
when that has a front; for furniture, nearest its front face, or its footprint for tables and chairs; for a door or
drawer, in front of its handle; for a room, nearest its centre.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import FurnitureLayout, SceneLayout

from homiebot_executor.policies.attempt import Stop
from homiebot_executor.policies.m3.context import Area, SkillContext
from homiebot_executor.policies.navigation import BaseController, GeodesicField, GridPlanner, wrap_angle
from homiebot_executor.skills import SkillGoal, SkillStatus

# Furniture models approached from their front face (doors, drawers, seats, open shelves face one way).
FRONT_MODELS: tuple[str, ...] = ("counter", "deep_counter", "fridge", "cabinet", "shelf", "sofa", "tv_stand", "desk",
                                 "tv")


def planner(ctx: SkillContext, clearance: bool = True) -> GridPlanner:
    """A planner on the current occupancy grid, inflated by the robot's radius and (unless `clearance` is False)
    the clearance."""
    with ctx.lock:
        grid = ctx.backend.occupancy_grid(ctx.config.grid_resolution)
    return GridPlanner(grid, ctx.config.robot_radius + (ctx.config.clearance if clearance else 0.0))


# The grid without the clearance margin is used when its best standing cell costs this much less than the best
# with it (metres of distance): the base fits gaps a few centimetres too narrow with the margin, such as between an
# open fridge door and a wall, and may stand in one already, where the margin leaves it a few cells to reach.
CLEARANCE_TRADE = 0.5


def standing_cell(ctx: SkillContext, cost_of: Callable[[GridPlanner], np.ndarray]
                  ) -> tuple[GridPlanner, GeodesicField, tuple[int, int] | None] | None:
    """The reachable cell of least cost (`cost_of` a planner's grid) from the base, with its planner and field: on the
    grid inflated with the clearance margin, or without it when that is better by CLEARANCE_TRADE or the only one
    with a cell. The cell is None when neither grid has one; None when the base is boxed in on both."""
    x, y, _ = ctx.base()
    found: tuple[GridPlanner, GeodesicField, tuple[int, int] | None] | None = None
    found_cost = math.inf
    for clearance in (True, False):
        grid_planner = planner(ctx, clearance)
        field_ = grid_planner.geodesic_from(x, y)
        if field_ is None:
            continue
        cost = cost_of(grid_planner)
        cell = best_cell(field_, cost)
        cell_cost = math.inf if cell is None else float(cost[cell[1], cell[0]])
        if found is None or found[2] is None or cell_cost < found_cost - CLEARANCE_TRADE:
            found, found_cost = (grid_planner, field_, cell), cell_cost
        if found_cost <= CLEARANCE_TRADE:
            break
    return found


def cell_centres(grid: OccupancyGrid) -> tuple[np.ndarray, np.ndarray]:
    """World x and y of every cell centre."""
    rows, columns = grid.shape
    return np.meshgrid(grid.origin[0] + (np.arange(columns) + 0.5) * grid.resolution,
                       grid.origin[1] + (np.arange(rows) + 0.5) * grid.resolution)


def best_cell(field_: GeodesicField, cost: np.ndarray) -> tuple[int, int] | None:
    """Reachable cell of least cost (ties: the shorter drive)."""
    total = np.where(field_.reachable(), cost + 0.05 * field_.distances, np.inf)
    if not np.isfinite(total).any():
        return None
    row, column = np.unravel_index(int(np.argmin(total)), total.shape)
    return int(column), int(row)


def to_local(piece: FurnitureLayout, gx: np.ndarray, gy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World points in the piece's local frame (x along its length, -y out of its front)."""
    c, s = math.cos(piece.yaw), math.sin(piece.yaw)
    return c * (gx - piece.x) + s * (gy - piece.y), -s * (gx - piece.x) + c * (gy - piece.y)


def front_penalty(piece: FurnitureLayout | None, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Extra cost of standing beside or behind furniture that is used from its front."""
    if piece is None or piece.model not in FRONT_MODELS:
        return np.zeros_like(gx)
    u, v = to_local(piece, gx, gy)
    behind = np.maximum(v + piece.size[1] / 2, 0.0)
    beside = np.maximum(np.abs(u) - piece.size[0] / 2 + 0.1, 0.0)
    penalty: np.ndarray = 3.0 * behind + 2.0 * beside
    return penalty


# Reaching into a carcass (fridge, cabinet shelves), the base stands in line with the object: each metre of sideways
# offset along the piece's front beyond IN_LINE_SLACK costs as much as IN_LINE_WEIGHT metres of distance (from the
# side, the arm's way in meets the carcass's side wall and the open door).
IN_LINE_SLACK = 0.1
IN_LINE_WEIGHT = 2.0


def in_line_penalty(piece: FurnitureLayout | None, point: tuple[float, float], gx: np.ndarray,
                    gy: np.ndarray) -> np.ndarray:
    """Extra cost of standing sideways of `point` along the front of `piece` (none without a piece)."""
    if piece is None:
        return np.zeros_like(gx)
    u, _ = to_local(piece, gx, gy)
    u_point, _ = to_local(piece, np.array([point[0]]), np.array([point[1]]))
    penalty: np.ndarray = IN_LINE_WEIGHT * np.maximum(np.abs(u - u_point[0]) - IN_LINE_SLACK, 0.0)
    return penalty


# A standing spot sees what the arm reaches for when the straight line between them crosses no wall: an occupied cell
# outside every piece of furniture (its footprint grown by SIGHT_MARGIN metres, and for a piece with doors or
# drawers the area in front of it as deep as the piece is long, where they swing or slide out) and farther than
# SIGHT_END_SLACK from the point. Furniture between them is the front penalty's business.
SIGHT_MARGIN = 0.05
SIGHT_END_SLACK = 0.15


def walls(grid: OccupancyGrid, layout: SceneLayout) -> np.ndarray:
    """The occupied cells of the (uninflated) `grid` that belong to no piece of furniture (see SIGHT_MARGIN)."""
    gx, gy = cell_centres(grid)
    mask = grid.occupied.copy()
    for piece in layout.furniture:
        u, v = to_local(piece, gx, gy)
        front = piece.size[0] if piece.parts else 0.0
        mask &= ~((np.abs(u) <= piece.size[0] / 2 + SIGHT_MARGIN) & (v <= piece.size[1] / 2 + SIGHT_MARGIN)
                  & (v >= -piece.size[1] / 2 - front - SIGHT_MARGIN))
    return mask


def in_sight(grid: OccupancyGrid, blockers: np.ndarray, point: tuple[float, float], gx: np.ndarray,
             gy: np.ndarray) -> np.ndarray:
    """Per cell (world centres `gx`, `gy`), whether the line to `point` crosses no `blockers` cell of `grid` (see
    SIGHT_END_SLACK)."""
    length = np.hypot(gx - point[0], gy - point[1])
    samples = int(math.ceil(float(length.max(initial=0.0)) / (grid.resolution / 2))) + 1
    fractions = np.linspace(0.0, 1.0, samples).reshape((samples,) + (1,) * gx.ndim)
    sx = gx[None] + fractions * (point[0] - gx[None])
    sy = gy[None] + fractions * (point[1] - gy[None])
    columns = np.floor((sx - grid.origin[0]) / grid.resolution).astype(int).clip(0, grid.shape[1] - 1)
    rows = np.floor((sy - grid.origin[1]) / grid.resolution).astype(int).clip(0, grid.shape[0] - 1)
    blocked = blockers[rows, columns] & (np.hypot(sx - point[0], sy - point[1]) > SIGHT_END_SLACK)
    sighted: np.ndarray = ~blocked.any(axis=0)
    return sighted


def out_of_sight(ctx: SkillContext, point: tuple[float, float], within: float) -> Area:
    """The area, within `within` metres of `point`, from which a wall hides `point` (in_sight; the cells farther
    away count as not hidden: a caller limits the distance itself)."""
    with ctx.lock:
        grid = ctx.backend.occupancy_grid(ctx.config.grid_resolution)
    blockers = walls(grid, ctx.layout())

    def hidden(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        near = np.hypot(gx - point[0], gy - point[1]) <= within  # short lines from few cells
        found = np.zeros(gx.shape, dtype=bool)
        found[near] = ~in_sight(grid, blockers, point, gx[near], gy[near])
        return found

    return hidden


def spot_cost(ctx: SkillContext, target: str,
              grid_planner: GridPlanner) -> tuple[np.ndarray, tuple[float, float] | None]:
    """Per-cell cost of standing there for `target`, and the point to face."""
    layout = ctx.layout()
    gx, gy = cell_centres(grid_planner.grid)
    owner = layout.owner_of(target)
    if owner is not None:
        handle = ctx.container(target).handle
        point = (handle[0], handle[1])
        return np.hypot(gx - point[0], gy - point[1]) + front_penalty(owner, gx, gy), point
    piece = layout.piece(target)
    if piece is not None:
        if piece.model in FRONT_MODELS:
            c, s = math.cos(piece.yaw), math.sin(piece.yaw)
            point = (piece.x + s * piece.size[1] / 2, piece.y - c * piece.size[1] / 2)
            return np.hypot(gx - point[0], gy - point[1]) + front_penalty(piece, gx, gy), point
        u, v = to_local(piece, gx, gy)
        footprint = np.hypot(np.maximum(np.abs(u) - piece.size[0] / 2, 0.0),
                             np.maximum(np.abs(v) - piece.size[1] / 2, 0.0))
        return footprint, (piece.x, piece.y)
    state = ctx.instance(target)
    point = (state.pose.position[0], state.pose.position[1])
    distance = np.hypot(gx - point[0], gy - point[1])
    if state.kind == "room":
        return distance, None
    return distance + front_penalty(ctx.furniture_of(target), gx, gy), point


def navigate(ctx: SkillContext, goal: SkillGoal) -> tuple[SkillStatus, str]:
    """Plan, pick a standing spot, drive there and face the target. Success (release rule): the base ends within
    nav_success_distance of the spot and the contact force stayed under the limit."""
    ctx.phase("plan")
    faces: list[tuple[float, float] | None] = [None]

    def cost_of(grid_planner: GridPlanner) -> np.ndarray:
        cost, faces[0] = spot_cost(ctx, goal.target, grid_planner)
        return cost

    found = standing_cell(ctx, cost_of)
    if found is None:
        return SkillStatus.NO_PATH, "the robot is boxed in: no free cell around the base"
    grid_planner, field_, spot = found
    if spot is None:
        return SkillStatus.NO_PATH, f"no reachable standing spot near {goal.target}"
    face = faces[0]
    spot_xy = grid_planner.grid.center_of(*spot)
    drive(ctx, grid_planner, field_, spot, face)
    bx, by, _ = ctx.base()
    distance = math.dist((bx, by), spot_xy)
    attempt = ctx.attempt
    if attempt is not None:
        attempt.distance = distance
        contact = next((item for item in attempt.watcher.incidents if item.kind == "contact"), None)
        if contact is not None:
            return SkillStatus.COLLISION, contact.detail
    if distance >= ctx.config.nav_success_distance:
        return SkillStatus.TIMEOUT, f"ended {distance:.2f} m from the standing spot"
    return SkillStatus.SUCCEEDED, ""


def drive(ctx: SkillContext, grid_planner: GridPlanner, field_: GeodesicField, spot: tuple[int, int],
          face: tuple[float, float] | None) -> None:
    """Follow the path to `spot`, then turn towards `face`."""
    x, y, _ = ctx.base()
    waypoints = grid_planner.path(field_, spot, (x, y))
    if not waypoints:
        raise Stop(SkillStatus.NO_PATH, "no path to the standing spot")
    goal_xy = waypoints[-1]
    final_yaw = None if face is None else math.atan2(face[1] - goal_xy[1], face[0] - goal_xy[0])
    controller = BaseController(waypoints, final_yaw, ctx.config.controller)
    ctx.phase("drive")
    while True:
        bx, by, yaw = ctx.base()
        if ctx.attempt is not None:
            ctx.attempt.distance = math.dist((bx, by), goal_xy)
        command = controller.command(bx, by, yaw)
        if command is None:
            break
        with ctx.lock:
            ctx.backend.set_base_velocity(*command)
        ctx.tick()
    with ctx.lock:
        ctx.backend.set_base_velocity(0.0, 0.0)
    ctx.tick()


def go_near(ctx: SkillContext, point: tuple[float, float], min_distance: float, max_distance: float,
            piece: FurnitureLayout | None = None, forbidden: Area | None = None,
            face: tuple[float, float] | None = None, preferred: float | None = None, in_line: bool = False,
            sight: bool = False) -> None:
    """Reposition the base (inside the attempt) to stand `min_distance`..`max_distance` from `point`.

    Ends facing `face` (default: `point`), preferably `preferred` metres from `point`. Stays put when already
    there; prefers the front of `piece` (and, `in_line`, a spot straight in front of `point`: in_line_penalty);
    never ends inside `forbidden`; with `sight`, only where `point` is in sight (in_sight: not through a wall).
    """
    face = face or point
    x, y, yaw = ctx.base()
    here = math.dist((x, y), point)
    facing = abs(wrap_angle(math.atan2(face[1] - y, face[0] - x) - yaw)) < 0.2

    def placement_penalty(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        penalty = front_penalty(piece, gx, gy)
        return penalty + in_line_penalty(piece, point, gx, gy) if in_line else penalty

    penalty = float(placement_penalty(np.array([x]), np.array([y]))[0])
    if sight:
        hidden, other = out_of_sight(ctx, point, max_distance), forbidden
        forbidden = hidden if other is None else (lambda gx, gy: hidden(gx, gy) | other(gx, gy))
    clear = forbidden is None or not bool(forbidden(np.array([x]), np.array([y]))[0])
    if min_distance <= here <= max_distance and facing and clear and penalty < 0.05:
        return
    ctx.phase("position_base")
    if preferred is None:
        preferred = min_distance + 0.4 * (max_distance - min_distance)
    best_distance = preferred

    def cost_of(grid_planner: GridPlanner) -> np.ndarray:
        gx, gy = cell_centres(grid_planner.grid)
        distance = np.hypot(gx - point[0], gy - point[1])
        allowed = (distance >= min_distance) & (distance <= max_distance)
        if forbidden is not None:
            allowed &= ~forbidden(gx, gy)
        cost: np.ndarray = np.where(allowed, np.abs(distance - best_distance) + placement_penalty(gx, gy), np.inf)
        return cost

    found = standing_cell(ctx, cost_of)
    if found is None:
        raise Stop(SkillStatus.NO_PATH, "the robot is boxed in")
    grid_planner, field_, spot = found
    if spot is None:
        raise Stop(SkillStatus.UNREACHABLE, f"no free standing spot {min_distance:.2f}-{max_distance:.2f} m from "
                                            f"({point[0]:.2f}, {point[1]:.2f})")
    drive(ctx, grid_planner, field_, spot, face)
