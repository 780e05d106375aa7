"""emmoe_interfaces: every type imports, is documented field by field, and matches the documented commands."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
INTERFACE_DIR = ROOT / "src" / "emmoe_interfaces"
INTERFACE_FILES = sorted(
    path for folder in ("msg", "srv", "action") for path in (INTERFACE_DIR / folder).iterdir()
)
EMMOE_CODES = ("NONE", "F1", "F2", "L1", "L2", "L3", "L4", "D1", "D2", "E1", "E2", "E3")


def load_type(path: Path):
    return getattr(importlib.import_module(f"emmoe_interfaces.{path.parent.name}"), path.stem)


def test_every_interface_file_is_built():
    from homiebot.doctor import interface_type_names

    built = {name.split("/", 1)[1] for name in interface_type_names()}
    assert built == {f"{path.parent.name}/{path.stem}" for path in INTERFACE_FILES}


@pytest.mark.parametrize("path", INTERFACE_FILES, ids=lambda path: path.name)
def test_type_imports_and_instantiates(path):
    interface = load_type(path)
    if path.parent.name == "msg":
        interface()
    elif path.parent.name == "srv":
        interface.Request(), interface.Response()
    else:
        interface.Goal(), interface.Result(), interface.Feedback()


@pytest.mark.parametrize("path", INTERFACE_FILES, ids=lambda path: path.name)
def test_every_field_and_constant_is_documented(path):
    """Each field or constant sits in a block of adjacent lines that starts with a comment."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    for number, line in enumerate(lines):
        if not line or line.startswith("#") or line == "---":
            continue
        above = number - 1
        while above >= 0 and lines[above] and not lines[above].startswith("#") and lines[above] != "---":
            above -= 1
        assert above >= 0 and lines[above].startswith("#"), \
            f"{path.name}:{number + 1}: {line!r} has no comment above it"


def test_execute_subtask_error_codes():
    from emmoe_interfaces.action import ExecuteSubtask

    values = [getattr(ExecuteSubtask.Result, code) for code in EMMOE_CODES]
    assert values[0] == 0
    assert len(set(values)) == len(values)
    extra = [ExecuteSubtask.Result.CANCELED, ExecuteSubtask.Result.BUSY, ExecuteSubtask.Result.INTERNAL_ERROR]
    assert not set(extra) & set(values)


def test_every_result_carries_error_code_and_message():
    for path in INTERFACE_FILES:
        if path.parent.name == "msg":
            continue
        interface = load_type(path)
        result = interface.Response() if path.parent.name == "srv" else interface.Result()
        fields = result.get_fields_and_field_types()
        assert "error_code" in fields and "error_msg" in fields, path.name


def test_get_observation_has_four_image_views():
    from emmoe_interfaces.srv import GetObservation

    fields = GetObservation.Response.get_fields_and_field_types()
    for view in ("front", "left", "back", "right"):
        assert fields[view] == "sensor_msgs/Image"


def fill(message, values: dict) -> None:
    """Set nested fields from a YAML mapping the way `ros2 action send_goal` does (unknown names fail)."""
    for name, value in values.items():
        assert hasattr(message, name), f"{type(message).__name__} has no field {name!r}"
        if isinstance(value, dict):
            fill(getattr(message, name), value)
        else:
            setattr(message, name, value)


def documented_goal_examples() -> list[tuple[str, str, str]]:
    """(action name, type, YAML goal) of every `ros2 action send_goal` example in the interface files."""
    examples = []
    pattern = re.compile(r"ros2 action send_goal (\S+) emmoe_interfaces/action/(\w+)\s*#?\s*\"(.+?)\"", re.DOTALL)
    for path in INTERFACE_FILES + [ROOT / "README.md"]:
        if path.exists():
            text = path.read_text().replace("\n#", " ")
            examples += pattern.findall(text)
    return examples


def test_documented_send_goal_commands_fit_the_goal_types():
    from emmoe_interfaces import action

    examples = documented_goal_examples()
    assert {type_name for _, type_name, _ in examples} >= {"ExecuteSubtask", "RunTask"}
    for _, type_name, goal_yaml in examples:
        goal = getattr(action, type_name).Goal()
        fill(goal, yaml.safe_load(goal_yaml))
    goal = action.ExecuteSubtask.Goal()
    fill(goal, yaml.safe_load("{subtask: {action: 'Go to', target: fridge, model: NoMaD}}"))
    assert (goal.subtask.action, goal.subtask.target, goal.subtask.model) == ("Go to", "fridge", "NoMaD")
