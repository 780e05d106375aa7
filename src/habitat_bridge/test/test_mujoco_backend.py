"""The MuJoCo backend on the compact kitchen: cameras checked against ray casts, driving, arm, weld grasp,
containers, privileged queries, determinism."""

from __future__ import annotations

import math
from dataclasses import replace

import mujoco
import numpy as np
import pytest
from emmoe_core.robot import fetch
from emmoe_core.robot.state import VIEWS, BackendError, UnknownNameError

from habitat_bridge import apartment
from habitat_bridge.backends import fetch_model
from habitat_bridge.backends.mujoco_backend import MujocoBackend
from habitat_bridge.backends.mujoco_index import GRIP_SITE
from habitat_bridge.scene_spec import Furniture, Pose2D, RobotStart, Room, SceneObject, SceneSpec, Wall

OPEN_ROOM = SceneSpec(
    "open_room", 0, (Room("living_room_0", "living_room", (0.0, 0.0, 8.0, 6.0)),),
    (Wall((0.0, 0.05), (8.0, 0.05)), Wall((7.95, 0.0), (7.95, 6.0))),
    (Furniture("brown_table_0", "frl_apartment_table_01", "table", Pose2D(1.0, 5.0, 0.0), (1.4, 0.85, 0.76),
               (0.4, 0.3, 0.2)),),
    (SceneObject("apple_0", "013_apple", "sphere", (0.075, 0.075, 0.075), (0.8, 0.1, 0.1), 0.07, "brown_table_0",
                 "top", False, (0.0, 0.0)),),
    RobotStart(Pose2D(4.0, 3.0, 0.0)))


@pytest.fixture
def open_room(backend: MujocoBackend) -> MujocoBackend:
    """The module's backend in an 8 m x 6 m room with nothing near the robot (walls south and east only)."""
    backend.reset(OPEN_ROOM)
    return backend


@pytest.fixture
def fresh(backend: MujocoBackend, compact_spec: SceneSpec) -> MujocoBackend:
    """The module's backend, reset to the compact kitchen."""
    backend.reset(compact_spec)
    return backend


def _instance_of_geom(model: mujoco.MjModel, geom: int) -> str:
    """Instance name of a geom from the MJCF naming scheme ("" for walls, floors, robot)."""
    body = model.body(int(model.geom_bodyid[geom])).name
    prefix, _, rest = body.partition("/")
    return rest if prefix in ("furn", "art", "obj") else ""


def test_views_depth_and_segmentation_agree_with_ray_casts(fresh: MujocoBackend) -> None:
    observation = fresh.observe(VIEWS, depth=True, segmentation=True)
    model, data = fresh.model, fresh.data
    checked = 0
    for view in VIEWS:
        rgb, depth, segmentation = observation.rgb[view], observation.depth[view], observation.segmentation[view]
        assert rgb.shape == (256, 256, 3) and rgb.dtype == np.uint8 and rgb.std() > 10
        assert depth.shape == (256, 256) and depth.dtype == np.float32
        camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, f"fetch/{view}")
        focal = 128 / math.tan(math.radians(model.cam_fovy[camera]) / 2)
        rotation = data.cam_xmat[camera].reshape(3, 3)
        for row in range(16, 256, 48):
            for column in range(16, 256, 48):
                local = np.array([column + 0.5 - 128, 128 - (row + 0.5), -focal])
                direction = rotation @ (local / np.linalg.norm(local))
                geom = np.array([-1], dtype=np.int32)
                # Groups 0 and 3: scene geoms; the robot (1, 2) and the invisible floor plane (4) are skipped.
                distance = mujoco.mj_ray(model, data, data.cam_xpos[camera], direction,
                                         np.array([1, 0, 0, 1, 0, 0], dtype=np.uint8), 1, -1, geom)
                if distance < 0:
                    continue
                along_axis = distance * focal / np.linalg.norm(local)
                assert depth[row, column] == pytest.approx(along_axis, rel=0.01, abs=0.01), (view, row, column)
                expected = _instance_of_geom(model, int(geom[0]))
                found = segmentation[row, column]
                assert (observation.instance_names[found] if found >= 0 else "") == expected, (view, row, column)
                checked += 1
    assert checked > 50


def test_visible_lists_name_what_the_cameras_see(fresh: MujocoBackend) -> None:
    observation = fresh.observe(VIEWS, segmentation=True)
    seen = {name for names in observation.visible.values() for name in names}
    assert {"kitchen_counter_0", "fridge_0", "brown_table_0"} <= seen
    assert not any(name.startswith("kitchen_drawer") for name in seen)  # drawers count as their counter
    canonical = dict(zip(observation.instance_names, observation.instance_canonicals))
    assert canonical["fridge_0"] == "fridge" and canonical["apple_0"] == "013_apple"


