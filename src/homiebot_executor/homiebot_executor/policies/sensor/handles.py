"""Door and drawer handles, and open door panels, found in the sensor-only skills' images (for Open and Close).

Handles: within the detector's masks of the target's category, the pixels clearly darker than the part around them
(at least 0.2 m above the floor) are handle candidates; each connected region with depth that is a compact bar
standing out of its face is one handle. A horizontal bar is taken for a drawer's, a vertical one for a door's. The
face's normal comes from the part's points around the handle (their horizontal principal direction, turned towards
the robot); a door's hinge is estimated at the far edge of the face from the handle. An open door is a thin panel,
taller than wide, standing apart from the rest of its furniture; its free edge (the end away from the rest) can be
held instead of its handle, its arc then turning about the panel's other end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage

from homiebot_executor.policies.sensor.context import SensorContext

# A handle bar is at most this wide across (metres) and stands at least this far out of its face.
HANDLE_MAX_WIDTH, HANDLE_MIN_PROTRUSION = 0.3, 0.01
# A door panel's free edge is held this far in from the edge (metres), this high if the panel reaches, when the edge
# stands at least EDGE_MIN_OPENING from the rest of the furniture; a door panel is at least PANEL_MIN_HEIGHT times as
# tall as it is wide.
EDGE_INSET, EDGE_HEIGHT, EDGE_MIN_OPENING, PANEL_MIN_HEIGHT = 0.02, 0.95, 0.2, 0.6
# The tangent of the angle off the panel's line at which the hand reaches for its edge.
EDGE_SKEW = 0.6
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
        arc: a panel edge's arc, known from the panel (a handle's is estimated by arc_of).
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
    outwards = (free - hinge) / max(float(np.linalg.norm(free - hinge)), 1e-6)
    near_edge = panel.points[np.abs((panel.points[:, :2] - free) @ outwards) < 0.1]
    low, high = float(near_edge[:, 2].min()), float(near_edge[:, 2].max())
    height = float(np.clip(EDGE_HEIGHT, low + 0.1, max(low + 0.1, high - 0.1)))
    # The fingers centre on the panel: half its thickness behind the face the robot sees.
    behind = -math.copysign(1.0, float((np.array([x, y]) - panel.centre) @ panel.normal)) * panel.normal
    grip = free - EDGE_INSET * outwards + PANEL_HALF_THICKNESS * behind
    arc = Arc.through(hinge, grip, panel.normal)
    # Reached from beyond the edge, a little from the side the door closes towards: the robot then pulls the door
    # shut towards itself.
    reach_from = outwards - EDGE_SKEW * panel.normal
    reach_from /= np.linalg.norm(reach_from)
    return Handle(np.array([grip[0], grip[1], height]), True, reach_from, near_edge, panel.points, arc)


def seen_again(ctx: SensorContext, name: str, handle: Handle) -> Handle:
    """The handle (or panel edge) as the last look shows it near where it was seen before (as before if not seen).
    A panel edge keeps the hinge seen before when the panel's hinge end is out of this view (the arc then looks
    shorter)."""
    if handle.arc is None:
        nearby = [item for item in find_handles(ctx, name) if math.dist(item.centre, handle.centre) < 0.15]
        return nearby[0] if nearby else handle
    edge = panel_edge(ctx, name)
    if edge is None or edge.arc is None or math.dist(edge.centre, handle.centre) >= 0.15:
        return handle
    if edge.arc.radius >= handle.arc.radius:
        return edge
    return replace(edge, arc=Arc.through(handle.arc.hinge, edge.centre[:2], handle.arc.opening))
