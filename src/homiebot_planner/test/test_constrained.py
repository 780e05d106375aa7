"""Constrained decoding: the allowed endings, the token trie, and valid answers from random tiny models."""

from __future__ import annotations

from pathlib import Path

import pytest

from homiebot_planner.backends import DecodingConstraints, HFConfig
from homiebot_planner.backends.constrained import TokenTrie, allowed_endings, first_line
from homiebot_planner.parsing import is_valid, model_fits_action, parse_output


def test_endings_with_an_empty_hand() -> None:
    endings = allowed_endings(DecodingConstraints(names=("apple", "fridge"), receptacles=("fridge",)))
    assert endings == [
        "Go to, apple]\nModel: NoMaD", "Go to, apple]\nModel: PixNav",
        "Go to, fridge]\nModel: NoMaD", "Go to, fridge]\nModel: PixNav",
        "Pick, apple]\nModel: RT-1-X", "Open, fridge]\nModel: octo", "Close, fridge]\nModel: octo",
        "End]\nModel: None",
    ]
    loose = allowed_endings(DecodingConstraints(names=("apple", "fridge"), receptacles=("fridge",),
                                                object_rules=False))
    assert loose == [
        "Go to, apple]\nModel: NoMaD", "Go to, apple]\nModel: PixNav",
        "Go to, fridge]\nModel: NoMaD", "Go to, fridge]\nModel: PixNav",
        "Pick, apple]\nModel: RT-1-X", "Pick, fridge]\nModel: RT-1-X",
        "Open, apple]\nModel: octo", "Open, fridge]\nModel: octo",
        "Close, apple]\nModel: octo", "Close, fridge]\nModel: octo",
        "End]\nModel: None",
    ]


def test_endings_while_holding() -> None:
    endings = allowed_endings(DecodingConstraints(names=("apple", "fridge", "sofa"), held=("apple",),
                                                  receptacles=("fridge", "sofa")))
    assert "Put, apple, fridge]\nModel: RT-1-X" in endings and "Put, apple, sofa]\nModel: RT-1-X" in endings
    assert not any(ending.startswith(("Pick", "Open", "Close", "Go to, apple")) for ending in endings)
    loose = allowed_endings(DecodingConstraints(names=("apple", "fridge"), hand_rules=False))
    assert "Put, apple, fridge]\nModel: RT-1-X" in loose and "Pick, apple]\nModel: RT-1-X" in loose
    assert allowed_endings(DecodingConstraints()) == ["End]\nModel: None"]


def test_an_open_container_object_is_a_place_but_stays_pickable() -> None:
    holding = allowed_endings(DecodingConstraints(names=("banana", "bowl", "brown_table"), held=("banana",),
                                                  receptacles=("brown_table",), containers=("bowl",)))
    assert "Put, banana, bowl]\nModel: RT-1-X" in holding and "Put, banana, brown_table]\nModel: RT-1-X" in holding
    empty = allowed_endings(DecodingConstraints(names=("bowl", "brown_table"), receptacles=("brown_table",),
                                                containers=("bowl",)))
    assert "Pick, bowl]\nModel: RT-1-X" in empty and not any(ending.startswith("Open, bowl") for ending in empty)


def test_a_decision_only_answer_gets_the_empty_analysis_line() -> None:
    from homiebot_planner.backends.constrained import with_analysis_line

    assert with_analysis_line("Subtask: [End]\nModel: None") == "Analysis:\nSubtask: [End]\nModel: None"
    full = "Analysis: done.\nSubtask: [End]\nModel: None"
    assert with_analysis_line(full) == full


def test_the_previous_subtask_is_not_offered_again() -> None:
    endings = allowed_endings(DecodingConstraints(names=("apple", "fridge"), receptacles=("fridge",),
                                                  repeated=("Go to, fridge",)))
    assert not any(ending.startswith("Go to, fridge]") for ending in endings)
    assert "Go to, apple]\nModel: PixNav" in endings and "Open, fridge]\nModel: octo" in endings


def test_offered_subtasks_and_actions_narrow_the_endings_unless_none_would_remain() -> None:
    walk_up = allowed_endings(DecodingConstraints(names=("apple", "fridge"), receptacles=("fridge",),
                                                  offered=("Go to, apple",)))
    assert walk_up == ["Go to, apple]\nModel: NoMaD", "Go to, apple]\nModel: PixNav"]
    no_end = allowed_endings(DecodingConstraints(names=("apple",), offered=("Go to", "Pick", "Put", "Open", "Close")))
    assert "End]\nModel: None" not in no_end and "Pick, apple]\nModel: RT-1-X" in no_end
    unknown = allowed_endings(DecodingConstraints(names=("apple",), offered=("Go to, sponge",)))
    assert unknown == allowed_endings(DecodingConstraints(names=("apple",)))


def test_every_ending_completes_a_valid_answer() -> None:
    constraints = DecodingConstraints(names=("apple", "brown_table", "fridge"), held=("bowl",),
                                      receptacles=("brown_table", "fridge"))
    for ending in allowed_endings(constraints):
        parsed = parse_output(f"Analysis: x\nSubtask: [{ending}")
        assert parsed is not None and is_valid(parsed) and model_fits_action(parsed), ending


def test_token_trie() -> None:
    trie = TokenTrie([[1, 2, 9], [1, 3, 9], [4, 9]])
    assert sorted(trie.allowed([])) == [1, 4]
    assert sorted(trie.allowed([1])) == [2, 3]
    assert trie.allowed([1, 2]) == [9] and trie.allowed([1, 2, 9]) == [] and trie.allowed([7]) == []
    assert trie.longest == 3
    with pytest.raises(ValueError, match="at least one"):
        TokenTrie([])


def test_first_line() -> None:
    assert first_line(" the apple is here.\nSubtask: [x]") == "the apple is here."
    assert first_line(" go now Subtask: [Go to, a]") == "go now"


@pytest.mark.parametrize("model", ["lm", "chat_lm", "vlm"])
def test_random_tiny_models_always_give_valid_answers(tiny_models: dict[str, Path], model: str) -> None:
    import numpy as np
    import torch

    from homiebot_planner.backends.hf import HFBackend
    from homiebot_planner.planner import Observation, Planner, PlannerConfig

    torch.manual_seed(0)
    backend = HFBackend(HFConfig(model_path=str(tiny_models[model]), constrained=True, analysis_max_tokens=8))
    views = {view: np.zeros((32, 32, 3), dtype=np.uint8) for view in ("front", "left", "back", "right")}
    observation = Observation(images=views, visible={"front": ["013_apple", "frl_apartment_refrigerator"],
                                                     "left": ["frl_apartment_sofa"]})
    planner = Planner(backend, "put the apple in the fridge", PlannerConfig(temperature=1.0))
    for _ in range(4):
        decision = planner.decide(observation)
        assert decision.samples == 1 and decision.valid and decision.parsed is not None, decision.raw_output
        assert decision.parsed.pattern == "strict" and model_fits_action(decision.parsed)
        assert decision.subtask.action == "End" or decision.subtask.target in ("apple", "fridge", "sofa")
        planner.record_result(decision, True, "None")
        if decision.subtask.action == "Pick":
            assert planner.memory.inventory == [decision.subtask.target]
        if planner.memory.inventory:  # hand rules: with something held only Go to, Put or End
            assert planner.constraints(observation).held == tuple(planner.memory.inventory)