def test_third_person_views_show_the_robot(open_room: MujocoBackend) -> None:
    observation = open_room.observe(["third_front", "third_left", "third_back", "third_right"], segmentation=True)
    for image in observation.rgb.values():
        # The Fetch is white and grey in the middle of the picture; the floor around it is brown.
        middle = image[100:220, 100:156].astype(int)
        bright_grey = (middle.min(axis=-1) > 150) & (middle.max(axis=-1) - middle.min(axis=-1) < 40)
        assert bright_grey.mean() > 0.2
        corner = image[200:, :40].astype(int)
        assert (corner.max(axis=-1) - corner.min(axis=-1) > 40).mean() > 0.9  # brown floor


def test_base_drives_turns_and_stops_at_walls(open_room: MujocoBackend) -> None:
    simulator = open_room
    simulator.teleport_base(4.0, 3.0, 2.0)
    start = simulator.robot_state().base
    simulator.set_base_velocity(0.5, 0.0)
    simulator.step(2.0)
    moved = simulator.robot_state().base
    heading = (math.cos(start.yaw), math.sin(start.yaw))
    delta = np.subtract(moved.position[:2], start.position[:2])
    # The base's actuators lag commands by 0.1 s (damping over stiffness), so 0.5 m/s for 2 s covers 0.95 m.
    assert float(delta @ heading) == pytest.approx(0.95, abs=0.03)
    assert abs(float(delta @ (-heading[1], heading[0]))) < 0.02
    assert simulator.robot_state().base_velocity == pytest.approx((0.5, 0.0), abs=0.02)
    simulator.set_base_velocity(0.0, 1.0)
    simulator.step(1.0)
    assert simulator.robot_state().base.yaw - moved.yaw == pytest.approx(0.9, abs=0.03)
    assert simulator.contact_force() == 0.0
    # Into the east wall (inner face at x = 7.9): the base stops there and feels it.
    simulator.teleport_base(7.0, 3.0, 0.0)
    simulator.set_base_velocity(0.5, 0.0)
    simulator.step(3.0)
    stopped = simulator.robot_state().base.position[0]
    assert 7.4 < stopped < 7.9 - 0.2
    assert simulator.contact_force() > 100.0
    simulator.set_base_velocity(-0.3, 0.0)
    simulator.step(1.0)
    # Without anti-windup the pushed-away target would hold it at the wall for seconds; it backs off at once.
    assert stopped - simulator.robot_state().base.position[0] > 0.18


def test_arm_torso_and_head_follow_their_targets(open_room: MujocoBackend) -> None:
    fresh = open_room
    target = (0.3, -0.4, 0.2, 1.2, 0.1, 0.9, -0.3)
    fresh.set_arm_targets(target)
    fresh.set_torso_target(0.3)
    fresh.set_head_target(0.4, 0.2)
    fresh.step(2.5)
    state = fresh.robot_state()
    joints = dict(zip(state.joint_names, state.joint_positions))
    assert [joints[name] for name in fresh.arm_joint_names] == pytest.approx(target, abs=0.05)
    assert joints["torso_lift_joint"] == pytest.approx(0.3, abs=0.01)
    assert (joints["head_pan_joint"], joints["head_tilt_joint"]) == pytest.approx((0.4, 0.2), abs=0.05)
    with pytest.raises(ValueError, match="7 finite numbers"):
        fresh.set_arm_targets([0.0] * 6)


def _put_object_at_gripper(simulator: MujocoBackend, name: str) -> None:
    model, data = simulator.model, simulator.data
    grip = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)].copy()
    address = simulator.joint_qpos_index(f"obj/{name}")
    data.qpos[address: address + 3] = grip
    data.qvel[:] = 0.0
    mujoco.mj_forward(model, data)


