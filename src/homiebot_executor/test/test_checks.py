"""The checks before execution, each triggered on a hand-made scene, with the byte-exact feedback strings."""

from __future__ import annotations

import pytest

from emmoe_core.protocol import SubtaskText
from homiebot_executor.checks import CheckConfig, check_subtask


def check(scene, action, target="", place="", model="RT-1-X", inventory=(), **config):
    return check_subtask(SubtaskText(action, target, place, model), scene, config=CheckConfig(**config),
                         inventory=inventory)


def test_f1_unknown_action_keeps_the_action_as_written_in_verbatim_style(make_kitchen):
    outcome = check(make_kitchen(), "Fetch", "apple", feedback_style="verbatim")
    assert outcome.error_type == "F1"
    assert outcome.feedback == "Fetch is not in the action list! You should only choose actions in the list."


def test_f1_unknown_model_when_the_model_is_checked(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "apple", model="GPT-4o", check_model=True, feedback_style="verbatim")
    assert outcome.error_type == "F1"
    assert outcome.feedback == "Pick is not in the action list! You should only choose actions in the list."
    assert "GPT-4o" in outcome.detail


def test_by_default_f1_checks_only_the_action_as_the_release(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "apple", model="GPT-4o")
    assert outcome.passed and outcome.target.name == "apple_0"
    assert SubtaskText("Pick", "apple", model="GPT-4o").routed_model == "RT-1-X"
    assert SubtaskText("Go to", "fridge", model="").routed_model == "NoMaD"
    assert SubtaskText("Open", "fridge", model="OCTO").routed_model == "octo"


def test_actions_and_models_compare_case_insensitively(make_kitchen):
    assert check(make_kitchen(), "pick", "apple", model="rt-1-x").passed
    assert check(make_kitchen(), "GO TO", "fridge", model="nomad").passed


def test_f2_unknown_name(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "spaceship")
    assert outcome.error_type == "F2"
    assert outcome.feedback == "spaceship does not exist! Please choose another object"


def test_f2_known_alias_absent_from_the_scene(make_kitchen):
    outcome = check(make_kitchen(), "Go to", "banana", model="PixNav")
    assert outcome.error_type == "F2"
    assert outcome.feedback == "banana does not exist! Please choose another object"
    assert "nothing in the scene" in outcome.detail


def test_f2_for_put_checks_the_place(make_kitchen):
    outcome = check(make_kitchen(held="apple_0"), "Put", "apple", "moon")
    assert outcome.error_type == "F2" and outcome.feedback == "moon does not exist! Please choose another object"


@pytest.mark.parametrize("action,target,model", [("Pick", "bowl", "RT-1-X"), ("Open", "fridge", "octo"),
                                                 ("Close", "fridge", "octo")])
def test_l1_hand_full(make_kitchen, action, target, model):
    outcome = check(make_kitchen(held="apple_0", fridge_open=action == "Close"), action, target, model=model)
    assert outcome.error_type == "L1"
    assert outcome.feedback == f"Unable to {action.lower()}, the hand is full"


def test_l2_hand_empty(make_kitchen):
    outcome = check(make_kitchen(), "Put", "apple", "brown_table")
    assert outcome.error_type == "L2" and outcome.feedback == "Unable to put, the hand is empty"


def test_l1_l2_read_the_planners_inventory_as_the_release_when_asked(make_kitchen):
    # The release tests the inventory string it was sent ("None" when empty), not the simulator's hand.
    told_full = check(make_kitchen(), "Pick", "bowl", inventory=("apple",), hand_source="inventory")
    assert (told_full.error_type, told_full.detail) == ("L1", "the inventory holds apple")
    # the gripper is full but the inventory says empty: L1 does not fire
    assert check(make_kitchen(held="apple_0"), "Pick", "bowl", inventory=("None",),
                 hand_source="inventory").error_type != "L1"
    told_empty = check(make_kitchen(held="apple_0"), "Put", "apple", "brown_table", inventory=(" ", "None"),
                       hand_source="inventory")
    assert (told_empty.error_type, told_empty.detail) == ("L2", "the inventory is empty")
    # by default the gripper decides, whatever the inventory says
    assert check(make_kitchen(), "Pick", "apple", inventory=("banana",)).passed
    assert check(make_kitchen(held="apple_0"), "Put", "apple", "brown_table", inventory=()).passed


def test_l3_put_into_closed_fridge(make_kitchen):
    outcome = check(make_kitchen(held="apple_0"), "Put", "apple", "fridge")
    assert outcome.error_type == "L3"
    assert outcome.feedback == "Unable to put, the fridge is closed, you should open it first"


