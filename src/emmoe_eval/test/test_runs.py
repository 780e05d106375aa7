"""trajectory.jsonl and conversation.json: writing, reading, damaged files, and the release's reconstruction."""

from __future__ import annotations

import json
import os

import pytest

from emmoe_eval.conversation import (LIVE_REQUEST_LINE, conversation_from_steps, format_history_entry,
                                     parse_round, read_conversation, read_conversation_run, release_reconstruction,
                                     steps_from_conversation, write_conversation)
from emmoe_eval.experiments import ExperimentError, load_experiment
from emmoe_core.protocol import SubtaskText
from emmoe_eval.runs import RunFormatError, Step, TrajectoryWriter, read_trajectory, write_trajectory


def test_step_json_round_trip_keeps_optional_and_unknown_keys():
    step = Step(3, "Put", "apple", "fridge", "RT-1-X", False, "Unable to put, the hand is empty", analysis="a",
                raw_output="Analysis: a\nSubtask: [Put, apple, fridge]\nModel: RT-1-X", inventory=(),
                error_type="L2", images=("subtask3_front.png",), extra={"planning_seconds": 1.5},
                visible={"front": ("frl_apartment_refrigerator", "013_apple"), "left": ()},
                locations={"front": ("", "in frl_apartment_refrigerator"), "left": ()})
    line = step.to_json()
    assert line["visible"] == {"front": ["frl_apartment_refrigerator", "013_apple"], "left": []}
    assert line["locations"] == {"front": ["", "in frl_apartment_refrigerator"], "left": []}
    assert line["place"] == "fridge" and line["planning_seconds"] == 1.5
    assert Step.from_json(json.loads(json.dumps(line)), "x:1") == step
    end = Step(4, "End", model="None")
    assert end.to_json() == {"step": 4, "action": "End", "target": None, "place": None, "model": "None",
                             "success": True, "feedback": "None"}


@pytest.mark.parametrize(("line", "message"), [
    ({"step": 1, "action": "Pick"}, "missing key"),
    ({"step": 0, "action": "Pick", "target": "a", "place": None, "model": "m", "success": True, "feedback": "None"},
     "'step' must be an integer >= 1"),
    ({"step": 1, "action": "Pick", "target": "a", "place": None, "model": "m", "success": "yes", "feedback": "None"},
     "'success' must be true or false"),
    ({"step": 1, "action": "Pick", "target": 3, "place": None, "model": "m", "success": True, "feedback": "None"},
     "'target' must be a string or null"),
    ({"step": 1, "action": "Pick", "target": "a", "place": None, "model": "m", "success": True, "feedback": "None",
      "inventory": "apple"}, "'inventory' must be a list of strings"),
    ({"step": 1, "action": "Pick", "target": "a", "place": None, "model": "m", "success": True, "feedback": "None",
      "visible": ["apple"]}, "'visible' must be an object"),
    ({"step": 1, "action": "Pick", "target": "a", "place": None, "model": "m", "success": True, "feedback": "None",
      "visible": {"front": "apple"}}, "'front' must be a list of strings"),
])
def test_invalid_lines_are_rejected_with_the_location(line, message):
    with pytest.raises(RunFormatError, match=f"run.jsonl:7: .*{message}"):
        Step.from_json(line, "run.jsonl:7")


def test_writer_flushes_every_step_before_closing(tmp_path, kit):
    path = tmp_path / "91" / "1" / "trajectory.jsonl"
    writer = TrajectoryWriter(path)
    writer.write(kit.ok(1, "[Go to, bowl]"))
    # A second reader sees the step while the writer is still open (what survives a crash).
    run = read_trajectory(path)
    assert (run.task_id, run.run_id, [step.action for step in run.steps]) == ("91", "1", ["Go to"])
    writer.write(kit.end(2))
    writer.close()
    writer.close()
    assert len(read_trajectory(path).steps) == 2
    with pytest.raises(ValueError, match="closed"):
        writer.write(kit.end(3))


