"""Configuration of the `fetch` backend: the robot's ROS interface names and the safety limits."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from emmoe_core import topics
from emmoe_core.robot import fetch
from emmoe_core.validation import require_positive_fields

from habitat_bridge.fetch.safety import SafetyConfig


# The joints each trajectory controller (FetchTopics.<group>_action) moves, in the order the backends take them.
JOINT_GROUPS: dict[str, tuple[str, ...]] = {"arm": fetch.ARM_JOINTS, "torso": (fetch.TORSO_JOINT,),
                                            "head": fetch.HEAD_JOINTS}


@dataclass(frozen=True)
class FetchTopics:
    """Names of a Fetch's standard ROS interfaces (its ROS 1 drivers through ros1_bridge, or ROS 2 drivers).

    Attributes:
        cmd_vel: base velocity commands (geometry_msgs/Twist).
        odom: base odometry (nav_msgs/Odometry); its stamps are the robot's clock.
        joint_states: sensor_msgs/JointState of torso, head, arm and fingers.
        base_scan: the base laser (sensor_msgs/LaserScan).
        rgb, depth, camera_info: the head camera's colour image, its depth registered to it, and their intrinsics.
        instances: an object detector's masks of each colour image (emmoe_interfaces/InstanceMasks).
        arm_action, torso_action, head_action: control_msgs/FollowJointTrajectory action servers.
        gripper_action: control_msgs/GripperCommand action server.
        stop: std_msgs/Empty; any message latches the software stop (every motion halts).
    """

    cmd_vel: str = topics.CMD_VEL_TOPIC
    odom: str = topics.ODOM_TOPIC
    joint_states: str = topics.JOINT_STATES_TOPIC
    base_scan: str = topics.FETCH_BASE_SCAN_TOPIC
    rgb: str = topics.FETCH_RGB_TOPIC
    depth: str = topics.FETCH_DEPTH_TOPIC
    camera_info: str = topics.FETCH_CAMERA_INFO_TOPIC
    instances: str = topics.FETCH_INSTANCES_TOPIC
    arm_action: str = topics.FETCH_ARM_ACTION
    torso_action: str = topics.FETCH_TORSO_ACTION
    head_action: str = topics.FETCH_HEAD_ACTION
    gripper_action: str = topics.FETCH_GRIPPER_ACTION
    stop: str = topics.SOFTWARE_STOP_TOPIC

    def __post_init__(self) -> None:
        for item in fields(self):
            name = getattr(self, item.name)
            if not isinstance(name, str) or not name.startswith("/") or " " in name:
                raise ValueError(f"FetchTopics.{item.name} must be an absolute ROS name, got {name!r}")


@dataclass(frozen=True)
class FetchConfig:
    """Settings of the `fetch` backend.

    Attributes:
        topics: the robot's interface names.
        safety: limits, fence, dry-run, sensor freshness.
        control_period: seconds between base commands (the stop halts the base within one).
        ready_timeout: seconds to wait for fresh odometry and joint states before refusing to start.
        gripper_open: finger gap of an open gripper (metres), and gripper_effort the most effort used (newtons).
    """

    topics: FetchTopics = field(default_factory=FetchTopics)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    control_period: float = 0.05
    ready_timeout: float = 10.0
    gripper_open: float = 0.1
    gripper_effort: float = 60.0

    def __post_init__(self) -> None:
        require_positive_fields(self, ("control_period", "ready_timeout", "gripper_open", "gripper_effort"))
