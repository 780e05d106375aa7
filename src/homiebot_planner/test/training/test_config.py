"""TrainConfig: the paper's presets, overrides, validation and the global-batch layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from homiebot_planner.training.config import TrainConfig, TrainingSetupError
from homiebot_planner.training.trainer import dataset_path, lora_target_pattern, model_kind


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    paths = {"model": tmp_path / "model", "data": tmp_path / "data", "output_dir": tmp_path / "out"}
    paths["model"].mkdir()
    paths["data"].mkdir()
    return paths


def test_sft_preset_is_the_papers(folders: dict[str, Path]) -> None:
    config = TrainConfig.from_preset("sft", **folders)

    assert (config.lora_r, config.lora_alpha, config.learning_rate) == (128, 256, 5e-4)
    assert (config.epochs, config.batch_size, config.lr_scheduler, config.warmup_ratio) == (1.0, 16, "cosine", 0.03)
    assert (config.max_length, config.lora_dropout, config.weight_decay) == (2048, 0.05, 0.0)


def test_dpo_preset_is_the_papers(folders: dict[str, Path]) -> None:
    config = TrainConfig.from_preset("dpo", **folders)

    assert (config.lora_r, config.lora_alpha, config.learning_rate, config.beta) == (8, 8, 5e-6, 0.1)
    assert (config.epochs, config.batch_size, config.lr_scheduler, config.warmup_ratio) == (1.0, 16, "cosine", 0.03)
    assert (config.max_length, config.max_grad_norm) == (2048, 0.3)


def test_overrides_replace_the_preset_and_none_keeps_it(folders: dict[str, Path]) -> None:
    config = TrainConfig.from_preset("dpo", lora_r=16, learning_rate=None, **folders)

    assert (config.lora_r, config.learning_rate) == (16, 5e-6)
    with pytest.raises(ValueError, match="unknown training setting"):
        TrainConfig.from_preset("dpo", lora_rank=16, **folders)


@pytest.mark.parametrize(("settings", "message"), [
    ({"stage": "ppo"}, "stage must be one of sft, dpo"),
    ({"learning_rate": 0.0}, "learning_rate must be positive"),
    ({"lora_dropout": 1.0}, r"lora_dropout must be in \[0, 1\)"),
    ({"max_steps": 0}, "max_steps must be -1"),
    ({"save": "full"}, "save must be one of merged, adapter"),
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda"),
])
def test_invalid_settings_say_what_to_fix(folders: dict[str, Path], settings: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"stage": "sft", **folders, **settings}

    with pytest.raises(ValueError, match=message):
        TrainConfig(**arguments)  # type: ignore[arg-type]


def test_missing_folders_are_named(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--model .*nowhere: no such folder"):
        TrainConfig.from_preset("sft", **{**folders, "model": tmp_path / "nowhere"})
    with pytest.raises(ValueError, match=r"--data .*nowhere: no such folder"):
        TrainConfig.from_preset("sft", **{**folders, "data": tmp_path / "nowhere"})


def test_global_batch_layout(folders: dict[str, Path]) -> None:
    paper = TrainConfig.from_preset("sft", **folders)
    small_steps = TrainConfig.from_preset("sft", per_device_batch_size=4, **folders)

    assert paper.batch_layout(1) == (16, 1)
    assert paper.batch_layout(2) == (8, 1)
    assert small_steps.batch_layout(1) == (4, 4)
    assert small_steps.batch_layout(2) == (4, 2)
    with pytest.raises(TrainingSetupError, match="batch_size 16 is not a multiple of per-device batch 4 x 3"):
        small_steps.batch_layout(3)


def test_model_and_dataset_folders_are_checked(folders: dict[str, Path]) -> None:
    config = TrainConfig.from_preset("sft", **folders)

    with pytest.raises(TrainingSetupError, match="no config.json"):
        model_kind(folders["model"])
    (folders["model"] / "adapter_config.json").write_text("{}")
    with pytest.raises(TrainingSetupError, match="adapter_config.json names no base model"):
        model_kind(folders["model"])  # an adapter is accepted (its stack is merged), but it must name its base
    with pytest.raises(TrainingSetupError, match=r"no hf/sft_train dataset inside"):
        dataset_path(config)


def test_lora_targets_the_language_model_only() -> None:
    import torch

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vision_tower = torch.nn.ModuleDict({"q_proj": torch.nn.Linear(2, 2), "fc1": torch.nn.Linear(2, 2)})
            self.multi_modal_projector = torch.nn.Linear(2, 2)
            self.language_model = torch.nn.ModuleDict({"q_proj": torch.nn.Linear(2, 2),
                                                       "down_proj": torch.nn.Linear(2, 2)})
            self.lm_head = torch.nn.Linear(2, 2)

    pattern = lora_target_pattern(Toy())

    names = ["vision_tower.q_proj", "vision_tower.fc1", "multi_modal_projector", "language_model.q_proj",
             "language_model.down_proj", "lm_head"]
    assert [name for name in names if re.fullmatch(pattern, name)] == ["language_model.q_proj",
                                                                        "language_model.down_proj"]
