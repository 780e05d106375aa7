"""`homiebot train sft|dpo` on CPU with tiny models built from config, on the hand-made three-task set.

A text Llama (hidden 64, 2 layers, BPE tokenizer trained here) and a tiny LLaVA (CLIP tower, patch 32, four
256x256 images per sample) each go through SFT then DPO; the loss must fall, the checkpoint must reload with the
Auto classes and answer in the planner's three-line format.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from emmoe_core.protocol import ACTIONS, MODELS, parse_subtask
from homiebot.cli import main as homiebot_main
from homiebot_planner.training.build import BuildConfig, build_datasets
from homiebot_planner.training.config import TrainConfig
from homiebot_planner.training.tiny import build_tiny_qwen2_vl, build_tiny_text_model, build_tiny_vlm
from homiebot_planner.training.processors import load_processor
from homiebot_planner.training.trainer import TrainResult, run_training

from .conftest import STEPS_PER_TASK, TASKS, write_task

SYSTEM_PROMPT = "You are a one-armed household robot. Answer with Analysis, Subtask and Model."
PLAN = re.compile(r"^Analysis: (?P<analysis>[^\n]+)\nSubtask: (?P<subtask>\[[^\[\]\n]*\])\nModel: (?P<model>[^\n]+)$")


def valid_plan(text: str) -> bool:
    """The strict three-line answer with a protocol action and a protocol model (None for End)."""
    match = PLAN.match(text.strip())
    if match is None:
        return False
    subtask = parse_subtask(match["subtask"])
    if subtask.action == "End":
        return match["model"] == "None"
    return subtask.action in ACTIONS and match["model"] in MODELS


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three tasks built into EMMOE-100/ (JSON files and Hugging Face datasets)."""
    root = tmp_path_factory.mktemp("emmoe") / "EMMOE-100"
    for task_id, info in TASKS.items():
        write_task(root / "data" / "train", task_id, info, STEPS_PER_TASK[task_id])
    build_datasets(BuildConfig(data_dir=root / "data", out_dir=root))
    return root


def corpus(built: Path) -> list[str]:
    """Every text of the built data, to train the tiny tokenizers on."""
    sft = json.loads((built / "sft_train.json").read_text())
    dpo = json.loads((built / "dpo_train.json").read_text())
    return ([SYSTEM_PROMPT] + [turn["value"] for sample in sft for turn in sample["conversations"]]
            + [row[key] for row in dpo for key in ("chosen", "rejected")])


def prompts(built: Path) -> list[str]:
    """The SFT human turns (without image tokens)."""
    return [sample["conversations"][0]["value"].removeprefix("<image><image><image><image>\n")
            for sample in json.loads((built / "sft_train.json").read_text())]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def text_runs(built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, TrainResult]:
    """SFT (100 steps) then DPO (12 steps) of the tiny text model."""
    work = tmp_path_factory.mktemp("text")
    base = build_tiny_text_model(work / "base", corpus(built))
    sft = run_training(TrainConfig.from_preset(
        "sft", model=base, data=built, output_dir=work / "sft", max_steps=100, batch_size=4, learning_rate=5e-3,
        logging_steps=5, system_prompt=SYSTEM_PROMPT, device="cpu"))
    dpo = run_training(TrainConfig.from_preset(
        "dpo", model=work / "sft", data=built, output_dir=work / "dpo", max_steps=12, batch_size=4,
        learning_rate=5e-3, logging_steps=1, system_prompt=SYSTEM_PROMPT, device="cpu"))
    return {"sft": sft, "dpo": dpo}


def generate_text(checkpoint: Path, human: str) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    inputs = tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                            {"role": "user", "content": human}],
                                           add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**inputs, max_new_tokens=60, do_sample=False)
    return str(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))


