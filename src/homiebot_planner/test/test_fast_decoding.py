"""The fast path of local models: prefix reuse, the trie walk, identical greedy answers to the generate() path, no
cache corruption across steps and re-samples, and the sampling rule's distribution. Tiny models built from config."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
import numpy as np
import pytest

from homiebot_planner.backends import GenerationRequest, HFConfig
from homiebot_planner.backends import fast_decoding
from homiebot_planner.backends.base import BackendError
from homiebot_planner.backends.fast_decoding import FastDecoding, SamplingRule, prompt_lookup
from homiebot_planner.backends.hf import HFBackend
from homiebot_planner.backends.prefix_cache import (
    IncrementalDecoder,
    PrefixCache,
    common_prefix_length,
    reusable_model,
)
from homiebot_planner.parsing import is_valid, parse_output
from homiebot_planner.planner import Observation, Planner, PlannerConfig

VIEWS = ("front", "left", "back", "right")
# Hand-made observations with different visible objects and hands, so consecutive prompts differ.
SCENES: tuple[tuple[str, dict[str, list[str]], tuple[str, ...]], ...] = (
    ("put the apple in the fridge", {"front": ["013_apple", "frl_apartment_refrigerator"]}, ()),
    ("put the apple in the fridge", {"front": ["frl_apartment_refrigerator"], "left": ["frl_apartment_sofa"]},
     ("apple",)),
    ("go to the sofa", {"back": ["frl_apartment_sofa"], "front": ["frl_apartment_table_01", "013_apple"]}, ()),
)


def _images(seed: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(seed)
    return {view: generator.integers(0, 255, (64, 64, 3), dtype=np.uint8) for view in VIEWS}


def _request(backend: HFBackend, scene: int, temperature: float = 0.0, image_seed: int = 0) -> GenerationRequest:
    task, visible, held = SCENES[scene]
    planner = Planner(backend, task, PlannerConfig(in_context_example=True, temperature=temperature))
    planner.memory.inventory.extend(held)
    observation = Observation(images=_images(image_seed), visible=visible)
    return GenerationRequest(messages=planner.messages(observation, planner.user_message(observation)),
                             temperature=temperature, constraints=planner.constraints(observation))


def _answers(backend: HFBackend, order: list[int], prefix_cache: bool,
             image_seeds: list[int] | None = None) -> list[str]:
    backend.config = replace(backend.config, prefix_cache=prefix_cache)
    seeds = image_seeds or [0] * len(order)
    return [backend.generate(_request(backend, scene, image_seed=seed)) for scene, seed in zip(order, seeds)]


def _tiny(tiny_models: dict[str, Path], name: str, constrained: bool = True) -> HFBackend:
    return HFBackend(HFConfig(model_path=str(tiny_models[name]), constrained=constrained, analysis_max_tokens=12))


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0 and common_prefix_length([1, 2], [1, 2]) == 2


def test_only_full_attention_caches_are_reused() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    small = {"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 2, "vocab_size": 50}
    assert reusable_model(LlamaForCausalLM(LlamaConfig(**small)))
    assert not reusable_model(MistralForCausalLM(MistralConfig(sliding_window=8, **small)))


def test_models_with_other_logits_processing_keep_the_generate_path(tiny_models: dict[str, Path]) -> None:
    backend = _tiny(tiny_models, "lm")
    assert backend.fast.supported
    backend.loaded.model.generation_config.repetition_penalty = 1.3
    assert not FastDecoding(backend.loaded.model, backend.loaded.tokenizer).supported


def test_prefix_cache_hands_out_copies_and_stops_at_barriers(tiny_models: dict[str, Path]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models["lm"]).eval()
    prefix = PrefixCache(model, barrier_tokens=[7])
    first = list(range(10, 30))
    with torch.inference_mode():
        decoder = IncrementalDecoder(model, prefix, first)
        stored = [keys.clone() for keys, _, _ in prefix.start(first)[0]]
        for token in (40, 41, 42):  # the private cache grows; the stored prompt must not change
            decoder.push(token)
            decoder.logits()
        assert decoder.cache.get_seq_length() == 23
        assert all(torch.equal(keys, before) for (keys, _, _), before in zip(prefix.start(first)[0], stored))
        cache, length = prefix.start(first[:12] + [99, 98])
        assert length == 12 and cache.get_seq_length() == 12
        assert prefix.start(first)[1] == 19  # the same prompt: all but its last token
        assert prefix.start(first[:5] + [7] + first[6:])[1] == 5  # never past a barrier (image) token
        # Logits over a reused prefix equal those of one pass over the whole prompt.
        second = first[:15] + [50, 51, 52]
        reused = IncrementalDecoder(model, prefix, second).logits()
        full = model(input_ids=torch.tensor([second])).logits[0, -1]
        assert torch.allclose(reused, full, atol=1e-5)


@pytest.mark.parametrize("model", ["lm", "chat_lm", "adapter"])
def test_greedy_answers_are_identical_to_the_generate_path(tiny_models: dict[str, Path], model: str) -> None:
    order = [0, 1, 0, 2, 2, 1]  # new prompts, a repeated prompt (a re-sample) and returns to earlier ones
    backend = _tiny(tiny_models, model)
    assert backend.fast.supported
    old = _answers(backend, order, prefix_cache=False)
    new = _answers(backend, order, prefix_cache=True)
    assert new == old
    assert backend.fast.prefix.reused_tokens > backend.fast.prefix.encoded_tokens  # most of each prompt is reused
    for answer in new:
        parsed = parse_output(answer)
        assert parsed is not None and is_valid(parsed), answer
    # Not corrupted by what came before: a fresh backend answers the last prompt the same way.
    assert _answers(_tiny(tiny_models, model), [order[-1]], prefix_cache=True) == new[-1:]


def test_prompt_lookup_guesses_what_followed_the_last_tokens() -> None:
    tokens = [5, 6, 7, 8, 9, 1, 6, 7, 2, 3, 4, 5, 6, 7]
    assert prompt_lookup(tokens, 3) == [8, 9, 1]  # the last three tokens first
    assert prompt_lookup(tokens[5:], 3) == [2, 3, 4]  # then the last two, latest earlier occurrence
    assert prompt_lookup([1, 2, 3, 9, 2, 3], 4) == [9, 2, 3]
    assert prompt_lookup([1, 2, 3, 4], 4) == [] and prompt_lookup(tokens, 0) == []


@pytest.mark.parametrize("guesses", ["right", "partly wrong"])
def test_checked_guesses_change_nothing_but_the_passes(tiny_models: dict[str, Path], guesses: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _tiny(tiny_models, "lm")
    backend.config = replace(backend.config, analysis_max_tokens=10)
    order = [0, 1, 2]
    old = _answers(backend, order, prefix_cache=False)
    passes: list[int] = []
    backend.loaded.model.register_forward_pre_hook(lambda *_: passes.append(1))
    analyses: list[list[int]] = []
    plain = backend.fast._analysis

    def recorded(*args: Any) -> list[int]:
        analyses.append(plain(*args))
        return analyses[-1]

    for scene, expected in zip(order, old):
        monkeypatch.setattr(fast_decoding, "prompt_lookup", lambda tokens, limit: [])
        monkeypatch.setattr(backend.fast, "_analysis", recorded)
        passes.clear()
        assert _answers(backend, [scene], prefix_cache=True) == [expected]
        without_guesses = len(passes)
        monkeypatch.setattr(backend.fast, "_analysis", plain)
        analysis, prompt = analyses[-1], {"length": 0}

        def oracle(tokens: list[int], limit: int) -> list[int]:
            prompt["length"] = prompt["length"] or len(tokens)  # first asked right after the prompt
            start = len(tokens) - prompt["length"]
            draft = list(analysis[start:start + limit])
            if guesses == "partly wrong" and len(draft) > 2:
                draft[2] = (draft[2] + 1) % len(backend.loaded.tokenizer)
            return draft

        monkeypatch.setattr(fast_decoding, "prompt_lookup", oracle)
        passes.clear()
        assert _answers(backend, [scene], prefix_cache=True) == [expected]
        assert len(passes) <= without_guesses
        if guesses == "right" and len(analysis) > 3:
            assert len(passes) < without_guesses
    assert any(len(analysis) > 3 for analysis in analyses)


def test_unconstrained_generation_reuses_the_prefix_identically(tiny_models: dict[str, Path]) -> None:
    backend = _tiny(tiny_models, "lm", constrained=False)
    requests = [replace(_request(backend, scene), max_new_tokens=10) for scene in (0, 1, 1, 2)]
    backend.config = replace(backend.config, prefix_cache=False)
    old = [backend.generate(request) for request in requests]
    backend.config = replace(backend.config, prefix_cache=True)
    assert [backend.generate(request) for request in requests] == old
    assert backend.fast.prefix.reused_tokens > 0


def test_vlm_reuses_only_the_text_before_the_images(tiny_models: dict[str, Path]) -> None:
    backend = _tiny(tiny_models, "vlm")
    assert backend.fast.supported and backend.fast.prefix.barrier_tokens
    # Same text, different pixels: answers after a warm cache equal those of a fresh backend.
    warm = _answers(backend, [0, 0, 1], prefix_cache=True, image_seeds=[1, 2, 3])
    fresh = [_answers(_tiny(tiny_models, "vlm"), [scene], prefix_cache=True, image_seeds=[seed])[0]
             for scene, seed in ((0, 1), (0, 2), (1, 3))]
    assert warm == fresh
    assert backend.fast.prefix.reused_tokens > 0
    assert all(is_valid(parse_output(answer)) for answer in warm)


def test_sampled_answers_are_valid_and_repeatable_with_a_seed(tiny_models: dict[str, Path]) -> None:
    import torch

    backend = _tiny(tiny_models, "lm")
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append([backend.generate(_request(backend, scene % 3, temperature=1.5)) for scene in range(8)])
    assert runs[0] == runs[1]
    assert all(is_valid(parse_output(answer)) for answer in runs[0])
    assert len({answer.split("Subtask: ")[1] for answer in runs[0]}) > 1


def test_sampling_rule_follows_the_tempered_softmax_of_the_allowed_tokens() -> None:
    import torch

    logits = torch.tensor([3.0, 0.5, 1.0, 9.0, -1.0, 0.0, 2.0, 1.0])
    allowed = [6, 2, 5]
    rule = SamplingRule(temperature=0.7)
    torch.manual_seed(0)
    draws = [rule.choose(logits, allowed) for _ in range(4000)]
    expected = torch.softmax(logits[sorted(allowed)] / 0.7, dim=0).tolist()
    observed = [draws.count(token) / len(draws) for token in sorted(allowed)]
    assert set(draws) <= set(allowed)
    assert all(abs(seen - want) < 0.03 for seen, want in zip(observed, expected)), (observed, expected)
    greedy = SamplingRule()
    assert greedy.choose(logits) == 3 and greedy.choose(logits, allowed) == 6
    assert greedy.choose(logits, [7, 2]) == 2  # a tie goes to the lower id, as generate()'s argmax
    assert SamplingRule(temperature=1.0, top_k=1).choose(logits, allowed) == 6


def test_sampling_rule_for_a_request() -> None:
    from transformers import GenerationConfig

    assert SamplingRule.for_request(0.0, GenerationConfig()) == SamplingRule()
    assert SamplingRule.for_request(0.2, GenerationConfig()) == SamplingRule(temperature=0.2)
    assert SamplingRule.for_request(None, GenerationConfig()) == SamplingRule()
    sampling = GenerationConfig(do_sample=True, temperature=0.7, top_k=5, top_p=0.9)
    assert SamplingRule.for_request(None, sampling) == SamplingRule(temperature=0.7, top_k=5, top_p=0.9)


def test_a_decision_style_checkpoint_answers_without_analysis_on_both_paths(tiny_models: dict[str, Path],
                                                                             tmp_path: Path) -> None:
    import json
    import shutil

    trained = tmp_path / "decision"
    shutil.copytree(tiny_models["adapter"], trained)
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": None, "answer_style": "decision"}))
    backend = _tiny({"decision": trained}, "decision")
    assert backend.analysis_max_tokens == 0
    order = [0, 1, 2, 0]
    old = _answers(backend, order, prefix_cache=False)
    new = _answers(backend, order, prefix_cache=True)
    assert new == old
    for answer in new:
        assert answer.startswith("Analysis:\nSubtask: [")  # the decision comes right after the opening
        parsed = parse_output(answer)
        assert parsed is not None and is_valid(parsed) and parsed.analysis == "", answer
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": None, "answer_style": "essay"}))
    with pytest.raises(BackendError, match="answer_style must be one of analysis, decision, not 'essay'"):
        _tiny({"decision": trained}, "decision")
