"""Planner memory: inventory rules, history, the conversation window, conversation.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from emmoe_core.protocol import SubtaskText, feedback_for

from homiebot_planner.memory import PlannerMemory, write_conversation_json


def test_inventory_follows_the_protocol_rules() -> None:
    memory = PlannerMemory("t")
    memory.record_execution(1, SubtaskText("Pick", "apple"), False, feedback_for("E1", "Pick"))
    assert memory.inventory == []
    memory.record_execution(2, SubtaskText("Pick", "apple"), True, "None")
    assert memory.inventory == ["apple"]
    memory.record_execution(3, SubtaskText("Put", "apple", "fridge"), False, feedback_for("L3", "Put", "fridge"))
    assert memory.inventory == ["apple"]  # a failed Put keeps the object unless it is missing
    memory.record_execution(4, SubtaskText("Put", "apple", "fridge"), False, feedback_for("E2", "Put"))
    assert memory.inventory == []  # "the object is missing": popped
    memory.record_execution(5, SubtaskText("Pick", "bowl"), True, None)
    memory.record_execution(6, SubtaskText("Put", "Bowl", "sofa"), True, "None")
    assert memory.inventory == []


def test_history_and_feedback() -> None:
    memory = PlannerMemory("t")
    assert memory.history is None and memory.feedback is None
    memory.record_execution(1, SubtaskText("Go to", "fridge"), True, "None")
    memory.record_execution(2, SubtaskText("Open", "sofa"), False, "Can not open sofa! Please choose another object")
    assert memory.history == "(1) Go to, fridge(success) (2) Open, sofa(fail) "
    assert memory.feedback == "Can not open sofa! Please choose another object"
    memory.record_execution(3, SubtaskText("Open", "fridge"), True, "None")
    assert memory.feedback is None
    assert [step.success for step in memory.executed] == [True, False, True]


def test_conversation_window() -> None:
    memory = PlannerMemory("t", window=3)
    for number in range(1, 6):
        assert memory.next_round == number
        memory.add_round(f"user {number}", f"answer {number}")
    assert [item.number for item in memory.visible_rounds()] == [3, 4, 5]
    assert len(memory.rounds) == 5
    assert PlannerMemory("t", window=0).visible_rounds() == []
    with pytest.raises(ValueError, match="window"):
        PlannerMemory("t", window=-1)


def test_conversation_json_format(tmp_path: Path) -> None:
    memory = PlannerMemory("t")
    memory.add_round("Task: t\nInventory: None\n...", "Analysis: a\nSubtask: [End]\nModel: None")
    path = write_conversation_json(tmp_path / "exp" / "91" / "1" / "conversation.json", memory.rounds)
    assert json.loads(path.read_text(encoding="utf-8")) == [
        "USER:\nTask: t\nInventory: None\n...ASSISTANT:\nAnalysis: a\nSubtask: [End]\nModel: None\n"]
    assert [item.name for item in path.parent.iterdir()] == ["conversation.json"]


def test_the_executors_error_type_is_trusted_and_the_feedback_read_only_without_one():
    memory = PlannerMemory("task")
    # a feedback text that reads as E1, recorded by the executor as D1 (the type is the executor's, not the text's)
    memory.record_execution(1, SubtaskText("Pick", "apple"), False, feedback_for("E1", "Pick"), [], "D1")
    memory.record_execution(2, SubtaskText("Pick", "apple"), False, feedback_for("E1", "Pick"))
    memory.record_execution(3, SubtaskText("Pick", "apple"), True, "None", ["apple"], None)
    assert [step.error for step in memory.executed] == ["D1", "E1", None]
