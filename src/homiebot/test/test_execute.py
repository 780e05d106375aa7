"""`homiebot execute` (homiebot.commands.execute) end to end: stack, executor and monitor as processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emmoe_core.protocol import SubtaskText, default_model

ROOT = Path(__file__).resolve().parents[3]


def test_default_models_follow_the_system_prompt():
    assert default_model(SubtaskText("Go to", "apple")) == "PixNav"
    assert default_model(SubtaskText("Go to", "fridge")) == "NoMaD"
    assert default_model(SubtaskText("Pick", "apple")) == "RT-1-X"
    assert default_model(SubtaskText("Close", "drawer")) == "octo"
    assert default_model(SubtaskText("End", "")) == "None"


@pytest.mark.ros
def test_execute_prints_one_json_object_per_subtask(ros_domain_id, tmp_path):
    pytest.importorskip("mujoco")
    from habitat_bridge.apartment import compact_room
    from habitat_bridge.scene_spec import save_scene_spec

    scene = save_scene_spec(compact_room(0), tmp_path / "kitchen.json")
    completed = subprocess.run(
        [sys.executable, "-m", "homiebot.commands.execute", "--scene", str(scene), "[Go to, cracker_box]",
         "[Pick, cracker_box]", "[Open, fridge]", "[Put, cracker_box, moon]", "[End]"],
        capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in completed.stdout.splitlines()]
    assert lines == [
        {"subtask": "[Go to, cracker_box]", "success": True, "error_type": None, "feedback": "None"},
        {"subtask": "[Pick, cracker_box]", "success": True, "error_type": None, "feedback": "None"},
        {"subtask": "[Open, fridge]", "success": False, "error_type": "L1",
         "feedback": "Unable to open, the hand is full"},
        {"subtask": "[Put, cracker_box, moon]", "success": False, "error_type": "F2",
         "feedback": "moon does not exist! Please choose another object"},
        {"subtask": "[End]", "success": True, "error_type": None, "feedback": "None"},
    ], completed.stderr
    assert completed.returncode == 1


def test_bad_subtask_is_a_usage_error():
    completed = subprocess.run([sys.executable, "-m", "homiebot.commands.execute", "[Put, a, b, c]"],
                               capture_output=True, text=True, timeout=60,
                               env={**__import__("os").environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert completed.returncode == 2
    assert completed.stderr.startswith("homiebot execute: error: a subtask has at most three parts")
    assert "Traceback" not in completed.stderr


def test_a_task_runs_in_its_benchmark_scene(tmp_path):
    from homiebot.commands.execute import benchmark_scene

    assert benchmark_scene(ROOT / "data", 91) == ROOT / "data" / "test" / "91" / "scene.json"
    assert benchmark_scene(ROOT / "data", 12) == ROOT / "data" / "train" / "12" / "scene.json"
    assert benchmark_scene(tmp_path / "absent", 91) is None  # no data folder: the task's generated apartment
