"""`homiebot data build` on the hand-made three-task set: counts from the rules, file shapes, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homiebot.cli import main as homiebot_main
from homiebot_planner.training.build import BuildConfig, build_datasets
from homiebot_planner.training.trajectory import TrajectoryError

from .conftest import STEPS_PER_TASK, TASK_1, TASKS, write_task

# Expected counts, worked out by hand from EMMOE.md section 6:
#   task 1: 8 blocks, step 3 failed         -> SFT 8 - 1 = 7;  non-End successes 6 -> 18 rows; natural 1 (3 -> 4)
#   task 2: 7 blocks, steps 2 and 3 failed  -> SFT 7 - 2 = 5;  non-End successes 4 -> 12 rows; natural 1 (3 -> 4)
#   task 3: 4 blocks, step 3 failed         -> SFT 4 - 1 = 3;  non-End successes 2 ->  6 rows; natural 0 (3 -> End)
SFT_TOTAL = 7 + 5 + 3  # 15
NATURAL = 1 + 1 + 0  # 2
PER_KIND = 6 + 4 + 2  # 12 model-change, 12 order-change, 12 action-change rows
DPO_TOTAL = NATURAL + 3 * PER_KIND  # 38


def test_counts_follow_the_rules(emmoe_data: Path, tmp_path: Path) -> None:
    counts = build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out", hf_datasets=False))

    assert (counts.trajectories, counts.steps, counts.failed_steps) == (3, 8 + 7 + 4, 1 + 2 + 1)
    assert counts.sft == SFT_TOTAL
    assert counts.dpo == {"natural": NATURAL, "model": PER_KIND, "order": PER_KIND, "action": PER_KIND}
    assert counts.dpo_total == DPO_TOTAL
    written = json.loads((tmp_path / "out" / "counts_train.json").read_text())
    assert (written["sft"], written["dpo_total"]) == (SFT_TOTAL, DPO_TOTAL)


def test_sft_json_is_llava_style_with_images_relative_to_the_output(emmoe_data: Path) -> None:
    out = emmoe_data.parent  # EMMOE-100/, as the release lays it out
    build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=out, hf_datasets=False))

    sft = json.loads((out / "sft_train.json").read_text())
    assert len(sft) == SFT_TOTAL
    first = sft[0]
    assert set(first) == {"id", "image", "conversations"}
    assert first["id"] == "1_1"
    assert first["image"] == [f"data/train/1/subtask1_{view}.png" for view in ("front", "left", "back", "right")]
    assert all((out / path).is_file() for sample in sft for path in sample["image"])
    human, gpt = first["conversations"]
    assert human["from"] == "human" and gpt["from"] == "gpt"
    assert human["value"].startswith("<image><image><image><image>\nTask: Put the apple")
    assert gpt["value"].endswith("\nSubtask: [Go to, fridge]\nModel: NoMaD")
    dpo = json.loads((out / "dpo_train.json").read_text())
    assert len(dpo) == DPO_TOTAL
    assert all(set(row) == {"prompt", "chosen", "rejected"} for row in dpo)
    assert all("<image>" not in row["prompt"] and "Analysis:" not in row["chosen"] for row in dpo)


def test_hugging_face_datasets_hold_messages_images_and_preference_pairs(emmoe_data: Path, tmp_path: Path) -> None:
    import datasets

    build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out"))

    sft = datasets.load_from_disk(str(tmp_path / "out" / "hf" / "sft_train"))
    assert len(sft) == SFT_TOTAL
    row = sft[0]
    assert [message["role"] for message in row["messages"]] == ["user", "assistant"]
    assert row["messages"][0]["content"].startswith("Task: ")
    assert len(row["images"]) == 4 and row["images"][0].size == (256, 256)
    assert row["images"][0].getpixel((0, 0)) == (205, 45, 45)  # the front view of step 1, embedded in the dataset
    dpo = datasets.load_from_disk(str(tmp_path / "out" / "hf" / "dpo_train"))
    assert len(dpo) == DPO_TOTAL
    assert sorted(set(dpo["kind"])) == ["action", "model", "natural", "order"]
    assert dpo[0]["prompt"][0]["role"] == "user" and dpo[0]["chosen"][0]["role"] == "assistant"


def test_text_only_build_needs_no_images(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data / "train", "1", TASK_1, 8, images=False)

    with pytest.raises(TrajectoryError, match=r"block 1 \(line 3\): missing image .*subtask1_front.png"):
        build_datasets(BuildConfig(data_dir=data, out_dir=tmp_path / "out", hf_datasets=False))
    build_datasets(BuildConfig(data_dir=data, out_dir=tmp_path / "out", images=False, hf_datasets=False))

    sft = json.loads((tmp_path / "out" / "sft_train.json").read_text())
    assert "image" not in sft[0] and sft[0]["conversations"][0]["value"].startswith("Task: ")


def test_cli_prints_counts_per_kind(emmoe_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = homiebot_main(["data", "build", "--data", str(emmoe_data), "--out", str(tmp_path / "out"), "--no-hf"])

    output = capsys.readouterr().out
    assert status == 0
    assert "SFT samples: 15" in output
    assert "DPO rows: 38 (natural 2, model 12, order 12, action 12)" in output
    assert "3 trajectories x 1 text variant(s), 19 subtasks (4 failed)" in output


def test_cli_reports_a_malformed_trajectory_in_one_line(emmoe_data: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    info = emmoe_data / "train" / "2" / "info.txt"
    info.write_text(info.read_text().replace("[Go to, sofa] (NoMaD)", "[Go to, sofa] (Nomad)"))

    status = homiebot_main(["data", "build", "--data", str(emmoe_data), "--out", str(tmp_path / "out")])

    error = capsys.readouterr().err
    assert status == 2
    assert error.strip() == (f"homiebot data: error: {info}: block 5 (line 23): unknown model 'Nomad'; expected one of "
                             "NoMaD, PixNav, octo, RT-1-X")
    assert not (tmp_path / "out" / "sft_train.json").exists()


@pytest.mark.parametrize("leaked", ["95", "91_v2"])
def test_a_test_task_or_its_variant_never_reaches_training_data(emmoe_data: Path, tmp_path: Path,
                                                                leaked: str) -> None:
    write_task(emmoe_data / "train", leaked, TASKS["1"], STEPS_PER_TASK["1"])
    with pytest.raises(TrajectoryError, match=f"test task\\(s\\) {leaked} .*must never reach training data"):
        build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out", hf_datasets=False))
    assert not (tmp_path / "out").exists()


def test_without_failures_builds_clean_demonstrations_renumbered(emmoe_data: Path, tmp_path: Path) -> None:
    counts = build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out", hf_datasets=False,
                                        designed_failures=False))

    assert (counts.steps, counts.failed_steps, counts.sft) == (8 - 1 + 7 - 2 + 4 - 1, 0, SFT_TOTAL)
    assert counts.dpo["natural"] == 0 and counts.dpo["model"] == PER_KIND
    sft = json.loads((tmp_path / "out" / "sft_train.json").read_text())
    task_1 = [sample for sample in sft if sample["id"].startswith("1_")]
    assert [sample["id"] for sample in task_1] == [f"1_{number}" for number in range(1, 8)]
    third = task_1[2]["conversations"][0]["value"]  # was block 4: the re-plan after the failed Pick
    assert "Feedback: None" in third and "fail" not in third
    assert "(1)[Go to, fridge] (NoMaD) (success)\n(2)[Open, fridge] (octo) (success)\n\nFeedback" in third
    assert task_1[2]["image"][0].endswith("data/train/1/subtask4_front.png")  # keeps its own block's observations
