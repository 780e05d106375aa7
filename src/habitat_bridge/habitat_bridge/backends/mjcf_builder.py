"""Scene spec -> MJCF text: floors, walls, furniture (with articulated doors and drawers), YCB-like objects, Fetch.

Naming (the MuJoCo backend relies on it):
- furniture body `furn/<name>`, its geoms `furn/<name>/<part>`; a door or drawer is a child body
  `art/<articulation name>` with joint and position actuator of the same name;
- object body `obj/<name>` with a free joint `obj/<name>` and geoms `obj/<name>/<i>`;
- walls `wall/<i>` and the ceiling are in geom group 3 (hidden in third-person views), the collision floor plane in
  group 4 (never drawn; the room floors are drawn as thin visual boxes);
- robot names start with "fetch/" (see fetch_model).
One weld equality `grasp` (inactive) is retargeted at run time to the grasped object, one connect equality
`handle_grasp` to the door or drawer whose handle the fingers hold.

Collision bits: the floor collides with objects only; furniture and walls with objects and the robot; objects with
everything; the robot never with itself or the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET

from emmoe_core.robot import fetch

from habitat_bridge import layout
from habitat_bridge.backends import fetch_model
from habitat_bridge.furniture import Box, MovingPart
from habitat_bridge.scene_spec import Furniture, SceneObject, SceneSpec, SceneSpecError

GRASP_EQUALITY = "grasp"
HANDLE_EQUALITY = "handle_grasp"
WALL_GROUP = 3
CEILING_HEIGHT = 2.6
_FURNITURE_CONTYPE, _FURNITURE_CONAFFINITY = 1, fetch_model.ROBOT_BIT
_OBJECT_CONTYPE, _OBJECT_CONAFFINITY = 1, 1 | fetch_model.ROBOT_BIT
# Object friction (sliding, torsional, rolling in metres). Spheres (apple, orange, peach, plum) get the rolling
# resistance of a real fruit's uneven skin: let go with a little speed, an apple stopped within centimetres
# instead of rolling 0.3 m off a desk after a Put (0.002 m, like everything else, let it roll).
_FRICTION, _ROLLING_FRICTION = "1 0.02 0.002", "1 0.02 0.005"
_FLOOR_CONTYPE, _FLOOR_CONAFFINITY = 1, 1
# Doors and drawers: panel density (kg/m^3, about the mass of real ones), position-actuator gains, joint armature.
PANEL_DENSITY = 150.0
HINGE_KP, SLIDE_KP = 100.0, 600.0
SLIDE_DAMPING = 20.0
JOINT_ARMATURE = 0.05


@dataclass(frozen=True)
class MjcfOptions:
    """Model-wide settings.

    Attributes:
        timestep: physics step (seconds).
        cameras: head and third-person cameras.
        offscreen_size: offscreen framebuffer (width, height); must hold all views side by side.
    """

    timestep: float = 0.004
    cameras: fetch_model.FetchCameraConfig = field(default_factory=fetch_model.FetchCameraConfig)
    offscreen_size: tuple[int, int] = (2048, 1024)

    def __post_init__(self) -> None:
        if not 0.0005 <= self.timestep <= 0.01:
            raise ValueError(f"timestep must be within [0.0005, 0.01] s, got {self.timestep}")
        if min(self.offscreen_size) < 64:
            raise ValueError(f"offscreen_size must be at least 64 x 64, got {self.offscreen_size}")


def furniture_body(name: str) -> str:
    """Body name of a piece of furniture."""
    return f"furn/{name}"


def articulation_name(name: str) -> str:
    """Body, joint and actuator name of a door or drawer."""
    return f"art/{name}"


def object_body(name: str) -> str:
    """Body (and free joint) name of an object."""
    return f"obj/{name}"


def _fmt(*values: float) -> str:
    return " ".join(f"{value:.6g}" for value in values)


def _rgba(color: tuple[float, float, float], alpha: float = 1.0) -> str:
    return _fmt(*color, alpha)


def _box_geom(parent: ET.Element, name: str, box: Box, color: tuple[float, float, float],
              offset: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> ET.Element:
    center = tuple(c - o for c, o in zip(box.center, offset))
    return ET.SubElement(parent, "geom", name=name, type="box", pos=_fmt(*center), size=_fmt(*box.half),
                         rgba=_rgba(box.color or color), contype=str(_FURNITURE_CONTYPE),
                         conaffinity=str(_FURNITURE_CONAFFINITY))


def _add_furniture(worldbody: ET.Element, actuator: ET.Element, piece: Furniture) -> None:
    body = ET.SubElement(worldbody, "body", name=furniture_body(piece.name),
                         pos=_fmt(piece.pose.x, piece.pose.y, piece.elevation), euler=_fmt(0.0, 0.0, piece.pose.yaw))
    geometry = piece.geometry
    for box in geometry.static:
        _box_geom(body, f"furn/{piece.name}/{box.name}", box, piece.color)
    for part in geometry.moving:
        articulation = piece.articulation_for_slot(part.key)
        if articulation is None:
            raise SceneSpecError(f"furniture: {piece.name}: slot {part.key!r} has no articulation")
        name = articulation_name(articulation.name)
        child = ET.SubElement(body, "body", name=name, pos=_fmt(*part.pivot))
        hinge = part.joint == "hinge"
        ET.SubElement(child, "joint", name=name, type="hinge" if hinge else "slide",
                      axis=_fmt(*part.axis), limited="true", range=_fmt(*articulation.range),
                      damping=_fmt(hinge_damping(part) if hinge else SLIDE_DAMPING), armature=_fmt(JOINT_ARMATURE))
        for box in part.boxes:
            # Light panels (about the mass of real doors and drawers) so the position actuators move them briskly.
            _box_geom(child, f"{name}/{box.name}", box, piece.color, part.pivot).set("density", _fmt(PANEL_DENSITY))
        ET.SubElement(actuator, "position", name=name, joint=name, kp=_fmt(HINGE_KP if hinge else SLIDE_KP),
                      ctrllimited="true", ctrlrange=_fmt(*articulation.range))


def hinge_inertia(part: MovingPart, density: float = PANEL_DENSITY) -> float:
    """Moment of inertia (kg m^2) of a hinged part's boxes about its hinge axis (through `pivot` along `axis`)."""
    length = math.sqrt(sum(value * value for value in part.axis))
    axis = [value / length for value in part.axis]
    inertia = 0.0
    for box in part.boxes:
        sizes = [2.0 * half for half in box.half]
        mass = density * sizes[0] * sizes[1] * sizes[2]
        # The box's own inertia about the axis through its centre (box axes are the local axes) ...
        own = [mass * (sizes[(i + 1) % 3] ** 2 + sizes[(i + 2) % 3] ** 2) / 12.0 for i in range(3)]
        inertia += sum(own[i] * axis[i] ** 2 for i in range(3))
        # ... plus the parallel-axis term for its centre's distance from the hinge axis.
        offset = [c - p for c, p in zip(box.center, part.pivot)]
        along = sum(o * a for o, a in zip(offset, axis))
        inertia += mass * (sum(o * o for o in offset) - along * along)
    return inertia


