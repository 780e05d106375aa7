"""The sensor-only skills (no_background setting) on the real MuJoCo backend, in-process, through the bridge's
sensor-only view: a whole expert run makes no privileged query, a privileged query ends an attempt with its own
code, the hand opens a drawer by its handle, a door open towards a wall is closed by its edge, and a fridge this robot
opened is closed where it left the door."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("mujoco")

from emmoe_core.perception import create_detector  # noqa: E402
from emmoe_core.robot.state import PrivilegedAccessError  # noqa: E402
from habitat_bridge import sensor_only  # noqa: E402
from habitat_bridge.backends.mujoco_backend import MujocoBackend  # noqa: E402
from habitat_bridge.scene_spec import SceneSpec  # noqa: E402

from homiebot.benchmark_tasks import DEFAULT_DEFINITIONS, scene_for  # noqa: E402
from homiebot.expert_check import replay  # noqa: E402
from homiebot.task_definitions import load_all  # noqa: E402
from homiebot_executor.policies import arm_motion  # noqa: E402
from homiebot_executor.policies.attempt import run_attempt  # noqa: E402
from homiebot_executor.policies.m3 import PrivilegedSkills  # noqa: E402
from homiebot_executor.policies.sensor import SensorSkills, articulate  # noqa: E402
from homiebot_executor.policies.sensor.context import SensorConfig, SensorContext  # noqa: E402
from homiebot_executor.skills import SkillGoal, SkillStatus  # noqa: E402


@pytest.fixture(scope="module")
def definitions():
    return load_all(DEFAULT_DEFINITIONS)


@pytest.fixture()
def backend():
    sim = MujocoBackend()
    yield sim
    sim.close()


def test_a_whole_expert_run_makes_no_privileged_query(definitions, backend, monkeypatch):
    """Task 95 (the apple and the tuna can from the sofa to the white desk) by the expert, sensor-only with the
    setting's default perception (the learned detector): every step as designed, and the bridge's sensor-only view
    counted no privileged query and no observation with the simulator's segmentation."""
    views = []
    real_view = sensor_only.SensorOnlyRobot

    def counted_view(sim):
        view = real_view(sim)
        views.append(view)
        return view

    monkeypatch.setattr(sensor_only, "SensorOnlyRobot", counted_view)
    definition = definitions[95]
    checks = list(replay(definition, scene_for(definition), backend, setting="no_background"))
    assert [check.describe() for check in checks if not check.as_designed] == []
    assert len(views) == 1
    assert dict(views[0].refused) == {}
    assert views[0].calls["observe"] > 10 and views[0].calls["step"] > 100
    assert not set(views[0].calls) & set(sensor_only.PRIVILEGED)
    assert views[0].calls["observe_segmentation"] == 0


def test_a_privileged_query_ends_the_attempt_with_its_own_code(backend):
    backend.reset(None, seed=0)
    robot = sensor_only.SensorOnlyRobot(backend)
    context = SensorContext(robot, SensorConfig())

    def leaky_pick(ctx, goal):
        ctx.backend.object_states([goal.target])
        return SkillStatus.SUCCEEDED, ""

    outcome = run_attempt(context, SkillGoal("pick", "apple"), {"pick": leaky_pick}, arm_motion.reset_arm)
    assert outcome.status is SkillStatus.PRIVILEGED_REFUSED and outcome.status.is_fault
    assert "object_states" in outcome.message and "no_background" in outcome.message
    assert robot.refused["object_states"] == 1
    with pytest.raises(PrivilegedAccessError):
        robot.occupancy_grid()


def test_the_hand_opens_a_drawer_by_its_handle_and_it_stays_open(definitions, backend):
    """The test places the hand on the handle with privileged help; the drawer then moves only with the hand."""
    backend.reset(SceneSpec.from_dict(scene_for(definitions[91])))
    drawer = "kitchen_drawer_1"
    skills = PrivilegedSkills(backend)
    assert skills.run(SkillGoal("navigate", drawer)).success
    context = skills.context
    handle = backend.container_states([drawer])[0].handle
    x, y, _ = context.base()
    rotations = arm_motion.rotations(math.atan2(handle[1] - y, handle[0] - x), level=True)
    rotation, before = arm_motion.approach(context, handle, rotations, back=0.08)
    arm_motion.line(context, before, handle, rotation, 2, must_arrive=False)
    assert backend.close_gripper(0.05) == drawer
    assert backend.held_object() is None  # a handle is not an object in the hand
    for _ in range(40):
        backend.set_base_velocity(-0.1, 0.0)
        backend.step(0.1)
    backend.set_base_velocity(0.0, 0.0)
    pulled = backend.container_states([drawer])[0].position
    assert pulled > 0.3
    assert backend.open_gripper() == drawer
    backend.step(2.0)
    # Let go, the drawer's own actuator holds it where the hand left it.
    assert abs(backend.container_states([drawer])[0].position - pulled) < 0.05


def test_a_door_open_towards_a_wall_is_closed_by_its_free_edge(definitions, backend, monkeypatch):
    """Task 100's fridge is hinged beside the kitchen's partial wall: opened, its handle faces the wall where the robot
    cannot stand. Sensor-only Close holds the panel's free edge instead and swings the door shut (set up with
    privileged help: the door open as the sensor-only Open leaves it, the robot where the Put left it)."""
    backend.reset(SceneSpec.from_dict(scene_for(definitions[100])))
    backend.set_container_position("fridge_0_door", 1.32)
    backend.teleport_base(6.59, 5.80, 1.04)
    skills = SensorSkills(sensor_only.SensorOnlyRobot(backend))
    edges = []
    real_edge = articulate.panel_edge

    def spied_edge(ctx, name):
        edge = real_edge(ctx, name)
        edges.append(edge)
        return edge

    monkeypatch.setattr(articulate, "panel_edge", spied_edge)
    outcome = skills.run(SkillGoal("close", "fridge"))
    assert outcome.success, outcome.message
    assert edges and edges[0] is not None and edges[0].arc is not None
    assert backend.container_states(["fridge_0_door"])[0].position < 0.8  # the release's open threshold


def test_a_fridge_this_robot_opened_is_closed_where_it_left_the_door(definitions, backend, monkeypatch):
    """Train task 16's fridge seen by the learned detector, which labels door and body alike (no panel is seen apart
    from the body): the sensor-only Open swings the door open, the robot walks off, and Close holds the door's free
    edge where the hand let go of it (refound in the points seen there) and swings it shut."""
    backend.reset(SceneSpec.from_dict(scene_for(definitions[16])))
    skills = SensorSkills(sensor_only.SensorOnlyRobot(backend), detector=create_detector("learned"))

    def done(goal: SkillGoal) -> bool:
        return any(skills.run(goal).success for _ in range(3))  # the executor's three attempts

    assert done(SkillGoal("navigate", "fridge")) and done(SkillGoal("open", "fridge_0_door"))
    assert backend.container_states(["fridge_0_door"])[0].position >= 0.8
    assert set(skills.context.left_open) == {"fridge_0_door"}
    assert done(SkillGoal("navigate", "kitchen_counter"))
    remembered = []
    real_left_edge = articulate.left_edge

    def spied(handle):
        remembered.append(handle)
        return real_left_edge(handle)

    monkeypatch.setattr(articulate, "left_edge", spied)
    assert done(SkillGoal("close", "fridge_0_door"))
    closed = backend.container_states(["fridge_0_door"])[0].position
    assert remembered and closed < 0.3, closed
    assert not skills.context.left_open
