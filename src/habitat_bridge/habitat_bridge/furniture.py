"""Geometry of the furniture models, built from boxes, in each piece's local frame.

Local frame of a piece of furniture: origin at the centre of its footprint on the floor, x along its length, y along
its depth with the front (where doors and drawers open and the robot approaches) at y = -depth/2, z up. A pose yaw
rotates this frame about z. Every backend-independent question about furniture (what to draw, where objects can
rest, what a drawer looks like open, what the floor plan blocks) is answered from the `FurnitureGeometry` returned by
`furniture_geometry`.

Articulated parts ("slots"): the fridge and the white cabinet have one hinged "door"; the kitchen counter has drawer
slots "drawer_0", "drawer_1", ... (how many depends on its length). A slot named in a spec's articulations becomes a
moving part; other drawer slots are closed fronts. The "deep_counter" model is the same counter with pot drawers: their
floor lies lower and their walls stay low, so that tall objects (a cleanser bottle, a cracker box) fit in them.
"""

from __future__ import annotations

from dataclasses import dataclass

Vec3 = tuple[float, float, float]
RGB = tuple[float, float, float]

HANDLE_COLOR: RGB = (0.25, 0.25, 0.27)
METAL_COLOR: RGB = (0.7, 0.72, 0.75)
COUNTERTOP_COLOR: RGB = (0.28, 0.28, 0.3)


@dataclass(frozen=True)
class Box:
    """One box of a piece of furniture (local frame).

    Attributes:
        name: part name, unique within the piece ("top", "leg_0", ...).
        center: box centre.
        half: half sizes along x, y, z.
        color: RGB; None means the piece's own colour.
    """

    name: str
    center: Vec3
    half: Vec3
    color: RGB | None = None


@dataclass(frozen=True)
class Surface:
    """A horizontal region where objects rest (local frame, or the moving part's frame at its closed position).

    Attributes:
        name: "top", "seat", "sink", "shelf_0", "interior", ...
        center: centre of the region; z is the height of the supporting plane.
        half: half extents of the region along x and y.
        inside: whether objects here are inside a container (fridge, drawer, cabinet) rather than on top of it.
        clearance: free height above the plane (how tall an object placed here may be).
        part: key of the moving part the region moves with (a drawer), None when it is fixed.
    """

    name: str
    center: Vec3
    half: tuple[float, float]
    inside: bool
    clearance: float
    part: str | None = None


@dataclass(frozen=True)
class MovingPart:
    """An articulated part (door or drawer) at its closed position (joint value 0).

    Attributes:
        key: slot name ("door", "drawer_0", ...).
        joint: "hinge" (radians) or "slide" (metres).
        axis: joint axis in the local frame; positive joint values open the part.
        pivot: hinge axis point, or the drawer's reference point, in the local frame.
        boxes: the part's boxes in the local frame at the closed position.
        handle: the handle's centre in the local frame at the closed position.
    """

    key: str
    joint: str
    axis: Vec3
    pivot: Vec3
    boxes: tuple[Box, ...]
    handle: Vec3


@dataclass(frozen=True)
class FurnitureGeometry:
    """Everything a backend needs to build and reason about one piece of furniture.

    Attributes:
        static: boxes that never move.
        moving: articulated parts.
        surfaces: support regions.
        half_extent: half length and half depth of the footprint.
    """

    static: tuple[Box, ...]
    moving: tuple[MovingPart, ...]
    surfaces: tuple[Surface, ...]
    half_extent: tuple[float, float]

    def surface(self, name: str) -> Surface | None:
        """The support region called `name`, or None."""
        return next((surface for surface in self.surfaces if surface.name == name), None)


@dataclass(frozen=True)
class JointDefaults:
    """Default joint of an articulated slot (the release's open thresholds: fridge 0.8 rad, drawer 0.25 m)."""

    joint: str
    lower: float
    upper: float
    open_threshold: float
    label: str


DOOR_DEFAULTS = JointDefaults("hinge", 0.0, 2.0, 0.8, "door")
DRAWER_DEFAULTS = JointDefaults("slide", 0.0, 0.45, 0.25, "drawer")

