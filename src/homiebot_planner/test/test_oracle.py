"""The re-planning expert: the next subtask from states another planner left behind (no ROS, hand-made scenes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from emmoe_core.protocol import SubtaskText
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.robot.state import ContainerState, InstanceState, Pose

from homiebot_planner.backends import BackendError, DecodingConstraints, EpisodeInfo, GenerationRequest
from homiebot_planner.backends.oracle import OracleBackend, OracleConfig
from homiebot_planner.memory import ExecutedStep
from homiebot_planner.parsing import parse_output

PLAN = ["[Go to, fridge]", "[Open, fridge]", "[Go to, brown_table]", "[Pick, apple]", "[Go to, fridge]",
        "[Put, apple, fridge]", "[End]"]
FRIDGE = (0.0, 3.0)
TABLE = (4.0, 0.0)
SOFA = (-4.0, 0.0)


def _task(root: Path) -> Path:
    directory = root / "train" / "7"
    directory.mkdir(parents=True)
    blocks = [f"Subtask{index}: {node} (None)\nAnalysis: step {index}.\nFeedback: None\nInventory: None\n"
              for index, node in enumerate(PLAN, start=1)]
    (directory / "info.txt").write_text("Task: put the apple in the fridge\n\n" + "\n".join(blocks), encoding="utf-8")
    (directory / "keypath.json").write_text(json.dumps([PLAN]), encoding="utf-8")
    return directory


def _scene(robot: tuple[float, float], held: str = "", fridge_open: bool = False,
           apple: tuple[float, float] = TABLE, apple_on: str = "brown_table_0", apple_inside: bool = False,
           bowl_held: bool = False) -> SceneSnapshot:
    """An apple (on the table, or where given), a bowl on the sofa, the fridge with its door, a table, a sofa."""

    def item(name: str, canonical: str, kind: str, at: tuple[float, float], on: str = "",
             inside: bool = False) -> InstanceState:
        return InstanceState(name, canonical, kind, Pose((at[0], at[1], 0.5)), (0.2, 0.2, 0.2), receptacle=on,
                             inside=inside, distance=math.dist(robot, at))

    objects = (
        item("apple_0", "013_apple", "object", robot if held == "apple_0" else apple,
             "" if held == "apple_0" else apple_on, apple_inside),
        item("bowl_0", "024_bowl", "object", robot if bowl_held else SOFA, "" if bowl_held else "sofa_0"),
        item("fridge_0", "fridge", "container", FRIDGE),
        item("brown_table_0", "frl_apartment_table_01", "furniture", TABLE),
        item("sofa_0", "frl_apartment_sofa", "furniture", SOFA),
    )
    door = ContainerState("fridge_0_door", "fridge", "door", "fridge_0", "hinge", 1.2 if fridge_open else 0.0, 0.0,
                          2.0, 0.8, distance=math.dist(robot, FRIDGE))
    return SceneSnapshot(robot, 0.0, "bowl_0" if bowl_held else held, 0.0, objects, (door,))


def _done(*nodes: str, failed: int | None = None) -> list[ExecutedStep]:
    steps = []
    for index, text in enumerate(nodes):
        action, _, rest = text.strip("[]").partition(", ")
        target, _, place = rest.partition(", ")
        steps.append(ExecutedStep(SubtaskText(action, target, place), index != failed, "None"))
    return steps


@pytest.fixture
def oracle(tmp_path: Path) -> OracleBackend:
    backend = OracleBackend(OracleConfig(data_dir=str(tmp_path)))
    backend.start_episode(EpisodeInfo("7", "put the apple in the fridge", task_id="7", task_dir=_task(tmp_path)))
    return backend


def _next(oracle: OracleBackend, executed: list[ExecutedStep], scene: SceneSnapshot, held: tuple[str, ...] = ()) -> str:
    oracle.attach_scene(lambda: scene)
    oracle.attach_history(lambda: executed)
    parsed = parse_output(oracle.generate(GenerationRequest(messages=(), constraints=DecodingConstraints(held=held))))
    assert parsed is not None
    return str(parsed.subtask)


def test_it_follows_the_plan_from_its_own_states(oracle: OracleBackend) -> None:
    done: list[str] = []
    scenes = [_scene((0.0, 0.0)), _scene(FRIDGE), _scene(FRIDGE, fridge_open=True), _scene(TABLE, fridge_open=True),
              _scene(TABLE, held="apple_0", fridge_open=True), _scene(FRIDGE, held="apple_0", fridge_open=True),
              _scene(FRIDGE, fridge_open=True, apple=FRIDGE, apple_on="fridge_0", apple_inside=True)]
    for scene, expected in zip(scenes, PLAN):
        assert _next(oracle, _done(*done), scene) == expected
        done.append(expected)


def test_a_wrong_object_in_hand_is_put_down_before_opening(oracle: OracleBackend) -> None:
    """Another planner picked the bowl at the sofa. Walking needs no empty hand; opening the fridge does: the bowl
    goes on the nearest furniture that takes it (walked up to when out of reach)."""
    picked = _done("[Go to, sofa]", "[Pick, bowl]")
    assert _next(oracle, picked, _scene(SOFA, bowl_held=True), held=("bowl",)) == "[Go to, fridge]"
    at_fridge = picked + _done("[Go to, fridge]")
    assert _next(oracle, at_fridge, _scene(FRIDGE, bowl_held=True), held=("bowl",)) == "[Go to, brown_table]"
    near_table = _scene((3.0, 0.5), bowl_held=True)
    assert _next(oracle, at_fridge, near_table, held=("bowl",)) == "[Put, bowl, brown_table]"


def test_a_door_closed_again_is_reopened_with_an_empty_hand(oracle: OracleBackend) -> None:
    """The fridge was opened, then closed by another planner while the apple is in hand: put the apple down,
    open the fridge, fetch the apple again, put it in."""
    history = _done("[Go to, fridge]", "[Open, fridge]", "[Go to, brown_table]", "[Pick, apple]", "[Go to, fridge]",
                    "[Close, fridge]")
    assert _next(oracle, history, _scene(FRIDGE, held="apple_0"), held=("apple",)) == "[Go to, brown_table]"
    near_table = _scene((3.0, 0.5), held="apple_0")
    assert _next(oracle, history, near_table, held=("apple",)) == "[Put, apple, brown_table]"
    history += _done("[Go to, brown_table]", "[Put, apple, brown_table]", "[Go to, fridge]")
    assert _next(oracle, history, _scene(FRIDGE)) == "[Open, fridge]"
    history += _done("[Open, fridge]")
    assert _next(oracle, history, _scene(FRIDGE, fridge_open=True)) == "[Go to, brown_table]"
    assert _next(oracle, history, _scene(TABLE, fridge_open=True)) == "[Pick, apple]"


def test_a_dropped_object_is_fetched_where_it_lies(oracle: OracleBackend) -> None:
    history = _done("[Go to, fridge]", "[Open, fridge]", "[Go to, brown_table]", "[Pick, apple]", "[Go to, fridge]")
    dropped = _scene(FRIDGE, fridge_open=True, apple=(2.0, -2.0), apple_on="")
    assert _next(oracle, history, dropped) == "[Go to, apple]"
    close_by = _scene((2.0, -1.0), fridge_open=True, apple=(2.0, -2.0), apple_on="")
    assert _next(oracle, history, close_by) == "[Pick, apple]"


def test_a_robot_that_walked_off_goes_back_through_the_plans_own_go_to(oracle: OracleBackend) -> None:
    history = _done("[Go to, fridge]", "[Open, fridge]", "[Go to, brown_table]", "[Go to, sofa]")
    assert _next(oracle, history, _scene(SOFA, fridge_open=True)) == "[Go to, brown_table]"
    with_apple = history + _done("[Go to, brown_table]", "[Pick, apple]", "[Go to, sofa]")
    assert _next(oracle, with_apple, _scene(SOFA, held="apple_0", fridge_open=True), held=("apple",)) \
        == "[Go to, fridge]"


def test_a_failed_step_is_asked_again_and_end_waits_for_the_keypath(oracle: OracleBackend) -> None:
    history = _done(*PLAN[:6], failed=5)
    at_fridge = _scene(FRIDGE, held="apple_0", fridge_open=True)
    assert _next(oracle, history, at_fridge, held=("apple",)) == "[Put, apple, fridge]"
    finished = _done(*PLAN[:6])
    inside = _scene(FRIDGE, fridge_open=True, apple=FRIDGE, apple_on="fridge_0", apple_inside=True)
    assert _next(oracle, finished, inside) == "[End]"


def test_it_needs_a_scene_and_a_task(tmp_path: Path) -> None:
    backend = OracleBackend(OracleConfig(data_dir=str(tmp_path)))
    with pytest.raises(BackendError, match="start_episode"):
        backend.next_node([], _scene((0.0, 0.0)))
    with pytest.raises(BackendError, match="task"):
        backend.start_episode(EpisodeInfo("x", "free text"))
    backend.start_episode(EpisodeInfo("7", "t", task_id="7", task_dir=_task(tmp_path)))
    with pytest.raises(BackendError, match="no scene source"):
        backend.generate(GenerationRequest(messages=()))
    with pytest.raises(ValueError, match="reach_m"):
        OracleConfig(reach_m=0)


def test_a_door_left_open_is_not_the_oracles_business_unless_the_plan_says_so(oracle: OracleBackend) -> None:
    """Another planner opened the fridge before walking off: the plan's Open is still asked for (the keypath needs
    it matched, and the skill succeeds at once on an open door), then the plan goes on with the door as it is."""
    history = _done("[Go to, sofa]", "[Go to, fridge]")
    history[0] = ExecutedStep(SubtaskText("Open", "fridge"), False, "Unable to open, the target is far away")
    assert _next(oracle, history, _scene(FRIDGE, fridge_open=True)) == "[Open, fridge]"
    history += _done("[Open, fridge]")
    assert _next(oracle, history, _scene(FRIDGE, fridge_open=True)) == "[Go to, brown_table]"
