"""Value types the robot and the privileged scene exchange with the skills (see emmoe_core.robot).

Poses are z-up world frames in metres and radians; quaternions are (w, x, y, z). Every backend (MuJoCo, Habitat,
a real Fetch) returns these types, the bridge turns them into ROS messages, and the executor reasons on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from emmoe_core.protocol import VIEWS

INSTANCE_KINDS: tuple[str, ...] = ("object", "furniture", "container", "room")

__all__ = ["VIEWS", "INSTANCE_KINDS", "BackendError", "PrivilegedAccessError", "UnknownNameError", "Pose", "InstanceState", "ContainerState",
           "RobotState", "CameraView", "Observation"]


class BackendError(RuntimeError):
    """The robot or simulator failed (build, step, render, a driver) or was used before reset."""


class PrivilegedAccessError(BackendError):
    """A skill asked for privileged scene state where the setting forbids it (without background information)."""

    def __init__(self, query: str) -> None:
        super().__init__(f"privileged query {query!r} refused: the no_background setting gives skills only the "
                         f"robot's sensors")
        self.query = query


class UnknownNameError(KeyError):
    """A requested name matches nothing in the scene."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"{self.name!r} matches nothing in the scene"


@dataclass(frozen=True)
class Pose:
    """A world pose.

    Attributes:
        position: (x, y, z) metres.
        orientation: unit quaternion (w, x, y, z).
    """

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)

    @property
    def yaw(self) -> float:
        """Rotation about z (radians)."""
        w, x, y, z = self.orientation
        return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))

    @classmethod
    def from_yaw(cls, x: float, y: float, z: float, yaw: float) -> Pose:
        """A pose rotated about z only."""
        return cls((x, y, z), (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)))


@dataclass(frozen=True)
class InstanceState:
    """Privileged state of an object, piece of furniture, articulated container or room.

    Attributes:
        name: unique instance name ("apple_0", "brown_table_0", "fridge_0", "kitchen_drawer_1", "living_room_0").
        canonical: alias-table entry ("013_apple", "frl_apartment_table_01", "fridge", "kitchen_counter").
        kind: one of INSTANCE_KINDS ("container" for furniture with doors or drawers, and for the drawers).
        pose: pose of the instance's bounding-box centre.
        size: bounding-box size (x, y, z) in the instance's frame.
        receptacle: for objects: the furniture or drawer it rests on or in; "" when on the floor or held.
        surface: for objects: the support region of that receptacle ("top", "sink", "shelf_0", ...).
        inside: for objects: whether that region is inside a container.
        distance: planar distance from the robot base to the pose (metres).
    """

    name: str
    canonical: str
    kind: str
    pose: Pose
    size: tuple[float, float, float]
    receptacle: str = ""
    surface: str = ""
    inside: bool = False
    distance: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in INSTANCE_KINDS:
            raise ValueError(f"InstanceState {self.name!r}: kind must be one of {', '.join(INSTANCE_KINDS)}, "
                             f"got {self.kind!r}")


@dataclass(frozen=True)
class ContainerState:
    """Privileged state of one door or drawer.

    Attributes:
        name: articulation instance name ("fridge_0_door", "kitchen_drawer_1").
        canonical: alias-table entry of the furniture it belongs to ("fridge", "kitchen_counter").
        label: "door" or "drawer".
        furniture: instance name of the furniture it belongs to.
        joint_type: "hinge" (radians) or "slide" (metres).
        position: current joint value; 0 is closed.
        lower: lower joint limit.
        upper: upper joint limit.
        open_threshold: value at or above which it counts as open (release: fridge 0.8 rad, drawer 0.25 m).
        handle: world position of its handle (NaN where unknown: QueryScene does not carry it).
        distance: planar distance from the robot base to the part (metres; inf where unknown).
    """

    name: str
    canonical: str
    label: str
    furniture: str
    joint_type: str
    position: float
    lower: float
    upper: float
    open_threshold: float
    handle: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    distance: float = math.inf

    @property
    def is_open(self) -> bool:
        """position >= open_threshold."""
        return self.position >= self.open_threshold

    @property
    def is_drawer(self) -> bool:
        """Whether the part is a drawer (a slide joint)."""
        return self.joint_type == "slide"


@dataclass(frozen=True)
class RobotState:
    """Proprioception and base pose of the robot.

    Attributes:
        base: base pose on the floor (z = 0).
        base_velocity: (forward m/s, turn rad/s) in the base frame.
        joint_names: names of the actuated joints (torso, head, arm, fingers).
        joint_positions: their positions, same order.
        joint_velocities: their velocities, same order.
        gripper: pose of the grasp point between the fingers.
        held_object: instance name of the grasped object, or None.
        time: simulated time (seconds since reset).
    """

    base: Pose
    base_velocity: tuple[float, float]
    joint_names: tuple[str, ...]
    joint_positions: tuple[float, ...]
    joint_velocities: tuple[float, ...]
    gripper: Pose
    held_object: str | None
    time: float


@dataclass(frozen=True)
class CameraView:
    """Intrinsics and pose of one camera at the instant of an observation (a real robot's camera_info and TF).

    Pixel (u, v), u along the row, v down the image, with depth d (metres along the optical axis) is the point
    position + rotation @ (d * (u + 0.5 - cx) / fx, d * (v + 0.5 - cy) / fy, d) in the world: `rotation` maps the
    optical frame (x right, y down, z forward) to the world.

    Attributes:
        width, height: image size in pixels.
        fx, fy, cx, cy: pinhole intrinsics in pixels.
        position: camera centre in the world (metres).
        rotation: (3, 3) optical-to-world rotation.
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    position: tuple[float, float, float]
    rotation: np.ndarray

    @classmethod
    def centred(cls, width: int, height: int, focal: float, position: tuple[float, float, float],
                rotation: np.ndarray) -> CameraView:
        """A camera with square pixels of focal length `focal` and its principal point at the image centre."""
        return cls(width, height, focal, focal, width / 2.0, height / 2.0, position, rotation)


@dataclass
class Observation:
    """What the cameras see at one instant.

    Attributes:
        time: simulated time.
        rgb: view -> (H, W, 3) uint8.
        depth: view -> (H, W) float32 metres (empty unless asked for).
        segmentation: view -> (H, W) int32 instance ids, -1 for walls, floor, robot (empty unless asked for).
        instance_names: instance id -> instance name.
        instance_canonicals: instance id -> canonical name.
        visible: view -> instance names seen in it, nearest first (empty unless segmentation was asked for).
        held_object: instance name of the grasped object, or None.
        cameras: view -> intrinsics and pose of its camera (empty where the backend does not give them).
    """

    time: float
    rgb: dict[str, np.ndarray]
    depth: dict[str, np.ndarray] = field(default_factory=dict)
    segmentation: dict[str, np.ndarray] = field(default_factory=dict)
    instance_names: tuple[str, ...] = ()
    instance_canonicals: tuple[str, ...] = ()
    visible: dict[str, tuple[str, ...]] = field(default_factory=dict)
    held_object: str | None = None
    cameras: dict[str, CameraView] = field(default_factory=dict)
