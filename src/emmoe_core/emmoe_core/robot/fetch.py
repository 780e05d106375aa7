"""Facts about the Fetch robot that skills and backends share: joint names, arm poses, base size, arm reach.

Every backend drives a Fetch (MuJoCo's model, Habitat's hab_fetch, the real robot), so these are robot facts, not
simulator details. `Robot.robot_description()` returns the kinematic tree with these joint names, each prefixed with
PREFIX, and the grasp point as the site PREFIX + GRIP_SITE.
"""

from __future__ import annotations

PREFIX = "fetch/"
BASE_JOINTS: tuple[str, ...] = ("base_x", "base_y", "base_yaw")
ARM_JOINTS: tuple[str, ...] = ("shoulder_pan_joint", "shoulder_lift_joint", "upperarm_roll_joint", "elbow_flex_joint",
                               "forearm_roll_joint", "wrist_flex_joint", "wrist_roll_joint")
HEAD_JOINTS: tuple[str, ...] = ("head_pan_joint", "head_tilt_joint")
TORSO_JOINT = "torso_lift_joint"
FINGER_JOINTS: tuple[str, ...] = ("r_gripper_finger_joint", "l_gripper_finger_joint")
# The grasp point between the fingers (a site of the robot description).
GRIP_SITE = "grip"
# Fetch's "tucked" arm (the pose it drives with): joint order as ARM_JOINTS.
TUCKED_ARM: tuple[float, ...] = (1.32, 1.40, -0.2, 1.72, 0.0, 1.66, 0.0)
# Fetch's base radius (its front edge, metres), and with a small margin.
BASE_RADIUS = 0.29
ROBOT_RADIUS = 0.32
# The base laser (a SICK TIM571): mounted LASER_MOUNT (forward, left, up, metres) from the base frame, LASER_RAYS rays
# from -LASER_HALF_ANGLE to +LASER_HALF_ANGLE radians (220 degrees), ranges LASER_RANGE metres, LASER_HZ scans/s.
LASER_MOUNT: tuple[float, float, float] = (0.235, 0.0, 0.2878)
LASER_HALF_ANGLE = 1.91986
LASER_RAYS = 662
LASER_RANGE: tuple[float, float] = (0.05, 25.0)
LASER_HZ = 15.0
# Planar distance from the base centre within which the arm works (metres): the skills stand at most this far from
# what they grasp or reach.
ARM_REACH = 0.88
