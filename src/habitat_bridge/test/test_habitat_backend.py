"""The Habitat backend's wiring, against stub habitat / habitat_sim / magnum modules.

habitat-sim cannot be installed here, so these stubs stand in for the parts of habitat-lab's API the adapter uses
(config, Env, RearrangeSim, FetchRobot, grasp manager, object managers, pathfinder). They check what the adapter
asks of Habitat and how it converts the answers; they say nothing about whether a real habitat-sim behaves so.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from habitat_bridge.backends import habitat_backend
from habitat_bridge.backends.habitat_backend import HabitatBackend, HabitatBackendConfig, HabitatModules
from habitat_bridge.official import parse_official_episode
from habitat_bridge.scene_spec import SceneSpec, SceneSpecError

ROBOT_ID, OBJECT_IDS_START = 7, 100


class Vector3(tuple):
    """magnum.Vector3 stand-in."""

    def __new__(cls, x: float = 0.0, y: float = 0.0, z: float = 0.0) -> Vector3:
        return super().__new__(cls, (float(x), float(y), float(z)))


class Quaternion:
    """magnum.Quaternion stand-in: a rotation about Habitat's up axis (y)."""

    def __init__(self, angle: float = 0.0) -> None:
        self.scalar = math.cos(angle / 2)
        self.vector = Vector3(0.0, math.sin(angle / 2), 0.0)


class Transform:
    """What ee_transform() returns: translation and rotation columns (identity)."""

    def __init__(self, translation: Vector3) -> None:
        self.translation = translation

    def rotation(self) -> list[list[float]]:
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


class Box:
    def __init__(self, size: tuple[float, float, float]) -> None:
        self._size = size

    def size(self) -> Vector3:
        return Vector3(*self._size)


class Rigid:
    """A rigid object: handle, id, pose, bounding box, motion type."""

    def __init__(self, handle: str, object_id: int, translation: Vector3, size: tuple, dynamic: bool,
                 yaw: float = 0.0) -> None:
        self.handle, self.object_id, self.translation = handle, object_id, translation
        self.rotation = Quaternion(yaw)
        self.root_scene_node = SimpleNamespace(cumulative_bb=Box(size))
        self.motion_type = "dynamic" if dynamic else "static"


class Articulated(Rigid):
    """An articulated object with named links: (name, joint type, position offset)."""

    def __init__(self, handle: str, object_id: int, translation: Vector3, size: tuple,
                 links: list[tuple[str, str]], limits: tuple[list[float], list[float]]) -> None:
        super().__init__(handle, object_id, translation, size, dynamic=False)
        self._links = links
        self.joint_positions = [0.0] * len(links)
        self.joint_position_limits = limits

    def get_link_ids(self) -> list[int]:
        return list(range(len(self._links)))

    def get_link_name(self, link: int) -> str:
        return self._links[link][0]

    def get_link_joint_type(self, link: int) -> str:
        return self._links[link][1]

    def get_link_joint_pos_offset(self, link: int) -> int:
        return link

    def get_link_scene_node(self, link: int) -> SimpleNamespace:
        x, y, z = self.translation
        return SimpleNamespace(translation=Vector3(x, y, z + 0.4))


class Manager:
    def __init__(self, objects: list) -> None:
        self._objects = {obj.handle: obj for obj in objects}

    def get_objects_by_handle_substring(self, substring: str) -> dict:
        return {handle: obj for handle, obj in self._objects.items() if substring in handle}


class GraspManager:
    def __init__(self) -> None:
        self.snap_idx: int | None = None
        self.calls: list[tuple] = []

    def snap_to_obj(self, object_id: int) -> None:
        self.snap_idx = object_id
        self.calls.append(("snap", object_id))

    def desnap(self) -> None:
        self.calls.append(("desnap", self.snap_idx))
        self.snap_idx = None

    def update(self) -> None:
        """Nothing to do in the stub."""


class Pathfinder:
    def try_step(self, start: Vector3, end: Vector3) -> Vector3:
        return end

    def get_bounds(self) -> tuple[Vector3, Vector3]:
        return Vector3(-1.0, 0.0, -2.0), Vector3(3.0, 2.0, 1.0)

    def get_topdown_view(self, resolution: float, height: float) -> np.ndarray:
        view = np.ones((int(3.0 / resolution), int(4.0 / resolution)), dtype=bool)
        view[0, :] = False  # the row at Habitat z = -2, i.e. the z-up y = +2 edge
        return view