def test_l3_put_into_closed_drawer_uses_the_written_name(make_kitchen):
    outcome = check(make_kitchen(held="apple_0", drawer_positions=(0.1, 0.2)), "Put", "apple", "kitchen_drawer")
    assert outcome.error_type == "L3"
    assert outcome.feedback == "Unable to put, the kitchen_drawer is closed, you should open it first"


def test_l3_passes_with_an_open_container(make_kitchen):
    assert check(make_kitchen(held="apple_0", fridge_open=True), "Put", "apple", "fridge").passed
    outcome = check(make_kitchen(held="apple_0", drawer_positions=(0.0, 0.3)), "Put", "apple", "drawer")
    assert outcome.passed and outcome.target.name == "kitchen_drawer_1"


def test_put_on_a_counter_top_needs_no_open_drawer(make_kitchen):
    assert check(make_kitchen(held="apple_0"), "Put", "apple", "kitchen_counter").passed


def test_l4_open_a_table(make_kitchen):
    outcome = check(make_kitchen(), "Open", "brown_table", model="octo")
    assert outcome.error_type == "L4"
    assert outcome.feedback == "Can not open brown_table! Please choose another object"


def test_l4_close_an_object(make_kitchen):
    outcome = check(make_kitchen(), "Close", "apple", model="octo")
    assert outcome.error_type == "L4" and outcome.feedback == "Can not close apple! Please choose another object"


def test_d1_far_target(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "sofa")
    assert outcome.error_type == "D1" and outcome.feedback == "Unable to pick, the target is far away"


def test_d2_too_close(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "bowl")
    assert outcome.error_type == "D2" and outcome.feedback == "Unable to pick, the target is too close"


def test_go_to_skips_the_distance_checks(make_kitchen):
    assert check(make_kitchen(), "Go to", "sofa", model="NoMaD").passed
    assert check(make_kitchen(), "Go to", "bowl", model="PixNav").passed


def test_thresholds_are_settings(make_kitchen):
    assert check(make_kitchen(), "Pick", "sofa", far_threshold=10.0).passed
    assert check(make_kitchen(), "Pick", "apple", far_threshold=0.5).error_type == "D1"


def test_nearest_matching_instance_is_chosen(make_kitchen):
    outcome = check(make_kitchen(), "Pick", "red_apple")
    assert outcome.passed and outcome.target.name == "apple_0"
    outcome = check(make_kitchen(robot=(3.4, 0.0)), "Pick", "apple")
    assert outcome.passed and outcome.target.name == "apple_1"


def test_an_instance_name_resolves_to_itself(make_kitchen):
    outcome = check(make_kitchen(robot=(3.4, 0.0)), "Go to", "apple_0", model="PixNav")
    assert outcome.passed and outcome.target.name == "apple_0"


def test_open_prefers_the_nearest_closed_drawer(make_kitchen):
    outcome = check(make_kitchen(robot=(-0.5, -0.5), drawer_positions=(0.4, 0.0)), "Open", "drawer", model="octo")
    assert outcome.passed and outcome.target.name == "kitchen_drawer_1"
    outcome = check(make_kitchen(robot=(-0.5, -0.5), drawer_positions=(0.4, 0.0)), "Close", "drawer", model="octo")
    assert outcome.passed and outcome.target.name == "kitchen_drawer_0"


def test_open_fridge_targets_its_door(make_kitchen):
    outcome = check(make_kitchen(), "Open", "refrigerator", model="octo")
    assert outcome.passed and outcome.target.container.name == "fridge_0_door"


def test_end_always_passes(make_kitchen):
    assert check(make_kitchen(held="apple_0"), "End", model="None").passed
    assert check(make_kitchen(), "End", model="").passed


@pytest.mark.parametrize("order,expected", [("spec", "F2"), ("release", "L2")])
def test_release_order_runs_logical_checks_before_the_lookup(make_kitchen, order, expected):
    outcome = check(make_kitchen(), "Put", "apple", "moon", order=order)
    assert outcome.error_type == expected


def test_check_order_is_spec_order_when_several_fail(make_kitchen):
    # Hand full (L1), and the target is far (D1): L1 comes first.
    assert check(make_kitchen(held="apple_0"), "Pick", "sofa").error_type == "L1"


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="CheckConfig.order"):
        CheckConfig(order="random")
    with pytest.raises(ValueError, match="CheckConfig.feedback_style: expected one of release, verbatim"):
        CheckConfig(feedback_style="upper")
    with pytest.raises(ValueError, match="near_threshold < far_threshold"):
        CheckConfig(far_threshold=0.05)
    with pytest.raises(ValueError, match="CheckConfig.hand_source: expected one of simulator, inventory"):
        CheckConfig(hand_source="planner")
