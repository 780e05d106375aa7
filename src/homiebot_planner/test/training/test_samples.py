"""SFT human turns, answers and DPO rows, byte for byte against EMMOE.md section 6."""

from __future__ import annotations

from pathlib import Path

from homiebot_planner.training.samples import dpo_rows, full_answer, human_turn, human_turns, sft_samples
from homiebot_planner.training.trajectory import parse_trajectory

from .conftest import TASK_1, TASK_2, TASK_3

REQUEST = "Now, please output Analysis, Subtask and Model, according to the instruction above."


def test_first_human_turn_has_none_history_with_a_space(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_1, tmp_path / "1" / "info.txt", "1")

    assert human_turn(trajectory, 0) == (
        "Task: Put the apple from the kitchen_counter into the fridge\nInventory: None\n"
        f"Historical Execution: None\nFeedback: None\n{REQUEST}")


def test_later_human_turn_lists_every_earlier_step_and_the_previous_feedback_and_inventory(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_1, tmp_path / "1" / "info.txt", "1")

    # Step 4 (index 3) follows the failed Pick: its feedback is shown, the failure is in the history.
    assert human_turn(trajectory, 3) == (
        "Task: Put the apple from the kitchen_counter into the fridge\nInventory: None\n"
        "Historical Execution:(1)[Go to, fridge] (NoMaD) (success)\n(2)[Open, fridge] (octo) (success)\n"
        "(3)[Pick, apple] (RT-1-X) (fail)\n\nFeedback: Unable to pick, the target is far away\n" + REQUEST)
    # Step 6 (index 5): the inventory recorded after step 5 (the successful Pick).
    assert "\nInventory: apple\n" in human_turn(trajectory, 5)


def test_answers_have_analysis_subtask_and_model_lines(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_1, tmp_path / "1" / "info.txt", "1")

    assert full_answer(trajectory.steps[6]) == (
        "Analysis: I put the apple into the fridge.\nSubtask: [Put, apple, fridge]\nModel: RT-1-X")
    assert full_answer(trajectory.steps[7]) == (
        "Analysis: The apple is in the fridge, so the task is complete.\nSubtask: [End]\nModel: None")


def test_sft_samples_skip_failed_steps(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_2, tmp_path / "2" / "info.txt", "2")

    samples = sft_samples(trajectory)

    # Steps 2 and 3 failed: 7 - 2 = 5 samples.
    assert [sample.id for sample in samples] == ["2_1", "2_4", "2_5", "2_6", "2_7"]
    assert [path.name for path in samples[1].images] == [
        "subtask4_front.png", "subtask4_left.png", "subtask4_back.png", "subtask4_right.png"]
    assert sft_samples(trajectory, variant=2)[0].id == "2_r2_1"


def test_dpo_rows_of_task_1(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_1, tmp_path / "1" / "info.txt", "1")

    rows = dpo_rows(trajectory)

    # 6 successful non-End steps x 3 + 1 natural pair (failed step 3, re-plan step 4) = 19.
    assert len(rows) == 19
    natural = [row for row in rows if row.kind == "natural"]
    assert len(natural) == 1
    assert natural[0].prompt == human_turn(trajectory, 2)
    assert (natural[0].chosen, natural[0].rejected) == ("Subtask: [Go to, kitchen_counter]\nModel: NoMaD",
                                                        "Subtask: [Pick, apple]\nModel: RT-1-X")
    pick = {row.kind: row for row in rows if row.id.startswith("1_5_")}
    assert pick["model"].rejected == "Subtask: [Pick, apple]\nModel: octo"
    assert pick["order"].rejected == "Subtask: [Go to, fridge]\nModel: NoMaD"
    assert pick["action"].rejected == "Subtask: [Fetch, apple]\nModel: RT-1-X"
    assert all(row.chosen == "Subtask: [Pick, apple]\nModel: RT-1-X" for row in pick.values())
    put = {row.kind: row for row in rows if row.id.startswith("1_7_")}
    assert put["action"].rejected == "Subtask: [Place, apple, fridge]\nModel: RT-1-X"
    assert put["order"].rejected == "Subtask: [End]\nModel: None"
    go_to = {row.kind: row for row in rows if row.id.startswith("1_1_")}
    assert (go_to["model"].rejected, go_to["action"].rejected) == ("Subtask: [Go to, fridge]\nModel: PixNav",
                                                                   "Subtask: [Move, fridge]\nModel: NoMaD")
    open_ = {row.kind: row for row in rows if row.id.startswith("1_2_")}
    # The step after Open failed, so the order change uses the next *successful* step (4).
    assert open_["order"].rejected == "Subtask: [Go to, kitchen_counter]\nModel: NoMaD"
    assert open_["action"].rejected == "Subtask: [Pull, fridge]\nModel: octo"