def test_weld_grasp_carries_and_releases_an_object(fresh: MujocoBackend) -> None:
    assert fresh.close_gripper() is None and fresh.held_object() is None  # nothing within reach
    fresh.open_gripper()
    _put_object_at_gripper(fresh, "apple_0")
    assert fresh.close_gripper() == "apple_0"
    fresh.step(0.5)
    grip = np.array(fresh.robot_state().gripper.position)
    apple = np.array(fresh.object_states(["apple_0"])[0].pose.position)
    assert np.linalg.norm(grip - apple) < 0.03
    assert fresh.robot_state().held_object == "apple_0"
    assert "apple_0" not in fresh.relations()
    base = fresh.robot_state().base.position
    fresh.teleport_base(base[0] - 1.0, base[1], math.pi)
    fresh.step(0.3)
    carried = np.array(fresh.object_states(["apple_0"])[0].pose.position)
    assert np.linalg.norm(carried - np.array(fresh.robot_state().gripper.position)) < 0.03
    assert fresh.open_gripper() == "apple_0"
    released = fresh.robot_state().base
    fresh.teleport_base(released.position[0] + 0.8, released.position[1], released.yaw)  # out from under it
    fresh.step(1.5)
    assert fresh.held_object() is None
    assert fresh.object_states(["apple_0"])[0].pose.position[2] < 0.1  # fell to the floor
    assert "apple_0" not in fresh.relations()


def test_a_released_object_ignores_the_hand_until_the_hand_is_clear_of_it(fresh: MujocoBackend) -> None:
    model = fresh.model
    _put_object_at_gripper(fresh, "apple_0")
    assert fresh.close_gripper() == "apple_0"
    apple = model.geom_bodyid == fresh.model.body("obj/apple_0").id
    assert fresh.open_gripper() == "apple_0"
    fresh.step(0.1)  # the fingers are still around it: no contact with the robot yet
    assert not np.any(model.geom_conaffinity[apple] & fetch_model.ROBOT_BIT)
    base = fresh.robot_state().base
    fresh.teleport_base(base.position[0] + 0.8, base.position[1], base.yaw)
    fresh.step(0.1)
    assert np.all(model.geom_conaffinity[apple] & fetch_model.ROBOT_BIT)


def test_the_arm_check_carries_a_held_object_with_the_gripper(fresh: MujocoBackend) -> None:
    _put_object_at_gripper(fresh, "apple_0")
    assert fresh.close_gripper() == "apple_0"
    fresh.step(0.2)
    checker = fresh._checker()
    state = fresh.robot_state()
    joints = dict(zip(state.joint_names, state.joint_positions))
    arm = [joints[name] + 0.3 for name in fetch.ARM_JOINTS]
    checker.collides(arm, joints[fetch.TORSO_JOINT])
    scratch, live = checker._scratch, fresh.data
    gripper, apple = fresh.model.body("fetch/gripper_link").id, fresh.model.body("obj/apple_0").id
    assert np.linalg.norm(scratch.xpos[gripper] - live.xpos[gripper]) > 0.05  # the arm moved in the scratch copy
    assert np.linalg.norm(scratch.xpos[apple] - scratch.xpos[gripper]) == pytest.approx(
        np.linalg.norm(live.xpos[apple] - live.xpos[gripper]), abs=1e-6)  # and the apple with it


def test_start_relations_match_the_spec(fresh: MujocoBackend, compact_spec: SceneSpec) -> None:
    relations = fresh.relations()
    for obj in compact_spec.objects:
        assert relations[obj.name] == (obj.receptacle, obj.surface, obj.inside)
    state = fresh.object_states(["cracker box"])[0]
    assert (state.name, state.kind, state.receptacle, state.inside) == ("cracker_box_0", "object",
                                                                        "kitchen_counter_0", False)


def test_drawers_and_doors_open_close_and_carry_their_contents(fresh: MujocoBackend) -> None:
    before = np.array(fresh.object_states(["apple_0"])[0].pose.position)
    drawer = fresh.container_states(["kitchen_drawer_0"])[0]
    assert (drawer.joint_type, drawer.open_threshold, drawer.is_open) == ("slide", 0.25, False)
    fresh.set_container_position("kitchen_drawer_0", 0.4)
    fresh.step(0.3)
    assert fresh.container_states(["kitchen_drawer_0"])[0].is_open
    after = np.array(fresh.object_states(["apple_0"])[0].pose.position)
    assert after - before == pytest.approx([0.0, -0.4, 0.0], abs=0.02)  # the counter faces -y
    assert fresh.relations()["apple_0"] == ("kitchen_drawer_0", "drawer_0", True)
    fresh.set_container_target("kitchen_drawer_0", 0.0)
    fresh.step(2.0)
    assert fresh.container_states(["kitchen_drawer_0"])[0].position == pytest.approx(0.0, abs=0.02)
    assert fresh.relations()["apple_0"] == ("kitchen_drawer_0", "drawer_0", True)
    [door] = fresh.container_states(["fridge"])
    assert (door.name, door.joint_type, door.open_threshold) == ("fridge_0_door", "hinge", 0.8)
    closed_grid = fresh.occupancy_grid(0.05)
    fresh.set_container_target("fridge_0_door", 1.2)
    fresh.step(2.0)
    [door] = fresh.container_states(["refrigerator"])
    assert door.position == pytest.approx(1.2, abs=0.05) and door.is_open
    assert (fresh.occupancy_grid(0.05).occupied != closed_grid.occupied).any()
    assert len(fresh.container_states(["kitchen counter"])) == 2