def test_text_sft_loss_falls_and_the_checkpoint_plans(text_runs: dict[str, TrainResult], built: Path) -> None:
    sft = text_runs["sft"]
    losses = [loss for _, loss in sft.losses]

    assert sft.steps == 100 and sft.rows == 15 and sft.model_kind == "text"
    assert mean(losses[-3:]) < 0.6 * mean(losses[:2]), losses
    assert (sft.output_dir / "model.safetensors").is_file()
    assert (sft.output_dir / "adapter" / "adapter_config.json").is_file()
    adapter = json.loads((sft.output_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (128, 256)
    answers = [generate_text(sft.output_dir, human) for human in prompts(built)]
    assert sum(map(valid_plan, answers)) >= 10, answers


def test_text_dpo_loss_falls_and_the_checkpoint_plans(text_runs: dict[str, TrainResult], built: Path) -> None:
    dpo = text_runs["dpo"]
    losses = [loss for _, loss in dpo.losses]

    assert dpo.rows == 38 and dpo.steps == 12
    assert losses[0] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference before the first update
    assert mean(losses[-4:]) < math.log(2) - 0.01, losses
    adapter = json.loads((dpo.output_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (8, 8)
    answers = [generate_text(dpo.output_dir, human) for human in prompts(built)]
    assert sum(map(valid_plan, answers)) >= 10, answers


def test_model_card_records_counts_and_settings(text_runs: dict[str, TrainResult]) -> None:
    card = (text_runs["dpo"].output_dir / "README.md").read_text()
    summary = json.loads((text_runs["dpo"].output_dir / "training_summary.json").read_text())

    assert "# HomieBot planner, DPO stage" in card
    assert "- SFT samples in the build: 15; DPO rows: 38 (natural 2, model 12, order 12, action 12)" in card
    assert "- DPO rows used by kind: action 12, model 12, natural 2, order 12" in card
    for row in ("| LoRA rank | 8 |", "| LoRA alpha | 8 |", "| learning rate | 0.005 |", "| DPO beta | 0.1 |",
                "| schedule | cosine |", "| warm-up ratio | 0.03 |", "| global batch | 4 |",
                "| device, precision | cpu, float32 |", "| gradient checkpointing | False |"):
        assert row in card
    assert summary["settings"]["system_prompt"] == SYSTEM_PROMPT
    assert summary["steps"] == 12 and len(summary["losses"]) == 12


def test_validation_tasks_are_held_out_and_the_adapter_is_saved_in_half_precision(built: Path,
                                                                                 tmp_path: Path) -> None:
    from safetensors import safe_open

    base = build_tiny_text_model(tmp_path / "base", corpus(built))
    result = run_training(TrainConfig.from_preset(
        "sft", model=base, data=built, output_dir=tmp_path / "sft", max_steps=4, batch_size=4, learning_rate=5e-3,
        logging_steps=1, device="cpu", save="adapter", adapter_dtype="float16", validation_tasks=("3",),
        eval_steps=2, lora_r=4, lora_alpha=8))

    assert result.rows == 15 - 3 and result.summary["data_counts"]["validation_rows"] == 3  # task 3: 3 samples
    steps = [step for step, _ in result.summary["validation_losses"]]
    assert steps == [2, 4] and all(loss > 0 for _, loss in result.summary["validation_losses"])
    with safe_open(str(tmp_path / "sft" / "adapter_model.safetensors"), "pt") as weights:
        assert {str(weights.get_tensor(name).dtype) for name in weights.keys()} == {"torch.float16"}
    assert json.loads((tmp_path / "sft" / "planner_prompt.json").read_text()) == {
        "system_prompt": None, "answer_style": "analysis", "object_locations": False}  # release turns: no observation


def test_dpo_over_an_sft_adapter_keeps_its_answer_style_and_stacks_on_it(built: Path, tmp_path: Path) -> None:
    from homiebot_planner.backends.hf import HFBackend, HFConfig

    data = tmp_path / "decision"
    build_datasets(BuildConfig(data_dir=built / "data", out_dir=data, answer_style="decision"))
    base = build_tiny_text_model(tmp_path / "base", corpus(built))
    common = {"data": data, "max_steps": 2, "batch_size": 4, "learning_rate": 5e-3, "device": "cpu",
              "save": "adapter", "lora_r": 4, "lora_alpha": 8}
    sft = run_training(TrainConfig.from_preset("sft", model=base, output_dir=tmp_path / "sft", **common))
    dpo = run_training(TrainConfig.from_preset("dpo", model=tmp_path / "sft", output_dir=tmp_path / "dpo", **common))

    assert sft.summary["data_counts"]["answer_style"] == dpo.summary["data_counts"]["answer_style"] == "decision"
    for stage in ("sft", "dpo"):
        record = json.loads((tmp_path / stage / "planner_prompt.json").read_text())
        assert record["answer_style"] == "decision" and record["object_locations"] is False
    named = json.loads((tmp_path / "dpo" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert named == str((tmp_path / "sft").resolve())  # the DPO stage sits on the SFT adapter, not on a copy
    backend = HFBackend(HFConfig(model_path=str(tmp_path / "dpo")))
    assert backend.analysis_max_tokens == 0 and backend.loaded is not None


@pytest.fixture(scope="module")
def vlm_runs(built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, TrainResult]:
    """SFT (6 steps, four images per sample) then text-only DPO (6 steps) of the tiny LLaVA."""
    work = tmp_path_factory.mktemp("vlm")
    base = build_tiny_vlm(work / "base", corpus(built))
    sft = run_training(TrainConfig.from_preset(
        "sft", model=base, data=built, output_dir=work / "sft", max_steps=6, batch_size=2, learning_rate=5e-3,
        logging_steps=1, device="cpu"))
    dpo = run_training(TrainConfig.from_preset(
        "dpo", model=work / "sft", data=built, output_dir=work / "dpo", max_steps=6, batch_size=4,
        learning_rate=5e-3, logging_steps=1, device="cpu"))
    return {"sft": sft, "dpo": dpo}


def test_vlm_trains_on_four_images_through_both_stages(vlm_runs: dict[str, TrainResult]) -> None:
    sft, dpo = vlm_runs["sft"], vlm_runs["dpo"]
    sft_losses = [loss for _, loss in sft.losses]
    dpo_losses = [loss for _, loss in dpo.losses]

    assert sft.model_kind == "vlm" and sft.summary["data_counts"]["images"] is True
    assert mean(sft_losses[-3:]) < mean(sft_losses[:2]), sft_losses
    assert dpo_losses[0] == pytest.approx(math.log(2), abs=1e-4)
    assert mean(dpo_losses[-4:]) < math.log(2) - 0.005, dpo_losses
    # LoRA adapted the language model only.
    target = sft.summary["lora_target_modules"]
    assert re.fullmatch(target, "model.language_model.layers.0.self_attn.q_proj")
    assert not re.fullmatch(target, "model.vision_tower.encoder.layers.0.self_attn.q_proj")
    assert not re.fullmatch(target, "model.multi_modal_projector.linear_1")


def test_vlm_checkpoint_reloads_and_answers_from_four_images(vlm_runs: dict[str, TrainResult], built: Path) -> None:
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    checkpoint = vlm_runs["dpo"].output_dir
    processor = AutoProcessor.from_pretrained(checkpoint)
    model = AutoModelForImageTextToText.from_pretrained(checkpoint)
    sample = json.loads((built / "sft_train.json").read_text())[0]
    images = [Image.open(built / path) for path in sample["image"]]
    messages = [{"role": "user", "content": [{"type": "image"}] * 4 + [{"type": "text", "text": prompts(built)[0]}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    inputs = processor(images=images, text=[text], return_tensors="pt")

    output = model.generate(**inputs, max_new_tokens=20, do_sample=False)

    assert inputs["pixel_values"].shape == (4, 3, 256, 256)
    assert (inputs["input_ids"] == model.config.image_token_id).sum() == 4 * 64  # (256 / 32)^2 tokens per image
    assert output.shape[1] > inputs["input_ids"].shape[1]


def test_qwen2_vl_trains_through_both_stages_without_torchvision(built: Path, tmp_path: Path) -> None:
    from PIL import Image
    from transformers import AutoModelForImageTextToText

    base = build_tiny_qwen2_vl(tmp_path / "base", corpus(built))
    sft = run_training(TrainConfig.from_preset(
        "sft", model=base, data=built, output_dir=tmp_path / "sft", max_steps=3, batch_size=2, learning_rate=5e-3,
        logging_steps=1, device="cpu"))
    dpo = run_training(TrainConfig.from_preset(
        "dpo", model=tmp_path / "sft", data=built, output_dir=tmp_path / "dpo", max_steps=2, batch_size=4,
        learning_rate=5e-3, logging_steps=1, device="cpu"))

    assert (sft.steps, dpo.steps, sft.summary["data_counts"]["images"]) == (3, 2, True)
    assert not re.fullmatch(sft.summary["lora_target_modules"], "model.visual.blocks.0.attn.qkv")
    processor = load_processor(dpo.output_dir)
    model = AutoModelForImageTextToText.from_pretrained(dpo.output_dir)
    sample = json.loads((built / "sft_train.json").read_text())[0]
    messages = [{"role": "user", "content": [{"type": "image"}] * 4 + [{"type": "text", "text": prompts(built)[0]}]}]
    inputs = processor(images=[Image.open(built / path) for path in sample["image"]],
                       text=[processor.apply_chat_template(messages, add_generation_prompt=True)], return_tensors="pt")
    assert (inputs["input_ids"] == model.config.image_token_id).sum() == 4 * 81
    assert model.generate(**inputs, max_new_tokens=5, do_sample=False).shape[1] > inputs["input_ids"].shape[1]


def test_4bit_base_trains_and_merges_into_full_precision(built: Path, tmp_path: Path) -> None:
    pytest.importorskip("bitsandbytes", reason="4-bit loading needs bitsandbytes")
    from transformers import AutoModelForCausalLM

    base = build_tiny_text_model(tmp_path / "base", corpus(built))
    result = run_training(TrainConfig.from_preset(
        "sft", model=base, data=built, output_dir=tmp_path / "sft", max_steps=2, batch_size=4, logging_steps=1,
        load_in_4bit=True, device="cpu"))

    assert result.summary["precision"] == "4-bit NF4 base, float32 compute"
    config = json.loads((tmp_path / "sft" / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "float32"
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "sft")
    assert model.model.layers[0].self_attn.q_proj.weight.dtype.is_floating_point


def test_hf_planner_backend_loads_and_plans_with_the_checkpoints(
        text_runs: dict[str, TrainResult], vlm_runs: dict[str, TrainResult], built: Path) -> None:
    import numpy as np
    from PIL import Image

    from homiebot_planner.backends.base import ChatMessage, GenerationRequest
    from homiebot_planner.backends.hf import HFBackend, HFConfig
    from homiebot_planner.parsing import is_valid, parse_output

    text_backend = HFBackend(HFConfig(model_path=str(text_runs["dpo"].output_dir), in_context_example=False))
    answers = [text_backend.generate(GenerationRequest(
        messages=(ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", human)), temperature=0.0,
        max_new_tokens=60)) for human in prompts(built)]

    assert text_backend.observation_mode == "text"
    assert sum(is_valid(parse_output(answer)) for answer in answers) >= 10, answers

    vlm_backend = HFBackend(HFConfig(model_path=str(vlm_runs["dpo"].output_dir)))
    sample = json.loads((built / "sft_train.json").read_text())[0]
    views = tuple(np.asarray(Image.open(built / path).convert("RGB")) for path in sample["image"])
    answer = vlm_backend.generate(GenerationRequest(messages=(ChatMessage("user", prompts(built)[0], images=views),),
                                                    temperature=0.0, max_new_tokens=8))

    assert vlm_backend.observation_mode == "images" and isinstance(answer, str)


def test_cli_trains_an_adapter_checkpoint_that_peft_loads(built: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from peft import AutoPeftModelForCausalLM

    base = build_tiny_text_model(tmp_path / "base", corpus(built))
    status = homiebot_main(["train", "sft", "--model", str(base), "--data", str(built), "--output",
                            str(tmp_path / "ckpt"), "--max-steps", "2", "--batch-size", "4",
                            "--per-device-batch-size", "2", "--logging-steps", "1", "--save", "adapter",
                            "--device", "cpu"])

    output = capsys.readouterr().out
    assert status == 0, output
    assert "sft: 15 rows, 2 steps" in output and f"checkpoint: {tmp_path / 'ckpt'}" in output
    summary = json.loads((tmp_path / "ckpt" / "training_summary.json").read_text())
    assert (summary["per_device_batch_size"], summary["gradient_accumulation_steps"]) == (2, 2)
    model: Any = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "ckpt")
    assert model.peft_config["default"].r == 128
    # By default every sample starts with the planner's own system prompt (text variant for a text model).
    from homiebot_planner.prompts import system_prompt

    assert summary["settings"]["system_prompt"] == system_prompt("text")
    from homiebot_planner.backends.hf import HFBackend, HFConfig

    loaded = HFBackend(HFConfig(model_path=str(tmp_path / "ckpt"))).loaded.model  # the adapter merged at load time
    expected = model.merge_and_unload().state_dict()
    assert all(torch.equal(tensor, expected[name]) for name, tensor in loaded.state_dict().items())
    # (A DPO stage over such an adapter: test_dpo_over_an_sft_adapter_keeps_its_answer_style_and_stacks_on_it.)


def test_cli_refuses_a_max_length_shorter_than_the_data(built: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    base = build_tiny_text_model(tmp_path / "base", corpus(built))

    status = homiebot_main(["train", "sft", "--model", str(base), "--data", str(built), "--output",
                            str(tmp_path / "ckpt"), "--max-length", "32", "--device", "cpu"])

    error = capsys.readouterr().err
    assert status == 2
    assert re.search(r"the longest sample is \d+ tokens, more than --max-length 32; raise --max-length", error)
