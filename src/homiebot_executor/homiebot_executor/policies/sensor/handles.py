"""Door and drawer handles, and open door panels, found in the sensor-only skills' images (for Open and Close).

Handles: within the detector's masks of the target's category, the pixels clearly darker than the part around them
(at least 0.2 m above the floor) are handle candidates; each connected region with depth that is a compact bar at
least HANDLE_MIN_LENGTH long standing out of its face is one handle. A horizontal bar is taken for a drawer's, a
vertical one for a door's. The face is the largest group of upright surface pixels around the handle that share a
direction (their normals from the point image) and lie just behind the bar: a mask of a whole piece of furniture
also holds its other sides, whose points must not tilt the face. A door's hinge is estimated at the far edge of the
face from the handle. An open door is a thin panel, taller than wide, standing apart from the rest of its furniture;
its free edge (the end away from the rest) can be held instead of its handle, its arc then turning about the
panel's other end. A door this robot left open is found again near where its hand let go of it (panel_near).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage

from homiebot_executor.perception.points import upright_normals, valid
from homiebot_executor.policies.sensor.context import SensorContext

# A handle bar is at most this wide across, at least this long (metres) and stands at least this far out of its face;
# its face lies at most HANDLE_MAX_DEPTH behind it.
HANDLE_MAX_WIDTH, HANDLE_MIN_LENGTH, HANDLE_MIN_PROTRUSION, HANDLE_MAX_DEPTH = 0.3, 0.08, 0.01, 0.15
# The surface pixels of one face point within this angle (radians) of its direction, and a face has at least
# FACE_MIN_PIXELS of them around the handle.
FACE_SPREAD, FACE_MIN_PIXELS = 0.35, 20
# A door panel's free edge is held this far in from the edge (metres), this high if the panel reaches, when the edge
# stands at least EDGE_MIN_OPENING from the rest of the furniture; a door panel is at least PANEL_MIN_HEIGHT times as
# tall as it is wide.
EDGE_INSET, EDGE_HEIGHT, EDGE_MIN_OPENING, PANEL_MIN_HEIGHT = 0.02, 0.95, 0.2, 0.6
# The tangent of the angle off the panel's line at which the hand reaches for its edge.
EDGE_SKEW = 0.6
# An open drawer's handle stands at least this much further out than a closed one's (metres).
DRAWER_STANDS_OUT = 0.1
# A door left open is sought in the points seen within PANEL_NEAR (metres) of where the hand let go of it, on at least
# PANEL_MIN_POINTS of them.
PANEL_NEAR, PANEL_MIN_POINTS = 0.15, 40
# Half a door panel's thickness (metres; the fridge's is 5 cm, the cabinet's 3 cm).
PANEL_HALF_THICKNESS = 0.02


@dataclass(frozen=True)
class Arc:
    """The circle a door's grasp point moves on.

    Attributes:
        hinge: (x, y) of the hinge line.
        radius: distance of the grasp point from it (metres).
        start: unit horizontal direction from the hinge to the grasp point now.
        opening: unit horizontal direction the grasp point moves in as the door opens.
    """

    hinge: np.ndarray
    radius: float
    start: np.ndarray
    opening: np.ndarray

    @staticmethod
    def through(hinge: np.ndarray, point: np.ndarray, opening: np.ndarray) -> Arc:
        """The arc about `hinge` through the (x, y) `point`, opening along its tangent on `opening`'s side."""
        radius = max(float(np.linalg.norm(point - hinge)), 1e-9)
        start = (point - hinge) / radius
        tangent = np.array([-start[1], start[0]])
        return Arc(hinge, radius, start, tangent if tangent @ opening >= 0 else -tangent)


