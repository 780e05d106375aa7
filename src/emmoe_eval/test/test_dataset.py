"""Official EMMOE-100 layout: info.txt, keypath.json, scene.json, images, sft/dpo files, task attributes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from emmoe_eval.dataset import (DatasetError, find_task, format_info, load_task_attributes, load_tasks, parse_info,
                                parse_keypaths, read_info, read_keypaths, resolve_data_root, subtask_images, write_task)
from emmoe_core.protocol import SubtaskText

# The release's scene.json example, kept with the habitat_bridge tests (from the EMMOE release, Apache-2.0).
OFFICIAL_SCENE = Path(__file__).resolve().parents[2] / "habitat_bridge" / "test" / "data" / "official_scene_example.json"
# The shape of a release scene.json (a Habitat RearrangeDataset file), cut down.
SCENE = {"config": None, "episodes": [{
    "episode_id": "0", "scene_id": "data/replica_cad/configs/scenes/v3_sc0_staging_00.scene_instance.json",
    "rigid_objs": [["013_apple.object_config.json", [[1.0, 0.0, 0.0, -1.2], [0.0, 1.0, 0.0, 0.9],
                                                      [0.0, 0.0, 1.0, 0.4], [0.0, 0.0, 0.0, 1.0]]]],
    "targets": {"013_apple_:0000": [[1.0, 0.0, 0.0, 1.5], [0.0, 1.0, 0.0, 0.9], [0.0, 0.0, 1.0, -2.0],
                                   [0.0, 0.0, 0.0, 1.0]]},
    "markers": [], "target_receptacles": [["fridge_:0000", None]], "goal_receptacles": [["counter_:0000", None]]}]}
INFO = """Task: find a cold apple and put it on the kitchen_counter

Subtask1: [Go to, fridge] (NoMaD)
Analysis: The apple is probably in the fridge.
Feedback: None
Inventory: None

Subtask2: [Pick, apple] (RT-1-X)
Analysis: Try to pick it.
It is behind the milk.
Feedback: Unable to pick, the target is far away
Inventory: None

Subtask3:[Put, apple, kitchen_counter](RT-1-X)
Analysis: put it down
Feedback: None
Inventory: None

