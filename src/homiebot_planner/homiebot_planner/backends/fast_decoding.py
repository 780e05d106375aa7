"""Fast local decoding: prefix reuse for every sample, and constrained answers decoded by walking the token trie.

`FastDecoding` gives text LMs the answers of `constrained.constrained_answer` (the same distribution when sampling;
under greedy decoding identical on every bench state and test model, as the only difference is that tokens are
encoded in longer passes, which changes floating-point rounding, not the computation) at a fraction of the cost
(VLMs: the old path encodes the prompt again after the Analysis, as text; the fast path keeps the Analysis tokens):
- the prompt's constant start comes from a `PrefixCache` (see prefix_cache.py), so a step encodes only its new turn
  and a re-sample encodes nothing but its last prompt token;
- the Analysis is decoded by a loop over one private key/value cache (no generate() set-up per call) that checks a
  guess copied from the prompt in the same pass (prompt lookup; only what the model itself picks is kept), and
  stops, as before, at the first token containing a line break, at the end of sequence or at the cap;
- the Subtask/Model ending is found by walking the trie of allowed endings: a token that is the only allowed
  continuation is taken without asking the model, and a run of such tokens is encoded in one forward pass right
  before the next real choice. At each choice the token is picked from the allowed children only, with the same
  rule generate() applies under the old logits mask: greedy (the highest logit, ties to the lowest id) at
  temperature 0, otherwise a sample from the softmax of the allowed logits divided by the temperature.

`FastDecoding.generate` is generate() for unconstrained answers, started from the prefix cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from homiebot_planner.backends.base import DecodingConstraints
from homiebot_planner.backends.constrained import (
    ANSWER_OPENING,
    SUBTASK_OPENING,
    TokenTrie,
    allowed_endings,
    eos_token_id,
)
from homiebot_planner.backends.prefix_cache import IncrementalDecoder, PrefixCache, reusable_model

# Multimodal model types whose language model takes plain 1-D positions, so a cached text prefix can be continued
# with the images in the new turn (Qwen2-VL's 3-D rotary positions, for example, cannot).
PREFIX_VLM_TYPES = ("llava", "llava_next", "video_llava")
_IMAGE_TOKEN_FIELDS = ("image_token_id", "image_token_index", "video_token_id", "video_token_index")
_ENDING_MEMO_LIMIT = 4096
# Prompt lookup in the Analysis: guesses of up to DRAFT_TOKENS tokens after a repeated LOOKUP_NGRAM-token sequence.
DRAFT_TOKENS = 8
LOOKUP_NGRAM = 3
# Generation-config fields that make generate() process logits beyond temperature, top-k and top-p; a model whose
# config sets any of them keeps the generate() path, so that its answers stay what they were.
_OTHER_LOGITS_PROCESSING = (
    "repetition_penalty", "encoder_repetition_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "suppress_tokens", "begin_suppress_tokens", "sequence_bias", "min_length", "min_new_tokens",
    "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "forced_bos_token_id", "forced_eos_token_id",
    "exponential_decay_length_penalty", "guidance_scale", "watermarking_config", "top_h",
)


@dataclass(frozen=True)
class SamplingRule:
    """How a token is picked from logits.

    Attributes:
        temperature: 0 is greedy; otherwise logits are divided by it and sampled.
        top_k: keep only the k most likely tokens before sampling (0: all).
        top_p: keep the smallest set of tokens whose probability reaches p before sampling (1: all).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @classmethod
    def for_request(cls, temperature: float | None, generation_config: Any) -> SamplingRule:
        """The rule generate() applies for a request's temperature (`constrained.sampling_arguments`): greedy at 0,
        plain sampling otherwise, and for None the model's generation config (greedy unless it samples)."""
        if temperature is not None:
            return cls(temperature=max(float(temperature), 0.0))
        if not getattr(generation_config, "do_sample", False):
            return cls()
        return cls(temperature=float(getattr(generation_config, "temperature", None) or 1.0),
                   top_k=int(getattr(generation_config, "top_k", None) or 0),
                   top_p=float(getattr(generation_config, "top_p", None) or 1.0))

    def choose(self, logits: Any, allowed: Sequence[int] | None = None) -> int:
        """A token id from 1-D logits, among `allowed` only when given."""
        import torch

        candidates = sorted(int(token) for token in allowed) if allowed is not None else None
        scores = logits if candidates is None else logits[torch.tensor(candidates, device=logits.device)]
        if self.temperature <= 0:
            pick = int(torch.argmax(scores))
        else:
            scores = (scores / self.temperature)[None]
            if self.top_k:
                from transformers import TopKLogitsWarper

                scores = TopKLogitsWarper(self.top_k)(None, scores)
            if self.top_p < 1.0:
                from transformers import TopPLogitsWarper

                scores = TopPLogitsWarper(self.top_p)(None, scores)
            pick = int(torch.multinomial(torch.softmax(scores[0], dim=-1), 1))
        return candidates[pick] if candidates is not None else pick


