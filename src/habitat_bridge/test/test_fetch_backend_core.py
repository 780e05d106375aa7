"""FetchBackend without ROS, on a kinematic stand-in for FetchRobot: the views are taken by turning the base or
panning the head and both come back; the detector's names become one instance list across the views; the camera is
placed by the robot model; the hand is what the fingers stalled on; and simulator-only calls are refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

from emmoe_core.robot import fetch  # noqa: E402
from emmoe_core.robot.state import BackendError, CameraView  # noqa: E402

from habitat_bridge.fetch.backend import FetchBackend, FetchBackendConfig  # noqa: E402
from habitat_bridge.fetch.config import FetchConfig  # noqa: E402
from habitat_bridge.fetch.robot import CameraFrame  # noqa: E402
from habitat_bridge.scene_spec import SceneSpec  # noqa: E402

SCENE = Path(__file__).resolve().parents[3] / "data" / "test" / "100" / "scene.json"


class KinematicFetch:
    """FetchRobot's methods on an ideal robot: velocities integrate exactly, the head goes where it is told, and
    each frame shows one thing named after the heading it was taken at."""

    def __init__(self, x: float = 2.0, y: float = 3.0, yaw: float = 0.4) -> None:
        self.config = FetchConfig()
        self.pose = [x, y, yaw]
        self.velocity = (0.0, 0.0)
        self.time = 10.0
        self.joints = {name: 0.0 for name in (fetch.TORSO_JOINT, *fetch.HEAD_JOINTS, *fetch.ARM_JOINTS)}
        self.joints.update({name: 0.05 for name in fetch.FINGER_JOINTS})
        self.stall = False
        self.head_moves: list[tuple[float, float]] = []
        self.blocked_turn = 0.0  # +1: turning counter-clockwise moves nothing (the arm against a cupboard)

    def wait_until_ready(self) -> None:
        pass

    def base_pose(self) -> tuple[float, float, float]:
        return self.pose[0], self.pose[1], self.pose[2]

    def pose_at(self, at: float) -> tuple[float, float, float]:
        assert at == self.time, "frames are taken now"
        return self.base_pose()

    def joints_at(self, at: float) -> dict[str, float]:
        assert at == self.time, "frames are taken now"
        return dict(self.joints)

    def base_velocity(self) -> tuple[float, float]:
        return self.velocity

    def joint_states(self) -> tuple[dict[str, float], dict[str, float]]:
        return dict(self.joints), {name: 0.0 for name in self.joints}

    def joint_positions(self, joints):
        return [self.joints[name] for name in joints]

    def set_base_velocity(self, forward: float, turn: float) -> None:
        self.velocity = (forward, turn)

    def set_head_target(self, pan: float, tilt: float) -> None:
        self.head_moves.append((pan, tilt))
        self.joints[fetch.HEAD_JOINTS[0]], self.joints[fetch.HEAD_JOINTS[1]] = pan, tilt

    def step(self, seconds: float) -> None:
        forward, turn = self.velocity
        self.pose[0] += forward * seconds * math.cos(self.pose[2])
        self.pose[1] += forward * seconds * math.sin(self.pose[2])
        if turn * self.blocked_turn <= 0:
            self.pose[2] = math.remainder(self.pose[2] + turn * seconds, 2 * math.pi)
        self.time += seconds

    def frame_after(self, after: float) -> CameraFrame:
        heading = self.pose[2] + self.joints[fetch.HEAD_JOINTS[0]]
        ids = np.full((8, 8), -1, dtype=np.int32)
        ids[2:6, 2:6] = 0
        ids[0, :2] = 1  # a second thing on too few pixels to count as visible
        name = f"thing_at_{round(math.degrees(math.remainder(heading, 2 * math.pi)))}"
        intrinsics = CameraView(8, 8, 4.0, 4.0, 4.0, 4.0, (0.0, 0.0, 0.0), np.eye(3))
        return CameraFrame(np.zeros((8, 8, 3), np.uint8), np.full((8, 8), 2.0, np.float32), intrinsics, ids,
                           (name, "speck"), ("013_apple", "speck"), self.time)

    def close_gripper(self, max_distance: float = 0.05) -> str | None:
        return "held" if self.stall else None

    def open_gripper(self) -> None:
        self.stall = False


def backend(views_by: str = "base") -> tuple[FetchBackend, KinematicFetch]:
    robot = KinematicFetch()
    fetch_backend = FetchBackend(robot, FetchBackendConfig(views_by=views_by, min_pixels=4))  # type: ignore[arg-type]
    fetch_backend.reset(SceneSpec.from_dict(json.loads(SCENE.read_text())))
    return fetch_backend, robot


@pytest.mark.parametrize("views_by", ["base", "head"])
def test_the_four_views_face_their_directions_and_the_robot_comes_back(views_by):
    fetch_backend, robot = backend(views_by)
    start = robot.base_pose()
    observation = fetch_backend.observe(depth=True, segmentation=True)
    seen = {view: observation.visible[view] for view in ("front", "left", "back", "right")}
    for view, turn in (("front", 0), ("left", 90), ("back", 180), ("right", -90)):
        (name,) = seen[view]
        off = float(name.removeprefix("thing_at_")) - math.degrees(start[2]) - turn
        assert abs((off + 180) % 360 - 180) <= 3, (view, name)
    assert abs(math.remainder(robot.base_pose()[2] - start[2], 2 * math.pi)) < 0.03
    assert robot.joints[fetch.HEAD_JOINTS[0]] == 0.0
    assert bool(robot.head_moves) == (views_by == "head")
    # One instance list across the views; each view's mask indexes it.
    left = observation.segmentation["left"]
    assert observation.instance_names[int(left[3, 3])] == seen["left"][0]
    assert observation.instance_canonicals[int(left[3, 3])] == "013_apple" and int(left[7, 7]) == -1
    # Each camera is placed by the robot model: above the base, looking along its view's heading.
    for view, turn in (("front", 0.0), ("left", math.pi / 2)):
        camera = observation.cameras[view]
        forward = camera.rotation @ np.array([0.0, 0.0, 1.0])
        assert 1.0 < camera.position[2] < 1.5 and math.dist(camera.position[:2], start[:2]) < 0.3
        assert abs(math.remainder(math.atan2(forward[1], forward[0]) - start[2] - turn, 2 * math.pi)) < 0.05


def test_a_blocked_turn_goes_the_other_way_round_and_a_stuck_base_is_an_error():
    fetch_backend, robot = backend()
    start = robot.base_pose()[2]
    robot.blocked_turn = 1.0
    observation = fetch_backend.observe(("front", "left"))
    assert set(observation.rgb) == {"front", "left"}
    assert abs(math.remainder(robot.base_pose()[2] - start, 2 * math.pi)) < 0.03
    robot.blocked_turn = 0.0
    robot.step = lambda seconds: setattr(robot, "time", robot.time + seconds)  # now nothing turns at all
    with pytest.raises(BackendError, match="did not turn .* either way round"):
        fetch_backend.observe(("front", "left"))


def test_the_front_view_alone_moves_nothing():
    fetch_backend, robot = backend()
    before = robot.base_pose()
    observation = fetch_backend.observe(("front",), depth=True, segmentation=True)
    assert robot.base_pose() == before and not robot.head_moves
    assert set(observation.rgb) == {"front"} and observation.time == pytest.approx(0.0)


def test_an_instance_keeps_its_index_for_the_episode_whatever_its_index_in_a_frame():
    """The skills remember things by their index in instance_names: a thing the detector lists first in one frame
    and second in a later one keeps the index it got when first seen; a reset starts a new list."""
    fetch_backend, robot = backend()
    first = fetch_backend.observe(("front",), segmentation=True)
    (thing,) = first.visible["front"]
    robot.pose[2] += math.radians(30)
    second = fetch_backend.observe(("front",), segmentation=True)
    (other,) = second.visible["front"]
    assert other != thing and second.instance_names.index(thing) == first.instance_names.index(thing)
    assert second.instance_names[int(second.segmentation["front"][3, 3])] == other
    fetch_backend.reset(SceneSpec.from_dict(json.loads(SCENE.read_text())))
    assert fetch_backend.observe(("front",), segmentation=True).instance_names[0] == other


def test_the_hand_holds_the_remembered_object_at_the_grasp_point():
    fetch_backend, robot = backend()
    grasp = fetch_backend.robot_state().gripper.position
    assert fetch_backend.close_gripper() is None and fetch_backend.held_object() is None
    memory = fetch_backend.memory
    assert memory is not None
    can = memory.resolve("green_can", (0.0, 0.0))[0]
    robot.stall = True
    assert fetch_backend.close_gripper() == "handle"  # stalled on something where the map has no object
    assert fetch_backend.held_object() is None
    # The can let go right at the grasp point (carried there, then released), then grasped again.
    memory.apply("Pick", can, "", success=True)
    memory.follow_hand(grasp)
    memory.held = None
    assert fetch_backend.close_gripper() == can and fetch_backend.held_object() == can
    observation = fetch_backend.observe(("front",), segmentation=True)
    assert observation.held_object == can and can in observation.instance_names
    robot.joints.update({name: 0.0 for name in fetch.FINGER_JOINTS})  # the fingers closed: it slipped out
    assert fetch_backend.held_object() is None


def test_what_only_a_simulator_can_do_is_refused():
    fetch_backend, _ = backend()
    for call in (lambda: fetch_backend.teleport_base(0, 0, 0), lambda: fetch_backend.occupancy_grid(),
                 lambda: fetch_backend.set_container_target("fridge_0_door", 1.0),
                 lambda: fetch_backend.arm_collides([0.0] * 7, 0.0)):
        with pytest.raises(BackendError, match="a real robot cannot"):
            call()
    with pytest.raises(BackendError, match="needs the operator's map"):
        fetch_backend.reset(None)