def test_doors_driven_to_their_open_target_settle_without_swinging_past_it(backend: MujocoBackend,
                                                                           apartment_spec: SceneSpec) -> None:
    """Hinged doors are critically damped on their position actuators (1.45 rad is the M3 skills' open target)."""
    from habitat_bridge.backends import mjcf_builder

    backend.reset(apartment_spec)
    doors = [state.name for state in backend.container_states() if state.joint_type == "hinge"]
    assert {"fridge_0_door", "white_cabinet_0_door"} <= set(doors)
    for name in doors:
        for target in (1.2, 1.45):
            backend.reset(apartment_spec)
            backend.set_container_target(name, target)
            trace = []
            for _ in range(150):
                backend.step(0.02)
                trace.append(backend.container_states([name])[0].position)
            assert max(trace) <= target + 0.05, (name, target, max(trace))
            assert trace[-1] == pytest.approx(target, abs=0.02), (name, target)
    fridge = next(part for piece in apartment_spec.furniture if piece.name == "fridge_0"
                  for part in piece.geometry.moving)
    # A 0.8 m x 1.78 m x 5 cm panel of 150 kg/m^3 (10.7 kg) turning about one edge: I ~ m w^2 / 3 = 2.3.
    assert mjcf_builder.hinge_inertia(fridge) == pytest.approx(2.33, abs=0.05)


def test_fingers_hold_handle_bars_and_a_hinged_panel_only_near_its_free_edge() -> None:
    """The fridge door (hinged at its left edge): the bar anywhere, the panel within PANEL_EDGE_BAND of its right
    (free) edge, never by the hinge or mid-panel; a drawer's front is held by its bar only."""
    from habitat_bridge import furniture
    from habitat_bridge.backends.mujoco_robot import PANEL_EDGE_BAND, holdable

    [door] = furniture.furniture_geometry("fridge", (0.8, 0.72, 1.8), ("door",)).moving
    pivot = np.asarray(door.pivot)
    panel, bar = door.boxes
    half_length = panel.half[0]

    def holds(box: furniture.Box, x_from_centre: float, joint: str = "hinge") -> bool:
        return holdable(box, pivot, joint, np.array([x_from_centre, 0.0, 0.0]))

    assert holds(bar, 0.0)
    assert holds(panel, half_length - 0.02) and holds(panel, half_length - PANEL_EDGE_BAND)
    assert not holds(panel, 0.0) and not holds(panel, -half_length + 0.02)
    assert not holds(panel, half_length - 0.02, joint="slide")


def test_names_resolve_through_the_alias_table(fresh: MujocoBackend) -> None:
    assert fresh.resolve("red apple") == ["apple_0"]
    assert fresh.resolve("013_apple") == ["apple_0"]
    assert set(fresh.resolve("drawer")) == {"kitchen_counter_0", "kitchen_drawer_0", "kitchen_drawer_1"}
    assert fresh.resolve("unicorn") == []
    with pytest.raises(UnknownNameError, match="'unicorn' matches nothing"):
        fresh.object_states(["apple", "unicorn"])
    states = {state.name: state for state in fresh.object_states()}
    assert states["fridge_0"].kind == "container" and states["brown_table_0"].kind == "furniture"
    assert states["kitchen_0"].kind == "room"
    base = fresh.robot_state().base.position
    assert states["brown_table_0"].distance == pytest.approx(math.dist(base[:2], (2.2, 1.3)), abs=1e-6)


def test_same_seed_and_commands_give_the_same_trajectory(compact_spec: SceneSpec) -> None:
    runs = []
    for _ in range(2):
        simulator = MujocoBackend()
        try:
            simulator.reset(compact_spec)
            simulator.set_base_velocity(0.2, 0.3)
            simulator.set_arm_targets((0.3, -0.4, 0.2, 1.2, 0.1, 0.9, -0.3))
            simulator.step(1.0)
            runs.append(simulator.data.qpos.copy())
        finally:
            simulator.close()
    assert np.array_equal(runs[0], runs[1])