@dataclass(frozen=True)
class Handle:
    """A handle seen in the images, or the free edge of a door panel to hold instead.

    Attributes:
        centre: world position of its visible face's centre (of the edge: where the fingers close on it).
        vertical: a vertical bar (a door's) rather than a horizontal one (a drawer's).
        normal: unit horizontal direction the hand reaches it from, pointing towards the robot (a handle: the normal
            of the face it is on; an edge: along the panel, out of its free edge).
        points: (N, 3) points of the handle (of the edge: the panel's near it).
        face_points: (N, 3) points of that face around the handle (for the hinge estimate).
        arc: its arc when known: a panel edge's from the panel, a door handle's from the swing that left the door
            where it is (otherwise estimated by arc_of).
    """

    centre: np.ndarray
    vertical: bool
    normal: np.ndarray
    points: np.ndarray
    face_points: np.ndarray
    arc: Arc | None = None


@dataclass(frozen=True)
class Panel:
    """A thin door panel seen standing apart from the rest of its furniture (an open door).

    Attributes:
        centre: (x, y) of its points' centre.
        axis: unit horizontal direction along it.
        normal: unit horizontal normal pointing away from the rest of the furniture.
        points: (N, 3) its points.
        rest: (N, 2) the rest of the furniture's points.
    """

    centre: np.ndarray
    axis: np.ndarray
    normal: np.ndarray
    points: np.ndarray
    rest: np.ndarray


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
        on_part = mask & ~dark & np.isfinite(image).all(axis=-1)
        part, part_normals = image[on_part], upright_normals(image)[on_part]
        for region in range(1, count + 1):
            points = image[(regions == region) & dark]
            points = points[np.isfinite(points).all(axis=1)]
            if len(points) < 6:
                continue
            centre = points.mean(axis=0)
            extent = points.max(axis=0) - points.min(axis=0)
            vertical = bool(extent[2] > max(extent[0], extent[1]))
            if max(extent[0], extent[1]) > HANDLE_MAX_WIDTH or max(extent) < HANDLE_MIN_LENGTH:
                continue
            near = (np.hypot(part[:, 0] - centre[0], part[:, 1] - centre[1]) < 0.35) \
                & (np.abs(part[:, 2] - centre[2]) < 0.3)
            normal = face_behind(points, part[near], part_normals[near], np.array([x, y]))
            if normal is not None:
                handles.append(Handle(centre, vertical, normal, points, part))
    handles.sort(key=lambda handle: math.dist((x, y), handle.centre[:2]))
    return handles


def face_behind(bar: np.ndarray, points: np.ndarray, normals: np.ndarray, robot: np.ndarray) -> np.ndarray | None:
    """The unit horizontal normal (towards `robot`, an (x, y)) of the face the `bar`'s points stand out of, or None
    when no face holds them: among the upright surface `points` around the bar (with their horizontal `normals`),
    each direction the normals share is tried, most pixels first; its face is the pixels facing that way that lie at
    most HANDLE_MAX_DEPTH behind the bar, and the bar must stand at least HANDLE_MIN_PROTRUSION out of them."""
    known = np.isfinite(normals).all(axis=1)
    points, normals = points[known], normals[known]
    if len(points) < FACE_MIN_PIXELS:
        return None
    angles = np.arctan2(normals[:, 1], normals[:, 0])
    counts, edges = np.histogram(angles, bins=36, range=(-math.pi, math.pi))
    for index in np.argsort(-counts, kind="stable"):
        if counts[index] < FACE_MIN_PIXELS:
            break
        middle = (edges[index] + edges[index + 1]) / 2
        facing = np.abs(np.angle(np.exp(1j * (angles - middle)))) < FACE_SPREAD
        direction: np.ndarray = normals[facing].mean(axis=0)
        direction /= max(float(np.linalg.norm(direction)), 1e-9)
        if direction @ (robot - bar[:, :2].mean(axis=0)) < 0:
            direction = -direction
        out = float(np.median(bar[:, :2] @ direction))
        depth = out - points[facing][:, :2] @ direction
        behind = depth[(depth > -0.005) & (depth < HANDLE_MAX_DEPTH)]
        if len(behind) >= FACE_MIN_PIXELS and float(np.median(behind)) >= HANDLE_MIN_PROTRUSION:
            return direction
    return None


