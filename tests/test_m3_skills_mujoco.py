"""The executor core with the privileged (M3) skills on the real MuJoCo backend, in the compact test kitchen.

No ROS here: the subtask executor reads the scene from the backend and runs the skills in-process, exactly the
logic /subtask runs. Triggers every EMMOE error type in the simulator and checks the exact strings.
"""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco")

from emmoe_core.protocol import SubtaskText  # noqa: E402
from emmoe_core.robot.scene import snapshot_of  # noqa: E402
from habitat_bridge.apartment import compact_room  # noqa: E402
from habitat_bridge.backends.mujoco_backend import MujocoBackend  # noqa: E402

from homiebot_executor.execution import ExecutionConfig  # noqa: E402
from homiebot_executor.failure_model import FailureConfig, FailureModel  # noqa: E402
from homiebot_executor.policies.m3 import PrivilegedSkills  # noqa: E402
from homiebot_executor.subtask import SubtaskConfig, SubtaskExecutor  # noqa: E402

MODEL = {"Go to": "NoMaD", "Pick": "RT-1-X", "Put": "RT-1-X", "Open": "octo", "Close": "octo", "End": "None"}


@pytest.fixture(scope="module")
def backend():
    sim = MujocoBackend()
    yield sim
    sim.close()


def executor_for(backend, failure: FailureConfig | None = None, put_retries: str = "paper"):
    skills = PrivilegedSkills(backend, failure_model=FailureModel(failure) if failure else None)
    routed: list[str] = []

    def run(route, goal, attempt):
        routed.append(route.action_name)
        return skills.run(goal)

    executor = SubtaskExecutor(lambda: snapshot_of(backend), run,
                               SubtaskConfig(execution=ExecutionConfig(put_retries=put_retries)))
    return executor, routed


def do(executor, text_action, target="", place="", inventory=()):
    return executor.execute(SubtaskText(text_action, target, place, MODEL.get(text_action, "RT-1-X")), inventory)


def test_go_to_pick_put_open_close_in_the_compact_kitchen(backend):
    backend.reset(compact_room(0))
    executor, routed = executor_for(backend)
    steps = [("Go to", "fridge", ""), ("Open", "fridge", ""), ("Close", "fridge", ""),
             ("Go to", "kitchen_counter", ""), ("Open", "drawer", ""), ("Go to", "apple", ""),
             ("Pick", "apple", ""), ("Go to", "brown_table", ""), ("Put", "apple", "brown_table"),
             ("Go to", "drawer", ""), ("Close", "drawer", ""), ("End", "", "")]
    inventory: tuple[str, ...] = ()
    for action, target, place in steps:
        result = do(executor, action, target, place, inventory)
        assert result.success, f"[{action}, {target}] failed: {result.code} {result.detail}"
        assert result.feedback == "None"
        inventory = result.inventory
        if action == "Pick":
            assert inventory == ("apple",)
    assert inventory == ()
    apple = backend.object_states(["apple_0"])[0]
    assert apple.receptacle == "brown_table_0"
    assert all(part.position < 0.05 for part in backend.container_states())
    assert set(routed) == {"/skills/m3/navigate", "/skills/m3/manipulate"}


def test_every_error_type_in_the_simulator(backend):
    backend.reset(compact_room(0))
    executor, _ = executor_for(backend)
    feedback = {}
    feedback["F1"] = do(executor, "Fetch", "apple").feedback
    feedback["F2"] = do(executor, "Go to", "spaceship").feedback
    feedback["L2"] = do(executor, "Put", "apple", "brown_table").feedback
    feedback["L4"] = do(executor, "Open", "brown_table").feedback
    backend.teleport_base(0.6, 0.6, 0.0)  # a corner of the kitchen, far from the fridge
    feedback["D1"] = do(executor, "Pick", "bowl").feedback
    assert do(executor, "Go to", "cracker_box").success
    assert do(executor, "Pick", "cracker_box").success
    feedback["L1"] = do(executor, "Open", "fridge", inventory=("cracker_box",)).feedback
    feedback["L3"] = do(executor, "Put", "cracker_box", "fridge", ("cracker_box",)).feedback
    x, y, _ = backend.spec.rooms[0].center + (0.0,)
    backend.teleport_base(x, y, 0.0)
    feedback["D2"] = do(executor, "Put", "cracker_box", "kitchen_0", ("cracker_box",)).feedback
    assert feedback == {
        "F1": "fetch is not in the action list! You should only choose actions in the list.",
        "F2": "spaceship does not exist! Please choose another object",
        "L2": "Unable to put, the hand is empty",
        "L4": "Can not open brown_table! Please choose another object",
        "D1": "Unable to pick, the target is far away",
        "L1": "Unable to open, the hand is full",
        "L3": "Unable to put, the fridge is closed, you should open it first",
        "D2": "Unable to put, the target is too close",
    }