def test_truncated_and_corrupt_files_become_failed_runs_with_a_warning(tmp_path, kit):
    path = tmp_path / "t" / "1" / "trajectory.jsonl"
    path.parent.mkdir(parents=True)
    good = json.dumps(kit.ok(1, "[Go to, bowl]").to_json())
    path.write_text(good + "\n" + good[:20], encoding="utf-8")
    run = read_trajectory(path)
    assert run.corrupt and len(run.steps) == 1
    assert run.problems == [f"{path}:2: truncated or corrupt line (Expecting ':' delimiter); "
                            "the run is scored as failed"]
    path.write_bytes(b"\xff\xfe not utf-8")
    assert read_trajectory(path).corrupt
    path.write_text(good + "\n" + json.dumps({"step": 2}) + "\n", encoding="utf-8")
    damaged = read_trajectory(path)
    assert damaged.corrupt and "missing key(s) action" in damaged.problems[0]
    path.write_text("", encoding="utf-8")
    empty = read_trajectory(path)
    assert not empty.corrupt and empty.steps == [] and empty.problems == [f"{path}: no steps"]


def test_history_entries_follow_the_live_loop_format():
    assert format_history_entry(3, SubtaskText("Pick", "apple"), True) == "(3) Pick, apple(success) "
    assert format_history_entry(4, SubtaskText("Put", "apple", "fridge"), False) == "(4) Put, apple, fridge(fail) "


def test_conversation_rounds_are_rebuilt_from_steps(kit):
    steps = kit.runs[("3", "2")][:3]
    entries = conversation_from_steps("find a cold apple", steps)
    assert len(entries) == 3
    assert entries[0] == ("USER:\nTask: find a cold apple\nInventory: None\nHistorical Execution: None\nFeedback: None\n"
                          f"{LIVE_REQUEST_LINE}ASSISTANT:\nAnalysis: \nSubtask: [Go to, fridge]\nModel: NoMaD\n")
    assert ("Historical Execution: (1) Go to, fridge(success) (2) Pick, apple(fail) \n"
            "Feedback: Unable to pick, the subtask is too difficult to perform\n") in entries[2]


def test_conversation_json_reconstructs_the_run(tmp_path, kit):
    steps = kit.runs[("3", "1")]
    path = tmp_path / "3" / "1" / "conversation.json"
    write_conversation(path, conversation_from_steps("find a cold apple", steps))
    run = read_conversation_run(path)
    assert (run.task_id, run.run_id, run.corrupt, run.problems) == ("3", "1", False, [])
    # Every step comes back: subtasks and signals from the last history, feedback from the next round.
    assert [(step.subtask, step.success, step.feedback) for step in run.steps] == \
        [(step.subtask, step.success, step.feedback) for step in steps]
    assert [step.model for step in run.steps] == [step.model for step in steps]


def test_conversation_without_end_keeps_the_last_subtask_with_unknown_outcome(tmp_path, kit):
    steps = kit.runs[("3", "2")]                     # six steps, the last a successful Go to, no End
    path = tmp_path / "conversation.json"
    write_conversation(path, conversation_from_steps("find a cold apple", steps))
    run = read_conversation_run(path, "3", "2")
    assert len(run.steps) == 6
    assert run.steps[-1].subtask == SubtaskText("Go to", "kitchen_counter")
    assert (run.steps[-1].success, run.steps[-1].feedback) == (False, None)    # not recorded in conversation.json
    release = release_reconstruction(run.steps)
    assert [step.step for step in release] == [1, 2, 3, 4, 5]   # the release loses the last executed subtask


def test_release_reconstruction_appends_end_only_when_the_last_output_says_end(kit):
    said_end = [kit.ok(1, "[Go to, fridge]"), Step(2, "End", raw_output="Analysis: done\nSubtask: [End]\nModel: None")]
    assert [step.action for step in release_reconstruction(said_end)] == ["Go to", "End"]
    garbled = [kit.ok(1, "[Go to, fridge]"), Step(2, "End", raw_output="I am not sure what to do")]
    assert [step.action for step in release_reconstruction(garbled)] == ["Go to"]
    assert release_reconstruction([]) == []


def test_unparseable_last_output_is_never_an_end():
    # Issue 11: a give-up is not the agent's End. The release logs only parsed rounds, so an unparseable last output
    # (not even the release's patterns match) is left out with a warning instead of becoming End.
    rounds = ["USER:\nTask: t\nInventory: None\nHistorical Execution: None\nFeedback: None\nNow...ASSISTANT:\n"
              "Analysis: a\nSubtask: [Go to, sofa]\nModel: NoMaD\n",
              "USER:\nTask: t\nInventory: None\nHistorical Execution: (1) Go to, sofa(success) \nFeedback: None\n"
              "Now...ASSISTANT:\nsorry, no idea\n"]
    steps, problems = steps_from_conversation([parse_round(text, "r") for text in rounds], "c.json")
    assert [(step.action, step.success) for step in steps] == [("Go to", True)]
    assert problems == ["c.json: the last output does not parse (the release logs only parsed outputs); its subtask "
                        "is unknown and left out"]


