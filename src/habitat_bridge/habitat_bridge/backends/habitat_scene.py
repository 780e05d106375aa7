"""The Habitat scene as this project names it: objects, furniture, doors and drawers indexed by handle, their
bounding boxes, the on/in relations and the privileged-skill layout drawn from those boxes (ReplicaCAD gives no
furniture models here, so all of it is approximate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from emmoe_core.robot.layout import FurnitureLayout, PartLayout, SceneLayout, SupportRegion
from emmoe_core.robot.state import Pose

from habitat_bridge.backends.habitat_support import quaternion_of, rotation_to_zup, to_zup
from habitat_bridge.furniture import DOOR_DEFAULTS, DRAWER_DEFAULTS


@dataclass(frozen=True)
class Part:
    """A door or drawer: one movable link of an articulated object."""

    name: str
    furniture: str
    canonical: str
    link: int
    label: str
    joint_type: str
    threshold: float


def canonical_of(handle: str) -> str:
    """The alias-table name of a Habitat handle ("fridge_:0000" -> "fridge")."""
    return handle.split("_:")[0]


def box_size(obj: Any) -> tuple[float, float, float]:
    """Bounding-box size of a Habitat object in the z-up frame."""
    size = obj.root_scene_node.cumulative_bb.size()
    return float(size[0]), float(size[2]), float(size[1])


def index_scene(sim: Any, modules: Any) -> tuple[dict[str, tuple[Any, str]], dict[int, str], dict[str, Part]]:
    """Every rigid and articulated object (handle -> (object, kind)), semantic id -> handle, and every door or
    drawer (a revolute or prismatic link) by name "<handle>/<link>"."""
    objects: dict[str, tuple[Any, str]] = {}
    semantic: dict[int, str] = {}
    start = int(getattr(sim.habitat_config, "object_ids_start", 0))
    rigid = sim.get_rigid_object_manager().get_objects_by_handle_substring("")
    motion = modules.physics.MotionType
    for handle, obj in rigid.items():
        kind = "object" if obj.motion_type == motion.DYNAMIC else "furniture"
        objects[handle] = (obj, kind)
        semantic[int(obj.object_id) + start] = handle
    parts: dict[str, Part] = {}
    articulated = sim.get_articulated_object_manager().get_objects_by_handle_substring("")
    robot_id = sim.articulated_agent.sim_obj.object_id
    joint_types = modules.physics.JointType
    for handle, obj in articulated.items():
        if obj.object_id == robot_id:
            continue
        objects[handle] = (obj, "container")
        semantic[int(obj.object_id) + start] = handle
        for link in obj.get_link_ids():
            joint = obj.get_link_joint_type(link)
            if joint not in (joint_types.Revolute, joint_types.Prismatic):
                continue
            defaults = DOOR_DEFAULTS if joint == joint_types.Revolute else DRAWER_DEFAULTS
            name = f"{handle}/{obj.get_link_name(link)}"
            parts[name] = Part(name, handle, canonical_of(handle), link, defaults.label, defaults.joint,
                               defaults.open_threshold)
    return objects, semantic, parts


def support_relations(objects: dict[str, tuple[Any, str]], held: str | None) -> dict[str, tuple[str, str, bool]]:
    """Object handle -> (furniture or container it rests on, "", inside) from bounding boxes (approximate: no
    receptacle meshes are consulted; an object within a container's box below its top counts as inside). The held
    object rests on nothing."""
    supports = [(handle, obj) for handle, (obj, kind) in objects.items() if kind != "object"]
    found = {}
    for handle, (obj, kind) in objects.items():
        if kind != "object" or handle == held:
            continue
        x, y, z = to_zup(obj.translation)
        best, best_gap = "", None
        for support_handle, support in supports:
            sx, sy, sz = to_zup(support.translation)
            lx, ly, lz = box_size(support)
            if abs(x - sx) > lx / 2 or abs(y - sy) > ly / 2:
                continue
            gap = z - (sz + lz / 2)
            if -lz <= gap <= 0.3 and (best_gap is None or abs(gap) < best_gap):
                best, best_gap = support_handle, abs(gap)
        if best:
            support, support_kind = objects[best]
            below_top = z < to_zup(support.translation)[2] + box_size(support)[2] / 2
            found[handle] = (best, "", support_kind == "container" and below_top)
    return found


def bounding_box_layout(objects: dict[str, tuple[Any, str]], parts: dict[str, Part]) -> SceneLayout:
    """An approximate layout from bounding boxes (ReplicaCAD gives no furniture models here): each piece of
    furniture is its box with the top face as its one support region; a door turns about the vertical axis
    through its link origin, a drawer slides out of the front (-y); handles sit at the link origins."""
    pieces, regions = [], []
    for handle, (obj, kind) in objects.items():
        if kind == "object":
            continue
        x, y, z = to_zup(obj.translation)
        yaw = Pose((x, y, z), rotation_to_zup(quaternion_of(obj.rotation))).yaw
        size = box_size(obj)
        c, s = math.cos(yaw), math.sin(yaw)
        found = []
        for part in (item for item in parts.values() if item.furniture == handle):
            hx, hy, hz = to_zup(obj.get_link_scene_node(part.link).translation)
            local = (c * (hx - x) + s * (hy - y), -s * (hx - x) + c * (hy - y), hz)
            axis = (0.0, 0.0, 1.0) if part.joint_type == "hinge" else (0.0, -1.0, 0.0)
            found.append(PartLayout(part.name, part.joint_type, axis, local, local, local[1]))
        pieces.append(FurnitureLayout(handle, "", x, y, yaw, size, 0.0, tuple(found)))
        regions.append(SupportRegion(handle, "top", handle, (x, y, z + size[2] / 2), (size[0] / 2, size[1] / 2),
                                     yaw))
    return SceneLayout(tuple(pieces), tuple(regions))