def stub_modules() -> HabitatModules:
    """habitat-lab's API surface as the adapter uses it, with a tiny fake apartment."""

    class ArticulatedAgentCameraParams:
        def __init__(self, cam_offset_pos: Vector3 = Vector3(), cam_look_at_pos: Vector3 = Vector3(),
                     attached_link_id: int = -1) -> None:
            self.cam_offset_pos, self.cam_look_at_pos = cam_offset_pos, cam_look_at_pos
            self.attached_link_id = attached_link_id

    class FetchRobot:
        """habitat-lab's FetchRobot reduced to the attributes the adapter touches."""

        def __init__(self, agent_cfg: object, sim: object) -> None:
            self.params = self._get_fetch_params()
            self.base_pos, self.base_rot = Vector3(0.0, 0.1, 0.0), 0.0
            self.arm_joint_pos = np.zeros(7, dtype=np.float32)
            self.arm_motor_pos = np.zeros(7, dtype=np.float32)
            self.arm_velocity = np.zeros(7, dtype=np.float32)
            self.arm_joint_limits = (np.full(7, -1.0), np.full(7, 1.0))
            self.gripper_joint_pos = np.zeros(2, dtype=np.float32)
            self.sim_obj = SimpleNamespace(object_id=ROBOT_ID)
            self.gripper_closed = False

        def _get_fetch_params(self) -> SimpleNamespace:
            return SimpleNamespace(cameras={"head": ArticulatedAgentCameraParams(Vector3(0.25, 1.2, 0.0),
                                                                                 Vector3(0.75, 1.0, 0.0))})

        def ee_transform(self) -> Transform:
            x, y, z = self.base_pos
            return Transform(Vector3(x + 0.5, 0.9, z))

        def update(self) -> None:
            """Cameras follow the base in habitat; nothing to do here."""

        def close_gripper(self) -> None:
            self.gripper_closed = True

        def open_gripper(self) -> None:
            self.gripper_closed = False

    agent_manager = types.ModuleType("habitat.tasks.rearrange.articulated_agent_manager")

    class FakeSim:
        def __init__(self, config: SimpleNamespace) -> None:
            agent_cfg = config.habitat.simulator.agents.main_agent
            self.articulated_agent = getattr(agent_manager, agent_cfg.articulated_agent_type)(agent_cfg, self)
            self.sensors = dict(agent_cfg.sim_sensors)
            self.grasp_mgr = GraspManager()
            self.pathfinder = Pathfinder()
            self.habitat_config = SimpleNamespace(object_ids_start=OBJECT_IDS_START)
            self.apple = Rigid("013_apple_:0000", 1, Vector3(0.6, 0.9, 0.0), (0.075, 0.075, 0.075), True)
            self.table = Rigid("frl_apartment_table_01_:0000", 2, Vector3(0.6, 0.4, 0.0), (1.4, 0.8, 0.85), False)
            self.fridge = Articulated("fridge_:0000", 3, Vector3(2.0, 0.9, -1.0), (0.8, 1.8, 0.7),
                                      [("body", "Fixed"), ("top_door", "Revolute")], ([0.0, 0.0], [0.0, 2.3]))
            self.counter = Articulated("kitchen_counter_:0000", 4, Vector3(-0.5, 0.45, -1.5), (3.0, 0.9, 0.6),
                                       [("drawer1_top", "Prismatic")], ([0.0], [0.5]))
            robot = SimpleNamespace(handle="hab_fetch", object_id=ROBOT_ID)
            self.rigid = Manager([self.apple, self.table])
            self.articulated = Manager([robot, self.fridge, self.counter])
            self.contacts: list[SimpleNamespace] = []
            self.physics_time = 0.0

        def get_rigid_object_manager(self) -> Manager:
            return self.rigid

        def get_articulated_object_manager(self) -> Manager:
            return self.articulated

        def step_physics(self, dt: float) -> None:
            self.physics_time += dt

        def get_physics_contact_points(self) -> list[SimpleNamespace]:
            return self.contacts

        def get_sensor_observations(self) -> dict[str, np.ndarray]:
            observations = {}
            for index, (uuid, sensor) in enumerate(self.sensors.items()):
                shape = (sensor.height, sensor.width)
                if uuid.endswith("_rgb"):
                    observations[uuid] = np.full((*shape, 4), index, dtype=np.uint8)
                elif uuid.endswith("_depth"):
                    observations[uuid] = np.full((*shape, 1), 1.5, dtype=np.float32)
                else:
                    semantic = np.zeros((*shape, 1), dtype=np.int32)
                    if "front" in uuid:
                        semantic[:10, :10] = OBJECT_IDS_START + 1   # the apple: 100 pixels
                        semantic[10:, :] = OBJECT_IDS_START + 2     # the table
                    observations[uuid] = semantic
            return observations

    class Env:
        instances: list[Env] = []

        def __init__(self, config: SimpleNamespace) -> None:
            self.config, self.sim, self.closed, self.seeds = config, FakeSim(config), False, []
            Env.instances.append(self)

        def seed(self, seed: int) -> None:
            self.seeds.append(seed)

        def reset(self) -> None:
            """The episode is already loaded by the stub."""

        def close(self) -> None:
            self.closed = True

    def get_config(path: str, overrides: list[str]) -> SimpleNamespace:
        main_agent = SimpleNamespace(articulated_agent_type="FetchRobot", sim_sensors={})
        return SimpleNamespace(path=path, overrides=overrides, habitat=SimpleNamespace(
            simulator=SimpleNamespace(agents=SimpleNamespace(main_agent=main_agent), scene_dataset="")))

    def sensor_config(kind: str) -> type:
        def make(**fields: object) -> SimpleNamespace:
            return SimpleNamespace(kind=kind, **fields)
        return make  # type: ignore[return-value]

    habitat = types.ModuleType("habitat")
    habitat.Env = Env  # type: ignore[attr-defined]
    habitat.config = SimpleNamespace(  # type: ignore[attr-defined]
        read_write=lambda config: contextlib.nullcontext(config))
    stubs: dict = {
        "habitat": habitat,
        "config_default": SimpleNamespace(get_config=get_config),
        "structured_configs": SimpleNamespace(HabitatSimRGBSensorConfig=sensor_config("rgb"),
                                              HabitatSimDepthSensorConfig=sensor_config("depth"),
                                              HabitatSimSemanticSensorConfig=sensor_config("semantic")),
        "fetch_robot": SimpleNamespace(FetchRobot=FetchRobot),
        "mobile_manipulator": SimpleNamespace(ArticulatedAgentCameraParams=ArticulatedAgentCameraParams),
        "agent_manager": agent_manager,
        "physics": SimpleNamespace(MotionType=SimpleNamespace(DYNAMIC="dynamic", STATIC="static"),
                                   JointType=SimpleNamespace(Revolute="Revolute", Prismatic="Prismatic",
                                                             Fixed="Fixed")),
        "magnum": SimpleNamespace(Vector3=Vector3),
    }
    return HabitatModules(**stubs)