def test_malformed_conversation_files_are_corrupt_runs(tmp_path):
    path = tmp_path / "conversation.json"
    path.write_text('["no labels here"]', encoding="utf-8")
    run = read_conversation_run(path, "1", "1")
    assert run.corrupt and "round 1: expected 'USER:" in run.problems[0]
    path.write_text("[", encoding="utf-8")
    assert read_conversation_run(path, "1", "1").corrupt
    path.write_text(json.dumps(["USER:\nno fields ASSISTANT:\nx\n"]), encoding="utf-8")
    assert len(read_conversation(path)) == 1
    missing = read_conversation_run(path, "1", "1")
    assert missing.corrupt and "no 'Historical Execution:'" in missing.problems[0]


def test_experiment_folders_prefer_trajectories(tmp_path, kit):
    handmade = kit.write_handmade(tmp_path)
    write_conversation(handmade.runs_dir / "3" / "1" / "conversation.json",
                       conversation_from_steps("x", kit.runs[("3", "1")][:2]))
    (handmade.runs_dir / "3" / "9").mkdir()
    experiment = load_experiment(handmade.runs_dir)
    assert [(run.task_id, run.run_id) for run in experiment.runs] == \
        [("3", "1"), ("3", "2"), ("3", "3"), ("91", "1"), ("91", "2"), ("91", "3")]
    assert len(experiment.runs[0].steps) == 8                     # from trajectory.jsonl, not the 2-round conversation
    assert experiment.problems == [f"{handmade.runs_dir / '3' / '9'}: no trajectory.jsonl or conversation.json; "
                                   "not a run, skipped"]
    only_conversations = load_experiment(handmade.runs_dir, source="conversation")
    assert [(run.task_id, run.run_id, len(run.steps)) for run in only_conversations.runs] == [("3", "1", 2)]
    with pytest.raises(ExperimentError, match="no such experiment folder"):
        load_experiment(tmp_path / "nope")


def test_a_trajectory_that_lost_its_end_step_is_corrupt_not_a_zero_step_failure(tmp_path, kit):
    """run.json says the agent ended the run with End, yet trajectory.jsonl is empty (or cut before End): the file
    lost its content, so the run is corrupt, with a warning (issue 40)."""
    path = tmp_path / "91" / "1" / "trajectory.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("", encoding="utf-8")
    (path.parent / "run.json").write_text(json.dumps({"end_reason": "end"}), encoding="utf-8")
    empty = read_trajectory(path)
    assert empty.corrupt and empty.problems == [f"{path}: the run ended with End, yet the file holds no End step "
                                                "(emptied or cut); the run is scored as failed"]
    path.write_text(json.dumps(kit.ok(1, "[Go to, bowl]").to_json()) + "\n", encoding="utf-8")
    assert read_trajectory(path).corrupt
    (path.parent / "run.json").write_text(json.dumps({"end_reason": "gave_up"}), encoding="utf-8")
    assert not read_trajectory(path).corrupt                    # a give-up has no End step


def test_a_trajectory_missing_its_first_steps_is_named(tmp_path, kit):
    path = tmp_path / "91" / "1" / "trajectory.jsonl"
    write_trajectory(path, [kit.ok(2, "[Go to, bowl]"), kit.end(3)])
    assert read_trajectory(path).problems == [f"{path}: the first step is step 2; the steps before it are missing"]


@pytest.mark.parametrize("kind", ["directory", "symlink loop", "FIFO", "dangling symlink"])
def test_an_unusable_trajectory_is_a_corrupt_run_not_replaced_by_the_conversation(tmp_path, kit, kind):
    """Issue 40: trajectory.jsonl there but unusable was silently skipped for conversation.json (a FIFO would hang)."""
    run_dir = tmp_path / "exp" / "91" / "1"
    write_conversation(run_dir / "conversation.json", conversation_from_steps("x", kit.runs[("91", "1")]))
    path = run_dir / "trajectory.jsonl"
    {"directory": path.mkdir, "symlink loop": lambda: os.symlink(path.name, path), "FIFO": lambda: os.mkfifo(path),
     "dangling symlink": lambda: os.symlink("gone", path)}[kind]()
    (run,) = load_experiment(tmp_path / "exp").runs
    assert (run.source, run.corrupt, run.steps) == (path, True, [])
    assert run.problems[0].startswith(f"{path}: cannot read (") and run.problems[0].endswith("scored as failed")