class TokenTables:
    """Per-tokenizer lookups, made once: the tokens that contain a line break, and the ids of texts (memoised, as the
    same allowed endings recur every step)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._line_breaks: frozenset[int] | None = None
        self._ids: dict[str, tuple[int, ...]] = {}

    @property
    def line_breaks(self) -> frozenset[int]:
        """Token ids whose text contains "\\n" (where generate()'s stop string "\\n" stops)."""
        if self._line_breaks is None:
            texts = self.tokenizer.batch_decode([[token] for token in range(len(self.tokenizer))])
            self._line_breaks = frozenset(token for token, text in enumerate(texts) if "\n" in text)
        return self._line_breaks

    def ids(self, text: str) -> tuple[int, ...]:
        """The token ids of `text` on its own (no special tokens)."""
        known = self._ids.get(text)
        if known is None:
            if len(self._ids) >= _ENDING_MEMO_LIMIT:
                self._ids.clear()
            known = self._ids[text] = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return known


def prompt_lookup(tokens: Sequence[int], limit: int) -> list[int]:
    """A guess of the next tokens: what followed the latest earlier occurrence of the last 3 (or else 2) tokens.

    Untuned models copy a lot from their prompt (the in-context example, the task, the history), so such guesses
    are often right; checking one costs about as much as decoding a single token.
    """
    if limit <= 0:
        return []
    for size in range(min(LOOKUP_NGRAM, len(tokens) - 1), 1, -1):
        tail = list(tokens[-size:])
        for start in range(len(tokens) - size - 1, -1, -1):
            if tokens[start] == tail[0] and list(tokens[start:start + size]) == tail:
                return [int(token) for token in tokens[start + size:start + size + limit]]
    return []


def plain_sampling(generation_config: Any) -> bool:
    """Whether generate() would change logits only by temperature, top-k and top-p under this generation config."""
    from transformers import GenerationConfig

    default = GenerationConfig()  # type: ignore[no-untyped-call]
    return all(getattr(generation_config, field, None) == getattr(default, field, None)
               for field in _OTHER_LOGITS_PROCESSING)


def image_tokens(model: Any) -> set[int]:
    """The image/video placeholder token ids named by a multimodal model's config."""
    config = model.config
    return {int(value) for field in _IMAGE_TOKEN_FIELDS if isinstance(value := getattr(config, field, None), int)}


class FastDecoding:
    """Prefix-reusing decoding for one loaded model.

    Args:
        model: a transformers causal LM or LLaVA-family VLM (or a PEFT model on one).
        tokenizer: its tokenizer.
        multimodal: whether the model takes images.

    Attributes:
        supported: whether this model can take the fast path (full-attention caches, plain 1-D positions, no logits
            processing in its generation config beyond temperature, top-k and top-p); the hf backend uses the
            generate() path otherwise.
    """

    def __init__(self, model: Any, tokenizer: Any, multimodal: bool = False) -> None:
        self.model = model
        self.tables = TokenTables(tokenizer)
        self.prefix = PrefixCache(model, image_tokens(model) if multimodal else ())
        model_type = getattr(model.config, "model_type", "")
        self.supported = (reusable_model(model) and (not multimodal or model_type in PREFIX_VLM_TYPES)
                          and plain_sampling(model.generation_config))
        if self.supported:
            _ = self.tables.line_breaks  # one decode per vocabulary entry: done at load time, not in a step

    def constrained_answer(self, encode: Callable[[str], Mapping[str, Any]], prompt: str,
                           constraints: DecodingConstraints, rule: SamplingRule, analysis_max_tokens: int,
                           cancel: threading.Event | None = None) -> str:
        """A three-line answer whose Subtask and Model lines are one of the allowed endings.

        Args:
            encode: turns prompt text into the model's input tensors (adds images for multimodal models).
            prompt: the chat prompt ending where the assistant's answer starts.
            constraints: what may be chosen.
            rule: how tokens are picked.
            analysis_max_tokens: cap on the Analysis tokens; 0 for a model trained to answer with the decision only
                (decoded right after `Subtask: [`; the answer's Analysis line stays empty).
            cancel: stops decoding early when set (the answer may then be cut short).

        Returns:
            `Analysis: ...\\nSubtask: [...]\\nModel: ...`.
        """
        tokenizer = self.tables.tokenizer
        eos = eos_token_id(tokenizer, self.model)
        decision_only = analysis_max_tokens == 0
        inputs = encode(prompt + (SUBTASK_OPENING.lstrip("\n") if decision_only else ANSWER_OPENING))
        extra = {name: value for name, value in inputs.items() if name not in ("input_ids", "attention_mask")}
        ids = inputs["input_ids"][0].tolist()
        decoder = IncrementalDecoder(self.model, self.prefix, ids, extra)
        analysis_text, opening = "", SUBTASK_OPENING
        if not decision_only:
            analysis = self._analysis(decoder, ids, rule, analysis_max_tokens, eos, cancel)
            analysis_text = tokenizer.decode(analysis, skip_special_tokens=True)
            opening = SUBTASK_OPENING.lstrip("\n") if "\n" in analysis_text else SUBTASK_OPENING
            for token in self.tables.ids(opening):
                decoder.push(token)
        by_tokens = {self.tables.ids(ending): ending for ending in allowed_endings(constraints)}
        node = TokenTrie([*tokens, eos] for tokens in by_tokens).root
        chosen: list[int] = []
        while node and not (cancel is not None and cancel.is_set()):
            token = next(iter(node)) if len(node) == 1 else rule.choose(decoder.logits(), list(node))
            if token == eos:
                break
            chosen.append(token)
            decoder.push(token)
            node = node[token]
        # The exact allowed string (decoding could normalise spaces); a cancelled run may leave a partial one.
        ending = by_tokens.get(tuple(chosen)) or tokenizer.decode(chosen, skip_special_tokens=True)
        return f"{ANSWER_OPENING}{analysis_text}{opening}{ending}"

    def _analysis(self, decoder: IncrementalDecoder, prompt: list[int], rule: SamplingRule, cap: int, eos: int,
                  cancel: threading.Event | None) -> list[int]:
        """The free Analysis tokens: up to the first token with a line break (kept), the end of sequence (not kept)
        or `cap` tokens. Each pass also checks a guess copied from the prompt (prompt lookup): every position's
        token is picked by `rule` as in a plain loop, and the guess is kept only as far as the picks agree with it,
        so the answer is the plain loop's (and sampling draws the same distributions, in the same order)."""
        analysis: list[int] = []
        while len(analysis) < cap:
            # Right after the prompt the next token's logits are known: a guess would only cost a pass.
            limit = 0 if decoder.has_logits else min(DRAFT_TOKENS, cap - len(analysis) - 1)
            draft = prompt_lookup([*prompt, *analysis], limit)
            rows = decoder.draft_logits(draft) if draft else decoder.logits()[None]
            confirmed, finished, correction = 0, False, None
            for row, guess in zip(rows, [*draft, None]):
                token = rule.choose(row)
                if token == eos:
                    finished = True
                    break
                analysis.append(token)
                finished = (token in self.tables.line_breaks or len(analysis) >= cap
                            or (cancel is not None and cancel.is_set()))
                if token != guess:
                    correction = token  # not in the cache yet
                    break
                confirmed += 1
                if finished:
                    break
            decoder.rewind(len(draft) - confirmed)
            if correction is not None:
                decoder.push(correction)
            if finished:
                break
        return analysis

    def generate(self, inputs: Mapping[str, Any], **options: Any) -> Any:
        """model.generate(**inputs, **options) started from the prefix cache; returns the sequences."""
        ids = inputs["input_ids"][0].tolist()
        cache, _ = self.prefix.start(ids)
        if cache is not None:
            options["cache"] = cache
        output = self.model.generate(**inputs, return_dict_in_generate=True, **options)
        self.prefix.keep(ids, output.cache)
        return output.sequences
