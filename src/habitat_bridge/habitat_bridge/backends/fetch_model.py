"""The Fetch mobile manipulator as an MJCF body tree, built around the STL meshes gymnasium-robotics ships.

Only the meshes are taken from gymnasium-robotics (`gymnasium_robotics/envs/assets/stls/fetch/`); its environment code
is never imported (it needs an older mujoco). Link offsets, joint axes and limits, masses and inertias are Fetch's
published kinematics as the gymnasium-robotics robot description states them. Differences from that description:

- the base is a planar mobile base: slide joints along world x and y and a yaw hinge, driven by integrated-velocity
  actuators that hold the base in place when it is pushed (the description pins the base with huge damping);
- every actuated joint has a position actuator (torso, head, seven arm joints, two fingers); bodies above the base
  have gravity compensation so the arm holds its pose;
- four head cameras (front, left, back, right) sit around the head-pan link at the height of Fetch's head camera,
  each turned by 90 degrees and tilted down; four third-person cameras look at the robot from each side;
- the e-stop and laser links are small primitives (their meshes hold more triangles than the whole arm).

Names are prefixed with "fetch/".
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from xml.etree import ElementTree as ET

from emmoe_core.robot.fetch import ARM_JOINTS, FINGER_JOINTS, GRIP_SITE, HEAD_JOINTS, LASER_MOUNT, PREFIX, TORSO_JOINT
from emmoe_core.robot.state import VIEWS
from emmoe_core.validation import require_positive_fields

THIRD_PERSON_VIEWS: tuple[str, ...] = tuple(f"third_{view}" for view in VIEWS)
GRIPPER_BODY = "gripper_link"
BASE_BODY = PREFIX + "base_link"
FINGER_OPEN = 0.05
# Geom groups: the arm and gripper (seen by the head cameras when they reach forward) and the rest of the body
# (base, torso, head: never inside the head views' fields of view, so the head views skip drawing them).
ARM_GROUP = 1
BODY_GROUP = 2
# Collision bits: robot geoms collide with anything whose conaffinity has ROBOT_BIT (furniture, walls, objects) and
# never with each other or the floor.
ROBOT_BIT = 2

_WHITE = "0.92 0.92 0.92 1"
_GREY = "0.356 0.361 0.376 1"
_BLUE = "0.086 0.506 0.767 1"


def fetch_mesh_dir() -> Path:
    """Directory of the Fetch STL meshes inside the installed gymnasium-robotics package.

    Raises:
        FileNotFoundError: gymnasium-robotics is not installed or ships no Fetch meshes.
    """
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("gymnasium-robotics is not installed: pip install gymnasium-robotics "
                                "(only its Fetch meshes are used)")
    path = Path(spec.submodule_search_locations[0]) / "envs" / "assets" / "stls" / "fetch"
    if not (path / "base_link_collision.stl").is_file():
        raise FileNotFoundError(f"no Fetch meshes in {path}")
    return path


_MESHES: dict[str, str] = {
    "base_link": "base_link_collision.stl", "torso_lift_link": "torso_lift_link_collision.stl",
    "torso_fixed_link": "torso_fixed_link.stl", "head_pan_link": "head_pan_link_collision.stl",
    "head_tilt_link": "head_tilt_link_collision.stl", "shoulder_pan_link": "shoulder_pan_link_collision.stl",
    "shoulder_lift_link": "shoulder_lift_link_collision.stl", "upperarm_roll_link": "upperarm_roll_link_collision.stl",
    "elbow_flex_link": "elbow_flex_link_collision.stl", "forearm_roll_link": "forearm_roll_link_collision.stl",
    "wrist_flex_link": "wrist_flex_link_collision.stl", "wrist_roll_link": "wrist_roll_link_collision.stl",
    "gripper_link": "gripper_link.stl", "l_wheel_link": "l_wheel_link_collision.stl",
    "r_wheel_link": "r_wheel_link_collision.stl",
}


@dataclass(frozen=True)
class FetchCameraConfig:
    """Head and third-person camera settings.

    Attributes:
        fovy: vertical field of view of the head views (degrees).
        tilt: downward pitch of the head views (radians).
        third_person_distance: horizontal distance of the third-person cameras from the base (metres).
        third_person_height: their height (metres).
    """

    fovy: float = 90.0
    tilt: float = 0.3
    third_person_distance: float = 1.9
    third_person_height: float = 1.7

    def __post_init__(self) -> None:
        if not 10.0 <= self.fovy <= 150.0:
            raise ValueError(f"camera fovy must be within [10, 150] degrees, got {self.fovy}")
        if not -1.2 <= self.tilt <= 1.2:
            raise ValueError(f"camera tilt must be within [-1.2, 1.2] rad, got {self.tilt}")
        require_positive_fields(self, ("third_person_distance", "third_person_height"))


def add_fetch_assets(asset: ET.Element) -> None:
    """Declare the Fetch meshes and materials in an <asset> element."""
    for name, file_name in _MESHES.items():
        ET.SubElement(asset, "mesh", name=PREFIX + name, file=file_name)


def _xyaxes_looking(direction: tuple[float, float, float]) -> str:
    """MJCF xyaxes of a camera looking along `direction` with z up."""
    fx, fy, fz = direction
    norm = math.sqrt(fx * fx + fy * fy + fz * fz)
    fx, fy, fz = fx / norm, fy / norm, fz / norm
    rx, ry, rz = fy, -fx, 0.0  # forward x world-up
    rnorm = math.hypot(rx, ry)
    rx, ry = rx / rnorm, ry / rnorm
    ux, uy, uz = ry * fz - rz * fy, rz * fx - rx * fz, rx * fy - ry * fx
    return " ".join(f"{value:.6f}" for value in (rx, ry, rz, ux, uy, uz))


def _fmt(*values: float) -> str:
    return " ".join(f"{value:.6g}" for value in values)


def _body(parent: ET.Element, name: str, pos: tuple[float, float, float], *, mass: float,
          inertia: tuple[float, float, float], com: tuple[float, float, float] = (0.0, 0.0, 0.0),
          quat: tuple[float, float, float, float] | None = None, gravcomp: bool = True) -> ET.Element:
    body = ET.SubElement(parent, "body", name=PREFIX + name, pos=_fmt(*pos))
    if gravcomp:
        body.set("gravcomp", "1")
    inertial = ET.SubElement(body, "inertial", pos=_fmt(*com), mass=f"{mass:g}", diaginertia=_fmt(*inertia))
    if quat is not None:
        inertial.set("quat", _fmt(*quat))
    return body


def _mesh_geom(body: ET.Element, mesh: str, rgba: str, group: int = BODY_GROUP) -> ET.Element:
    return ET.SubElement(body, "geom", name=PREFIX + mesh, type="mesh", mesh=PREFIX + mesh, rgba=rgba,
                         contype=str(ROBOT_BIT), conaffinity="0", group=str(group))


def _hinge(body: ET.Element, name: str, axis: str, limits: tuple[float, float] | None, *, damping: float,
           armature: float) -> None:
    joint = ET.SubElement(body, "joint", name=PREFIX + name, type="hinge", axis=axis, damping=f"{damping:g}",
                          armature=f"{armature:g}")
    if limits is not None:
        joint.set("limited", "true")
        joint.set("range", _fmt(*limits))
    else:
        joint.set("limited", "false")


def build_fetch(worldbody: ET.Element, cameras: FetchCameraConfig) -> ET.Element:
    """Add the Fetch body tree to <worldbody>; returns the base body. The base starts at the world origin."""
    base = ET.SubElement(worldbody, "body", name=BASE_BODY, pos="0 0 0")
    # Damping near critical for the base actuators' stiffness: the base tracks commands in about 0.1 s.
    ET.SubElement(base, "joint", name=PREFIX + "base_x", type="slide", axis="1 0 0", damping="3000", armature="1")
    ET.SubElement(base, "joint", name=PREFIX + "base_y", type="slide", axis="0 1 0", damping="3000", armature="1")
    ET.SubElement(base, "joint", name=PREFIX + "base_yaw", type="hinge", axis="0 0 1", damping="300",
                  armature="0.1", limited="false")
    ET.SubElement(base, "inertial", pos="-0.0036 0 0.0014", mass="70.1294", diaginertia="1.2869 1.2236 0.9868",
                  quat="0.7605 -0.0133 -0.0061 0.6491")
    _mesh_geom(base, "base_link", _WHITE)
    for side, y in (("l_wheel_link", 0.18738), ("r_wheel_link", -0.18738)):
        wheel = ET.SubElement(base, "body", name=PREFIX + side, pos=_fmt(0.0012914, y, 0.055325))
        ET.SubElement(wheel, "inertial", pos="0 0 0", mass="4.3", diaginertia="0.005 0.005 0.005")
        geom = _mesh_geom(wheel, side, _GREY)
        geom.set("contype", "0")
    # Small primitives for the laser and the e-stop.
    ET.SubElement(base, "geom", name=PREFIX + "laser_link", type="cylinder", size="0.03 0.025",
                  pos=_fmt(*LASER_MOUNT), rgba="0.79 0.82 0.93 1", contype="0", conaffinity="0",
                  group=str(BODY_GROUP))
    ET.SubElement(base, "geom", name=PREFIX + "estop_link", type="cylinder", size="0.02 0.01",
                  pos="-0.1246 0.2389 0.3113", quat="0.7071 0.7071 0 0", rgba="0.8 0 0 1", contype="0",
                  conaffinity="0", group=str(BODY_GROUP))
    torso_fixed = _body(base, "torso_fixed_link", (-0.0869, 0.0, 0.3774), mass=13.2775,
                        inertia=(0.3865, 0.3394, 0.1009), com=(-0.0722, 0.0057, 0.2656),
                        quat=(0.9995, 0.0249, 0.0177, 0.011), gravcomp=False)
    _mesh_geom(torso_fixed, "torso_fixed_link", _BLUE)
    _add_third_person_cameras(base, cameras)

    torso = _body(base, "torso_lift_link", (-0.0869, 0.0, 0.3774), mass=10.7796, inertia=(0.3365, 0.3354, 0.0943),
                  com=(-0.0013, -0.0009, 0.2935), quat=(0.9993, -0.0006, 0.0336, 0.0185))
    ET.SubElement(torso, "joint", name=PREFIX + TORSO_JOINT, type="slide", axis="0 0 1", limited="true",
                  range="0.0 0.3861", damping="2000", armature="1")
    _mesh_geom(torso, "torso_lift_link", _WHITE)

    head_pan = _body(torso, "head_pan_link", (0.0531, 0.0, 0.603), mass=2.2556, inertia=(0.0185, 0.0128, 0.0095),
                     com=(0.0321, 0.0161, 0.039), quat=(0.5148, 0.5451, -0.453, 0.4823))
    _hinge(head_pan, "head_pan_joint", "0 0 1", (-1.57, 1.57), damping=2.0, armature=0.05)
    _mesh_geom(head_pan, "head_pan_link", _GREY)
    _add_head_cameras(head_pan, cameras)
    head_tilt = _body(head_pan, "head_tilt_link", (0.1425, 0.0, 0.058), mass=0.9087, inertia=(0.0063, 0.0059, 0.0014),
                      com=(0.0081, 0.0025, 0.0113), quat=(0.6458, 0.66, -0.274, 0.2689))
    _hinge(head_tilt, "head_tilt_joint", "0 1 0", (-0.76, 1.45), damping=2.0, armature=0.05)
    _mesh_geom(head_tilt, "head_tilt_link", _BLUE)

    arm_links = (
        # name, position in parent, joint, axis, limits, mass, inertia, com, inertia quat, colour
        ("shoulder_pan_link", (0.1195, 0.0, 0.3486), "shoulder_pan_joint", "0 0 1", (-1.6056, 1.6056), 2.5587,
         (0.009, 0.0086, 0.0041), (0.0927, -0.0056, 0.0564), (-0.1364, 0.7624, -0.1562, 0.613), _WHITE),
        ("shoulder_lift_link", (0.117, 0.0, 0.06), "shoulder_lift_joint", "0 1 0", (-1.221, 1.518), 2.6615,
         (0.0116, 0.0112, 0.0023), (0.1432, 0.0072, -0.0001), (0.4382, 0.4382, 0.555, 0.555), _BLUE),
        ("upperarm_roll_link", (0.219, 0.0, 0.0), "upperarm_roll_joint", "1 0 0", None, 2.3311,
         (0.0047, 0.0045, 0.0019), (0.1165, 0.0014, 0.0), (-0.0136, 0.707, 0.0136, 0.707), _WHITE),
        ("elbow_flex_link", (0.133, 0.0, 0.0), "elbow_flex_joint", "0 1 0", (-2.251, 2.251), 2.1299,
         (0.0086, 0.0084, 0.002), (0.1279, 0.0073, 0.0), (0.4332, 0.4332, 0.5589, 0.5589), _BLUE),
        ("forearm_roll_link", (0.197, 0.0, 0.0), "forearm_roll_joint", "1 0 0", None, 1.6563,
         (0.0035, 0.0031, 0.0015), (0.1097, -0.0266, 0.0), (-0.0715, 0.7035, 0.0715, 0.7035), _WHITE),
        ("wrist_flex_link", (0.1245, 0.0, 0.0), "wrist_flex_joint", "0 1 0", (-2.16, 2.16), 1.725,
         (0.0042, 0.0042, 0.0018), (0.0882, 0.0009, -0.0001), (0.4895, 0.4895, 0.5103, 0.5103), _BLUE),
        ("wrist_roll_link", (0.1385, 0.0, 0.0), "wrist_roll_joint", "1 0 0", None, 0.1354,
         (0.0001, 0.0001, 0.0001), (0.0095, 0.0004, -0.0002), None, _WHITE),
    )
    parent = torso
    for name, pos, joint, axis, limits, mass, inertia, com, quat, color in arm_links:
        link = _body(parent, name, pos, mass=mass, inertia=inertia, com=com, quat=quat)
        _hinge(link, joint, axis, limits, damping=8.0, armature=0.1)
        _mesh_geom(link, name, color, ARM_GROUP)
        parent = link
    gripper = _body(parent, GRIPPER_BODY, (0.1664, 0.0, 0.0), mass=1.5175, inertia=(0.0024, 0.0019, 0.0013),
                    com=(-0.09, -0.0001, -0.0017), quat=(0.0, 0.7071, 0.0, 0.7071))
    _mesh_geom(gripper, GRIPPER_BODY, _GREY, ARM_GROUP)
    for finger, y, axis in (("r_gripper_finger_link", 0.0159, "0 1 0"), ("l_gripper_finger_link", -0.0159, "0 -1 0")):
        link = _body(gripper, finger, (0.0, y, 0.0), mass=0.1, inertia=(0.0002, 0.0002, 0.0002), com=(-0.01, 0, 0))
        joint_name = finger.replace("_link", "_joint")
        ET.SubElement(link, "joint", name=PREFIX + joint_name, type="slide", axis=axis, limited="true",
                      range=f"0 {FINGER_OPEN:g}", damping="20", armature="0.1")
        ET.SubElement(link, "geom", name=PREFIX + finger, type="box", size="0.0385 0.007 0.0135",
                      pos=_fmt(0.0, -0.008 if y > 0 else 0.008, 0.0), rgba=_GREY, contype=str(ROBOT_BIT),
                      conaffinity="0", condim="4", friction="1 0.05 0.01", group=str(ARM_GROUP))
    ET.SubElement(gripper, "site", name=PREFIX + GRIP_SITE, pos="0.02 0 0", size="0.01", rgba="0 0 0 0")
    return base


def _add_head_cameras(head_pan: ET.Element, cameras: FetchCameraConfig) -> None:
    """Four head views around the head-pan axis, at the height of Fetch's head camera."""
    radius, height = 0.1425 + 0.055, 0.058 + 0.0225
    for index, view in enumerate(VIEWS):
        yaw = index * math.pi / 2
        direction = (math.cos(yaw) * math.cos(cameras.tilt), math.sin(yaw) * math.cos(cameras.tilt),
                     -math.sin(cameras.tilt))
        ET.SubElement(head_pan, "camera", name=PREFIX + view, pos=_fmt(radius * math.cos(yaw), radius * math.sin(yaw),
                                                                        height),
                      xyaxes=_xyaxes_looking(direction), fovy=f"{cameras.fovy:g}")


