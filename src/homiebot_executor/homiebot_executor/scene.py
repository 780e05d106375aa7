"""A plain snapshot of the privileged scene state the executor reasons about (what /sim/query_scene answers).

The checks, the name mapping and the execution loop work on `SceneSnapshot`, never on ROS messages, so they run and
are tested without rclpy. `homiebot_executor.messages` converts a QueryScene response into a snapshot; the
privileged policies build one straight from the simulator backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

OBJECT_KINDS: tuple[str, ...] = ("object", "furniture", "container", "room")


@dataclass(frozen=True)
class ObjectInfo:
    """One object, piece of furniture or room of the scene.

    Attributes:
        name: unique instance name ("apple_0", "fridge_0").
        canonical: alias-table entry ("013_apple", "fridge").
        kind: "object" (graspable), "furniture", "container" (furniture with doors or drawers) or "room".
        position: centre in the world frame (x, y, z), metres.
        size: bounding-box size (x, y, z), metres.
        on: instance name of the receptacle the object rests on or in ("" when none or held).
        inside: whether the object lies inside a container.
        distance: planar distance from the robot base, metres.
    """

    name: str
    canonical: str
    kind: str
    position: tuple[float, float, float]
    size: tuple[float, float, float] = (0.0, 0.0, 0.0)
    on: str = ""
    inside: bool = False
    distance: float = math.inf

    def __post_init__(self) -> None:
        if self.kind not in OBJECT_KINDS:
            raise ValueError(f"ObjectInfo {self.name!r}: kind must be one of {', '.join(OBJECT_KINDS)}, "
                             f"got {self.kind!r}")


@dataclass(frozen=True)
class ContainerInfo:
    """One articulated part: a fridge or cabinet door, a drawer.

    Attributes:
        name: unique instance name of the part ("fridge_0_door", "kitchen_drawer_1").
        canonical: alias-table entry the part answers to ("fridge", "kitchen_counter").
        joint_type: "hinge" (radians) or "slide" (metres).
        position: current joint value; 0 is closed.
        lower_limit: joint lower limit.
        upper_limit: joint upper limit.
        open_threshold: value at or above which the part counts as open (fridge 0.8 rad, drawer 0.25 m).
        is_open: position >= open_threshold.
        owner: instance name of the furniture the part belongs to ("" when unknown).
        distance: planar distance from the robot base to the part's furniture, metres.
    """

    name: str
    canonical: str
    joint_type: str
    position: float
    lower_limit: float
    upper_limit: float
    open_threshold: float
    is_open: bool
    owner: str = ""
    distance: float = math.inf

    @property
    def is_drawer(self) -> bool:
        """Whether the part is a drawer (a slide joint)."""
        return self.joint_type == "slide"


@dataclass(frozen=True)
class SceneSnapshot:
    """The privileged state at one instant.

    Attributes:
        robot_position: base position (x, y), metres.
        robot_yaw: base heading, radians.
        held_object: instance name of the object in the gripper, "" when the hand is empty.
        contact_force: largest contact force on the robot during the last control step, newtons.
        objects: objects, furniture (and rooms when the simulator reports them).
        containers: articulated parts.
    """

    robot_position: tuple[float, float]
    robot_yaw: float = 0.0
    held_object: str = ""
    contact_force: float = 0.0
    objects: tuple[ObjectInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()
    _objects_by_name: dict[str, ObjectInfo] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_objects_by_name", {item.name: item for item in self.objects})

    def object(self, name: str) -> ObjectInfo | None:
        """The object, furniture or room called `name`."""
        return self._objects_by_name.get(name)

    def container(self, name: str) -> ContainerInfo | None:
        """The articulated part called `name`."""
        return next((item for item in self.containers if item.name == name), None)

    def containers_of(self, owner: str) -> tuple[ContainerInfo, ...]:
        """The articulated parts of one piece of furniture."""
        return tuple(item for item in self.containers if item.owner == owner)

    @property
    def hand_empty(self) -> bool:
        """Whether nothing is in the gripper."""
        return not self.held_object

    def held_canonical(self) -> str:
        """Canonical name of the held object ("" when the hand is empty or the object is unknown)."""
        held = self.object(self.held_object) if self.held_object else None
        return held.canonical if held is not None else ""
