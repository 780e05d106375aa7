"""info.txt reading: fields, success, validation errors that name file, block and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from homiebot_planner.training.trajectory import TrajectoryError, find_trajectories, parse_trajectory, read_trajectory

from .conftest import TASK_1, TASK_3


def test_reads_every_field_of_a_block(emmoe_data: Path) -> None:
    trajectory = read_trajectory(emmoe_data / "train" / "1" / "info.txt")

    assert trajectory.task_id == "1"
    assert trajectory.task == "Put the apple from the kitchen_counter into the fridge"
    assert [step.number for step in trajectory.steps] == [1, 2, 3, 4, 5, 6, 7, 8]
    put = trajectory.steps[6]
    assert (put.decision, put.subtask, put.action, put.target, put.place, put.model) == (
        "[Put, apple, fridge] (RT-1-X)", "[Put, apple, fridge]", "Put", "apple", "fridge", "RT-1-X")
    assert put.analysis == "I put the apple into the fridge."
    assert (put.feedback, put.inventory, put.succeeded, put.line) == ("None", "None", True, 33)
    failed = trajectory.steps[2]
    assert failed.feedback == "Unable to pick, the target is far away" and not failed.succeeded
    end = trajectory.steps[-1]
    assert end.is_end and end.model is None and end.target == ""
    assert [path.name for path in trajectory.images(put)] == [
        "subtask7_front.png", "subtask7_left.png", "subtask7_back.png", "subtask7_right.png"]


def test_end_block_may_omit_feedback_and_inventory(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_3, tmp_path / "info.txt", "3")

    assert trajectory.steps[-1].succeeded
    assert trajectory.steps[-1].analysis == "The fridge is closed, which was the task, so I stop here."


def test_continuation_lines_join_the_previous_field_and_crlf_is_accepted(tmp_path: Path) -> None:
    text = ("Task: Open the fridge\r\n\r\nSubtask1: [Open, fridge] (octo)\r\nAnalysis: first line\r\nsecond line\r\n"
            "Feedback: None\r\nInventory: None\r\n\r\nSubtask2: [End]\r\nAnalysis: done\r\n")

    trajectory = parse_trajectory(text, tmp_path / "info.txt", "9")

    assert trajectory.steps[0].analysis == "first line\nsecond line"


def test_a_recorded_format_error_may_use_an_unknown_action(tmp_path: Path) -> None:
    text = ("Task: Pick the apple\n\nSubtask1: [Grab, apple] (RT-1-X)\nAnalysis: grab it\n"
            "Feedback: Grab is not in the action list! You should only choose actions in the list.\nInventory: None\n\n"
            "Subtask2: [Pick, apple] (RT-1-X)\nAnalysis: pick it\nFeedback: None\nInventory: apple\n\n"
            "Subtask3: [End]\nAnalysis: done\n")

    trajectory = parse_trajectory(text, tmp_path / "info.txt", "9")

    assert trajectory.steps[0].action == "Grab" and not trajectory.steps[0].succeeded


BROKEN_CASES = [
    ("the file starts without a task", "Subtask1: [End]\nAnalysis: x\n", "line 1: expected 'Task: <instruction>'"),
    ("blocks are numbered wrongly", TASK_1.replace("Subtask4:", "Subtask5:"),
     "block 4 (line 18): expected Subtask4, found Subtask5"),
    ("an action is unknown", TASK_1.replace("[Open, fridge] (octo)", "[Unlock, fridge] (octo)"),
     "block 2 (line 8): unknown action 'Unlock'"),
    ("a model is unknown", TASK_1.replace("[Open, fridge] (octo)", "[Open, fridge] (Octo-X)"),
     "block 2 (line 8): unknown model 'Octo-X'"),
    ("a model is missing", TASK_1.replace("[Open, fridge] (octo)", "[Open, fridge]"),
     "block 2 (line 8): missing the model in parentheses"),
    ("Put lacks its place", TASK_1.replace("[Put, apple, fridge]", "[Put, apple]"),
     "block 7 (line 33): Put takes an object and a place"),
    ("a line is unlabelled", TASK_1.replace("Feedback: None\nInventory: apple\n", "Feedback: None\nInventory: apple\n"
                                            "\nOops\n", 1), "block 6 (line 28): expected 'Subtask6:"),
    ("a field is missing", TASK_1.replace("Analysis: I put the apple into the fridge.\n", ""),
     "block 7 (line 33): missing the 'Analysis:' line"),
    ("End is missing", TASK_1.split("\nSubtask8:")[0], "block 7 (line 33): the trajectory must end with a "
                                                       "'Subtask8: [End]' block"),
    ("End fails", TASK_1.replace("is complete.\nFeedback: None", "is complete.\nFeedback: Unable to end, time out"),
     "block 8 (line 38): the End block must have 'Feedback: None'"),
    ("a field appears twice", TASK_1.replace("Inventory: apple\n\nSubtask6", "Inventory: apple\nInventory: x\n\n"
                                             "Subtask6"), "block 5 (line 23): the 'Inventory:' line appears twice"),
]


@pytest.mark.parametrize(("case", "text", "message"), BROKEN_CASES, ids=[case[0] for case in BROKEN_CASES])
def test_malformed_trajectories_name_file_block_and_line(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = tmp_path / "7" / "info.txt"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")

    with pytest.raises(TrajectoryError) as raised:
        read_trajectory(path)

    assert str(raised.value).startswith(f"{path}: ")
    assert message in str(raised.value)


def test_find_trajectories_orders_numeric_ids_numerically(tmp_path: Path) -> None:
    for task_id in ("10", "9", "alpha", "100"):
        (tmp_path / "train" / task_id).mkdir(parents=True)
        (tmp_path / "train" / task_id / "info.txt").write_text("Task: x\n", encoding="utf-8")

    found = find_trajectories(tmp_path, "train")

    assert [path.parent.name for path in found] == ["9", "10", "100", "alpha"]
    with pytest.raises(TrajectoryError, match="no such folder"):
        find_trajectories(tmp_path, "test")
