"""The SimBackend interface over habitat-lab rearrange (ReplicaCAD apartments, Habitat's Fetch).

NOT RUN ON A REAL HABITAT-SIM IN THIS REPOSITORY: habitat-sim has no wheel for this project's Python, so this adapter
is exercised only against stub `habitat`, `habitat_sim` and `magnum` modules (test/test_habitat_backend.py), which
check its wiring: the config it builds, the Fetch subclass with four head cameras, how observations, poses, grasps,
containers and the navmesh map onto this project's types. Expect to adjust it on the first real run.

What it does with a real install (habitat-lab >= 0.3 with habitat-sim, ReplicaCAD and the YCB objects under
`data_root`):
- loads an official EMMOE episode (a Habitat RearrangeDataset scene.json; see habitat_bridge.official) by writing it
  to a one-episode dataset file and building a habitat Env from `config_path` with that dataset;
- replaces the agent by `FourViewFetchRobot`, Habitat's FetchRobot with four extra cameras around the head
  (`emmoe_head_{front,left,back,right}`), each with RGB, depth and semantic sensors;
- drives the base kinematically on the navmesh (forward speed, turn rate), the arm through its joint motors, and
  grasps with Habitat's grasp manager (a snap constraint, the analogue of the MuJoCo weld);
- reports containers from the articulated objects' links (revolute links are doors, prismatic links drawers, with the
  release's open thresholds 0.8 rad / 0.25 m).
Scene specs of the embedded apartment cannot be loaded here (their furniture is not in ReplicaCAD): use the mujoco
backend for those. Habitat's FetchRobot pins the torso and head, so set_torso_target and set_head_target only record
the request.

Coordinates: Habitat is y-up; everything returned is in this project's z-up frame, (x, y, z)_habitat -> (x, -z, y)
(habitat_bridge.backends.habitat_support, with the module loading, the four-view Fetch and the dataset file).
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import SceneLayout
from emmoe_core.robot.state import (
    VIEWS,
    BackendError,
    ContainerState,
    InstanceState,
    Observation,
    Pose,
    RobotState,
    UnknownNameError,
)
from emmoe_core.validation import require_positive

from habitat_bridge.backends import fetch_model
from habitat_bridge.backends.base import Scene, SimBackend, resolve_name
from habitat_bridge.backends.habitat_scene import (
    Part,
    bounding_box_layout,
    box_size,
    canonical_of,
    index_scene,
    support_relations,
)
from habitat_bridge.backends.habitat_support import (
    CAMERA_PREFIX,
    ROBOT_CLASS_NAME,
    HabitatModules,
    four_view_fetch_class,
    matrix_quaternion,
    quaternion_of,
    rotation_to_zup,
    to_yup,
    to_zup,
    write_episode_dataset,
)
from habitat_bridge.official import OfficialEpisode
from habitat_bridge.scene_spec import SceneSpecError

LOG = logging.getLogger(__name__)
@dataclass(frozen=True)
class HabitatBackendConfig:
    """Settings of the Habitat backend.

    Attributes:
        config_path: habitat-lab config with a Fetch agent in ReplicaCAD.
        data_root: directory holding habitat's `data/` (replica_cad, objects/ycb, robots/hab_fetch).
        image_width: pixels per view.
        image_height: pixels per view.
        hfov: horizontal field of view of the head views (degrees).
        physics_dt: seconds per physics step.
        overrides: extra habitat config overrides ("key=value").
    """

    config_path: str = "benchmark/rearrange/play/play.yaml"
    data_root: str = "."
    image_width: int = 256
    image_height: int = 256
    hfov: float = 90.0
    physics_dt: float = 1.0 / 120.0
    overrides: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not (16 <= self.image_width <= 1024 and 16 <= self.image_height <= 1024):
            raise ValueError(f"image size must be within 16..1024 pixels, got {self.image_width}x{self.image_height}")
        if not 10.0 <= self.hfov <= 170.0:
            raise ValueError(f"hfov must be within [10, 170] degrees, got {self.hfov}")
        if not 0.0 < self.physics_dt <= 0.1:
            raise ValueError(f"physics_dt must be within (0, 0.1] s, got {self.physics_dt}")


# ---- frames -------------------------------------------------------------------------------------------------------
class HabitatBackend(SimBackend):
    """habitat-lab rearrange behind the SimBackend interface (see the module docstring: not run on a real install
    here)."""

    name = "habitat"

    def __init__(self, config: HabitatBackendConfig | None = None, modules: HabitatModules | None = None) -> None:
        self.config = config or HabitatBackendConfig()
        self._modules = modules
        self._env: Any = None
        self._episode: OfficialEpisode | None = None
        self._dataset_dir = tempfile.TemporaryDirectory(prefix="habitat_bridge_")
        self._command = (0.0, 0.0)
        self._time = 0.0
        self._contact_force = 0.0
        self._warned_pinned = False

    # ---- setup ------------------------------------------------------------------------------------------------
    @property
    def modules(self) -> HabitatModules:
        """The habitat modules (imported on first use)."""
        if self._modules is None:
            self._modules = HabitatModules.load()
        return self._modules

    def build_config(self, dataset_path: Path) -> Any:
        """The habitat config: `config_path` with our dataset, our Fetch subclass and four head cameras."""
        modules = self.modules
        overrides = [f"habitat.dataset.data_path={dataset_path}", *self.config.overrides]
        config = modules.config_default.get_config(self.config.config_path, overrides=overrides)
        structured = modules.structured_configs
        with modules.habitat.config.read_write(config):
            agent = config.habitat.simulator.agents.main_agent
            agent.articulated_agent_type = ROBOT_CLASS_NAME
            size = {"width": self.config.image_width, "height": self.config.image_height}
            for view in VIEWS:
                prefix = CAMERA_PREFIX + view
                agent.sim_sensors[f"{prefix}_rgb"] = structured.HabitatSimRGBSensorConfig(
                    uuid=f"{prefix}_rgb", hfov=self.config.hfov, **size)
                agent.sim_sensors[f"{prefix}_depth"] = structured.HabitatSimDepthSensorConfig(
                    uuid=f"{prefix}_depth", hfov=self.config.hfov, normalize_depth=False, min_depth=0.0,
                    max_depth=10.0, **size)
                agent.sim_sensors[f"{prefix}_semantic"] = structured.HabitatSimSemanticSensorConfig(
                    uuid=f"{prefix}_semantic", hfov=self.config.hfov, **size)
            config.habitat.simulator.scene_dataset = str(Path(self.config.data_root) / "data" / "replica_cad" /
                                                         "replicaCAD.scene_dataset_config.json")
        return config

    def reset(self, scene: Scene | None = None, seed: int | None = None) -> str:
        if not isinstance(scene, OfficialEpisode):
            raise SceneSpecError("the habitat backend loads official EMMOE episodes (a RearrangeDataset scene.json); "
                                 "scene specs of the embedded apartment need the mujoco backend")
        modules = self.modules
        # habitat-lab instantiates the agent class by name inside its agent manager module.
        setattr(modules.agent_manager, ROBOT_CLASS_NAME, four_view_fetch_class(modules))
        if self._env is not None:
            self._env.close()
            self._env = None
        dataset = write_episode_dataset(scene, Path(self._dataset_dir.name))
        try:
            self._env = modules.habitat.Env(config=self.build_config(dataset))
            if seed is not None:
                self._env.seed(seed)
            self._env.reset()
        except Exception as error:  # habitat raises many kinds of errors for missing data
            self._env = None
            raise BackendError(f"habitat could not load episode {scene.episode_id}: {error}") from None
        self._episode = scene
        self._command, self._time, self._contact_force = (0.0, 0.0), 0.0, 0.0
        self._index_scene()
        return scene.episode_id

    @property
    def _sim(self) -> Any:
        """habitat's RearrangeSim (raises BackendError before the first reset)."""
        if self._env is None:
            raise BackendError("the simulator has no episode yet: call reset first")
        return self._env.sim

    def _index_scene(self) -> None:
        """Name every rigid object, articulated object and movable link; map semantic ids to instances."""
        self._objects, self._semantic, self._parts = index_scene(self._sim, self.modules)

    # ---- properties -------------------------------------------------------------------------------------------
    @property
    def episode_id(self) -> str:
        if self._episode is None:
            raise BackendError("the simulator has no episode yet: call reset first")
        return self._episode.episode_id

    @property
    def time(self) -> float:
        return self._time

    @property
    def views(self) -> tuple[str, ...]:
        return VIEWS

    @property
    def arm_joint_names(self) -> tuple[str, ...]:
        return ("shoulder_pan_joint", "shoulder_lift_joint", "upperarm_roll_joint", "elbow_flex_joint",
                "forearm_roll_joint", "wrist_flex_joint", "wrist_roll_joint")

    @property
    def _robot(self) -> Any:
        return self._sim.articulated_agent

    # ---- commands ---------------------------------------------------------------------------------------------
    def set_base_velocity(self, forward: float, turn: float) -> None:
        if not (math.isfinite(forward) and math.isfinite(turn)):
            raise ValueError(f"base velocity must be finite, got ({forward}, {turn})")
        self._command = (float(forward), float(turn))

    def step(self, seconds: float) -> None:
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds}")
        sim, robot = self._sim, self._robot
        dt = self.config.physics_dt
        self._contact_force = 0.0
        for _ in range(int(round(seconds / dt))):
            forward, turn = self._command
            if forward or turn:
                start = robot.base_pos
                heading = float(robot.base_rot) + turn * dt
                # Base frame forward (+x) turned by the heading about Habitat's up axis.
                target = self.modules.magnum.Vector3(start[0] + forward * dt * math.cos(heading), start[1],
                                                     start[2] - forward * dt * math.sin(heading))
                robot.base_pos = sim.pathfinder.try_step(start, target)
                robot.base_rot = heading
            sim.step_physics(dt)
            robot.update()
            sim.grasp_mgr.update()
            self._time += dt
            self._contact_force = max(self._contact_force, self._robot_contact_force())

    def _robot_contact_force(self) -> float:
        robot_id = self._robot.sim_obj.object_id
        held = self._held_id()
        largest = 0.0
        for contact in self._sim.get_physics_contact_points():
            ids = (contact.object_id_a, contact.object_id_b)
            if robot_id in ids and (held is None or held not in ids):
                largest = max(largest, abs(float(contact.normal_force)))
        return largest

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        values = np.asarray(positions, dtype=float)
        if values.shape != (7,) or not np.all(np.isfinite(values)):
            raise ValueError(f"arm targets must be 7 finite numbers, got {list(positions)!r}")
        lower, upper = self._robot.arm_joint_limits
        self._robot.arm_motor_pos = np.clip(values, lower, upper).astype(np.float32)

    def set_torso_target(self, height: float) -> None:
        """Ignored: habitat-lab's FetchRobot pins the torso (a warning is logged once)."""
        if not math.isfinite(height):
            raise ValueError(f"torso target must be finite, got {height}")
        self._warn_pinned()

    def set_head_target(self, pan: float, tilt: float) -> None:
        """Ignored: habitat-lab's FetchRobot pins the head (a warning is logged once)."""
        if not (math.isfinite(pan) and math.isfinite(tilt)):
            raise ValueError(f"head targets must be finite, got ({pan}, {tilt})")
        self._warn_pinned()

    def _warn_pinned(self) -> None:
        if not self._warned_pinned:
            LOG.warning("habitat-lab's FetchRobot pins torso and head; torso and head targets are ignored")
            self._warned_pinned = True

    # ---- grasping ---------------------------------------------------------------------------------------------
    def _held_id(self) -> int | None:
        index = self._sim.grasp_mgr.snap_idx
        return None if index is None or index < 0 else int(index)

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        held = self.held_object()
        if held is not None:
            return held
        ee = to_zup(self._robot.ee_transform().translation)
        best, best_distance = None, max_distance
        for handle, (obj, kind) in self._objects.items():
            if kind != "object":
                continue
            distance = math.dist(ee, to_zup(obj.translation))
            if distance <= best_distance:
                best, best_distance = handle, distance
        self._robot.close_gripper()
        if best is None:
            return None
        self._sim.grasp_mgr.snap_to_obj(self._objects[best][0].object_id)
        return best

    def open_gripper(self) -> str | None:
        released = self.held_object()
        if released is not None:
            self._sim.grasp_mgr.desnap()
        self._robot.open_gripper()
        return released

    def held_object(self) -> str | None:
        held = self._held_id()
        if held is None:
            return None
        return next((handle for handle, (obj, _) in self._objects.items() if obj.object_id == held), None)

    # ---- queries ----------------------------------------------------------------------------------------------
    def _base(self) -> tuple[float, float, float]:
        x, y, _ = to_zup(self._robot.base_pos)
        return x, y, float(self._robot.base_rot)

    def _instances(self) -> list[tuple[str, str, tuple[str, ...]]]:
        found: list[tuple[str, str, tuple[str, ...]]] = [(handle, canonical_of(handle), ())
                                                         for handle in self._objects]
        found += [(part.name, part.canonical, (part.label,)) for part in self._parts.values()]
        return found

    def resolve(self, name: str) -> list[str]:
        x, y, _ = self._base()
        matches = resolve_name(name, self._instances())
        return sorted(matches, key=lambda match: math.dist((x, y), self._position(match)[:2]))

    def _position(self, name: str) -> tuple[float, float, float]:
        if name in self._parts:
            part = self._parts[name]
            obj = self._objects[part.furniture][0]
            return to_zup(obj.get_link_scene_node(part.link).translation)
        return to_zup(self._objects[name][0].translation)

    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        wanted = [name for name in (names or [])]
        selected: list[str] = []
        for name in wanted:
            matches = [match for match in self.resolve(name) if match in self._objects]
            if not matches:
                raise UnknownNameError(name)
            selected.extend(match for match in matches if match not in selected)
        if not wanted:
            selected = list(self._objects)
        x, y, _ = self._base()
        relations = self.relations()
        states = []
        for handle in selected:
            obj, kind = self._objects[handle]
            position = to_zup(obj.translation)
            receptacle, surface, inside = relations.get(handle, ("", "", False))
            states.append(InstanceState(handle, canonical_of(handle), kind,
                                        Pose(position, rotation_to_zup(quaternion_of(obj.rotation))), box_size(obj),
                                        receptacle, surface, inside, math.dist((x, y), position[:2])))
        return states

    def relations(self) -> dict[str, tuple[str, str, bool]]:
        """Object handle -> (what it rests on, "", inside), from bounding boxes (habitat_scene.support_relations)."""
        return support_relations(self._objects, self.held_object())

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        wanted = list(names or [])
        selected = list(self._parts)
        if wanted:
            chosen: dict[str, None] = {}
            for name in wanted:
                matches = []
                for match in self.resolve(name):
                    if match in self._parts:
                        matches.append(match)
                    else:
                        matches.extend(part for part, item in self._parts.items() if item.furniture == match)
                if not matches:
                    raise UnknownNameError(name)
                chosen.update(dict.fromkeys(matches))
            selected = list(chosen)
        return [self._container_state(self._parts[name]) for name in selected]

    def _container_state(self, part: Part) -> ContainerState:
        obj = self._objects[part.furniture][0]
        index = obj.get_link_joint_pos_offset(part.link)
        lower, upper = obj.joint_position_limits
        handle = to_zup(obj.get_link_scene_node(part.link).translation)
        return ContainerState(part.name, part.canonical, part.label, part.furniture, part.joint_type,
                              float(obj.joint_positions[index]), float(lower[index]), float(upper[index]),
                              part.threshold, handle)

    def set_container_position(self, name: str, position: float) -> None:
        if name not in self._parts:
            raise UnknownNameError(name)
        if not math.isfinite(position):
            raise ValueError(f"container position must be finite, got {position}")
        part = self._parts[name]
        obj = self._objects[part.furniture][0]
        index = obj.get_link_joint_pos_offset(part.link)
        lower, upper = obj.joint_position_limits
        positions = list(obj.joint_positions)
        positions[index] = float(np.clip(position, lower[index], upper[index]))
        obj.joint_positions = positions

    def set_container_target(self, name: str, position: float) -> None:
        """Habitat's articulated furniture has no motors here: the joint is set at once, like
        set_container_position."""
        self.set_container_position(name, position)

    def contact_force(self) -> float:
        return self._contact_force

    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        """The navmesh's top-down navigability at the robot's height (non-navigable = occupied)."""
        require_positive("resolution", resolution)
        pathfinder = self._sim.pathfinder
        lower, upper = pathfinder.get_bounds()
        navigable = np.asarray(pathfinder.get_topdown_view(resolution, float(self._robot.base_pos[1])), dtype=bool)
        # Rows of the top-down view run along Habitat +z, which is the z-up frame's -y: flip them.
        origin = (float(lower[0]), -float(upper[2]))
        return OccupancyGrid(origin, resolution, ~navigable[::-1])

    def scene_layout(self) -> SceneLayout:
        """An approximate layout from bounding boxes (habitat_scene.bounding_box_layout)."""
        return bounding_box_layout(self._objects, self._parts)

    def robot_description(self) -> str:
        """The Fetch kinematics of the embedded model (hab_fetch has the same joints and links)."""
        return fetch_model.kinematic_description()

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """No arm collision checks on Habitat: always False."""
        return False

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """No arm collision checks on Habitat: always True."""
        return True

    def teleport_base(self, x: float, y: float, yaw: float) -> None:
        if not all(math.isfinite(value) for value in (x, y, yaw)):
            raise ValueError(f"base pose must be finite, got ({x}, {y}, {yaw})")
        robot = self._robot
        height = float(robot.base_pos[1])
        hx, _, hz = to_yup((x, y, 0.0))
        robot.base_pos = self.modules.magnum.Vector3(hx, height, hz)
        robot.base_rot = float(yaw)
        robot.update()

    def robot_state(self) -> RobotState:
        robot = self._robot
        x, y, yaw = self._base()
        ee = robot.ee_transform()
        arm = tuple(float(value) for value in robot.arm_joint_pos)
        fingers = tuple(float(value) for value in robot.gripper_joint_pos)
        names = self.arm_joint_names + ("r_gripper_finger_joint", "l_gripper_finger_joint")[: len(fingers)]
        velocities = tuple(float(value) for value in robot.arm_velocity) + (0.0,) * len(fingers)
        return RobotState(
            base=Pose.from_yaw(x, y, 0.0, yaw), base_velocity=self._command, joint_names=names,
            joint_positions=arm + fingers, joint_velocities=velocities,
            gripper=Pose(to_zup(ee.translation), rotation_to_zup(matrix_quaternion(ee.rotation()))),
            held_object=self.held_object(), time=self._time)

    # ---- cameras ----------------------------------------------------------------------------------------------
    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        unknown = [view for view in views if view not in VIEWS]
        if unknown or not views:
            raise ValueError(f"unknown or missing views {unknown or list(views)}; expected some of {', '.join(VIEWS)}")
        raw = self._sim.get_sensor_observations()
        names = tuple(self._objects)
        ids = {name: index for index, name in enumerate(names)}
        observation = Observation(time=self._time, rgb={}, held_object=self.held_object(), instance_names=names,
                                  instance_canonicals=tuple(canonical_of(name) for name in names))
        x, y, _ = self._base()
        for view in views:
            prefix = CAMERA_PREFIX + view
            observation.rgb[view] = np.ascontiguousarray(np.asarray(raw[f"{prefix}_rgb"])[..., :3], dtype=np.uint8)
            if depth:
                observation.depth[view] = np.asarray(raw[f"{prefix}_depth"], dtype=np.float32).reshape(
                    self.config.image_height, self.config.image_width)
            if segmentation:
                semantic = np.asarray(raw[f"{prefix}_semantic"], dtype=np.int64).reshape(self.config.image_height,
                                                                                         self.config.image_width)
                lookup = np.full(max(self._semantic, default=0) + 2, -1, dtype=np.int32)
                for key, handle in self._semantic.items():
                    lookup[key] = ids[handle]
                instance = lookup[np.clip(semantic, 0, len(lookup) - 1)]
                observation.segmentation[view] = instance
                counts = np.bincount(instance[instance >= 0].ravel(), minlength=len(names))
                seen = [names[index] for index in np.nonzero(counts >= 30)[0]]
                seen.sort(key=lambda handle: math.dist((x, y), self._position(handle)[:2]))
                observation.visible[view] = tuple(seen)
        return observation

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        self._dataset_dir.cleanup()