def _add_third_person_cameras(base: ET.Element, cameras: FetchCameraConfig) -> None:
    """Four cameras looking at the robot from its front, left, back and right."""
    target = (0.0, 0.0, 0.65)
    for index, view in enumerate(THIRD_PERSON_VIEWS):
        yaw = index * math.pi / 2
        pos = (cameras.third_person_distance * math.cos(yaw), cameras.third_person_distance * math.sin(yaw),
               cameras.third_person_height)
        direction = (target[0] - pos[0], target[1] - pos[1], target[2] - pos[2])
        ET.SubElement(base, "camera", name=PREFIX + view, pos=_fmt(*pos), xyaxes=_xyaxes_looking(direction),
                      fovy="60")


def add_fetch_actuators(actuator: ET.Element) -> None:
    """Velocity actuators for the base, position actuators for everything else."""
    # Integrated-velocity actuators: the command is a velocity, the actuator's activation integrates it into a
    # position target that a stiff spring tracks, so the base holds its place when pushed.
    # Force limits keep a blocked base from pushing through furniture (the backend also stops the integrated target
    # from running away from the real position).
    for joint, gain, force in (("base_x", 30000.0, 1500.0), ("base_y", 30000.0, 1500.0), ("base_yaw", 3000.0, 300.0)):
        ET.SubElement(actuator, "intvelocity", name=PREFIX + joint, joint=PREFIX + joint, kp=f"{gain:g}",
                      ctrlrange="-2 2", actrange="-1000 1000", forcelimited="true", forcerange=f"{-force:g} {force:g}")
    ET.SubElement(actuator, "position", name=PREFIX + TORSO_JOINT, joint=PREFIX + TORSO_JOINT, kp="30000",
                  ctrllimited="true", ctrlrange="0 0.3861")
    for joint in HEAD_JOINTS:
        ET.SubElement(actuator, "position", name=PREFIX + joint, joint=PREFIX + joint, kp="30")
    arm_gains = (400.0, 600.0, 300.0, 300.0, 100.0, 100.0, 30.0)
    for joint, gain in zip(ARM_JOINTS, arm_gains):
        ET.SubElement(actuator, "position", name=PREFIX + joint, joint=PREFIX + joint, kp=f"{gain:g}")
    for joint in FINGER_JOINTS:
        ET.SubElement(actuator, "position", name=PREFIX + joint, joint=PREFIX + joint, kp="800", ctrllimited="true",
                      ctrlrange=f"0 {FINGER_OPEN:g}", forcelimited="true", forcerange="-60 60")


@lru_cache(maxsize=1)
def kinematic_description(head_cameras: bool = False) -> str:
    """MJCF of Fetch without geoms and cameras (kinematics only): what the backends give as robot_description.
    With `head_cameras` the four head cameras stay (their poses follow the head: the fetch backend's camera
    extrinsics)."""
    root = ET.Element("mujoco", model="fetch_kinematics")
    ET.SubElement(root, "compiler", angle="radian")
    worldbody = ET.SubElement(root, "worldbody")
    build_fetch(worldbody, FetchCameraConfig())
    for parent in root.iter():
        for child in list(parent):
            keep = head_cameras and child.tag == "camera" and child.get("name", "").removeprefix(PREFIX) in VIEWS
            if child.tag == "geom" or (child.tag == "camera" and not keep):
                parent.remove(child)
    return ET.tostring(root, encoding="unicode")
