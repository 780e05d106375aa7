"""The prompts: exact user messages, history entries, system-prompt content, in-context example, display names."""

from __future__ import annotations

import pytest
from emmoe_eval.conversation import format_history_entry
from emmoe_core.protocol import SubtaskText, is_small_object

from homiebot_planner.prompts import (
    REQUEST_LINES,
    build_user_message,
    display_name,
    format_visible_objects,
    shown_objects,
    in_context_example,
    request_line,
    system_prompt,
)

LIVE = "Now based on the instruction above, please output Analysis, Subtask and Model in the mentioned format."
SFT = "Now, please output Analysis, Subtask and Model, according to the instruction above."


def test_request_lines_are_the_protocol_text() -> None:
    assert REQUEST_LINES == {"live": LIVE, "sft": SFT}
    assert request_line("sft") == SFT
    with pytest.raises(ValueError, match="request variant"):
        request_line("chat")  # type: ignore[arg-type]


def test_first_step_message_is_exact() -> None:
    message = build_user_message("find a cold apple and put it on the kitchen_counter", [], None, None)
    assert message == (
        "Task: find a cold apple and put it on the kitchen_counter\n"
        "Inventory: None\n"
        "Historical Execution: None\n"
        "Feedback: None\n" + LIVE
    )


def test_later_step_message_is_exact() -> None:
    history = (format_history_entry(1, SubtaskText("Go to", "fridge"), True)
               + format_history_entry(2, SubtaskText("Pick", "apple"), False))
    message = build_user_message(
        "find a cold apple and put it on the kitchen_counter", ["green_can", "apple"], history,
        "Unable to pick, the hand is full", variant="sft",
    )
    assert message == (
        "Task: find a cold apple and put it on the kitchen_counter\n"
        "Inventory: green_can apple\n"
        "Historical Execution: (1) Go to, fridge(success) (2) Pick, apple(fail) \n"
        "Feedback: Unable to pick, the hand is full\n" + SFT
    )


def test_text_observation_block_precedes_the_fields() -> None:
    visible = {"front": ["fridge", "apple", "fridge"], "left": [], "back": ["sofa"]}
    message = build_user_message("t", [], None, None, visible=visible)
    assert message == (
        "Visible objects:\nfront: fridge, apple\nleft: None\nback: sofa\nright: None\n"
        "Task: t\nInventory: None\nHistorical Execution: None\nFeedback: None\n" + LIVE
    )
    assert format_visible_objects({}) == "Visible objects:\nfront: None\nleft: None\nback: None\nright: None\n"


def test_shown_objects_say_where_small_objects_rest() -> None:
    names = ["013_apple", "frl_apartment_sofa", "013_apple", "013_apple", "025_mug"]
    locations = ["on frl_apartment_sofa", "", "in fridge", "on frl_apartment_sofa"]  # the mug's is missing: ""
    assert shown_objects(names, locations, display_name) == ["apple (on sofa)", "sofa", "apple (in fridge)", "mug"]
    assert shown_objects(names, [], str.upper) == ["013_APPLE", "FRL_APARTMENT_SOFA", "025_MUG"]


def test_history_entry_format() -> None:
    assert format_history_entry(3, SubtaskText("Pick", "apple"), True) == "(3) Pick, apple(success) "
    assert format_history_entry(4, SubtaskText("Put", "apple", "fridge"), False) == "(4) Put, apple, fridge(fail) "


@pytest.mark.parametrize(("inventory", "shown"),
                         [([], "None"), (["apple"], "apple"), (["apple", "bowl"], "apple bowl")])
def test_inventory_format(inventory: list[str], shown: str) -> None:
    assert f"\nInventory: {shown}\n" in build_user_message("t", inventory, None, None)


@pytest.mark.parametrize("mode", ["images", "text"])
def test_system_prompt_covers_every_protocol_point(mode: str) -> None:
    prompt = system_prompt(mode)  # type: ignore[arg-type]
    assert "[Go to, Pick, Put, Open, Close, End]" in prompt
    assert "[NoMaD, PixNav, octo, RT-1-X]" in prompt
    assert "[Put, object, place]" in prompt
    assert "[End]" in prompt
    for model, skill in (("NoMaD", "large object"), ("PixNav", "smaller object"), ("octo", "opening and closing"),
                         ("RT-1-X", "picking objects up and putting them down")):
        assert f"- {model}: " in prompt and skill in prompt
    for point in ("single arm", "inventory", "history", "feedback", "analysis", "do not Pick or Open anything while "
                  "holding", "do not Put with an empty hand", "Only choose targets you can currently see",
                  "Open a closed container before picking", "Go to a target before you interact",
                  "only the next subtask", "Answer with exactly this template",
                  "Analysis: <your reasoning>\nSubtask: [<action>, <target>]\nModel: <model>"):
        assert point in prompt, point
    assert ("front, left, back and right" in prompt) == (mode == "images")
    assert ("names of the objects" in prompt) == (mode == "text")
    with pytest.raises(ValueError, match="observation_mode"):
        system_prompt("video")  # type: ignore[arg-type]


def test_in_context_example_is_the_papers_exchange_verbatim() -> None:
    from homiebot_planner.parsing import PARSERS, is_valid, parse_output

    example = in_context_example()
    assert example.user == (
        "here is an example output, please strictly follow its format and system reminders in your output:\n"
        "Analysis: According to my final task, I need to fetch apples first, but it's a better choice to go the "
        "fridge and open it first, which will avoid potential conflicts, so I should go to the fridge next\n"
        "Subtask: [Go to, fridge]\nModel: NoMaD\n")
    assert example.assistant == "I will surely follow the given format, now you can send prompt to me."
    for parser in PARSERS:  # the example answer inside the user turn is well-formed for every parser
        parsed = parse_output(example.user.split("output:\n", 1)[1], parser)
        assert parsed is not None and is_valid(parsed), parser
        assert (parsed.subtask_text, parsed.model) == ("[Go to, fridge]", "NoMaD")


def test_display_names_are_resolvable_aliases() -> None:
    from emmoe_core.names import default_alias_table

    table = default_alias_table()
    assert display_name("013_apple") == "apple"
    assert display_name("frl_apartment_sofa") == "sofa"
    assert display_name("frl_apartment_refrigerator") == "fridge"
    assert display_name("003_cracker_box") == "red_box"  # "box" would be ambiguous
    assert display_name("006_mustard_bottle") == "006_mustard_bottle"  # no alias: the canonical name
    for canonical in table.aliases:
        assert table.matches(display_name(canonical), canonical), canonical


def test_small_objects_are_ycb_ids() -> None:
    assert is_small_object("013_apple") and is_small_object("063-a_marbles")
    assert not is_small_object("frl_apartment_table_01") and not is_small_object("fridge")