def hinge_damping(part: MovingPart, density: float = PANEL_DENSITY, kp: float = HINGE_KP) -> float:
    """Joint damping (N m s/rad) that makes a hinged part critically damped on its position actuator.

    A door driven to a joint target then settles without swinging past it: damping = 2 sqrt(kp (I + armature)).
    """
    return 2.0 * math.sqrt(kp * (hinge_inertia(part, density) + JOINT_ARMATURE))


def _object_geoms(obj: SceneObject) -> list[dict[str, str]]:
    """Primitive geoms of an object as MJCF attribute dicts, positioned relative to its bounding-box centre."""
    sx, sy, sz = obj.size
    color = _rgba(obj.color)
    if obj.shape == "box":
        return [{"type": "box", "size": _fmt(sx / 2, sy / 2, sz / 2), "rgba": color}]
    if obj.shape == "cylinder":
        return [{"type": "cylinder", "size": _fmt(min(sx, sy) / 2, sz / 2), "rgba": color}]
    if obj.shape == "sphere":
        return [{"type": "sphere", "size": _fmt(min(sx, sy, sz) / 2), "rgba": color}]
    if obj.shape == "ellipsoid":
        return [{"type": "ellipsoid", "size": _fmt(sx / 2, sy / 2, sz / 2), "rgba": color}]
    if obj.shape == "banana":
        radius = min(sy, sz) / 2
        half = max(0.01, sx / 4 - radius / 2)
        geoms = []
        for sign in (-1, 1):
            angle = sign * 0.3
            x = sign * sx / 4 * math.cos(angle)
            y = sy / 2 - radius - abs(math.sin(angle)) * sx / 4
            geoms.append({"type": "capsule", "size": _fmt(radius, half), "pos": _fmt(x, y * 0.5, 0.0),
                          "euler": _fmt(0.0, math.pi / 2, angle), "rgba": color})
        return geoms
    if obj.shape == "bowl":
        radius, wall = min(sx, sy) / 2, 0.006
        geoms = [{"type": "cylinder", "size": _fmt(radius * 0.55, 0.006), "pos": _fmt(0.0, 0.0, -sz / 2 + 0.006),
                  "rgba": color}]
        count = 12
        for index in range(count):
            angle = 2 * math.pi * index / count
            ring = radius - wall
            geoms.append({"type": "box", "size": _fmt(wall, radius * math.sin(math.pi / count) + 0.002, sz / 2),
                          "pos": _fmt(ring * math.cos(angle), ring * math.sin(angle), 0.0),
                          "euler": _fmt(0.0, 0.0, angle), "rgba": color})
        return geoms
    if obj.shape == "mug":
        radius = sy / 2
        body_x = -(sx - sy) / 2
        return [
            {"type": "cylinder", "size": _fmt(radius, sz / 2), "pos": _fmt(body_x, 0.0, 0.0), "rgba": color},
            {"type": "cylinder", "size": _fmt(radius * 0.85, 0.001), "pos": _fmt(body_x, 0.0, sz / 2),
             "rgba": "0.15 0.1 0.08 1", "contype": "0", "conaffinity": "0"},
            {"type": "box", "size": _fmt((sx - sy) / 2, 0.006, sz * 0.3), "pos": _fmt(sx / 2 - (sx - sy) / 2, 0.0,
                                                                                     0.0),
             "rgba": color},
        ]
    raise SceneSpecError(f"objects: {obj.name}: unknown shape {obj.shape!r}")