def arc_of(handle: Handle) -> Arc:
    """The arc of a door handle: its own, or one about the far edge of its face along the face (the hinge's
    estimate)."""
    if handle.arc is not None:
        return handle.arc
    along = np.array([handle.normal[1], -handle.normal[0]])
    face = handle.face_points
    offset = face[:, :2] - handle.centre[:2]
    on_face = np.abs(offset @ handle.normal) < 0.08
    span = offset[on_face] @ along
    low, high = (float(span.min()), float(span.max())) if len(span) else (0.0, 0.0)
    reach = high if abs(high) > abs(low) else low
    hinge = handle.centre[:2] + reach * along
    return Arc(hinge, abs(reach), -math.copysign(1.0, reach) * along, handle.normal)


def carried(handle: Handle, start: np.ndarray, end: np.ndarray) -> Handle:
    """The handle where the hand that held it let go, the hand's grip having gone from `start` to `end`: a door's
    turned about its hinge by the angle the hand swept (its face and arc with it), a drawer's moved along its normal
    by the hand's travel. Of its face only the part that moves with it is kept: within 0.35 m of the handle and at
    most HANDLE_MAX_DEPTH behind it."""
    offset = handle.face_points[:, :2] - handle.centre[:2]
    behind = -(offset @ handle.normal)
    near = handle.face_points[(np.linalg.norm(offset, axis=1) < 0.35) & (behind > -0.005) & (behind < HANDLE_MAX_DEPTH)]
    if handle.arc is None and not handle.vertical:
        shift = np.append(float((end - start)[:2] @ handle.normal) * handle.normal, 0.0)
        return replace(handle, centre=handle.centre + shift, points=handle.points + shift, face_points=near + shift)
    arc = arc_of(handle)
    before, after = start[:2] - arc.hinge, end[:2] - arc.hinge
    angle = math.atan2(float(before[0] * after[1] - before[1] * after[0]), float(before @ after))
    return turned_about(replace(handle, face_points=near, arc=arc), angle)


def turned_about(handle: Handle, angle: float) -> Handle:
    """The door handle (or edge) whose arc is known turned `angle` radians about its hinge, its normal, points, face
    and arc with it."""
    assert handle.arc is not None
    hinge = handle.arc.hinge
    turn = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])

    def turned(points: np.ndarray) -> np.ndarray:
        return np.column_stack([(points[:, :2] - hinge) @ turn.T + hinge, points[:, 2]])

    centre = turned(handle.centre[None])[0]
    return Handle(centre, handle.vertical, turn @ handle.normal, turned(handle.points), turned(handle.face_points),
                  Arc.through(hinge, centre[:2], turn @ handle.arc.opening))


def left_edge(handle: Handle) -> Handle:
    """What to hold to close a door or drawer this robot let go of at `handle` (see carried): a drawer's handle; a
    door's free edge, held as an open door's panel edge is (panel_edge): the end of the face beyond the handle from
    the hinge, EDGE_INSET in and centred on the panel, reached from beyond the edge and a little from the side the
    door closes towards, at the handle's height (opened, the handle may face a wall)."""
    if not handle.vertical or handle.arc is None:
        return handle
    arc = handle.arc
    along = (handle.face_points[:, :2] - arc.hinge) @ arc.start
    if not len(along) or float(along.max()) <= arc.radius:
        return handle
    free = float(along.max())
    edge = handle.face_points[along > free - 0.1]
    outer = float(np.median(edge[:, :2] @ handle.normal))
    grip = arc.hinge + (free - EDGE_INSET) * arc.start
    grip += (outer - PANEL_HALF_THICKNESS - float(grip @ handle.normal)) * handle.normal
    reach_from = arc.start - EDGE_SKEW * arc.opening
    reach_from /= np.linalg.norm(reach_from)
    return Handle(np.array([grip[0], grip[1], handle.centre[2]]), True, reach_from, edge, handle.face_points,
                  Arc.through(arc.hinge, grip, arc.opening))


