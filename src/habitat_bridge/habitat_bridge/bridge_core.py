"""What the bridge node does, without rclpy: the control tick's timing, message conversions and the three service
handlers.

The handlers take a backend and a request message and fill the response; every failure becomes an error code and
message in the response (never an exception), so the node stays up after a bad request. Used by
habitat_bridge.bridge_node and unit-tested without a ROS graph.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from builtin_interfaces.msg import Time
from emmoe_core.robot.messages import fill_pose, snapshot_to_query
from emmoe_core.robot.scene import snapshot_of
from emmoe_core.robot.state import VIEWS, BackendError, Pose, RobotState, UnknownNameError
from emmoe_core.validation import require_positive
from emmoe_interfaces.msg import VisibleObjects
from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode
from geometry_msgs.msg import Pose as PoseMsg
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, JointState

from habitat_bridge.backends.base import SimBackend

if TYPE_CHECKING:
    from emmoe_core.perception.learned import LearnedDetector
from habitat_bridge.official import is_official_scene, parse_official_episode
from habitat_bridge.scene_spec import SceneSpec, SceneSpecError, parse_scene_text


@dataclass(frozen=True)
class BridgeConfig:
    """Settings of the bridge node (filled from ROS parameters).

    Attributes:
        backend: "auto" (habitat when habitat_sim imports, else mujoco), "mujoco", "habitat", or "fetch" (a real
            Fetch; the node must then be given the backend: homiebot.sim_stack builds it).
        scene_path: scene file loaded at start-up and by resets without a scene ("" = generated apartment).
        seed: seed of the start-up scene (-1: the scene's own; 0 for a generated apartment).
        rate_hz: control loop rate; each tick steps the simulation by the control periods (1/rate_hz) since the
            previous one, so that simulated time keeps pace with wall time (see TickPacer).
        camera_rate_hz: how often the head views that someone subscribes to are rendered and published (0 = never;
            they stay available through /sim/get_observation).
        publish_depth: publish depth images with the RGB views.
        cmd_vel_timeout: seconds of simulated time without /cmd_vel after which the base is stopped.
        image_size: width and height of each view in pixels (mujoco backend).
        video_rate_hz: how often the head front view and the third-person view are published for recording videos
            (`/sim/head_front/image_raw`, `/sim/third_person/image_raw`), only while someone subscribes, also while
            a skill has paused the free-running simulation (0 = never).
    """

    backend: str = "auto"
    scene_path: str = ""
    seed: int = -1
    rate_hz: float = 50.0
    camera_rate_hz: float = 2.0
    publish_depth: bool = False
    cmd_vel_timeout: float = 0.5
    image_size: int = 256
    video_rate_hz: float = 5.0

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "mujoco", "habitat", "fetch"):
            raise ValueError(f"backend must be auto, mujoco, habitat or fetch, got {self.backend!r}")
        if self.scene_path and not Path(self.scene_path).is_file():
            raise ValueError(f"scene_path {self.scene_path!r} is not a readable file")
        if not 1.0 <= self.rate_hz <= 1000.0:
            raise ValueError(f"rate_hz must be within [1, 1000], got {self.rate_hz}")
        if not 0.0 <= self.camera_rate_hz <= self.rate_hz:
            raise ValueError(f"camera_rate_hz must be within [0, rate_hz], got {self.camera_rate_hz}")
        require_positive("cmd_vel_timeout", self.cmd_vel_timeout)
        if not 16 <= self.image_size <= 1024:
            raise ValueError(f"image_size must be within [16, 1024], got {self.image_size}")
        if not 0.0 <= self.video_rate_hz <= 30.0:
            raise ValueError(f"video_rate_hz must be within [0, 30], got {self.video_rate_hz}")


# ---- the control tick ---------------------------------------------------------------------------------------------
# The most simulated time one tick steps to catch up with wall time: a process stopped or starved for longer does not
# make the simulation jump further at once.
MAX_CATCH_UP_S = 0.25


class TickPacer:
    """How many control periods each tick steps, so that the free-running simulation keeps pace with wall time.

    A timer tick that comes late (the process starved on a loaded machine, a camera frame holding the simulator)
    steps the periods it missed, at most MAX_CATCH_UP_S of them; a fraction of a period is carried to the next tick.
    Stepping a fixed period per tick instead slows simulated time down with the tick rate.
    """

    def __init__(self, period: float, now: float) -> None:
        """`period`: seconds of one control period; `now`: the monotonic wall time pacing starts from."""
        self.period = period
        self._max_periods = max(1, round(MAX_CATCH_UP_S / period))
        self._last = now
        self._owed = 0.0

    def periods(self, now: float) -> int:
        """Whole periods due at monotonic wall time `now`. Call it on every tick, also on ticks that do not step
        (paused), so that time spent paused is never owed."""
        self._owed += max(0.0, now - self._last) / self.period
        self._last = now
        due = round(self._owed)
        if due > self._max_periods:  # time beyond the catch-up limit is dropped, not owed
            due, self._owed = self._max_periods, 0.0
        else:
            self._owed -= due
        return due


class BaseCommand:
    """The base velocity the ticks apply: the latest /cmd_vel, until `timeout` seconds of simulated time pass
    without a new one.

    Measured in simulated time, so that a bridge falling behind wall time neither stops the base between commands
    sent in time nor drives it on for longer than `timeout` of simulation after the last one. `receive` may run on
    another thread than `due` and `stop` without a lock: it replaces one tuple.
    """

    def __init__(self, timeout: float) -> None:
        """`timeout`: seconds of simulated time a command holds."""
        self.timeout = timeout
        self._serials = itertools.count(1)
        self._latest: tuple[int, tuple[float, float]] = (0, (0.0, 0.0))
        self._seen = 0
        self._since = -math.inf

    def receive(self, forward: float, turn: float) -> None:
        """A new command (m/s, rad/s)."""
        self._latest = (next(self._serials), (forward, turn))

    def due(self, sim_time: float) -> tuple[float, float]:
        """The command to apply from simulated time `sim_time` on; a new command holds from the first tick that sees
        it, and (0, 0) once it has timed out or the time went back (a reset)."""
        serial, command = self._latest
        if serial != self._seen:
            self._seen, self._since = serial, sim_time
        return command if 0.0 <= sim_time - self._since <= self.timeout else (0.0, 0.0)

    def stop(self) -> None:
        """Drop the latest command (a paused body drives the robot itself; no command outlives the pause)."""
        self._seen, self._since = self._latest[0], -math.inf


# The third-person camera of the videos: behind the robot and above it, looking over it (MuJoCo backend).
THIRD_PERSON_VIDEO_VIEW = "third_back"


def video_views(available: tuple[str, ...]) -> dict[str, str]:
    """Video stream -> backend view: `head` the head front view, `third` the third-person view where the backend
    has one."""
    views = {"head": VIEWS[0]}
    if THIRD_PERSON_VIDEO_VIEW in available:
        views["third"] = THIRD_PERSON_VIDEO_VIEW
    return views


# ---- conversions ------------------------------------------------------------------------------------------------
def stamp(seconds: float) -> Time:
    """builtin_interfaces/Time of a simulated time, rounded to the nanosecond (12.9999999999 s is 13 s, 0 ns)."""
    whole, nanosec = divmod(round(seconds * 1e9), 1_000_000_000)
    return Time(sec=int(whole), nanosec=int(nanosec))


def seconds_of(time: Any) -> float:
    """Seconds of a builtin_interfaces/Time or Duration (inverse of stamp)."""
    return float(time.sec + time.nanosec * 1e-9)


def image_message(array: np.ndarray, seconds: float, frame_id: str) -> Image:
    """sensor_msgs/Image from an (H, W, 3) uint8 array (rgb8), an (H, W) integer array (32SC1, instance ids) or an
    (H, W) float array (32FC1, metres); emmoe_core.convert.image_to_array reads it back."""
    message = Image()
    message.header.stamp = stamp(seconds)
    message.header.frame_id = frame_id
    message.height, message.width = int(array.shape[0]), int(array.shape[1])
    if array.ndim == 3:
        message.encoding = "rgb8"
        data = np.ascontiguousarray(array, dtype=np.uint8)
    elif np.issubdtype(array.dtype, np.integer):
        message.encoding = "32SC1"
        data = np.ascontiguousarray(array, dtype="<i4")
    else:
        message.encoding = "32FC1"
        data = np.ascontiguousarray(array, dtype="<f4")
    message.is_bigendian = 0
    message.step = int(data.strides[0])
    message.data = data.tobytes()
    return message


def pose_message(pose: Pose) -> PoseMsg:
    """geometry_msgs/Pose of a backend pose."""
    return fill_pose(PoseMsg(), pose)


def odometry_message(state: RobotState) -> Odometry:
    """nav_msgs/Odometry (odom -> base_link) of the robot state."""
    message = Odometry()
    message.header.stamp = stamp(state.time)
    message.header.frame_id = "odom"
    message.child_frame_id = "base_link"
    message.pose.pose = pose_message(state.base)
    message.twist.twist.linear.x = float(state.base_velocity[0])
    message.twist.twist.angular.z = float(state.base_velocity[1])
    return message


def joint_state_message(state: RobotState) -> JointState:
    """sensor_msgs/JointState of the actuated joints."""
    message = JointState()
    message.header.stamp = stamp(state.time)
    message.name = list(state.joint_names)
    message.position = [float(value) for value in state.joint_positions]
    message.velocity = [float(value) for value in state.joint_velocities]
    return message


# ---- services ---------------------------------------------------------------------------------------------------
def load_scene_request(scene_json: str, scene_path: str) -> Any:
    """The scene a reset request names: a SceneSpec, an OfficialEpisode, or None when it names none.

    Raises:
        FileNotFoundError: scene_path cannot be read.
        SceneSpecError: the text is not a valid scene.
    """
    if scene_json.strip():
        text, source = scene_json, "scene_json"
    elif scene_path.strip():
        try:
            text = Path(scene_path).read_text(encoding="utf-8")
        except OSError as error:
            raise FileNotFoundError(f"{scene_path}: {error.strerror}") from None
        source = scene_path
    else:
        return None
    data = parse_scene_text(text, source)
    if is_official_scene(data):
        try:
            return parse_official_episode(data)
        except SceneSpecError as error:
            raise SceneSpecError(f"{source}: {error}") from None
    try:
        return SceneSpec.from_dict(data)
    except SceneSpecError as error:
        raise SceneSpecError(f"{source}: {error}") from None


def handle_reset(backend: SimBackend, request: ResetEpisode.Request, response: ResetEpisode.Response,
                 default_scene: Any = None) -> ResetEpisode.Response:
    """Serve /sim/reset_episode: load the requested scene (or the default one) and reset."""
    try:
        scene = load_scene_request(request.scene_json, request.scene_path)
        seed = None if request.seed < 0 else int(request.seed)
        response.episode_id = backend.reset(scene if scene is not None else default_scene, seed)
        response.success, response.error_code = True, ResetEpisode.Response.NONE
    except FileNotFoundError as error:
        response.error_code, response.error_msg = ResetEpisode.Response.NOT_FOUND, str(error)
    except SceneSpecError as error:
        response.error_code, response.error_msg = ResetEpisode.Response.INVALID_SPEC, str(error)
    except Exception as error:  # a backend failure must not take the node down
        response.error_code = ResetEpisode.Response.SIMULATOR_ERROR
        response.error_msg = f"{type(error).__name__}: {error}"
    return response


def object_locations(backend: SimBackend, canonical: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """Instance name -> "on <receptacle canonical>" or "in <receptacle canonical>" for the small objects among
    `names` that rest on or in something (furniture, rooms and objects on the floor are absent)."""
    wanted = set(names)
    return {state.name: f"{'in' if state.inside else 'on'} {canonical.get(state.receptacle, state.receptacle)}"
            for state in (backend.object_states() if wanted else ())
            if state.name in wanted and state.kind == "object" and state.receptacle}


def handle_get_observation(backend: SimBackend, request: GetObservation.Request, response: GetObservation.Response,
                           detector: LearnedDetector | None = None) -> GetObservation.Response:
    """Serve /sim/get_observation: four views (+ depth), visible canonical names per view with where each small
    object rests, inventory. The names and places come from `detector` (the learned one, from RGB-D alone) when
    given, else from the simulator's instance segmentation and object states."""
    try:
        observation = backend.observe(VIEWS, depth=bool(request.include_depth) or detector is not None,
                                      segmentation=detector is None)
        canonical = dict(zip(observation.instance_names, observation.instance_canonicals))  # also the inventory's
        if detector is None:
            locations = object_locations(backend, canonical, [name for view in VIEWS for name in observation.visible[view]])
            seen_by_view = {view: [(canonical[name], locations.get(name, "")) for name in observation.visible[view]]
                            for view in VIEWS}
        else:
            seen_by_view = detector.visible(observation)
        for view in VIEWS:
            setattr(response, view, image_message(observation.rgb[view], observation.time, f"head_camera_{view}"))
            seen = seen_by_view.get(view, [])
            response.visible.append(VisibleObjects(view=view, names=[name for name, _ in seen],
                                                   locations=[location for _, location in seen]))
        if request.include_depth:
            response.depth = [image_message(observation.depth[view], observation.time, f"head_camera_{view}")
                              for view in VIEWS]
        if observation.held_object is not None:
            response.inventory = [canonical[observation.held_object]]
        response.success, response.error_code = True, GetObservation.Response.NONE
    except Exception as error:  # includes BackendError before the first reset
        response.error_code = GetObservation.Response.SIMULATOR_ERROR
        response.error_msg = f"{type(error).__name__}: {error}"
    return response


def handle_query_scene(backend: SimBackend, request: QueryScene.Request,
                       response: QueryScene.Response) -> QueryScene.Response:
    """Serve /sim/query_scene: robot pose, held object, contact force, requested objects and containers."""
    try:
        snapshot_to_query(snapshot_of(backend, [name for name in request.names if name.strip()]), response)
    except UnknownNameError as error:
        response.error_code, response.error_msg = QueryScene.Response.UNKNOWN_NAME, str(error)
    except Exception as error:
        response.error_code = QueryScene.Response.SIMULATOR_ERROR
        response.error_msg = f"{type(error).__name__}: {error}"
    return response


def describe_backend_error(error: BaseException) -> str:
    """One line for a log."""
    if isinstance(error, (BackendError, SceneSpecError)):
        return str(error)
    return f"{type(error).__name__}: {error}"

