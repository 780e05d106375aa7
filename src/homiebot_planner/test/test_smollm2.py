"""The smollm2 backend: locating the wheel's GGUF, the dequantized cache, and (slow) a real planner step."""

from __future__ import annotations

from pathlib import Path

import pytest

from homiebot_planner.backends import smollm2
from homiebot_planner.backends.smollm2 import SmolLM2Config, default_cache_dir, locate_gguf, plain_copy


def test_the_wheel_ships_the_gguf() -> None:
    path = locate_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_cache_dir_follows_homiebot_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOMIEBOT_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "smollm2"
    monkeypatch.delenv("HOMIEBOT_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "homiebot" / "smollm2"


def test_copy_is_made_once_and_rebuilt_when_the_gguf_changes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conversions: list[Path] = []

    def fake_dequantize(gguf: Path, destination: Path) -> None:
        conversions.append(gguf)
        (destination / "model.safetensors").write_bytes(gguf.read_bytes())

    monkeypatch.setattr(smollm2, "_dequantize", fake_dequantize)
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"v1")
    cache = tmp_path / "cache" / "smollm2"
    assert plain_copy(cache, gguf) == cache and plain_copy(cache, gguf) == cache
    assert len(conversions) == 1 and (cache / "model.safetensors").read_bytes() == b"v1"
    gguf.write_bytes(b"v2 longer")
    plain_copy(cache, gguf)
    assert len(conversions) == 2 and (cache / "model.safetensors").read_bytes() == b"v2 longer"
    assert sorted(path.name for path in cache.parent.iterdir()) == ["smollm2"]  # no staging folders left


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="analysis_max_tokens"):
        SmolLM2Config(analysis_max_tokens=0)
    with pytest.raises(ValueError, match="num_threads"):
        SmolLM2Config(num_threads=-1)


@pytest.mark.slow
def test_smollm2_plans_a_valid_step_from_text() -> None:
    from homiebot_planner.backends.smollm2 import SmolLM2Backend
    from homiebot_planner.planner import Observation, Planner, PlannerConfig

    backend = SmolLM2Backend(SmolLM2Config(num_threads=2))
    assert backend.observation_mode == "text" and backend.config.constrained
    planner = Planner(backend, "put the apple in the fridge", PlannerConfig(in_context_example=True))
    observation = Observation(visible={"front": ["013_apple", "frl_apartment_table_01"],
                                       "left": ["frl_apartment_refrigerator"]})
    decision = planner.decide(observation)
    assert decision.valid and decision.samples == 1 and decision.parsed is not None
    assert decision.subtask.action == "End" or decision.subtask.target in ("apple", "table", "fridge")


@pytest.mark.slow
def test_fast_path_answers_like_the_generate_path() -> None:
    from dataclasses import replace

    from homiebot_planner.backends import GenerationRequest
    from homiebot_planner.backends.smollm2 import SmolLM2Backend
    from homiebot_planner.planner import Observation, Planner, PlannerConfig

    backend = SmolLM2Backend(SmolLM2Config(num_threads=2))
    assert backend.config.prefix_cache and backend.fast.supported
    scenes = [("put the apple in the fridge", {"front": ["013_apple", "frl_apartment_table_01"],
                                               "left": ["frl_apartment_refrigerator"]}),
              ("go to the sofa", {"back": ["frl_apartment_sofa"], "front": ["frl_apartment_table_01"]})]
    requests = []
    for task, visible in scenes:
        planner = Planner(backend, task, PlannerConfig(in_context_example=True, temperature=0.0))
        observation = Observation(visible=visible)
        requests.append(GenerationRequest(messages=planner.messages(observation, planner.user_message(observation)),
                                          temperature=0.0, constraints=planner.constraints(observation)))
    answers = {}
    for prefix_cache in (False, True):
        backend.config = replace(backend.config, prefix_cache=prefix_cache)
        answers[prefix_cache] = [backend.generate(request) for request in (*requests, requests[0])]
    assert answers[True] == answers[False]
    assert answers[True][0] == answers[True][2]  # a re-sample after another prompt: the cache was not corrupted