def test_only_the_last_of_consecutive_failures_pairs_with_the_replan(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_2, tmp_path / "2" / "info.txt", "2")

    natural = [row for row in dpo_rows(trajectory) if row.kind == "natural"]

    # Step 2 is followed by another failure (no pair); step 3 by the successful step 4.
    assert [row.id for row in natural] == ["2_3_natural"]
    assert natural[0].rejected == "Subtask: [Pick, can]\nModel: RT-1-X"
    assert natural[0].chosen == "Subtask: [Pick, green_can]\nModel: RT-1-X"


def test_end_is_never_chosen(tmp_path: Path) -> None:
    trajectory = parse_trajectory(TASK_3, tmp_path / "3" / "info.txt", "3")

    rows = dpo_rows(trajectory)

    # Two successful non-End steps x 3 = 6; the failure before End gives no natural pair.
    assert len(rows) == 6 and not [row for row in rows if row.kind == "natural"]
    close = {row.kind: row for row in rows if row.id.startswith("3_2_")}
    assert close["model"].rejected == "Subtask: [Close, fridge]\nModel: RT-1-X"
    assert close["action"].rejected == "Subtask: [Push, fridge]\nModel: octo"
    assert close["order"].rejected == "Subtask: [End]\nModel: None"
    all_rows = [row for text, task in ((TASK_1, "1"), (TASK_2, "2"), (TASK_3, "3"))
                for row in dpo_rows(parse_trajectory(text, tmp_path / task / "info.txt", task))]
    assert not [row for row in all_rows if "[End]" in row.chosen]
    assert [row for row in all_rows if "[End]" in row.rejected]


def _visible_table(steps: int) -> dict[str, dict[str, list[str]]]:
    """A visible.json table: the apple shows up on the right from step 3 on."""
    table = {}
    for number in range(1, steps + 1):
        seen = {"front": ["frl_apartment_refrigerator", "013_apple_table"], "left": [], "back": ["frl_apartment_sofa"]}
        if number >= 3:
            seen["right"] = ["013_apple"]
        table[str(number)] = seen
    return table


def test_planner_style_turns_are_exactly_what_the_planner_builds_at_run_time(tmp_path: Path) -> None:
    import json

    from homiebot_planner.backends import MockBackend, MockConfig
    from homiebot_planner.planner import Observation, Planner

    folder = tmp_path / "1"
    folder.mkdir()
    (folder / "info.txt").write_text(TASK_1, encoding="utf-8")
    table = _visible_table(8)
    # From step 3 on the apple rests on the sofa; the furniture has no location.
    locations = {number: {view: ["on frl_apartment_sofa" if name == "013_apple" else "" for name in names]
                          for view, names in seen.items()} for number, seen in table.items()}
    (folder / "visible.json").write_text(json.dumps(table), encoding="utf-8")
    (folder / "locations.json").write_text(json.dumps(locations), encoding="utf-8")
    trajectory = parse_trajectory(TASK_1, folder / "info.txt", "1")
    turns = human_turns(trajectory, "planner")

    answers = tuple(full_answer(step) for step in trajectory.steps)
    planner = Planner(MockBackend(MockConfig(outputs=answers, observation_mode="text")), trajectory.task)
    for step, turn in zip(trajectory.steps, turns):
        observation = Observation(visible=table[str(step.number)], locations=locations[str(step.number)])
        assert planner.user_message(observation) == turn
        decision = planner.decide(observation)
        inventory = [] if step.inventory == "None" else step.inventory.split(" ")
        planner.record_result(decision, step.succeeded, step.feedback, inventory)
    assert turns[0].startswith("Visible objects:\nfront: fridge, 013_apple_table\nleft: None\nback: sofa\nright: None\n")
    assert "right: apple (on sofa)\n" in turns[2] and "(3) Pick, apple(fail)" in turns[3]


def test_planner_style_needs_the_collected_visible_objects(tmp_path: Path) -> None:
    import json

    import pytest

    from homiebot_planner.training.trajectory import TrajectoryError

    folder = tmp_path / "1"
    folder.mkdir()
    trajectory = parse_trajectory(TASK_1, folder / "info.txt", "1")
    with pytest.raises(TrajectoryError, match="no visible.json"):
        human_turns(trajectory, "planner")
    (folder / "visible.json").write_text(json.dumps(_visible_table(8)), encoding="utf-8")
    with pytest.raises(TrajectoryError, match="locations.json"):
        human_turns(trajectory, "planner")
    assert human_turns(trajectory, "release")[0] == human_turn(trajectory, 0)
