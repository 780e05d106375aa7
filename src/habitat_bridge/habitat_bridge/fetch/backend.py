"""`FetchBackend`: the `fetch` backend, a real Fetch (or the fake one) behind the interface every backend offers.

The robot side is `FetchRobot` (its ROS interfaces only, through the safety gate); the kinematics come from the
robot model (robot_description, with the head camera); what it knows of the room is a `SceneMemory`.
- `observe(views)`: the head camera gives "front"; the other views are taken as the release took them, by turning
  the base in place (`views_by="base"`), or by panning the head for left and right (`views_by="head"`; the back
  view still turns the base); the base and head come back where they were. Each view's pose is the camera's pose
  in the robot model at the joint states of the frame. Segmentation, names and visible lists come from the
  detector's instance masks; an instance keeps its index in `instance_names` for the whole episode (the skills
  remember things by it), whatever its index in one frame's masks.
- `robot_state()`: odometry, joint states, the grasp point by forward kinematics, the held object, the time since
  the episode began (robot clock).
- The gripper: closing reports what it holds when the fingers stalled on something: the remembered object nearest
  the grasp point (within `grasp_match`), else a handle (the part follows the hand; nothing is held). The object
  stays held while the fingers stay apart; opening lets it go where the hand is.
- Privileged queries are answered from the scene memory (the operator's map updated by the executed subtasks);
  whatever only a simulator can do (teleport, set a door, an occupancy grid of the truth, arm collision checks
  against the furniture) raises BackendError. The sensor-only skills never reach either (habitat_bridge.sensor_only).
- `reset(scene)`: a real robot cannot be reset; it starts a new episode in place: the scene is the operator's
  map of the room as arranged for this run, and the episode clock starts now.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import mujoco
import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import SceneLayout
from emmoe_core.robot.state import (
    VIEWS,
    BackendError,
    CameraView,
    ContainerState,
    InstanceState,
    Observation,
    Pose,
    RobotState,
)
from emmoe_core.validation import require_positive_fields

from habitat_bridge.backends.base import Scene, SimBackend
from habitat_bridge.backends.fetch_model import kinematic_description
from habitat_bridge.backends.mujoco_robot import camera_pose, site_pose
from habitat_bridge.fetch.robot import CameraFrame, FetchRobot
from habitat_bridge.fetch.scene_memory import SceneMemory
from habitat_bridge.scene_spec import SceneSpec

# Heading of each view relative to the front (radians, counter-clockwise).
VIEW_ANGLES: dict[str, float] = {"front": 0.0, "left": math.pi / 2, "back": math.pi, "right": -math.pi / 2}
# Robot seconds without progress after which a turn for a view counts as blocked.
STALL_TIME = 2.0
# Fingers closer than this (metres between them) hold nothing.
EMPTY_GAP = 0.004


@dataclass(frozen=True)
class FetchBackendConfig:
    """Settings of the fetch backend beyond the robot's (FetchConfig).

    Attributes:
        views_by: "base" (turn the base in place for every other view, as the release did) or "head" (pan the head
            for left and right; the back view turns the base).
        turn_tolerance: radians within which a turn for a view is done.
        stall_tolerance: a turn that stops making progress this close (radians) counts as done (the base brushing
            furniture); each view's camera pose is the one measured, so the view is only a little off its heading.
        head_tolerance: radians within which a head pan is done.
        settle_timeout: robot seconds a turn or pan may take before the observation fails.
        grasp_match: the held object is the remembered object within this distance of the grasp point (metres).
        min_pixels: a thing counts as visible in a view with at least this many pixels.
    """

    views_by: str = "base"
    turn_tolerance: float = 0.03
    stall_tolerance: float = 0.2
    head_tolerance: float = 0.02
    settle_timeout: float = 30.0
    grasp_match: float = 0.15
    min_pixels: int = 12

    def __post_init__(self) -> None:
        if self.views_by not in ("base", "head"):
            raise ValueError(f"FetchBackendConfig.views_by must be 'base' or 'head', got {self.views_by!r}")
        require_positive_fields(self, ("turn_tolerance", "stall_tolerance", "head_tolerance", "settle_timeout",
                                       "grasp_match", "min_pixels"))


class FetchBackend(SimBackend):
    """A Fetch behind the backend interface (see the module docstring)."""

    name = "fetch"
    #: The robot runs on its own clock; the bridge node does not step it or publish its state.
    runs_itself = True

    def __init__(self, robot: FetchRobot, config: FetchBackendConfig | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        """Drive `robot`; `on_close` runs last when the backend closes (stopping the robot node's thread)."""
        self.robot = robot
        self._on_close = on_close
        self.config = config or FetchBackendConfig()
        self.memory: SceneMemory | None = None
        self._episode = ""
        self._start = 0.0
        self._lock = threading.RLock()
        # The episode's instances so far (detector name -> index in instance_names) and their categories.
        self._instances: dict[str, int] = {}
        self._categories: list[str] = []
        self._model = mujoco.MjModel.from_xml_string(kinematic_description(head_cameras=True))
        self._data = mujoco.MjData(self._model)
        self._grip_site = self._id(mujoco.mjtObj.mjOBJ_SITE, fetch.GRIP_SITE)
        self._front_camera = self._id(mujoco.mjtObj.mjOBJ_CAMERA, "front")
        self._qpos = {name: int(self._model.jnt_qposadr[self._id(mujoco.mjtObj.mjOBJ_JOINT, name)])
                      for name in (*fetch.BASE_JOINTS, fetch.TORSO_JOINT, *fetch.HEAD_JOINTS, *fetch.ARM_JOINTS,
                                   *fetch.FINGER_JOINTS)}

    def _id(self, kind: mujoco.mjtObj, name: str) -> int:
        index = int(mujoco.mj_name2id(self._model, kind, fetch.PREFIX + name))
        if index < 0:
            raise BackendError(f"the robot model has no {fetch.PREFIX + name}")
        return index

    # ---- episode -----------------------------------------------------------------------------------------------
    @property
    def episode_id(self) -> str:
        return self._episode

    @property
    def time(self) -> float:
        return self.robot.time - self._start

    @property
    def views(self) -> tuple[str, ...]:
        return VIEWS

    @property
    def arm_joint_names(self) -> tuple[str, ...]:
        return fetch.ARM_JOINTS

    def reset(self, scene: Scene | None = None, seed: int | None = None) -> str:
        """Start an episode where the robot stands, with `scene` as the operator's map of the room.

        Raises:
            BackendError: without a scene-spec map (the robot cannot generate a room), or before the robot's
                sensors are fresh.
        """
        if not isinstance(scene, SceneSpec):
            raise BackendError("the fetch backend needs the operator's map of the room as a scene spec "
                               "(scene_path or ResetEpisode.scene_json); it cannot generate or load a simulated one")
        self.robot.wait_until_ready()
        with self._lock:
            self.memory = SceneMemory(scene)
            self._episode = scene.name
            self._start = self.robot.time
            self._instances, self._categories = {}, []
        return self._episode

    def _memory(self) -> SceneMemory:
        if self.memory is None:
            raise BackendError("no episode yet: reset with the room's map first")
        return self.memory

    # ---- kinematics --------------------------------------------------------------------------------------------
    def _kinematics(self, base: tuple[float, float, float], joints: dict[str, float]) -> None:
        """Put the robot model in a configuration and compute its forward kinematics."""
        for name, value in (*zip(fetch.BASE_JOINTS, base), *joints.items()):
            address = self._qpos.get(name)
            if address is not None:
                self._data.qpos[address] = value
        mujoco.mj_kinematics(self._model, self._data)
        mujoco.mj_camlight(self._model, self._data)  # camera poses (mj_kinematics leaves them)

    # ---- the robot interface -----------------------------------------------------------------------------------
    def step(self, seconds: float) -> None:
        self.robot.step(seconds)

    def robot_state(self) -> RobotState:
        base = self.robot.base_pose()
        positions, speeds = self.robot.joint_states()
        with self._lock:
            self._kinematics(base, positions)
            gripper = site_pose(self._data, self._grip_site)
            memory = self.memory
            held = self._held_name(positions)
            if memory is not None and held is not None:
                memory.follow_hand(gripper.position)
        names = tuple(positions)
        return RobotState(base=Pose.from_yaw(base[0], base[1], 0.0, base[2]), base_velocity=self.robot.base_velocity(),
                          joint_names=names, joint_positions=tuple(positions[name] for name in names),
                          joint_velocities=tuple(speeds.get(name, 0.0) for name in names), gripper=gripper,
                          held_object=held, time=self.time)

    def _held_name(self, positions: dict[str, float]) -> str | None:
        """The held object, dropped when the fingers closed on nothing."""
        memory = self.memory
        if memory is None or memory.held is None:
            return None
        if sum(positions.get(joint, 0.0) for joint in fetch.FINGER_JOINTS) < EMPTY_GAP:
            memory.held = None
        return memory.held

    def robot_description(self) -> str:
        return kinematic_description()

    def set_base_velocity(self, forward: float, turn: float) -> None:
        self.robot.set_base_velocity(forward, turn)

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        self.robot.set_arm_targets(positions)

    def set_torso_target(self, height: float) -> None:
        self.robot.set_torso_target(height)

    def set_head_target(self, pan: float, tilt: float) -> None:
        self.robot.set_head_target(pan, tilt)

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        """Close the fingers; the remembered object at the grasp point when they stalled on one, the handle's
        furniture when they stalled on something else, None when they closed on nothing."""
        if self.robot.close_gripper(max_distance) is None:
            return None
        state = self.robot_state()
        memory = self._memory()
        nearest = memory.nearest_object(state.gripper.position, self.config.grasp_match)
        if nearest is None:
            return "handle"
        memory.held = nearest
        return nearest

    def open_gripper(self) -> str | None:
        released = self.held_object()
        self.robot.open_gripper()
        if self.memory is not None:
            self.memory.held = None
        return released

    def held_object(self) -> str | None:
        positions, _ = self.robot.joint_states()
        with self._lock:
            return self._held_name(positions)

    def contact_force(self) -> float:
        """0: a Fetch has no contact sensing on its body (the bumper-free base relies on the laser and the fence)."""
        return 0.0

    # ---- cameras -----------------------------------------------------------------------------------------------
    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        unknown = [view for view in views if view not in VIEW_ANGLES]
        if unknown:
            raise BackendError(f"unknown views {unknown}; the fetch backend gives {', '.join(VIEWS)}")
        start_yaw = self.robot.base_pose()[2]
        pan, tilt = self.robot.joint_positions(fetch.HEAD_JOINTS)
        frames: dict[str, tuple[CameraFrame, CameraView]] = {}
        moved = False  # whether the last view turned the base or panned the head away from where they were
        try:
            for view in views:
                turn, view_pan = self._pose_for(view)
                if turn or view_pan or moved:
                    self._turn_to(start_yaw + turn)
                    self._pan_to(pan + view_pan, tilt)
                    moved = bool(turn or view_pan)
                frames[view] = self._capture()
        finally:
            if any(self._pose_for(view) != (0.0, 0.0) for view in views):
                self._turn_to(start_yaw)
                self._pan_to(pan, tilt)
        return self._observation(frames, depth, segmentation)

    def _pose_for(self, view: str) -> tuple[float, float]:
        """(base turn, head pan) that points the head camera along `view`."""
        angle = VIEW_ANGLES[view]
        if self.config.views_by == "head" and abs(angle) < math.pi * 0.75:
            return 0.0, angle
        return angle, 0.0

    def _turn_to(self, yaw: float) -> None:
        """Turn the base in place to a heading (closed loop on odometry). A turn that stops making progress (the arm
        or the base touching something) counts as done within stall_tolerance, and is otherwise tried once the other
        way round.

        Raises:
            BackendError: when neither way gets there within settle_timeout.
        """
        heading = self.robot.base_pose()[2]
        remaining = math.remainder(yaw - heading, 2 * math.pi)
        for attempt in ("short", "long"):
            if attempt == "long":
                remaining -= math.copysign(2 * math.pi, remaining)
            deadline = self.robot.time + self.config.settle_timeout
            best, progress_at = abs(remaining), self.robot.time
            while abs(remaining) >= self.config.turn_tolerance:
                if abs(remaining) < best - 0.01:
                    best, progress_at = abs(remaining), self.robot.time
                if self.robot.time > deadline or self.robot.time - progress_at > STALL_TIME:
                    if abs(remaining) <= self.config.stall_tolerance:  # close enough: the view is a little off
                        self.robot.set_base_velocity(0.0, 0.0)
                        return
                    break
                self.robot.set_base_velocity(0.0, float(np.clip(2.0 * remaining, -1.0, 1.0)))
                self.robot.step(self.robot.config.control_period)
                now = self.robot.base_pose()[2]
                remaining -= math.remainder(now - heading, 2 * math.pi)
                heading = now
            else:
                self.robot.set_base_velocity(0.0, 0.0)
                return
        self.robot.set_base_velocity(0.0, 0.0)
        raise BackendError(f"the base did not turn to {yaw:.2f} rad either way round ({remaining:+.2f} rad to go): "
                           "is it touching something?")

    def _pan_to(self, pan: float, tilt: float) -> None:
        """Point the head and wait until it is there."""
        if abs(self.robot.joint_positions(fetch.HEAD_JOINTS)[0] - pan) < self.config.head_tolerance:
            return
        self.robot.set_head_target(pan, tilt)
        deadline = self.robot.time + self.config.settle_timeout
        while abs(self.robot.joint_positions(fetch.HEAD_JOINTS)[0] - pan) >= self.config.head_tolerance:
            if self.robot.time > deadline:
                raise BackendError(f"the head did not pan to {pan:.2f} rad within {self.config.settle_timeout:g} s")
            self.robot.step(self.robot.config.control_period)

    def _capture(self) -> tuple[CameraFrame, CameraView]:
        """The next head-camera frame and the camera's pose in the robot model at the base pose and joint states of the
        frame's stamp (the base may still be settling from a turn while the image is drawn and sent)."""
        frame = self.robot.frame_after(self.robot.time)
        base = self.robot.pose_at(frame.stamp)
        positions = self.robot.joints_at(frame.stamp)
        with self._lock:
            self._kinematics(base, positions)
            position, rotation = camera_pose(self._data, self._front_camera)
        return frame, replace(frame.intrinsics, position=position, rotation=rotation)

    def _observation(self, frames: dict[str, tuple[CameraFrame, CameraView]], depth: bool,
                     segmentation: bool) -> Observation:
        """One Observation from per-view frames: the episode's instance list (the detector's names, each at the index
        it got when first seen), masks indexing it."""
        masks: dict[str, np.ndarray] = {}
        visible: dict[str, tuple[str, ...]] = {}
        held = self.held_object()
        with self._lock:
            for view, (frame, _) in frames.items():
                lookup = np.full(len(frame.names) + 1, -1, dtype=np.int32)
                for position, (name, category) in enumerate(zip(frame.names, frame.categories)):
                    lookup[position] = self._instance_index(name, category)
                masks[view] = lookup[frame.ids]  # -1 indexes the trailing -1
                counts = np.bincount(frame.ids[frame.ids >= 0].ravel(), minlength=len(frame.names))
                seen = [index for index in range(len(frame.names)) if counts[index] >= self.config.min_pixels]
                near = {index: float(np.median(frame.depth[frame.ids == index])) for index in seen}
                visible[view] = tuple(frame.names[index] for index in sorted(seen, key=near.__getitem__))
            if held is not None and held not in self._instances:  # in the hand, never seen: still a known instance
                self._instance_index(held, self._memory().object_states([held], self._base_xy())[0].canonical)
            names, categories = tuple(self._instances), tuple(self._categories)
        return Observation(
            time=min(frame.stamp for frame, _ in frames.values()) - self._start,
            rgb={view: frame.rgb for view, (frame, _) in frames.items()},
            depth={view: frame.depth for view, (frame, _) in frames.items()} if depth else {},
            segmentation=masks if segmentation else {},
            instance_names=names, instance_canonicals=categories,
            visible=visible if segmentation else {}, held_object=held,
            cameras={view: camera for view, (_, camera) in frames.items()})

    def _instance_index(self, name: str, category: str) -> int:
        """The episode's index of the detector's `name` (a new one at the end; call with the lock held)."""
        if name not in self._instances:
            self._instances[name] = len(self._instances)
            self._categories.append(category)
        return self._instances[name]

    # ---- what the robot knows of the room ----------------------------------------------------------------------
    def _base_xy(self) -> tuple[float, float]:
        x, y, _ = self.robot.base_pose()
        return x, y

    def resolve(self, name: str) -> list[str]:
        return self._memory().resolve(name, self._base_xy())

    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        return self._memory().object_states(names, self._base_xy())

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        return self._memory().container_states(names, self._base_xy())

    def scene_layout(self) -> SceneLayout:
        return self._memory().scene_layout()

    def apply_step(self, action: str, target: str, place: str, success: bool) -> None:
        """An executed subtask (from the planner's step records) updates the memory of the room."""
        if self.memory is not None:
            self.memory.apply(action, target, place, success)

    # ---- what only a simulator can do --------------------------------------------------------------------------
    def _impossible(self, what: str) -> BackendError:
        return BackendError(f"a real robot cannot {what} (fetch backend)")

    def set_container_target(self, name: str, position: float) -> None:
        raise self._impossible("set a door or drawer by command")

    def set_container_position(self, name: str, position: float) -> None:
        raise self._impossible("set a door or drawer by command")

    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        raise self._impossible("give the true occupancy of the room")

    def teleport_base(self, x: float, y: float, yaw: float) -> None:
        raise self._impossible("teleport")

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        raise self._impossible("check the arm against the true furniture")

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        raise self._impossible("check the arm against the true furniture")

    def close(self) -> None:
        """Stop the base (the robot itself stays up), then run on_close."""
        self.robot.set_base_velocity(0.0, 0.0)
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()