@pytest.fixture
def loaded(official_scene_path: Path) -> HabitatBackend:
    backend = HabitatBackend(HabitatBackendConfig(image_width=32, image_height=24, data_root="/data/habitat"),
                             stub_modules())
    episode = parse_official_episode(json.loads(official_scene_path.read_text()))
    assert backend.reset(episode, seed=5) == "6386"
    yield backend
    backend.close()


def test_reset_builds_the_config_dataset_and_four_view_fetch(loaded: HabitatBackend) -> None:
    env = loaded._env
    config = env.config
    assert config.path == "benchmark/rearrange/play/play.yaml" and env.seeds == [5]
    dataset = Path(config.overrides[0].split("=", 1)[1])
    with gzip.open(dataset, "rt") as handle:
        written = json.load(handle)
    assert written["episodes"][0]["episode_id"] == "6386" and len(written["episodes"][0]["rigid_objs"]) == 30
    assert config.habitat.simulator.scene_dataset == ("/data/habitat/data/replica_cad/"
                                                      "replicaCAD.scene_dataset_config.json")
    agent = config.habitat.simulator.agents.main_agent
    assert agent.articulated_agent_type == "FourViewFetchRobot"
    sensors = agent.sim_sensors
    assert len(sensors) == 12
    front = sensors["emmoe_head_front_rgb"]
    assert (front.kind, front.uuid, front.width, front.height, front.hfov) == ("rgb", "emmoe_head_front_rgb", 32,
                                                                             24, 90.0)
    assert sensors["emmoe_head_back_depth"].normalize_depth is False
    robot = loaded._sim.articulated_agent
    assert type(robot).__name__ == "FourViewFetchRobot" and "head" in robot.params.cameras
    expected = {"front": ((0.25, 1.2, 0.0), (0.75, 1.0, 0.0)), "left": ((0.0, 1.2, -0.25), (0.0, 1.0, -0.75)),
                "back": ((-0.25, 1.2, 0.0), (-0.75, 1.0, 0.0)), "right": ((0.0, 1.2, 0.25), (0.0, 1.0, 0.75))}
    for view, (offset, look_at) in expected.items():
        camera = robot.params.cameras[f"emmoe_head_{view}"]
        assert camera.cam_offset_pos == pytest.approx(offset, abs=1e-9)
        assert camera.cam_look_at_pos == pytest.approx(look_at, abs=1e-9)
        assert camera.attached_link_id == -1


