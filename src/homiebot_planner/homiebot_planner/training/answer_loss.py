"""The SFT trainer class: trl's SFTTrainer, with a leaner loss for text LMs (answer positions only)."""

from __future__ import annotations

from typing import Any


def sft_trainer_class(model: Any) -> type:
    """`answer_only_sft_trainer()` for text LMs, trl's SFTTrainer for vision-language models."""
    if hasattr(model.config, "vision_config"):
        from trl import SFTTrainer

        return SFTTrainer
    return answer_only_sft_trainer()


def answer_only_sft_trainer() -> type:
    """trl's SFTTrainer with a leaner loss for text LMs: the output head runs only where the answer is predicted.

    trl computes log-probabilities, entropy and top-1 hits over the full vocabulary at every position, prompt
    included, in float32; with a 49k vocabulary and answers a seventh of each sample that was a third of a CPU
    training step. Here the language model's last hidden states are taken where the next token is an answer token,
    and only those go through the head into the cross-entropy (the same loss; the entropy and accuracy metrics are
    not logged).
    """
    import torch
    from trl import SFTTrainer

    class AnswerOnlySFTTrainer(SFTTrainer):  # type: ignore[misc]
        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
            hidden = causal_lm.model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"),
                                     use_cache=False).last_hidden_state
            targets = inputs["labels"][:, 1:]
            predicting = targets != -100
            logits = causal_lm.lm_head(hidden[:, :-1][predicting]).float()
            loss = torch.nn.functional.cross_entropy(logits, targets[predicting], reduction="sum")
            count = predicting.sum() if num_items_in_batch is None else num_items_in_batch
            loss = loss / torch.as_tensor(count, device=loss.device).clamp(min=1)
            return (loss, None) if return_outputs else loss

    return AnswerOnlySFTTrainer
