"""The embedded simulator: a MuJoCo apartment with the Fetch robot, built from a scene spec.

Headless rendering uses EGL, or OSMesa when EGL is unavailable (see gl_platform). A reset with the same spec as the
loaded one reuses the compiled model; a different spec compiles a new model and rebinds the renderer to it (one GL
context per backend for its whole life, so repeated resets do not leak GL resources).

MuJoCo-specific extras for skills built on top (arm IK with mink, for instance): `model`, `data`, `joint_qpos_index`,
`GRIP_SITE`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from habitat_bridge.backends.gl_platform import configure_gl_platform

configure_gl_platform()

import mujoco  # noqa: E402  (the GL platform must be chosen before mujoco is imported)
import numpy as np  # noqa: E402

from habitat_bridge import apartment, layout  # noqa: E402
from habitat_bridge import occupancy as occupancy_module  # noqa: E402
from habitat_bridge.backends import fetch_model, mjcf_builder  # noqa: E402
from habitat_bridge.backends.base import (  # noqa: E402
    VIEWS,
    BackendError,
    ContainerState,
    InstanceState,
    Observation,
    Pose,
    RobotState,
    Scene,
    SimBackend,
    UnknownNameError,
    resolve_name,
)
from habitat_bridge.backends.rendering import MultiViewRenderer  # noqa: E402
from habitat_bridge.furniture import slot_defaults  # noqa: E402
from habitat_bridge.official import OfficialEpisode  # noqa: E402
from habitat_bridge.scene_spec import Articulation, Furniture, SceneSpec  # noqa: E402

GRIP_SITE = fetch_model.PREFIX + fetch_model.GRIP_SITE
_P = fetch_model.PREFIX
# Support-region match tolerances (metres): how far an object's bottom may sit from the plane, and how far past the
# region's edge its centre may be, to count as resting there.
_BELOW, _ABOVE, _EDGE = 0.03, 0.05, 0.04
# How far (m or rad) the base actuators' integrated targets may lead the real base pose beyond the tracking lag.
_WINDUP = 0.01


@dataclass(frozen=True)
class MujocoBackendConfig:
    """Settings of the MuJoCo backend.

    Attributes:
        image_width: pixels per view.
        image_height: pixels per view.
        timestep: physics step (seconds).
        cameras: head-camera field of view and tilt, third-person camera placement.
        settle_seconds: physics time run at reset so objects come to rest.
        visible_min_pixels: pixels an instance needs in a view's segmentation to count as visible.
        torso_height: torso lift at reset (metres).
    """

    image_width: int = 256
    image_height: int = 256
    timestep: float = 0.004
    cameras: fetch_model.FetchCameraConfig = field(default_factory=fetch_model.FetchCameraConfig)
    settle_seconds: float = 0.2
    visible_min_pixels: int = 30
    torso_height: float = 0.15

    def __post_init__(self) -> None:
        if not (16 <= self.image_width <= 1024 and 16 <= self.image_height <= 1024):
            raise ValueError(f"image size must be within 16..1024 pixels, got {self.image_width}x{self.image_height}")
        if not 0.0005 <= self.timestep <= 0.01:
            raise ValueError(f"timestep must be within [0.0005, 0.01] s, got {self.timestep}")
        if not 0.0 <= self.settle_seconds <= 5.0:
            raise ValueError(f"settle_seconds must be within [0, 5], got {self.settle_seconds}")
        if self.visible_min_pixels < 1:
            raise ValueError(f"visible_min_pixels must be at least 1, got {self.visible_min_pixels}")
        if not 0.0 <= self.torso_height <= 0.3861:
            raise ValueError(f"torso_height must be within [0, 0.3861] m, got {self.torso_height}")


@dataclass(frozen=True)
class _Instance:
    """One named thing of the loaded scene and how to find it in the model."""

    name: str
    canonical: str
    kind: str
    body: int  # body id (-1 for rooms)
    size: tuple[float, float, float]
    labels: tuple[str, ...] = ()


class MujocoBackend(SimBackend):
    """The MuJoCo apartment with a Fetch robot (see the module docstring)."""

    name = "mujoco"

    def __init__(self, config: MujocoBackendConfig | None = None) -> None:
        self.config = config or MujocoBackendConfig()
        self._spec: SceneSpec | None = None
        self._model: mujoco.MjModel | None = None
        self._data: mujoco.MjData | None = None
        self._renderer: MultiViewRenderer | None = None
        self._command = (0.0, 0.0)
        self._held: str | None = None
        self._contact_force = 0.0

    # ---- properties -------------------------------------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled MuJoCo model (MuJoCo-specific)."""
        self._require()
        return self._model  # type: ignore[return-value]

    @property
    def data(self) -> mujoco.MjData:
        """The MuJoCo state (MuJoCo-specific; call mj_forward after writing to it)."""
        self._require()
        return self._data  # type: ignore[return-value]

    @property
    def spec(self) -> SceneSpec:
        """The loaded scene spec (offsets resolved)."""
        self._require()
        return self._spec  # type: ignore[return-value]

    @property
    def episode_id(self) -> str:
        return self.spec.name

    @property
    def time(self) -> float:
        return float(self.data.time)

    @property
    def views(self) -> tuple[str, ...]:
        return VIEWS + fetch_model.THIRD_PERSON_VIEWS

    @property
    def arm_joint_names(self) -> tuple[str, ...]:
        return fetch_model.ARM_JOINTS

    @property
    def actuated_joint_names(self) -> tuple[str, ...]:
        """Torso, head, arm and finger joints (the order of RobotState.joint_names)."""
        return (fetch_model.TORSO_JOINT, *fetch_model.HEAD_JOINTS, *fetch_model.ARM_JOINTS,
                *fetch_model.FINGER_JOINTS)

    def joint_qpos_index(self, joint: str) -> int:
        """qpos address of a robot joint (short name, e.g. "elbow_flex_joint") or articulation ("art/<name>")."""
        model = self.model
        full = joint if joint.startswith(("art/", "obj/")) else _P + joint
        joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, full)
        if joint_id < 0:
            raise UnknownNameError(joint)
        return int(model.jnt_qposadr[joint_id])

    def _require(self) -> None:
        if self._model is None or self._data is None or self._spec is None:
            raise BackendError("the simulator has no episode yet: call reset first")

    # ---- episode ----------------------------------------------------------------------------------------------
    def reset(self, scene: Scene | None = None, seed: int | None = None) -> str:
        if scene is None:
            spec = apartment.generate_apartment(0 if seed is None else seed)
        elif isinstance(scene, OfficialEpisode):
            spec = apartment.spec_from_official(scene, 0 if seed is None else seed)
        else:
            spec = scene if seed is None else scene.with_seed(seed)
        spec = layout.resolve_offsets(spec)
        if spec != self._spec or self._model is None:
            self._build(spec)
        self._initialise()
        return spec.name

    def _build(self, spec: SceneSpec) -> None:
        options = mjcf_builder.MjcfOptions(timestep=self.config.timestep, cameras=self.config.cameras,
                                           offscreen_size=(max(1024, 4 * self.config.image_width),
                                                           max(256, self.config.image_height)))
        xml = mjcf_builder.build_mjcf(spec, options)
        try:
            model = mujoco.MjModel.from_xml_string(xml)
        except ValueError as error:
            raise BackendError(f"MuJoCo could not compile scene {spec.name!r}: {error}") from None
        self._spec, self._model, self._data = spec, model, mujoco.MjData(model)
        if self._renderer is None:
            self._renderer = MultiViewRenderer(model, self.config.image_width, self.config.image_height, 4)
        else:
            self._renderer.rebind(model)
        self._index_model(model, spec)

    def _index_model(self, model: mujoco.MjModel, spec: SceneSpec) -> None:
        """Look up ids once per model: instances, cameras, actuators, geoms -> instances."""

        def body(name: str) -> int:
            return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)

        instances: list[_Instance] = []
        for obj in spec.objects:
            instances.append(_Instance(obj.name, obj.canonical, "object", body(mjcf_builder.object_body(obj.name)),
                                       obj.size))
        for piece in spec.furniture:
            kind = "container" if piece.articulations else "furniture"
            instances.append(_Instance(piece.name, piece.canonical, kind,
                                       body(mjcf_builder.furniture_body(piece.name)), piece.size))
            for articulation in piece.articulations:
                label = slot_defaults(piece.model, articulation.slot).label
                instances.append(_Instance(articulation.name, piece.canonical, "container",
                                           body(mjcf_builder.articulation_name(articulation.name)), piece.size,
                                           (label,)))
        for room in spec.rooms:
            xmin, ymin, xmax, ymax = room.bounds
            instances.append(_Instance(room.name, room.canonical or room.kind, "room", -1,
                                       (xmax - xmin, ymax - ymin, mjcf_builder.CEILING_HEIGHT), (room.kind,)))
        self._instances = instances
        self._instance_ids = {item.name: index for index, item in enumerate(instances)}
        # Doors and drawers count as their furniture in the lists of visible things.
        owners = {articulation.name: piece.name for piece in spec.furniture for articulation in piece.articulations}
        self._visible_owner = np.array([self._instance_ids[owners.get(item.name, item.name)] for item in instances],
                                       dtype=np.int32)
        body_instance = np.full(model.nbody, -1, dtype=np.int32)
        for index, item in enumerate(instances):
            if item.body >= 0:
                body_instance[item.body] = index
        self._geom_instance = body_instance[model.geom_bodyid]
        self._cameras = {view: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, _P + view) for view in self.views}

        def actuator(name: str) -> int:
            return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)

        self._base_actuators = [actuator(_P + joint) for joint in fetch_model.BASE_JOINTS]
        self._arm_actuators = [actuator(_P + joint) for joint in fetch_model.ARM_JOINTS]
        self._finger_actuators = [actuator(_P + joint) for joint in fetch_model.FINGER_JOINTS]
        self._torso_actuator = actuator(_P + fetch_model.TORSO_JOINT)
        self._head_actuators = [actuator(_P + joint) for joint in fetch_model.HEAD_JOINTS]
        self._base_qpos = [self.joint_qpos_index(joint) for joint in fetch_model.BASE_JOINTS]
        self._base_dof = [int(model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, _P + joint)])
                          for joint in fetch_model.BASE_JOINTS]
        # Seconds a base actuator's target lags a constant-velocity command: joint damping over stiffness.
        self._base_lag = [float(model.dof_damping[dof] / model.actuator_gainprm[actuator, 0])
                          for dof, actuator in zip(self._base_dof, self._base_actuators)]
        self._actuated_qpos = [self.joint_qpos_index(joint) for joint in self.actuated_joint_names]
        self._actuated_dof = [int(model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, _P + joint)])
                              for joint in self.actuated_joint_names]
        self._articulations: dict[str, tuple[Furniture, Articulation, int, int, int]] = {}
        for piece in spec.furniture:
            for articulation in piece.articulations:
                name = mjcf_builder.articulation_name(articulation.name)
                joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
                self._articulations[articulation.name] = (piece, articulation, int(model.jnt_qposadr[joint_id]),
                                                          actuator(name), body(name))
        self._robot_geoms = np.array([model.body(int(model.geom_bodyid[geom])).name.startswith(_P)
                                      for geom in range(model.ngeom)])
        self._gripper_body = body(_P + fetch_model.GRIPPER_BODY)
        self._grip_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)
        self._grasp_equality = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, mjcf_builder.GRASP_EQUALITY)
        self._object_conaffinity = model.geom_conaffinity.copy()

    def _initialise(self) -> None:
        """Robot at its start pose with the arm tucked, containers at their initial positions, objects settled."""
        model, data, spec = self.model, self.data, self.spec
        mujoco.mj_resetData(model, data)
        model.geom_conaffinity[:] = self._object_conaffinity
        if self._grasp_equality >= 0:
            data.eq_active[self._grasp_equality] = 0
        self._held = None
        self._command = (0.0, 0.0)
        pose = spec.robot.pose
        self._place_base(pose.x, pose.y, pose.yaw)
        start = {fetch_model.TORSO_JOINT: self.config.torso_height,
                 **dict(zip(fetch_model.ARM_JOINTS, fetch_model.TUCKED_ARM)),
                 **{joint: fetch_model.FINGER_OPEN for joint in fetch_model.FINGER_JOINTS}}
        for joint, value in start.items():
            data.qpos[self.joint_qpos_index(joint)] = value
        data.ctrl[self._torso_actuator] = self.config.torso_height
        for actuator, value in zip(self._arm_actuators, fetch_model.TUCKED_ARM):
            data.ctrl[actuator] = value
        for actuator in self._finger_actuators:
            data.ctrl[actuator] = fetch_model.FINGER_OPEN
        for _, articulation, address, actuator, _ in self._articulations.values():
            data.qpos[address] = articulation.initial
            data.ctrl[actuator] = articulation.initial
        mujoco.mj_forward(model, data)
        self._run(self.config.settle_seconds)
        data.time = 0.0
        self._contact_force = 0.0
        mujoco.mj_forward(model, data)

    # ---- stepping and commands --------------------------------------------------------------------------------
    def step(self, seconds: float) -> None:
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds}")
        self._require()
        self._contact_force = 0.0
        self._run(seconds)

    def _run(self, seconds: float) -> None:
        model, data = self.model, self.data
        steps = int(round(seconds / model.opt.timestep))
        forward, turn = self._command
        yaw_address = self._base_qpos[2]
        activations = [int(model.actuator_actadr[actuator]) for actuator in self._base_actuators]
        try:
            for _ in range(steps):
                yaw = data.qpos[yaw_address]
                commands = (forward * math.cos(yaw), forward * math.sin(yaw), turn)
                for actuator, command in zip(self._base_actuators, commands):
                    data.ctrl[actuator] = command
                mujoco.mj_step(model, data)
                # Anti-windup: the integrated target may lead the real pose only by the lag that tracking the
                # command needs, so a blocked base does not build up a spring that later yanks it.
                for address, activation, lag, command in zip(self._base_qpos, activations, self._base_lag,
                                                             commands):
                    window = 1.5 * lag * abs(command) + _WINDUP
                    data.act[activation] = min(max(data.act[activation], data.qpos[address] - window),
                                               data.qpos[address] + window)
                if data.ncon:
                    self._contact_force = max(self._contact_force, self._robot_contact_force())
            # Positions, cameras and contacts computed for the state the steps ended in (queries and renders).
            mujoco.mj_forward(model, data)
        except mujoco.FatalError as error:
            raise BackendError(f"MuJoCo failed while stepping: {error}") from None
        if not np.all(np.isfinite(data.qpos)):
            raise BackendError("the simulation diverged (non-finite state); reset the episode")

    def _robot_contact_force(self) -> float:
        model, data = self.model, self.data
        contacts = data.contact
        geoms = contacts.geom[: data.ncon]
        touching = self._robot_geoms[geoms[:, 0]] ^ self._robot_geoms[geoms[:, 1]]
        if not touching.any():
            return 0.0
        held_body = self._body_of(self._held) if self._held else -1
        largest = 0.0
        wrench = np.zeros(6)
        for index in np.nonzero(touching)[0]:
            if held_body >= 0 and held_body in (model.geom_bodyid[geoms[index, 0]], model.geom_bodyid[geoms[index, 1]]):
                continue
            mujoco.mj_contactForce(model, data, int(index), wrench)
            largest = max(largest, float(abs(wrench[0])))
        return largest

    def set_base_velocity(self, forward: float, turn: float) -> None:
        if not (math.isfinite(forward) and math.isfinite(turn)):
            raise ValueError(f"base velocity must be finite, got ({forward}, {turn})")
        self._require()
        self._command = (float(np.clip(forward, -1.0, 1.0)), float(np.clip(turn, -1.5, 1.5)))

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        values = np.asarray(positions, dtype=float)
        if values.shape != (7,) or not np.all(np.isfinite(values)):
            raise ValueError(f"arm targets must be 7 finite numbers, got {list(positions)!r}")
        self._require()
        model, data = self.model, self.data
        for actuator, value in zip(self._arm_actuators, values):
            joint = model.actuator_trnid[actuator, 0]
            if model.jnt_limited[joint]:
                value = np.clip(value, *model.jnt_range[joint])
            data.ctrl[actuator] = value

    def set_torso_target(self, height: float) -> None:
        if not math.isfinite(height):
            raise ValueError(f"torso target must be finite, got {height}")
        self._require()
        low, high = self.model.actuator_ctrlrange[self._torso_actuator]
        self.data.ctrl[self._torso_actuator] = float(np.clip(height, low, high))

    def set_head_target(self, pan: float, tilt: float) -> None:
        if not (math.isfinite(pan) and math.isfinite(tilt)):
            raise ValueError(f"head targets must be finite, got ({pan}, {tilt})")
        self._require()
        model, data = self.model, self.data
        for actuator, value in zip(self._head_actuators, (pan, tilt)):
            joint = model.actuator_trnid[actuator, 0]
            data.ctrl[actuator] = float(np.clip(value, *model.jnt_range[joint]))

    # ---- grasping ---------------------------------------------------------------------------------------------
    def _body_of(self, name: str) -> int:
        return self._instances[self._instance_ids[name]].body

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        self._require()
        model, data = self.model, self.data
        if self._held is not None:
            return self._held
        grip = data.site_xpos[self._grip_site]
        best, best_distance = None, max_distance
        for item in self._instances:
            if item.kind != "object":
                continue
            rotation = data.xmat[item.body].reshape(3, 3)
            local = rotation.T @ (grip - data.xpos[item.body])
            half = np.asarray(item.size) / 2
            distance = float(np.linalg.norm(local - np.clip(local, -half, half)))
            if distance <= best_distance:
                best, best_distance = item, distance
        if best is None:
            for actuator in self._finger_actuators:
                data.ctrl[actuator] = 0.0
            return None
        self._weld(best)
        return best.name

    def _weld(self, item: _Instance) -> None:
        model, data = self.model, self.data
        if self._grasp_equality < 0:
            raise BackendError("this scene has no grasp constraint (it has no objects)")
        gripper = self._gripper_body
        inverse = np.zeros(4)
        mujoco.mju_negQuat(inverse, data.xquat[gripper])
        relative_position = np.zeros(3)
        mujoco.mju_rotVecQuat(relative_position, data.xpos[item.body] - data.xpos[gripper], inverse)
        relative_orientation = np.zeros(4)
        mujoco.mju_mulQuat(relative_orientation, inverse, data.xquat[item.body])
        model.eq_obj2id[self._grasp_equality] = item.body
        model.eq_data[self._grasp_equality, 0:3] = 0.0
        model.eq_data[self._grasp_equality, 3:6] = relative_position
        model.eq_data[self._grasp_equality, 6:10] = relative_orientation
        model.eq_data[self._grasp_equality, 10] = 1.0
        data.eq_active[self._grasp_equality] = 1
        # The held object no longer collides with the robot; the fingers close onto its width.
        object_geoms = model.geom_bodyid == item.body
        model.geom_conaffinity[object_geoms] = self._object_conaffinity[object_geoms] & ~fetch_model.ROBOT_BIT
        finger = max(0.0, min(fetch_model.FINGER_OPEN, min(item.size[0], item.size[1]) / 2 - 0.001))
        for actuator in self._finger_actuators:
            data.ctrl[actuator] = finger
        self._held = item.name

    def open_gripper(self) -> str | None:
        self._require()
        model, data = self.model, self.data
        for actuator in self._finger_actuators:
            data.ctrl[actuator] = fetch_model.FINGER_OPEN
        released, self._held = self._held, None
        if released is not None:
            data.eq_active[self._grasp_equality] = 0
            model.geom_conaffinity[:] = self._object_conaffinity
            # Held still, the object counts as ready to sleep; wake it fully so that it falls instead of hanging.
            tree = int(model.body_treeid[self._body_of(released)])
            data.tree_asleep[tree] = -(1 + mujoco.mjMINAWAKE)
        return released

    def held_object(self) -> str | None:
        self._require()
        return self._held

    # ---- queries ----------------------------------------------------------------------------------------------
    def _pose_of(self, item: _Instance) -> Pose:
        data = self.data
        if item.kind == "room":
            room = self.spec.item(item.name)
            x, y = room.center  # type: ignore[union-attr]
            return Pose((x, y, 0.0))
        if item.kind == "object":
            return Pose(tuple(float(v) for v in data.xpos[item.body]),  # type: ignore[arg-type]
                        tuple(float(v) for v in data.xquat[item.body]))  # type: ignore[arg-type]
        position = data.xpos[item.body]
        quaternion = data.xquat[item.body]
        height = item.size[2] / 2
        return Pose((float(position[0]), float(position[1]), float(position[2] + height)),
                    tuple(float(v) for v in quaternion))  # type: ignore[arg-type]

    def _place_base(self, x: float, y: float, yaw: float) -> None:
        """Set the base joints and the base actuators' integrated targets to a pose."""
        model, data = self.model, self.data
        for address, actuator, value in zip(self._base_qpos, self._base_actuators, (x, y, yaw)):
            data.qpos[address] = value
            data.act[model.actuator_actadr[actuator]] = value

    def _base_pose(self) -> tuple[float, float, float]:
        data = self.data
        x, y, yaw = (float(data.qpos[address]) for address in self._base_qpos)
        return x, y, yaw

    def resolve(self, name: str) -> list[str]:
        self._require()
        matches = resolve_name(name, [(item.name, item.canonical, item.labels) for item in self._instances])
        x, y, _ = self._base_pose()
        return sorted(matches, key=lambda match: math.dist((x, y), self._pose_of(
            self._instances[self._instance_ids[match]]).position[:2]))

    def _selected(self, names: Iterable[str] | None) -> list[_Instance]:
        wanted = list(names or [])
        if not wanted:
            return list(self._instances)
        chosen: dict[str, _Instance] = {}
        for name in wanted:
            matches = self.resolve(name)
            if not matches:
                raise UnknownNameError(name)
            for match in matches:
                chosen.setdefault(match, self._instances[self._instance_ids[match]])
        return list(chosen.values())

    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        self._require()
        x, y, _ = self._base_pose()
        relations = self.relations()
        states = []
        for item in self._selected(names):
            pose = self._pose_of(item)
            receptacle, surface, inside = relations.get(item.name, ("", "", False))
            states.append(InstanceState(item.name, item.canonical, item.kind, pose, item.size, receptacle, surface,
                                        inside, math.dist((x, y), pose.position[:2])))
        return states

    def relations(self) -> dict[str, tuple[str, str, bool]]:
        """Object name -> (receptacle, support region, inside) for objects resting on or in something.

        An object rests on a region when its lowest point is within a few centimetres of the region's plane and its
        centre lies over the region (drawers counted at their current opening). Held objects and objects on the
        floor are absent.
        """
        self._require()
        data, spec = self.data, self.spec
        positions = {name: float(data.qpos[address]) for name, (_, _, address, _, _) in self._articulations.items()}
        regions = []
        for region in layout.world_surfaces(spec):
            offset = np.zeros(3)
            if region.surface.part is not None:
                piece = region.furniture
                articulation = piece.articulation_for_slot(region.surface.part)
                if articulation is not None:
                    moving = next(part for part in piece.geometry.moving if part.key == region.surface.part)
                    delta = positions[articulation.name] - articulation.initial
                    local = np.asarray(moving.axis) * delta
                    c, s = math.cos(piece.pose.yaw), math.sin(piece.pose.yaw)
                    offset = np.array([c * local[0] - s * local[1], s * local[0] + c * local[1], local[2]])
            regions.append((region, offset))
        found: dict[str, tuple[str, str, bool]] = {}
        for item in self._instances:
            if item.kind != "object" or item.name == self._held:
                continue
            center = data.xpos[item.body]
            rotation = data.xmat[item.body].reshape(3, 3)
            bottom = center[2] - float(np.abs(rotation[2]) @ (np.asarray(item.size) / 2))
            best, best_gap = None, None
            for region, offset in regions:
                plane = region.center[2] + offset[2]
                gap = bottom - plane
                if not -_BELOW <= gap <= _ABOVE:
                    continue
                u, v = region.to_local(center[0] - offset[0], center[1] - offset[1])
                if abs(u) > region.half[0] + _EDGE or abs(v) > region.half[1] + _EDGE:
                    continue
                if best_gap is None or abs(gap) < best_gap:
                    best, best_gap = region, abs(gap)
            if best is not None:
                found[item.name] = (best.receptacle, best.surface.name, best.surface.inside)
        return found

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        self._require()
        wanted = list(names or [])
        selected = list(self._articulations)
        if wanted:
            chosen: dict[str, None] = {}
            for name in wanted:
                matches = [match for match in self._matching_articulations(name)]
                if not matches:
                    raise UnknownNameError(name)
                chosen.update(dict.fromkeys(matches))
            selected = list(chosen)
        return [self._container_state(name) for name in selected]

    def _matching_articulations(self, name: str) -> list[str]:
        """Articulations named, or belonging to furniture named, `name`."""
        result = []
        for match in self.resolve(name):
            if match in self._articulations:
                result.append(match)
            else:
                result.extend(articulation for articulation, (piece, *_rest) in self._articulations.items()
                              if piece.name == match)
        return list(dict.fromkeys(result))

    def _container_state(self, name: str) -> ContainerState:
        piece, articulation, address, _, body = self._articulations[name]
        moving = next(part for part in piece.geometry.moving if part.key == articulation.slot)
        handle_local = np.asarray(moving.handle) - np.asarray(moving.pivot)
        handle = self.data.xpos[body] + self.data.xmat[body].reshape(3, 3) @ handle_local
        label = slot_defaults(piece.model, articulation.slot).label
        return ContainerState(name, piece.canonical, label, piece.name, articulation.joint,
                              float(self.data.qpos[address]), articulation.range[0], articulation.range[1],
                              articulation.open_threshold, tuple(float(v) for v in handle))  # type: ignore[arg-type]

    def _articulation(self, name: str) -> tuple[Furniture, Articulation, int, int, int]:
        self._require()
        if name not in self._articulations:
            raise UnknownNameError(name)
        return self._articulations[name]

    def set_container_target(self, name: str, position: float) -> None:
        _, articulation, _, actuator, _ = self._articulation(name)
        if not math.isfinite(position):
            raise ValueError(f"container target must be finite, got {position}")
        self.data.ctrl[actuator] = float(np.clip(position, *articulation.range))

    def set_container_position(self, name: str, position: float) -> None:
        piece, articulation, address, actuator, _ = self._articulation(name)
        if not math.isfinite(position):
            raise ValueError(f"container position must be finite, got {position}")
        data, model = self.data, self.model
        value = float(np.clip(position, *articulation.range))
        delta = value - float(data.qpos[address])
        if articulation.joint == "slide":
            moving = next(part for part in piece.geometry.moving if part.key == articulation.slot)
            local = np.asarray(moving.axis) * delta
            c, s = math.cos(piece.pose.yaw), math.sin(piece.pose.yaw)
            shift = np.array([c * local[0] - s * local[1], s * local[0] + c * local[1], local[2]])
            for obj_name, (receptacle, _, _) in self.relations().items():
                if receptacle == name:
                    joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mjcf_builder.object_body(obj_name))
                    data.qpos[model.jnt_qposadr[joint]: model.jnt_qposadr[joint] + 3] += shift
        data.qpos[address] = value
        data.ctrl[actuator] = value
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)

    def contact_force(self) -> float:
        self._require()
        return self._contact_force

    def occupancy_grid(self, resolution: float = 0.05) -> occupancy_module.OccupancyGrid:
        self._require()
        positions = {name: float(self.data.qpos[address])
                     for name, (_, _, address, _, _) in self._articulations.items()}
        return occupancy_module.occupancy_grid(self.spec, resolution, positions)

    def robot_state(self) -> RobotState:
        self._require()
        data = self.data
        x, y, yaw = self._base_pose()
        vx, vy, turn = (float(data.qvel[dof]) for dof in self._base_dof)
        forward = vx * math.cos(yaw) + vy * math.sin(yaw)
        site_rotation = data.site_xmat[self._grip_site]
        quaternion = np.zeros(4)
        mujoco.mju_mat2Quat(quaternion, site_rotation)
        return RobotState(
            base=Pose.from_yaw(x, y, 0.0, yaw), base_velocity=(forward, turn),
            joint_names=self.actuated_joint_names,
            joint_positions=tuple(float(data.qpos[address]) for address in self._actuated_qpos),
            joint_velocities=tuple(float(data.qvel[dof]) for dof in self._actuated_dof),
            gripper=Pose(tuple(float(v) for v in data.site_xpos[self._grip_site]),  # type: ignore[arg-type]
                         tuple(float(v) for v in quaternion)),  # type: ignore[arg-type]
            held_object=self._held, time=float(data.time))

    def teleport_base(self, x: float, y: float, yaw: float) -> None:
        if not all(math.isfinite(value) for value in (x, y, yaw)):
            raise ValueError(f"base pose must be finite, got ({x}, {y}, {yaw})")
        self._require()
        model, data = self.model, self.data
        held_name = self._held
        held = self._body_of(held_name) if held_name else -1
        before = (data.xpos[held].copy(), data.xquat[held].copy()) if held >= 0 else None
        old_x, old_y, old_yaw = self._base_pose()
        self._place_base(x, y, yaw)
        if before is not None and held_name is not None:
            # Carry the held object rigidly with the base.
            turn = yaw - old_yaw
            c, s = math.cos(turn), math.sin(turn)
            dx, dy = before[0][0] - old_x, before[0][1] - old_y
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mjcf_builder.object_body(held_name))
            address = model.jnt_qposadr[joint]
            data.qpos[address: address + 3] = (x + c * dx - s * dy, y + s * dx + c * dy, before[0][2])
            rotation = np.array([math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)])
            quaternion = np.zeros(4)
            mujoco.mju_mulQuat(quaternion, rotation, before[1])
            data.qpos[address + 3: address + 7] = quaternion
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)

    # ---- cameras ----------------------------------------------------------------------------------------------
    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        self._require()
        unknown = [view for view in views if view not in self._cameras]
        if unknown or not views:
            raise ValueError(f"unknown or missing views {unknown or list(views)}; expected some of "
                             f"{', '.join(self.views)}")
        renderer, data = self._renderer, self.data
        if renderer is None:
            raise BackendError("the renderer is closed")
        observation = Observation(time=float(data.time), rgb={}, held_object=self._held,
                                  instance_names=tuple(item.name for item in self._instances),
                                  instance_canonicals=tuple(item.canonical for item in self._instances))
        head = [view for view in views if view in VIEWS]
        third = [view for view in views if view not in VIEWS]
        # Head views: inside the walls, without the robot body behind and below the cameras. Third-person views: a
        # cut-away without walls and ceiling, so the robot is always in sight.
        batches = ((head, (fetch_model.BODY_GROUP,), False), (third, (mjcf_builder.WALL_GROUP,), True))
        for batch, hidden, skybox in batches:
            for start in range(0, len(batch), 4):
                chunk = batch[start: start + 4]
                images = renderer.render(data, [self._cameras[view] for view in chunk], depth=depth,
                                         segmentation=segmentation, hidden_groups=hidden, skybox=skybox)
                for view, image in zip(chunk, images):
                    observation.rgb[view] = image.rgb
                    if image.depth is not None:
                        observation.depth[view] = image.depth
                    if image.segmentation is not None:
                        instance_ids = np.where(image.segmentation >= 0,
                                                self._geom_instance[np.maximum(image.segmentation, 0)], -1)
                        observation.segmentation[view] = instance_ids.astype(np.int32)
                        observation.visible[view] = self._visible(instance_ids)
        return observation

    def _visible(self, instance_ids: np.ndarray) -> tuple[str, ...]:
        seen_ids = self._visible_owner[instance_ids[instance_ids >= 0].ravel()]
        counts = np.bincount(seen_ids, minlength=len(self._instances))
        seen = [self._instances[index] for index in np.nonzero(counts >= self.config.visible_min_pixels)[0]]
        x, y, _ = self._base_pose()
        seen.sort(key=lambda item: math.dist((x, y), self._pose_of(item).position[:2]))
        return tuple(item.name for item in seen)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._model = self._data = None
        self._spec = None