def test_scene_specs_are_refused_and_a_second_reset_closes_the_first_env(loaded: HabitatBackend,
                                                                          compact_spec: SceneSpec,
                                                                          official_scene_path: Path) -> None:
    with pytest.raises(SceneSpecError, match="need the mujoco backend"):
        loaded.reset(compact_spec)
    first = loaded._env
    loaded.reset(parse_official_episode(json.loads(official_scene_path.read_text())))
    assert first.closed and loaded._env is not first


def test_observations_views_depth_and_segmentation(loaded: HabitatBackend) -> None:
    observation = loaded.observe(depth=True, segmentation=True)
    assert list(observation.rgb) == ["front", "left", "back", "right"]
    assert observation.rgb["front"].shape == (24, 32, 3) and observation.depth["left"].shape == (24, 32)
    assert observation.depth["left"][0, 0] == pytest.approx(1.5)
    names = observation.instance_names
    front = observation.segmentation["front"]
    assert names[front[0, 0]] == "013_apple_:0000" and names[front[20, 5]] == "frl_apartment_table_01_:0000"
    assert observation.visible["front"] == ("013_apple_:0000", "frl_apartment_table_01_:0000")
    assert observation.visible["back"] == ()
    assert dict(zip(names, observation.instance_canonicals))["fridge_:0000"] == "fridge"
    with pytest.raises(ValueError):
        loaded.observe(["third_front"])


def test_poses_are_converted_to_z_up(loaded: HabitatBackend) -> None:
    apple = loaded.object_states(["apple"])[0]
    assert apple.pose.position == pytest.approx((0.6, 0.0, 0.9))
    assert (apple.kind, apple.receptacle) == ("object", "frl_apartment_table_01_:0000")
    loaded._objects["013_apple_:0000"][0].rotation = Quaternion(0.7)  # a turn about Habitat's up axis
    assert loaded.object_states(["apple"])[0].pose.yaw == pytest.approx(0.7)
    loaded.teleport_base(1.0, 2.0, 0.5)
    robot = loaded._sim.articulated_agent
    assert robot.base_pos == pytest.approx((1.0, 0.1, -2.0)) and robot.base_rot == 0.5
    state = loaded.robot_state()
    assert state.base.position == pytest.approx((1.0, 2.0, 0.0)) and state.base.yaw == pytest.approx(0.5)
    assert state.gripper.position == pytest.approx((1.5, 2.0, 0.9))


def test_base_velocity_moves_along_the_heading(loaded: HabitatBackend) -> None:
    loaded.teleport_base(0.0, 0.0, math.pi / 2)  # facing +y in the z-up frame
    loaded.set_base_velocity(0.5, 0.0)
    loaded.step(1.0)
    assert loaded.robot_state().base.position == pytest.approx((0.0, 0.5, 0.0), abs=0.01)
    assert loaded.time == pytest.approx(1.0)
    assert loaded._sim.physics_time == pytest.approx(1.0)


def test_grasp_uses_habitats_snap_constraint(loaded: HabitatBackend) -> None:
    sim = loaded._sim
    loaded.teleport_base(0.1, 0.0, 0.0)  # gripper 0.5 m ahead, at the apple
    assert loaded.close_gripper() == "013_apple_:0000"
    assert sim.grasp_mgr.calls == [("snap", 1)] and loaded.held_object() == "013_apple_:0000"
    assert loaded.robot_state().held_object == "013_apple_:0000"
    sim.contacts = [SimpleNamespace(object_id_a=ROBOT_ID, object_id_b=1, normal_force=9.0),
                    SimpleNamespace(object_id_a=2, object_id_b=ROBOT_ID, normal_force=-4.0)]
    loaded.step(0.1)
    assert loaded.contact_force() == pytest.approx(4.0)  # the held apple does not count
    assert loaded.open_gripper() == "013_apple_:0000" and loaded.held_object() is None
    loaded.teleport_base(-3.0, 0.0, 0.0)
    assert loaded.close_gripper() is None