Subtask4: [End]
"""


def test_info_txt_is_parsed_block_by_block():
    info = parse_info(INFO)
    assert info.task == "find a cold apple and put it on the kitchen_counter"
    assert info.expert_length == 4
    first, second, third, last = info.blocks
    assert (first.index, first.subtask, first.model, first.succeeded) == (1, SubtaskText("Go to", "fridge"), "NoMaD", True)
    assert second.analysis == "Try to pick it.\nIt is behind the milk."
    assert (second.feedback, second.succeeded) == ("Unable to pick, the target is far away", False)
    assert (third.subtask, third.model) == (SubtaskText("Put", "apple", "kitchen_counter"), "RT-1-X")
    assert (last.subtask, last.model) == (SubtaskText("End"), "")


def test_info_txt_round_trips():
    info = parse_info(INFO)
    assert parse_info(format_info(info)) == info
    assert format_info(info).startswith("Task: find a cold apple")


@pytest.mark.parametrize(("text", "message"), [
    ("Subtask1: [End]\n", r"info.txt:1: the first line must be 'Task: <instruction>'"),
    ("Task: x\n\nSubtask1 [Go to, fridge]\n", r"info.txt:3: expected a block head like 'Subtask3: \[Open, fridge\]"),
    ("Task: x\n\nSubtask1: [Go to, fridge]\nColour: red\n", r"info.txt:4: expected 'Analysis:', 'Feedback:'"),
    ("Task: x\n\nSubtask1: [a, b, c, d]\n", r"info.txt:3: a subtask has at most three parts"),
    ("Task: x\n", r"info.txt: no 'Subtask<n>:' blocks"),
])
def test_malformed_info_txt_names_file_and_line(text, message):
    with pytest.raises(DatasetError, match=message):
        parse_info(text, "info.txt")


@pytest.mark.parametrize(("data", "message"), [
    ({"a": 1}, "expected a non-empty JSON list of keypaths"),
    ([["[Go to, fridge]", "[End]"], "x"], "keypath 2 must be a non-empty list"),
    ([["[Go to, fridge]", 3, "[End]"]], "keypath 1, node 2: expected a string"),
    ([["[Go to, fridge]"]], r"keypath 1 must end with '\[End\]' \(it ends with '\[Go to, fridge\]'\)"),
])
def test_malformed_keypaths_name_the_keypath_and_node(data, message):
    with pytest.raises(DatasetError, match=message):
        parse_keypaths(data, "keypath.json")


def test_a_subtask_index_too_long_for_int_names_file_and_line():
    """Issue 40: 4,400 digits made int() raise a ValueError naming no file, which stopped all scoring."""
    with pytest.raises(DatasetError, match=r"^info.txt:3: expected a block head like 'Subtask3: \[Open, fridge\] "
                                           r"\(octo\)', found 'Subtask7777"):
        parse_info("Task: x\n\nSubtask" + "7" * 4_400 + ": [End]\n", "info.txt")


def test_keypaths_with_unknown_actions_are_rejected_with_their_line(tmp_path):
    """Issue 40: `[@ut, apple, sink]` was accepted silently (and changed scores)."""
    path = tmp_path / "keypath.json"
    path.write_text(json.dumps([["[Go to, sink]", "[End]"], ["[Go to, sink]", "[@ut, apple, sink]", "[End]"]],
                               indent=2), encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{path}:8: keypath 2, node 2: unknown action '@ut' \(expected one of "
                                           r"Go to, Pick, Put, Open, Close, End\)$"):
        read_keypaths(path)
    with pytest.raises(DatasetError, match=r"^keypath.json: keypath 1, node 1: unknown action 'go to'"):
        parse_keypaths([["[go to, sink]", "[End]"]], "keypath.json")


def test_a_fifo_in_place_of_a_task_file_is_refused_without_blocking(tmp_path):
    """Issue 40: open() on a FIFO waits for a writer forever, and `score` hung."""
    path = tmp_path / "keypath.json"
    os.mkfifo(path)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _raised(outcome, read_keypaths, path), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the reader before failing
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert not reader.is_alive()
    assert [str(error) for error in outcome] == [f"{path}: cannot read: not a regular file but a FIFO"]


def _raised(outcome: list[BaseException], function, *args) -> None:
    try:
        function(*args)
    except DatasetError as error:
        outcome.append(error)


def test_invalid_json_names_line_and_column(tmp_path):
    path = tmp_path / "keypath.json"
    path.write_text('[\n  ["[Go to, fridge]",\n  "[End]"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"{path}:4:1: invalid JSON"):
        read_keypaths(path)
    with pytest.raises(DatasetError, match=f"{tmp_path / 'missing.txt'}: file not found"):
        read_info(tmp_path / "missing.txt")


def test_tasks_are_written_and_read_in_the_official_layout(tmp_path, kit):
    root = tmp_path / "EMMOE-100"
    image = tmp_path / "view.png"
    image.write_bytes(b"\x89PNG fake")
    write_task(root / "data", "train", "3", kit.task_3_info, kit.task_3_keypaths, scene=SCENE,
               images={1: {"front": image, "left": image}, 2: {"back": image}})
    write_task(root / "data", "test", "91", kit.task_91_info, kit.task_91_keypaths)
    write_task(root / "data", "train", "10", kit.task_91_info, kit.task_91_keypaths)

    assert resolve_data_root(root) == root / "data" and resolve_data_root(root / "data") == root / "data"
    assert list(load_tasks(root)) == ["3", "10", "91"]            # numeric order across splits
    assert list(load_tasks(root, "test")) == ["91"]
    task = find_task(root, "3")
    assert task is not None and task.split == "train" and task.instruction == kit.task_3_info.task
    assert task.expert_length == 7 and task.keypaths == tuple(kit.task_3_keypaths)
    assert task.scene() == SCENE                                   # passed through untouched
    images = subtask_images(task.directory)
    assert {index: list(views) for index, views in images.items()} == {1: ["front", "left"], 2: ["back"]}
    assert find_task(root, "55") is None


def test_data_root_and_split_errors(tmp_path):
    with pytest.raises(DatasetError, match="not an EMMOE data folder"):
        load_tasks(tmp_path)
    (tmp_path / "train").mkdir()
    with pytest.raises(DatasetError, match="unknown split 'dev'"):
        load_tasks(tmp_path, "dev")


def test_a_task_with_a_broken_file_names_it(tmp_path, kit):
    directory = write_task(tmp_path, "train", "4", kit.task_3_info, kit.task_3_keypaths)
    (directory / "keypath.json").write_text('[["[Go to, fridge]"]]', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"train/4/keypath.json: keypath 1 must end with '\[End\]'"):
        load_tasks(tmp_path)


def test_shipped_task_attributes_are_the_release_lists():
    attributes = load_task_attributes()
    assert set(attributes.members) == {"typical", "long-horizon", "open-ended", "logical", "human style"}
    # the paper: 84 long-horizon tasks, 9 open-ended tasks (6 train, 3 test)
    assert len(attributes.members["long-horizon"]) == 84
    assert attributes.members["open-ended"] == frozenset({20, 22, 44, 69, 76, 77, 96, 97, 98})
    assert attributes.of("91") == ("typical", "human style")
    assert attributes.of("3") == ("long-horizon", "logical", "human style")
    assert attributes.of("free-instruction") == ()


def test_custom_task_attributes_are_validated(tmp_path):
    path = tmp_path / "attributes.json"
    path.write_text(json.dumps({"_note": "x", "typical": [1, "2"]}), encoding="utf-8")
    with pytest.raises(DatasetError, match="attribute 'typical' must be a list of integer task ids"):
        load_task_attributes(path)


def test_the_release_scene_example_passes_through_unchanged(tmp_path, kit):
    scene = json.loads(OFFICIAL_SCENE.read_text(encoding="utf-8"))
    write_task(tmp_path, "test", "91", kit.task_91_info, kit.task_91_keypaths, scene=scene)
    assert find_task(tmp_path, "91").scene() == scene
