"""Parsing planner answers: the release's parsers with their quirks, strict then relaxed, validity, and never
raising on arbitrary text."""

from __future__ import annotations

import pytest
from emmoe_core.protocol import ACTIONS, MODELS_FOR_ACTION, format_subtask
from hypothesis import given, settings
from hypothesis import strategies as st

from homiebot_planner.parsing import PARSERS, is_valid, model_fits_action, parse_output, validity_problems

# (text, what each parser gives: (pattern, analysis, action, target, place, model) or None). The release columns
# follow scripts/eval/eval_*.py of the release: re.search with its two DOTALL patterns (API models: the first only),
# then group(n).strip(), and its executor's split of the subtask on commas (first part action, last part item).
RELEASE_TABLE = [
    pytest.param(
        "Analysis: a\nSubtask: [Pick, apple] because it is close\nModel: RT-1-X",
        {"release": ("release_bracket", "a", "Pick", "apple", "", "RT-1-X"),
         "release_bracket": ("release_bracket", "a", "Pick", "apple", "", "RT-1-X"), "strict": None},
        id="any-text-between-bracket-and-model"),
    pytest.param(
        "Analysis: a\nSubtask: [Put, apple,\nfridge]\nModel: RT-1-X",
        {"release": ("release_bracket", "a", "Put", "apple", "fridge", "RT-1-X"),
         "release_bracket": ("release_bracket", "a", "Put", "apple", "fridge", "RT-1-X"), "strict": None},
        id="brackets-spanning-lines"),
    pytest.param(
        "Analysis: a\nSubtask: [Open, fridge]\nModel: octo\nAnalysis: b\nSubtask: [Close, fridge]\nModel: octo",
        {"release": ("release_bracket", "b", "Close", "fridge", "", "octo"),
         "release_bracket": ("release_bracket", "b", "Close", "fridge", "", "octo"),
         "strict": ("strict", "a", "Open", "fridge", "", "octo")},
        id="last-analysis-wins-in-the-release-first-here"),
    pytest.param(
        "Analysis: a\nSubtask: [Pick, apple]\nModel: RT-1-X\nI hope this helps.",
        {"release": ("release_bracket", "a", "Pick", "apple", "", "RT-1-X\nI hope this helps."),
         "release_bracket": ("release_bracket", "a", "Pick", "apple", "", "RT-1-X\nI hope this helps."),
         "strict": ("strict", "a", "Pick", "apple", "", "RT-1-X")},
        id="model-is-everything-after-the-last-label"),
    pytest.param(
        "Analysis: a\nSubtask: [Go to, fridge\nModel: NoMaD",
        {"release": ("release_plain", "a", "[Go to", "fridge", "", "NoMaD"), "release_bracket": None,
         "strict": ("relaxed", "a", "Go to", "fridge", "", "NoMaD")},
        id="missing-closing-bracket-keeps-the-opening-one"),
    pytest.param(
        "Analysis: go\nSubtask: Go to, fridge\nModel: NoMaD",
        {"release": ("release_plain", "go", "Go to", "fridge", "", "NoMaD"), "release_bracket": None,
         "strict": ("relaxed", "go", "Go to", "fridge", "", "NoMaD")},
        id="no-brackets"),
    pytest.param(
        "Analysis: a\nSubtask: I would go to the fridge, open it, take the apple, and eat it\nModel: NoMaD",
        {"release": ("release_plain", "a", "I would go to the fridge", "open it", "and eat it", "NoMaD"),
         "release_bracket": None, "strict": None},
        id="free-text-subtask"),
    pytest.param(
        "Analysis: a\nSubtask: [Put, apple, on the, fridge]\nModel: RT-1-X",
        {"release": ("release_bracket", "a", "Put", "apple", "fridge", "RT-1-X"),
         "release_bracket": ("release_bracket", "a", "Put", "apple", "fridge", "RT-1-X"), "strict": None},
        id="more-than-three-parts-last-is-the-place"),
    pytest.param(
        "Analysis:Subtask: [End]\nModel: None",
        {"release": None, "release_bracket": None, "strict": ("strict", "", "End", "", "", "None")},
        id="release-needs-one-analysis-character"),
    pytest.param(
        "Analysis: x\nSubtask:  [ Go to ,fridge ]  \nModel:  NoMaD.",
        {"release": ("release_bracket", "x", "Go to", "fridge", "", "NoMaD."),
         "release_bracket": ("release_bracket", "x", "Go to", "fridge", "", "NoMaD."),
         "strict": ("strict", "x", "Go to", "fridge", "", "NoMaD")},
        id="release-keeps-the-model-as-written"),
    pytest.param(
        "Analysis: a\nSubtask: []\nModel: NoMaD",
        {"release": None, "release_bracket": None, "strict": None}, id="empty-subtask-is-unparsable-everywhere"),
    pytest.param(
        "analysis: a\nsubtask: [Pick, apple]\nmodel: RT-1-X",
        {"release": None, "release_bracket": None, "strict": None}, id="labels-are-case-sensitive"),
]


