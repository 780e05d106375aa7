"""Every topic, service and action name of the HomieBot stack, in one place (no ROS import: plain strings).

Nodes and clients import their names from here, never from one another.
"""

from __future__ import annotations

# ---- the benchmark (planner, evaluator, runner) ------------------------------------------------------------------
RUN_TASK_ACTION = "/emmoe/run_task"  # emmoe_interfaces/action/RunTask, served by the planner
STEPS_TOPIC = "/emmoe/steps"  # emmoe_interfaces/msg/StepRecord, published by the planner
SCORES_TOPIC = "/emmoe/run_scores"  # one score per finished run, published by the evaluator
EVALUATOR_NODE = "emmoe_evaluator"
FINISH_RUNS_SERVICE = f"/{EVALUATOR_NODE}/finish_runs"  # std_srvs/srv/Trigger (the node's private `~/finish_runs`)

# ---- the executor and the error-detection monitor ---------------------------------------------------------------
SUBTASK_ACTION = "/subtask"  # emmoe_interfaces/action/ExecuteSubtask, served by the executor
SUBTASK_STATUS_TOPIC = f"{SUBTASK_ACTION}/_action/status"  # the action's standard goal status topic
SUBTASK_FEEDBACK_TOPIC = f"{SUBTASK_ACTION}/_action/feedback"  # the action's standard feedback topic
CHECK_SUBTASK_SERVICE = "/emmoe/check_subtask"  # emmoe_interfaces/srv/CheckSubtask, served by the monitor
ERRORS_TOPIC = "/emmoe/errors"  # emmoe_interfaces/msg/ExecutionError

# ---- the skill servers ------------------------------------------------------------------------------------------
SKILLS_NAMESPACE = "/skills"


def skill_action(server: str, kind: str) -> str:
    """`/skills/<server>/<kind>`; kind is "navigate" (Navigate) or "manipulate" (Manipulate)."""
    if kind not in ("navigate", "manipulate"):
        raise ValueError(f"skill action kind must be navigate or manipulate, got {kind!r}")
    return f"{SKILLS_NAMESPACE}/{server}/{kind}"


# ---- the simulator bridge ---------------------------------------------------------------------------------------
RESET_EPISODE_SERVICE = "/sim/reset_episode"  # emmoe_interfaces/srv/ResetEpisode
GET_OBSERVATION_SERVICE = "/sim/get_observation"  # emmoe_interfaces/srv/GetObservation
QUERY_SCENE_SERVICE = "/sim/query_scene"  # emmoe_interfaces/srv/QueryScene
ODOM_TOPIC = "/odom"  # nav_msgs/Odometry
JOINT_STATES_TOPIC = "/joint_states"  # sensor_msgs/JointState
CLOCK_TOPIC = "/clock"  # rosgraph_msgs/Clock (simulated time)
CMD_VEL_TOPIC = "/cmd_vel"  # geometry_msgs/Twist
# Video streams (sensor_msgs/Image rgb8), published only while someone subscribes; recorded by the evaluator.
HEAD_VIDEO_TOPIC = "/sim/head_front/image_raw"  # the head camera's front view
THIRD_PERSON_VIDEO_TOPIC = "/sim/third_person/image_raw"  # a view of the robot from behind and above
# Video stream -> the topic the bridge publishes it on while someone subscribes (habitat_bridge.bridge_node).
VIDEO_TOPICS: dict[str, str] = {"head": HEAD_VIDEO_TOPIC, "third": THIRD_PERSON_VIDEO_TOPIC}

# ---- a real Fetch's drivers (the fetch backend; /cmd_vel, /odom and /joint_states as above) ---------------------------
FETCH_BASE_SCAN_TOPIC = "/base_scan"  # sensor_msgs/LaserScan
FETCH_RGB_TOPIC = "/head_camera/rgb/image_raw"  # sensor_msgs/Image (rgb8)
FETCH_DEPTH_TOPIC = "/head_camera/depth_registered/image_raw"  # sensor_msgs/Image (32FC1 metres)
FETCH_CAMERA_INFO_TOPIC = "/head_camera/rgb/camera_info"  # sensor_msgs/CameraInfo (the depth is registered to it)
FETCH_INSTANCES_TOPIC = "/head_camera/instances"  # emmoe_interfaces/InstanceMasks: a detector's masks of each image
FETCH_ARM_ACTION = "/arm_controller/follow_joint_trajectory"  # control_msgs/action/FollowJointTrajectory
FETCH_TORSO_ACTION = "/torso_controller/follow_joint_trajectory"  # control_msgs/action/FollowJointTrajectory
FETCH_HEAD_ACTION = "/head_controller/follow_joint_trajectory"  # control_msgs/action/FollowJointTrajectory
FETCH_GRIPPER_ACTION = "/gripper_controller/gripper_action"  # control_msgs/action/GripperCommand
SOFTWARE_STOP_TOPIC = "/homiebot/stop"  # std_msgs/Empty: any message latches the fetch backend's software stop

def camera_topic(view: str, depth: bool = False) -> str:
    """`/head_camera/<view>/image_raw` (rgb8), or `/head_camera/<view>/depth/image_raw` (32FC1 metres)."""
    return f"/head_camera/{view}/depth/image_raw" if depth else f"/head_camera/{view}/image_raw"
