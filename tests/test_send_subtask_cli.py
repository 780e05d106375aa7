"""`homiebot send-subtask` against an ExecuteSubtask server in another process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

SERVER = Path(__file__).parent / "processes" / "scripted_subtask_server.py"

pytestmark = pytest.mark.ros


def send(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["homiebot", "send-subtask", *args], capture_output=True, text=True, timeout=120)


def test_feedback_and_result_are_printed(ros_process):
    ros_process(str(SERVER), ready="ready")
    result = send("Pick, apple", "--model", "RT-1-X")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["feedback: phase=checking attempt=0 apple", "feedback: phase=executing attempt=1 apple"]
    assert "success: True" in lines and "feedback: None" in lines and "inventory: apple" in lines


def test_failed_subtask_exits_1_with_the_emmoe_feedback(ros_process):
    ros_process(str(SERVER), ready="ready")
    result = send("[Fetch, apple]", "--model", "RT-1-X", "--inventory", "bowl", "--json")
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    assert summary["error_code"] == "F1" and summary["inventory"] == ["bowl"]
    assert summary["feedback"] == "Fetch is not in the action list! You should only choose actions in the list."


def test_no_server_is_a_one_line_error(ros_domain_id):
    result = send("Go to, fridge", "--server-wait", "1")
    assert result.returncode == 2
    assert result.stderr.startswith("homiebot send-subtask: error: no action server at /subtask")
    assert "Traceback" not in result.stderr


def test_malformed_subtask_is_a_usage_error():
    result = send("[Put, a, b, c]")
    assert result.returncode == 2 and "at most three parts" in result.stderr
