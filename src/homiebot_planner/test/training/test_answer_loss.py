"""The answer-only SFT loss and its subtask weighting, on a tiny Llama built from config (no trl Trainer run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from homiebot_planner.training.answer_loss import answer_only_sft_trainer, bracket_token_ids, subtask_mask
from homiebot_planner.training.tiny import build_tiny_text_model

ANSWER = "Subtask: [Pick, apple]\nModel: RT-1-X"


def test_the_subtask_mask_runs_from_the_opening_to_the_closing_bracket_token() -> None:
    targets = torch.tensor([[1, 5, 2, 3, 7, 4, 4], [5, 7, 1, 5, 2, 2, 2]])
    mask = subtask_mask(targets, torch.tensor([5]), torch.tensor([7]))
    assert mask.tolist() == [[False, True, True, True, True, False, False],
                             [True, True, False, True, True, True, True]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_tiny_text_model(tmp_path_factory.mktemp("tiny"), [ANSWER, "Task: put the apple away"] * 20)
    return AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)


def _loss(weight: float, tokenizer: object, model: object, inputs: dict[str, torch.Tensor]) -> float:
    trainer_class = answer_only_sft_trainer(weight)
    trainer = trainer_class.__new__(trainer_class)  # compute_loss needs only the tokenizer
    trainer.processing_class = tokenizer
    with torch.no_grad():
        return float(trainer.compute_loss(model, inputs))


def test_the_subtask_tokens_count_weight_times_in_the_answer_loss(tiny: tuple[object, object]) -> None:
    tokenizer, model = tiny
    prompt = tokenizer("Task: put the apple away\n")["input_ids"]
    answer = tokenizer(ANSWER, add_special_tokens=False)["input_ids"]
    input_ids = torch.tensor([prompt + answer])
    labels = torch.tensor([[-100] * len(prompt) + answer])
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    opening, closing = bracket_token_ids(tokenizer)
    assert opening and closing
    # Per-token cross-entropy of the answer, and which of its tokens lie in "[Pick, apple]".
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0, len(prompt) - 1:-1].float()
    per_token = torch.nn.functional.cross_entropy(logits, torch.tensor(answer), reduction="none")
    inside = subtask_mask(torch.tensor([answer]), torch.tensor(opening), torch.tensor(closing))[0]
    decoded = tokenizer.decode([token for token, flag in zip(answer, inside.tolist()) if flag])
    assert decoded.replace(" ", "").startswith("[Pick,apple]") and "Model" not in decoded
    plain, weighted = _loss(1.0, tokenizer, model, inputs), _loss(3.0, tokenizer, model, inputs)
    assert plain == pytest.approx(float(per_token.mean()), rel=1e-4)
    assert weighted == pytest.approx(float((per_token * (1 + 2 * inside)).sum() / len(answer)), rel=1e-4)
    assert weighted > plain


def test_subtask_weight_is_checked(tmp_path: Path) -> None:
    from homiebot_planner.training.config import TrainConfig

    with pytest.raises(ValueError, match="subtask_weight must be positive"):
        TrainConfig(stage="sft", model=tmp_path, data=tmp_path, output_dir=tmp_path, subtask_weight=0)
    with pytest.raises(ValueError, match="sft stage only"):
        TrainConfig(stage="dpo", model=tmp_path, data=tmp_path, output_dir=tmp_path, subtask_weight=2)


def test_a_subtask_weight_for_a_vision_language_model_is_refused() -> None:
    from types import SimpleNamespace

    from homiebot_planner.training.answer_loss import sft_trainer_class

    vlm = SimpleNamespace(config=SimpleNamespace(vision_config=object()))
    with pytest.raises(ValueError, match="text LMs only"):
        sft_trainer_class(vlm, subtask_weight=3.0)
    assert sft_trainer_class(vlm).__name__ == "SFTTrainer"