# Models with the kitchen counter's drawer slots.
COUNTER_MODELS: tuple[str, ...] = ("counter", "deep_counter")
# Kitchen counter layout (metres).
_COUNTER_TOP = 0.04
_DRAWER_ZONE = 0.2
# Pot drawers of the deep counter: 0.33 m free above the floor, walls 0.17 m high so that the arm reaches in.
_DEEP_DRAWER_ZONE = 0.36
_DEEP_DRAWER_WALL = 0.17
# Free height kept between a drawer's load and the counter top it slides under.
_DRAWER_HEADROOM = 0.04
_SINK_WIDTH = 0.6
_SINK_DEPTH = 0.4
_SINK_FROM_LEFT = 0.55
_DRAWER_PITCH = 0.55
_DRAWER_WIDTH = 0.5
_DRAWER_LENGTH = 0.5


def _box(name: str, lo: Vec3, hi: Vec3, color: RGB | None = None) -> Box:
    """A box from its lower and upper corners."""
    center = tuple((a + b) / 2 for a, b in zip(lo, hi))
    half = tuple((b - a) / 2 for a, b in zip(lo, hi))
    return Box(name, center, half, color)  # type: ignore[arg-type]


def drawer_slots(length: float) -> tuple[str, ...]:
    """Drawer slot names of a kitchen counter of the given length (left of the drawers is the sink)."""
    start = -length / 2 + _SINK_FROM_LEFT + _SINK_WIDTH / 2 + 0.05
    count = max(0, int((length / 2 - 0.05 - start) // _DRAWER_PITCH))
    return tuple(f"drawer_{index}" for index in range(count))


def available_slots(model: str, size: Vec3) -> tuple[str, ...]:
    """Articulated slots a model offers at this size."""
    if model in ("fridge", "cabinet"):
        return ("door",)
    if model in COUNTER_MODELS:
        return drawer_slots(size[0])
    return ()


def slot_defaults(model: str, slot: str) -> JointDefaults:
    """Default joint type, range, open threshold and label of a slot.

    Raises:
        ValueError: the model has no such slot.
    """
    if model in ("fridge", "cabinet") and slot == "door":
        return DOOR_DEFAULTS
    if model in COUNTER_MODELS and slot.startswith("drawer_"):
        return DRAWER_DEFAULTS
    raise ValueError(f"furniture model {model!r} has no articulated slot {slot!r}")


# What each model's builder returns: static boxes, moving parts, support regions.
_Parts = tuple[list[Box], list[MovingPart], list[Surface]]


def furniture_geometry(model: str, size: Vec3, slots: tuple[str, ...] = ()) -> FurnitureGeometry:
    """Boxes, moving parts and support regions of a furniture model.

    Args:
        model: one of catalog.FURNITURE_MODELS.
        size: (length, depth, height) in metres.
        slots: articulated slots to build as moving parts (see available_slots).

    Raises:
        ValueError: unknown model or slot.
    """
    builders = {
        "table": _table, "desk": _desk, "sofa": _sofa, "chair": _chair, "tv_stand": _tv_stand, "tv": _tv,
        "counter": _counter, "deep_counter": _deep_counter, "fridge": _fridge, "cabinet": _cabinet, "shelf": _shelf,
    }
    if model not in builders:
        raise ValueError(f"unknown furniture model {model!r}; expected one of {', '.join(builders)}")
    offered = available_slots(model, size)
    for slot in slots:
        if slot not in offered:
            raise ValueError(f"furniture model {model!r} of length {size[0]:g} m has no slot {slot!r}; "
                             f"available: {', '.join(offered) or 'none'}")
    static, moving, surfaces = builders[model](*size, slots=slots)
    return FurnitureGeometry(tuple(static), tuple(moving), tuple(surfaces), (size[0] / 2, size[1] / 2))


def _legs(length: float, depth: float, height: float, thickness: float, inset: float) -> list[Box]:
    legs = []
    for index, (sx, sy) in enumerate(((-1, -1), (1, -1), (1, 1), (-1, 1))):
        x = sx * (length / 2 - inset - thickness / 2)
        y = sy * (depth / 2 - inset - thickness / 2)
        legs.append(Box(f"leg_{index}", (x, y, height / 2), (thickness / 2, thickness / 2, height / 2)))
    return legs


def _table(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    top = _box("top", (-length / 2, -depth / 2, height - 0.04), (length / 2, depth / 2, height))
    legs = _legs(length, depth, height - 0.04, 0.05, 0.04)
    surface = Surface("top", (0.0, 0.0, height), (length / 2 - 0.04, depth / 2 - 0.04), False, 1.0)
    return [top, *legs], [], [surface]


def _desk(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    top = _box("top", (-length / 2, -depth / 2, height - 0.035), (length / 2, depth / 2, height))
    side_left = _box("side_0", (-length / 2, -depth / 2, 0.0), (-length / 2 + 0.03, depth / 2, height - 0.035))
    side_right = _box("side_1", (length / 2 - 0.03, -depth / 2, 0.0), (length / 2, depth / 2, height - 0.035))
    back = _box("back", (-length / 2 + 0.03, depth / 2 - 0.03, 0.3), (length / 2 - 0.03, depth / 2, height - 0.035))
    surface = Surface("top", (0.0, 0.0, height), (length / 2 - 0.04, depth / 2 - 0.04), False, 1.0)
    return [top, side_left, side_right, back], [], [surface]


def _sofa(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    arm, back_depth, seat = 0.16, 0.22, 0.45
    darker = (0.16, 0.24, 0.45)
    base = _box("base", (-length / 2, -depth / 2, 0.05), (length / 2, depth / 2 - back_depth, seat - 0.12), darker)
    cushion = _box("cushion", (-length / 2 + arm, -depth / 2, seat - 0.12), (length / 2 - arm, depth / 2 - back_depth,
                                                                            seat))
    back = _box("back", (-length / 2, depth / 2 - back_depth, 0.05), (length / 2, depth / 2, height))
    arm_left = _box("arm_0", (-length / 2, -depth / 2, seat - 0.12), (-length / 2 + arm, depth / 2 - back_depth,
                                                                      seat + 0.17))
    arm_right = _box("arm_1", (length / 2 - arm, -depth / 2, seat - 0.12), (length / 2, depth / 2 - back_depth,
                                                                           seat + 0.17))
    feet = [Box(f"foot_{index}", (x, y, 0.025), (0.03, 0.03, 0.025), HANDLE_COLOR)
            for index, (x, y) in enumerate(((-length / 2 + 0.08, -depth / 2 + 0.08), (length / 2 - 0.08,
                                                                                       -depth / 2 + 0.08),
                                            (length / 2 - 0.08, depth / 2 - 0.08), (-length / 2 + 0.08,
                                                                                    depth / 2 - 0.08)))]
    seat_depth = depth - back_depth
    surface = Surface("seat", (0.0, -depth / 2 + seat_depth / 2, seat),
                      (length / 2 - arm - 0.05, seat_depth / 2 - 0.06), False, 1.0)
    return [base, cushion, back, arm_left, arm_right, *feet], [], [surface]


def _chair(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    seat = 0.46
    seat_box = _box("seat", (-length / 2, -depth / 2, seat - 0.04), (length / 2, depth / 2, seat))
    legs = _legs(length, depth, seat - 0.04, 0.04, 0.02)
    back = _box("back", (-length / 2, depth / 2 - 0.04, seat), (length / 2, depth / 2, height))
    surface = Surface("seat", (0.0, -0.02, seat), (length / 2 - 0.04, depth / 2 - 0.08), False, 0.6)
    return [seat_box, *legs, back], [], [surface]


def _tv_stand(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    body = _box("body", (-length / 2, -depth / 2, 0.06), (length / 2, depth / 2, height))
    feet = [Box(f"foot_{index}", (x, y, 0.03), (0.03, 0.03, 0.03), HANDLE_COLOR)
            for index, (x, y) in enumerate(((-length / 2 + 0.06, -depth / 2 + 0.06), (length / 2 - 0.06,
                                                                                       -depth / 2 + 0.06),
                                            (length / 2 - 0.06, depth / 2 - 0.06), (-length / 2 + 0.06,
                                                                                    depth / 2 - 0.06)))]
    fronts = [_box(f"front_{index}", (x0 + 0.02, -depth / 2 - 0.01, 0.1), (x0 + length / 2 - 0.02, -depth / 2,
                                                                           height - 0.05), (0.17, 0.33, 0.58))
              for index, x0 in enumerate((-length / 2, 0.0))]
    surface = Surface("top", (0.0, 0.0, height), (length / 2 - 0.04, depth / 2 - 0.04), False, 1.0)
    return [body, *feet, *fronts], [], [surface]


def _tv(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    frame = _box("frame", (-length / 2, -depth / 2 + 0.01, 0.0), (length / 2, depth / 2, height))
    screen = _box("screen", (-length / 2 + 0.03, -depth / 2, 0.03), (length / 2 - 0.03, -depth / 2 + 0.01,
                                                                     height - 0.03), (0.1, 0.12, 0.18))
    return [frame, screen], [], []


def _deep_counter(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    return _counter(length, depth, height, slots, zone=_DEEP_DRAWER_ZONE, wall=_DEEP_DRAWER_WALL)


def _counter(length: float, depth: float, height: float, slots: tuple[str, ...], zone: float = _DRAWER_ZONE,
             wall: float | None = None) -> _Parts:
    """The kitchen counter; `zone` is the drawers' height, `wall` their walls' (None: up to the counter top)."""
    top_z, zone_z = height - _COUNTER_TOP, height - _COUNTER_TOP - zone
    front, back = -depth / 2, depth / 2
    sink_x = -length / 2 + _SINK_FROM_LEFT
    sx0, sx1 = sink_x - _SINK_WIDTH / 2, sink_x + _SINK_WIDTH / 2
    sy0, sy1 = -_SINK_DEPTH / 2 - 0.02, _SINK_DEPTH / 2 - 0.02
    static: list[Box] = [
        _box("body", (-length / 2, front + 0.02, 0.0), (length / 2, back, zone_z)),
        _box("plinth", (-length / 2, front + 0.06, 0.0), (length / 2, front + 0.08, 0.08), HANDLE_COLOR),
        _box("back_panel", (-length / 2, back - 0.02, zone_z), (length / 2, back, top_z)),
        # Countertop around the sink hole.
        _box("top_left", (-length / 2, front, top_z), (sx0, back, height), COUNTERTOP_COLOR),
        _box("top_right", (sx1, front, top_z), (length / 2, back, height), COUNTERTOP_COLOR),
        _box("top_front", (sx0, front, top_z), (sx1, sy0, height), COUNTERTOP_COLOR),
        _box("top_back", (sx0, sy1, top_z), (sx1, back, height), COUNTERTOP_COLOR),
        # Sink basin.
        _box("sink_bottom", (sx0, sy0, top_z - 0.18), (sx1, sy1, top_z - 0.16), METAL_COLOR),
        _box("sink_wall_0", (sx0, sy0, top_z - 0.16), (sx0 + 0.015, sy1, top_z), METAL_COLOR),
        _box("sink_wall_1", (sx1 - 0.015, sy0, top_z - 0.16), (sx1, sy1, top_z), METAL_COLOR),
        _box("sink_wall_2", (sx0, sy0, top_z - 0.16), (sx1, sy0 + 0.015, top_z), METAL_COLOR),
        _box("sink_wall_3", (sx0, sy1 - 0.015, top_z - 0.16), (sx1, sy1, top_z), METAL_COLOR),
        _box("tap", (sink_x - 0.015, sy1 + 0.02, height), (sink_x + 0.015, sy1 + 0.05, height + 0.25), METAL_COLOR),
        _box("spout", (sink_x - 0.015, sy1 - 0.1, height + 0.22), (sink_x + 0.015, sy1 + 0.05, height + 0.25),
             METAL_COLOR),
    ]
    surfaces = [
        Surface("top", ((sx1 + length / 2) / 2, 0.0, height), ((length / 2 - sx1) / 2 - 0.04, depth / 2 - 0.05),
                False, 1.0),
        Surface("sink", (sink_x, (sy0 + sy1) / 2, top_z - 0.16), (_SINK_WIDTH / 2 - 0.05, _SINK_DEPTH / 2 - 0.05),
                False, 0.8),
    ]
    # Drawer zone: closed fronts everywhere, dividers between drawer slots, drawers where asked.
    slot_names = drawer_slots(length)
    first = sx1 + 0.05
    edges = [-length / 2, first]
    moving: list[MovingPart] = []
    static.append(_box("front_sink", (-length / 2, front, zone_z + 0.005), (first, front + 0.02, top_z - 0.005)))
    for index, slot in enumerate(slot_names):
        x0 = first + index * _DRAWER_PITCH
        center_x = x0 + 0.025 + _DRAWER_WIDTH / 2
        static.append(_box(f"divider_{index}", (x0, front + 0.02, zone_z), (x0 + 0.025, back - 0.02, top_z)))
        static.append(_box(f"divider_{index}b", (x0 + 0.025 + _DRAWER_WIDTH, front + 0.02, zone_z),
                           (x0 + _DRAWER_PITCH, back - 0.02, top_z)))
        edges.append(x0 + _DRAWER_PITCH)
        drawer = _drawer_boxes(slot, center_x, front, zone_z, top_z, wall)
        handle = (center_x, front - 0.02, (zone_z + top_z) / 2)
        if slot in slots:
            moving.append(MovingPart(slot, "slide", (0.0, -1.0, 0.0), (center_x, front, zone_z), tuple(drawer),
                                     handle))
            interior = Surface(slot, (center_x, front + 0.02 + _DRAWER_LENGTH / 2, zone_z + 0.03),
                               (_DRAWER_WIDTH / 2 - 0.05, _DRAWER_LENGTH / 2 - 0.05), True,
                               round(zone - 0.03 - _DRAWER_HEADROOM, 3), part=slot)
            surfaces.append(interior)
        else:
            static.extend(box for box in drawer if box.name.endswith(("_front", "_handle")))
            static.append(_box(f"{slot}_fill", (center_x - _DRAWER_WIDTH / 2, front + 0.02, zone_z),
                               (center_x + _DRAWER_WIDTH / 2, back - 0.02, top_z)))
    last = first + len(slot_names) * _DRAWER_PITCH
    static.append(_box("front_end", (last, front, zone_z + 0.005), (length / 2, front + 0.02, top_z - 0.005)))
    static.append(_box("end_fill", (last, front + 0.02, zone_z), (length / 2, back - 0.02, top_z)))
    return static, moving, surfaces


def _drawer_boxes(slot: str, center_x: float, front: float, zone_z: float, top_z: float,
                  wall: float | None) -> list[Box]:
    half_w = _DRAWER_WIDTH / 2
    y0, y1 = front + 0.02, front + 0.02 + _DRAWER_LENGTH
    wall_top = top_z - 0.03 if wall is None else zone_z + 0.015 + wall
    return [
        _box(f"{slot}_front", (center_x - half_w, front, zone_z + 0.005), (center_x + half_w, front + 0.02,
                                                                           top_z - 0.005)),
        _box(f"{slot}_handle", (center_x - 0.09, front - 0.03, (zone_z + top_z) / 2 - 0.01),
             (center_x + 0.09, front, (zone_z + top_z) / 2 + 0.01), HANDLE_COLOR),
        _box(f"{slot}_bottom", (center_x - half_w + 0.01, y0, zone_z + 0.015), (center_x + half_w - 0.01, y1,
                                                                                zone_z + 0.03)),
        _box(f"{slot}_side_0", (center_x - half_w + 0.01, y0, zone_z + 0.015), (center_x - half_w + 0.02, y1,
                                                                                wall_top)),
        _box(f"{slot}_side_1", (center_x + half_w - 0.02, y0, zone_z + 0.015), (center_x + half_w - 0.01, y1,
                                                                                wall_top)),
        _box(f"{slot}_back", (center_x - half_w + 0.01, y1 - 0.01, zone_z + 0.015), (center_x + half_w - 0.01, y1,
                                                                                     wall_top)),
    ]


def _hollow(length: float, depth: float, height: float, wall: float, plinth: float) -> list[Box]:
    """Back, sides, top and bottom of a box open at the front."""
    return [
        _box("back", (-length / 2, depth / 2 - wall, 0.0), (length / 2, depth / 2, height)),
        _box("side_0", (-length / 2, -depth / 2, 0.0), (-length / 2 + wall, depth / 2 - wall, height)),
        _box("side_1", (length / 2 - wall, -depth / 2, 0.0), (length / 2, depth / 2 - wall, height)),
        _box("roof", (-length / 2 + wall, -depth / 2, height - wall), (length / 2 - wall, depth / 2 - wall, height)),
        _box("plinth", (-length / 2 + wall, -depth / 2, 0.0), (length / 2 - wall, depth / 2 - wall, plinth)),
    ]


def _door(length: float, depth: float, height: float, slots: tuple[str, ...],
          thickness: float) -> tuple[list[Box], list[MovingPart]]:
    """A door over the whole front, hinged at the left edge, opening outwards."""
    front = -depth / 2
    door = _box("door_panel", (-length / 2, front - thickness, 0.01), (length / 2, front, height - 0.01))
    handle_x = length / 2 - 0.08
    handle = _box("door_handle", (handle_x - 0.015, front - thickness - 0.05, height * 0.4),
                  (handle_x + 0.015, front - thickness, height * 0.65), HANDLE_COLOR)
    handle_point = (handle_x, front - thickness - 0.04, height * 0.52)
    part = MovingPart("door", "hinge", (0.0, 0.0, -1.0), (-length / 2, front - thickness / 2, 0.0), (door, handle),
                      handle_point)
    if "door" in slots:
        return [], [part]
    return [door, handle], []


def _fridge(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    wall, plinth = 0.04, 0.12
    static = _hollow(length, depth, height, wall, plinth)
    shelf_heights = (0.6, 1.1)
    inner_half = (length / 2 - wall - 0.04, (depth - wall) / 2 - 0.06)
    inner_y = -wall / 2
    surfaces = [Surface("bottom", (0.0, inner_y, plinth), inner_half, True, shelf_heights[0] - plinth - 0.02)]
    for index, z in enumerate(shelf_heights):
        static.append(_box(f"shelf_{index}", (-length / 2 + wall, -depth / 2 + 0.03, z - 0.02),
                           (length / 2 - wall, depth / 2 - wall, z), (0.8, 0.86, 0.9)))
        upper = shelf_heights[index + 1] if index + 1 < len(shelf_heights) else height - wall
        surfaces.append(Surface(f"shelf_{index}", (0.0, inner_y, z), inner_half, True, upper - z - 0.02))
    door_static, moving = _door(length, depth, height, slots, 0.05)
    return static + door_static, moving, surfaces


def _cabinet(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    wall, plinth, shelf_z = 0.03, 0.06, 0.46
    static = _hollow(length, depth, height, wall, plinth)
    static.append(_box("shelf", (-length / 2 + wall, -depth / 2 + 0.03, shelf_z - 0.02),
                       (length / 2 - wall, depth / 2 - wall, shelf_z)))
    inner_half = (length / 2 - wall - 0.04, (depth - wall) / 2 - 0.06)
    surfaces = [
        Surface("top", (0.0, 0.0, height), (length / 2 - 0.04, depth / 2 - 0.04), False, 1.0),
        Surface("bottom", (0.0, -wall / 2, plinth), inner_half, True, shelf_z - plinth - 0.04),
        Surface("shelf", (0.0, -wall / 2, shelf_z), inner_half, True, height - wall - shelf_z - 0.02),
    ]
    door_static, moving = _door(length, depth, height, slots, 0.03)
    return static + door_static, moving, surfaces


def _shelf(length: float, depth: float, height: float, slots: tuple[str, ...]) -> _Parts:
    wall = 0.03
    boards = (0.06, 0.45, 0.85)
    static = [
        _box("back", (-length / 2, depth / 2 - 0.02, 0.0), (length / 2, depth / 2, height)),
        _box("side_0", (-length / 2, -depth / 2, 0.0), (-length / 2 + wall, depth / 2 - 0.02, height)),
        _box("side_1", (length / 2 - wall, -depth / 2, 0.0), (length / 2, depth / 2 - 0.02, height)),
        _box("roof", (-length / 2 + wall, -depth / 2, height - wall), (length / 2 - wall, depth / 2 - 0.02, height)),
    ]
    inner_half = (length / 2 - wall - 0.04, (depth - 0.02) / 2 - 0.05)
    surfaces = [Surface("top", (0.0, 0.0, height), (length / 2 - 0.04, depth / 2 - 0.04), False, 1.0)]
    for index, z in enumerate(boards):
        static.append(_box(f"board_{index}", (-length / 2 + wall, -depth / 2, z - wall),
                           (length / 2 - wall, depth / 2 - 0.02, z)))
        upper = boards[index + 1] - wall if index + 1 < len(boards) else height - wall
        surfaces.append(Surface(f"shelf_{index}", (0.0, -0.01, z), inner_half, False, upper - z - 0.02))
    return static, [], surfaces