@pytest.mark.parametrize(("text", "expected"), RELEASE_TABLE)
def test_release_parsers_and_their_quirks(text: str, expected: dict[str, tuple[str, ...] | None]) -> None:
    assert set(expected) == set(PARSERS)
    for parser, fields in expected.items():
        parsed = parse_output(text, parser)
        if fields is None:
            assert parsed is None, parser
            continue
        assert parsed is not None, parser
        got = (parsed.pattern, parsed.analysis, parsed.subtask.action, parsed.subtask.target, parsed.subtask.place,
               parsed.model)
        assert got == fields, parser


def test_unknown_parser_is_named() -> None:
    with pytest.raises(ValueError, match="parser must be one of release, release_bracket, strict"):
        parse_output("Analysis: a\nSubtask: [End]\nModel: None", "loose")


def test_strict_answer() -> None:
    parsed = parse_output("Analysis: the apple is on the table.\nSubtask: [Pick, apple]\nModel: RT-1-X")
    assert parsed is not None
    assert (parsed.pattern, parsed.analysis, parsed.subtask_text, parsed.model) == (
        "strict", "the apple is on the table.", "[Pick, apple]", "RT-1-X")
    assert is_valid(parsed) and model_fits_action(parsed) and not parsed.is_end


def test_put_and_end() -> None:
    put = parse_output("Analysis: a\nSubtask: [Put, apple, fridge]\nModel: RT-1-X")
    assert put is not None and (put.subtask.target, put.subtask.place) == ("apple", "fridge") and is_valid(put)
    end = parse_output("Analysis: done.\nSubtask: [End]\nModel: None")
    assert end is not None and end.is_end and is_valid(end) and model_fits_action(end)


def test_multiline_analysis_and_surrounding_text() -> None:
    text = "Sure!\nAnalysis: first line\nsecond line\n\nSubtask:  [Go to , fridge ]  \n\nModel:  NoMaD.\nThanks"
    parsed = parse_output(text)
    assert parsed is not None and parsed.pattern == "strict"
    assert parsed.analysis == "first line\nsecond line"
    assert parsed.subtask_text == "[Go to, fridge]" and parsed.model == "NoMaD"


def test_relaxed_without_brackets() -> None:
    parsed = parse_output("Analysis: go\nSubtask: Go to, fridge\nModel: NoMaD")
    assert parsed is not None and parsed.pattern == "relaxed"
    assert parsed.subtask_text == "[Go to, fridge]" and is_valid(parsed)