def _add_object(worldbody: ET.Element, spec: SceneSpec, obj: SceneObject) -> None:
    x, y, z, yaw = layout.object_start_pose(spec, obj)
    name = object_body(obj.name)
    body = ET.SubElement(worldbody, "body", name=name, pos=_fmt(x, y, z), euler=_fmt(0.0, 0.0, yaw))
    ET.SubElement(body, "freejoint", name=name)
    geoms = _object_geoms(obj)
    colliding = [geom for geom in geoms if geom.get("contype") != "0"]
    round_shape = obj.shape in ("sphere", "ellipsoid", "banana", "cylinder")
    for index, attributes in enumerate(geoms):
        attributes = dict(attributes)
        attributes.setdefault("contype", str(_OBJECT_CONTYPE))
        attributes.setdefault("conaffinity", str(_OBJECT_CONAFFINITY))
        if attributes["contype"] != "0":
            attributes["mass"] = f"{obj.mass / len(colliding):.6g}"
            attributes["condim"] = "6" if round_shape else "4"
            attributes["friction"] = _ROLLING_FRICTION if obj.shape == "sphere" else _FRICTION
        else:
            attributes["mass"] = "0"
        ET.SubElement(body, "geom", {"name": f"{name}/{index}", **attributes})


def build_mjcf(spec: SceneSpec, options: MjcfOptions | None = None) -> str:
    """MJCF text of a scene with the Fetch robot at its start pose (set by the backend at reset).

    Raises:
        SceneSpecError: an object's offset is unresolved (see layout.resolve_offsets) or the spec is inconsistent.
    """
    options = options or MjcfOptions()
    root = ET.Element("mujoco", model=spec.name)
    ET.SubElement(root, "compiler", angle="radian", meshdir=str(fetch_model.fetch_mesh_dir()), autolimits="true")
    option = ET.SubElement(root, "option", timestep=f"{options.timestep:g}", integrator="implicitfast",
                           cone="pyramidal")
    # Objects at rest sleep (leave the pipeline, with their contacts) until something touches them: about 4x faster
    # physics in a furnished apartment. The robot and doors and drawers are actuated and never sleep.
    ET.SubElement(option, "flag", sleep="enable")
    size_width, size_height = options.offscreen_size
    visual = ET.SubElement(root, "visual")
    ET.SubElement(visual, "global", offwidth=str(size_width), offheight=str(size_height))
    ET.SubElement(visual, "quality", offsamples="0", shadowsize="0")
    ET.SubElement(visual, "headlight", active="0", ambient="0 0 0", diffuse="0 0 0", specular="0 0 0")
    ET.SubElement(visual, "map", znear="0.005", zfar="5")
    xmin, ymin, xmax, ymax = spec.bounds()
    extent = max(xmax - xmin, ymax - ymin, 3.0) / 2
    ET.SubElement(root, "statistic", extent=f"{extent:g}", center=_fmt((xmin + xmax) / 2, (ymin + ymax) / 2, 1.0))
    default = ET.SubElement(root, "default")
    ET.SubElement(default, "geom", solref="0.01 1", solimp="0.95 0.99 0.001")
    asset = ET.SubElement(root, "asset")
    ET.SubElement(asset, "texture", type="skybox", builtin="gradient", rgb1="0.85 0.88 0.92", rgb2="0.55 0.6 0.68",
                  width="64", height="64")
    fetch_model.add_fetch_assets(asset)
    worldbody = ET.SubElement(root, "worldbody")
    actuator = ET.Element("actuator")
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    ET.SubElement(worldbody, "light", name="sun", directional="true", pos=_fmt(cx, cy, 6.0), dir="0.5 0.2 -0.6",
                  diffuse="0.4 0.4 0.38", ambient="0.5 0.5 0.5", specular="0 0 0", castshadow="false")
    ET.SubElement(worldbody, "light", name="fill", directional="true", pos=_fmt(cx, cy, 6.0), dir="-0.4 -0.6 -0.5",
                  diffuse="0.35 0.35 0.37", specular="0 0 0", castshadow="false")
    ET.SubElement(worldbody, "geom", name="floor", type="plane", size=_fmt(extent * 2 + 2, extent * 2 + 2, 0.1),
                  pos=_fmt(cx, cy, 0.0), contype=str(_FLOOR_CONTYPE), conaffinity=str(_FLOOR_CONAFFINITY),
                  group="4", rgba="0.5 0.5 0.5 1")
    for room in spec.rooms:
        rx0, ry0, rx1, ry1 = room.bounds
        ET.SubElement(worldbody, "geom", name=f"room/{room.name}", type="box",
                      pos=_fmt((rx0 + rx1) / 2, (ry0 + ry1) / 2, -0.0005),
                      size=_fmt((rx1 - rx0) / 2, (ry1 - ry0) / 2, 0.0005), rgba=_rgba(room.floor_color),
                      contype="0", conaffinity="0")
    ET.SubElement(worldbody, "geom", name="ceiling", type="box", pos=_fmt(cx, cy, CEILING_HEIGHT + 0.02),
                  size=_fmt((xmax - xmin) / 2, (ymax - ymin) / 2, 0.02), rgba="0.95 0.95 0.93 1", contype="0",
                  conaffinity="0", group=str(WALL_GROUP))
    for index, wall in enumerate(spec.walls):
        (x0, y0), (x1, y1) = wall.start, wall.end
        length = math.hypot(x1 - x0, y1 - y0)
        ET.SubElement(worldbody, "geom", name=f"wall/{index}", type="box",
                      pos=_fmt((x0 + x1) / 2, (y0 + y1) / 2, wall.height / 2),
                      size=_fmt(length / 2 + wall.thickness / 2, wall.thickness / 2, wall.height / 2),
                      euler=_fmt(0.0, 0.0, math.atan2(y1 - y0, x1 - x0)), rgba="0.93 0.91 0.86 1",
                      contype=str(_FURNITURE_CONTYPE), conaffinity=str(_FURNITURE_CONAFFINITY), group=str(WALL_GROUP))
    for piece in spec.furniture:
        _add_furniture(worldbody, actuator, piece)
    for obj in spec.objects:
        _add_object(worldbody, spec, obj)
    fetch_model.build_fetch(worldbody, options.cameras)
    fetch_model.add_fetch_actuators(actuator)
    root.append(actuator)
    equality = ET.SubElement(root, "equality")
    if spec.objects:
        ET.SubElement(equality, "weld", name=GRASP_EQUALITY, body1=fetch.PREFIX + fetch_model.GRIPPER_BODY,
                      body2=object_body(spec.objects[0].name), active="false", solref="0.01 1",
                      solimp="0.95 0.99 0.001")
    parts = [articulation for piece in spec.furniture for articulation in piece.articulations]
    if parts:
        # A handle held by the fingers: a point (ball) constraint, so the part turns freely about the grip.
        ET.SubElement(equality, "connect", name=HANDLE_EQUALITY, body1=fetch.PREFIX + fetch_model.GRIPPER_BODY,
                      body2=articulation_name(parts[0].name), anchor="0 0 0", active="false", solref="0.02 1")
    if not len(equality):
        root.remove(equality)
    return ET.tostring(root, encoding="unicode")