def test_reset_restores_the_start_and_seed_moves_unplaced_objects(fresh: MujocoBackend,
                                                                 compact_spec: SceneSpec) -> None:
    fresh.set_base_velocity(0.3, 0.0)
    fresh.step(1.0)
    assert fresh.reset(compact_spec) == "compact_0"
    assert fresh.time == 0.0
    assert fresh.robot_state().base.position[:2] == pytest.approx((2.5, 2.3), abs=1e-3)
    unplaced = replace(compact_spec, objects=tuple(replace(obj, offset=None) for obj in compact_spec.objects))
    fresh.reset(unplaced, seed=1)
    first = fresh.object_states(["apple_0"])[0].pose.position
    fresh.reset(unplaced, seed=2)
    second = fresh.object_states(["apple_0"])[0].pose.position
    assert first != pytest.approx(second, abs=1e-3)


def test_misuse_is_reported(compact_spec: SceneSpec) -> None:
    simulator = MujocoBackend()
    with pytest.raises(BackendError, match="call reset first"):
        simulator.observe()
    simulator.reset(compact_spec)
    with pytest.raises(ValueError, match="unknown or missing views"):
        simulator.observe(["up"])
    with pytest.raises(ValueError, match="seconds must be"):
        simulator.step(-1.0)
    with pytest.raises(UnknownNameError):
        simulator.set_container_target("sofa_0", 1.0)
    simulator.close()
    simulator.close()


def test_full_apartment_builds_renders_and_queries(apartment_spec: SceneSpec) -> None:
    simulator = MujocoBackend()
    try:
        assert simulator.reset(apartment_spec) == "apartment_0"
        observation = simulator.observe(VIEWS, segmentation=True)
        assert all(observation.visible[view] for view in VIEWS)
        relations = simulator.relations()
        assert {name: relations[name][0] for name in relations} == {obj.name: obj.receptacle
                                                                    for obj in apartment_spec.objects}
    finally:
        simulator.close()


def test_mink_inverse_kinematics_drives_the_arm_to_a_grasp() -> None:
    """What the privileged Pick skill will do: IK with mink on this model, joint targets, weld grasp."""
    mink = pytest.importorskip("mink")
    spec = apartment.compact_room(0)
    simulator = MujocoBackend()
    try:
        simulator.reset(spec)
        box = simulator.object_states(["cracker_box_0"])[0]
        x, y, z = box.pose.position
        simulator.teleport_base(x, y - 0.7, math.pi / 2)
        simulator.set_torso_target(0.38)
        simulator.step(1.0)
        model, data = simulator.model, simulator.data
        arm_dofs = {int(model.jnt_dofadr[model.joint(f"fetch/{joint}").id]) for joint in simulator.arm_joint_names}
        frozen = [dof for dof in range(model.nv) if dof not in arm_dofs]
        gripper_down = mink.SO3.from_matrix(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]))

        def solve(target: tuple[float, float, float]) -> list[float]:
            configuration = mink.Configuration(model)
            configuration.update(data.qpos)
            task = mink.FrameTask(GRIP_SITE, "site", position_cost=1.0, orientation_cost=0.3)
            task.set_target(mink.SE3.from_rotation_and_translation(gripper_down, np.array(target)))
            for _ in range(400):
                velocity = mink.solve_ik(configuration, [task], 0.05, "daqp", damping=1e-3)
                velocity[frozen] = 0.0
                configuration.integrate_inplace(velocity, 0.05)
                if np.linalg.norm(task.compute_error(configuration)[:3]) < 0.005:
                    break
            return [float(configuration.q[simulator.joint_qpos_index(joint)]) for joint in simulator.arm_joint_names]

        above = solve((x, y, z + 0.35))
        simulator.set_arm_targets(above)
        simulator.step(3.0)
        simulator.set_arm_targets(solve((x, y, z + box.size[2] / 2 + 0.02)))
        simulator.step(2.0)
        tree = int(model.body_treeid[model.body("obj/cracker_box_0").id])
        assert data.tree_asleep[tree] >= 0  # resting objects sleep; the weld wakes it
        assert simulator.close_gripper() == "cracker_box_0"
        simulator.set_arm_targets(above)
        simulator.step(2.0)
        lifted = simulator.object_states(["cracker_box_0"])[0]
        assert lifted.pose.position[2] > z + 0.15 and lifted.receptacle == ""
    finally:
        simulator.close()
