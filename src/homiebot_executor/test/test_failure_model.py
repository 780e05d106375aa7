"""The seeded failure model (homiebot_executor.failure_model)."""

from __future__ import annotations

import pytest

from homiebot_executor.failure_model import (
    TABLE4_SUCCESS_RATES,
    FailureConfig,
    FailureModel,
    from_subtask_success_rates,
)


def draws(model: FailureModel, skill: str, count: int) -> list[bool]:
    return [model.draw(skill) is not None for _ in range(count)]


def test_same_seed_same_failures_other_seed_differs():
    config = FailureConfig({"pick": 0.5}, seed=7)
    first, second = draws(FailureModel(config), "pick", 200), draws(FailureModel(config), "pick", 200)
    assert first == second
    other = draws(FailureModel(FailureConfig({"pick": 0.5}, seed=8)), "pick", 200)
    assert other != first


def test_reseed_restarts_the_stream():
    model = FailureModel(FailureConfig({"open": 0.3}, seed=1))
    first = draws(model, "open", 50)
    model.reseed(1)
    assert draws(model, "open", 50) == first


def test_failure_rate_follows_the_probability():
    model = FailureModel(FailureConfig({"navigate": 0.25}, seed=3))
    rate = sum(draws(model, "navigate", 4000)) / 4000
    assert 0.22 < rate < 0.28
    assert not any(draws(model, "pick", 100))


def test_put_drops_follow_their_probability():
    model = FailureModel(FailureConfig({"put": 1.0}, put_drop_probability=0.5, seed=0))
    drops = [model.draw("put").drop_object for _ in range(1000)]
    assert 0.45 < sum(drops) / 1000 < 0.55
    assert FailureModel(FailureConfig({"pick": 1.0}, put_drop_probability=1.0)).draw("pick").drop_object is False


def test_subtask_rates_to_attempt_probabilities():
    probabilities = from_subtask_success_rates(TABLE4_SUCCESS_RATES)
    for skill, rate in TABLE4_SUCCESS_RATES.items():
        assert 1 - probabilities[skill] ** 3 == pytest.approx(rate)


def test_failure_config_validation():
    with pytest.raises(ValueError, match="unknown skill 'fly'"):
        FailureConfig({"fly": 0.1})
    with pytest.raises(ValueError, match=r"probabilities\['pick'\]"):
        FailureConfig({"pick": 1.5})