def open_first(handles: list[Handle]) -> list[Handle]:
    """`handles` (nearest first) with the drawers that stand open before the rest: a drawer's handle standing at
    least DRAWER_STANDS_OUT further out along its normal than another drawer handle facing the same way."""
    def stands_out(handle: Handle) -> bool:
        return not handle.vertical and any(
            not other.vertical and other.normal @ handle.normal > 0.95
            and (handle.centre[:2] - other.centre[:2]) @ handle.normal > DRAWER_STANDS_OUT for other in handles)

    return sorted(handles, key=lambda handle: not stands_out(handle))


def nearest_unfailed(ctx: SensorContext, handles: list[Handle]) -> Handle | None:
    """The nearest handle not remembered as one the fingers could not hold."""
    for handle in handles:
        if all(math.dist(handle.centre, failed) > 0.06 for failed in ctx.failed_handles):
            return handle
    return None


def door_panels(ctx: SensorContext, name: str) -> list[Panel]:
    """Thin door panels of `name` standing apart from the rest of their furniture in the last look (a drawer's
    front, wider than tall, is not one)."""
    sightings = ctx.find(name)
    panels = []
    for sighting in sightings:
        flat = sighting.points[:, :2]
        centre = flat.mean(axis=0)
        _, spread, axes = np.linalg.svd(flat - centre, full_matrices=False)
        length = float(np.ptp((flat - centre) @ axes[0]))
        if len(sightings) < 2 or spread[1] > 0.25 * spread[0] or length < 0.4 \
                or np.ptp(sighting.points[:, 2]) < PANEL_MIN_HEIGHT * length:
            continue  # not a thin door panel standing apart from its furniture
        rest = np.concatenate([other.points[:, :2] for other in sightings if other is not sighting])
        normal = np.array([-axes[0][1], axes[0][0]])
        if normal @ (rest.mean(axis=0) - centre) > 0:
            normal = -normal
        panels.append(Panel(centre, axes[0], normal, sighting.points, rest))
    return panels


def panel_edge(ctx: SensorContext, name: str) -> Handle | None:
    """The free edge of the nearest open door panel of `name` as a vertical handle to hold (None when no panel is
    seen, or its edge is within EDGE_MIN_OPENING of the rest of the furniture): the end of the panel away from the
    rest of the furniture, EDGE_INSET in, at EDGE_HEIGHT; its arc turns about the other end, and closing moves it
    towards the rest of the furniture."""
    panels = door_panels(ctx, name)
    if not panels:
        return None
    x, y, _ = ctx.base()
    panel = min(panels, key=lambda item: math.dist((x, y), item.centre))
    along = (panel.points[:, :2] - panel.centre) @ panel.axis
    ends = [panel.centre + float(along.min()) * panel.axis, panel.centre + float(along.max()) * panel.axis]
    gaps = [float(np.min(np.linalg.norm(panel.rest - end, axis=1))) for end in ends]
    hinge, free = (ends[0], ends[1]) if gaps[1] > gaps[0] else (ends[1], ends[0])
    if max(gaps) < EDGE_MIN_OPENING:
        return None
    return edge_handle(hinge, free, panel.points, panel.normal, np.array([x, y]))


