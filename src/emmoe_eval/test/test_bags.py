"""rosbag2 files of StepRecords: written with rosbags (MCAP and sqlite3), read back, scored like trajectory.jsonl."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from emmoe_core.convert import PICTURE_ENCODINGS, image_to_array

from emmoe_eval.bags import StepBagWriter, read_bag_runs, record_from_step, typestore
from emmoe_eval.cli import main
from emmoe_eval.records import RunInfo, step_from_record, view_arrays
from emmoe_eval.runs import Step


def ended(steps):
    """The steps with the end reason on the last one, as the evaluator records it (End: end, else step_limit)."""
    return [*steps[:-1], replace(steps[-1], end_reason="end" if steps[-1].is_end else "step_limit")]


def write_runs_bag(path, runs, storage="mcap"):
    with StepBagWriter(path, storage) as writer:
        stamp = 1_000_000_000
        for (task_id, run_id), steps in runs.items():
            info = RunInfo(task_id, int(run_id), "instruction", "mock", "text")
            for step in ended(steps):
                stamp += 1_000_000
                writer.write_record(record_from_step(step, info, stamp_ns=stamp))
    return path


def test_a_step_survives_the_record_round_trip(kit):
    views = [np.full((4, 6, 3), value, dtype=np.uint8) for value in (10, 20, 30, 40)]
    step = Step(2, "Put", "apple", "fridge", "RT-1-X", False, "Unable to put, the hand is empty", analysis="a",
                raw_output="raw", inventory=("apple",), error_type="L2",
                extra={"planning_seconds": 1.5, "execution_seconds": 0.25},
                visible={"front": ("fridge", "013_apple"), "back": ()},
                locations={"front": ("", "on kitchen_counter"), "back": ()})
    record = record_from_step(step, RunInfo("91", 3, "put it away"), views, stamp_ns=5)
    back = step_from_record(record)
    assert back == replace(step, images=("subtask2_front.png", "subtask2_left.png", "subtask2_back.png",
                                         "subtask2_right.png"))
    assert [array.tolist() for array in view_arrays(record)] == [view.tolist() for view in views]


def test_bgr_and_mono_images_are_converted():
    store = typestore()
    image_type = store.types["sensor_msgs/msg/Image"]
    header = record_from_step(Step(1, "End"), RunInfo("1", 1)).header
    bgr = image_type(header=header, height=1, width=2, encoding="bgr8", is_bigendian=0, step=8,  # padded rows
                     data=np.array([1, 2, 3, 4, 5, 6, 0, 0], dtype=np.uint8))
    assert image_to_array(bgr, PICTURE_ENCODINGS).tolist() == [[[3, 2, 1], [6, 5, 4]]]
    mono = image_type(header=header, height=2, width=1, encoding="mono8", is_bigendian=0, step=1,
                      data=np.array([7, 9], dtype=np.uint8))
    assert image_to_array(mono, PICTURE_ENCODINGS).tolist() == [[7], [9]]
    depth = image_type(header=header, height=1, width=1, encoding="32FC1", is_bigendian=0, step=4,
                       data=np.zeros(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="unsupported image encoding '32FC1'"):
        image_to_array(depth, PICTURE_ENCODINGS)
    with pytest.raises(ValueError, match="unsupported image encoding '32FC1'"):  # the evaluator saves pictures only
        view_arrays(SimpleNamespace(views=[bgr, depth]))


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bags_score_the_same_as_the_trajectories(handmade, tmp_path, capsys, kit, storage):
    handmade.corrupt_run.unlink()                      # a bag cannot hold a half-written line
    handmade.corrupt_run.parent.rmdir()
    (handmade.runs_dir / "3" / "2" / "run.json").write_text(json.dumps({"end_reason": "step_limit"}))  # as the bag
    bag = write_runs_bag(tmp_path / ("steps.mcap" if storage == "mcap" else "steps_bag"), kit.runs, storage)
    assert bag.is_file() if storage == "mcap" else (bag / "metadata.yaml").is_file()
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--json"]) == 0
    from_trajectories = json.loads(capsys.readouterr().out)
    assert main(["score-bag", str(bag), "--data", str(handmade.data_dir), "--json"]) == 0
    from_bag = json.loads(capsys.readouterr().out)
    assert from_bag == from_trajectories
    assert from_bag["runs"] == 5 and from_bag["SR"] == pytest.approx(2 / 5)


def test_runs_read_from_a_bag_equal_the_written_steps(tmp_path, kit):
    bag = write_runs_bag(tmp_path / "steps.mcap", kit.runs)
    found = read_bag_runs([bag])
    assert found.problems == []
    assert {(run.task_id, run.run_id): run.steps for run in found.runs} == {
        key: [replace(step, inventory=step.inventory or (), extra={"planning_seconds": 0.0, "execution_seconds": 0.0})
              for step in ended(steps)]
        for key, steps in kit.runs.items()}
    assert found.infos[("91", 2)].planner == "mock"


def test_rclpy_serialised_records_are_read(tmp_path):
    from emmoe_interfaces.msg import StepRecord
    from rclpy.serialization import serialize_message

    message = StepRecord(episode_id="91", run_index=1, step=1, success=True, feedback="None")
    message.subtask.action = "Go to"
    message.subtask.target = "bowl"
    with StepBagWriter(tmp_path / "rclpy.mcap") as writer:
        writer.write_serialized(serialize_message(message), 42)
    (run,) = read_bag_runs([tmp_path / "rclpy.mcap"]).runs
    assert (run.task_id, run.run_id, run.steps[0].action, run.steps[0].target) == ("91", "1", "Go to", "bowl")


def test_damaged_bags_and_restarted_runs_give_warnings(tmp_path, kit):
    damaged = tmp_path / "damaged.mcap"
    damaged.write_bytes(b"\x89MCAP0\r\n" + b"\x00" * 40)
    restarted = {("3", "1"): kit.runs[("3", "1")][:3] + kit.runs[("3", "1")]}
    bag = write_runs_bag(tmp_path / "restart.mcap", restarted)
    found = read_bag_runs([damaged, bag])
    assert found.problems[0].startswith(f"{damaged}: the bag is damaged")
    assert found.problems[1] == f"{bag}: episode 3 run 1 starts again; its earlier 3 step(s) are dropped"
    (run,) = found.runs
    assert len(run.steps) == 8 and not run.corrupt
    with pytest.raises(ValueError, match="exists already"):
        StepBagWriter(bag)


def _bag_with_images(path, steps):
    """One run whose records carry four 256x256 views each (so the writer closes a chunk every two records)."""
    views = [np.random.default_rng(index).integers(0, 255, (256, 256, 3), dtype=np.uint8) for index in range(4)]
    with StepBagWriter(path) as writer:
        info = RunInfo("91", 1, "instruction", "mock", "images")
        for number, step in enumerate(steps, start=1):
            writer.write_record(record_from_step(step, info, views=views, stamp_ns=number * 1_000_000))
    return path


def test_a_truncated_bag_is_scored_from_its_complete_messages(tmp_path, kit):
    steps = kit.runs[("3", "1")]
    (tmp_path / "91" / "1").mkdir(parents=True)
    bag = _bag_with_images(tmp_path / "91" / "1" / "episode.mcap", steps)
    data = bag.read_bytes()
    bag.write_bytes(data[:int(len(data) * 0.6)])
    found = read_bag_runs([bag])
    (run,) = found.runs
    assert 2 <= len(run.steps) < len(steps) and not run.corrupt
    assert [step.step for step in run.steps] == list(range(1, len(run.steps) + 1))
    assert "is damaged" in found.problems[0] and f"{len(run.steps)} complete StepRecord(s) recovered" in found.problems[0]
    # Its end marker went with the cut: not a planner result (issue 40), an infrastructure failure.
    assert (run.end_reason, run.error_msg) == ("error", f"{bag} holds no end marker of the run (its recording never "
                                                        "finished, or its end was lost)")


def test_an_unfinished_bag_is_read_from_its_partial_folder(tmp_path, kit):
    steps = kit.runs[("3", "1")]
    finished = _bag_with_images(tmp_path / "finished.mcap", steps)
    run_dir = tmp_path / "exp" / "91" / "1"
    partial = run_dir / "episode.mcap.partial"
    partial.mkdir(parents=True)
    data = finished.read_bytes()
    (partial / "episode.mcap.partial.mcap").write_bytes(data[:int(len(data) * 0.5)])
    found = read_bag_runs([run_dir / "episode.mcap"])
    (run,) = found.runs
    assert len(run.steps) >= 2 and "was not finished by its writer" in found.problems[0]
    assert run.infrastructure_failure
    assert [(run.steps, run.end_reason) for run in read_bag_runs([partial]).runs] == [(run.steps, "error")]
    (partial / "episode.mcap.partial.mcap").unlink()  # killed before its first record: still there, not a planner run
    found = read_bag_runs([partial])
    assert [(run.task_id, run.run_id, run.corrupt, run.end_reason) for run in found.runs] == [("91", "1", False, "error")]
    assert found.problems == [f"{partial}: the bag was not finished by its writer, and episode.mcap.partial holds no "
                              "MCAP file; the run never finished: an infrastructure failure, not a planner result"]


def test_an_unreadable_bag_counts_as_a_failed_run_not_a_missing_one(tmp_path):
    bag = tmp_path / "exp" / "91" / "2" / "episode.mcap"
    bag.parent.mkdir(parents=True)
    bag.write_bytes(b"not a bag at all")
    found = read_bag_runs([bag])
    (run,) = found.runs
    assert (run.task_id, run.run_id, run.steps, run.corrupt) == ("91", "2", [], True)
    assert found.problems[0].endswith("the run counts as failed")
