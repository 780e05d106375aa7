"""The expert backend: keypath, info.txt and plan replay, retrying failures, choosing among keypaths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from emmoe_core.protocol import SubtaskText, default_model, feedback_for

from homiebot_planner.backends import BackendError, DecodingConstraints, EpisodeInfo, ExpertConfig, GenerationRequest
from homiebot_planner.backends.expert import ExpertBackend
from homiebot_planner.memory import ExecutedStep
from homiebot_planner.parsing import is_valid, parse_output
from homiebot_planner.planner import Observation, Planner

INFO = """Task: put the apple in the fridge

Subtask1: [Go to, fridge] (NoMaD)
Analysis: The fridge is where the apple goes.
Feedback: None
Inventory: None

Subtask2: [Pick, apple] (RT-1-X)
Analysis: Try to pick it from here.
Feedback: Unable to pick, the target is far away
Inventory: None

Subtask3: [Go to, apple] (PixNav)
Analysis: Get closer to the apple.
Feedback: None
Inventory: None

Subtask4: [End]
Analysis: Done.
"""


def _task(root: Path, keypaths: list[list[str]]) -> Path:
    directory = root / "data" / "train" / "7"
    directory.mkdir(parents=True)
    (directory / "info.txt").write_text(INFO, encoding="utf-8")
    (directory / "keypath.json").write_text(json.dumps(keypaths), encoding="utf-8")
    return directory


def _answer(backend: ExpertBackend, executed: list[tuple[SubtaskText, bool]], held: tuple[str, ...] = (),
            feedback: str | None = None) -> str:
    steps = [ExecutedStep(subtask, ok) for subtask, ok in executed]
    if feedback is not None:
        steps[-1] = ExecutedStep(steps[-1].subtask, steps[-1].success, feedback)
    backend.attach_history(lambda: steps)
    return backend.generate(GenerationRequest(messages=(), constraints=DecodingConstraints(held=held)))


def test_keypath_replay_retries_failures_and_picks_the_best_path(tmp_path: Path) -> None:
    directory = _task(tmp_path, [["[Go to, sofa]", "[End]"],
                                 ["[Go to, fridge]", "[Open, fridge]", "[Put, apple, fridge]", "[End]"]])
    backend = ExpertBackend(ExpertConfig(source="keypath"))
    backend.start_episode(EpisodeInfo("7", "t", task_id="7", task_dir=directory))
    first = parse_output(_answer(backend, []))
    assert first is not None and first.subtask_text == "[Go to, sofa]" and first.model == "NoMaD" and is_valid(first)
    go_fridge = SubtaskText("Go to", "refrigerator")  # an alias of fridge matches the node
    assert "Subtask: [Open, fridge]\nModel: octo" in _answer(backend, [(go_fridge, True)])
    assert "Subtask: [Open, fridge]" in _answer(backend, [(go_fridge, True), (SubtaskText("Open", "fridge"), False)])
    done = [(go_fridge, True), (SubtaskText("Open", "fridge"), True), (SubtaskText("Put", "apple", "fridge"), True)]
    last = parse_output(_answer(backend, done, held=("apple",)))
    assert last is not None and last.is_end and last.model == "None" and is_valid(last)


def test_info_replay_uses_successful_blocks_with_models_and_analyses(tmp_path: Path) -> None:
    _task(tmp_path, [["[End]"]])
    backend = ExpertBackend(ExpertConfig(source="info", data_dir=str(tmp_path)))
    backend.start_episode(EpisodeInfo("7", "t", task_id="7"))
    assert _answer(backend, []) == ("Analysis: The fridge is where the apple goes.\nSubtask: [Go to, fridge]\n"
                                    "Model: NoMaD")
    # The failed [Pick, apple] block is skipped: the next node is [Go to, apple] with its own model.
    assert _answer(backend, [(SubtaskText("Go to", "fridge"), True)]) == (
        "Analysis: Get closer to the apple.\nSubtask: [Go to, apple]\nModel: PixNav")


def test_repairs_after_far_away_and_a_dropped_object() -> None:
    plan = ("[Go to, apple]", "[Pick, apple]", "[Go to, fridge]", "[Put, apple, fridge]", "[End]")
    backend = ExpertBackend(ExpertConfig(source="plan", plan=plan))
    backend.start_episode(EpisodeInfo("free-1", "t"))
    go_apple, pick = (SubtaskText("Go to", "apple"), True), (SubtaskText("Pick", "apple"), True)
    far = [go_apple, (SubtaskText("Pick", "apple"), False)]
    assert "Subtask: [Go to, apple]\nModel: PixNav" in _answer(backend, far, feedback=feedback_for("D1", "Pick"))
    assert "Subtask: [Pick, apple]" in _answer(backend, far, feedback=feedback_for("E1", "Pick"))
    carried = [go_apple, pick, (SubtaskText("Go to", "fridge"), True)]
    far_put = [*carried, (SubtaskText("Put", "apple", "fridge"), False)]
    assert "Subtask: [Go to, fridge]\nModel: NoMaD" in _answer(backend, far_put, ("apple",), feedback_for("D1", "Put"))
    assert "Subtask: [Put, apple, fridge]" in _answer(backend, carried, held=("apple",))
    steps = [ExecutedStep(subtask, ok) for subtask, ok in carried]
    steps.append(ExecutedStep(SubtaskText("Put", "apple", "fridge"), False, feedback_for("E2", "Put")))
    answers = []
    backend.attach_history(lambda: steps)
    for step, held in ((None, ()), (go_apple, ()), (pick, ("apple",)), ((SubtaskText("Go to", "fridge"), True),
                                                                        ("apple",))):
        if step is not None:
            steps.append(ExecutedStep(*step))
        answers.append(parse_output(backend.generate(GenerationRequest(messages=(),
                                                                       constraints=DecodingConstraints(held=held)))))
    assert [answer.subtask_text for answer in answers if answer] == [
        "[Go to, apple]", "[Pick, apple]", "[Go to, fridge]", "[Put, apple, fridge]"]
    assert "not in my hand any more" in answers[0].analysis  # type: ignore[union-attr]


def test_the_planner_gives_the_expert_its_executed_steps() -> None:
    backend = ExpertBackend(ExpertConfig(source="plan", plan=("[Go to, apple]", "[Pick, apple]", "[End]")))
    backend.start_episode(EpisodeInfo("free-1", "t"))
    planner = Planner(backend, "t")
    first = planner.decide(Observation())
    planner.record_result(first, True, None)
    assert (first.subtask, planner.decide(Observation()).subtask) == (SubtaskText("Go to", "apple"),
                                                                      SubtaskText("Pick", "apple"))


def test_plan_source_and_default_models() -> None:
    backend = ExpertBackend(ExpertConfig(source="plan", plan=("[Go to, apple]", "[Go to, brown_table]", "[End]")))
    backend.start_episode(EpisodeInfo("free-1", "t"))
    assert "Subtask: [Go to, apple]\nModel: PixNav" in _answer(backend, [])
    assert default_model(SubtaskText("Go to", "brown_table")) == "NoMaD"
    assert default_model(SubtaskText("Put", "apple", "fridge")) == "RT-1-X"
    assert default_model(SubtaskText("End")) == "None"


def test_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expert source"):
        ExpertConfig(source="oracle")
    with pytest.raises(ValueError, match="non-empty plan"):
        ExpertConfig(source="plan")
    with pytest.raises(ValueError, match="not a subtask"):
        ExpertConfig(source="plan", plan=("[a, b, c, d]",))
    backend = ExpertBackend(ExpertConfig(source="keypath"))
    with pytest.raises(BackendError, match="needs the task's directory"):
        backend.start_episode(EpisodeInfo("free-1", "t"))
    with pytest.raises(BackendError, match="no plan loaded"):
        _answer(backend, [])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "keypath.json").write_text("[", encoding="utf-8")
    with pytest.raises(BackendError, match=r"keypath\.json:1:2: invalid JSON"):
        backend.start_episode(EpisodeInfo("x", "t", task_id="x", task_dir=broken))
