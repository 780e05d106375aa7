"""The fake Fetch's simulator side: a real Fetch's behaviour behind its ROS interfaces, backed by the MuJoCo simulator.

The `fetch` backend is tested against it exactly as it would run against the robot: nothing reaches the simulator
except through these interfaces (habitat_bridge.fetch.config.FetchTopics names them):
- /cmd_vel (geometry_msgs/Twist) drives the base; like Fetch's base controller, a command older than
  `cmd_vel_timeout` seconds of robot time counts as zero;
- /odom (nav_msgs/Odometry) and /joint_states (sensor_msgs/JointState) every tick, stamped with the simulated
  clock (the robot's clock);
- the arm, torso and head FollowJointTrajectory servers move their joints along the goal's points (linear in
  between, at the points' times); a new goal replaces the running one, which is aborted, and starts from the
  running one's desired positions; a cancelled goal ends cancelled, and its joints are held where they are (as a
  joint trajectory controller holds them on a cancel);
- the head camera: the simulator's front head view as colour, registered depth and camera_info, and the instance
  masks an object detector would publish for it: the learned detector's (emmoe_core.perception.learned, run on the
  colour and depth; names are "<category>_<track>") when the core is given one, else the simulator's instance
  segmentation standing in for a detector (names are instance names); categories are alias entries;
- the gripper's GripperCommand server opens the fingers or closes them; closing on something between them (an
  object within 5 cm of the grasp point, or a handle) ends stalled, as a real gripper does;
- /base_scan (sensor_msgs/LaserScan): the base laser's ranges, ray-cast in the simulated room from the laser's mount
  (emmoe_core.robot.fetch.LASER_*), at LASER_HZ of the robot's clock.

`FakeFetchCore` is the simulator side (no ROS); habitat_bridge.fetch.fake_fetch_node is the thin node around it
(the `fake_fetch_node` process).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.state import CameraView, RobotState
from emmoe_core.validation import require_positive_fields

from habitat_bridge.backends.mujoco_backend import MujocoBackend
from habitat_bridge.fetch.config import JOINT_GROUPS

if TYPE_CHECKING:
    from emmoe_core.perception.learned import LearnedDetector

# Finger gap of an open gripper (metres); a goal below half of it closes the fingers.
OPEN_GAP = 0.1


@dataclass(frozen=True)
class FakeFetchConfig:
    """Settings of the fake Fetch.

    Attributes:
        tick: seconds of simulated time per tick.
        speed: simulated seconds per second of wall time (the node ticks every tick / speed seconds); above 1 the
            fake Fetch lives faster than a real one, for tests on a machine with CPU to spare.
        cmd_vel_timeout: a base command older than this (simulated seconds) counts as zero.
        grasp_reach: the fingers hold what lies within this distance of the grasp point (metres).
        arm_stiffness: factor on the simulated arm's position gains, and arm_damping the velocity gain as seconds
            times the position gain: a Fetch's arm controllers track stiffly and are damped, where the simulator's
            bare position servos lag and ring for about 0.3 s after a stop (x10 and 0.03 s: a stop holds the arm
            within 40 ms).
    """

    tick: float = 0.02
    speed: float = 1.0
    cmd_vel_timeout: float = 0.5
    grasp_reach: float = 0.05
    arm_stiffness: float = 10.0
    arm_damping: float = 0.03

    def __post_init__(self) -> None:
        require_positive_fields(self, ("tick", "speed", "cmd_vel_timeout", "grasp_reach", "arm_stiffness",
                                       "arm_damping"))


def laser_angles() -> np.ndarray:
    """The base laser's ray angles (radians, counter-clockwise from straight ahead)."""
    return np.linspace(-fetch.LASER_HALF_ANGLE, fetch.LASER_HALF_ANGLE, fetch.LASER_RAYS)


