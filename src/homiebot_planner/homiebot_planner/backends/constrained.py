"""Constrained decoding for local transformers models: every answer parses and is valid.

Generation runs in two stages on the same prompt:
1. the prompt plus `Analysis:` is continued freely for at most `analysis_max_tokens` tokens, up to the end of the
   line (the Analysis is free text, only capped);
2. the prompt plus `Analysis: <analysis>\\nSubtask: [` is continued (for text-only models from the first stage's
   key/value cache, so the prompt is not encoded twice) under a logits processor that only allows
   token sequences spelling one of the allowed endings, e.g. `Go to, fridge]\\nModel: NoMaD` followed by the end
   of sequence. The allowed endings are the action list x the names the planner offers (the visible objects, or
   with its `target_names` vocabulary also every name of the alias table; the held object and a receptacle for Put,
   nothing for End) with, for each action, the models that fit it (MODELS_FOR_ACTION).

The allowed endings are tokenized on their own and stored in a token trie; at every step the processor keeps
only the children of the trie node the generated tokens lead to, so sampling (or greedy search) picks exactly
one allowed ending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from emmoe_core.names import normalize
from emmoe_core.protocol import ACTIONS, MODELS_FOR_ACTION

from homiebot_planner.backends.base import DecodingConstraints

ANSWER_OPENING = "Analysis:"
SUBTASK_OPENING = "\nSubtask: ["
_HAND_FULL_FORBIDS = ("Pick", "Open", "Close")
_OBJECT_ACTIONS = ("Pick", "Open", "Close")


def allowed_endings(constraints: DecodingConstraints) -> list[str]:
    """Every allowed continuation after `Subtask: [`, e.g. `Put, apple, fridge]\\nModel: RT-1-X`.

    Targets are the offered names (`constraints.names`) except what the robot holds; Put's object is a held object
    and its place a receptacle or open container (any offered name when no receptacle is known). With `hand_rules`,
    Pick/Open/Close are left out while something is held and Put while nothing is. `End]\\nModel: None` is allowed unless
    `constraints.offered` leaves it out; `offered` narrows the endings to the subtasks and actions it names, unless none
    of those is allowed.
    """
    held = {normalize(name) for name in constraints.held}
    targets = [name for name in dict.fromkeys(constraints.names) if normalize(name) not in held]
    places = list(dict.fromkeys((*constraints.receptacles, *constraints.containers))) or targets
    put_objects = list(dict.fromkeys(constraints.held)) or ([] if constraints.hand_rules else targets)
    endings: list[str] = []
    for action in ACTIONS:
        if action == "End":
            endings.append("End]\nModel: None")
            continue
        if constraints.hand_rules and ((action in _HAND_FULL_FORBIDS and held) or (action == "Put" and not held)):
            continue
        if action == "Put":
            arguments = [f"{thing}, {place}" for thing in put_objects for place in places
                         if normalize(thing) != normalize(place)]
        elif action in _OBJECT_ACTIONS and constraints.object_rules and constraints.receptacles:
            furniture = {normalize(name) for name in constraints.receptacles}
            arguments = [name for name in targets if (normalize(name) in furniture) == (action != "Pick")]
        else:
            arguments = targets
        endings += [f"{action}, {argument}]\nModel: {model}"
                    for argument in arguments for model in MODELS_FOR_ACTION[action]]
    if constraints.repeated:
        repeated = {normalize(subtask) for subtask in constraints.repeated}
        endings = [ending for ending in endings if normalize(_subtask_of(ending)) not in repeated]
    if constraints.offered:
        offered = {normalize(choice) for choice in constraints.offered}
        endings = [ending for ending in endings if {normalize(_subtask_of(ending)),
                                                    normalize(_subtask_of(ending).split(",", 1)[0])} & offered] or endings
    return list(dict.fromkeys(endings))


def _subtask_of(ending: str) -> str:
    """The bracket content an ending completes: `Put, apple, fridge` of `Put, apple, fridge]\\nModel: RT-1-X`."""
    return ending.split("]", 1)[0]


class TokenTrie:
    """A prefix tree of token-id sequences.

    Args:
        sequences: the allowed sequences (each should end with an end-of-sequence id so none is a prefix of another).

    Raises:
        ValueError: when no sequence is given.
    """

    def __init__(self, sequences: Iterable[Sequence[int]]) -> None:
        self._root: dict[int, dict[Any, Any]] = {}
        self.longest = 0
        for sequence in sequences:
            node = self._root
            for token in sequence:
                node = node.setdefault(int(token), {})
            self.longest = max(self.longest, len(sequence))
        if not self._root:
            raise ValueError("a token trie needs at least one non-empty sequence")

    @property
    def root(self) -> dict[int, dict[Any, Any]]:
        """The root node: token id -> child node (a node without children ends a sequence). Do not modify."""
        return self._root

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """The token ids that may follow `prefix` (empty when the prefix left the trie or completed a sequence)."""
        node = self._root
        for token in prefix:
            next_node = node.get(int(token))
            if next_node is None:
                return []
            node = next_node
        return list(node)


def make_trie_processor(trie: TokenTrie, prompt_length: int, fallback_token: int) -> Any:
    """A transformers LogitsProcessor that keeps only the trie's continuations of the generated tokens.

    Args:
        trie: the allowed token sequences.
        prompt_length: number of prompt tokens (generated tokens start after them).
        fallback_token: the only token allowed once a sequence is complete (end of sequence).
    """
    import torch
    from transformers import LogitsProcessor

    class TrieLogitsProcessor(LogitsProcessor):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
            mask = torch.full_like(scores, float("-inf"))
            for row in range(input_ids.shape[0]):
                allowed = trie.allowed(input_ids[row, prompt_length:].tolist()) or [fallback_token]
                mask[row, allowed] = 0.0
            return scores + mask

    return TrieLogitsProcessor()


def make_cancel_criteria(cancel: threading.Event) -> Any:
    """A transformers StoppingCriteria that stops generation once `cancel` is set."""
    import torch
    from transformers import StoppingCriteria

    class CancelCriteria(StoppingCriteria):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.Tensor:
            return torch.full((input_ids.shape[0],), cancel.is_set(), dtype=torch.bool, device=input_ids.device)

    return CancelCriteria()


def sampling_arguments(temperature: float | None) -> dict[str, Any]:
    """generate() arguments for a temperature: greedy at 0, plain sampling otherwise, the model's own generation
    config for None."""
    if temperature is None:
        return {}
    if temperature <= 0:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}


def first_line(text: str) -> str:
    """The analysis text of a free continuation: up to the first line break or `Subtask:` label."""
    line = text.split("\n", 1)[0]
    return line.split("Subtask:", 1)[0].strip()


def constrained_answer(
    model: Any,
    tokenizer: Any,
    encode: Callable[[str], Mapping[str, Any]],
    prompt: str,
    constraints: DecodingConstraints,
    temperature: float | None,
    analysis_max_tokens: int,
    cancel: threading.Event | None = None,
    reuse_cache: bool = False,
) -> str:
    """Generate a three-line answer whose Subtask and Model lines are restricted to the allowed endings.

    Args:
        model: a transformers generation model.
        tokenizer: its tokenizer (for the endings and decoding).
        encode: turns prompt text into the model's input tensors (adds images for multimodal models).
        prompt: the chat prompt ending where the assistant's answer starts.
        constraints: what may be chosen.
        temperature: sampling temperature (0: greedy).
        analysis_max_tokens: cap on the Analysis tokens; 0 for a model trained to answer with the decision only,
            which is then decoded right after `Subtask: [` (the answer's Analysis line stays empty).
        cancel: stops generation early when set.
        reuse_cache: continue the second stage from the first stage's key/value cache instead of encoding the
            prompt again (saves one prompt pass; for text-only models, whose inputs are token ids alone).

    Returns:
        `Analysis: ...\\nSubtask: [...]\\nModel: ...`.
    """
    import torch

    eos = eos_token_id(tokenizer, model)
    common: dict[str, Any] = {"pad_token_id": eos, **sampling_arguments(temperature)}
    if cancel is not None:
        from transformers import StoppingCriteriaList

        common["stopping_criteria"] = StoppingCriteriaList([make_cancel_criteria(cancel)])
    if analysis_max_tokens == 0:
        answer_prefix = ANSWER_OPENING + SUBTASK_OPENING
        second_inputs: dict[str, Any] = dict(encode(prompt + SUBTASK_OPENING.lstrip("\n")))
        return answer_prefix + _constrained_ending(model, tokenizer, second_inputs, constraints, eos, common)
    inputs = encode(prompt + ANSWER_OPENING)
    prompt_length = inputs["input_ids"].shape[1]
    first = model.generate(**inputs, max_new_tokens=analysis_max_tokens, stop_strings=["\n"], tokenizer=tokenizer,
                           return_dict_in_generate=True, **common)
    generated = first.sequences[0, prompt_length:].tolist()
    if reuse_cache:
        # The cache holds every token but the last generated one; drop at most that one (an end of sequence).
        kept = generated[:-1] if generated and generated[-1] == eos else generated
        analysis_text = tokenizer.decode(kept, skip_special_tokens=True)
        opening = SUBTASK_OPENING.lstrip("\n") if "\n" in analysis_text else SUBTASK_OPENING
        answer_prefix = ANSWER_OPENING + analysis_text + opening
        suffix = tokenizer(opening, add_special_tokens=False)["input_ids"]
        device = first.sequences.device
        input_ids = torch.cat([first.sequences[:, :prompt_length], torch.tensor([kept + suffix], device=device)], 1)
        second_inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "cache": first.cache}
    else:
        answer_prefix = f"{ANSWER_OPENING} {first_line(tokenizer.decode(generated, skip_special_tokens=True))}" \
                        f"{SUBTASK_OPENING}"
        second_inputs = dict(encode(prompt + answer_prefix))
    return str(answer_prefix + _constrained_ending(model, tokenizer, second_inputs, constraints, eos, common))


def _constrained_ending(model: Any, tokenizer: Any, inputs: dict[str, Any], constraints: DecodingConstraints,
                        eos: int, common: dict[str, Any]) -> str:
    """The allowed ending that generation under the trie mask picks after `inputs` (which end with `Subtask: [`)."""
    from transformers import LogitsProcessorList

    by_tokens = {tuple(tokenizer(ending, add_special_tokens=False)["input_ids"]): ending
                 for ending in allowed_endings(constraints)}
    trie = TokenTrie([*tokens, eos] for tokens in by_tokens)
    prompt_length = inputs["input_ids"].shape[1]
    output = model.generate(**inputs, max_new_tokens=trie.longest,
                            logits_processor=LogitsProcessorList([make_trie_processor(trie, prompt_length, eos)]),
                            **common)
    chosen = output[0, prompt_length:].tolist()
    if eos in chosen:
        chosen = chosen[:chosen.index(eos)]
    # The exact allowed string (decoding could normalise spaces); a cancelled run may leave a partial one.
    return str(by_tokens.get(tuple(chosen)) or tokenizer.decode(chosen, skip_special_tokens=True))


def with_analysis_line(answer: str) -> str:
    """A decision-only answer (`Subtask: ...\nModel: ...`) with the empty Analysis line in front, so that it has the
    three-line format every parser reads; an answer that has its Analysis line is returned as it is."""
    return answer if answer.lstrip().startswith(ANSWER_OPENING) else f"{ANSWER_OPENING}\n{answer}"


def eos_token_id(tokenizer: Any, model: Any) -> int:
    """The end-of-sequence id of a tokenizer (or, failing that, of the model's generation config).

    Raises:
        ValueError: when neither defines one.
    """
    candidates = [tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)]
    for candidate in candidates:
        if isinstance(candidate, list) and candidate:
            return int(candidate[0])
        if isinstance(candidate, int):
            return candidate
    raise ValueError("the tokenizer and the model define no end-of-sequence token; constrained decoding needs one")
