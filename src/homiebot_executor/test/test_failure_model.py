"""The seeded failure model (homiebot_executor.failure_model)."""

from __future__ import annotations

import pytest

from pathlib import Path

from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Task, TaskAttributes
from emmoe_eval.metrics import ScoringConfig, evaluate
from emmoe_core.protocol import parse_subtask
from emmoe_eval.runs import Run, Step

from homiebot_executor.execution import ExecutionConfig, run_attempts
from homiebot_executor.failure_model import (
    PAPER_EXECUTION_SUCCESS_RATES,
    TABLE4_FIGURES,
    FailureConfig,
    FailureModel,
    execution_success_rate,
    paper_figure,
)
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


def draws(model: FailureModel, skill: str, count: int) -> list[bool]:
    return [model.draw(skill) is not None for _ in range(count)]


def test_same_seed_same_failures_other_seed_differs():
    config = FailureConfig({"pick": 0.5}, seed=7)
    first, second = draws(FailureModel(config), "pick", 200), draws(FailureModel(config), "pick", 200)
    assert first == second
    other = draws(FailureModel(FailureConfig({"pick": 0.5}, seed=8)), "pick", 200)
    assert other != first


def test_each_run_has_its_own_stream_whatever_ran_before():
    model = FailureModel(FailureConfig({"open": 0.3}, seed=1))
    model.start_run("7/1")
    first = draws(model, "open", 50)
    model.start_run("7/2")
    second = draws(model, "open", 50)
    other = FailureModel(FailureConfig({"open": 0.3}, seed=1))
    draws(other, "open", 13)  # another run before it on this stack
    other.start_run("7/1")
    assert draws(other, "open", 50) == first != second
    reseeded = FailureModel(FailureConfig({"open": 0.3}, seed=2))
    reseeded.start_run("7/1")
    assert draws(reseeded, "open", 50) != first


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


def test_the_calibration_inverts_the_papers_form():
    # The figures: s/(s+f) behind each Table 4 figure s/(3f+2s).
    expected = {"navigate": 0.936, "pick": 0.550, "put": 0.872, "open": 0.904, "close": 0.801}
    for skill, rate in PAPER_EXECUTION_SUCCESS_RATES.items():
        assert rate == pytest.approx(expected[skill], abs=0.0006)
        # 1000 executions at the rate give the figure back through the paper's form.
        assert paper_figure(1000 * rate, 1000 * (1 - rate)) == pytest.approx(TABLE4_FIGURES[skill])
    assert execution_success_rate(0.5) == 1.0 and execution_success_rate(0.0) == 0.0
    assert paper_figure(0, 0) is None
    with pytest.raises(ValueError, match=r"\[0, 0.5\]"):
        execution_success_rate(0.6)


def test_a_failed_execution_fails_every_attempt_and_a_new_execution_draws_again():
    model = FailureModel(FailureConfig({"pick": 0.5}, seed=2, unit="execution"))
    for _ in range(200):
        first = model.draw("pick", 1)
        assert [model.draw("pick", attempt) is None for attempt in (2, 3)] == [first is None] * 2
    # the first attempts alone follow the probability
    firsts = [model.draw("pick", 1) is not None for _ in range(4000)]
    assert 0.47 < sum(firsts) / 4000 < 0.53
    # a dropped object is dropped once: later attempts of that execution fail without dropping again
    drops = FailureModel(FailureConfig({"put": 1.0}, put_drop_probability=1.0, unit="execution"))
    assert drops.draw("put", 1).drop_object and not drops.draw("put", 2).drop_object
    with pytest.raises(ValueError, match="unit"):
        FailureConfig(unit="subtask")


ACTION_OF_SKILL = {"navigate": "Go to", "pick": "Pick", "put": "Put", "open": "Open", "close": "Close"}
WRITTEN = {"navigate": "[Go to, sofa]", "pick": "[Pick, apple]", "put": "[Put, apple, sofa]",
           "open": "[Open, fridge]", "close": "[Close, fridge]"}


def paper_executions(skill: str, count: int, seed: int) -> list[Step]:
    """`count` executions of `skill` through the executor's attempt loop under the paper conditions (the release's
    single Put attempt), each attempt failing when the calibrated model says so, as steps a run file would hold."""
    model = FailureModel(FailureConfig.paper(seed))

    def attempt(goal: SkillGoal, number: int) -> SkillOutcome:
        if model.draw(goal.skill, goal.attempt) is not None:
            return SkillOutcome(SkillStatus.INJECTED_FAILURE, "failure model", "apple" if skill == "put" else "")
        return SkillOutcome(SkillStatus.SUCCEEDED, held_object="")

    parts = parse_subtask(WRITTEN[skill])
    steps = []
    for number in range(1, count + 1):
        result = run_attempts(parts.action, SkillGoal(skill, "apple" if skill in ("pick", "put") else "sofa",
                                                      place="sofa" if skill == "put" else ""),
                              attempt, read_hand=lambda: "apple", config=ExecutionConfig(put_retries="release"))
        steps.append(Step(number, parts.action, parts.target, parts.place, "M3", result.success, result.feedback))
    return steps


def test_paper_conditions_reproduce_the_papers_table4():
    """Per-execution success within 2 points of the calibrated rate over many seeded executions, and the Table 4
    figure `emmoe-eval score` prints (SR_paper) within 3 points of the paper's."""
    info = InfoTrajectory("task", (InfoBlock(1, parse_subtask("[Go to, sofa]")),))
    tasks = {"1": Task("1", "train", Path("/nonexistent"), info, ((parse_subtask("[Go to, sofa]"),),))}
    runs = []
    for index, skill in enumerate(ACTION_OF_SKILL):
        steps = paper_executions(skill, 3000, seed=index)
        rate = sum(step.success for step in steps) / len(steps)
        assert rate == pytest.approx(PAPER_EXECUTION_SUCCESS_RATES[skill], abs=0.02), skill
        runs.extend(Run("1", str(index * 30 + chunk), steps[chunk * 100:(chunk + 1) * 100]) for chunk in range(30))
    table = evaluate(runs, tasks, ScoringConfig(bootstrap_resamples=1), TaskAttributes({})).summary["per_action"]
    for skill, action in ACTION_OF_SKILL.items():
        assert table[action]["executions"] == 3000
        assert table[action]["SR_paper"] == pytest.approx(TABLE4_FIGURES[skill], abs=0.03), action


def test_failure_config_validation():
    with pytest.raises(ValueError, match="unknown skill 'fly'"):
        FailureConfig({"fly": 0.1})
    with pytest.raises(ValueError, match=r"probabilities\['pick'\]"):
        FailureConfig({"pick": 1.5})
