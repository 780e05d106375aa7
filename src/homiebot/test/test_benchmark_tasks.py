"""The simulator's EMMOE tasks: definitions validate, the committed data is what the builder writes, the test tasks
are as hard as their instructions, keypaths expand as written and variants never touch the test split."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest
from emmoe_eval.dataset import default_task_attributes, load_tasks, read_info
from emmoe_core.protocol import classify_feedback

from homiebot.benchmark_tasks import (
    TaskDefinitionError,
    build_tasks,
    build_variants,
    load_all,
    load_definitions,
    parse_definition,
    scene_for,
    split_of,
)

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "data" / "tasks"
DEFINITION_FILES = (TASKS / "emmoe_train.yaml", TASKS / "emmoe_test.yaml")
VALID = {
    "instruction": "put the apple on the sofa",
    "objects": [{"canonical": "013_apple", "receptacle": "frl_apartment_table_01"}],
    "keypaths": [["[Go to, apple]", "[Pick, apple]", "[Go to, sofa]", "[Put, apple, sofa]", "[End]"]],
    "expert": [["[Go to, apple]", "PixNav", "a"], ["[Pick, apple]", "RT-1-X", "b"], ["[Go to, sofa]", "NoMaD", "c"],
               ["[Put, apple, sofa]", "RT-1-X", "d"], ["[End]", "None", "e"]],
}


@pytest.fixture(scope="module")
def definitions():
    return load_all(DEFINITION_FILES)


def _scene(task_id: int) -> dict:
    return json.loads((ROOT / "data" / split_of(task_id) / str(task_id) / "scene.json").read_text())


def test_instructions_are_the_benchmark_text_and_splits_hold(definitions):
    assert sorted(load_definitions(TASKS / "emmoe_test.yaml")) == list(range(91, 101))
    assert all(1 <= task_id <= 90 for task_id in load_definitions(TASKS / "emmoe_train.yaml"))
    tsv = ROOT / "src" / "emmoe_core" / "emmoe_core" / "data" / "emmoe100_tasks.tsv"
    instructions = dict(line.split("\t", 1) for line in tsv.read_text().splitlines()[1:])
    for task_id, definition in definitions.items():
        assert definition.instruction == instructions[str(task_id)].strip()


def test_committed_task_data_is_what_the_builder_writes(definitions, tmp_path):
    build_tasks(definitions, tmp_path)
    for task_id in definitions:
        split = split_of(task_id)
        fresh, committed = tmp_path / split / str(task_id), ROOT / "data" / split / str(task_id)
        for name in ("info.txt", "keypath.json", "scene.json"):
            assert filecmp.cmp(fresh / name, committed / name, shallow=False), \
                f"data/{split}/{task_id}/{name} is stale: run `homiebot tasks build`"


def test_counts_on_the_committed_definitions(definitions):
    """The paper's shape: 90 train and 10 test tasks, 870-1,060 expert subtasks over the 100 (966 in the paper),
    long-horizon tasks with at least ten, about 30-45 designed failures each followed by its re-plan, and the
    info.txt feedback of every block is the exact string of its designed error type."""
    assert sorted(definitions) == list(range(1, 101))
    long_horizon = default_task_attributes().members["long-horizon"]
    for task_id, definition in definitions.items():
        if task_id in long_horizon:
            assert len(definition.expert) >= 10, f"task {task_id} is long-horizon but has {len(definition.expert)}"
        for index, step in enumerate(definition.expert):
            if step.expect:
                assert definition.expert[index + 1].subtask.action != "End", (task_id, index)
        info = read_info(ROOT / "data" / split_of(task_id) / str(task_id) / "info.txt")
        assert [classify_feedback(block.feedback) or "" for block in info.blocks] == \
               [step.expect for step in definition.expert], task_id
    subtasks = sum(len(definition.expert) for definition in definitions.values())
    assert 870 <= subtasks <= 1060
    failures = [step.expect for definition in definitions.values() for step in definition.failures]
    assert 30 <= len(failures) <= 45
    assert len(set(failures)) >= 6
    assert sum(1 for definition in definitions.values() if definition.failures) >= 30


def test_committed_tasks_read_back_in_the_official_layout():
    tasks = load_tasks(ROOT / "data", "test")
    assert sorted(tasks, key=int) == [str(task_id) for task_id in range(91, 101)]
    task = tasks["100"]
    assert task.instruction == "put the green_can on the brown_table to the fridge"
    assert task.expert_length == 14 and len(task.keypaths) == 4
    blocks = task.info.blocks
    assert blocks[3].feedback == "Unable to put, the fridge is closed, you should open it first"
    assert [block.inventory for block in blocks][1:6] == ["green_can"] * 4 + ["None"]


def test_test_scenes_are_as_hard_as_their_instructions():
    scene_91 = _scene(91)
    drawers = {item["receptacle"] for item in scene_91["objects"] if item["inside"]}
    bowl = next(item for item in scene_91["objects"] if item["canonical"] == "024_bowl" and item["inside"])
    assert len(drawers) >= 2 and "drawer" in bowl["receptacle"]
    on_sofa = sorted(item["canonical"] for item in _scene(94)["objects"] if item["receptacle"].startswith("sofa"))
    assert on_sofa == ["003_cracker_box", "011_banana"]
    kinds_98 = [item["canonical"] for item in _scene(98)["objects"]]
    assert kinds_98.count("024_bowl") == 2 and kinds_98.count("011_banana") == 1
    green = [item for item in _scene(100)["objects"] if item["canonical"] == "010_potted_meat_can"]
    assert len(green) == 1 and green[0]["receptacle"].startswith("brown_table")
    assert any(item["canonical"] == "002_master_chef_can" for item in _scene(100)["objects"])


def test_test_keypaths_accept_every_valid_order_and_destination(definitions):
    def picks(path):
        return tuple(node.target for node in path if node.action == "Pick")

    assert sorted(set(map(picks, definitions[97].keypaths))) == sorted(
        [("orange", "peach"), ("peach", "orange"), ("orange", "lemon"), ("lemon", "orange"), ("peach", "lemon"),
         ("lemon", "peach")])
    assert {picks(path) for path in definitions[92].keypaths} == {("apple",), ("lemon",)}
    places = {tuple(node.place for node in path if node.action == "Put") for path in definitions[93].keypaths}
    assert ("brown_table", "kitchen_counter") in places and ("white_desk", "white_desk") in places
    assert {picks(path) for path in definitions[93].keypaths} == {("mug", "sponge"), ("sponge", "mug")}


def test_compact_keypaths_expand_and_keep_each_meaning_once():
    data = {**VALID, "keypaths": [
        [{"any_order": [["[Pick, apple]", "[Put, apple, sink|kitchen_counter]"], ["[Pick, mug]"]]}, "[End]"],
        [{"one_of": [["[Pick, apple]"], ["[Pick, lemon]"]]}, "[End]"]]}
    paths = [[str(node) for node in path] for path in parse_definition(7, data, "t.yaml").keypaths]
    assert paths == [["[Pick, apple]", "[Put, apple, sink]", "[Pick, mug]", "[End]"],
                     ["[Pick, mug]", "[Pick, apple]", "[Put, apple, sink]", "[End]"],
                     ["[Pick, apple]", "[End]"], ["[Pick, lemon]", "[End]"]]


def test_a_designed_failure_carries_its_feedback_and_keeps_the_inventory():
    data = {**VALID, "expert": [["[Go to, apple]", "PixNav", "a"], ["[Wash, apple]", "RT-1-X", "x", "F1"],
                                ["[Pick, apple]", "RT-1-X", "b"], ["[Put, apple, fridge]", "RT-1-X", "c", "L3"],
                                ["[Go to, sofa]", "NoMaD", "c"], ["[Put, apple, sofa]", "RT-1-X", "d"],
                                ["[End]", "None", "e"]]}
    blocks = parse_definition(7, data, "t.yaml").info().blocks
    assert blocks[1].feedback == "wash is not in the action list! You should only choose actions in the list."
    assert blocks[3].feedback == "Unable to put, the fridge is closed, you should open it first"
    assert [block.inventory for block in blocks] == ["None", "None", "apple", "apple", "apple", "None", "None"]


@pytest.mark.parametrize("change, message", [
    ({"keypaths": [["[Go to, apple]"]]}, "keypaths[0]: a keypath must end with [End]"),
    ({"keypaths": [["[Fly, apple]", "[End]"]]}, "keypaths[0][0]: unknown action 'Fly'"),
    ({"keypaths": [["[Pick, unicorn]", "[End]"]]}, "'unicorn' is not in the alias table"),
    ({"objects": [{"canonical": "apple", "receptacle": "sofa"}]}, "objects[0].canonical: 'apple' is not a canonical"),
    ({"expert": [["[Pick, apple]", "Gripper3000", "x"], ["[End]", "None", "y"]]}, "unknown model 'Gripper3000'"),
    ({"expert": [["[Pick, apple]", "RT-1-X", "x", "Z9"], ["[End]", "None", "y"]]}, "unknown error type 'Z9'"),
    ({"expert": [["[Wash, apple]", "RT-1-X", "x"], ["[End]", "None", "y"]]}, "unknown action 'Wash'"),
    ({"clear": ["sofa"]}, "clear[0]: 'sofa' is not a canonical"),
    ({"seed": "seven"}, "seed: expected an integer"),
    ({"deep_drawers": "yes"}, "deep_drawers: expected true or false"),
])
def test_invalid_definitions_name_the_field(change, message):
    with pytest.raises(TaskDefinitionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_definition(7, {**VALID, **change}, "tasks.yaml")


def test_an_expert_that_does_not_finish_is_refused(tmp_path):
    incomplete = {**VALID, "expert": [["[Go to, apple]", "PixNav", "a"], ["[End]", "None", "e"]]}
    with pytest.raises(TaskDefinitionError, match="does not complete any keypath"):
        build_tasks({7: parse_definition(7, incomplete, "tasks.yaml")}, tmp_path)


def test_a_designed_failure_needs_a_replan(tmp_path):
    data = {**VALID, "expert": [*VALID["expert"][:4], ["[Pick, apple]", "RT-1-X", "x", "L2"], ["[End]", "None", "e"]]}
    with pytest.raises(TaskDefinitionError, match="a re-plan must follow it"):
        build_tasks({7: parse_definition(7, data, "tasks.yaml")}, tmp_path)


def test_variants_are_seeded_train_folders_and_never_test_tasks(tmp_path):
    train, test = parse_definition(7, VALID, "t.yaml"), parse_definition(95, VALID, "t.yaml")
    written = build_variants({7: train, 95: test}, tmp_path, 2, seed=3)
    assert [path.relative_to(tmp_path).as_posix() for path in written] == ["train/7_v1", "train/7_v2"]
    assert not (tmp_path / "test").exists() and not list((tmp_path / "train").glob("95*"))
    first, second = (json.loads((path / "scene.json").read_text()) for path in written)
    assert first["robot"] != second["robot"] or first["objects"] != second["objects"]
    again = build_variants({7: train}, tmp_path / "again", 1, seed=3)
    assert filecmp.cmp(again[0] / "scene.json", written[0] / "scene.json", shallow=False)
    with pytest.raises(TaskDefinitionError, match="test tasks never get variants"):
        build_variants({95: test}, tmp_path, 1, task_ids=[95])


def test_a_checked_variant_is_drawn_again_until_the_check_passes_or_left_out(tmp_path):
    train = parse_definition(7, VALID, "t.yaml")
    unchecked = build_variants({7: train}, tmp_path / "unchecked", 2, seed=3)
    seen: list[str] = []

    def rejects_first_draws(definition, scene):  # the first two draws of each variant have a problem
        seen.append(json.dumps(scene, sort_keys=True))
        return ["step 4 differs"] if len(seen) % 3 else []

    checked = build_variants({7: train}, tmp_path / "checked", 2, seed=3, check=rejects_first_draws)
    assert [path.name for path in checked] == ["7_v1", "7_v2"] and len(seen) == 6 and len(set(seen)) == 6
    assert json.loads((unchecked[0] / "scene.json").read_text()) == json.loads(seen[0])  # draw 1 is the unchecked one
    assert json.loads((checked[0] / "scene.json").read_text()) == json.loads(seen[2])
    never = build_variants({7: train}, tmp_path / "never", 2, seed=3, check=lambda *_: ["differs"], redraws=1)
    assert never == [] and not (tmp_path / "never" / "train").exists()
    with pytest.raises(TaskDefinitionError, match="0-9 redraws"):
        build_variants({7: train}, tmp_path, 1, check=lambda *_: [], redraws=10)


def test_tall_objects_go_into_the_deep_drawers_of_their_tasks(definitions):
    """Tasks 5, 24 and 28 put a can, a cracker box and a cleanser bottle into a drawer: their counters have pot
    drawers with room for them; every other task keeps the shallow drawers."""
    from habitat_bridge.catalog import OBJECT_KINDS
    from habitat_bridge.scene_spec import SceneSpec

    deep = {task_id for task_id, definition in definitions.items() if definition.deep_drawers}
    assert deep == {5, 24, 28}
    for task_id, tall in ((5, "002_master_chef_can"), (24, "003_cracker_box"), (28, "021_bleach_cleanser")):
        spec = SceneSpec.from_dict(_scene(task_id))
        counter = next(piece for piece in spec.furniture if piece.canonical == "kitchen_counter")
        assert counter.model == "deep_counter"
        drawers = [surface for surface in counter.geometry.surfaces if surface.part]
        assert drawers and all(surface.clearance >= OBJECT_KINDS[tall].size[2] + 0.03 for surface in drawers)
    shallow = SceneSpec.from_dict(_scene(91))
    counter = next(piece for piece in shallow.furniture if piece.canonical == "kitchen_counter")
    assert counter.model == "counter"
    assert {surface.clearance for surface in counter.geometry.surfaces if surface.part} == {0.13}


@pytest.mark.parametrize("place, message", [
    ({"canonical": "003_cracker_box", "receptacle": "kitchen_counter", "region": "drawer"},
     "a Fetch cannot do this task: 003_cracker_box is 0.2[0-9] m tall and kitchen_counter drawer has at most 0.13 m "
     "of room above its floor; deep_drawers: true gives the kitchen counter pot drawers"),
    ({"canonical": "013_apple", "receptacle": "fridge", "region": "shelf_7"},
     "a Fetch cannot do this task: 013_apple: objects never start in fridge shelf_7; start places are: .*fridge "
     "shelf_0, fridge shelf_1"),
])
def test_an_object_asked_for_where_it_cannot_start_is_refused(tmp_path, place, message):
    """Until now the builder put such an object somewhere else without a word (a cracker box asked for in a shallow
    drawer started on the counter top)."""
    definition = parse_definition(7, {**VALID, "objects": [place]}, "tasks.yaml")
    with pytest.raises(TaskDefinitionError, match=message):
        build_tasks({7: definition}, tmp_path)


def test_a_put_where_no_region_takes_the_object_is_refused(tmp_path, monkeypatch):
    """Every catalog object fits some region of every destination; a bleach bottle grown to half a metre across
    still fits on the brown table but on no region of the white shelf, and the builder says so."""
    from dataclasses import replace

    from habitat_bridge import catalog

    monkeypatch.setitem(catalog.OBJECT_KINDS, "021_bleach_cleanser", replace(
        catalog.OBJECT_KINDS["021_bleach_cleanser"], size=(0.5, 0.5, 0.1)))

    def task(place: str) -> dict:
        return {**VALID, "instruction": f"put the bleach on the {place}",
                "objects": [{"canonical": "021_bleach_cleanser", "receptacle": "frl_apartment_table_01"}],
                "keypaths": [["[Go to, bleach_cleanser]", "[Pick, bleach_cleanser]", f"[Go to, {place}]",
                              f"[Put, bleach_cleanser, {place}]", "[End]"]],
                "expert": [["[Go to, bleach_cleanser]", "PixNav", "a"], ["[Pick, bleach_cleanser]", "RT-1-X", "b"],
                           [f"[Go to, {place}]", "NoMaD", "c"], [f"[Put, bleach_cleanser, {place}]", "RT-1-X", "d"],
                           ["[End]", "None", "e"]]}

    with pytest.raises(TaskDefinitionError, match="a Fetch cannot do this task: 021_bleach_cleanser needs a 0.71 m "
                                                  "wide spot and white_shelf has none"):
        build_tasks({7: parse_definition(7, task("white_shelf"), "tasks.yaml")}, tmp_path)
    assert build_tasks({7: parse_definition(7, task("brown_table"), "tasks.yaml")}, tmp_path)
    monkeypatch.setitem(catalog.OBJECT_KINDS, "021_bleach_cleanser", replace(
        catalog.OBJECT_KINDS["021_bleach_cleanser"], size=(0.1, 0.07, 0.99)))  # under the table's 1 m of room
    with pytest.raises(TaskDefinitionError, match="021_bleach_cleanser is 0.99 m tall and brown_table has at most "
                                                  r"1.00 m of room above its floor \(a put needs 0.03 m more"):
        build_tasks({7: parse_definition(7, task("brown_table"), "tasks.yaml")}, tmp_path)


def test_a_put_into_the_drawers_is_judged_by_the_drawers_room_not_the_counter_top(tmp_path):
    def task(deep: bool) -> dict:
        return {**VALID, "instruction": "put the soup can in the drawer", "deep_drawers": deep,
                "objects": [{"canonical": "005_tomato_soup_can", "receptacle": "frl_apartment_table_01"}],
                "keypaths": [["[Go to, drawer]", "[Open, drawer]", "[Go to, tomato_soup_can]",
                              "[Pick, tomato_soup_can]", "[Go to, drawer]", "[Put, tomato_soup_can, drawer]", "[End]"]],
                "expert": [["[Go to, drawer]", "NoMaD", "a"], ["[Open, drawer]", "octo", "b"],
                           ["[Go to, tomato_soup_can]", "PixNav", "c"], ["[Pick, tomato_soup_can]", "RT-1-X", "d"],
                           ["[Go to, drawer]", "NoMaD", "e"], ["[Put, tomato_soup_can, drawer]", "RT-1-X", "f"],
                           ["[End]", "None", "g"]]}

    # 0.10 m of can and the put's 0.03 m above it do not go into a 0.13 m drawer (the top would take it).
    with pytest.raises(TaskDefinitionError, match="005_tomato_soup_can is 0.10 m tall and drawer has at most "
                                                  r"0.13 m of room above its floor \(a put needs 0.03 m more"):
        build_tasks({7: parse_definition(7, task(False), "tasks.yaml")}, tmp_path)
    assert build_tasks({7: parse_definition(7, task(True), "tasks.yaml")}, tmp_path)


def test_a_tall_object_starts_in_a_deep_drawer_when_the_task_asks_for_one():
    definition = parse_definition(7, {**VALID, "deep_drawers": True, "objects": [
        {"canonical": "003_cracker_box", "receptacle": "kitchen_counter", "region": "drawer"}]}, "tasks.yaml")
    box = scene_for(definition)["objects"][0]
    assert box["canonical"] == "003_cracker_box" and box["receptacle"].startswith("kitchen_drawer") and box["inside"]