@dataclass
class _Motion:
    """A trajectory one controller is following: positions in its group's order at times from `start`."""

    start: float
    times: list[float]
    points: list[list[float]]

    def at(self, now: float) -> tuple[list[float], bool]:
        """Positions at `now` (linear between points) and whether the last point's time has passed."""
        elapsed = now - self.start
        if elapsed >= self.times[-1]:
            return self.points[-1], True
        for index in range(1, len(self.times)):
            if elapsed < self.times[index]:
                span = self.times[index] - self.times[index - 1]
                share = (elapsed - self.times[index - 1]) / span if span > 0 else 1.0
                before, after = self.points[index - 1], self.points[index]
                return [a + share * (b - a) for a, b in zip(before, after)], False
        return self.points[-1], True


class FakeFetchCore:
    """The simulated robot behind the fake Fetch's interfaces (see the module docstring)."""

    def __init__(self, backend: MujocoBackend, config: FakeFetchConfig | None = None,
                 detector: LearnedDetector | None = None) -> None:
        """Simulate the robot in `backend`; `detector` finds the objects of the head camera's masks (None: the
        simulator's instance segmentation stands in)."""
        self.backend = backend
        self.config = config or FakeFetchConfig()
        self.detector = detector
        # The newest base command: (forward, turn, robot time it arrived).
        self._twist = (0.0, 0.0, -math.inf)
        self._motions: dict[str, _Motion] = {}
        self._state_copy: mujoco.MjData | None = None
        self._tune_arm_servos()

    def _tune_arm_servos(self) -> None:
        """Stiffen and damp the arm's position servos (MuJoCo position actuator: force kp (q_target - q) - kv qdot)."""
        model = self.backend.model
        for joint in fetch.ARM_JOINTS:
            actuator = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, fetch.PREFIX + joint))
            if actuator >= 0:
                gain = model.actuator_gainprm[actuator, 0] * self.config.arm_stiffness
                model.actuator_gainprm[actuator, 0] = gain
                model.actuator_biasprm[actuator, 1] = -gain
                model.actuator_biasprm[actuator, 2] = -self.config.arm_damping * gain

    @property
    def time(self) -> float:
        """The robot's clock (simulated seconds)."""
        return self.backend.time

    def command_base(self, forward: float, turn: float) -> None:
        """A /cmd_vel message (held until `cmd_vel_timeout` passes without another)."""
        if math.isfinite(forward) and math.isfinite(turn):
            self._twist = (forward, turn, self.time)

    def follow(self, joint_names: Sequence[str], times: Sequence[float],
               points: Sequence[Sequence[float]]) -> str:
        """Start a trajectory (joint names in any order, one group); returns the group, or raises ValueError naming
        what is wrong with the goal."""
        group = next((name for name, joints in JOINT_GROUPS.items() if set(joint_names) == set(joints)), None)
        if group is None:
            raise ValueError(f"joints {list(joint_names)} are not those of one controller "
                             f"({', '.join(f'{name}: {list(joints)}' for name, joints in JOINT_GROUPS.items())})")
        if not points or len(times) != len(points) or any(len(point) != len(joint_names) for point in points):
            raise ValueError("a trajectory needs points with one position per joint")
        if any(later < earlier for earlier, later in zip(times, times[1:])) or times[0] < 0:
            raise ValueError("trajectory point times must not decrease")
        order = [list(joint_names).index(joint) for joint in JOINT_GROUPS[group]]
        # Like ros_control's joint trajectory controller, a new goal starts from where the running one wants the
        # joints now (not from where they lag behind it), so goals streamed every control period do not fall back.
        running = self._motions.get(group)
        current = running.at(self.time)[0] if running is not None else self._positions(JOINT_GROUPS[group])
        self._motions[group] = _Motion(self.time, [0.0, *times], [current] + [[point[i] for i in order]
                                                                              for point in points])
        return group

    def hold(self, group: str) -> None:
        """A cancelled goal: like a joint trajectory controller, hold `group`'s joints where they are now (their
        measured positions, not where the cancelled motion wanted them), so the servos brake at once."""
        self._motions[group] = _Motion(self.time, [0.0], [self._positions(JOINT_GROUPS[group])])

    def motion_done(self, group: str) -> bool:
        """Whether `group`'s trajectory reached its last point (True when it has none)."""
        motion = self._motions.get(group)
        return motion is None or motion.at(self.time)[1]

    def grip(self, gap: float) -> bool:
        """A gripper goal: open for a gap of at least half the open gap, else close; whether the fingers stalled on
        something (closing) or not."""
        if gap >= OPEN_GAP / 2:
            self.backend.open_gripper()
            return False
        return self.backend.close_gripper(self.config.grasp_reach) is not None

    def tick(self) -> None:
        """Step the simulator one tick with the current base command and trajectories."""
        forward, turn, arrived = self._twist
        if self.time - arrived > self.config.cmd_vel_timeout:
            forward, turn = 0.0, 0.0
        self.backend.set_base_velocity(forward, turn)
        for group, motion in self._motions.items():
            positions, _ = motion.at(self.time)
            if group == "arm":
                self.backend.set_arm_targets(positions)
            elif group == "torso":
                self.backend.set_torso_target(positions[0])
            else:
                self.backend.set_head_target(*positions)
        self.backend.step(self.config.tick)

    def copy_state(self) -> mujoco.MjData:
        """The simulation's state now, for `head_camera` in another thread while ticks go on (one copy, reused: take
        the next only after rendering this one)."""
        if self._state_copy is None:
            self._state_copy = mujoco.MjData(self.backend.model)
        mujoco.mj_copyData(self._state_copy, self.backend.model, self.backend.data)
        return self._state_copy

    def head_camera(self, state: mujoco.MjData
                    ) -> tuple[np.ndarray, np.ndarray, CameraView, np.ndarray, tuple[str, ...], tuple[str, ...]]:
        """The head camera (the front head view) in `state` (a `copy_state()`): RGB, depth registered to it (metres),
        its intrinsics, and the detector's masks: per-pixel index into the names (-1: nothing), names, categories."""
        observation = self.backend.observe_state(state, ("front",), depth=True, segmentation=self.detector is None)
        if self.detector is not None:
            regions = [region for region in self.detector.regions(observation) if region.view == "front"]
            ids = np.full(observation.depth["front"].shape, -1, np.int32)
            for number, region in enumerate(regions):
                ids[region.mask] = number
            return (observation.rgb["front"], observation.depth["front"], observation.cameras["front"], ids,
                    tuple(f"{region.label}_{region.track}" for region in regions),
                    tuple(region.label for region in regions))
        segmentation = observation.segmentation["front"]
        values, positions = np.unique(segmentation, return_inverse=True)
        seen = [int(index) for index in values if index >= 0]
        # The simulator's ids renumbered 0.. over the things in view (-1 stays -1: it sorts first when present).
        ids = (positions.reshape(segmentation.shape) - (1 if values[0] < 0 else 0)).astype(np.int32)
        return (observation.rgb["front"], observation.depth["front"], observation.cameras["front"], ids,
                tuple(observation.instance_names[index] for index in seen),
                tuple(observation.instance_canonicals[index] for index in seen))

    def base_scan(self) -> np.ndarray:
        """The base laser's ranges now, one per ray of `laser_angles()` (inf: no return within range)."""
        ranges = self.backend.laser_ranges(fetch.LASER_MOUNT, laser_angles(), fetch.LASER_RANGE[1])
        ranges[ranges < fetch.LASER_RANGE[0]] = np.inf
        return ranges

    def finger_gap(self) -> float:
        """The gap between the fingers now (metres)."""
        return sum(self._positions(fetch.FINGER_JOINTS))

    def state(self) -> RobotState:
        """The robot's state now (what /odom and /joint_states carry)."""
        return self.backend.robot_state()

    def _positions(self, joints: Sequence[str]) -> list[float]:
        state = self.backend.robot_state()
        by_name = dict(zip(state.joint_names, state.joint_positions))
        return [float(by_name[joint]) for joint in joints]