def edge_handle(hinge: np.ndarray, free: np.ndarray, points: np.ndarray, normal: np.ndarray,
                robot: np.ndarray) -> Handle:
    """The free edge of a door panel whose ends are `hinge` and `free` (x, y), seen as `points`, that opens towards
    its unit `normal`, as a vertical handle for a robot at `robot` (x, y) to hold: EDGE_INSET in from the free end,
    centred on the panel, at EDGE_HEIGHT if the panel reaches; its arc turns about the hinge end."""
    outwards = (free - hinge) / max(float(np.linalg.norm(free - hinge)), 1e-6)
    near_edge = points[np.abs((points[:, :2] - free) @ outwards) < 0.1]
    low, high = float(near_edge[:, 2].min()), float(near_edge[:, 2].max())
    height = float(np.clip(EDGE_HEIGHT, low + 0.1, max(low + 0.1, high - 0.1)))
    # The fingers centre on the panel: half its thickness behind the face the robot sees.
    behind = -math.copysign(1.0, float((robot - (hinge + free) / 2) @ normal)) * normal
    grip = free - EDGE_INSET * outwards + PANEL_HALF_THICKNESS * behind
    arc = Arc.through(hinge, grip, normal)
    # Reached from beyond the edge, a little from the side the door closes towards: the robot then pulls the door
    # shut towards itself.
    reach_from = outwards - EDGE_SKEW * normal
    reach_from /= np.linalg.norm(reach_from)
    return Handle(np.array([grip[0], grip[1], height]), True, reach_from, near_edge, points, arc)


def panel_near(points: np.ndarray, edge: Handle, robot: np.ndarray) -> Handle | None:
    """The free edge of the door panel seen as `points` near where the door of `edge` (whose arc is known: a door
    this robot left open) should be, held as edge_handle holds one, or None when fewer than PANEL_MIN_POINTS upright
    points lie within PANEL_NEAR of the segment from its hinge to its edge (away from the hinge, where the rest of
    the furniture is). A door left open may swing on a little after the hand lets go, and its hinge was estimated."""
    assert edge.arc is not None
    hinge, end = edge.arc.hinge, edge.centre[:2]
    length = max(float(np.linalg.norm(end - hinge)), 1e-6)
    direction = (end - hinge) / length
    along = (points[:, :2] - hinge) @ direction
    across = np.abs((points[:, :2] - hinge) @ np.array([-direction[1], direction[0]]))
    panel = points[(points[:, 2] > 0.3) & (along > 0.3 * length) & (along < length + 0.1) & (across < PANEL_NEAR)]
    if len(panel) < PANEL_MIN_POINTS:
        return None
    centre = panel[:, :2].mean(axis=0)
    axis = np.linalg.svd(panel[:, :2] - centre, full_matrices=False)[2][0]
    axis = axis if axis @ (end - hinge) > 0 else -axis
    free = centre + float(np.max((panel[:, :2] - centre) @ axis)) * axis
    new_hinge = centre + float((hinge - centre) @ axis) * axis
    normal = np.array([-axis[1], axis[0]])
    return edge_handle(new_hinge, free, panel, normal if normal @ edge.arc.opening > 0 else -normal, robot)


def seen_again(ctx: SensorContext, name: str, handle: Handle) -> Handle:
    """The handle (or panel edge) as the last look shows it near where it was seen before (as before if not seen).
    A panel edge keeps the hinge seen before when the panel's hinge end is out of this view (the arc then looks
    shorter); one whose panel is not made out apart from its furniture (a remembered door's edge) is sought in the
    points of `name` seen near it (panel_near)."""
    if handle.arc is None:
        nearby = [item for item in find_handles(ctx, name) if math.dist(item.centre, handle.centre) < 0.15]
        return nearby[0] if nearby else handle
    edge = panel_edge(ctx, name)
    if edge is None or edge.arc is None or math.dist(edge.centre, handle.centre) >= 0.15:
        assert ctx.snapshot is not None
        seen = [valid(ctx.snapshot.points[detection.view][detection.mask])
                for detection in ctx.detector.detect(ctx.snapshot.observation, name)]
        x, y, _ = ctx.base()
        near = panel_near(np.concatenate(seen), handle, np.array([x, y])) if seen else None
        return handle if near is None or math.dist(near.centre, handle.centre) >= PANEL_NEAR else near
    if edge.arc.radius >= handle.arc.radius:
        return edge
    return replace(edge, arc=Arc.through(handle.arc.hinge, edge.centre[:2], handle.arc.opening))
