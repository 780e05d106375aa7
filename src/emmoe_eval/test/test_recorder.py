"""The evaluator's core without ROS: run folders written step by step, runs scored when they end."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from emmoe_eval.bags import (
    STEP_RECORD_TYPE,
    end_marker_record,
    read_bag_runs,
    record_from_step,
    serialize_record,
    typestore,
)
from emmoe_eval.cli import main
from emmoe_eval.conversation import read_conversation_run
from emmoe_eval.recorder import Evaluator, EvaluatorConfig
from emmoe_eval.records import RunInfo, step_from_record
from emmoe_eval.runs import read_trajectory


def views_for(step: int) -> list[np.ndarray]:
    return [np.full((8, 8, 3), 10 * step + index, dtype=np.uint8) for index in range(4)]


def feed(evaluator: Evaluator, info: RunInfo, steps, with_views: bool = True, end_reason: str = ""):
    """Send steps as the node does (the step converted from a serialised record, which goes to the bag); the last
    one carries `end_reason`, as the planner sets it on a run's last record."""
    outcomes = []
    for number, step in enumerate(steps, start=1):
        if number == len(steps) and end_reason:
            step = replace(step, end_reason=end_reason)
        views = views_for(step.step) if with_views else []
        record = record_from_step(step, info, views, stamp_ns=step.step * 1000)
        data = bytes(typestore().serialize_cdr(record, STEP_RECORD_TYPE))
        outcomes.append(evaluator.handle(info, step_from_record(record), views, data, step.step * 1000,
                                         end_reason=step.end_reason or ""))
    return outcomes


def test_a_run_is_recorded_step_by_step_and_scored_at_end(handmade, tmp_path, kit):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path / "out", data_dir=handmade.data_dir))
    info = RunInfo("3", 1, "find a cold apple and put it on the kitchen_counter", "mock", "text")
    steps = kit.runs[("3", "1")]
    run_dir = tmp_path / "out" / "3" / "1"
    outcomes = feed(evaluator, info, steps[:3])
    # Before the run ends, every step so far is already on disk.
    assert [step.step for step in read_trajectory(run_dir / "trajectory.jsonl").steps] == [1, 2, 3]
    assert all(outcome.finished == [] for outcome in outcomes) and evaluator.open_runs == [("3", 1)]
    (last, *_) = reversed(feed(evaluator, info, steps[3:], end_reason="end"))
    (result,) = last.finished
    # Hand values of run 3/1 (conftest): TP 1, success, 8 steps, L* 7, 1 re-plan, one D1 error.
    assert (result["task_progress"], result["success"], result["ended_with_end"], result["end_reason"]) == \
        (1.0, True, True, "end")
    assert (result["steps"], result["expert_steps"], result["replans"], result["errors"]) == (8, 7, 1, {"D1": 1})
    assert json.loads((run_dir / "score.json").read_text()) == result
    assert json.loads((run_dir / "run.json").read_text())["planner"] == "mock"
    pixels = np.asarray(Image.open(run_dir / "subtask3_back.png"))
    assert pixels.shape == (8, 8, 3) and int(pixels[0, 0, 0]) == 32
    trajectory = read_trajectory(run_dir / "trajectory.jsonl")
    assert trajectory.steps[2].images == ("subtask3_front.png", "subtask3_left.png", "subtask3_back.png",
                                          "subtask3_right.png")
    # The bag holds the same steps as trajectory.jsonl; conversation.json rebuilds the same subtasks.
    (bag_run,) = read_bag_runs([run_dir / "episode.mcap"]).runs
    assert bag_run.steps == trajectory.steps and bag_run.end_reason == trajectory.end_reason == "end"
    assert [step.subtask for step in read_conversation_run(run_dir / "conversation.json").steps] == \
        [step.subtask for step in steps]
    assert not (run_dir / "episode.mcap.partial").exists()


