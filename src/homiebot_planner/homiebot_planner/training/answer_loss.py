"""The SFT trainer class: trl's SFTTrainer, with a leaner loss for text LMs (answer positions only) that can weight
the subtask's tokens (the action and its object or place, inside the answer's brackets) above the rest."""

from __future__ import annotations

from typing import Any


def sft_trainer_class(model: Any, subtask_weight: float = 1.0) -> type:
    """`answer_only_sft_trainer(subtask_weight)` for text LMs, trl's SFTTrainer for vision-language models."""
    if hasattr(model.config, "vision_config"):
        if subtask_weight != 1.0:
            raise ValueError("subtask_weight is supported for text LMs only")
        from trl import SFTTrainer

        return SFTTrainer
    return answer_only_sft_trainer(subtask_weight)


def bracket_token_ids(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Ids of the vocabulary's tokens that contain an opening and a closing square bracket."""
    opening, closing = [], []
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id])
        if "[" in text:
            opening.append(token_id)
        if "]" in text:
            closing.append(token_id)
    return opening, closing


def subtask_mask(targets: Any, opening: Any, closing: Any) -> Any:
    """Per target position (batch, length): True from a token with `[` to the next token with `]`, both included."""
    import torch

    opens = torch.isin(targets, opening).long()
    closes = torch.isin(targets, closing).long()
    depth_before = torch.cumsum(opens - closes, dim=-1) - opens + closes
    return (depth_before > 0) | (opens > 0)


def answer_only_sft_trainer(subtask_weight: float = 1.0) -> type:
    """trl's SFTTrainer with a leaner loss for text LMs: the output head runs only where the answer is predicted.

    trl computes log-probabilities, entropy and top-1 hits over the full vocabulary at every position, prompt
    included, in float32; with a 49k vocabulary and answers a seventh of each sample that was a third of a CPU
    training step. Here the language model's last hidden states are taken where the next token is an answer token,
    and only those go through the head into the cross-entropy (the same loss; the entropy and accuracy metrics are
    not logged). With `subtask_weight` w != 1, the tokens of the answer's `[action, object]` count w times in the
    loss (the normaliser stays the number of answer tokens): the names a plan turns on weigh more than the format.
    """
    import torch
    from trl import SFTTrainer

    class AnswerOnlySFTTrainer(SFTTrainer):  # type: ignore[misc]
        _brackets: tuple[Any, Any] | None = None

        def _bracket_ids(self, device: Any) -> tuple[Any, Any]:
            if self._brackets is None:
                opening, closing = bracket_token_ids(self.processing_class)
                self._brackets = (torch.tensor(opening, device=device), torch.tensor(closing, device=device))
            return self._brackets

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
            hidden = causal_lm.model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"),
                                     use_cache=False).last_hidden_state
            targets = inputs["labels"][:, 1:]
            predicting = targets != -100
            logits = causal_lm.lm_head(hidden[:, :-1][predicting]).float()
            losses = torch.nn.functional.cross_entropy(logits, targets[predicting], reduction="none")
            if subtask_weight != 1.0:
                weights = torch.where(subtask_mask(targets, *self._bracket_ids(targets.device)), subtask_weight, 1.0)
                losses = losses * weights[predicting]
            count = predicting.sum() if num_items_in_batch is None else num_items_in_batch
            loss = losses.sum() / torch.as_tensor(count, device=losses.device).clamp(min=1)
            return (loss, None) if return_outputs else loss

    return AnswerOnlySFTTrainer