def test_execution_errors_from_the_failure_model(backend):
    backend.reset(compact_room(0))
    failing_pick, _ = executor_for(backend, FailureConfig({"pick": 1.0}, seed=1))
    assert do(failing_pick, "Go to", "cracker_box").success
    result = do(failing_pick, "Pick", "cracker_box")
    assert (result.code, result.feedback, len(result.attempts)) == (
        "E1", "Unable to pick, the subtask is too difficult to perform", 3)
    plain, _ = executor_for(backend)
    assert do(plain, "Pick", "cracker_box").success
    assert do(plain, "Go to", "brown_table").success
    release_mode, _ = executor_for(backend, FailureConfig({"put": 1.0}, seed=2), put_retries="release")
    result = do(release_mode, "Put", "cracker_box", "brown_table", ("cracker_box",))
    assert (result.code, result.feedback, result.inventory) == ("E3", "Unable to put, time out", ("cracker_box",))
    dropping, _ = executor_for(backend, FailureConfig({"put": 1.0}, put_drop_probability=1.0, seed=3))
    result = do(dropping, "Put", "cracker_box", "brown_table", ("cracker_box",))
    assert (result.code, result.feedback, result.inventory) == ("E2", "Unable to put, and the object is missing", ())
    assert backend.held_object() is None


def test_put_into_a_bowl_on_a_table(backend):
    """An object as the place: the banana ends within 0.5 m of the bowl, resting on or in it."""
    import math

    from habitat_bridge.apartment import ApartmentConfig, generate_apartment
    from habitat_bridge.placement import ObjectRequest

    backend.reset(generate_apartment(98, ApartmentConfig(min_objects=0, max_objects=0, required=(
        ObjectRequest("011_banana", "frl_apartment_tvstand"), ObjectRequest("024_bowl", "frl_apartment_table_01")))))
    executor, _ = executor_for(backend)
    inventory: tuple[str, ...] = ()
    for action, target, place in (("Go to", "banana", ""), ("Pick", "banana", ""), ("Go to", "bowl", ""),
                                  ("Put", "banana", "bowl")):
        result = do(executor, action, target, place, inventory)
        assert result.success, f"[{action}, {target}] failed: {result.code} {result.detail}"
        inventory = result.inventory
    banana, bowl = backend.object_states(["banana_0"])[0], backend.object_states(["bowl_0"])[0]
    assert math.dist(banana.pose.position, bowl.pose.position) < 0.5
    assert inventory == ()


def test_pick_a_bowl_from_a_drawer_of_the_test_91_kitchen(backend):
    """Task 91's expert path: the bowl lies in kitchen_drawer_2 and a mug in kitchen_drawer_0; the bare "drawer" means
    the nearest drawer holding something (naming.py), so the expert opens the mug's drawer, closes it, goes to the
    bowl and opens its drawer; the bowl is picked and put into the sink (part of the counter)."""
    from pathlib import Path

    from habitat_bridge.scene_spec import load_scene_spec

    backend.reset(load_scene_spec(Path(__file__).resolve().parents[1] / "data" / "test" / "91" / "scene.json"))
    executor, _ = executor_for(backend)
    inventory: tuple[str, ...] = ()
    for action, target, place in (("Go to", "drawer", ""), ("Open", "drawer", ""), ("Close", "drawer", ""),
                                  ("Go to", "bowl", ""), ("Open", "drawer", ""), ("Pick", "bowl", ""),
                                  ("Go to", "sink", ""), ("Put", "bowl", "sink")):
        result = do(executor, action, target, place, inventory)
        assert result.success, f"[{action}, {target}] failed: {result.code} {result.detail}"
        inventory = result.inventory
        if action == "Pick":
            assert inventory == ("bowl",)
    assert inventory == ()
    assert [part.name for part in backend.container_states() if part.is_open] == ["kitchen_drawer_2"]
    bowl = backend.object_states(["bowl_0"])[0]
    assert bowl.receptacle == "kitchen_counter_0" and not bowl.inside