def test_runs_end_on_the_planners_end_reason_or_on_request(handmade, tmp_path, kit):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path, data_dir=handmade.data_dir, write_views=False))
    outcomes = feed(evaluator, RunInfo("3", 2), kit.runs[("3", "2")][:4], with_views=False, end_reason="step_limit")
    (result,) = outcomes[-1].finished
    # steps 1-4 of run 3/2: Go to fridge, x Pick, Open fridge, x Pick -> TP 2/6, 1 re-plan, step limit
    assert result["end_reason"] == "step_limit" and result["task_progress"] == pytest.approx(2 / 6)
    assert result["replans"] == 1 and not list((tmp_path / "3" / "2").glob("*.png"))
    feed(evaluator, RunInfo("91", 2), kit.runs[("91", "2")][:2], with_views=False)
    (requested,) = evaluator.finish_all()
    # A run the planner never ended is an infrastructure failure, never the planner's result.
    assert (requested["end_reason"], requested["steps"]) == ("error", 2)
    assert requested["error_msg"] == "closed on request before the planner ended the run"
    assert evaluator.open_runs == []
    run_dir = tmp_path / "91" / "2"
    assert read_trajectory(run_dir / "trajectory.jsonl").end_reason == "error"
    (bag_run,) = read_bag_runs([run_dir / "episode.mcap"]).runs
    assert (bag_run.end_reason, len(bag_run.steps)) == ("error", 2)


def test_a_run_end_marker_closes_a_run_even_without_steps(handmade, tmp_path):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path, data_dir=handmade.data_dir, write_views=False))
    info = RunInfo("91", 1, "put the red bowl on the brown table", "openai", "images")
    marker = end_marker_record(info, 1, "gave_up")
    (result,) = evaluator.handle(info, None, (), serialize_record(marker), 1000, end_reason="gave_up").finished
    # A planner that never parses: no step, no End credit, TP 0, not ended by the agent.
    assert (result["end_reason"], result["steps"], result["task_progress"], result["ended_with_end"]) == \
        ("gave_up", 0, 0.0, False)
    run_dir = tmp_path / "91" / "1"
    run = read_trajectory(run_dir / "trajectory.jsonl")
    assert (run.steps, run.end_reason) == ([], "gave_up")
    (bag_run,) = read_bag_runs([run_dir / "episode.mcap"]).runs
    assert (bag_run.steps, bag_run.end_reason) == ([], "gave_up")
    assert evaluator.handle(info, None, end_reason="finished").problems == [
        "episode 91 run 1: unknown end reason 'finished'; expected one of end, step_limit, gave_up, cancelled, error; "
        "ignored"]


def test_unknown_tasks_get_progress_minus_one(tmp_path, kit):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path, record_bag=False))
    (outcome,) = feed(evaluator, RunInfo("free-1", 1, "tidy up"), [kit.end(1)], with_views=False, end_reason="end")
    (result,) = outcome.finished
    assert (result["task_known"], result["task_progress"], result["success"], result["bag"]) == \
        (False, -1.0, False, None)
    assert result["note"] == "no data_dir set"
    assert not (tmp_path / "free-1" / "1" / "episode.mcap").exists()


def test_restarts_late_steps_and_gaps_are_reported(handmade, tmp_path, kit):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path, data_dir=handmade.data_dir, write_views=False))
    info = RunInfo("91", 1)
    steps = kit.runs[("91", "1")]
    feed(evaluator, info, steps[:2], with_views=False)
    (restart,) = feed(evaluator, info, steps[:1], with_views=False)
    assert restart.problems == ["episode 91 run 1: step 1 again; the run restarts and its earlier recording is replaced"]
    (gap,) = feed(evaluator, info, steps[2:3], with_views=False)
    assert gap.problems == ["episode 91 run 1: step 3 follows step 1"]
    feed(evaluator, info, steps[3:], with_views=False, end_reason="end")
    (late,) = feed(evaluator, info, steps[1:2], with_views=False)
    assert late.problems == ["episode 91 run 1: step 2 arrived after the run ended; ignored"]
    assert [step.step for step in read_trajectory(tmp_path / "91" / "1" / "trajectory.jsonl").steps] == [1, 3, 4, 5]
    (bag_run,) = read_bag_runs([tmp_path / "91" / "1" / "episode.mcap"]).runs
    assert [step.step for step in bag_run.steps] == [1, 3, 4, 5]


def test_config_errors_say_what_to_fix(tmp_path):
    with pytest.raises(ValueError, match="data_dir .* is not a folder"):
        EvaluatorConfig(out_dir=tmp_path, data_dir=tmp_path / "missing")
    with pytest.raises(ValueError, match="compat must be one of default, official"):
        EvaluatorConfig(out_dir=tmp_path, compat="paper")