def test_relaxed_rejects_free_text_subtasks() -> None:
    assert parse_output("Analysis: a\nSubtask: I would go to the fridge, open it, take the apple, and eat it\n"
                        "Model: NoMaD") is None
    assert parse_output("Analysis: a\nSubtask:\nModel: NoMaD") is None
    assert parse_output("Analysis: a\nSubtask: [Go to, fridge(success)] (5)\nModel: NoMaD") is None
    half = parse_output("Analysis: a\nSubtask: [Go to, fridge\nModel: NoMaD")
    assert half is not None and half.pattern == "relaxed" and half.subtask_text == "[Go to, fridge]"


@pytest.mark.parametrize("text", [
    "", "Subtask: [Pick, apple]\nModel: RT-1-X", "Analysis: a\nModel: RT-1-X", "Analysis: a\nSubtask: [Pick, apple]",
    "analysis: a\nsubtask: [Pick, apple]\nmodel: RT-1-X",
])
def test_unparsable(text: str) -> None:
    assert parse_output(text) is None


def test_first_answer_wins_when_repeated() -> None:
    text = ("Analysis: a\nSubtask: [Open, fridge]\nModel: octo\n"
            "Analysis: b\nSubtask: [Close, fridge]\nModel: octo")
    parsed = parse_output(text)
    assert parsed is not None and parsed.subtask_text == "[Open, fridge]"


@pytest.mark.parametrize(("text", "problem"), [
    ("Analysis: a\nSubtask: [Fetch, apple]\nModel: RT-1-X", "action 'Fetch'"),
    ("Analysis: a\nSubtask: [pick, apple]\nModel: RT-1-X", "action 'pick'"),
    ("Analysis: a\nSubtask: [Pick, apple]\nModel: GPT", "model 'GPT'"),
    ("Analysis: a\nSubtask: [Put, apple]\nModel: RT-1-X", "needs an object and a place"),
    ("Analysis: a\nSubtask: [Pick, apple, table]\nModel: RT-1-X", "one target"),
    ("Analysis: a\nSubtask: [End, now]\nModel: None", "no arguments"),
    ("Analysis: a\nSubtask: [End]\nModel: octo", "no model"),
    ("Analysis: a\nSubtask: [<action>, <target>]\nModel: <model>", "action '<action>'"),
])
def test_validity_problems(text: str, problem: str) -> None:
    parsed = parse_output(text)
    assert parsed is not None
    problems = validity_problems(parsed)
    assert any(problem in item for item in problems), problems
    assert not is_valid(parsed)


def test_model_that_does_not_fit_is_still_valid() -> None:
    parsed = parse_output("Analysis: a\nSubtask: [Pick, apple]\nModel: NoMaD")
    assert parsed is not None and is_valid(parsed) and not model_fits_action(parsed)


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    parsed = parse_output(text)
    if parsed is not None:
        validity_problems(parsed)


labelled = st.lists(st.sampled_from(["Analysis:", "Subtask:", "Model:", "[", "]", ",", "\n", " ", "Pick", "End",
                                     "RT-1-X", "apple", "Put"]) | st.text(max_size=5), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(labelled, st.sampled_from(PARSERS))
def test_never_raises_on_label_soup(text: str, parser: str) -> None:
    parsed = parse_output(text, parser)
    if parsed is not None:
        assert parsed.subtask.action.strip() == parsed.subtask.action and parsed.subtask.action
        validity_problems(parsed)


names = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="_ -"),
                min_size=1, max_size=12).map(str.strip).filter(bool)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([action for action in ACTIONS if action != "End"]), names, names,
       st.text(alphabet=st.characters(blacklist_characters="\r"), max_size=40).filter(lambda text: ":" not in text))
def test_round_trip_of_well_formed_answers(action: str, target: str, place: str, analysis: str) -> None:
    subtask = format_subtask(action, target, place if action == "Put" else "")
    model = MODELS_FOR_ACTION[action][0]
    parsed = parse_output(f"Analysis: {analysis}\nSubtask: {subtask}\nModel: {model}")
    assert parsed is not None and parsed.pattern == "strict"
    assert parsed.subtask_text == subtask and parsed.model == model and is_valid(parsed)
