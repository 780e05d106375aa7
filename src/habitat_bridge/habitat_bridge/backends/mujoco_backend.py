"""The embedded simulator: a MuJoCo apartment with the Fetch robot, built from a scene spec.

Headless rendering uses EGL, or OSMesa when EGL is unavailable (see gl_platform). A reset with the same spec as the
loaded one reuses the compiled model; a different spec compiles a new model and rebinds the renderer to it (one GL
context per backend for its whole life, so repeated resets do not leak GL resources). Every reset then hands the C
heap's free pages back to the operating system (native_memory): the previous scene's model and data, and the last
episode's buffers, would otherwise stay resident in the malloc arenas of the threads that freed them.

MuJoCo-specific extras for skills built on top (arm IK with mink, for instance): `model`, `data`, `joint_qpos_index`
(and mujoco_index.GRIP_SITE, the grasp site's name); `observe_state` renders a copy of `data`. The settings are
habitat_bridge.backends.mujoco_config.MujocoBackendConfig.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from habitat_bridge.backends.gl_platform import configure_gl_platform

configure_gl_platform()

import mujoco  # noqa: E402  (the GL platform must be chosen before mujoco is imported)
import numpy as np  # noqa: E402

from emmoe_core.robot import fetch  # noqa: E402
from emmoe_core.robot.grid import OccupancyGrid  # noqa: E402
from emmoe_core.robot.layout import SceneLayout  # noqa: E402
from emmoe_core.robot.state import (  # noqa: E402
    VIEWS, BackendError, ContainerState, InstanceState, Observation, Pose, RobotState, UnknownNameError)

from habitat_bridge import apartment, layout  # noqa: E402
from habitat_bridge import occupancy as occupancy_module  # noqa: E402
from habitat_bridge.backends import fetch_model, mjcf_builder  # noqa: E402
from habitat_bridge.backends.arm_collisions import ArmCollisionChecker  # noqa: E402
from habitat_bridge.backends.base import Scene, SimBackend, resolve_name  # noqa: E402
from habitat_bridge.backends.mujoco_index import (  # noqa: E402
    ACTUATED_JOINTS, Instance, ModelIndex, container_state, index_model, instance_pose, qpos_address,
    resting_relations)
from habitat_bridge.backends.mujoco_config import MujocoBackendConfig  # noqa: E402
from habitat_bridge.backends.mujoco_robot import (  # noqa: E402
    carry, hand_geoms, hold_handle, let_go_handle, nearest_handle, nearest_object, planar_scan, release, render_views,
    restore_contacts, run_physics, site_pose, weld)
from habitat_bridge.backends.native_memory import release_free_memory  # noqa: E402
from habitat_bridge.backends.rendering import MultiViewRenderer  # noqa: E402
from habitat_bridge.official import OfficialEpisode  # noqa: E402
from habitat_bridge.scene_spec import Articulation, Furniture, SceneSpec  # noqa: E402


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
        self._held_part: str | None = None
        # Body of a released object that ignores the robot until the hand is clear of it (-1: none).
        self._parting = -1
        self._contact_force = 0.0
        self._layout: SceneLayout | None = None
        self._arm_checker: ArmCollisionChecker | None = None
        self._index: ModelIndex
        self._hand = np.zeros(0, dtype=int)

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
        return fetch.ARM_JOINTS

    @property
    def actuated_joint_names(self) -> tuple[str, ...]:
        """Torso, head, arm and finger joints (the order of RobotState.joint_names)."""
        return ACTUATED_JOINTS

    def joint_qpos_index(self, joint: str) -> int:
        """qpos address of a robot joint (short name, e.g. "elbow_flex_joint") or articulation ("art/<name>")."""
        return qpos_address(self.model, joint)

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
        release_free_memory()  # the old scene's model and data, the last episode's buffers (module docstring)
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
        self._layout, self._arm_checker = None, None
        if self._renderer is None:
            self._renderer = MultiViewRenderer(model, self.config.image_width, self.config.image_height, 4)
        else:
            self._renderer.rebind(model)
        self._index = index_model(model, spec, self.views)
        self._hand = hand_geoms(model, self._index)

    def _initialise(self) -> None:
        """Robot at its start pose with the arm tucked, containers at their initial positions, objects settled."""
        model, data, spec = self.model, self.data, self.spec
        mujoco.mj_resetData(model, data)
        model.geom_conaffinity[:] = self._index.object_conaffinity
        model.actuator_gainprm[:], model.actuator_biasprm[:] = self._index.actuator_gains
        self._held = self._held_part = None
        self._parting = -1
        self._command = (0.0, 0.0)
        pose = spec.robot.pose
        self._place_base(pose.x, pose.y, pose.yaw)
        start = {fetch.TORSO_JOINT: self.config.torso_height,
                 **dict(zip(fetch.ARM_JOINTS, fetch.TUCKED_ARM)),
                 **{joint: fetch_model.FINGER_OPEN for joint in fetch.FINGER_JOINTS}}
        for joint, value in start.items():
            data.qpos[self.joint_qpos_index(joint)] = value
        data.ctrl[self._index.torso_actuator] = self.config.torso_height
        for actuator, value in zip(self._index.arm_actuators, fetch.TUCKED_ARM):
            data.ctrl[actuator] = value
        for actuator in self._index.finger_actuators:
            data.ctrl[actuator] = fetch_model.FINGER_OPEN
        for _, articulation, address, actuator, _ in self._index.articulations.values():
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
        held_body = self._body_of(self._held) if self._held else -1
        force = run_physics(self.model, self.data, self._index, self._command, seconds, held_body)
        self._contact_force = max(self._contact_force, force)
        if self._parting >= 0 and restore_contacts(self.model, self.data, self._index, self._parting,
                                                   self._hand):
            self._parting = -1

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
        for actuator, value in zip(self._index.arm_actuators, values):
            joint = model.actuator_trnid[actuator, 0]
            if model.jnt_limited[joint]:
                value = np.clip(value, *model.jnt_range[joint])
            data.ctrl[actuator] = value

    def set_torso_target(self, height: float) -> None:
        if not math.isfinite(height):
            raise ValueError(f"torso target must be finite, got {height}")
        self._require()
        low, high = self.model.actuator_ctrlrange[self._index.torso_actuator]
        self.data.ctrl[self._index.torso_actuator] = float(np.clip(height, low, high))

    def set_head_target(self, pan: float, tilt: float) -> None:
        if not (math.isfinite(pan) and math.isfinite(tilt)):
            raise ValueError(f"head targets must be finite, got ({pan}, {tilt})")
        self._require()
        model, data = self.model, self.data
        for actuator, value in zip(self._index.head_actuators, (pan, tilt)):
            joint = model.actuator_trnid[actuator, 0]
            data.ctrl[actuator] = float(np.clip(value, *model.jnt_range[joint]))

    # ---- grasping ---------------------------------------------------------------------------------------------
    def _body_of(self, name: str) -> int:
        return self._index.instances[self._index.instance_ids[name]].body

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        self._require()
        if self._held is not None:
            return self._held
        best = nearest_object(self._index, self.data, max_distance)
        if best is not None:
            weld(self.model, self.data, self._index, best)
            self._held = best.name
            if best.body == self._parting:
                self._parting = -1
            return best.name
        # No object between the fingers: a door or drawer handle there is held (held_object() stays None).
        if self._held_part is not None:
            return self._held_part
        handle = nearest_handle(self._index, self.data, max_distance)
        if handle is not None:
            self._held_part, width = handle
            hold_handle(self.model, self.data, self._index, self._held_part, width)
            return self._held_part
        for actuator in self._index.finger_actuators:
            self.data.ctrl[actuator] = 0.0
        return None

    def open_gripper(self) -> str | None:
        self._require()
        if self._held_part is not None:
            part, self._held_part = self._held_part, None
            let_go_handle(self.model, self.data, self._index, part)
            return part
        released, self._held = self._held, None
        body = self._body_of(released) if released is not None else -1
        release(self.model, self.data, self._index, body)
        if body >= 0:
            self._parting = body
        return released

    def held_object(self) -> str | None:
        self._require()
        return self._held

    # ---- queries ----------------------------------------------------------------------------------------------
    def _pose_of(self, item: Instance, data: mujoco.MjData | None = None) -> Pose:
        return instance_pose(self.spec, self.data if data is None else data, item)

    def _place_base(self, x: float, y: float, yaw: float) -> None:
        """Set the base joints and the base actuators' integrated targets to a pose."""
        model, data = self.model, self.data
        for address, actuator, value in zip(self._index.base_qpos, self._index.base_actuators, (x, y, yaw)):
            data.qpos[address] = value
            data.act[model.actuator_actadr[actuator]] = value

    def _base_pose(self, data: mujoco.MjData | None = None) -> tuple[float, float, float]:
        data = self.data if data is None else data
        x, y, yaw = (float(data.qpos[address]) for address in self._index.base_qpos)
        return x, y, yaw

    def resolve(self, name: str) -> list[str]:
        self._require()
        matches = resolve_name(name, [(item.name, item.canonical, item.labels) for item in self._index.instances])
        x, y, _ = self._base_pose()
        return sorted(matches, key=lambda match: math.dist((x, y), self._pose_of(
            self._index.instances[self._index.instance_ids[match]]).position[:2]))

    def _selected(self, names: Iterable[str] | None) -> list[Instance]:
        wanted = list(names or [])
        if not wanted:
            return list(self._index.instances)
        chosen: dict[str, Instance] = {}
        for name in wanted:
            matches = self.resolve(name)
            if not matches:
                raise UnknownNameError(name)
            for match in matches:
                chosen.setdefault(match, self._index.instances[self._index.instance_ids[match]])
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
        """Object name -> (receptacle, support region, inside) for objects resting on or in something
        (mujoco_index.resting_relations)."""
        self._require()
        return resting_relations(self._index, self.data, self.spec, self._held)

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        self._require()
        wanted = list(names or [])
        selected = list(self._index.articulations)
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
            if match in self._index.articulations:
                result.append(match)
            else:
                result.extend(articulation for articulation, (piece, *_rest) in self._index.articulations.items()
                              if piece.name == match)
        return list(dict.fromkeys(result))

    def _container_state(self, name: str) -> ContainerState:
        return container_state(self._index, self.data, name)

    def _articulation(self, name: str) -> tuple[Furniture, Articulation, int, int, int]:
        self._require()
        if name not in self._index.articulations:
            raise UnknownNameError(name)
        return self._index.articulations[name]

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

    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        self._require()
        positions = {name: float(self.data.qpos[address])
                     for name, (_, _, address, _, _) in self._index.articulations.items()}
        return occupancy_module.occupancy_grid(self.spec, resolution, positions)

    def scene_layout(self) -> SceneLayout:
        if self._layout is None:
            self._layout = layout.scene_layout(self.spec)
        return self._layout

    def robot_description(self) -> str:
        return fetch_model.kinematic_description()

    def _checker(self) -> ArmCollisionChecker:
        if self._arm_checker is None:
            self._arm_checker = ArmCollisionChecker(
                self.model, self.data, self.joint_qpos_index, self._index.gripper_body,
                held_body=lambda: self._body_of(self._held) if self._held else -1)
        return self._arm_checker

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        return self._checker().collides(arm, torso)

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        return self._checker().segment_free(start, start_torso, end, end_torso)

    def robot_state(self) -> RobotState:
        self._require()
        data = self.data
        x, y, yaw = self._base_pose()
        vx, vy, turn = (float(data.qvel[dof]) for dof in self._index.base_dof)
        forward = vx * math.cos(yaw) + vy * math.sin(yaw)
        return RobotState(
            base=Pose.from_yaw(x, y, 0.0, yaw), base_velocity=(forward, turn),
            joint_names=self.actuated_joint_names,
            joint_positions=tuple(float(data.qpos[address]) for address in self._index.actuated_qpos),
            joint_velocities=tuple(float(data.qvel[dof]) for dof in self._index.actuated_dof),
            gripper=site_pose(data, self._index.grip_site),
            held_object=self._held, time=float(data.time))

    def laser_ranges(self, mount: tuple[float, float, float], angles: np.ndarray, max_range: float) -> np.ndarray:
        """A base laser at `mount` (forward, left, up of the base frame): mujoco_robot.planar_scan from there."""
        self._require()
        x, y, yaw = self._base_pose()
        ahead, left, up = mount
        cos, sin = math.cos(yaw), math.sin(yaw)
        origin = (x + ahead * cos - left * sin, y + ahead * sin + left * cos, up)
        return planar_scan(self.model, self.data, self._index, origin, yaw, angles, max_range)

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
            carry(model, data, held_name, before, (old_x, old_y, old_yaw), (x, y, yaw))
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)

    # ---- cameras ----------------------------------------------------------------------------------------------
    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        return self.observe_state(self.data, views, depth=depth, segmentation=segmentation)

    def observe_state(self, state: mujoco.MjData, views: Sequence[str] = VIEWS, *, depth: bool = False,
                      segmentation: bool = False) -> Observation:
        """observe() of `state`, a copy of `data` (mj_copyData): drawn in one thread while another steps on."""
        self._require()
        unknown = [view for view in views if view not in self._index.cameras]
        if unknown or not views:
            raise ValueError(f"unknown or missing views {unknown or list(views)}; expected some of "
                             f"{', '.join(self.views)}")
        if self._renderer is None:
            raise BackendError("the renderer is closed")
        x, y, _ = self._base_pose(state)
        return render_views(self._renderer, state, self._index, views, depth, segmentation, self._held,
                            self.config.visible_min_pixels,
                            lambda item: math.dist((x, y), self._pose_of(item, state).position[:2]))

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._model = self._data = None
        self._spec = None
        self._layout, self._arm_checker = None, None
