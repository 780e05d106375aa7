"""The random-valid-action baseline: parsable, valid under the hand rules, reproducible per episode."""

from __future__ import annotations

import pytest

from homiebot_planner.backends import DecodingConstraints, EpisodeInfo, GenerationRequest, create_backend
from homiebot_planner.parsing import is_valid, model_fits_action, parse_output
from homiebot_planner.settings import PlannerParameters, build_settings


def backend(**values):
    return create_backend(build_settings(PlannerParameters(backend="random", **values)).backend)


def request(held=()):
    return GenerationRequest(messages=(), constraints=DecodingConstraints(
        names=("apple", "fridge", "sofa"), held=tuple(held)))


def draws(planner, episode: str, held=(), count: int = 40) -> list:
    planner.start_episode(EpisodeInfo(episode, "task"))
    return [parse_output(planner.generate(request(held))) for _ in range(count)]


def test_empty_hand_never_puts_and_full_hand_only_goes_or_puts():
    planner = backend(random_end_probability=0.0)
    empty = draws(planner, "91")
    assert all(is_valid(parsed) and model_fits_action(parsed) for parsed in empty)
    assert {parsed.subtask.action for parsed in empty} <= {"Go to", "Pick", "Open", "Close"}
    holding = draws(planner, "91", held=("apple",))
    assert {parsed.subtask.action for parsed in holding} <= {"Go to", "Put"}
    puts = [parsed.subtask for parsed in holding if parsed.subtask.action == "Put"]
    assert puts and all(subtask.target == "apple" and subtask.place in ("apple", "fridge", "sofa")
                        for subtask in puts)


def test_same_episode_same_choices_other_episode_other_choices():
    first, again, other = (draws(backend(), episode) for episode in ("91", "91", "92"))
    assert [parsed.subtask for parsed in first] == [parsed.subtask for parsed in again]
    assert [parsed.subtask for parsed in first] != [parsed.subtask for parsed in other]


def test_end_probability_one_always_ends():
    assert {parsed.subtask.action for parsed in draws(backend(random_end_probability=1.0), "91")} == {"End"}


def test_invalid_end_probability_is_refused():
    with pytest.raises(ValueError, match="random_end_probability"):
        backend(random_end_probability=1.5)