def test_a_run_whose_files_cannot_be_written_ends_as_an_infrastructure_failure(handmade, tmp_path, kit,
                                                                                monkeypatch):
    import errno

    from emmoe_eval.runs import WRITE_FAILURE

    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path / "out", data_dir=handmade.data_dir))
    info = RunInfo("3", 1, "find a cold apple and put it on the kitchen_counter", "mock", "text")
    steps = kit.runs[("3", "1")]
    run_dir = tmp_path / "out" / "3" / "1"
    feed(evaluator, info, steps[:2])
    saved = Image.Image.save

    def disk_full(image, path, *args, **kwargs):
        if "subtask3_" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return saved(image, path, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "save", disk_full)
    third, fourth = feed(evaluator, info, steps[2:4])

    (result,) = third.finished
    assert result["end_reason"] == "error" and result["success"] is False and result["task_progress"] == -1.0
    assert result["error_msg"].startswith(f"{WRITE_FAILURE}: [Errno 28] No space left on device")
    assert evaluator.open_runs == [] and fourth.finished == []
    assert "arrived after the run ended" in fourth.problems[0]
    assert json.loads((run_dir / "score.json").read_text()) == result  # written: only the images failed
    # A full disk at the score itself leaves no score (so the run is re-run on resume), never a truncated one.
    monkeypatch.setattr(Image.Image, "save", saved)
    real_replace = __import__("os").replace

    def full_at_rename(source, target):
        if str(target).endswith("score.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target)

    monkeypatch.setattr("emmoe_eval.recorder.os.replace", full_at_rename)
    (run_dir / "score.json").unlink()
    (last, *_) = reversed(feed(evaluator, info, steps, end_reason="end"))
    (result,) = last.finished
    assert result["end_reason"] == "error" and result["error_msg"].startswith(WRITE_FAILURE)
    assert not (run_dir / "score.json").exists() and not (run_dir / "score.json.partial").exists()


def test_a_run_cut_by_a_killed_evaluator_is_never_a_planner_result(handmade, tmp_path, kit, capsys):
    """Issue 40: the evaluator is killed mid-run (nothing closes the run): its folder keeps trajectory.jsonl without an
    end marker, run.json without an end reason and the bag writer's episode.mcap.partial/. `score`, and `score-bag`
    over the README's glob (which names finished bags only), both report it as an infrastructure failure."""
    out = tmp_path / "out"
    evaluator = Evaluator(EvaluatorConfig(out_dir=out, data_dir=handmade.data_dir, write_views=False))
    feed(evaluator, RunInfo("91", 1), kit.runs[("91", "1")], with_views=False, end_reason="end")
    feed(evaluator, RunInfo("91", 2), kit.runs[("91", "1")][:3], with_views=False)  # killed here
    cut = out / "91" / "2"
    assert {path.name for path in cut.iterdir()} == {"trajectory.jsonl", "run.json", "episode.mcap.partial"}
    options = ["--data", str(handmade.data_dir), "--json", "--split", "test", "--resamples", "20", "--verbose"]
    assert main(["score", "--runs", str(out), *options]) == 0
    captured = capsys.readouterr()
    assert {key: json.loads(captured.out)[key] for key in ("runs", "SR", "infrastructure_failures")} == \
        {"runs": 1, "SR": 1.0, "infrastructure_failures": 1}
    assert (f"task 91 run 2: infrastructure failure: the recording never finished: no end marker, and "
            f"{cut / 'episode.mcap.partial'} is a bag its writer never closed") in captured.err
    bags = sorted(out.glob("*/*/episode.mcap"))
    assert bags == [out / "91" / "1" / "episode.mcap"]
    assert main(["score-bag", *map(str, bags), *options]) == 0
    captured = capsys.readouterr()
    assert {key: json.loads(captured.out)[key] for key in ("runs", "SR", "infrastructure_failures")} == \
        {"runs": 1, "SR": 1.0, "infrastructure_failures": 1}
    assert f"{cut / 'episode.mcap.partial'}: an unfinished bag beside the named ones; read too" in captured.err
    assert "task 91 run 2: infrastructure failure" in captured.err


def test_run_json_marks_a_run_that_never_ended_even_without_a_bag(handmade, tmp_path, kit):
    evaluator = Evaluator(EvaluatorConfig(out_dir=tmp_path, data_dir=handmade.data_dir, record_bag=False,
                                          write_views=False))
    steps = kit.runs[("91", "1")]
    feed(evaluator, RunInfo("91", 1), steps[:2], with_views=False)
    path = tmp_path / "91" / "1" / "trajectory.jsonl"
    cut = read_trajectory(path)
    assert (cut.end_reason, cut.infrastructure_failure) == ("error", True)
    assert cut.error_msg == (f"the recording never finished: no end marker, and {path.parent / 'run.json'} has no "
                             "end reason")
    feed(evaluator, RunInfo("91", 1), steps, with_views=False, end_reason="end")
    assert read_trajectory(path).end_reason == "end"
