"""The simulator's EMMOE test tasks: definitions validate, the committed data is what the builder writes."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest
from emmoe_eval.dataset import load_tasks

from homiebot.benchmark_tasks import TaskDefinitionError, build_tasks, load_definitions, parse_definition

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "data" / "tasks" / "emmoe_test.yaml"
VALID = {
    "instruction": "put the apple on the sofa",
    "objects": [{"canonical": "013_apple", "receptacle": "frl_apartment_table_01"}],
    "keypaths": [["[Go to, apple]", "[Pick, apple]", "[Go to, sofa]", "[Put, apple, sofa]", "[End]"]],
    "expert": [["[Go to, apple]", "PixNav", "a"], ["[Pick, apple]", "RT-1-X", "b"], ["[Go to, sofa]", "NoMaD", "c"],
               ["[Put, apple, sofa]", "RT-1-X", "d"], ["[End]", "None", "e"]],
}


def test_the_ten_test_tasks_are_defined():
    definitions = load_definitions(DEFINITIONS)
    assert sorted(definitions) == list(range(91, 101))
    tsv = ROOT / "src" / "emmoe_eval" / "emmoe_eval" / "data" / "emmoe100_tasks.tsv"
    instructions = dict(line.split("\t", 1) for line in tsv.read_text().splitlines()[1:])
    for task_id, definition in definitions.items():
        assert definition.instruction == instructions[str(task_id)].strip()


def test_committed_task_data_is_what_the_builder_writes(tmp_path):
    build_tasks(load_definitions(DEFINITIONS), tmp_path)
    for task_id in range(91, 101):
        fresh, committed = tmp_path / "test" / str(task_id), ROOT / "data" / "test" / str(task_id)
        for name in ("info.txt", "keypath.json", "scene.json"):
            assert filecmp.cmp(fresh / name, committed / name, shallow=False), \
                f"data/test/{task_id}/{name} is stale: run `homiebot tasks build`"


def test_committed_tasks_read_back_in_the_official_layout():
    tasks = load_tasks(ROOT / "data", "test")
    assert sorted(tasks, key=int) == [str(task_id) for task_id in range(91, 101)]
    task = tasks["100"]
    assert task.instruction == "put the green_can on the brown_table to the fridge"
    assert task.expert_length == 7 and len(task.keypaths) == 2
    assert [block.inventory for block in task.info.blocks][3:6] == ["green_can", "green_can", "None"]


def test_scenes_hold_the_required_objects_and_respect_clear():
    definitions = load_definitions(DEFINITIONS)
    for task_id, definition in definitions.items():
        scene = json.loads((ROOT / "data" / "test" / str(task_id) / "scene.json").read_text())
        canonicals = [item["canonical"] for item in scene["objects"]]
        for item in definition.objects:
            assert item.canonical in canonicals, (task_id, item)
    scene_94 = json.loads((ROOT / "data" / "test" / "94" / "scene.json").read_text())
    on_sofa = sorted(item["canonical"] for item in scene_94["objects"] if item["receptacle"].startswith("sofa"))
    assert on_sofa == ["003_cracker_box", "011_banana"]
    scene_91 = json.loads((ROOT / "data" / "test" / "91" / "scene.json").read_text())
    bowl = next(item for item in scene_91["objects"] if item["canonical"] == "024_bowl")
    assert bowl["inside"] and "drawer" in bowl["receptacle"]


@pytest.mark.parametrize("change, message", [
    ({"keypaths": [["[Go to, apple]"]]}, "keypaths[0]: a keypath must end with [End]"),
    ({"keypaths": [["[Fly, apple]", "[End]"]]}, "keypaths[0][0]: unknown action 'Fly'"),
    ({"keypaths": [["[Pick, unicorn]", "[End]"]]}, "'unicorn' is not in the alias table"),
    ({"objects": [{"canonical": "apple", "receptacle": "sofa"}]}, "objects[0].canonical: 'apple' is not a canonical"),
    ({"expert": [["[Pick, apple]", "Gripper3000", "x"], ["[End]", "None", "y"]]}, "unknown model 'Gripper3000'"),
    ({"clear": ["sofa"]}, "clear[0]: 'sofa' is not a canonical"),
])
def test_invalid_definitions_name_the_field(change, message):
    with pytest.raises(TaskDefinitionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_definition(7, {**VALID, **change}, "tasks.yaml")


def test_an_expert_that_does_not_finish_is_refused(tmp_path):
    incomplete = {**VALID, "expert": [["[Go to, apple]", "PixNav", "a"], ["[End]", "None", "e"]]}
    with pytest.raises(TaskDefinitionError, match="does not complete any keypath"):
        build_tasks({7: parse_definition(7, incomplete, "tasks.yaml")}, tmp_path)