def test_containers_from_articulated_links(loaded: HabitatBackend) -> None:
    states = {state.name: state for state in loaded.container_states()}
    door = states["fridge_:0000/top_door"]
    assert (door.label, door.joint_type, door.open_threshold, door.upper, door.is_open) == ("door", "hinge", 0.8,
                                                                                          2.3, False)
    drawer = states["kitchen_counter_:0000/drawer1_top"]
    assert (drawer.label, drawer.open_threshold, drawer.canonical) == ("drawer", 0.25, "kitchen_counter")
    loaded.set_container_position("fridge_:0000/top_door", 1.0)
    assert loaded.container_states(["fridge"])[0].is_open
    assert [state.name for state in loaded.container_states(["drawer"])] == ["kitchen_counter_:0000/drawer1_top"]
    loaded.set_container_target("kitchen_counter_:0000/drawer1_top", 9.0)
    assert loaded.container_states(["drawer"])[0].position == 0.5  # clipped to the joint limit


def test_the_privileged_scene_part_of_the_skill_interface(loaded: HabitatBackend) -> None:
    """What the M3 skills need beyond the robot: a layout from bounding boxes, no arm checks, the Fetch kinematics."""
    layout = loaded.scene_layout()
    assert {piece.name for piece in layout.furniture} == {"frl_apartment_table_01_:0000", "fridge_:0000",
                                                          "kitchen_counter_:0000"}
    table_top = layout.region("frl_apartment_table_01_:0000", "top")
    assert table_top is not None and table_top.center == pytest.approx((0.6, 0.0, 0.4 + 0.8 / 2))
    door = layout.part("fridge_:0000/top_door")
    assert door is not None and door.joint_type == "hinge"
    assert layout.owner_of("kitchen_counter_:0000/drawer1_top").name == "kitchen_counter_:0000"
    assert not loaded.arm_collides((0.0,) * 7, 0.2) and loaded.arm_path_free((0.0,) * 7, 0.2, (1.0,) * 7, 0.3)
    assert "fetch/grip" in loaded.robot_description()


def test_pinned_torso_and_head_are_reported_once(loaded: HabitatBackend, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        loaded.set_torso_target(0.3)
        loaded.set_head_target(0.1, 0.2)
    assert [record.getMessage() for record in caplog.records] == [
        "habitat-lab's FetchRobot pins torso and head; torso and head targets are ignored"]
    with pytest.raises(ValueError):
        loaded.set_torso_target(float("nan"))


def test_occupancy_from_the_navmesh_is_flipped_into_z_up(loaded: HabitatBackend) -> None:
    grid = loaded.occupancy_grid(0.1)
    assert grid.origin == pytest.approx((-1.0, -1.0))
    assert grid.shape == (30, 40)
    assert grid.occupied[-1].all() and not grid.occupied[:-1].any()   # the top row is y = +2, Habitat z = -2
    assert not grid.is_free(0.0, 1.95) and grid.is_free(0.0, 0.0)


def test_missing_habitat_is_a_clear_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "habitat", None)
    from emmoe_core.robot.state import BackendError

    with pytest.raises(BackendError, match="needs habitat-lab and habitat-sim"):
        HabitatModules.load()


def test_frame_conversions_round_trip() -> None:
    point = (1.0, -2.0, 3.0)
    assert habitat_backend.to_zup(habitat_backend.to_yup(point)) == pytest.approx(point)
    # A rotation about Habitat's y axis is a rotation about z in the z-up frame.
    angle = 0.4
    quaternion = habitat_backend.rotation_to_zup((math.cos(angle / 2), 0.0, math.sin(angle / 2), 0.0))
    assert quaternion == pytest.approx((math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)))


def test_auto_picks_habitat_only_when_habitat_sim_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    from habitat_bridge import backends

    monkeypatch.setattr(backends, "habitat_available", lambda: True)
    assert backends.resolve_backend_name("auto") == "habitat"
    created = backends.create_backend("auto", image_width=64, image_height=64)
    assert isinstance(created, HabitatBackend)
    created.close()
    monkeypatch.setattr(backends, "habitat_available", lambda: False)
    assert backends.resolve_backend_name("auto") == "mujoco"
    with pytest.raises(ValueError, match="unknown simulator backend 'isaac'"):
        backends.resolve_backend_name("isaac")
