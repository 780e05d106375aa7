"""Prefix reuse for local transformers models: encode the constant start of a prompt once, not on every step.

The planner's prompts share a long constant start: the system prompt and the in-context example, then the fixed
start of every user turn. `PrefixCache` keeps the key/value cache of the last prompt it saw, keyed by its token ids;
a new prompt gets a private copy of that cache cut to the longest common token prefix (at most all but its last
token, so the model still has a token to produce logits from) and encodes only the rest. Re-samples of a step reuse
the whole prompt. The stored tensors are never handed out (`start` gives copies), so nothing a step generates can
leak into the next.

For multimodal models the reusable part ends before the first image token: the keys and values of image positions
depend on the pixels, which token ids do not show.

`IncrementalDecoder` feeds tokens to the model over such a private cache and returns next-token logits, queuing
tokens that need no logits so that a run of forced tokens costs one forward pass; it also checks a run of guessed
(draft) tokens in one pass and drops the rejected ones from the cache again.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any


def reusable_model(model: Any) -> bool:
    """Whether the model's key/value cache can be cut to a prefix: plain full-attention layers only (no sliding
    windows, no recurrent or shared state), as transformers' DynamicCache lays them out for its config."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    config = getattr(model, "config", None)
    if config is None:
        return False
    try:
        layers = DynamicCache(config=config).layers
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _keeps_last_logits_only(model: Any) -> bool:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


def copy_prefix(layers: Iterable[Sequence[Any]], length: int, config: Any) -> Any:
    """A new DynamicCache holding copies of the first `length` positions of each layer's (keys, values, ...)."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=[(keys[..., :length, :], values[..., :length, :])
                                        for keys, values, *_ in layers], config=config)


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading token ids two sequences share."""
    length = 0
    for left, right in zip(first, second):
        if left != right:
            break
        length += 1
    return length


class PrefixCache:
    """The key/value cache of the last prompt, reused for the longest common prefix of the next prompt.

    Args:
        model: the transformers model whose caches these are.
        barrier_tokens: token ids the reusable prefix must stop before (a multimodal model's image tokens).

    Attributes:
        reused_tokens: prompt tokens taken from the cache so far (for benchmarks).
        encoded_tokens: prompt tokens encoded so far.
    """

    def __init__(self, model: Any, barrier_tokens: Collection[int] = ()) -> None:
        self.model = model
        self.barrier_tokens = frozenset(int(token) for token in barrier_tokens)
        self.enabled = reusable_model(model)
        self._ids: tuple[int, ...] = ()
        self._layers: list[tuple[Any, Any]] = []
        self.reused_tokens = 0
        self.encoded_tokens = 0

    def _reusable_length(self, ids: Sequence[int]) -> int:
        for index, token in enumerate(ids):
            if token in self.barrier_tokens:
                return index
        return len(ids)

    def start(self, ids: Sequence[int]) -> tuple[Any, int]:
        """A private cache for a prompt: (DynamicCache holding its first `length` tokens or None, `length`).

        `length` is at most len(ids) - 1; the caller encodes ids[length:] on top of the cache.
        """
        length = 0
        if self.enabled and self._layers:
            length = min(common_prefix_length(self._ids, ids), self._reusable_length(ids), len(ids) - 1)
        self.reused_tokens += length
        self.encoded_tokens += len(ids) - length
        if length <= 0:
            return None, 0
        return copy_prefix(self._layers, length, self.model.config), length

    def keep(self, ids: Sequence[int], cache: Any) -> None:
        """Remember `cache` (which holds at least the prompt `ids`, maybe more) as the prompt's cache.

        Only references are kept: a DynamicLayer grows by concatenation into new tensors and never writes into the
        ones it had, so later passes over `cache` leave them as they are (and `start` hands out copies).
        """
        if not self.enabled or cache is None:
            return
        length = min(len(ids), self._reusable_length(ids), cache.get_seq_length())
        if length <= 0:
            return
        self._ids = tuple(int(token) for token in ids[:length])
        self._layers = [(keys[..., :length, :], values[..., :length, :]) for keys, values, *_ in cache]


class IncrementalDecoder:
    """A causal LM over a private key/value cache: feed tokens, read the next-token logits.

    Args:
        model: the transformers model.
        prefix: where the prompt's reusable start comes from (and where the prompt's cache is stored).
        ids: the prompt's token ids.
        extra_inputs: other model inputs of the prompt (pixel values, image sizes); given to the first pass only.
    """

    def __init__(self, model: Any, prefix: PrefixCache, ids: Sequence[int],
                 extra_inputs: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self._last_only = _keeps_last_logits_only(model)
        self.cache, reused = prefix.start(ids)
        self._extra = dict(extra_inputs or {})
        self._pending: list[int] = [int(token) for token in ids[reused:]]
        self._logits: Any = None
        self.logits()
        prefix.keep(ids, self.cache)

    @property
    def has_logits(self) -> bool:
        """Whether the next-token logits are known without another pass (nothing queued since the last one)."""
        return self._logits is not None

    def push(self, token: int) -> None:
        """Queue a token; it is encoded with the next `logits()` or `draft_logits()` call."""
        self._pending.append(int(token))
        self._logits = None

    def logits(self) -> Any:
        """Next-token logits (float32, 1-D) after everything pushed so far; one forward pass over queued tokens."""
        if self._logits is None:
            self._logits = self._encode(self._pending, 1)[0]
        return self._logits

    def draft_logits(self, draft: Sequence[int]) -> Any:
        """Encode the queued tokens and then `draft`, in one pass: logits (float32, (1 + len(draft)) x vocabulary)
        after everything pushed and after each draft token. The cache then holds the draft; `rewind` drops the
        part of it that is not kept."""
        import torch

        if self._logits is not None:  # nothing queued: the first row is known already
            return torch.cat([self._logits[None], self._encode(draft, len(draft))])
        return self._encode([*self._pending, *draft], len(draft) + 1)

    def rewind(self, count: int) -> None:
        """Drop the last `count` encoded tokens from the cache (draft tokens that were not accepted)."""
        if count > 0:
            self.cache.crop(-count)
            self._logits = None

    def _encode(self, tokens: Sequence[int], rows: int) -> Any:
        import torch

        options: dict[str, Any] = {"use_cache": True, **self._extra}
        if self._last_only:
            options["logits_to_keep"] = rows
        if self.cache is not None:
            options["cache"] = self.cache
        output = self.model(input_ids=torch.tensor([list(tokens)], device=self.model.device), **options)
        self.cache = output.cache
        self._extra = {}
        self._pending = []
        self._logits = None
        return output.logits[0, -rows:].float()
