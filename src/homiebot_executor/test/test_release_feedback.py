"""In the default mode every feedback string the executor produces is the release's, byte for byte.

The expected strings were written by hand from the release's executor (hab-mobile-manipulation/mobile_manipulation/
infer.py of silence143/EMMOE): it splits the subtask text on commas, takes `action = parts[0].strip().lower()` and
`item = parts[-1].strip().lower()`, checks only the action in F1 (the model is parsed and ignored), and builds
`f'{action} is not in the action list! ...'`, `f'{input_item} does not exist! ...'`, `f'Unable to {action}, the
hand is full'`, ... from those lower-cased values; after a Put time-out it sends `Unable to {action}, and the object
is missing` when nothing is grasped any more, else `Unable to {action}, time out` (no retry); other skills get
`Unable to {action}, the subtask is too difficult to perform` after the third time-out.
"""

from __future__ import annotations

import pytest
from emmoe_core.protocol import ERROR_TYPES, FEEDBACK_STYLES, SubtaskText, classify_feedback, feedback_for, parse_subtask

from homiebot_executor.checks import CheckConfig, check_subtask
from homiebot_executor.execution import ExecutionConfig, run_attempts
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus

# (subtask text as the planner wrote it, model, scene settings, code, what the release's executor sends)
CHECK_TABLE = [
    ("Fetch, Red_Apple", "RT-1-X", {}, "F1",
     "fetch is not in the action list! You should only choose actions in the list."),
    ("Grab, apple", "rt-1-x", {}, "F1", "grab is not in the action list! You should only choose actions in the list."),
    ("Pick, Spaceship", "RT-1-X", {}, "F2", "spaceship does not exist! Please choose another object"),
    ("Put, apple, Moon", "RT-1-X", {"held": "apple_0"}, "F2", "moon does not exist! Please choose another object"),
    ("Pick", "RT-1-X", {}, "F2", "pick does not exist! Please choose another object"),
    ("PICK, Bowl", "RT-1-X", {"held": "apple_0"}, "L1", "Unable to pick, the hand is full"),
    ("Open, Fridge", "octo", {"held": "apple_0"}, "L1", "Unable to open, the hand is full"),
    ("Close, Fridge", "Octo", {"held": "apple_0", "fridge_open": True}, "L1", "Unable to close, the hand is full"),
    ("Put, Apple, Brown_Table", "RT-1-X", {}, "L2", "Unable to put, the hand is empty"),
    ("Put, Apple, Fridge", "RT-1-X", {"held": "apple_0"}, "L3",
     "Unable to put, the fridge is closed, you should open it first"),
    ("Put, apple, Kitchen_Drawer", "RT-1-X", {"held": "apple_0", "drawer_positions": (0.1, 0.2)}, "L3",
     "Unable to put, the kitchen_drawer is closed, you should open it first"),
    ("Open, Brown_Table", "octo", {}, "L4", "Can not open brown_table! Please choose another object"),
    ("Close, APPLE", "octo", {}, "L4", "Can not close apple! Please choose another object"),
    ("Pick, Sofa", "RT-1-X", {}, "D1", "Unable to pick, the target is far away"),
    ("Put, apple, Sofa", "RT-1-X", {"held": "apple_0"}, "D1", "Unable to put, the target is far away"),
    ("Pick, BOWL", "RT-1-X", {}, "D2", "Unable to pick, the target is too close"),
]

FAIL = SkillOutcome(SkillStatus.TIMEOUT, "budget used", sim_steps=200)
HELD_FAIL = SkillOutcome(SkillStatus.TIMEOUT, "budget used", held_object="apple_0", sim_steps=200)
DROPPED_FAIL = SkillOutcome(SkillStatus.TIMEOUT, "budget used", held_object="", sim_steps=200)
# (subtask text, skill goal, attempt outcomes, execution settings, code, what the release's executor sends)
EXECUTION_TABLE = [
    ("Pick, Apple", SkillGoal("pick", "apple_0"), [FAIL] * 3, {}, "E1",
     "Unable to pick, the subtask is too difficult to perform"),
    ("Go to, Sofa", SkillGoal("navigate", "sofa_0"), [FAIL] * 3, {}, "E1",
     "Unable to go to, the subtask is too difficult to perform"),
    ("OPEN, fridge", SkillGoal("open", "fridge_0_door"), [FAIL] * 3, {}, "E1",
     "Unable to open, the subtask is too difficult to perform"),
    ("Put, Apple, Brown_Table", SkillGoal("put", "apple_0", place="brown_table_0"), [DROPPED_FAIL], {}, "E2",
     "Unable to put, and the object is missing"),
    ("Put, Apple, Brown_Table", SkillGoal("put", "apple_0", place="brown_table_0"), [HELD_FAIL],
     {"put_retries": "release"}, "E3", "Unable to put, time out"),
]


def _request(text: str, model: str) -> SubtaskText:
    parts = parse_subtask(text)
    return SubtaskText(parts.action, parts.target, parts.place, model)


@pytest.mark.parametrize(("text", "model", "scene", "code", "expected"), CHECK_TABLE)
def test_check_feedback_is_the_releases(make_kitchen, text, model, scene, code, expected):
    outcome = check_subtask(_request(text, model), make_kitchen(**scene), config=CheckConfig())
    assert (outcome.error_type, outcome.feedback) == (code, expected)


@pytest.mark.parametrize(("text", "goal", "outcomes", "settings", "code", "expected"), EXECUTION_TABLE)
def test_execution_feedback_is_the_releases(text, goal, outcomes, settings, code, expected):
    scripted = list(outcomes)
    result = run_attempts(_request(text, "RT-1-X").action, goal, lambda _goal, _attempt: scripted.pop(0),
                          read_hand=lambda: "", config=ExecutionConfig(**settings))
    assert (result.error_type, result.feedback) == (code, expected)


def test_every_error_type_is_covered_and_classified():
    covered = {row[3] for row in CHECK_TABLE} | {row[4] for row in EXECUTION_TABLE}
    assert covered == set(ERROR_TYPES)
    for row in CHECK_TABLE:
        assert classify_feedback(row[4]) == row[3]


def test_verbatim_style_keeps_the_names_as_written(make_kitchen):
    assert FEEDBACK_STYLES == ("release", "verbatim")
    verbatim = CheckConfig(feedback_style="verbatim")
    outcome = check_subtask(_request("Open, Brown_Table", "octo"), make_kitchen(), config=verbatim)
    assert outcome.feedback == "Can not open Brown_Table! Please choose another object"
    outcome = check_subtask(_request("Fetch, apple", "RT-1-X"), make_kitchen(), config=verbatim)
    assert outcome.feedback == "Fetch is not in the action list! You should only choose actions in the list."
    assert feedback_for("L3", " Put ", " Fridge ") == "Unable to put, the fridge is closed, you should open it first"
    with pytest.raises(ValueError, match="unknown feedback style 'upper'"):
        feedback_for("F2", "Pick", "apple", style="upper")


def test_a_huge_target_is_echoed_cut_in_feedback_and_logs(make_kitchen):
    from emmoe_core.protocol import MAX_ECHOED

    from homiebot_executor.monitor import subtask_text

    huge = "x" * 120_000
    outcome = check_subtask(SubtaskText("Pick", huge, "", "RT-1-X"), make_kitchen(), config=CheckConfig())
    assert outcome.error_type == "F2"
    assert outcome.feedback == "x" * (MAX_ECHOED - 3) + "... does not exist! Please choose another object"
    assert len(subtask_text(SubtaskText("Pick", huge, "", "RT-1-X"))) < 2 * MAX_ECHOED
