"""What every sensor-only skill shares: the settings, and the scene as the head cameras show it.

`SensorContext` extends the stepped robot access of homiebot_executor.policies.attempt with perception: `look()`
renders the four head views with depth, grows the online occupancy map and keeps the point cloud near the robot;
`find(name)` asks the detector for a category and back-projects what it found. Arm clearance is checked against that
cloud (with the robot's own arm filtered out by forward kinematics), not against the simulator's furniture. The map
lives for one episode: simulated time running backwards (a reset) starts a new one.

Only emmoe_core.robot.interface.Robot is used: odometry and joint states (robot_state), the cameras (observe, with
their intrinsics and pose), base, arm, torso and gripper commands, and the contact force.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mujoco
import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.interface import Robot
from emmoe_core.robot.state import VIEWS, Observation
from emmoe_core.validation import require_positive_fields
from scipy.spatial import cKDTree

from emmoe_core.perception.detector import Detector, SegmentationDetector
from homiebot_executor.perception.occupancy import MapConfig, OnlineMap
from homiebot_executor.perception.points import point_image, valid
from homiebot_executor.policies.arm_ik import IkConfig
from homiebot_executor.policies.attempt import RobotContext
from homiebot_executor.policies.navigation import ControllerConfig

if TYPE_CHECKING:
    from homiebot_executor.policies.sensor.handles import Handle

# Arm bodies whose chain is checked for clearance (the grasp site closes the chain).
ARM_CHAIN: tuple[str, ...] = ("shoulder_pan_link", "shoulder_lift_link", "upperarm_roll_link", "elbow_flex_link",
                              "forearm_roll_link", "wrist_flex_link", "wrist_roll_link", "gripper_link")


@dataclass(frozen=True)
class SensorConfig:
    """Settings of the sensor-only skills.

    Attributes:
        control_period: simulated seconds per control step (the unit of the step budgets).
        contact_limit: contact force that makes navigation fail (release: 5 N).
        arm_speed: largest joint change per control step (radians).
        robot_radius: radius of the base footprint (metres).
        clearance: extra margin kept from mapped obstacles when planning (metres).
        nav_success_distance: the base must end within this distance of its standing spot (release: 0.65 m).
        look_every: control steps between observations while driving.
        views: the head views each look captures (all four on the simulated robot, whose head carries four
            cameras; a real Fetch's one head camera is "front").
        reach: planar distance from the base centre within which the arm works (metres).
        grasp_distance: the gripper holds what lies within this distance of its grasp point (between the fingers).
        arm_margin: clearance kept between the arm chain and perceived points (metres).
        cloud_radius: points within this planar distance of the base are kept for arm checks (metres).
        voxel: the arm-check cloud is thinned to one point per voxel of this size (metres).
        map: the online occupancy map.
        controller: base controller gains.
        ik: arm IK settings.
    """

    control_period: float = 0.1
    contact_limit: float = 5.0
    arm_speed: float = 0.2
    robot_radius: float = fetch.ROBOT_RADIUS
    clearance: float = 0.03
    nav_success_distance: float = 0.65
    look_every: int = 10
    views: tuple[str, ...] = VIEWS
    reach: float = fetch.ARM_REACH
    grasp_distance: float = 0.05
    arm_margin: float = 0.03
    cloud_radius: float = 1.6
    voxel: float = 0.02
    map: MapConfig = field(default_factory=MapConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    ik: IkConfig = field(default_factory=IkConfig)

    def __post_init__(self) -> None:
        require_positive_fields(self, ("control_period", "contact_limit", "arm_speed", "robot_radius",
                                       "nav_success_distance", "reach", "grasp_distance", "cloud_radius", "voxel"))
        if not self.views or any(view not in VIEWS for view in self.views):
            raise ValueError(f"SensorConfig.views: expected some of {', '.join(VIEWS)}, got {self.views}")
        if self.look_every < 1:
            raise ValueError(f"SensorConfig.look_every: expected >= 1, got {self.look_every}")
        if self.clearance < 0 or self.arm_margin < 0:
            raise ValueError("SensorConfig: clearance and arm_margin must be >= 0")


@dataclass(frozen=True)
class Sighting:
    """One detected thing, back-projected.

    Attributes:
        label: the detector's category.
        track: the detector's identifier of the thing.
        points: (N, 3) world points of it, all views together.
        distance: planar distance from the base to its nearest point.
    """

    label: str
    track: int
    points: np.ndarray
    distance: float = math.inf

    @property
    def centre(self) -> np.ndarray:
        """Median of the points."""
        centre: np.ndarray = np.median(self.points, axis=0)
        return centre

    @property
    def top(self) -> float:
        """Height of its top (95th percentile of the points)."""
        return float(np.percentile(self.points[:, 2], 95))


@dataclass
class Snapshot:
    """What one look saw: the point image and the detector's input per view."""

    points: dict[str, np.ndarray]
    observation: Observation


class SensorContext(RobotContext[SensorConfig]):
    """The robot plus what its cameras have shown (see the module docstring)."""

    def __init__(self, backend: Robot, config: SensorConfig, detector: Detector | None = None,
                 lock: AbstractContextManager[object] | None = None) -> None:
        """Drive `backend`, find things with `detector` (the segmentation stand-in by default)."""
        super().__init__(backend, config, lock)
        self.detector: Detector = detector or SegmentationDetector()
        self.map: OnlineMap | None = None
        self.snapshot: Snapshot | None = None
        self._cloud: cKDTree | None = None
        self._cloud_points = np.zeros((0, 3))
        self._ignored: cKDTree | None = None
        self._last_time = -math.inf
        self._fk_data = mujoco.MjData(self.ik.model)
        self._chain = [int(mujoco.mj_name2id(self.ik.model, mujoco.mjtObj.mjOBJ_BODY, fetch.PREFIX + name))
                       for name in ARM_CHAIN]
        self._grip_site = int(mujoco.mj_name2id(self.ik.model, mujoco.mjtObj.mjOBJ_SITE,
                                                fetch.PREFIX + fetch.GRIP_SITE))
        #: Height of the object in the hand, measured from the images when it was picked (None: unknown).
        self.held_height: float | None = None
        #: Category of the object in the hand, as the Pick that took it asked for it.
        self.held_label: str = ""
        #: Handles the fingers closed on without holding anything (fixed fronts), skipped from then on.
        self.failed_handles: list[np.ndarray] = []
        #: Door or drawer name -> its handle where the hand let go of it, the part left open (or part open).
        self.left_open: dict[str, Handle] = {}
        #: Detector track -> (label, points) where it was last seen in this episode (an object memory).
        self.memory: dict[int, tuple[str, np.ndarray]] = {}
        self._asked: dict[str, set[str]] = {}
        #: Where the robot has looked from in this episode.
        self.looked_from: list[tuple[float, float]] = []

    # ---- perception --------------------------------------------------------------------------------------------
    def look(self) -> Snapshot:
        """Observe the head views (config.views) with depth, update the map and the arm-check cloud."""
        with self.lock:
            observation = self.backend.observe(self.config.views, depth=True,
                                               segmentation=self.detector.needs_segmentation)
        x, y, _ = self.base()
        if self.map is None or observation.time < self._last_time:
            self.map = OnlineMap((x, y), self.config.map)
            self.failed_handles, self.memory, self._asked, self.looked_from = [], {}, {}, []
            self.left_open = {}
        self._last_time = observation.time
        self.looked_from.append((x, y))
        points = {}
        for view in self.config.views:
            camera = observation.cameras[view]
            image = point_image(observation.depth[view], camera, self.config.map.max_range)
            # The map and the arm-check cloud take every other pixel (about 2 cm apart at 3 m); detections all.
            self.map.integrate(image[::2, ::2], camera.position, (x, y))
            points[view] = image
        self.snapshot = Snapshot(points, observation)
        self._set_cloud(np.concatenate([valid(image[::2, ::2].reshape(-1, 3)) for image in points.values()]), (x, y))
        return self.snapshot

    def _set_cloud(self, points: np.ndarray, base: tuple[float, float]) -> None:
        near = np.hypot(points[:, 0] - base[0], points[:, 1] - base[1]) < self.config.cloud_radius
        points = points[near & (points[:, 2] > 0.03)]
        if len(points):
            keys = np.floor(points / self.config.voxel).astype(np.int64) & 0x1FFFFF
            _, first = np.unique((keys[:, 0] << 42) | (keys[:, 1] << 21) | keys[:, 2], return_index=True)
            points = points[first]
        # Self-filter: drop what lies on the robot's own arm as it is now.
        _, joints = self.joint_state()
        arm = [joints[name] for name in fetch.ARM_JOINTS]
        if len(points):
            own = cKDTree(self._arm_samples(arm, joints[fetch.TORSO_JOINT]))
            distance, _ = own.query(points, distance_upper_bound=0.09)
            points = points[~np.isfinite(distance)]
        self._cloud_points = points
        self._cloud = cKDTree(points) if len(points) else None

    def find(self, name: str) -> list[Sighting]:
        """Things of `name`'s category in the last look, nearest first (look() first)."""
        if self.snapshot is None:
            self.look()
        assert self.snapshot is not None
        observation = self.snapshot.observation
        x, y, _ = self.base()
        tracks: dict[int, tuple[str, list[np.ndarray]]] = {}
        for detection in self.detector.detect(observation, name):
            self._asked.setdefault(name, set()).add(detection.label)
            image = self.snapshot.points[detection.view]
            label, chunks = tracks.setdefault(detection.track, (detection.label, []))
            chunks.append(valid(image[detection.mask]))
        seen: dict[int, np.ndarray] = {}
        for track, (label, chunks) in tracks.items():
            points = np.concatenate(chunks)
            if len(points) >= 5:
                seen[track] = points
                self.memory[track] = (label, points)
        # Things of the category seen before but out of view now are remembered where they were last seen.
        wanted = {label for label, _ in tracks.values()} | self._asked.get(name, set())
        remembered = {track: points for track, (label, points) in self.memory.items()
                      if label in wanted and track not in seen}
        sightings = [Sighting(self.memory[track][0], track, points,
                              float(np.min(np.hypot(points[:, 0] - x, points[:, 1] - y))))
                     for track, points in {**seen, **remembered}.items()]
        return sorted(sightings, key=lambda item: item.distance)

    @property
    def cloud_points(self) -> np.ndarray:
        """(N, 3) points near the robot from the last look (thinned, the robot's arm filtered out)."""
        return self._cloud_points

    def ignore(self, points: np.ndarray | None) -> None:
        """Leave these points (the thing being grasped or placed on) out of the arm checks; None: none."""
        self._ignored = None if points is None or not len(points) else cKDTree(points)

    # ---- arm clearance against the perceived cloud ------------------------------------------------------------
    def _arm_samples(self, arm: Sequence[float], torso: float) -> np.ndarray:
        """Points along the arm chain at a configuration (forward kinematics of the robot description)."""
        base, joints = self.joint_state()
        data = self._fk_data
        model = self.ik.model
        values = {**dict(zip(fetch.BASE_JOINTS, base)), **joints, **dict(zip(fetch.ARM_JOINTS, arm)),
                  fetch.TORSO_JOINT: torso}
        for name, value in values.items():
            joint = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, fetch.PREFIX + name))
            if joint >= 0:
                data.qpos[model.jnt_qposadr[joint]] = value
        mujoco.mj_kinematics(model, data)
        anchors = [data.xpos[body] for body in self._chain] + [data.site_xpos[self._grip_site]]
        samples = [a + t * (b - a) for a, b in zip(anchors, anchors[1:]) for t in np.linspace(0.0, 1.0, 5)]
        return np.array(samples)

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether the arm chain at this configuration comes within arm_margin (+ its link radius) of a perceived
        point other than the ignored ones."""
        if self._cloud is None:
            return False
        samples = self._arm_samples(arm, torso)[5:]  # the shoulder is inside the body
        hits = self._cloud.query_ball_point(samples, 0.05 + self.config.arm_margin)
        indices = sorted({index for group in hits for index in group})
        if not indices:
            return False
        if self._ignored is None:
            return True
        distance, _ = self._ignored.query(self._cloud_points[indices], distance_upper_bound=0.03)
        return bool((~np.isfinite(distance)).any())

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """Whether six configurations along the straight joint move are all clear."""
        start_array, end_array = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        for fraction in np.linspace(0.0, 1.0, 6)[1:]:
            arm = start_array + fraction * (end_array - start_array)
            if self.arm_collides(arm, start_torso + fraction * (end_torso - start_torso)):
                return False
        return True
